"""Coverage and width of the two intervals of partial η²: cluster-bootstrap BCa vs noncentral F.

Data: the simulation paper's 5 × 3 design (context 200–5,000 words × ToM order 0–2) answered by
its five LLMs (capability levels 0.7–1.3), ``--questions`` questions per LLM and cell, drawn by
the package's own simulator (:func:`tomstats.simulation.simulator.simulate_questions`) from
equation (1) with α = δ = 0 and the ToM-order penalty γ in ``--gammas`` (0: no effect; then a
small and a moderate one), σ as in the paper. Context and the interaction are then exactly null
(their cell means do not depend on context) and ToM order has the true partial η² shown. Two
dependence structures:

- **independent**: every answer drawn on its own (``latent=False``); the bootstrap resamples
  rows.
- **clustered**: as in real logs, questions come in stories of ``--story-size`` questions that
  share their latent noise ε ~ N(0, σ²), and every story is answered by all five LLMs
  (``latent=True, shared_items=True``); the bootstrap resamples stories within cells, the
  noncentral-F interval divides F by the stories' design effect (and, in a third column, is
  computed as if the rows were independent).

Each data set is analysed as ``tomstats anova`` does (the pooled two-way ANOVA of the 0/1
outcome, type II) with 95 % intervals of partial η²: ``interval="bca"`` (``--n-boot``
resamples) and ``interval="ncf"``. The true partial η² of a term is
:math:`\\sigma^2_T / (\\sigma^2_T + \\sigma^2_e)` with :math:`\\sigma^2_T` the mean square of the
term's component of the expected cell accuracies :math:`\\bar p_{ct}` (averaged over the LLMs)
and :math:`\\sigma^2_e` the mean within-cell variance of an answer (Bernoulli variance of each
LLM plus the variance between LLMs) — the limit of :math:`SS_T/(SS_T + SS_\\text{res})`.
Coverage is the share of ``--replicates`` data sets whose interval holds it, with its Monte
Carlo standard error :math:`\\sqrt{c(1-c)/R}`; width the mean width (± its standard error).

    python benchmarks/bench_eta2_intervals.py [--replicates 400] [--questions 100]
        [--story-size 5] [--n-boot 1000] [--gammas 0 0.2 0.7] [--seed 0] [--write-docs]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import (  # noqa: E402
    add_write_docs_argument,
    markdown_table,
    require_markers,
    write_docs,
)

from tomstats.analysis.row_anova import anova  # noqa: E402
from tomstats.design import CONTEXT, TOM, paper_design  # noqa: E402
from tomstats.model import Params, cell_probabilities  # noqa: E402
from tomstats.simulation.paper import PAPER_PARAMS  # noqa: E402
from tomstats.simulation.simulator import simulate_questions  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "docs" / "anova.md"
SCRIPT = "bench_eta2_intervals.py"
#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("data", "γ", "term", "true partial η²", "BCa coverage", "ncf coverage",
           "ncf coverage, clusters ignored", "BCa mean width", "ncf mean width")
#: The intervals compared: (method, whether the clusters are passed).
METHODS = {"bca": ("bca", True), "ncf": ("ncf", True), "ncf_rows": ("ncf", False)}
TERMS = (CONTEXT, TOM, f"{CONTEXT}:{TOM}")
LABELS = {CONTEXT: "context", TOM: "ToM order", f"{CONTEXT}:{TOM}": "interaction"}
STRUCTURES = ("independent", "clustered")
CHUNK = 50  # data sets simulated at once


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=400, help="data sets per scenario")
    ap.add_argument("--questions", type=int, default=100,
                    help="questions per LLM and cell (the paper: 500)")
    ap.add_argument("--story-size", type=int, default=5,
                    help="questions per story in the clustered data")
    ap.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (BCa)")
    ap.add_argument("--gammas", type=float, nargs="+", default=[0.0, 0.2, 0.7],
                    help="ToM-order penalties γ (logit per order): none, small, moderate")
    ap.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """The first cells of each row, in order."""
    return [(s, f"{g:g}", LABELS[t]) for s in STRUCTURES for g in args.gammas for t in TERMS]


def true_partial_eta2(params: Params) -> dict[str, float]:
    """Population partial η² of each term of the pooled two-way ANOVA (balanced design)."""
    d = paper_design()
    cap = np.asarray(d.capability)[:, None, None]
    p = np.asarray(cell_probabilities(params, d.context[None, :, None], d.tom[None, None, :],
                                      cap), dtype=float)  # (LLM, context, order)
    mu = p.mean(axis=0)
    var_e = float(np.mean(np.mean(p * (1 - p), axis=0) + p.var(axis=0)))
    a = mu.mean(axis=1) - mu.mean()
    b = mu.mean(axis=0) - mu.mean()
    ab = mu - mu.mean(axis=1, keepdims=True) - mu.mean(axis=0, keepdims=True) + mu.mean()
    comp = {CONTEXT: float(np.mean(a**2)), TOM: float(np.mean(b**2)),
            f"{CONTEXT}:{TOM}": float(np.mean(ab**2))}
    tiny = 1e-12 * var_e  # a null term's rounding error is no effect
    return {k: 0.0 if v < tiny else v / (v + var_e) for k, v in comp.items()}


def _data(structure: str, params: Params, questions: int, story: int, seed: int,
          replicates: int) -> pd.DataFrame:
    design = dataclasses.replace(paper_design(), n_per_cell=questions)
    if structure == "independent":
        return simulate_questions(design, params, seed=seed, replicates=replicates)
    return simulate_questions(design, params, seed=seed, replicates=replicates, latent=True,
                              shared_items=True, items_per_cell=questions // story)


def run_scenario(structure: str, gamma: float, args: argparse.Namespace
                 ) -> dict[str, dict[str, np.ndarray]]:
    """Bounds of both intervals per data set: ``{method: {term: (R, 2) array}}``."""
    params = Params(0.0, gamma, 0.0, float(PAPER_PARAMS.sigma))
    out: dict[str, dict[str, list[np.ndarray]]] = {m: {t: [] for t in TERMS} for m in METHODS}
    done, chunk_seed = 0, args.seed * 1000 + STRUCTURES.index(structure) * 100
    while done < args.replicates:
        r = min(CHUNK, args.replicates - done)
        df = _data(structure, params, args.questions, args.story_size,
                   chunk_seed + done // CHUNK + int(round(gamma * 1000)) * 7919, r)
        cluster = "item" if structure == "clustered" else None
        for _rep, sub in df.groupby("replicate", sort=True):
            for key, (method, clustered) in METHODS.items():
                tab = anova(sub, "correct", [CONTEXT, TOM], ci=0.95, n_boot=args.n_boot,
                            cluster=cluster if clustered else None, seed=args.seed + done,
                            interval=method)
                for t in TERMS:
                    row = tab[tab["source"] == t].iloc[0]
                    out[key][t].append(np.array([row["partial_eta2_low"],
                                                 row["partial_eta2_high"]]))
        done += r
    return {m: {t: np.vstack(v) for t, v in d.items()} for m, d in out.items()}


def _coverage(b: np.ndarray, truth: float) -> str:
    hit = (b[:, 0] <= truth) & (truth <= b[:, 1])
    c, r = hit.mean(), len(hit)
    return f"{100 * c:.1f} % ± {100 * np.sqrt(c * (1 - c) / r):.1f}"


def _width(b: np.ndarray) -> str:
    w = b[:, 1] - b[:, 0]
    return f"{w.mean():.4f} ± {w.std(ddof=1) / np.sqrt(len(w)):.5f}"


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.write_docs:
        require_markers(SCRIPT, PAGE)
    if args.questions % args.story_size:
        raise SystemExit(f"--questions {args.questions} is not a multiple of --story-size "
                         f"{args.story_size}")
    rows = []
    t0 = time.perf_counter()
    for structure in STRUCTURES:
        for gamma in args.gammas:
            truth = true_partial_eta2(Params(0.0, gamma, 0.0, float(PAPER_PARAMS.sigma)))
            res = run_scenario(structure, gamma, args)
            for t in TERMS:
                rows.append([structure, f"{gamma:g}", LABELS[t], f"{truth[t]:.4f}",
                             _coverage(res["bca"][t], truth[t]),
                             _coverage(res["ncf"][t], truth[t]),
                             _coverage(res["ncf_rows"][t], truth[t]) if structure == "clustered"
                             else "(same)",
                             _width(res["bca"][t]), _width(res["ncf"][t])])
            print(f"{structure} γ={gamma:g} done, {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
    table = markdown_table(COLUMNS, rows)
    note = (f"\n{args.replicates} data sets per row, {args.questions} questions per LLM and "
            f"cell (5 LLMs × 15 cells), stories of {args.story_size} in the clustered data, "
            f"{args.n_boot} bootstrap resamples; coverage ± Monte Carlo standard error, "
            f"{time.perf_counter() - t0:.0f} s in all.\n")
    print(table + note)
    if args.write_docs:
        write_docs(SCRIPT, argv, table + note, page=PAGE)


if __name__ == "__main__":
    main()
