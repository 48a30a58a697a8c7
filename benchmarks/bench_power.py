"""Power curves: tomstats.power against the obvious loops, measured in one run.

Three comparisons, each a 10-value × 1,000-replicate power curve of the paper's 5 × 3 design
(five LLMs, one per capability level):

1. **ANOVA** (``anova:interaction`` and the two main effects): tomstats, warm (compiled once),
   against the naive loop a researcher would write — per simulated study and LLM, draw the
   answers with NumPy, build a DataFrame, ``anova_lm(ols("y ~ C(c) * C(t)"), typ=2)``.
2. **Logistic GLM** (``glm-lrt:delta``: full and reduced fit per study and LLM) against a
   statsmodels ``Logit`` loop on one row per question.
3. **Laplace GLMM** with crossed random intercepts ``(1 | llm) + (1 | item)`` on a 7,500-row
   log (5 LLMs × 15 cells × 100 items): the amortised seconds per fit of a batch of studies
   against R lme4 ``glmer(nAGQ = 1)`` on the same kind of data, timed inside R through
   ``Rscript`` in the same run (skipped, and said so, without ``Rscript``/lme4).

The naive loops are timed on a sample of studies (``--naive-studies``) and scaled linearly to
the curve's size; the ratio is (naive seconds for the whole curve) / (tomstats seconds).

    python benchmarks/bench_power.py [--replicates 1000] [--naive-studies 40]
        [--glmm-replicates 64] [--glmm-r-fits 5] [--skip-glmm] [--write-docs]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import statsmodels.api as sm
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

import tomstats
from tomstats.design import paper_design
from tomstats.model import cell_probabilities
from tomstats.simulation.simulator import item_counts, item_trials
from tomstats.simulation.study import StudyConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

VALUES = [10, 20, 30, 50, 75, 100, 150, 200, 300, 500]
ANOVA_TESTS = ["anova:tom_order", "anova:context_length", "anova:interaction"]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def ours(tests: list[str], replicates: int) -> tuple[float, float]:
    """(cold seconds, warm seconds) of the whole curve."""
    def run():
        return tomstats.power(StudyConfig(), along={"questions_per_cell": VALUES},
                              tests=tests, replicates=replicates, progress=False)
    cold, _ = _timed(run)
    warm, _ = _timed(run)
    return cold, warm


def _study_rows(rng: np.random.Generator, p: np.ndarray, n: int) -> pd.DataFrame:
    design = paper_design()
    c, t = np.meshgrid(design.context, design.tom, indexing="ij")
    y = (rng.random((p.size, n)) < p.reshape(-1, 1)).astype(float).ravel()
    return pd.DataFrame({"y": y, "c": np.repeat(c.ravel(), n), "t": np.repeat(t.ravel(), n)})


def naive(kind: str, studies: int, seed: int = 0) -> float:
    """Seconds per (study, LLM) analysis of the naive loop, averaged over the values."""
    rng = np.random.default_rng(seed)
    d = paper_design()
    params = StudyConfig().params
    p_all = np.asarray(cell_probabilities(params, d.context[:, None], d.tom[None, :],
                                          np.asarray(d.capability)[:, None, None]))
    total, count = 0.0, 0
    for i in range(studies):
        n = VALUES[i % len(VALUES)]
        df = _study_rows(rng, p_all[i % len(d.capability)], n)
        t0 = time.perf_counter()
        if kind == "anova":
            anova_lm(ols("y ~ C(c) * C(t)", data=df).fit(), typ=2)
        else:
            x = np.column_stack([np.ones(len(df)), df.c * np.log1p(df.c / 500), df.t,
                                 df.c * df.t])
            sm.Logit(df.y, x).fit(disp=0)
            sm.Logit(df.y, x[:, :3]).fit(disp=0)
        total += time.perf_counter() - t0
        count += 1
    return total / count


R_SCRIPT = r"""
suppressMessages(library(lme4))
d <- read.csv(commandArgs(TRUE)[1])
d$llm <- factor(d$llm); d$item <- factor(d$item)
times <- c()
for (i in seq_len(as.integer(commandArgs(TRUE)[2]))) {
  t <- system.time(m <- glmer(y ~ x1 + x2 + x3 + (1 | llm) + (1 | item), data = d,
                              family = binomial, nAGQ = 1))[["elapsed"]]
  times <- c(times, t)
}
cat(sprintf("%.6f\n", median(times)))
"""


def glmm(replicates: int, r_fits: int) -> dict[str, float | None]:
    """Amortised seconds per Laplace fit (tomstats, warm) and per glmer fit (R)."""
    d = paper_design().with_(n_per_cell=100)
    cfg = StudyConfig(design=d)
    kw = dict(along={"questions_per_cell": [100]}, tests=["glmm-wald:delta"],
              replicates=replicates, progress=False)
    cold, _ = _timed(lambda: tomstats.power(cfg, **kw))
    warm, res = _timed(lambda: tomstats.power(cfg, **kw))
    out: dict[str, float | None] = {"ours_cold_s": cold, "ours_per_fit_s": warm / replicates,
                                    "failed": float(res.data["n_failed"].sum()), "glmer_s": None}
    if not shutil.which("Rscript"):
        print("Rscript not found: lme4 comparison skipped")
        return out
    # one simulated log from the same simulator: item effects shared by the five LLMs
    y = np.asarray(item_counts(jax.random.key(1), cfg.params, d.context, d.tom,
                               np.asarray(d.capability), item_trials(100, 100)))
    L, C, T, n_i = y.shape
    j, ci, ti, q = (a.ravel() for a in np.indices(y.shape))
    rows = pd.DataFrame({"y": y.ravel(), "llm": j, "item": ci * 1000 + ti * 100 + q,
                         "c": d.context[ci], "t": d.tom[ti]})
    df = rows
    df["x1"] = df.c * np.log1p(df.c / 500) / 1000
    df["x2"] = df.t
    df["x3"] = df.c * df.t / 1000
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "log.csv"
        df.to_csv(f, index=False)
        script = Path(tmp) / "glmer.R"
        script.write_text(R_SCRIPT)
        res = subprocess.run(["Rscript", str(script), str(f), str(r_fits)],
                             capture_output=True, text=True, timeout=1200, check=False)
    if res.returncode != 0:
        print("Rscript/lme4 failed:", res.stderr[-500:])
        return out
    out["glmer_s"] = float(res.stdout.strip().splitlines()[-1])
    return out


#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("analysis", "tomstats (cold / warm)", "naive loop", "ratio (warm)")
N_LLMS = 5  # the paper design's capability levels


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=1000, help="studies per value")
    ap.add_argument("--naive-studies", type=int, default=40,
                    help="studies the naive loops are timed on, then scaled")
    ap.add_argument("--glmm-replicates", type=int, default=64,
                    help="GLMM fits the tomstats time per fit is amortised over")
    ap.add_argument("--glmm-r-fits", type=int, default=5, help="lme4 fits timed (median)")
    ap.add_argument("--skip-glmm", action="store_true", help="leave the GLMM row out")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    n = len(VALUES) * args.replicates * N_LLMS
    keys = [f"two-way ANOVA, three terms, {n:,} analyses",
            f"logistic GLM, LRT of δ (full + reduced fit), {n:,} analyses"]
    if not args.skip_glmm:
        keys.append("Laplace GLMM `(1 \\| llm) + (1 \\| story)`, 7,500 rows")
    return keys


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"JAX {jax.__version__} on {jax.default_backend()}")
    assert len(paper_design().capability) == N_LLMS
    keys = row_keys(a)
    rows = []
    for key, (kind, tests) in zip(keys, (("anova", ANOVA_TESTS), ("glm", ["glm-lrt:delta"])),
                                  strict=False):
        cold, warm = ours(tests, a.replicates)
        per = naive(kind, a.naive_studies)
        naive_total = per * len(VALUES) * a.replicates * N_LLMS
        what = ("statsmodels `anova_lm(ols(...), typ=2)`" if kind == "anova"
                else "statsmodels `Logit` twice")
        rows.append([key, f"{cold:.2f} s / {warm:.2f} s",
                     f"{what}: {1e3 * per:.1f} ms each → {naive_total:,.0f} s",
                     f"{naive_total / warm:,.0f} ×"])
    if not a.skip_glmm:
        g = glmm(a.glmm_replicates, a.glmm_r_fits)
        ours_ms = 1e3 * g["ours_per_fit_s"]
        first = (f"{ours_ms:.1f} ms per fit (over {a.glmm_replicates} studies; first call "
                 f"{g['ours_cold_s']:.1f} s with compilation; failed fits {g['failed']:.0f})")
        if g["glmer_s"] is None:
            rows.append([keys[2], first, "lme4 not available", "—"])
        else:
            rows.append([keys[2], first, f"lme4 `glmer(nAGQ = 1)` through `Rscript`: "
                         f"{g['glmer_s']:.2f} s per fit (median of {a.glmm_r_fits})",
                         f"{g['glmer_s'] / g['ours_per_fit_s']:,.0f} ×"])
    table = markdown_table(COLUMNS, rows)
    print(table, end="")
    if a.write_docs:
        write_docs("bench_power.py", argv, table)


if __name__ == "__main__":
    main()
