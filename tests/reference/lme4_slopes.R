# Reference fits for tomstats.glmm.lme (random slopes, uncorrelated and nested terms):
# lme4::glmer, Laplace (nAGQ = 1), logit link.
#
# Usage (from the repository root):
#   Rscript tests/reference/lme4_slopes.R [SHARED_DATA_DIR] [OUT_JSON]
# SHARED_DATA_DIR defaults to ../shared/data beside the repository (real LLM outcome logs);
# OUT_JSON defaults to tests/reference/lme4_slopes.json beside this script. The real-log
# cases are left out when SHARED_DATA_DIR is absent; the simulated cases (generated here
# with fixed seeds, their data written into the JSON) need nothing else.
#
# Conventions shared with tests/glmm/test_glmm_lme.py, which refits every case from a data
# frame with tomstats.glmm.lme.fit_lme and the formula stored here:
#   * derived columns are built as each case's "columns" says (the test builds them the same
#     way); factor levels sorted in the C locale, treatment coding, first level reference;
#   * glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10), as in lme4_laplace.R (with the
#     default tolPwrss = 1e-7 glmer's Laplace deviance can be off by ~1e-2 on small data); the
#     fit with lme4's default control is recorded as "lme4_default";
#   * varcorr: as.data.frame(VarCorr(m)) (grp, var1, var2, vcov, sdcor), the ".1"-style
#     suffixes lme4 gives the split terms of (1 + x || g) removed;
#   * se: vcov() (lme4's default for glmer: finite-difference Hessian over (theta, beta));
#     se_rx: vcov(use.hessian = FALSE);
#   * ranef / condsd: conditional modes and conditional SDs (ranef(condVar = TRUE)) of the
#     first 10 levels of the case's "ranef_group".
# Deterministic: same inputs and lme4 version give the same file.

file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
source(file.path(here, "lme4_common.R"))  # cfac, glmer_quiet, the real logs, the writer
paths <- reference_paths(here, "lme4_slopes.json")
shared <- paths$shared
N_RANEF <- 10L

varcorr <- function(m) {
  vc <- as.data.frame(VarCorr(m))
  list(grp = I(sub("\\.[0-9]+$", "", vc$grp)), var1 = I(vc$var1),
       var2 = I(ifelse(is.na(vc$var2), "", vc$var2)), vcov = I(vc$vcov),
       sdcor = I(vc$sdcor))
}

summ <- function(m) {
  list(beta = I(unname(fixef(m))),
       se = I(unname(sqrt(diag(as.matrix(suppressWarnings(vcov(m))))))),
       varcorr = varcorr(m),
       loglik = as.numeric(logLik(m)),
       singular = isSingular(m))
}

fit_case <- function(name, source, formula, data, ranef_group, description, columns,
                     store_data = NULL, profile = FALSE, reduced = NULL) {
  tight <- glmer_quiet(formula, data, glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10))
  dflt <- glmer_quiet(formula, data, glmerControl())
  m <- tight$m
  re <- as.data.frame(ranef(m, condVar = TRUE))
  re <- re[re$grpvar == ranef_group, ]
  lv <- unique(as.character(re$grp))
  keep <- lv[seq_len(min(length(lv), N_RANEF))]
  effects <- unique(as.character(re$term))
  pick <- function(col) sapply(effects, function(e)
    sapply(keep, function(l) re[[col]][re$term == e & as.character(re$grp) == l]))
  cat(sprintf("%-30s n=%6d  logLik=%.6f (default %.6f)  %.2fs  singular=%s  %s\n", name,
              nrow(data), as.numeric(logLik(m)), as.numeric(logLik(dflt$m)), dflt$secs,
              isSingular(m),
              if (length(c(tight$msgs, dflt$msgs))) paste(unique(c(tight$msgs, dflt$msgs)),
                                                          collapse = " | ") else "ok"))
  ll <- logLik(m)
  res <- c(
    list(name = name, source = source, description = description, columns = columns,
         formula = paste(deparse(formula, width.cutoff = 500L), collapse = " "),
         n_obs = nrow(data), coef_names = I(names(fixef(m)))),
    summ(m),
    list(se_rx = I(unname(sqrt(diag(as.matrix(
           suppressWarnings(vcov(m, use.hessian = FALSE))))))),
         npar = attr(ll, "df"), aic = AIC(m), bic = BIC(m),
         theta = I(unname(getME(m, "theta"))), theta_names = I(names(getME(m, "theta"))),
         warnings = I(tight$msgs),
         ranef = list(group = ranef_group, levels = I(keep), effects = I(effects),
                      values = unname(matrix(pick("condval"), ncol = length(effects))),
                      condsd = unname(matrix(pick("condsd"), ncol = length(effects))),
                      n_levels = length(lv)),
         seconds = dflt$secs,
         lme4_default = c(summ(dflt$m), list(warnings = I(dflt$msgs)))))
  res$predict <- list(response = I(unname(predict(m, type = "response")[1:10])),
                      link_fixed = I(unname(predict(m, re.form = NA)[1:10])))
  if (!is.null(reduced)) {
    m0 <- glmer_quiet(reduced, data, glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10))$m
    a <- anova(m0, m)  # rows: m0, m (the fits as tight as above)
    res$anova <- list(reduced = paste(deparse(reduced, width.cutoff = 500L), collapse = " "),
                      loglik0 = as.numeric(logLik(m0)), npar = I(unname(a$npar)),
                      chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2],
                      aic = I(unname(a$AIC)), bic = I(unname(a$BIC)),
                      loglik = I(unname(a$logLik)), deviance = I(unname(a$deviance)))
  }
  if (profile) {
    ci <- suppressMessages(suppressWarnings(confint(m, parm = "beta_", method = "profile")))
    res$profile_ci <- list(lower = I(unname(ci[, 1])), upper = I(unname(ci[, 2])))
  }
  if (!is.null(store_data)) res$data <- as.list(store_data)
  res
}

