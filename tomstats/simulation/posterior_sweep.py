r"""Calibrated sweeps: the paper's study once per posterior draw of a structural GLMM.

``tomstats simulate simulations/paper.toml --posterior fit.nc --out DIR`` calls
:func:`run_posterior_study`. The structural fit's posterior (:func:`tomstats.glmm.fit`
with ``model="structural"``) is turned into draws of equation (1)'s parameters,

.. math::

    \operatorname{logit} p = \beta_0 m_j - \alpha_j\, c\ln(1+c/500) - \gamma_j t
        - \delta\, c\, t + \varepsilon,\qquad \varepsilon\sim N(0, \sigma^2),

(:func:`tomstats.glmm.posterior_params`; :math:`\gamma_j=\gamma`, :math:`\alpha_j=\alpha`
unless the fit has per-LLM random slopes, :math:`\sigma` = the item-effect sd), thinned
evenly to ``draws`` draws :math:`s = 1..S`. Then, vectorised over draws:

1. **Decomposition.** For each draw and each fitted LLM :math:`j`, ``R`` studies of the
   configured 5×3 design are simulated at :math:`(\alpha_{js}, \gamma_{js}, \delta_s,
   \sigma_s, m_{js})` and analysed by the two-way ANOVA
   (:func:`tomstats.simulation.simulator.simulate` with ``param_dims=("draw", "llm")``). The
   posterior of a quantity such as :math:`\eta^2_\text{ToM}` is summarised by

   - ``eta2_mean``: :math:`\frac1{SR}\sum_{s,r}\eta^2_{sr}`;
   - ``eta2_low``/``eta2_high``: 2.5 %/97.5 % quantiles over draws of the per-draw Monte
     Carlo mean :math:`\bar\eta^2_s = \frac1R\sum_r\eta^2_{sr}` (parameter uncertainty);
   - ``eta2_pred_low``/``eta2_pred_high``: quantiles over all :math:`S R` simulated studies
     (posterior predictive: where one new study of this design would fall).

   ``p_tom_dominant`` per LLM is :math:`\frac1S\sum_s 1\{\bar{\text{share}}_{\text{ToM},s}
   > 0.5\}`, the posterior probability that ToM order carries more than half of the
   systematic (between-cell) variance for that LLM under the design.
2. **Dominance map.** The configured γ × α grid (default the paper's 7 × 7) is simulated
   per draw with :math:`(\delta_s, \sigma_s)` from the posterior and the grid's γ, α, at
   the configured sensitivity capability (:func:`tomstats.simulation.sensitivity_grid.sensitivity`
   with ``param_dims=("draw",)``). Per grid cell: the ToM share's posterior mean, the 95 %
   interval over draws of the per-draw MC mean, and ``p_dominant`` = posterior probability
   that the per-draw mean share exceeds 0.5. ``summary.json`` adds the posterior of the
   number of ToM-dominant cells (the paper reports 39/49).

Monte Carlo budget: ``replicates`` per draw (default :math:`\lceil R_\text{config}/S\rceil`,
i.e. the configuration's total replicates split over the draws: 1000 replicates and 200
draws give 5 per draw), and likewise for the grid.

Files written into ``out`` (each atomically): ``decomposition_posterior.csv``,
``dominance_posterior.csv``, ``summary.json``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from tomstats import _distributed
from tomstats._guards import check_footprint
from tomstats._io import atomic_write_text, ensure_writable_dir
from tomstats._version import __version__
from tomstats.model import Params
from tomstats.simulation.files import DECOMPOSITION_POSTERIOR, DOMINANCE_POSTERIOR, SUMMARY
from tomstats.simulation.sensitivity_grid import sensitivity
from tomstats.simulation.simulator import SOURCES, SYSTEMATIC, simulate, simulation_footprint
from tomstats.simulation.study import StudyConfig

__all__ = ["PosteriorDraws", "posterior_draws", "posterior_study", "run_posterior_study"]

#: Draws of the dominance map simulated per call (bounds the binomial CDF table in memory).
_GRID_CHUNK = 25


class PosteriorDraws:
    """Thinned posterior draws of equation (1)'s parameters, per LLM.

    Attributes
    ----------
    params : Params
        ``alpha``, ``gamma`` of shape (draw, llm) (per-LLM slopes when fitted, else the
        population value repeated), ``delta``, ``sigma`` of shape (draw, llm).
    capability : numpy.ndarray
        Shape (draw, llm).
    llm : list of str
        LLM names (the fit's ``llm`` coordinate).
    index : numpy.ndarray
        Indices of the kept draws in the flattened (chain × draw) posterior.
    n_available : int
        Posterior draws in the fit.
    source : dict
        Provenance attributes of the fit.
    """

    def __init__(self, params: Params, capability: np.ndarray, llm: list[str],
                 index: np.ndarray, n_available: int, source: dict[str, Any]) -> None:
        self.params = params
        self.capability = capability
        self.llm = llm
        self.index = index
        self.n_available = n_available
        self.source = source

    @property
    def n_draws(self) -> int:
        """Number of kept draws."""
        return int(self.index.size)


def _check_draws(draws: Any) -> int:
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    return int(draws)


def thin_index(n_available: int, draws: int) -> np.ndarray:
    """Evenly spaced indices ``round(linspace(0, n-1, min(draws, n)))`` (unique)."""
    k = min(int(draws), int(n_available))
    return np.unique(np.round(np.linspace(0, n_available - 1, k)).astype(np.int64))


def posterior_draws(idata: Any, draws: int = 200, *, name: str = "fit") -> PosteriorDraws:
    """Simulator parameters from a structural fit, thinned evenly to ``draws`` draws.

    Raises
    ------
    ValueError
        ``idata`` was not made by :func:`tomstats.glmm.fit`, or is a formula model.
    """
    from tomstats.glmm import posterior_params
    from tomstats.glmm.fitting import fit_spec
    from tomstats.glmm.spec import StructuralSpec
    from tomstats.glmm.verdict import failed_checks

    draws = _check_draws(draws)
    attrs0 = dict(getattr(getattr(idata, "posterior", None), "attrs", {}) or {})
    try:
        kind = json.loads(attrs0["spec"]).get("kind") if "spec" in attrs0 else None
    except (TypeError, ValueError):
        kind = None
    if kind == "formula" or attrs0.get("model_kind") == "formula":
        raise ValueError(
            f"{name}: --posterior needs a structural fit (tomstats fit LOG --model "
            f"structural), but this fit is the formula model {attrs0.get('model')!r}; a "
            f"formula model's coefficients are not equation (1)'s parameters")
    try:
        spec = fit_spec(idata)
    except (ValueError, AttributeError, KeyError) as exc:
        raise ValueError(f"{name}: not a tomstats GLMM fit ({exc})") from exc
    if not isinstance(spec, StructuralSpec):
        model = idata.posterior.attrs.get("model")
        raise ValueError(
            f"{name}: --posterior needs a structural fit (tomstats fit LOG --model "
            f"structural), but this fit is the formula model {model!r}; a formula model's "
            f"coefficients are not equation (1)'s parameters")
    params, cap = posterior_params(idata)
    n = int(cap.sizes["draw"])
    idx = thin_index(n, draws)
    post = idata.posterior
    llm = [str(v) for v in cap.coords["llm"].values]
    n_llm = len(llm)

    def per_llm(field: str, slope: str) -> np.ndarray:
        if slope in post:
            v = post[slope].to_numpy()
            return v.reshape((-1,) + v.shape[2:])[idx]
        return np.repeat(np.asarray(getattr(params, field), dtype=float)[idx, None], n_llm, 1)

    p = Params(alpha=per_llm("alpha", "alpha_llm"), gamma=per_llm("gamma", "gamma_llm"),
               delta=np.repeat(np.asarray(params.delta, dtype=float)[idx, None], n_llm, 1),
               sigma=np.repeat(np.asarray(params.sigma, dtype=float)[idx, None], n_llm, 1))
    bad = [f for f in ("alpha", "gamma", "delta", "sigma")
           if not np.all(np.isfinite(getattr(p, f)))]
    if bad:
        raise ValueError(f"{name}: posterior draws of {bad} are not finite")
    attrs = dict(post.attrs)
    source = {k: (attrs[k].item() if hasattr(attrs.get(k), "item") else attrs.get(k))
              for k in ("model", "data_hash", "backend", "seed", "created_at", "n_rows")}
    source["failed_checks"] = list(failed_checks(idata))  # a report says so at its top
    return PosteriorDraws(p, cap.to_numpy()[idx], llm, idx, n, source)


def _interval(v: np.ndarray, axis: int | tuple[int, ...] = 0) -> tuple[Any, Any]:
    return np.quantile(v, 0.025, axis=axis), np.quantile(v, 0.975, axis=axis)


def _decomposition_table(sim: xr.Dataset, pd_: PosteriorDraws) -> pd.DataFrame:
    """Per LLM and ANOVA source: η² posterior mean, interval over draws, predictive interval."""
    rows = []
    eta = sim["eta2"].isel(capability=0).transpose("replicate", "draw", "llm", "source")
    peta = sim["partial_eta2"].isel(capability=0).transpose("replicate", "draw", "llm",
                                                             "source")
    share = sim["share"].isel(capability=0).transpose("replicate", "draw", "llm", "systematic")
    e, pe, sh = eta.to_numpy(), peta.to_numpy(), share.to_numpy()
    per_draw = e.mean(0)                     # (draw, llm, source)
    share_draw = sh.mean(0)                  # (draw, llm, systematic)
    for j, llm in enumerate(pd_.llm):
        cap = pd_.capability[:, j]
        for k, src in enumerate(SOURCES):
            lo, hi = _interval(per_draw[:, j, k])
            plo, phi = _interval(e[:, :, j, k].ravel())
            row: dict[str, Any] = {
                "llm": llm, "capability_mean": float(cap.mean()), "source": src,
                "eta2_mean": float(e[:, :, j, k].mean()), "eta2_low": float(lo),
                "eta2_high": float(hi), "eta2_pred_low": float(plo),
                "eta2_pred_high": float(phi),
                "partial_eta2_mean": float(np.nanmean(pe[:, :, j, k])) if src != "residual"
                else float("nan"),
            }
            if src in SYSTEMATIC:
                i = list(SYSTEMATIC).index(src)
                slo, shi = _interval(share_draw[:, j, i])
                row.update(share_mean=float(sh[:, :, j, i].mean()), share_low=float(slo),
                           share_high=float(shi))
            else:
                row.update(share_mean=float("nan"), share_low=float("nan"),
                           share_high=float("nan"))
            rows.append(row)
    return pd.DataFrame(rows)


def _dominance(config: StudyConfig, pd_: PosteriorDraws, replicates: int,
               progress: bool | None, allow_large: bool = False
               ) -> tuple[pd.DataFrame, np.ndarray]:
    """γ × α map per draw → table and per-draw mean shares (draw, gamma, alpha)."""
    from tqdm.auto import tqdm

    delta, sigma = pd_.params.delta[:, 0], pd_.params.sigma[:, 0]
    S = pd_.n_draws
    chunks = []
    progress = _distributed.progress_allowed(progress)
    disable = None if progress is None else not progress
    # chunk c has the seed of its global index; processes split the chunks (docs/cluster.md)
    lo, hi = _distributed.share(-(-S // _GRID_CHUNK))
    with _distributed.alone():
        for c in tqdm(range(lo, hi), desc="dominance map (draw chunks)", disable=disable,
                      leave=False):
            sl = slice(c * _GRID_CHUNK, (c + 1) * _GRID_CHUNK)
            p = Params(alpha=delta[sl] * 0.0, gamma=delta[sl] * 0.0, delta=delta[sl],
                       sigma=sigma[sl])
            ds = sensitivity(p, design=config.design, gamma=config.gamma, alpha=config.alpha,
                             capability=config.sensitivity_capability, replicates=replicates,
                             seed=config.seed + 1 + 7919 * c, path=config.path,
                             param_dims=("draw",), progress=False, allow_large=allow_large)
            chunks.append(ds["tom_share"].transpose("replicate", "draw", "gamma", "alpha")
                          .to_numpy())
    chunks = [c for part in _distributed.allgather_object(chunks) for c in part]
    share = np.concatenate(chunks, axis=1)   # (replicate, draw, gamma, alpha)
    per_draw = share.mean(0)
    lo, hi = _interval(per_draw)
    g, a = np.meshgrid(np.asarray(config.gamma), np.asarray(config.alpha), indexing="ij")
    table = pd.DataFrame({
        "gamma": g.ravel(), "alpha": a.ravel(),
        "tom_share_mean": share.mean((0, 1)).ravel(),
        "tom_share_low": lo.ravel(), "tom_share_high": hi.ravel(),
        "p_dominant": (per_draw > 0.5).mean(0).ravel(),
    })
    return table, per_draw


def _summ(v: np.ndarray) -> dict[str, float]:
    lo, hi = _interval(np.asarray(v, dtype=float).ravel())
    return {"mean": float(np.mean(v)), "median": float(np.median(v)), "low": float(lo),
            "high": float(hi)}


def posterior_study(
    config: StudyConfig,
    draws: PosteriorDraws,
    *,
    replicates: int | None = None,
    sensitivity_replicates: int | None = None,
    progress: bool | None = None,
    allow_large: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Run the decomposition and the dominance map once per posterior draw (in memory).

    Parameters
    ----------
    config : StudyConfig
        Design, seed, path, grid and sensitivity capability (its ``params`` are replaced by
        the posterior draws).
    draws : PosteriorDraws
        From :func:`posterior_draws`.
    replicates, sensitivity_replicates : int, optional
        Simulated studies per draw (default: the configuration's replicates divided by the
        number of draws, rounded up).
    progress : bool, optional
        Progress bars (default: only on a terminal).
    allow_large : bool
        Skip the size guard (decomposition and dominance map together, checked first).

    Returns
    -------
    decomposition, dominance : pandas.DataFrame
        The two CSV tables (see the module docstring).
    summary : dict
        What ``summary.json`` holds.
    """
    S = draws.n_draws
    rep = replicates if replicates is not None else max(1, math.ceil(config.replicates / S))
    rep_s = (sensitivity_replicates if sensitivity_replicates is not None
             else max(1, math.ceil(config.sensitivity_replicates / S)))
    for name, v in (("replicates", rep), ("sensitivity_replicates", rep_s)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    grid_points = len(config.gamma) * len(config.alpha)
    check_footprint(
        simulation_footprint(config.design, rep, path=config.path,
                             n_points=S * len(draws.llm), what="posterior study")
        + simulation_footprint(config.design, rep_s, path=config.path,
                               n_points=S * grid_points, what="posterior study"),
        allow_large=allow_large)
    t0 = time.perf_counter()
    sim = simulate(config.design, draws.params, replicates=rep, seed=config.seed,
                   path=config.path, param_dims=("draw", "llm"),
                   capability=draws.capability[:, :, None], progress=progress,
                   allow_large=True)
    t1 = time.perf_counter()
    decomp = _decomposition_table(sim, draws)
    dom, per_draw = _dominance(config, draws, rep_s, progress, allow_large=True)
    t2 = time.perf_counter()
    tom_share = sim["share"].sel(systematic="tom_order").isel(capability=0) \
        .mean("replicate").transpose("draw", "llm").to_numpy()
    n_dom = (per_draw > 0.5).sum((1, 2))
    fields = ("alpha", "gamma", "delta", "sigma")
    summary: dict[str, Any] = {
        "package_version": __version__,
        "fit": draws.source,
        "draws_used": S,
        "draws_available": draws.n_available,
        "replicates_per_draw": int(rep),
        "sensitivity_replicates_per_draw": int(rep_s),
        "seed": config.seed,
        "path": config.path,
        "llm": draws.llm,
        "params": {f: _summ(np.asarray(getattr(draws.params, f))[:, 0]) for f in fields},
        "per_llm": {
            llm: {
                "capability": _summ(draws.capability[:, j]),
                "gamma": _summ(draws.params.gamma[:, j]),
                "alpha": _summ(draws.params.alpha[:, j]),
                "eta2": {src: _summ(sim["eta2"].isel(capability=0, llm=j)
                                    .sel(source=src).mean("replicate").to_numpy())
                         for src in SOURCES},
                "tom_share": _summ(tom_share[:, j]),
                "p_tom_dominant": float((tom_share[:, j] > 0.5).mean()),
            }
            for j, llm in enumerate(draws.llm)
        },
        "dominance": {
            "n_cells": int(dom.shape[0]),
            "n_dominant": _summ(n_dom),
            "n_dominant_at_posterior_mean_share": int((dom["tom_share_mean"] > 0.5).sum()),
            "capability": config.sensitivity_capability,
            "paper_n_dominant": 39,
        },
        "design": config.design.to_dict(),
        "grid": {"gamma": list(config.gamma), "alpha": list(config.alpha)},
        "seconds": {"decomposition": t1 - t0, "dominance": t2 - t1},
    }
    return decomp, dom, summary


def run_posterior_study(
    config: StudyConfig,
    fit_path: str | os.PathLike[str],
    *,
    draws: int = 200,
    out: str | os.PathLike[str],
    progress: bool | None = None,
    replicates: int | None = None,
    sensitivity_replicates: int | None = None,
    allow_large: bool = False,
    allow_warnings: bool = False,
) -> str:
    """``tomstats simulate CONFIG --posterior FIT.nc``: calibrated decomposition and map.

    Parameters
    ----------
    config : StudyConfig
        The simulation file's settings (design, seed, path, grid, sensitivity capability).
    fit_path : path
        netCDF written by ``tomstats fit --model structural`` / :func:`tomstats.glmm.save_fit`.
    draws : int
        Posterior draws to use, thinned evenly (all of them if the fit has fewer).
    out : path
        Output folder (created); receives ``decomposition_posterior.csv``,
        ``dominance_posterior.csv`` and ``summary.json``, each written atomically. In a
        multi-process run (docs/cluster.md) only process 0 writes; the others return an
        empty string.
    progress : bool, optional
        Progress bars.
    replicates, sensitivity_replicates : int, optional
        Simulated studies per draw (see :func:`posterior_study`).
    allow_large : bool
        Skip the size guard (see :func:`posterior_study`).
    allow_warnings : bool
        Use a fit that failed its own checks (:func:`tomstats.glmm.verdict.require_sound_fit`);
        ``summary.json`` records the failed checks under ``fit.failed_checks``.

    Returns
    -------
    str
        A short human-readable report (η² of ToM order per LLM with its interval, the
        dominance verdict, the files written).

    Raises
    ------
    FileNotFoundError
        ``fit_path`` does not exist.
    ValueError
        Bad ``draws`` or ``out``, an unreadable or foreign netCDF, a formula-model fit, or a
        fit that failed its own checks (unless ``allow_warnings``).
    """
    from tomstats.glmm import load_fit
    from tomstats.glmm.verdict import require_sound_fit

    if not isinstance(config, StudyConfig):
        raise ValueError(f"config must be a StudyConfig, got {type(config).__name__}")
    draws = _check_draws(draws)
    writer = _distributed.is_writer()
    out_dir = ensure_writable_dir(out) if writer else Path(out)
    idata = load_fit(fit_path)
    pdraws = posterior_draws(idata, draws, name=str(fit_path))  # a formula fit: refused first
    require_sound_fit(idata, allow_warnings=allow_warnings, name=str(fit_path))
    decomp, dom, summary = posterior_study(config, pdraws, replicates=replicates,
                                           sensitivity_replicates=sensitivity_replicates,
                                           progress=progress, allow_large=allow_large)
    if not writer:
        return ""
    summary["fit"]["path"] = Path(fit_path).name
    summary["config"] = config.to_dict()
    summary["run"] = _distributed.provenance()
    files = {DECOMPOSITION_POSTERIOR: decomp.to_csv(index=False),
             DOMINANCE_POSTERIOR: dom.to_csv(index=False),
             SUMMARY: json.dumps(summary, indent=2, default=_json_default) + "\n"}
    for fname, text in files.items():
        atomic_write_text(out_dir / fname, text)
    return format_report(summary, decomp, [str(out_dir / f) for f in files])


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def format_report(summary: dict[str, Any], decomp: pd.DataFrame, files: list[str]) -> str:
    """Plain-text report of a posterior study (a fit that failed its checks: said first)."""
    from tomstats.glmm.verdict import failed_checks_note

    failed = summary.get("fit", {}).get("failed_checks") or []
    lines = [f"warning: {failed_checks_note(failed)}"] if failed else []
    lines += [f"posterior study: {summary['draws_used']} of {summary['draws_available']} draws, "
             f"{summary['replicates_per_draw']} replicate(s) per draw",
             f"{'llm':<28}{'capability':>11}  {'eta2 ToM [95%]':>24}  {'eta2 context [95%]':>24}"
             f"  {'P(ToM dom.)':>11}"]
    for llm, d in summary["per_llm"].items():
        sub = decomp[decomp["llm"] == llm].set_index("source")
        t, c = sub.loc["tom_order"], sub.loc["context_length"]
        lines.append(
            f"{llm:<28}{d['capability']['mean']:>11.3f}  "
            f"{t['eta2_mean']:>8.4f} [{t['eta2_low']:.4f}, {t['eta2_high']:.4f}]  "
            f"{c['eta2_mean']:>8.4f} [{c['eta2_low']:.4f}, {c['eta2_high']:.4f}]  "
            f"{d['p_tom_dominant']:>11.3f}")
    nd = summary["dominance"]["n_dominant"]
    lines.append(f"ToM-dominant grid cells: {nd['mean']:.1f} of {summary['dominance']['n_cells']}"
                 f" (95% posterior interval {nd['low']:.0f}–{nd['high']:.0f}; the paper's own "
                 "parameters: 39/49)")
    lines += [f"wrote {f}" for f in files]
    return "\n".join(lines)
