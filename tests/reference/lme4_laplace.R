# Reference fits for tomstats.glmm.laplace: lme4::glmer, Laplace (nAGQ = 1), logit link.
#
# Usage (from the repository root):
#   Rscript tests/reference/lme4_laplace.R [SHARED_DATA_DIR] [OUT_JSON]
# SHARED_DATA_DIR defaults to ../shared/data beside the repository (real LLM outcome logs);
# OUT_JSON defaults to tests/reference/lme4_laplace.json beside this script. The real-log
# cases are left out when SHARED_DATA_DIR is absent; the simulated cases (generated here
# with fixed seeds, their data written into the JSON) need nothing else.
#
# Conventions shared with tests/glmm/test_laplace.py, which rebuilds every design:
#   * factor levels are sorted in the C locale (sort(method = "radix")), treatment coding
#     with the first level as reference;
#   * numeric predictors are built as documented per case (centring in base R);
#   * glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10): see fit_case();
#   * se: vcov(), lme4's default for glmer (use.hessian = TRUE: finite-difference Hessian
#     of the Laplace deviance over (theta, beta)); se_rx: vcov(use.hessian = FALSE), the
#     penalised system at fixed theta;
#   * ranef: all levels of factors with <= 20 levels, the first 20 levels otherwise.
# Deterministic: same inputs and lme4 version give the same file.

file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
source(file.path(here, "lme4_common.R"))  # cfac, glmer_quiet, the real logs, the writer
paths <- reference_paths(here, "lme4_laplace.json")
shared <- paths$shared
N_RANEF <- 20L

summ <- function(m, groups) {
  vc <- as.data.frame(VarCorr(m))
  list(beta = I(unname(fixef(m))),
       se = I(unname(sqrt(diag(as.matrix(vcov(m)))))),
       sd = I(unname(setNames(vc$sdcor, vc$grp)[groups])),
       loglik = as.numeric(logLik(m)))
}

fit_case <- function(name, source, formula, data, groups, description, store_data = NULL) {
  # Reference: tolPwrss tightened from lme4's default 1e-7 to 1e-10. With the default,
  # penalised IRLS may stop right after a step of size ~1e-2, and the Cholesky factor behind
  # log det(L) is then the one of the previous iterate's weights: glmer's Laplace deviance
  # is off by up to ~1e-2 (seen on the small simulated cases, not on the real logs), and
  # its optimum moves accordingly. The default fit is recorded too ("lme4_default").
  tight <- glmer_quiet(formula, data, glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10))
  dflt <- glmer_quiet(formula, data, glmerControl(optimizer = "bobyqa"))
  m <- tight$m
  re <- ranef(m)
  ranef_out <- lapply(groups, function(g) {
    v <- re[[g]][, "(Intercept)"]
    nm <- rownames(re[[g]])
    k <- seq_len(min(length(v), N_RANEF))
    list(levels = I(nm[k]), values = I(unname(v[k])), n_levels = length(v))
  })
  names(ranef_out) <- groups
  cat(sprintf("%-28s n=%6d  logLik=%.6f (default %.6f)  %.2fs  %s\n", name, nrow(data),
              as.numeric(logLik(m)), as.numeric(logLik(dflt$m)), dflt$secs,
              if (length(c(tight$msgs, dflt$msgs))) paste(c(tight$msgs, dflt$msgs), collapse = " | ")
              else "ok"))
  res <- c(
    list(name = name, source = source, description = description,
         formula = paste(deparse(formula, width.cutoff = 500L), collapse = " "),
         n_obs = nrow(data), groups = I(groups), coef_names = I(names(fixef(m)))),
    summ(m, groups),
    list(se_rx = I(unname(sqrt(diag(as.matrix(
           suppressWarnings(vcov(m, use.hessian = FALSE))))))),
         theta = I(unname(getME(m, "theta"))),
         singular = isSingular(m),
         warnings = I(tight$msgs),
         ranef = ranef_out,
         lme4_default = c(summ(dflt$m, groups), list(warnings = I(dflt$msgs)))))
  if (!is.null(store_data)) res$data <- as.list(store_data)
  res
}

cases <- list()

# ------------------------------------------------------------------ real logs
ss <- read_storysim(shared)
if (!is.null(ss)) {
  # StorySim triplets, original + spaced prompts, failed run dropped: Bernoulli rows,
  # 8 models crossed with 100 stories.
  d <- storysim_triplets(ss)
  d$question_type <- cfac(d$question_type)
  cases[[length(cases) + 1]] <- fit_case(
    "storysim_triplets", "storysim_items.csv",
    correct ~ question_type + prompt_variant + (1 | model) + (1 | item_id), d,
    c("model", "item_id"),
    paste("experiment == 'triplets', prompt_variant in (original, spaced),",
          "quality_flag != 'failed_run'"))

  # StorySim number-of-characters experiment: 2 models x 400 stories, log2(condition)
  # centred. A second Bernoulli log with a very unbalanced pair of factors.
  d <- ss[ss$experiment == "number_characters", ]
  d$lchars <- log2(d$condition) - mean(log2(d$condition))
  d$question_type <- cfac(d$question_type)
  d$model <- cfac(d$model)
  d$item_id <- cfac(d$item_id)
  cases[[length(cases) + 1]] <- fit_case(
    "storysim_number_characters", "storysim_items.csv",
    correct ~ lchars + question_type + (1 | model) + (1 | item_id), d,
    c("model", "item_id"),
    "experiment == 'number_characters'; lchars = log2(condition) - mean(log2(condition))")
}
tb <- read_tombench(shared)
if (!is.null(tb)) {
  # ToMBench: 19 model runs x 1308 items (task + item_idx), 5 tries each: binomial counts.
  cases[[length(cases) + 1]] <- fit_case(
    "tombench_binomial", "tombench_items.csv",
    cbind(n_correct, n_tries - n_correct) ~ lwords + prompt_lang + (1 | run_dir) + (1 | item),
    tb, c("run_dir", "item"),
    paste("all rows; item = paste(task, item_idx, sep = '_');",
          "lwords = log2(story_words_en) - mean(log2(story_words_en))"))
} else {
  message("no real logs in ", shared, ": simulated cases only")
}

