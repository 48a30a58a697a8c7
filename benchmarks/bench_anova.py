"""Three-way ANOVA of a 100,000-row log with cluster-bootstrap intervals: tomstats vs statsmodels.

The log: 5 LLMs × 5 context lengths × 3 ToM orders (75 cells), questions nested in stories
(400 stories, 1–6 questions of each order per story, so the clusters differ in size), 0/1
correctness, exactly ``--rows`` rows. The analysis: type II SS, F, p, η², partial η², ω²,
partial ω² and generalized η² of the seven effects of ``model * context * order`` with 95 %
BCa intervals from ``--boot`` resamples of the stories within each cell (and the jackknife
over the stories for the acceleration).

- **tomstats:** ``tomstats.anova(log, "correct", [...], ci=0.95, n_boot=2000,
  cluster="story")`` — one call, timed ``--repeats`` times (best and median reported).
- **the command:** ``tomstats anova LOG.csv --between model context order --ci 0.95
  --n-boot 2000 --cluster story`` in a fresh process, start-up, reading the CSV and printing
  included (the acceptance target of the analysis: under 5 s on a 2-CPU machine).
- **statsmodels loop:** what one would write otherwise: per resample, draw the stories of
  each cell with replacement (NumPy indices), ``log.iloc[rows]``,
  ``anova_lm(ols("correct ~ C(model) * C(context) * C(order)").fit(), typ=2)`` and the effect
  sizes. Timed on ``--naive-resamples`` resamples and scaled linearly to ``--boot`` (plus
  one fit on the original data for the point estimates; no jackknife, which would cost one
  more fit per story, so the ratio favours the loop).

    python benchmarks/bench_anova.py [--rows 100000] [--boot 2000] [--repeats 3]
        [--naive-resamples 3] [--write-docs]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

import tomstats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

FACTORS = ["model", "context", "order"]
FORMULA = "correct ~ C(model) * C(context) * C(order)"


def make_log(rows: int, stories: int = 400, seed: int = 0) -> pd.DataFrame:
    """The benchmark log (see the module docstring)."""
    rng = np.random.default_rng(seed)
    per_story = rng.integers(1, 7, size=(stories, 3))  # questions per (story, order)
    story, order = np.nonzero(per_story)
    reps = per_story[story, order]
    base = pd.DataFrame({"story": np.repeat(story, reps), "order": np.repeat(order, reps)})
    parts = []
    for m in range(5):
        for ctx in (200, 500, 1000, 2000, 5000):
            parts.append(base.assign(model=f"llm{m}", context=ctx))
    log = pd.concat(parts, ignore_index=True)
    if len(log) < rows:
        raise SystemExit(f"--rows {rows} is more than the {len(log)} the generator makes")
    log = log.sample(n=rows, random_state=seed).reset_index(drop=True)
    story_effect = rng.normal(0, 0.5, stories)
    eta = (1.5 - 0.8 * log["order"] - 0.3 * np.log(log["context"] / 200)
           + 0.2 * log["model"].str[3:].astype(int) + story_effect[log["story"]])
    log["correct"] = rng.binomial(1, 1 / (1 + np.exp(-eta)))
    return log


def statsmodels_sizes(log: pd.DataFrame) -> pd.DataFrame:
    """Type II table and effect sizes from statsmodels, as one would compute them by hand."""
    tab = anova_lm(ols(FORMULA, log).fit(), typ=2)
    ss, df = tab["sum_sq"], tab["df"]
    ss_res, df_res = ss["Residual"], df["Residual"]
    ms_res = ss_res / df_res
    y = log["correct"].to_numpy(dtype=float)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    eff = tab.drop(index="Residual")
    return pd.DataFrame({
        "SS": eff["sum_sq"],
        "eta2": eff["sum_sq"] / ss_tot,
        "partial_eta2": eff["sum_sq"] / (eff["sum_sq"] + ss_res),
        "omega2": (eff["sum_sq"] - eff["df"] * ms_res) / (ss_tot + ms_res),
        "partial_omega2": (eff["sum_sq"] - eff["df"] * ms_res)
        / (eff["sum_sq"] + (len(y) - eff["df"]) * ms_res),
        "generalized_eta2": eff["sum_sq"] / (eff["sum_sq"] + ss_res),
    })


def naive_loop(log: pd.DataFrame, resamples: int, seed: int = 0) -> float:
    """Seconds for ``resamples`` cluster-bootstrap resamples analysed with statsmodels."""
    rng = np.random.default_rng(seed)
    groups = log.groupby(FACTORS + ["story"]).indices  # rows of each story within each cell
    by_cell: dict[tuple, list[np.ndarray]] = {}
    for key, idx in groups.items():
        by_cell.setdefault(key[:3], []).append(idx)
    start = time.perf_counter()
    for _ in range(resamples):
        rows = np.concatenate([
            np.concatenate([clusters[i] for i in rng.integers(0, len(clusters), len(clusters))])
            for clusters in by_cell.values()
        ])
        statsmodels_sizes(log.iloc[rows])
    return time.perf_counter() - start


#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("what", "tomstats (best / median)", "statsmodels loop", "ratio")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the generated log")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each tomstats timing")
    ap.add_argument("--naive-resamples", type=int, default=3,
                    help="resamples the statsmodels loop is timed on, then scaled")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return ["point estimates (table and effect sizes)",
            f"{args.boot:,} row-bootstrap resamples",
            f"{args.boot:,} story-bootstrap resamples",
            "`tomstats anova LOG.csv --between model context order --ci 0.95 --n-boot "
            f"{args.boot} --cluster story`, a new process (start-up, CSV, printing)"]


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)

    log = make_log(args.rows)
    print(f"log: {len(log):,} rows, {log.groupby(FACTORS).ngroups} cells, "
          f"{log.groupby(FACTORS + ['story']).ngroups:,} story clusters; "
          f"{os.cpu_count()} CPUs, {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")

    def ours(**kw: object) -> pd.DataFrame:
        return tomstats.anova(log, "correct", FACTORS, binary=True, **kw)

    # the same numbers as statsmodels on the original data
    point = ours().set_index("source").drop(index="Residual")
    ref = statsmodels_sizes(log)
    ref.index = point.index
    worst = float(np.max(np.abs(point[ref.columns].to_numpy() / ref.to_numpy() - 1)))
    print(f"largest relative difference to statsmodels (SS and effect sizes): {worst:.1e}")

    timings = {}
    for label, kw in (("point estimates only", {}),
                      ("row bootstrap", {"ci": 0.95, "n_boot": args.boot}),
                      ("story bootstrap", {"ci": 0.95, "n_boot": args.boot,
                                           "cluster": "story"})):
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = ours(**kw)
            runs.append(time.perf_counter() - t0)
        timings[label] = runs
    order = out.set_index("source").loc["order"]
    print(f"  order: eta2 {order['eta2']:.4f} [{order['eta2_low']:.4f}, "
          f"{order['eta2_high']:.4f}], generalized {order['generalized_eta2']:.4f} "
          f"[{order['generalized_eta2_low']:.4f}, {order['generalized_eta2_high']:.4f}]")

    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "log.csv"
        log.to_csv(csv, index=False)
        cmd = [sys.executable, "-m", "tomstats", "anova", str(csv), "--between", *FACTORS,
               "--ci", "0.95", "--n-boot", str(args.boot), "--cluster", "story"]
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            runs.append(time.perf_counter() - t0)
    timings["command"] = runs

    t0 = time.perf_counter()
    statsmodels_sizes(log)
    fit_once = time.perf_counter() - t0
    per = naive_loop(log, args.naive_resamples) / args.naive_resamples
    naive_total = fit_once + per * args.boot

    def ours_cell(label: str) -> str:
        r = timings[label]
        return f"{min(r):.3f} s / {np.median(r):.3f} s"

    keys = row_keys(args)
    rows = [[keys[0], ours_cell("point estimates only"), f"{fit_once:.2f} s",
             f"{fit_once / min(timings['point estimates only']):,.0f} ×"],
            [keys[1], ours_cell("row bootstrap"), "—", "—"],
            [keys[2], ours_cell("story bootstrap"),
             f"{per:.2f} s each (timed on {args.naive_resamples}) → {naive_total:,.0f} s",
             f"{naive_total / min(timings['story bootstrap']):,.0f} ×"],
            [keys[3], ours_cell("command"), "—", "—"]]
    table = markdown_table(COLUMNS, rows)
    note = (f"\n{len(log):,} rows, {log.groupby(FACTORS).ngroups} cells, "
            f"{log.groupby(FACTORS + ['story']).ngroups:,} story clusters; {args.repeats} runs "
            f"each; point estimates equal statsmodels' to a relative {worst:.1e}.\n")
    print(table + note, end="")
    if args.write_docs:
        write_docs("bench_anova.py", argv, table + note)


if __name__ == "__main__":
    main()
