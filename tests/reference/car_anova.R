# Reference joint tests per term for tomstats' Wald tables (LmeFit / LaplaceFit
# .anova_wald): car::Anova(type = "II") and car::Anova(type = "III") on lme4::glmer fits
# (binomial, Laplace), with the data, fixef() and vcov() of every fit.
#
# Usage (from the repository root):
#   Rscript tests/reference/car_anova.R [OUT_JSON]
# OUT_JSON defaults to tests/reference/car_anova.json beside this script. The data are
# simulated here with fixed seeds and written into the JSON; nothing else is read.
#
# Conventions shared with tests/glmm/test_wald.py, which refits every case with
# tomstats.glmm.fit(backend = "laplace") from the stored data and the case's "tomstats"
# formula:
#   * text columns become factors with levels sorted in the C locale; treatment coding (the
#     first level the reference), or sum coding where the case's "contrasts" says so
#     (contr.sum, which tomstats writes C(f, Sum));
#   * glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10), as in lme4_slopes.R;
#   * vcov(): lme4's default (finite-difference Hessian over (theta, beta)), which is what
#     car::Anova uses.
# Deterministic: same inputs and R package versions give the same file.

suppressPackageStartupMessages({
  library(lme4)
  library(car)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
out <- if (length(args) >= 1) args[[1]] else file.path(here, "car_anova.json")

cfac <- function(x) factor(x, levels = sort(unique(as.character(x)), method = "radix"))

table_of <- function(a) {
  list(terms = I(rownames(a)), chisq = I(unname(a$Chisq)), df = I(unname(a$Df)),
       p = I(unname(a[["Pr(>Chisq)"]])))
}

fit_case <- function(name, description, formula, tomstats, data, factors, contrasts = NULL) {
  dd <- data
  for (f in factors) dd[[f]] <- cfac(dd[[f]])
  ctr <- if (is.null(contrasts)) NULL else
    setNames(rep(list("contr.sum"), length(contrasts)), contrasts)
  m <- suppressMessages(glmer(formula, data = dd, family = binomial, nAGQ = 1L,
                              contrasts = ctr,
                              control = glmerControl(optimizer = "bobyqa",
                                                     tolPwrss = 1e-10)))
  V <- as.matrix(vcov(m))
  cat(sprintf("%-28s n=%5d logLik=%.6f singular=%s\n", name, nrow(dd),
              as.numeric(logLik(m)), isSingular(m)))
  list(name = name, description = description,
       formula = paste(deparse(formula, width.cutoff = 500L), collapse = " "),
       tomstats = tomstats, contrasts = I(if (is.null(contrasts)) character(0) else contrasts),
       coef_names = I(names(fixef(m))), beta = I(unname(fixef(m))),
       vcov = unname(V), loglik = as.numeric(logLik(m)),
       type2 = table_of(Anova(m, type = "II")),
       type3 = table_of(Anova(m, type = "III")),
       data = as.list(data))
}

cases <- list()

# (1) random intercepts: a 3-level condition x a numeric covariate, with their interaction;
# 30 subjects x 24 Bernoulli rows. Fitted twice: treatment coding and sum coding.
set.seed(501)
n_s <- 30L; n_r <- 24L
d <- data.frame(subj = rep(sprintf("s%02d", seq_len(n_s)), each = n_r))
d$cond <- sample(c("a", "b", "c"), nrow(d), replace = TRUE)
d$x <- round(rnorm(nrow(d)), 4)
u <- rnorm(n_s, sd = 0.8)
eff <- c(a = 0, b = 0.5, c = -0.3)
slope <- c(a = 0.4, b = 0.1, c = 0.7)
eta <- -0.2 + eff[d$cond] + slope[d$cond] * d$x + u[as.integer(factor(d$subj))]
d$y <- rbinom(nrow(d), 1L, plogis(eta))
sim1 <- d[, c("y", "cond", "x", "subj")]
cases[[length(cases) + 1]] <- fit_case(
  "intercepts_factor_by_covariate",
  "3-level condition x covariate, (1 | subj), 30 x 24 Bernoulli rows, treatment coding",
  y ~ cond * x + (1 | subj), "y ~ cond * x + (1 | subj)", sim1, c("cond", "subj"))
cases[[length(cases) + 1]] <- fit_case(
  "intercepts_factor_by_covariate_sum",
  "the same data and model with sum coding of the condition",
  y ~ cond * x + (1 | subj), "y ~ C(cond, Sum) * x + (1 | subj)", sim1, c("cond", "subj"),
  contrasts = "cond")

# (2) random slopes, crossed: two factors (3 x 2 levels) with their interaction and a
# covariate, (1 + x | llm) + (1 | item); 12 LLMs x 40 items, Bernoulli rows.
set.seed(502)
n_l <- 12L; n_i <- 40L
d <- expand.grid(item = sprintf("i%02d", seq_len(n_i)), llm = sprintf("m%02d", seq_len(n_l)),
                 stringsAsFactors = FALSE)
d$order <- sample(c("o0", "o1", "o2"), nrow(d), replace = TRUE)
d$variant <- sample(c("orig", "spaced"), nrow(d), replace = TRUE)
d$x <- round(rnorm(nrow(d)), 4)
b_l <- rnorm(n_l, sd = 0.7); s_l <- rnorm(n_l, sd = 0.4); b_i <- rnorm(n_i, sd = 0.6)
li <- as.integer(factor(d$llm)); ii <- as.integer(factor(d$item))
eta <- 0.6 - 0.5 * (d$order == "o1") - 1.0 * (d$order == "o2") + 0.2 * (d$variant == "spaced") +
  0.3 * (d$order == "o2") * (d$variant == "spaced") + 0.35 * d$x + b_l[li] + s_l[li] * d$x +
  b_i[ii]
d$y <- rbinom(nrow(d), 1L, plogis(eta))
sim2 <- d[, c("y", "order", "variant", "x", "llm", "item")]
cases[[length(cases) + 1]] <- fit_case(
  "slopes_two_factors",
  "3 x 2 factors with interaction + covariate, (1 + x | llm) + (1 | item), 12 x 40 rows",
  y ~ order * variant + x + (1 + x | llm) + (1 | item),
  "y ~ order * variant + x + (1 + x | llm) + (1 | item)", sim2,
  c("order", "variant", "llm", "item"))
cases[[length(cases) + 1]] <- fit_case(
  "slopes_two_factors_sum",
  "the same data and model with sum coding of both factors",
  y ~ order * variant + x + (1 + x | llm) + (1 | item),
  "y ~ C(order, Sum) * C(variant, Sum) + x + (1 + x | llm) + (1 | item)", sim2,
  c("order", "variant", "llm", "item"), contrasts = c("order", "variant"))

outl <- list(generator = "tests/reference/car_anova.R",
             lme4_version = as.character(packageVersion("lme4")),
             car_version = as.character(packageVersion("car")),
             r_version = R.version.string,
             settings = paste("glmer(family = binomial, nAGQ = 1, control = glmerControl(",
                              "optimizer = 'bobyqa', tolPwrss = 1e-10)); car::Anova(type =",
                              "'II' / 'III', test.statistic = 'Chisq')"),
             cases = cases)
tmp <- paste0(out, ".tmp")
writeLines(toJSON(outl, auto_unbox = TRUE, digits = NA, pretty = 1), tmp)
invisible(file.rename(tmp, out))
cat("wrote", out, "\n")