cases <- list()

# ------------------------------------------------------------------ real logs
ss <- read_storysim(shared)
if (!is.null(ss)) {
  # StorySim triplets (original + spaced prompts, failed run dropped), 8 models x 100
  # stories, Bernoulli: a correlated random slope of ToM order per model.
  d <- storysim_triplets(ss)
  cases[[length(cases) + 1]] <- fit_case(
    "storysim_triplets_slopes", "storysim_items.csv",
    correct ~ tom_order + prompt_variant + (1 + tom_order | model) + (1 | item_id), d,
    "model",
    paste("experiment == 'triplets', prompt_variant in (original, spaced),",
          "quality_flag != 'failed_run'"), list(),
    reduced = correct ~ tom_order + prompt_variant + (1 | model) + (1 | item_id))
}
tb <- read_tombench(shared)
if (!is.null(tb)) {
  # ToMBench: 19 model runs x 1308 items, 5 tries each: binomial counts; an uncorrelated
  # random slope of (log) story length per run.
  cases[[length(cases) + 1]] <- fit_case(
    "tombench_uncorrelated_binomial", "tombench_items.csv",
    cbind(n_correct, n_tries - n_correct) ~ lwords + prompt_lang + (1 + lwords || run_dir) +
      (1 | item), tb, "run_dir", "all rows",
    list(item = "paste(task, item_idx, sep = '_')",
         lwords = "log2(story_words_en) - mean(log2(story_words_en))"))
}
if (file.exists(file.path(shared, "chartom_mcqa_accuracy.csv"))) {
  # CharToM-QA: 6 models x 2 languages x 4 ToM dimensions x 3 context lengths, binomial
  # counts (k_implied of n_questions).
  ch <- read.csv(file.path(shared, "chartom_mcqa_accuracy.csv"), stringsAsFactors = FALSE)
  ch$ctx <- ch$context_len / 1000
  ch$language <- cfac(ch$language)
  ch$model <- cfac(ch$model)
  ch$tom_dimension <- cfac(ch$tom_dimension)
  cols <- list(ctx = "context_len / 1000")
  cases[[length(cases) + 1]] <- fit_case(
    "chartom_correlated_binomial", "chartom_mcqa_accuracy.csv",
    cbind(k_implied, n_questions - k_implied) ~ ctx + language + (1 + ctx | model), ch,
    "model", "all rows", cols)
  cases[[length(cases) + 1]] <- fit_case(
    "chartom_nested_binomial", "chartom_mcqa_accuracy.csv",
    cbind(k_implied, n_questions - k_implied) ~ ctx + language + (1 | model/tom_dimension),
    ch, "model", "all rows", cols, profile = TRUE)
}
if (length(cases) == 0L) message("no real logs in ", shared, ": simulated cases only")

# ------------------------------------------------------------------ simulated logs
# (1) nested and crossed, several terms per factor: 10 LLMs, 5 prompt templates within
# each LLM (labels 0-4 reused: only the nesting tells them apart), 40 items crossed with
# the LLMs; Bernoulli rows, a random slope of x per LLM beside the LLM intercept.
set.seed(101)
n_l <- 10L; n_t <- 5L; n_i <- 40L
d <- expand.grid(item = seq_len(n_i), template = seq_len(n_t), llm = seq_len(n_l))
d <- d[sample(nrow(d), 1400L), ]
d$x <- round(rnorm(nrow(d)), 4)
b_l <- rnorm(n_l, sd = 0.7); s_l <- rnorm(n_l, sd = 0.5)
b_t <- matrix(rnorm(n_l * n_t, sd = 0.5), n_l); b_i <- rnorm(n_i, sd = 0.9)
eta <- 0.2 + 0.6 * d$x + b_l[d$llm] + s_l[d$llm] * d$x +
  b_t[cbind(d$llm, d$template)] + b_i[d$item]
