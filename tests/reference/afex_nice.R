# Reference numbers for tests/analysis/test_anova_afex_table.py: the repeated-measures table
# as afex prints it (nice(): Effect, df, MSE, F, ges, p.value) for two evaluation logs of
# binary answers with the LLMs as subjects.
#
# Generates the logs deterministically (set.seed), fits each with afex::aov_car on the cell
# means per LLM x within cell (fun_aggregate = mean) and writes, for the Greenhouse-Geisser,
# Huynh-Feldt and no correction, afex's anova table (corrected num/den df, MSE, F, ges,
# p) and nice()'s printed strings, with the log itself (as CSV text), to JSON; for the mixed
# design also the generalized eta squared with its between factor observed.
#
#   Rscript tests/reference/afex_nice.R [out.json]   (default: tests/reference/afex_nice.json)
#
# Needs R with afex (Debian: r-cran-afex) and jsonlite.
suppressPackageStartupMessages({
  library(afex)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[[1]] else "tests/reference/afex_nice.json"

# one row per question: LLM, its family (between), context length x ToM order (within),
# `per_cell` questions a cell, correct 0/1 from a logistic model with an LLM intercept and
# LLM-specific context and order slopes (so that sphericity does not hold exactly)
make_log <- function(n_llm, families, contexts, orders, per_cell, seed) {
  set.seed(seed)
  rows <- list()
  for (m in seq_len(n_llm)) {
    fam <- families[(m - 1) %% length(families) + 1]
    u <- rnorm(1, 0, 0.8)
    s_ctx <- rnorm(1, 0, 0.3)
    s_tom <- rnorm(1, 0, 0.4)
    for (ci in seq_along(contexts)) {
      for (t in orders) {
        eta <- 1.2 + u - (0.5 + s_tom) * t - (0.25 + s_ctx) * (ci - 1) +
          (if (fam == "chat") 0.3 * t else 0) + rnorm(1, 0, 0.3)
        y <- rbinom(per_cell, 1, plogis(eta))
        rows[[length(rows) + 1]] <- data.frame(
          model = sprintf("llm%02d", m), family = fam, context_words = contexts[ci],
          tom_order = t, item_id = sprintf("c%d-t%d-q%d", contexts[ci], t, seq_len(per_cell)),
          correct = y)
      }
    }
  }
  do.call(rbind, rows)
}

logs <- list(
  list(name = "within_5x3", n_llm = 10, families = c("base"),
       contexts = c(200, 500, 1000, 2000, 5000), orders = 0:2, per_cell = 8, type = 2,
       between = character(0), within = c("context_words", "tom_order"), seed = 3301),
  list(name = "mixed_family_4x3", n_llm = 11, families = c("base", "chat"),
       contexts = c(200, 1000, 2000, 5000), orders = 0:2, per_cell = 6, type = 3,
       between = c("family"), within = c("context_words", "tom_order"), seed = 3302)
)

table_of <- function(fit, correction) {
  tab <- anova(fit, es = "ges", correction = correction, MSE = TRUE)
  printed <- nice(fit, es = "ges", correction = correction)
  list(
    correction = correction,
    rows = lapply(rownames(tab), function(r) list(
      source = r, num_df = tab[r, "num Df"], den_df = tab[r, "den Df"], MSE = tab[r, "MSE"],
      F = tab[r, "F"], ges = tab[r, "ges"], p = tab[r, "Pr(>F)"])),
    nice = lapply(seq_len(nrow(printed)), function(i) as.list(
      setNames(as.character(unlist(printed[i, ])), names(printed))))
  )
}

results <- list()
for (l in logs) {
  dat <- make_log(l$n_llm, l$families, l$contexts, l$orders, l$per_cell, l$seed)
  for (w in l$within) dat[[w]] <- factor(dat[[w]])
  rhs <- if (length(l$between)) paste(l$between, collapse = " * ") else "1"
  f <- as.formula(sprintf("correct ~ %s + Error(model/(%s))", rhs,
                          paste(l$within, collapse = " * ")))
  fit <- suppressMessages(suppressWarnings(
    aov_car(f, data = dat, type = l$type, fun_aggregate = mean)))
  csv <- paste(capture.output(write.csv(dat, row.names = FALSE, quote = FALSE)),
               collapse = "\n")
  entry <- list(
    name = l$name, type = l$type, between = as.list(l$between), within = as.list(l$within),
    csv = csv,
    tables = lapply(c("GG", "HF", "none"), function(cr) table_of(fit, cr)))
  if (length(l$between)) {
    # generalized eta squared with the between factors observed (measured, not manipulated)
    obs <- anova(fit, es = "ges", correction = "GG", observed = l$between)
    entry$ges_observed <- as.list(setNames(obs[, "ges"], rownames(obs)))
  }
  results[[length(results) + 1]] <- entry
}
meta <- list(
  generated_by = "tests/reference/afex_nice.R",
  R = R.version.string,
  afex = as.character(packageVersion("afex")),
  logs = results
)
writeLines(toJSON(meta, auto_unbox = TRUE, digits = NA, na = "null", pretty = FALSE), out)
cat("wrote", out, "\n")
