"""Parameter recovery of the structural GLMM: coverage of 50 % and 95 % posterior intervals.

Each dataset is simulated from equation (1) with known parameters by
:func:`tomstats.simulate.simulate_questions` (``latent=True, shared_items=True``): every
capability level acts as one LLM answering the same items, so the data are crossed
model × item with item noise :math:`\\varepsilon_k\\sim N(0,\\sigma^2)` shared by the LLMs.
The structural model (NumPyro NUTS, non-centred, item intercepts) is fitted to each, and
the central 50 % and 95 % posterior intervals of :math:`\\alpha, \\gamma, \\delta, \\sigma`
and of every capability :math:`m_j` are checked against the truth.

With a calibrated posterior, the 95 % intervals cover the truth in 95 % of datasets; the
Monte Carlo standard error of a coverage estimate from ``n`` datasets is
:math:`\\sqrt{0.95\\cdot0.05/n}` (3.1 points at n = 50, 1.5 at n = 200).

Resumable: each dataset's result is written to ``OUT/datasets/ds_#####.json`` (atomically)
and skipped on a rerun, so the study can be run in chunks::

    python benchmarks/glmm_recovery.py --n-datasets 200 --out out/recovery
    python benchmarks/glmm_recovery.py --summary-only --out out/recovery

The summary (``OUT/coverage.csv``, ``OUT/summary.json``, printed table) covers every
dataset found in ``OUT/datasets``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Capability levels simulated as LLMs (crossed with the items).
CAPABILITIES = (0.8, 1.0, 1.2)
#: Questions per design cell and LLM (5 × 3 cells → 15·n items, 45·n rows).
N_PER_CELL = 6
PARAM_NAMES = ("alpha", "gamma", "delta", "sigma")


def simulate_dataset(index: int, *, n_per_cell: int = N_PER_CELL,
                     capabilities: Sequence[float] = CAPABILITIES,
                     seed: int = 20240) -> tuple[pd.DataFrame, dict[str, float]]:
    """Dataset ``index`` (seeded by ``seed + index``) in the GLMM's standard columns.

    Returns the long frame (``model``, ``item``, ``tom_order``, ``context_words``,
    ``correct``) and the true values keyed as in the posterior (``capability[<llm>]``).
    """
    from tomstats.calibration import PAPER_PARAMS
    from tomstats.design import paper_design
    from tomstats.simulate import simulate_questions

    design = paper_design().with_(n_per_cell=n_per_cell, capability=tuple(capabilities))
    df = simulate_questions(design, PAPER_PARAMS, seed=seed + index, latent=True,
                            shared_items=True)
    df = df.rename(columns={"capability": "model", "context_length": "context_words"})
    df["model"] = [f"m{c:.2f}" for c in df["model"]]
    truth = {k: float(getattr(PAPER_PARAMS, k)) for k in PARAM_NAMES}
    truth.update({f"capability[m{c:.2f}]": float(c) for c in capabilities})
    return df[["model", "item", "tom_order", "context_words", "correct"]], truth


def fit_dataset(df: pd.DataFrame, truth: dict[str, float], *, chains: int, draws: int,
                tune: int, seed: int) -> dict[str, Any]:
    """Fit the structural model; per parameter: truth, mean, 50 %/95 % bounds, covered."""
    import arviz as az

    from tomstats.glmm import check_diagnostics, fit

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = fit(df, "structural", chains=chains, draws=draws, tune=tune, seed=seed,
                    progress=False, log_likelihood=False, posterior_predictive=False)
    seconds = time.perf_counter() - t0
    post = idata.posterior
    draws_of: dict[str, np.ndarray] = {
        "alpha": post["alpha"].to_numpy().ravel(),
        "gamma": post["gamma"].to_numpy().ravel(),
        "delta": post["delta"].to_numpy().ravel(),
        "sigma": post["sigma_item"].to_numpy().ravel(),
    }
    for llm in post["capability"].coords["llm"].values:
        draws_of[f"capability[{llm}]"] = post["capability"].sel(llm=llm).to_numpy().ravel()
    summ = az.summary(idata, var_names=["alpha", "gamma", "delta", "sigma_item", "capability"],
                      kind="diagnostics")
    rows = []
    for name, v in draws_of.items():
        q = np.quantile(v, [0.025, 0.25, 0.75, 0.975])
        t = truth[name]
        rows.append({"param": name, "truth": t, "mean": float(v.mean()),
                     "sd": float(v.std(ddof=1)), "q025": float(q[0]), "q25": float(q[1]),
                     "q75": float(q[2]), "q975": float(q[3]),
                     "cover50": bool(q[1] <= t <= q[2]), "cover95": bool(q[0] <= t <= q[3])})
    report = check_diagnostics(idata)
    return {"params": rows, "seconds": seconds,
            "max_rhat": float(summ["r_hat"].max()), "min_ess_bulk": float(summ["ess_bulk"].min()),
            "divergences": int(idata.sample_stats["diverging"].to_numpy().sum()),
            "diagnostics_passed": bool(report.passed), "n_rows": int(len(df))}


def summarise(out: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Coverage table over every dataset result in ``out/datasets``."""
    files = sorted((out / "datasets").glob("ds_*.json"))
    if not files:
        raise SystemExit(f"no dataset results in {out / 'datasets'}")
    recs = [json.loads(f.read_text()) for f in files]
    rows = [dict(r, dataset=rec["index"]) for rec in recs for r in rec["params"]]
    df = pd.DataFrame(rows)
    df["group"] = np.where(df["param"].str.startswith("capability"), "capability (all LLMs)",
                           df["param"])
    n = len(recs)

    def agg(g: pd.DataFrame) -> pd.Series:
        c95 = g["cover95"].mean()
        return pd.Series({"n": len(g), "cover50": g["cover50"].mean(), "cover95": c95,
                          "mcse95": float(np.sqrt(max(c95 * (1 - c95), 0.95 * 0.05) / len(g))),
                          "bias": (g["mean"] - g["truth"]).mean(),
                          "mean_width95": (g["q975"] - g["q025"]).mean()})

    table = pd.concat([df.groupby("param").apply(agg, include_groups=False),
                       df[df["group"] != df["param"]].groupby("group")
                       .apply(agg, include_groups=False)])
    summary = {
        "n_datasets": n,
        "seconds_per_fit_mean": float(np.mean([r["seconds"] for r in recs])),
        "max_rhat_worst": float(max(r["max_rhat"] for r in recs)),
        "min_ess_bulk_worst": float(min(r["min_ess_bulk"] for r in recs)),
        "datasets_with_divergences": int(sum(r["divergences"] > 0 for r in recs)),
        "datasets_failing_diagnostics": int(sum(not r["diagnostics_passed"] for r in recs)),
        "settings": recs[0].get("settings", {}),
        "coverage": {k: {c: float(v) for c, v in row.items()}
                     for k, row in table.iterrows()},
    }
    return table, summary


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run (or resume) the recovery study and print the coverage table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-datasets", type=int, default=200)
    p.add_argument("--start", type=int, default=0, help="first dataset index")
    p.add_argument("--out", default="out/recovery")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--n-per-cell", type=int, default=N_PER_CELL)
    p.add_argument("--seed", type=int, default=20240)
    p.add_argument("--summary-only", action="store_true")
    a = p.parse_args(argv)
    if a.n_datasets < 1 or a.start < 0 or a.n_per_cell < 1:
        p.error("--n-datasets and --n-per-cell must be >= 1, --start >= 0")
    out = Path(a.out)
    (out / "datasets").mkdir(parents=True, exist_ok=True)
    from tomstats._io import atomic_write_text

    settings = {"chains": a.chains, "draws": a.draws, "tune": a.tune,
                "n_per_cell": a.n_per_cell, "capabilities": list(CAPABILITIES),
                "seed": a.seed, "params": "PAPER_PARAMS"}
    if not a.summary_only:
        for i in range(a.start, a.start + a.n_datasets):
            path = out / "datasets" / f"ds_{i:05d}.json"
            if path.exists():
                continue
            df, truth = simulate_dataset(i, n_per_cell=a.n_per_cell, seed=a.seed)
            res = fit_dataset(df, truth, chains=a.chains, draws=a.draws, tune=a.tune,
                              seed=a.seed + i)
            res.update(index=i, settings=settings)
            atomic_write_text(path, json.dumps(res, indent=1) + "\n")
            print(f"dataset {i}: {res['seconds']:.1f} s, max R-hat {res['max_rhat']:.3f}, "
                  f"95% covered {sum(r['cover95'] for r in res['params'])}/"
                  f"{len(res['params'])}", flush=True)
    table, summary = summarise(out)
    table.to_csv(out / "coverage.csv")
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    with pd.option_context("display.float_format", "{:.4g}".format, "display.width", 120):
        print(table.to_string())
    print(f"{summary['n_datasets']} datasets; mean fit time {summary['seconds_per_fit_mean']:.1f}"
          f" s; worst R-hat {summary['max_rhat_worst']:.3f}; datasets with divergences "
          f"{summary['datasets_with_divergences']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