# ------------------------------------------------------------------ simulated logs
# (1) 5 LLMs x 300 items x 2 conditions, Bernoulli; item-level covariate x.
set.seed(20240611)
n_m <- 5L; n_i <- 300L
d <- expand.grid(cond = 0:1, item = seq_len(n_i), model = seq_len(n_m))
x_item <- round(rnorm(n_i), 4)
b_m <- rnorm(n_m, sd = 0.8); b_i <- rnorm(n_i, sd = 1.1)
d$x <- x_item[d$item]
eta <- 0.3 - 0.6 * d$cond + 0.5 * d$x + b_m[d$model] + b_i[d$item]
d$y <- rbinom(nrow(d), 1L, plogis(eta))
sim1 <- data.frame(y = d$y, cond = d$cond, x = d$x, model = d$model - 1L, item = d$item - 1L)
dd <- transform(sim1, model = factor(model), item = factor(item))
cases[[length(cases) + 1]] <- fit_case(
  "sim_crossed_bernoulli", "simulated (seed 20240611)",
  y ~ cond + x + (1 | model) + (1 | item), dd, c("model", "item"),
  "5 models x 300 items x 2 conditions, Bernoulli", store_data = sim1)

# (2) binomial counts, trials 1..6, three crossed factors (model, item, template).
set.seed(7)
n_m <- 6L; n_i <- 80L; n_t <- 4L
d <- expand.grid(template = seq_len(n_t), item = seq_len(n_i), model = seq_len(n_m))
d$trials <- sample(1:6, nrow(d), replace = TRUE)
d$x <- round(runif(nrow(d), -1, 1), 4)
d$level <- sample(c("a", "b", "c"), nrow(d), replace = TRUE)
b_m <- rnorm(n_m, sd = 0.7); b_i <- rnorm(n_i, sd = 0.9); b_t <- rnorm(n_t, sd = 0.4)
eta <- -0.2 + 0.8 * d$x + 0.5 * (d$level == "b") - 0.4 * (d$level == "c") +
  b_m[d$model] + b_i[d$item] + b_t[d$template]
d$y <- rbinom(nrow(d), d$trials, plogis(eta))
sim2 <- data.frame(y = d$y, trials = d$trials, x = d$x, level = d$level,
                   model = d$model - 1L, item = d$item - 1L, template = d$template - 1L)
dd <- transform(sim2, level = cfac(level), model = factor(model), item = factor(item),
                template = factor(template))
cases[[length(cases) + 1]] <- fit_case(
  "sim_binomial_3factor", "simulated (seed 7)",
  cbind(y, trials - y) ~ x + level + (1 | model) + (1 | item) + (1 | template), dd,
  c("model", "item", "template"),
  "6 models x 80 items x 4 templates, binomial (1-6 trials)", store_data = sim2)

# (3) a single grouping factor: 150 items x 6 Bernoulli rows, row-level covariate.
set.seed(99)
n_i <- 150L
d <- data.frame(item = rep(seq_len(n_i), each = 6L))
d$x <- round(rnorm(nrow(d)), 4)
b_i <- rnorm(n_i, sd = 1.3)
d$y <- rbinom(nrow(d), 1L, plogis(0.5 + 0.7 * d$x + b_i[d$item]))
sim3 <- data.frame(y = d$y, x = d$x, item = d$item - 1L)
dd <- transform(sim3, item = factor(item))
cases[[length(cases) + 1]] <- fit_case(
  "sim_single_factor", "simulated (seed 99)", y ~ x + (1 | item), dd, c("item"),
  "150 items x 6 Bernoulli rows, one grouping factor", store_data = sim3)

# (4) no model variance (a singular fit is expected): 4 models x 200 items, Bernoulli.
set.seed(31)
n_m <- 4L; n_i <- 200L
d <- expand.grid(item = seq_len(n_i), model = seq_len(n_m))
d$x <- round(rnorm(nrow(d)), 4)
b_i <- rnorm(n_i, sd = 1)
d$y <- rbinom(nrow(d), 1L, plogis(-0.3 + 0.4 * d$x + b_i[d$item]))
sim4 <- data.frame(y = d$y, x = d$x, model = d$model - 1L, item = d$item - 1L)
dd <- transform(sim4, model = factor(model), item = factor(item))
cases[[length(cases) + 1]] <- fit_case(
  "sim_zero_model_sd", "simulated (seed 31)", y ~ x + (1 | model) + (1 | item), dd,
  c("model", "item"), "4 models x 200 items, Bernoulli, true model SD 0",
  store_data = sim4)

write_reference("tests/reference/lme4_laplace.R",
                paste("glmer(family = binomial, nAGQ = 1, control = glmerControl(optimizer =",
                                 "'bobyqa', tolPwrss = 1e-10)); lme4_default: tolPwrss left at 1e-7"),
                cases, paths$out)
