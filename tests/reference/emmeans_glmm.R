# Reference marginal means and contrasts for tomstats.glmm.contrasts: R's emmeans on an
# lme4::glmer fit (binomial, Laplace), with the data, fixef() and vcov() of the fit.
#
# Usage (from the repository root):
#   Rscript tests/reference/emmeans_glmm.R [OUT_JSON]
# OUT_JSON defaults to tests/reference/emmeans_glmm.json beside this script. The data are
# simulated here with a fixed seed and written into the JSON; nothing else is read.
#
# Conventions shared with tests/glmm/test_contrasts_glmm.py, which refits the data with
# tomstats.glmm.fit(backend = "laplace") and the case's "tomstats" formula and runs every
# query on the refit and on lme4's own estimates:
#   * ToM order and context length enter as factors (factor() here, C() in tomstats), the
#     numeric covariate x as it is (held at its mean unless a query gives it values);
#   * glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10), as in car_anova.R;
#   * the covariance: lme4's vcov() of this fit is inexact by up to 2e-3 relative (its
#     finite-difference Hessian over (theta, beta) is taken during the fit, with the inner
#     penalised IRLS warm-started and at the fit's tolerance). The script recomputes that
#     Hessian with lme4's own deriv12() on a fresh deviance function with the IRLS tolerance
#     at 1e-13 (stable to 1e-5 for steps 1e-2 to 1e-4), V = 2 H^-1 (the beta block), and
#     gives it to emmeans (vcov. = V); lme4's vcov() is stored too ("vcov_lme4");
#   * a query names kind ("emmeans" or "contrast"), specs, by, method, interaction, adjust,
#     scale ("link"; "response": emmeans' type = "response" for means, regrid() before the
#     contrast for contrasts), at (values of x) and level; link-scale contrasts also store
#     summary(type = "response"): odds ratios.
# Deterministic: same inputs and R package versions give the same file.

suppressPackageStartupMessages({
  library(lme4)
  library(emmeans)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
out <- if (length(args) >= 1) args[[1]] else file.path(here, "emmeans_glmm.json")
emm_options(msg.interaction = FALSE, msg.nesting = FALSE)

query <- function(kind, specs, by = character(0), method = "pairwise", interaction = FALSE,
                  adjust = NULL, scale = "link", at = NULL, level = 0.95) {
  list(kind = kind, specs = I(specs), by = I(by), method = I(method),
       interaction = interaction, adjust = adjust, scale = scale, at = at, level = level)
}

frame <- function(s) {
  d <- as.data.frame(s)
  lapply(d, function(col) I(if (is.factor(col)) as.character(col) else col))
}

run_query <- function(model, V, q) {
  rhs <- paste(q$specs, collapse = " * ")
  if (length(q$by)) rhs <- paste(rhs, "|", paste(q$by, collapse = " * "))
  at <- if (is.null(q$at)) list() else list(x = q$at)
  em <- emmeans(ref_grid(model, at = at, vcov. = V), as.formula(paste("~", rhs)))
  extra <- list()
  if (q$kind == "emmeans") {
    s <- summary(em, level = q$level, type = q$scale)
  } else {
    if (q$scale == "response") em <- regrid(em)
    ct <- if (q$interaction) contrast(em, interaction = q$method) else
      contrast(em, method = q$method)
    s <- summary(ct, infer = c(TRUE, TRUE), adjust = q$adjust, level = q$level)
    if (q$scale == "link")
      extra$ratio <- frame(summary(ct, infer = c(TRUE, TRUE), adjust = q$adjust,
                                   level = q$level, type = "response"))
  }
  c(q, list(result = frame(s)), extra)
}

# ToM order (3) x context length (3) x a numeric covariate, (1 | model): 14 LLMs x 54 rows
set.seed(3304)
n_llm <- 14L
d <- expand.grid(rep = 1:6, tom_order = c(0, 1, 2), context_words = c(200, 1000, 5000),
                 model = sprintf("llm%02d", seq_len(n_llm)))
d$x <- round(rnorm(nrow(d)), 4)
u <- rnorm(n_llm, sd = 0.7)
eta <- 1.1 - 0.6 * d$tom_order - 0.35 * log(d$context_words / 200) +
  0.12 * d$tom_order * log(d$context_words / 200) + 0.3 * d$x +
  u[as.integer(factor(d$model))]
d$correct <- rbinom(nrow(d), 1L, plogis(eta))
d <- d[, c("correct", "tom_order", "context_words", "x", "model")]

m <- suppressMessages(glmer(correct ~ factor(tom_order) * factor(context_words) + x +
                              (1 | model), data = d, family = binomial, nAGQ = 1L,
                            control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10)))
theta <- getME(m, "theta")
dev <- update(m, devFunOnly = TRUE, control = glmerControl(tolPwrss = 1e-13))
H <- lme4:::deriv12(dev, c(theta, fixef(m)), delta = 1e-4)$Hessian
V <- 2 * solve(H)[-seq_along(theta), -seq_along(theta)]
dimnames(V) <- list(names(fixef(m)), names(fixef(m)))
qs <- list(
  query("emmeans", "tom_order"),
  query("emmeans", "tom_order", scale = "response"),
  query("emmeans", "tom_order", by = "context_words", scale = "response", level = 0.9),
  query("emmeans", c("tom_order", "context_words")),
  query("emmeans", "tom_order", by = "x", at = c(-1, 1), scale = "response"),
  query("contrast", "tom_order", adjust = "tukey"),
  query("contrast", "tom_order", adjust = "holm"),
  query("contrast", "tom_order", by = "context_words", adjust = "tukey"),
  query("contrast", "context_words", by = "tom_order", adjust = "fdr"),
  query("contrast", "tom_order", by = "context_words", adjust = "tukey", scale = "response"),
  query("contrast", "tom_order", adjust = "bonferroni", scale = "response"),
  query("contrast", "context_words", method = "poly", adjust = "none"),
  query("contrast", c("tom_order", "context_words"), method = c("pairwise", "pairwise"),
        interaction = TRUE, adjust = "none"),
  query("contrast", c("tom_order", "context_words"), method = c("poly", "pairwise"),
        interaction = TRUE, adjust = "holm")
)
case <- list(
  name = "glmer_3x3_covariate",
  formula = "correct ~ factor(tom_order) * factor(context_words) + x + (1 | model)",
  tomstats = "correct ~ C(tom_order) * C(context_words) + x + (1 | model)",
  coef_names = I(names(fixef(m))), beta = I(unname(fixef(m))),
  vcov = unname(V), vcov_lme4 = unname(as.matrix(vcov(m))), loglik = as.numeric(logLik(m)),
  data = as.list(d), queries = lapply(qs, function(q) run_query(m, V, q)))

outl <- list(generator = "tests/reference/emmeans_glmm.R",
             emmeans_version = as.character(packageVersion("emmeans")),
             lme4_version = as.character(packageVersion("lme4")),
             r_version = R.version.string, cases = list(case))
tmp <- paste0(out, ".tmp")
writeLines(toJSON(outl, auto_unbox = TRUE, digits = NA, null = "null", na = "null"), tmp)
invisible(file.rename(tmp, out))
cat("wrote", out, "\n")
