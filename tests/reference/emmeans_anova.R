# Reference marginal means and contrasts for tomstats.analysis.contrasts: R's emmeans on
# lm() (a between design, one row per question) and on afex::aov_ez() fits (a within and a
# mixed design; the multivariate model, afex's default emmeans_model).
#
# Usage (from the repository root):
#   Rscript tests/reference/emmeans_anova.R [OUT_JSON]
# OUT_JSON defaults to tests/reference/emmeans_anova.json beside this script. The data are
# simulated here with fixed seeds and written into the JSON with every query and its result;
# tests/analysis/test_contrasts_emmeans.py runs the same queries on the stored data.
#
# Conventions shared with that test:
#   * factors: levels sorted (numbers numerically, text in the C locale);
#   * a query names kind ("emmeans" or "contrast"), specs, by, method (one per factor with
#     interaction), interaction, adjust, level; a contrast's summary is
#     summary(contrast(...), infer = c(TRUE, TRUE), adjust = adjust, level = level);
#   * results are emmeans' summary columns as they are named there.
# Deterministic: same inputs and R package versions give the same file.

suppressPackageStartupMessages({
  library(emmeans)
  library(afex)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
out <- if (length(args) >= 1) args[[1]] else file.path(here, "emmeans_anova.json")
emm_options(msg.interaction = FALSE, msg.nesting = FALSE)
afex_options(emmeans_model = "multivariate")

cfac <- function(x) {
  if (is.numeric(x)) factor(x, levels = sort(unique(x)))
  else factor(x, levels = sort(unique(as.character(x)), method = "radix"))
}

query <- function(kind, specs, by = character(0), method = "pairwise", interaction = FALSE,
                  adjust = NULL, level = 0.95) {
  list(kind = kind, specs = I(specs), by = I(by), method = I(method), interaction = interaction,
       adjust = adjust, level = level)
}

run_query <- function(model, q) {
  rhs <- paste(q$specs, collapse = " * ")
  if (length(q$by)) rhs <- paste(rhs, "|", paste(q$by, collapse = " * "))
  em <- emmeans(model, as.formula(paste("~", rhs)))
  if (q$kind == "emmeans") {
    s <- summary(em, level = q$level)
  } else {
    ct <- if (q$interaction) contrast(em, interaction = q$method) else
      contrast(em, method = q$method)
    s <- summary(ct, infer = c(TRUE, TRUE), adjust = q$adjust, level = q$level)
  }
  d <- as.data.frame(s)
  res <- lapply(d, function(col) I(if (is.factor(col)) as.character(col) else col))
  c(q, list(result = res))
}

cases <- list()

# (1) between: context length (5) x ToM order (3), one row per question, unequal cells
set.seed(3301)
ctx <- c(200, 500, 1000, 2000, 5000)
tom <- c(0, 1, 2)
rows <- list()
for (c in ctx) for (t in tom) {
  n <- sample(8:20, 1)
  p <- plogis(1.2 - 0.7 * t - 0.25 * log(c / 200) + 0.15 * t * log(c / 200) / 2)
  rows[[length(rows) + 1]] <- data.frame(context_words = c, tom_order = t,
                                         correct = rbinom(n, 1, p))
}
d1 <- do.call(rbind, rows)
dd <- d1
dd$context_words <- cfac(dd$context_words)
dd$tom_order <- cfac(dd$tom_order)
m1 <- lm(correct ~ context_words * tom_order, data = dd)
q1 <- list(
  query("emmeans", "tom_order"),
  query("emmeans", "context_words", level = 0.9),
  query("emmeans", "tom_order", by = "context_words"),
  query("emmeans", c("context_words", "tom_order")),
  query("contrast", "tom_order", adjust = "tukey"),
  query("contrast", "tom_order", adjust = "holm"),
  query("contrast", "tom_order", adjust = "bonferroni"),
  query("contrast", "tom_order", adjust = "fdr"),
  query("contrast", "tom_order", adjust = "none", level = 0.9),
  query("contrast", "context_words", adjust = "tukey"),
  query("contrast", "context_words", adjust = "holm"),
  query("contrast", "tom_order", by = "context_words", adjust = "tukey"),
  query("contrast", "context_words", by = "tom_order", adjust = "fdr"),
  query("contrast", c("context_words", "tom_order"), by = character(0), adjust = "holm"),
  query("contrast", "context_words", method = "poly", adjust = "none"),
  query("contrast", "tom_order", method = "poly", adjust = "none"),
  query("contrast", "context_words", by = "tom_order", method = "poly", adjust = "holm"),
  query("contrast", c("tom_order", "context_words"), method = c("pairwise", "pairwise"),
        interaction = TRUE, adjust = "none"),
  query("contrast", c("tom_order", "context_words"), method = c("pairwise", "poly"),
        interaction = TRUE, adjust = "holm")
)
cases[[length(cases) + 1]] <- list(
  name = "between_5x3", model = "lm(correct ~ context_words * tom_order)",
  dv = "correct", between = I(c("context_words", "tom_order")), within = I(character(0)),
  subject = NULL, data = as.list(d1), queries = lapply(q1, function(q) run_query(m1, q)))

# (2) within: 10 LLMs x context length (3) x ToM order (3), 4 questions per cell
set.seed(3302)
ctx <- c(200, 1000, 5000)
rows <- list()
for (s in sprintf("llm%02d", 1:10)) {
  u <- rnorm(1, 0, 0.8)
  su <- rnorm(3, 0, 0.4)
  for (c in seq_along(ctx)) for (t in tom) {
    p <- plogis(1 + u - (0.5 + su[t + 1]) * t - 0.3 * (c - 1))
    rows[[length(rows) + 1]] <- data.frame(model = s, context_words = ctx[c], tom_order = t,
                                           correct = rbinom(4, 1, p))
  }
}
d2 <- do.call(rbind, rows)
m2 <- suppressMessages(aov_ez("model", "correct", d2, within = c("context_words", "tom_order"),
                              fun_aggregate = mean))
q2 <- list(
  query("emmeans", "tom_order"),
  query("emmeans", "tom_order", by = "context_words"),
  query("contrast", "tom_order", adjust = "tukey"),
  query("contrast", "tom_order", adjust = "holm"),
  query("contrast", "context_words", adjust = "bonferroni"),
  query("contrast", "tom_order", by = "context_words", adjust = "holm"),
  query("contrast", "context_words", by = "tom_order", adjust = "tukey"),
  query("contrast", "tom_order", method = "poly", adjust = "none"),
  query("contrast", c("tom_order", "context_words"), method = c("pairwise", "pairwise"),
        interaction = TRUE, adjust = "fdr")
)
cases[[length(cases) + 1]] <- list(
  name = "within_3x3", model = "aov_ez(within = c(context_words, tom_order))",
  dv = "correct", between = I(character(0)), within = I(c("context_words", "tom_order")),
  subject = "model", data = as.list(d2), queries = lapply(q2, function(q) run_query(m2, q)))

# (3) mixed: an LLM family (between, 2 levels: 6 and 8 LLMs) x ToM order (within, 3),
# unequal questions per cell (averaged per LLM x cell first)
set.seed(3303)
rows <- list()
fam <- c(rep("base", 6), rep("chat", 8))
for (i in seq_along(fam)) {
  u <- rnorm(1, 0, 0.7)
  for (t in tom) {
    n <- sample(3:9, 1)
    p <- plogis(0.8 + u - (0.4 + 0.5 * (fam[i] == "base")) * t)
    rows[[length(rows) + 1]] <- data.frame(model = sprintf("m%02d", i), family = fam[i],
                                           tom_order = t, correct = rbinom(n, 1, p))
  }
}
d3 <- do.call(rbind, rows)
m3 <- suppressMessages(aov_ez("model", "correct", d3, between = "family",
                              within = "tom_order", fun_aggregate = mean))
q3 <- list(
  query("emmeans", "family"),
  query("emmeans", "tom_order", by = "family"),
  query("contrast", "family", adjust = "tukey"),
  query("contrast", "tom_order", adjust = "tukey"),
  query("contrast", "tom_order", by = "family", adjust = "bonferroni"),
  query("contrast", "family", by = "tom_order", adjust = "none"),
  query("contrast", c("family", "tom_order"), method = c("pairwise", "poly"),
        interaction = TRUE, adjust = "none")
)
cases[[length(cases) + 1]] <- list(
  name = "mixed_2x3", model = "aov_ez(between = family, within = tom_order)",
  dv = "correct", between = I("family"), within = I("tom_order"), subject = "model",
  data = as.list(d3), queries = lapply(q3, function(q) run_query(m3, q)))

outl <- list(generator = "tests/reference/emmeans_anova.R",
             emmeans_version = as.character(packageVersion("emmeans")),
             afex_version = as.character(packageVersion("afex")),
             r_version = R.version.string, cases = cases)
tmp <- paste0(out, ".tmp")
writeLines(toJSON(outl, auto_unbox = TRUE, digits = NA, null = "null", na = "null"), tmp)
invisible(file.rename(tmp, out))
cat("wrote", out, "\n")
