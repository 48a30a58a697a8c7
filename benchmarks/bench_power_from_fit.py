"""Amortised cost of one refit in ``power_from_fit`` against lme4's ``glmer`` refit in R.

simr answers "how many groups do I need" by refitting ``glmer`` to every simulated study;
``tomstats power --from-fit`` refits with its own Laplace fit, a chunk of studies one after
another inside one compiled program. Both sides here simulate from the same pilot fit (the
correlated-slopes data of ``tests/reference/lme4_power.json``: 20 groups × 30 Bernoulli rows)
and refit every study with the same model:

``intercepts``
    ``y ~ x + (1 | g)``;
``slopes``
    ``y ~ x + (1 + x | g)`` (correlated intercept and slope).

tomstats: :func:`tomstats.planning.from_fit.power_from_fit` (Wald test, no type I error run)
is run once to compile (reported as ``first run``) and again with another seed; the second
run's seconds divided by its refits is the amortised cost per refit. lme4, in the same run:
``Rscript`` fits the pilot, ``simulate()``\\ s the studies and times two ways of refitting
each: ``glmer()`` called afresh on the data with the simulated response, which is what
simr's ``powerSim`` does for every study (its ``doFit.glmerMod`` builds and evaluates a new
``glmer`` call), and ``refit()``, lme4's fastest way to refit the same design. The ratios are
lme4's seconds per refit over tomstats'. tomstats is timed on one core (``cores=1``) and on
every usable core (its default, one thread per core refitting part of each chunk); R, lme4
and simr refit on one core.

    python benchmarks/bench_power_from_fit.py [--studies 1000] [--r-studies 40] [--write-docs]

``--studies`` defaults to 1000, simr's ``powerSim`` default (``nsim``): the per-run costs
(building the design, compiling on the first run) are then shared as in a real power run.

``--write-docs`` replaces the table between the script's markers in
``docs/power-from-fit.md`` (:mod:`benchmarks._docs`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import (  # noqa: E402
    add_write_docs_argument,
    markdown_table,
    require_markers,
    write_docs,
)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "reference" / "lme4_power.json"
PAGE = REPO / "docs" / "power-from-fit.md"
SCRIPT = "bench_power_from_fit.py"
MODELS = {"intercepts": "y ~ x + (1 | g)", "slopes": "y ~ x + (1 + x | g)"}
#: The columns of the table the script prints (and writes with --write-docs); "all cores":
#: every usable core of the machine (the note under the table says how many).
COLUMNS = ("model", "tomstats first run (s)", "tomstats ms per refit, 1 core",
           "tomstats ms per refit, all cores", "lme4 glmer() ms (as simr)", "lme4 refit() ms",
           "glmer() / tomstats, 1 core", "glmer() / tomstats, all cores",
           "refit() / tomstats, 1 core")

R_CODE = r"""
suppressPackageStartupMessages(library(lme4))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1]); d$g <- factor(d$g)
n <- as.integer(a[3])
f <- as.formula(a[2])
m <- suppressMessages(suppressWarnings(glmer(f, data = d, family = binomial)))
ys <- simulate(m, nsim = n, seed = 1)
t0 <- proc.time()[["elapsed"]]
for (s in seq_len(n)) invisible(suppressMessages(suppressWarnings(refit(m, ys[[s]]))))
t1 <- proc.time()[["elapsed"]]
for (s in seq_len(n)) {
  d2 <- d; d2$y <- ys[[s]]
  invisible(suppressMessages(suppressWarnings(glmer(f, data = d2, family = binomial))))
}
t2 <- proc.time()[["elapsed"]]
cat((t1 - t0) / n, (t2 - t1) / n, "\n")
"""

def ours(formula: str, data: pd.DataFrame, studies: int, cores: int) -> dict[str, float]:
    """Seconds of a first (compiling) and a second run on ``cores`` cores, and seconds per
    refit of the second."""
    import warnings

    from tomstats.glmm.lme import fit_lme
    from tomstats.planning.from_fit import power_from_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_lme(data, formula)
    t0 = time.perf_counter()
    first = power_from_fit(fit, "x", n_sims=studies, seed=1, type_one=False, progress=False,
                           cores=cores)
    t1 = time.perf_counter()
    second = power_from_fit(fit, "x", n_sims=studies, seed=2, type_one=False, progress=False,
                            cores=cores)
    t2 = time.perf_counter()
    return {"first_s": t1 - t0, "second_s": t2 - t1, "refits": second.refits,
            "per_refit": (t2 - t1) / second.refits,
            "failed": int(first.table["n_failed"].sum() + second.table["n_failed"].sum())}


def lme4(formula: str, data: pd.DataFrame, studies: int) -> tuple[float, float] | None:
    """Seconds per ``refit()`` and per fresh ``glmer()`` call in R, or None without Rscript
    and lme4."""
    if shutil.which("Rscript") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "d.csv"
        script = Path(tmp) / "bench.R"
        data.to_csv(csv, index=False)
        script.write_text(R_CODE)
        res = subprocess.run(["Rscript", str(script), str(csv), formula, str(studies)],
                             capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return None
    refit_s, glmer_s = (float(v) for v in res.stdout.split()[-2:])
    return refit_s, glmer_s


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=1000,
                    help="studies per tomstats run (default 1000, simr's nsim)")
    ap.add_argument("--r-studies", type=int, default=40,
                    help="studies refitted by lme4 (default 40)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS),
                    help="models to time (default: both)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return [f"{name}: `{MODELS[name]}`".replace("|", "\\|") for name in args.models]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.write_docs:
        require_markers(SCRIPT, PAGE)
    data = pd.DataFrame(json.loads(DATA.read_text())["data"])
    from tomstats.planning.from_fit import default_cores

    n_cores = default_cores()
    rows = []
    for name, key in zip(args.models, row_keys(args), strict=True):
        o1 = ours(MODELS[name], data, args.studies, 1)
        on = ours(MODELS[name], data, args.studies, n_cores) if n_cores > 1 else o1
        r = lme4(MODELS[name], data, args.r_studies)
        p1, pn = o1["per_refit"], on["per_refit"]
        na = r is None
        rows.append([key, f"{o1['first_s']:.1f}", f"{1e3 * p1:.2f}", f"{1e3 * pn:.2f}",
                     "n/a" if na else f"{1e3 * r[1]:.0f}", "n/a" if na else f"{1e3 * r[0]:.0f}",
                     "n/a" if na else f"{r[1] / p1:.0f} x", "n/a" if na else f"{r[1] / pn:.0f} x",
                     "n/a" if na else f"{r[0] / p1:.0f} x"])
        print(json.dumps({"model": name, "one_core": o1, "all_cores": on, "cores": n_cores,
                          "lme4_refit": r and r[0], "lme4_glmer": r and r[1]}), flush=True)
    table = markdown_table(COLUMNS, rows)
    note = (f"\nAll cores: {n_cores} here. {args.studies} studies per tomstats run, "
            f"{args.r_studies} refitted by lme4 each way.\n")
    print(table + note)
    if args.write_docs:
        write_docs(SCRIPT, argv, table + note, page=PAGE)


if __name__ == "__main__":
    main()