d$y <- rbinom(nrow(d), 1L, plogis(eta))
sim1 <- data.frame(y = d$y, x = d$x, llm = d$llm - 1L, template = d$template - 1L,
                   item = d$item - 1L)
dd <- transform(sim1, llm = factor(llm), template = factor(template), item = factor(item))
cases[[length(cases) + 1]] <- fit_case(
  "sim_nested_several_terms", "simulated (seed 101)",
  y ~ x + (0 + x | llm) + (1 | llm/template) + (1 | item), dd, "llm",
  "10 LLMs / 5 templates each (nested), 40 items crossed, 1400 Bernoulli rows", list(),
  store_data = sim1)

# (2) binomial counts (1-5 trials), uncorrelated slopes, a condition factor.
set.seed(202)
n_g <- 15L; n_i <- 30L
d <- expand.grid(item = seq_len(n_i), g = seq_len(n_g))
d$n <- sample(1:5, nrow(d), replace = TRUE)
d$x <- round(runif(nrow(d), -1, 1), 4)
d$cond <- sample(c("a", "b"), nrow(d), replace = TRUE)
b_g <- rnorm(n_g, sd = 0.8); s_g <- rnorm(n_g, sd = 0.6); b_i <- rnorm(n_i, sd = 0.5)
eta <- -0.3 + 0.7 * d$x + 0.4 * (d$cond == "b") + b_g[d$g] + s_g[d$g] * d$x + b_i[d$item]
d$k <- rbinom(nrow(d), d$n, plogis(eta))
sim2 <- data.frame(k = d$k, n = d$n, x = d$x, cond = d$cond, g = d$g - 1L, item = d$item - 1L)
dd <- transform(sim2, cond = cfac(cond), g = factor(g), item = factor(item))
cases[[length(cases) + 1]] <- fit_case(
  "sim_uncorrelated_binomial", "simulated (seed 202)",
  cbind(k, n - k) ~ x + cond + (1 + x || g) + (1 | item), dd, "g",
  "15 groups x 30 items, binomial (1-5 trials)", list(), store_data = sim2)

# (3) three correlated effects per group (intercept and two slopes), Bernoulli.
set.seed(303)
n_g <- 25L; n_r <- 40L
d <- data.frame(g = rep(seq_len(n_g), each = n_r))
d$x <- round(rnorm(nrow(d)), 4); d$z <- round(rnorm(nrow(d)), 4)
S <- matrix(c(1, 0.4, -0.3, 0.4, 0.5, 0.1, -0.3, 0.1, 0.4), 3)
B <- matrix(rnorm(3 * n_g), n_g) %*% chol(S)
eta <- 0.1 + 0.5 * d$x - 0.4 * d$z + B[d$g, 1] + B[d$g, 2] * d$x + B[d$g, 3] * d$z
d$y <- rbinom(nrow(d), 1L, plogis(eta))
sim3 <- data.frame(y = d$y, x = d$x, z = d$z, g = d$g - 1L)
dd <- transform(sim3, g = factor(g))
cases[[length(cases) + 1]] <- fit_case(
  "sim_three_correlated", "simulated (seed 303)", y ~ x + z + (1 + x + z | g), dd, "g",
  "25 groups x 40 Bernoulli rows, correlated intercept and two slopes", list(),
  store_data = sim3)

# (4) no slope variance (a singular fit is expected): 8 groups x 60 rows, Bernoulli.
set.seed(404)
n_g <- 8L; n_r <- 60L
d <- data.frame(g = rep(seq_len(n_g), each = n_r))
d$x <- round(rnorm(nrow(d)), 4)
b_g <- rnorm(n_g, sd = 0.9)
d$y <- rbinom(nrow(d), 1L, plogis(-0.2 + 0.5 * d$x + b_g[d$g]))
sim4 <- data.frame(y = d$y, x = d$x, g = d$g - 1L)
dd <- transform(sim4, g = factor(g))
cases[[length(cases) + 1]] <- fit_case(
  "sim_singular_slope", "simulated (seed 404)", y ~ x + (1 + x | g), dd, "g",
  "8 groups x 60 Bernoulli rows, true slope SD 0", list(), store_data = sim4,
  profile = TRUE, reduced = y ~ x + (1 | g))

write_reference("tests/reference/lme4_slopes.R",
                paste("glmer(family = binomial, nAGQ = 1, control = glmerControl(optimizer =",
                                 "'bobyqa', tolPwrss = 1e-10)); lme4_default: glmerControl()"),
                cases, paths$out)
