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
run's seconds divided by its refits is the amortised cost per refit. lme4: ``Rscript`` fits
the pilot, ``simulate()``\\ s the studies and times ``refit()`` of each (lme4's fastest way
to refit the same design; ``glmer`` from scratch is slower), measured in the same run.
The ratio is lme4's seconds per refit over tomstats'.

    python benchmarks/bench_power_from_fit.py [--studies 200] [--r-studies 40] [--write-docs]

``--write-docs`` replaces the table between the markers in ``docs/power-from-fit.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "reference" / "lme4_power.json"
DOCS = REPO / "docs" / "power-from-fit.md"
MODELS = {"intercepts": "y ~ x + (1 | g)", "slopes": "y ~ x + (1 + x | g)"}
BEGIN = "<!-- begin: table written by bench_power_from_fit.py --write-docs -->"
END = "<!-- end: table written by bench_power_from_fit.py -->"

R_CODE = r"""
suppressPackageStartupMessages(library(lme4))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1]); d$g <- factor(d$g)
n <- as.integer(a[3])
m <- suppressMessages(suppressWarnings(glmer(as.formula(a[2]), data = d, family = binomial)))
ys <- simulate(m, nsim = n, seed = 1)
t0 <- proc.time()[["elapsed"]]
for (s in seq_len(n)) invisible(suppressMessages(suppressWarnings(refit(m, ys[[s]]))))
cat((proc.time()[["elapsed"]] - t0) / n, "\n")
"""


def ours(formula: str, data: pd.DataFrame, studies: int) -> dict[str, float]:
    """Seconds of a first (compiling) and a second run, and seconds per refit of the
    second."""
    import warnings

    from tomstats.glmm.lme import fit_lme
    from tomstats.planning.from_fit import power_from_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_lme(data, formula)
    t0 = time.perf_counter()
    first = power_from_fit(fit, "x", n_sims=studies, seed=1, type_one=False, progress=False)
    t1 = time.perf_counter()
    second = power_from_fit(fit, "x", n_sims=studies, seed=2, type_one=False, progress=False)
    t2 = time.perf_counter()
    return {"first_s": t1 - t0, "second_s": t2 - t1, "refits": second.refits,
            "per_refit": (t2 - t1) / second.refits,
            "failed": int(first.table["n_failed"].sum() + second.table["n_failed"].sum())}


def lme4(formula: str, data: pd.DataFrame, studies: int) -> float | None:
    """Seconds per ``refit()`` of ``glmer`` in R, or None without Rscript and lme4."""
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
    return float(res.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=200,
                    help="studies per tomstats run (default 200)")
    ap.add_argument("--r-studies", type=int, default=40,
                    help="studies refitted by lme4 (default 40)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS),
                    help="models to time (default: both)")
    ap.add_argument("--write-docs", action="store_true",
                    help="write the table into docs/power-from-fit.md")
    args = ap.parse_args()
    data = pd.DataFrame(json.loads(DATA.read_text())["data"])
    rows = []
    for name in args.models:
        o = ours(MODELS[name], data, args.studies)
        r = lme4(MODELS[name], data, args.r_studies)
        shown = MODELS[name].replace("|", "\\|")  # a Markdown table cell
        rows.append({"model": f"{name}: `{shown}`",
                     "tomstats first run (s)": f"{o['first_s']:.1f}",
                     "tomstats ms per refit": f"{1e3 * o['per_refit']:.1f}",
                     "lme4 ms per refit": "n/a" if r is None else f"{1e3 * r:.0f}",
                     "ratio": "n/a" if r is None else f"{r / o['per_refit']:.0f} x"})
        print(json.dumps({"model": name, **o, "lme4_per_refit": r}), flush=True)
    head = list(rows[0])
    table = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                      + ["| " + " | ".join(r[h] for h in head) + " |" for r in rows])
    print(table)
    if args.write_docs:
        load = os.getloadavg()[0]
        cmd = "python benchmarks/bench_power_from_fit.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in (("studies", args.studies),
                                                        ("r_studies", args.r_studies)))
        block = (f"{BEGIN}\n`{cmd}` on {platform.machine()} with {os.cpu_count()} CPUs, "
                 f"load average {load:.1f}, {datetime.date.today().isoformat()}:\n\n"
                 f"{table}\n{END}")
        text = DOCS.read_text(encoding="utf-8")
        start, end = text.index(BEGIN), text.index(END) + len(END)
        DOCS.write_text(text[:start] + block + text[end:], encoding="utf-8")
        print(f"wrote the table into {DOCS}")


if __name__ == "__main__":
    main()
