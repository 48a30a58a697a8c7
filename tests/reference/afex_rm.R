# Reference numbers for tests/analysis/test_row_anova_rm.py: repeated-measures and mixed ANOVA by afex.
#
# Generates random data sets deterministically (set.seed), fits each with afex::aov_car
# (cell means per subject x within cell, fun_aggregate = mean) and writes the data together
# with car's univariate tests (SS, df, error SS/df, F, p), the Greenhouse-Geisser and
# Huynh-Feldt epsilons and corrected p-values, Mauchly's test and afex's pes/ges to JSON.
#
#   Rscript tests/reference/afex_rm.R [out.json]      (default: tests/reference/afex_rm.json)
#
# Needs R with afex (Debian: r-cran-afex) and jsonlite.
suppressPackageStartupMessages({
  library(afex)
  library(jsonlite)
})
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[[1]] else "tests/reference/afex_rm.json"

make_data <- function(n_per_group, between, within, reps, binary, seed) {
  set.seed(seed)
  bgrid <- if (length(between)) expand.grid(lapply(between, seq_len)) else data.frame(g = 1)
  rows <- list()
  subj <- 0
  for (g in seq_len(nrow(bgrid))) {
    for (k in seq_len(n_per_group[g])) {
      subj <- subj + 1
      wgrid <- expand.grid(lapply(within, seq_len))
      u <- rnorm(1, 0, 0.8)                                  # subject intercept
      slope <- rnorm(nrow(wgrid), 0, 0.5)                     # subject x cell deviations
      for (w in seq_len(nrow(wgrid))) {
        mu <- u + slope[w] + 0.3 * sum(as.numeric(wgrid[w, ])) +
          0.4 * sum(as.numeric(bgrid[g, ])) * (as.numeric(wgrid[w, 1]) - 1)
        r <- reps
        if (reps > 1) r <- sample(1:reps, 1)                  # unequal replicates per cell
        y <- if (binary) rbinom(r, 1, plogis(mu - 1)) else round(mu + rnorm(r), 4)
        row <- data.frame(subj = sprintf("s%02d", subj), y = y)
        for (b in seq_along(between)) row[[names(between)[b]]] <- sprintf("b%d", bgrid[g, b])
        for (v in seq_along(within)) row[[names(within)[v]]] <- sprintf("w%d", wgrid[w, v])
        rows[[length(rows) + 1]] <- row
      }
    }
  }
  do.call(rbind, rows)
}

designs <- list(
  list(name = "within1", n = 10, between = c(), within = c(w1 = 3), reps = 1, type = 3),
  list(name = "within2_reps", n = 12, between = c(), within = c(w1 = 3, w2 = 4), reps = 3,
       type = 3),
  list(name = "within_2x2", n = 9, between = c(), within = c(w1 = 2, w2 = 2), reps = 2,
       type = 2),
  list(name = "paper_5x3_binary", n = 20, between = c(), within = c(ctx = 5, tom = 3),
       reps = 6, binary = TRUE, type = 3),
  list(name = "mixed_balanced", n = c(7, 7), between = c(b1 = 2), within = c(w1 = 4),
       reps = 1, type = 3),
  list(name = "mixed_unbal_t3", n = c(5, 8, 6), between = c(b1 = 3),
       within = c(w1 = 2, w2 = 3), reps = 2, type = 3),
  list(name = "mixed_unbal_t2", n = c(5, 8, 6), between = c(b1 = 3),
       within = c(w1 = 2, w2 = 3), reps = 2, type = 2),
  list(name = "mixed_2x2_t3", n = c(4, 6, 5, 7), between = c(b1 = 2, b2 = 2),
       within = c(w1 = 3), reps = 1, type = 3),
  list(name = "mixed_2x2_t2", n = c(4, 6, 5, 7), between = c(b1 = 2, b2 = 2),
       within = c(w1 = 3), reps = 1, type = 2),
  list(name = "mixed_observed", n = c(6, 9), between = c(b1 = 2), within = c(w1 = 3, w2 = 2),
       reps = 2, type = 3, observed = "b1"),
  list(name = "mixed_binary", n = c(8, 10), between = c(b1 = 2), within = c(w1 = 4),
       reps = 8, binary = TRUE, type = 3),
  # fewer subjects than contrasts: singular error matrix, no sphericity corrections
  list(name = "within_singular", n = 4, between = c(), within = c(w1 = 5, w2 = 2), reps = 1,
       type = 3)
)

num <- function(x) ifelse(is.finite(x), x, NA)

results <- list()
for (i in seq_along(designs)) {
  d <- designs[[i]]
  binary <- isTRUE(d$binary)
  dat <- make_data(d$n, d$between, d$within, d$reps, binary, seed = 1000 + i)
  bnames <- names(d$between)
  wnames <- names(d$within)
  rhs <- if (length(bnames)) paste(bnames, collapse = " * ") else "1"
  f <- as.formula(sprintf("y ~ %s + Error(subj/(%s))", rhs, paste(wnames, collapse = " * ")))
  observed <- if (is.null(d$observed)) NULL else d$observed
  fit <- suppressMessages(suppressWarnings(
    aov_car(f, data = dat, type = d$type, fun_aggregate = mean, observed = observed,
            anova_table = list(correction = "none", es = c("pes", "ges")))))
  sm <- suppressWarnings(summary(fit$Anova, multivariate = FALSE))
  uni <- sm$univariate.tests
  tab <- anova(fit, es = c("pes", "ges"), correction = "none", observed = observed)
  eff <- rownames(tab)
  adj <- sm$pval.adjustments
  sph <- sm$sphericity.tests
  # car leaves its correction table at 0 (not NA) when no within effect has more than 1 df
  if (is.null(sph) || nrow(sph) == 0) adj <- NULL
  get <- function(m, r, col) {
    if (is.null(m) || !(r %in% rownames(m))) NA else unname(m[r, col])
  }
  rows <- lapply(eff, function(r) list(
    source = r,
    SS = uni[r, "Sum Sq"], DF = uni[r, "num Df"], SS_error = uni[r, "Error SS"],
    DF_error = uni[r, "den Df"], F = uni[r, "F value"], p = uni[r, "Pr(>F)"],
    pes = tab[r, "pes"], ges = tab[r, "ges"],
    eps_gg = num(get(adj, r, "GG eps")), p_gg = num(get(adj, r, "Pr(>F[GG])")),
    eps_hf = num(get(adj, r, "HF eps")), p_hf = num(get(adj, r, "Pr(>F[HF])")),
    mauchly_W = num(get(sph, r, "Test statistic")), mauchly_p = num(get(sph, r, "p-value"))
  ))
  results[[i]] <- list(
    name = d$name, type = d$type, between = as.list(bnames), within = as.list(wnames),
    observed = if (is.null(observed)) list() else as.list(observed), binary = binary,
    data = as.list(dat), rows = rows
  )
}
meta <- list(
  generated_by = "tests/reference/afex_rm.R",
  R = R.version.string,
  afex = as.character(packageVersion("afex")),
  car = as.character(packageVersion("car")),
  designs = results
)
writeLines(toJSON(meta, auto_unbox = TRUE, digits = NA, na = "null", pretty = FALSE), out)
cat("wrote", out, "\n")
