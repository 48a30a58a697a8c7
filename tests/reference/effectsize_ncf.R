# Reference numbers for tests/analysis/test_ncf_interval.py: noncentral-F intervals of partial
# eta squared (Steiger 2004) from R.
#
# 1. For a grid of (F, df1, df2, level): the noncentrality bounds found with R's own
#    noncentral F CDF (pf(..., ncp)) and uniroot, to 1e-10, where
#    pf(F, df1, df2, ncp = lo) = 1 - a/2 and pf(F, df1, df2, ncp = hi) = a/2 (0 where the
#    central CDF is already at or below the target), and effectsize::F_to_eta2's two-sided
#    interval (effectsize maps a bound lambda to lambda / (lambda + df2)) with the CDF at its
#    bounds (NA at 0), which shows where its optim() search stopped short of the target.
# 2. A two-way between-subjects data set (set.seed), fitted with aov, and effectsize's
#    eta_squared (partial and not) with two-sided 95 % intervals.
#
#   Rscript tests/reference/effectsize_ncf.R [out.json]  (default: tests/reference/effectsize_ncf.json)
#
# Needs R with effectsize (Debian: r-cran-effectsize) and jsonlite.
suppressPackageStartupMessages({
  library(effectsize)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[[1]] else "tests/reference/effectsize_ncf.json"

ncp_bound <- function(f, df1, df2, target) {
  if (pf(f, df1, df2) <= target) return(0)
  hi <- max(1, 2 * f * df1)
  while (pf(f, df1, df2, ncp = hi) > target) hi <- 2 * hi
  uniroot(function(l) pf(f, df1, df2, ncp = l) - target, c(0, hi), tol = 1e-10)$root
}

cdf_at <- function(eta, f, df1, df2) {
  if (eta <= 0) return(NA)
  pf(f, df1, df2, ncp = df2 * eta / (1 - eta))
}

grid <- expand.grid(f = c(0, 0.3, 1, 2.5, 4, 9, 30, 250), df1 = c(1, 2, 4, 8),
                    df2 = c(12, 100, 2985), level = c(0.9, 0.95))
rows <- lapply(seq_len(nrow(grid)), function(i) {
  g <- grid[i, ]
  a <- 1 - g$level
  es <- F_to_eta2(g$f, g$df1, g$df2, ci = g$level, alternative = "two.sided", verbose = FALSE)
  list(f = g$f, df1 = g$df1, df2 = g$df2, level = g$level,
       lambda_low = ncp_bound(g$f, g$df1, g$df2, 1 - a / 2),
       lambda_high = ncp_bound(g$f, g$df1, g$df2, a / 2),
       effectsize_low = es$CI_low, effectsize_high = es$CI_high,
       # the CDF at effectsize's bounds: its optim() search does not always reach the target
       effectsize_cdf_low = cdf_at(es$CI_low, g$f, g$df1, g$df2),
       effectsize_cdf_high = cdf_at(es$CI_high, g$f, g$df1, g$df2))
})

set.seed(23)
d <- expand.grid(a = factor(paste0("a", 1:3)), b = factor(paste0("b", 1:4)), rep = 1:9)
d$y <- rnorm(nrow(d), 0.4 * as.integer(d$a) + 0.15 * (d$b == "b2"), 1)
fit <- aov(y ~ a * b, data = d)
pes <- eta_squared(fit, partial = TRUE, ci = 0.95, alternative = "two.sided", verbose = FALSE)
es <- eta_squared(fit, partial = FALSE, ci = 0.95, alternative = "two.sided", verbose = FALSE)
tab <- summary(fit)[[1]]
table <- data.frame(source = trimws(rownames(tab))[1:3], F = tab[1:3, "F value"],
                    DF = tab[1:3, "Df"], DF_error = tab[4, "Df"],
                    partial_eta2 = pes$Eta2_partial, partial_eta2_low = pes$CI_low,
                    partial_eta2_high = pes$CI_high, eta2 = es$Eta2, eta2_low = es$CI_low,
                    eta2_high = es$CI_high)

write_json(list(generated_by = "tests/reference/effectsize_ncf.R",
                R = R.version.string, effectsize = as.character(packageVersion("effectsize")),
                grid = rows,
                aov = list(data = list(a = as.character(d$a), b = as.character(d$b),
                                       y = d$y),
                           rows = table)),
           out, auto_unbox = TRUE, digits = NA)
