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

``--design real`` times designs of a real evaluation's size instead: a crossed log of 20
or 40 LLMs × 200 passages (one row per pair: 4,000 and 8,000 rows), each passage with a
false-belief flag ``fb`` and a cue ``cue`` (0/1), simulated (seeded) with LLM SD 0.8, an
LLM belief-effect SD 0.5 (correlation 0.3) and passage SD 0.6, and refitted with

``intercepts``
    ``correct ~ fb * cue + (1 | model) + (1 | item)``;
``slopes``
    ``correct ~ fb * cue + (1 + fb | model) + (1 | item)``,

the power of the term ``fb`` (Wald test).

    python benchmarks/bench_power_from_fit.py [--design small|real] [--studies N]
        [--r-studies N] [--write-docs]

``--studies`` defaults to 1000 for the small designs, simr's ``powerSim`` default
(``nsim``): the per-run costs (building the design, compiling on the first run) are then
shared as in a real power run; to 100 for the real-size ones (``--r-studies``: 40 and 5).

``--write-docs`` replaces the table between the script's markers in
``docs/power-from-fit.md`` (those of ``[real]`` for ``--design real``;
:mod:`benchmarks._docs`).
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
#: The real-size designs: model -> formula, and the numbers of LLMs (× 200 passages).
REAL_MODELS = {"intercepts": "correct ~ fb * cue + (1 | model) + (1 | item)",
               "slopes": "correct ~ fb * cue + (1 + fb | model) + (1 | item)"}
REAL_LLMS = (20, 40)
REAL_PASSAGES = 200
#: The columns of the table the script prints (and writes with --write-docs); "all cores":
#: every usable core of the machine (the note under the table says how many).
COLUMNS = ("model", "tomstats first run (s)", "tomstats ms per refit, 1 core",
           "tomstats ms per refit, all cores", "lme4 glmer() ms (as simr)", "lme4 refit() ms",
           "glmer() / tomstats, 1 core", "glmer() / tomstats, all cores",
           "refit() / tomstats, 1 core")

R_CODE = r"""
suppressPackageStartupMessages(library(lme4))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1])
for (v in intersect(c("g", "model", "item"), names(d))) d[[v]] <- factor(d[[v]])
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

def real_log(n_llms: int, n_items: int = REAL_PASSAGES, seed: int = 25) -> pd.DataFrame:
    r"""The crossed log of ``--design real`` (module docstring), one row per LLM and passage.

    .. math::

        \operatorname{logit} P(\text{correct}) = 1 - 1.2\,fb + 0.3\,cue - 0.5\,fb\,cue
            + a_m + s_m fb + c_j,

    :math:`a_m \sim N(0, 0.8^2)`, :math:`s_m` with SD 0.5 and correlation 0.3 with
    :math:`a_m`, :math:`c_j \sim N(0, 0.6^2)`.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    fb = np.arange(n_items) % 2
    cue = (np.arange(n_items) // 2) % 2
    llm = np.repeat(np.arange(n_llms), n_items)
    item = np.tile(np.arange(n_items), n_llms)
    z = rng.normal(size=(2, n_llms))
    a, slope = 0.8 * z[0], 0.5 * (0.3 * z[0] + np.sqrt(1 - 0.09) * z[1])
    eta = (1.0 - 1.2 * fb[item] + 0.3 * cue[item] - 0.5 * fb[item] * cue[item] + a[llm]
           + slope[llm] * fb[item] + rng.normal(0, 0.6, n_items)[item])
    y = (rng.random(llm.size) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"model": [f"m{k:02d}" for k in llm],
                         "item": [f"p{j:03d}" for j in item],
                         "fb": fb[item], "cue": cue[item], "correct": y})


def ours(formula: str, data: pd.DataFrame, studies: int, cores: int,
         term: str = "x") -> dict[str, float]:
    """Seconds of a first (compiling) and a second run on ``cores`` cores, and seconds per
    refit of the second."""
    import warnings

    from tomstats.glmm.lme import fit_lme
    from tomstats.planning.from_fit import power_from_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_lme(data, formula)
    t0 = time.perf_counter()
    first = power_from_fit(fit, term, n_sims=studies, seed=1, type_one=False, progress=False,
                           cores=cores)
    t1 = time.perf_counter()
    second = power_from_fit(fit, term, n_sims=studies, seed=2, type_one=False, progress=False,
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
    ap.add_argument("--design", choices=("small", "real"), default="small",
                    help="the 20 x 30 pilot of the power docs, or logs of 20 and 40 LLMs x "
                         "200 passages (module docstring)")
    ap.add_argument("--studies", type=int,
                    help="studies per tomstats run (default 1000, simr's nsim; real: 100)")
    ap.add_argument("--r-studies", type=int,
                    help="studies refitted by lme4 (default 40; real: 5)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS),
                    help="models to time (default: both)")
    add_write_docs_argument(ap)
    return ap


def _cases(args: argparse.Namespace) -> list[tuple[str, str, int | None]]:
    """(first cell, formula, LLMs or None for the small pilot) of each row, in order."""
    if args.design == "small":
        return [(f"{name}: `{MODELS[name]}`".replace("|", "\\|"), MODELS[name], None)
                for name in args.models]
    return [(f"{name}, {k} LLMs x {REAL_PASSAGES}: `{REAL_MODELS[name]}`".replace("|", "\\|"),
             REAL_MODELS[name], k) for k in REAL_LLMS for name in args.models]


def row_keys(args: argparse.Namespace, part: str = "") -> list[str]:
    """The first cell of each row, in order; ``part`` is the docs block's (``""``: the small
    pilot, ``"real"``: ``--design real``)."""
    if (part or "small") != args.design:
        raise ValueError(f"part {part!r} is not the table of --design {args.design}")
    return [key for key, _, _ in _cases(args)]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    real = args.design == "real"
    part = "real" if real else ""
    studies = args.studies or (100 if real else 1000)
    r_studies = args.r_studies or (5 if real else 40)
    if args.write_docs:
        require_markers(SCRIPT, PAGE, part)
    pilot = pd.DataFrame(json.loads(DATA.read_text())["data"])
    from tomstats.planning.from_fit import default_cores

    n_cores = default_cores()
    rows = []
    for key, formula, n_llms in _cases(args):
        data = pilot if n_llms is None else real_log(n_llms)
        term = "fb" if real else "x"
        o1 = ours(formula, data, studies, 1, term)
        on = ours(formula, data, studies, n_cores, term) if n_cores > 1 else o1
        r = lme4(formula, data, r_studies)
        p1, pn = o1["per_refit"], on["per_refit"]
        na = r is None
        rows.append([key, f"{o1['first_s']:.1f}", f"{1e3 * p1:.2f}", f"{1e3 * pn:.2f}",
                     "n/a" if na else f"{1e3 * r[1]:.0f}", "n/a" if na else f"{1e3 * r[0]:.0f}",
                     "n/a" if na else f"{r[1] / p1:.0f} x", "n/a" if na else f"{r[1] / pn:.0f} x",
                     "n/a" if na else f"{r[0] / p1:.0f} x"])
        print(json.dumps({"model": key, "one_core": o1, "all_cores": on, "cores": n_cores,
                          "lme4_refit": r and r[0], "lme4_glmer": r and r[1]}), flush=True)
    table = markdown_table(COLUMNS, rows)
    note = (f"\nAll cores: {n_cores} here. {studies} studies per tomstats run, "
            f"{r_studies} refitted by lme4 each way.\n")
    print(table + note)
    if args.write_docs:
        write_docs(SCRIPT, argv, table + note, page=PAGE, part=part)


if __name__ == "__main__":
    main()
