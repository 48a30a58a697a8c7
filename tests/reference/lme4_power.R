# Reference power of a correlated-slopes logit GLMM by simulation and refitting with lme4
# (what simr's powerSim/extend do), for tests/planning/test_from_fit.py.
#
# Usage (from the repository root):
#   Rscript tests/reference/lme4_power.R [N_SIMS] [OUT_JSON]
# N_SIMS (studies per design point) defaults to 300; OUT_JSON to lme4_power.json beside this
# script. Deterministic: same inputs and lme4 version give the same file.
#
# The pilot data are simulated here (seed 515) and written into the JSON:
#   20 groups g01..g20 x 30 Bernoulli rows, x ~ N(0, 1) rounded to 4 decimals,
#   y ~ Bernoulli(logit^-1(-0.3 + 0.4 x + b0_g + b1_g x)), (b0, b1) ~ N(0, Sigma),
#   sd(b0) = 0.8, sd(b1) = 0.5, corr = 0.3.
# The pilot fit m = glmer(y ~ x + (1 + x | g), nAGQ = 1) gives beta and theta. Design points
# (each simulated from m with the slope of x set to EFFECT, new random effects per study,
# simulate(..., newparams, allow.new.levels = TRUE)):
#   "g=20": the pilot design;
#   "g=30": 10 new groups, new group 20 + i (i = 0..9) a copy of the rows of the i-th group
#           in sorted label order (simr's extend(along = "g")), labelled "<group>~<20 + i>";
#   "null": the pilot design with the slope of x at 0 (type I error).
# Tests on each simulated study (y ~ x + (1 + x | g) refitted with refit(), nAGQ = 1):
#   wald: |z of x| > qnorm(0.975); lrt: 2 (logLik(m1) - logLik(m0)) > qchisq(0.95, 1) with
#   m0 = y ~ 1 + (1 + x | g). A refit that errors is counted as failed; refits with lme4
#   convergence messages are counted (they stay in the power, as simr keeps them).

suppressPackageStartupMessages({
  library(lme4)
  library(jsonlite)
})

args <- commandArgs(trailingOnly = TRUE)
file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
n_sims <- if (length(args) >= 1 && nzchar(args[1])) as.integer(args[1]) else 300L
out <- if (length(args) >= 2) args[2] else file.path(here, "lme4_power.json")
EFFECT <- 0.25
FORMULA <- y ~ x + (1 + x | g)
REDUCED <- y ~ 1 + (1 + x | g)

set.seed(515)
n_g <- 20L; n_r <- 30L
labels <- sprintf("g%02d", seq_len(n_g))
d <- data.frame(g = rep(labels, each = n_r), stringsAsFactors = FALSE)
d$x <- round(rnorm(nrow(d)), 4)
S <- matrix(c(0.64, 0.3 * 0.8 * 0.5, 0.3 * 0.8 * 0.5, 0.25), 2)
B <- matrix(rnorm(2 * n_g), n_g) %*% chol(S)
gi <- match(d$g, labels)
d$y <- rbinom(nrow(d), 1L, plogis(-0.3 + 0.4 * d$x + B[gi, 1] + B[gi, 2] * d$x))
pilot <- d

quiet <- function(expr) {
  msgs <- character(0)
  val <- withCallingHandlers(expr,
    warning = function(w) { msgs <<- c(msgs, conditionMessage(w)); invokeRestart("muffleWarning") },
    message = function(w) { msgs <<- c(msgs, conditionMessage(w)); invokeRestart("muffleMessage") })
  list(value = val, msgs = msgs)
}

m <- quiet(glmer(FORMULA, data = transform(pilot, g = factor(g)), family = binomial))$value

extend_groups <- function(dat, n_levels) {
  levs <- sort(unique(dat$g), method = "radix")
  q <- length(levs)
  parts <- list(dat)
  if (n_levels > q) for (i in q:(n_levels - 1L)) {
    src <- levs[(i - q) %% q + 1L]
    block <- dat[dat$g == src, ]
    block$g <- paste0(src, "~", i)
    parts[[length(parts) + 1L]] <- block
  }
  do.call(rbind, parts)
}

run_point <- function(name, dat, effect, seed) {
  dat$g <- factor(dat$g)
  beta <- fixef(m)
  beta[["x"]] <- effect
  ys <- simulate(m, nsim = n_sims, seed = seed, newdata = dat,
                 newparams = list(beta = beta, theta = getME(m, "theta")),
                 allow.new.levels = TRUE)
  dat$y <- ys[[1]]
  m1 <- quiet(glmer(FORMULA, data = dat, family = binomial))$value
  m0 <- quiet(glmer(REDUCED, data = dat, family = binomial))$value
  wald <- lrt <- failed <- msgs <- singular <- 0L
  est <- numeric(0)
  t0 <- proc.time()[["elapsed"]]
  for (s in seq_len(n_sims)) {
    r1 <- tryCatch(quiet(refit(m1, ys[[s]])), error = function(e) NULL)
    r0 <- tryCatch(quiet(refit(m0, ys[[s]])), error = function(e) NULL)
    if (is.null(r1) || is.null(r0)) { failed <- failed + 1L; next }
    if (length(r1$msgs) > 0) msgs <- msgs + 1L
    if (isSingular(r1$value)) singular <- singular + 1L
    z <- coef(summary(r1$value))["x", "z value"]
    est <- c(est, fixef(r1$value)[["x"]])
    if (abs(z) > qnorm(0.975)) wald <- wald + 1L
    if (2 * (as.numeric(logLik(r1$value)) - as.numeric(logLik(r0$value))) > qchisq(0.95, 1))
      lrt <- lrt + 1L
  }
  secs <- proc.time()[["elapsed"]] - t0
  list(name = name, n_levels = nlevels(dat$g), n_rows = nrow(dat), effect = effect,
       n_sims = n_sims, n_valid = n_sims - failed, n_failed = failed,
       n_messages = msgs, n_singular = singular, wald_rejected = wald, lrt_rejected = lrt,
       mean_estimate = mean(est), seconds = secs, seconds_per_refit = secs / (2 * n_sims))
}

points <- list(
  run_point("g=20", pilot, EFFECT, 1L),
  run_point("g=30", extend_groups(pilot, 30L), EFFECT, 2L),
  run_point("null", pilot, 0, 3L))

res <- list(
  generator = "tests/reference/lme4_power.R",
  lme4_version = as.character(packageVersion("lme4")),
  r_version = paste(R.version$major, R.version$minor, sep = "."),
  formula = deparse(FORMULA), reduced = deparse(REDUCED), effect = EFFECT,
  pilot_fit = list(beta = unname(fixef(m)), coef_names = names(fixef(m)),
                   theta = unname(getME(m, "theta")),
                   loglik = as.numeric(logLik(m))),
  data = pilot, points = points)
writeLines(toJSON(res, auto_unbox = TRUE, digits = NA, pretty = TRUE), out)
cat("wrote", out, "\n")
