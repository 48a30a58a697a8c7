"""Synthetic ``tomstats reproduce`` folders and GLMM fits for the figure/report tests.

The simulation folder follows the schema ``reproduce`` writes; its numbers come from the
expected cell probabilities of equation (1) (exact between-cell sums of squares of a balanced
Bernoulli design), so the figures look like the real ones without running the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CONTEXTS = (200.0, 500.0, 1000.0, 2000.0, 5000.0)
ORDERS = (0.0, 1.0, 2.0)
CAPS = (0.7, 0.85, 1.0, 1.15, 1.3)
N_CELL = 500
PARAMS = {"alpha": 7.5e-5, "gamma": 1.3, "delta": 1.0e-4, "sigma": 0.6}
BETA0 = float(np.log(0.85 / 0.15))


def _expected(cap: float, gamma: float, alpha: float, delta: float = PARAMS["delta"],
              sigma: float = PARAMS["sigma"]) -> np.ndarray:
    c = np.asarray(CONTEXTS)[:, None]
    t = np.asarray(ORDERS)[None, :]
    mu = BETA0 * cap - alpha * c * np.log1p(c / 500) - gamma * t - delta * c * t
    z, w = np.polynomial.hermite.hermgauss(32)
    z, w = np.sqrt(2) * z, w / np.sqrt(np.pi)
    return (w / (1 + np.exp(-(mu[..., None] + sigma * z)))).sum(-1)


def _anova(p: np.ndarray, n: int = N_CELL) -> dict[str, float]:
    """Two-way balanced ANOVA sums of squares of binary data with cell means ``p``."""
    grand = p.mean()
    a, b = p.shape
    ss_c = n * b * ((p.mean(1) - grand) ** 2).sum()
    ss_t = n * a * ((p.mean(0) - grand) ** 2).sum()
    ss_cells = n * ((p - grand) ** 2).sum()
    ss_i = ss_cells - ss_c - ss_t
    ss_r = n * (p * (1 - p)).sum()
    total = ss_cells + ss_r
    df_r = a * b * (n - 1)
    ms_r = ss_r / df_r
    out = {}
    for name, ss, df in (("tom_order", ss_t, b - 1), ("context_length", ss_c, a - 1),
                         ("interaction", ss_i, (a - 1) * (b - 1))):
        out[name] = {"pct_total": 100 * ss / total, "eta2": ss / total,
                     "partial_eta2": ss / (ss + ss_r), "F": (ss / df) / ms_r,
                     "share_systematic": ss / ss_cells}
    out["residual"] = {"pct_total": 100 * ss_r / total, "eta2": np.nan,
                       "partial_eta2": np.nan, "F": np.nan, "share_systematic": np.nan}
    return out


def _paper_config() -> dict:
    from tomstats.simulation.study import StudyConfig

    return StudyConfig().to_dict()


def write_simulation_dir(path: Path, seed: int = 0) -> Path:
    """Write a complete synthetic ``reproduce`` folder (CSV + summary.json) into ``path``."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    decomp_rows, cell_rows = [], []
    per_cap = {}
    for m in CAPS:
        p = _expected(m, PARAMS["gamma"], PARAMS["alpha"])
        res = _anova(p)
        per_cap[m] = res
        for f, r in res.items():
            jitter = rng.normal(0, 0.2)
            decomp_rows.append({"capability": m, "factor": f, "pct_total": r["pct_total"],
                                "pct_total_low": r["pct_total"] - 0.6 + jitter / 5,
                                "pct_total_high": r["pct_total"] + 0.6 + jitter / 5,
                                "eta2": r["eta2"], "partial_eta2": r["partial_eta2"],
                                "F": r["F"], "share_systematic": r["share_systematic"]})
        for i, c in enumerate(CONTEXTS):
            for j, t in enumerate(ORDERS):
                acc = rng.binomial(N_CELL, p[i, j]) / N_CELL
                half = 1.96 * np.sqrt(acc * (1 - acc) / N_CELL)
                cell_rows.append({"capability": m, "context_length": int(c),
                                  "tom_order": int(t), "accuracy": acc,
                                  "ci_low": max(acc - half, 0.0), "ci_high": min(acc + half, 1),
                                  "expected": p[i, j]})
    table = []
    for f in ("tom_order", "context_length", "interaction", "residual"):
        vals = np.array([per_cap[m][f]["pct_total"] for m in CAPS])
        row = {"factor": f, "pct_total": vals.mean(), "sd_pct": vals.std(ddof=1)}
        for k in ("eta2", "partial_eta2", "F"):
            row[k] = float(np.mean([per_cap[m][f][k] for m in CAPS]))
        if f == "residual":
            row["sd_pct"] = np.nan
        table.append(row)
    gammas = np.linspace(0.3, 2.4, 7)
    alphas = np.linspace(2e-5, 2e-4, 7)
    sens = []
    for g in gammas:
        for a in alphas:
            share = _anova(_expected(1.0, g, a))["tom_order"]["share_systematic"]
            sens.append({"gamma": g, "alpha": a, "tom_share": share,
                         "tom_share_low": max(share - 0.02, 0), "tom_share_high": share + 0.02,
                         "dominant": bool(share > 0.5)})
    pd.DataFrame(table).to_csv(path / "table1.csv", index=False)
    pd.DataFrame(decomp_rows).to_csv(path / "decomposition.csv", index=False)
    pd.DataFrame(cell_rows).to_csv(path / "cells.csv", index=False)
    sdf = pd.DataFrame(sens)
    sdf.to_csv(path / "sensitivity.csv", index=False)
    summary = {
        "package_version": "0.0.test", "seed": seed, "replicates": 20, "path": "exact",
        "params": dict(PARAMS),
        "design": {"context_length": list(CONTEXTS), "tom_order": list(ORDERS),
                   "capability": list(CAPS), "n_per_cell": N_CELL},
        "table1": table,
        "sensitivity": {"n_dominant": int(sdf["dominant"].sum()), "n_cells": len(sdf)},
        "paper_bands": {"tom_order": [21.8, 23.0], "context_length": [3.6, 4.6],
                        "interaction": [0.3, 0.7], "n_dominant": [37, 41]},
        # the paper's own study (``tomstats reproduce``): graded against the paper's bands
        "config": _paper_config(),
    }
    (path / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    return path


def make_fit(
    seed: int = 0,
    chains: int = 2,
    draws: int = 200,
    groups: tuple[str, ...] = ("prior", "posterior_predictive", "log_likelihood"),
    diverging: int = 0,
    provenance: bool = True,
):
    """A small structural-fit InferenceData (``az.from_dict``) with known answers.

    Posterior draws scatter around the true parameters; observations and posterior predictive
    draws come from equation (1) (3 LLMs × 10 items per cell of the 5 × 3 design).
    ``diverging`` marks that many draws of chain 0 as divergent.
    """
    import arviz as az

    rng = np.random.default_rng(seed)
    c = np.repeat(CONTEXTS, len(ORDERS))
    t = np.tile(ORDERS, len(CONTEXTS))
    llm = np.repeat(np.arange(3), 10)
    item = np.arange(30)
    # one row per (cell, llm, item)
    C, L = np.meshgrid(c, llm, indexing="ij")
    T, It = np.meshgrid(t, item, indexing="ij")
    C, T, L, It = C.ravel(), T.ravel(), L.ravel(), It.ravel() + 30 * np.repeat(
        np.arange(len(c)), 30)
    cap_true = np.array([0.8, 1.0, 1.2])
    shape = (chains, draws)
    post = {
        "alpha": rng.normal(PARAMS["alpha"], 1e-5, shape),
        "gamma": rng.normal(PARAMS["gamma"], 0.05, shape),
        "delta": rng.normal(PARAMS["delta"], 1e-5, shape),
        "sigma_item": np.abs(rng.normal(0.5, 0.05, shape)),
        "capability": cap_true + rng.normal(0, 0.03, shape + (3,)),
    }

    def mu(p: dict, idx: tuple) -> np.ndarray:
        return (BETA0 * p["capability"][idx][..., L] - p["alpha"][idx][..., None] * C
                * np.log1p(C / 500) - p["gamma"][idx][..., None] * T
                - p["delta"][idx][..., None] * C * T)

    truth = {k: np.asarray(v).mean(axis=(0, 1)) for k, v in post.items()}
    p_true = 1 / (1 + np.exp(-mu({k: np.asarray(v)[None, None] for k, v in truth.items()},
                                 (0, 0))))
    y = (rng.random(C.size) < p_true).astype(np.int64)
    p = 1 / (1 + np.exp(-mu(post, (slice(None), slice(None)))))
    out = {
        "posterior": post,
        "observed_data": {"correct": y},
        "constant_data": {"context_length": C, "tom_order": T, "llm": L, "item": It},
        "sample_stats": {
            "diverging": np.zeros(shape, bool),
            "energy": rng.normal(0, 1, shape) + rng.normal(0, 1, (chains, 1)) * 0.0,
            "tree_depth": rng.integers(2, 5, shape),
            "reached_max_treedepth": np.zeros(shape, bool),
            "lp": rng.normal(-500, 3, shape),
        },
    }
    if diverging:
        out["sample_stats"]["diverging"][0, :diverging] = True
    if "posterior_predictive" in groups:
        out["posterior_predictive"] = {"correct": (rng.random(p.shape) < p).astype(np.int64)}
    if "log_likelihood" in groups:
        out["log_likelihood"] = {"correct": np.where(y == 1, np.log(p), np.log1p(-p))}
    if "prior" in groups:
        pshape = (1, 500)
        out["prior"] = {"alpha": np.abs(rng.normal(0, 2e-4, pshape)),
                        "gamma": np.abs(rng.normal(0, 2, pshape)),
                        "delta": np.abs(rng.normal(0, 2e-4, pshape)),
                        "sigma_item": np.abs(rng.normal(0, 1, pshape)),
                        "capability": rng.normal(1, 0.3, pshape + (3,))}
    dims = {"capability": ["llm_level"], "correct": ["obs"], "context_length": ["obs"],
            "tom_order": ["obs"], "llm": ["obs"], "item": ["obs"]}
    idata = az.from_dict(**out, dims=dims, coords={"llm_level": ["gpt-a", "llama-b", "qwen-c"]})
    if provenance:
        idata.posterior.attrs.update({
            "tomstats_version": "0.0.test", "model": "structural", "backend": "numpyro",
            "data_hash": "0" * 64, "max_tree_depth": 10, "num_warmup": 200,
            "num_samples": draws, "num_chains": chains})
    return idata


def save_fit(idata, path: Path) -> Path:
    """Write ``idata`` (InferenceData or xarray Dataset) to netCDF with whichever engine is
    installed (h5netcdf needs h5py; else netCDF4)."""
    for engine in ("h5netcdf", "netcdf4"):
        try:
            idata.to_netcdf(str(path), engine=engine)
            return path
        except ImportError:
            continue
    raise RuntimeError("neither h5py nor netCDF4 is installed")


def structural_log(seed: int = 0, items_per_cell: int = 4) -> pd.DataFrame:
    """Per-question outcomes of equation (1) for two LLMs (capability 0.8 and 1.2) on the
    paper's 5 × 3 design; each item is answered by both LLMs (item effects sd 0.5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in CONTEXTS:
        for t in ORDERS:
            for k in range(items_per_cell):
                u = rng.normal(0, 0.5)
                for llm, cap in (("llm-a", 0.8), ("llm-b", 1.2)):
                    eta = (BETA0 * cap - PARAMS["alpha"] * c * np.log1p(c / 500)
                           - PARAMS["gamma"] * t - PARAMS["delta"] * c * t + u)
                    rows.append({"model": llm, "item": f"c{c:g}-t{t:g}-{k}",
                                 "context_words": int(c), "tom_order": int(t),
                                 "correct": int(rng.random() < 1 / (1 + np.exp(-eta)))})
    return pd.DataFrame(rows)


FORMULA = "correct ~ fb * implicit + (1 | model) + (1 | item)"
FORMULA_TRUTH = {"Intercept": 1.6, "fb": -2.4, "implicit": -0.4, "fb:implicit": -0.3,
                 "sd_model": 0.7, "sd_item": 0.4}


def formula_log(seed: int = 0, n_llm: int = 8, n_item: int = 64,
                truth: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """Crossed LLM × item outcomes of ``FORMULA``'s model (each item one of the four
    fb × implicit conditions); returns the data and the true parameters and effects."""
    rng = np.random.default_rng(seed)
    t = dict(FORMULA_TRUTH if truth is None else truth)
    llms = [f"llm-{i:02d}" for i in range(n_llm)]
    items = [f"item-{k:03d}" for k in range(n_item)]
    fb = np.tile([0, 1, 0, 1], n_item // 4)
    implicit = np.tile([0, 0, 1, 1], n_item // 4)
    u_model = rng.normal(0, t["sd_model"], n_llm)
    u_item = rng.normal(0, t["sd_item"], n_item)
    rows = []
    for j, m in enumerate(llms):
        for k, it in enumerate(items):
            eta = (t["Intercept"] + t["fb"] * fb[k] + t["implicit"] * implicit[k]
                   + t["fb:implicit"] * fb[k] * implicit[k] + u_model[j] + u_item[k])
            rows.append({"model": m, "item": it, "fb": int(fb[k]), "implicit": int(implicit[k]),
                         "correct": int(rng.random() < 1 / (1 + np.exp(-eta)))})
    t["re_model"], t["re_item"] = u_model, u_item
    return pd.DataFrame(rows), t


def make_formula_fit(seed: int = 0, chains: int = 2, draws: int = 200, *,
                     shrink_fb: float = 1.0):
    """A crossed formula fit in ``tomstats.glmm.fit``'s layout, without sampling.

    The data follow :data:`FORMULA`'s model; the posterior draws scatter around the true
    parameters and effects (sd 0.08 for β, 0.15 for the effects), so the fit is
    well-specified. ``shrink_fb < 1`` makes it deliberately misspecified: the posterior of
    β fb (and of the interaction) sits at ``shrink_fb`` times the truth, as a too-narrow
    prior on fb would put it, with the intercept moved to keep the overall accuracy; the
    observed accuracy is then steeper than predicted.
    """
    import json

    import arviz as az

    from tomstats.glmm.data import build_design

    df, t = formula_log(seed)
    spec, md = build_design(FORMULA, df)
    rng = np.random.default_rng(seed + 100)
    shape = (chains, draws)
    coefs = list(md.coords["coef"])
    true_beta = np.array([t[c] for c in coefs])
    X = np.column_stack([np.ones(len(df)), df["fb"], df["implicit"], df["fb"] * df["implicit"]])
    if shrink_fb != 1.0:
        eta_true = X @ true_beta + t["re_model"][md.arrays["g_model"]] \
            + t["re_item"][md.arrays["g_item"]]
        true_beta = true_beta.copy()
        true_beta[coefs.index("fb")] *= shrink_fb
        true_beta[coefs.index("fb:implicit")] *= shrink_fb
        # keep the mean linear predictor: the intercept absorbs the shrunk part
        rest = X @ true_beta + t["re_model"][md.arrays["g_model"]] \
            + t["re_item"][md.arrays["g_item"]]
        true_beta[0] += float(np.mean(eta_true - rest))
    beta = true_beta + rng.normal(0, 0.08, shape + (len(coefs),))
    x_mean = X.mean(axis=0)
    beta_c = beta.copy()
    beta_c[..., 0] = beta[..., 0] + beta[..., 1:] @ x_mean[1:]
    post = {"beta": beta, "beta_c": beta_c}
    for key in ("model", "item"):
        n_lev = len(md.coords[key])
        sd = np.abs(t[f"sd_{key}"] + rng.normal(0, 0.06, shape + (1,)))
        re = t[f"re_{key}"][None, None, :, None] + rng.normal(0, 0.15, shape + (n_lev, 1))
        post[f"sd_{key}"] = sd
        post[f"re_{key}"] = re
        post[f"z_{key}"] = re / sd[..., None, :]
    dims = {"beta": ["coef"], "beta_c": ["coef"], "y": ["obs"]}
    for key in ("model", "item"):
        dims.update({f"sd_{key}": [f"{key}_effect"], f"re_{key}": [key, f"{key}_effect"],
                     f"z_{key}": [key, f"{key}_effect"]})
    coords = {k: list(v) for k, v in md.coords.items()}
    eta = (np.einsum("cdk,nk->cdn", beta, X)
           + post["re_model"][..., md.arrays["g_model"], 0]
           + post["re_item"][..., md.arrays["g_item"], 0])
    p = 1 / (1 + np.exp(-eta))
    y = md.y
    spec_d = spec.to_dict()
    attrs = {"tomstats_glmm_format": "1", "created_at": "2026-01-01T00:00:00+00:00",
             "model": FORMULA, "model_kind": "formula", "spec": json.dumps(spec_d),
             "priors": json.dumps(spec_d["priors"]), "family": "bernoulli",
             "likelihood": "bernoulli", "aggregated": 0, "n_rows": len(df),
             "n_obs": md.n_obs, "data_columns": json.dumps(list(df.columns)),
             "column_mapping": "{}", "data_hash": "0" * 64, "backend": "pymc",
             "sampler": json.dumps({"chains": chains, "draws": draws, "tune": draws,
                                    "chain_method": "vectorized", "chain_groups": None,
                                    "target_accept": 0.9, "max_tree_depth": 10}),
             "max_tree_depth": 10, "seed": seed,
             "versions": json.dumps({"tomstats": "0.0.test", "pymc": "5.x"})}
    idata = az.from_dict(
        posterior=post, dims=dims, coords={**coords, "obs": np.arange(md.n_obs)},
        posterior_predictive={"y": (rng.random(p.shape) < p).astype(np.int8)},
        log_likelihood={"y": np.where(y == 1, np.log(p), np.log1p(-p)).astype(np.float32)},
        sample_stats={"diverging": np.zeros(shape, bool),
                      "energy": rng.normal(0, 1, shape),
                      "reached_max_treedepth": np.zeros(shape, bool),
                      "tree_depth": rng.integers(2, 5, shape)},
        observed_data={"y": y}, attrs=attrs)
    const = {"obs_trials": ("obs", np.ones(md.n_obs, dtype=np.int64)),
             "row_obs": ("row", md.row_obs)}
    for c in df.columns:
        const[f"data_{c}"] = ("row", df[c].to_numpy() if df[c].dtype != object
                              else df[c].to_numpy(dtype=str))
    import xarray as xr

    idata.add_groups(constant_data=xr.Dataset(const))
    idata.posterior.attrs.update(attrs)
    return idata
