# Helpers shared by the lme4 reference scripts (lme4_laplace.R, lme4_slopes.R): command-line
# paths, factor coding, a glmer that collects its warnings, the real logs as the tests read
# them, and the JSON writer. Sourced by each script from its own folder:
#   source(file.path(here, "lme4_common.R"))

suppressPackageStartupMessages({
  library(lme4)
  library(jsonlite)
})

# Paths from the command line: SHARED_DATA_DIR (default ../shared/data beside the repository)
# and OUT_JSON (default `default_out` beside the script).
reference_paths <- function(here, default_out) {
  args <- commandArgs(trailingOnly = TRUE)
  repo <- normalizePath(file.path(here, "..", ".."), mustWork = FALSE)
  list(shared = if (length(args) >= 1 && nzchar(args[1])) args[1] else
         file.path(dirname(repo), "shared", "data"),
       out = if (length(args) >= 2) args[2] else file.path(here, default_out))
}

# Factor levels sorted in the C locale (treatment coding, first level the reference).
cfac <- function(x) factor(x, levels = sort(unique(as.character(x)), method = "radix"))

# glmer (binomial, nAGQ = 1) with its warnings and messages collected, and its time.
glmer_quiet <- function(formula, data, control) {
  warns <- character(0)
  t0 <- proc.time()[["elapsed"]]
  m <- withCallingHandlers(
    glmer(formula, data = data, family = binomial, nAGQ = 1L, control = control),
    warning = function(w) {
      warns <<- c(warns, conditionMessage(w))
      invokeRestart("muffleWarning")
    },
    message = function(w) {
      warns <<- c(warns, sub("\n$", "", conditionMessage(w)))
      invokeRestart("muffleMessage")
    })
  list(m = m, secs = proc.time()[["elapsed"]] - t0,
       msgs = c(warns, m@optinfo$conv$lme4$messages))
}

# StorySim items, or NULL when the shared data lack them.
read_storysim <- function(shared) {
  path <- file.path(shared, "storysim_items.csv")
  if (file.exists(path)) read.csv(path, stringsAsFactors = FALSE) else NULL
}

# StorySim triplets (original + spaced prompts, failed run dropped): 8 models x 100 stories.
storysim_triplets <- function(ss) {
  d <- ss[ss$experiment == "triplets" & ss$prompt_variant %in% c("original", "spaced") &
            ss$quality_flag != "failed_run", ]
  d$prompt_variant <- cfac(d$prompt_variant)
  d$model <- cfac(d$model)
  d$item_id <- cfac(d$item_id)
  d
}

# ToMBench: 19 model runs x 1308 items (task + item_idx), 5 tries each, with the centred
# log2 story length; NULL when the shared data lack it.
read_tombench <- function(shared) {
  path <- file.path(shared, "tombench_items.csv")
  if (!file.exists(path)) return(NULL)
  tb <- read.csv(path, stringsAsFactors = FALSE)
  tb$item <- cfac(paste(tb$task, tb$item_idx, sep = "_"))
  tb$run_dir <- cfac(tb$run_dir)
  tb$lwords <- log2(tb$story_words_en) - mean(log2(tb$story_words_en))
  tb$prompt_lang <- cfac(tb$prompt_lang)
  tb
}

# The reference file: generator, versions, settings and the cases.
write_reference <- function(generator, settings, cases, out) {
  outl <- list(
    generator = generator,
    lme4_version = as.character(packageVersion("lme4")),
    r_version = R.version.string,
    settings = settings,
    cases = cases
  )
  writeLines(toJSON(outl, auto_unbox = TRUE, digits = NA, pretty = 1), out)
  cat("wrote", out, "\n")
}
