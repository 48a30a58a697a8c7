# Reference printout for tomstats' LaplaceFit.__str__: lme4's print(summary(glmer(...))) of
# the slopes example of docs/glmm-slopes.md (12 LLMs x 40 stories x ToM orders 0-2, the data
# of that page's doctest, written to lme4_summary.csv beside this script).
#
# Usage (from the repository root):
#   Rscript tests/reference/lme4_summary.R [DATA_CSV] [OUT_TXT]
# DATA_CSV defaults to tests/reference/lme4_summary.csv, OUT_TXT to lme4_summary.txt beside
# this script. The C locale (plain quotes in the significance legend), width 80, lme4's
# defaults (a control argument would add a "Control:" line to the printout).
# Deterministic: same inputs and R package versions give the same file.

suppressPackageStartupMessages(library(lme4))
invisible(Sys.setlocale("LC_ALL", "C"))
options(width = 80, digits = 7)
args <- commandArgs(trailingOnly = TRUE)
file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
here <- if (length(file_arg)) dirname(normalizePath(sub("^--file=", "", file_arg[1]))) else "."
data <- if (length(args) >= 1) args[[1]] else file.path(here, "lme4_summary.csv")
out <- if (length(args) >= 2) args[[2]] else file.path(here, "lme4_summary.txt")
d <- read.csv(data)
m <- glmer(correct ~ tom_order + (1 + tom_order | model) + (1 | item), data = d,
           family = binomial)
writeLines(capture.output(print(summary(m))), out)
