# Reference fits for a length-ladder log (tests/glmm/test_story_ladder.py): lme4::glmer,
# Laplace (nAGQ = 1), logit link, with the story crossed with context length, ToM order and
# the LLMs.
#
# Usage (from the repository root):
#   Rscript tests/reference/lme4_ladder.R [SHARED_DATA_DIR] [OUT_JSON]
# SHARED_DATA_DIR is not read (the argument keeps the calling convention of the other lme4
# scripts); OUT_JSON defaults to tests/reference/lme4_ladder.json beside this script.
#
# The log is simulated here with a fixed seed and written into the JSON: 4 LLMs x 16 stories,
# every story told at 200, 1000 and 5000 words and asked at ToM orders 0, 1, 2, two questions
# per LLM and cell; eta = 1.2 + a_llm - 0.7 tom_order - (0.3 + b_llm) ln(words / 200) +
# u_story, with LLM intercepts a = (-0.8, -0.3, 0.3, 0.8), LLM slopes b = (-0.2, 0.1, -0.1,
# 0.2) and u_story ~ N(0, 1), the story effect shared by all its tellings. The
# JSON column story_id is the log's; the fits use story = story_id and
# log_context = ln(context_words), as tomstats.glmm.prepare_data makes them.
# Conventions as in lme4_laplace.R and lme4_slopes.R: factor levels sorted in the C locale,
# glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10); se: vcov().
# Deterministic: same R and lme4 versions give the same file.

file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
source(file.path(here, "lme4_common.R"))  # cfac, glmer_quiet, the JSON writer
paths <- reference_paths(here, "lme4_ladder.json")

set.seed(20261201)
llms <- sprintf("llm-%s", c("a", "b", "c", "d"))
stories <- sprintf("s%02d", 0:15)
d <- expand.grid(model = llms, story_id = stories, context_words = c(200, 1000, 5000),
                 tom_order = 0:2, question = 1:2, stringsAsFactors = FALSE)
a <- setNames(c(-0.8, -0.3, 0.3, 0.8), llms)
b <- setNames(c(-0.2, 0.1, -0.1, 0.2), llms)
u <- setNames(rnorm(length(stories), 0, 1), stories)
eta <- 1.2 + a[d$model] - 0.7 * d$tom_order -
  (0.3 + b[d$model]) * log(d$context_words / 200) + u[d$story_id]
d$correct <- rbinom(nrow(d), 1, plogis(eta))
d$story <- cfac(d$story_id)
d$model_f <- cfac(d$model)
d$log_context <- log(d$context_words)

vc_sd <- function(m) {
  vc <- as.data.frame(VarCorr(m))
  list(grp = I(vc$grp), var1 = I(vc$var1), var2 = I(ifelse(is.na(vc$var2), "", vc$var2)),
       sdcor = I(vc$sdcor))
}

fit_case <- function(name, formula, description) {
  f <- as.formula(gsub("\\bmodel\\b", "model_f", formula))
  g <- glmer_quiet(f, d, glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10))
  m <- g$m
  cat(sprintf("%-24s n=%5d  logLik=%.6f  %.2fs  %s\n", name, nrow(d),
              as.numeric(logLik(m)), g$secs,
              if (length(g$msgs)) paste(g$msgs, collapse = " | ") else "ok"))
  list(name = name, description = description, formula = formula, n_obs = nrow(d),
       coef_names = I(names(fixef(m))), beta = I(unname(fixef(m))),
       se = I(unname(sqrt(diag(as.matrix(suppressWarnings(vcov(m))))))),
       varcorr = vc_sd(m), loglik = as.numeric(logLik(m)), singular = isSingular(m),
       warnings = I(g$msgs))
}

cases <- list(
  fit_case("ladder_intercepts",
           "correct ~ tom_order + log_context + (1 | model) + (1 | story)",
           "random intercepts of the LLMs and of the stories, crossed with length and order"),
  fit_case("ladder_llm_slopes",
           "correct ~ tom_order + log_context + (1 + log_context | model) + (1 | story)",
           "an LLM slope of log context beside the story intercepts")
)
data_out <- list(model = I(d$model), story_id = I(d$story_id),
                 context_words = I(d$context_words), tom_order = I(d$tom_order),
                 correct = I(d$correct))
cases[[1]]$data <- data_out
write_reference("tests/reference/lme4_ladder.R", list(seed = 20261201), cases, paths$out)
