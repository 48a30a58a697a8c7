"""Full paper analysis: naive pandas + statsmodels loop vs the two tomstats paths.

The "full paper analysis" is, per Monte Carlo replicate, 54 simulated studies (5 capability
levels + the 49 points of the 7×7 γ × α grid) of 7,500 questions each, and a two-way type II
ANOVA of each. The naive implementation is what a researcher would write: draw the
questions with NumPy, build a DataFrame, ``ols('correct ~ C(context) * C(tom)')`` and
``anova_lm(typ=2)`` per study. tomstats times exclude compilation (one warm-up call each).

    python benchmarks/bench_simulation.py [--replicates 10 100 1000] [--naive-replicates 2]
        [--write-docs]

Prints seconds per configuration, the speed-up over the naive loop (per replicate, the
naive time is measured on ``--naive-replicates`` and scaled linearly), and the per-question
Bernoulli throughput in draws per second.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence

import jax
import numpy as np
import pandas as pd
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from tomstats.design import paper_design
from tomstats.simulation.paper import PAPER_PARAMS
from tomstats.simulation.sensitivity_grid import PAPER_ALPHA, PAPER_GAMMA
from tomstats.simulation.simulator import expected_cells, simulate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

DESIGN = paper_design()
GRID = {"gamma": list(PAPER_GAMMA), "alpha": list(PAPER_ALPHA)}


def _all_cell_probabilities() -> np.ndarray:
    """(54, 5, 3) expected accuracies: 5 capability levels, then the 49 grid points."""
    main = expected_cells(DESIGN, PAPER_PARAMS).values
    grid = expected_cells(DESIGN.with_(capability=(1.0,)), PAPER_PARAMS, grid=GRID).values
    return np.concatenate([main, grid.reshape(-1, 5, 3)])


def naive(replicates: int, seed: int = 0) -> float:
    """Seconds for the naive loop: NumPy draws + statsmodels ANOVA per study."""
    rng = np.random.default_rng(seed)
    probs = _all_cell_probabilities()
    c = np.repeat(DESIGN.context, 3 * 500)
    t = np.tile(np.repeat(DESIGN.tom, 500), 5)
    t0 = time.perf_counter()
    for _ in range(replicates):
        for p in probs:
            y = (rng.random(7500) < np.repeat(p.reshape(-1), 500)).astype(float)
            df = pd.DataFrame({"correct": y, "context": c, "tom": t})
            anova_lm(ols("correct ~ C(context) * C(tom)", data=df).fit(), typ=2)
    return time.perf_counter() - t0


def ours(replicates: int, path: str, seed: int = 0) -> float:
    """Seconds for the same analysis with tomstats (after one compiling call)."""

    def run() -> None:
        simulate(DESIGN, PAPER_PARAMS, replicates=replicates, seed=seed, path=path,
                 progress=False)
        simulate(DESIGN.with_(capability=(1.0,)), PAPER_PARAMS, replicates=replicates,
                 seed=seed + 1, path=path, grid=GRID, progress=False)

    run()
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def draws_per_second(replicates: int = 200) -> float:
    """Per-question Bernoulli throughput of the bernoulli path (draws/s, warm)."""
    n_draws = replicates * 54 * 7500
    return n_draws / ours(replicates, "bernoulli")


#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("replicates", "path", "seconds", "naive loop (scaled)", "speed-up")
#: The per-question path is timed up to this many replicates (it draws every question).
MAX_BERNOULLI = 1000


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, nargs="+", default=[10, 100, 1000],
                    help="replicate counts timed (default: 10 100 1000)")
    ap.add_argument("--naive-replicates", type=int, default=2,
                    help="replicates the naive loop is timed on, then scaled (default: 2)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(replicates, path) of each row, in order: both paths, the per-question one only up to
    :data:`MAX_BERNOULLI` replicates."""
    return [(f"{r:,}", path) for r in args.replicates for path in ("exact", "bernoulli")
            if not (path == "bernoulli" and r > MAX_BERNOULLI)]


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"JAX {jax.__version__} on {jax.devices()[0].platform} × {jax.device_count()}")
    naive_per_rep = naive(args.naive_replicates) / args.naive_replicates
    print(f"naive pandas+statsmodels: {naive_per_rep:.3f} s per replicate "
          f"(54 studies; measured on {args.naive_replicates})")
    rows = []
    for reps, path in row_keys(args):
        r = int(reps.replace(",", ""))
        s = ours(r, path)
        scaled = naive_per_rep * r
        rows.append([reps, path, f"{s:.3g}", f"{scaled:,.0f} s" if scaled >= 100 else
                     f"{scaled:.3g} s",
                     f"{naive_per_rep * r / s:,.0f} ×"])
    table = markdown_table(COLUMNS, rows)
    draws = (f"\nNaive loop: {naive_per_rep:.2f} s per replicate (54 studies), timed on "
             f"{args.naive_replicates} and scaled. Per-question path: "
             f"{draws_per_second() / 1e6:,.0f} M draws/s (200 replicates, warm). JAX "
             f"{jax.__version__} on {jax.devices()[0].platform} × {jax.device_count()}.\n")
    print(table + draws, end="")
    if args.write_docs:
        write_docs("bench_simulation.py", argv, table + draws)


if __name__ == "__main__":
    main()
