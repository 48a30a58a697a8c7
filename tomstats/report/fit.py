"""Report on a fitted GLMM: an ArviZ InferenceData saved as netCDF by ``tomstats fit``.

Sections, in order (each drawn when its data exist, otherwise a note says what is missing):

1. diagnostics verdict — divergences, tree depth, E-BFMI, R-hat, bulk and tail ESS, each with
   its threshold and the offending parameters;
2. header — model/spec, data summary, backend, sampler settings, versions, data hash (the
   fit's attributes);
3. summary table (``arviz.summary``: mean, sd, HDI, MCSE, ESS, R-hat);
4. trace and rank plots, energy plot;
5. posterior densities with the prior overlaid (``prior`` group);
6. posterior predictive checks for binary outcomes: calibration curve, accuracy by design
   cell with the observed points (``posterior_predictive`` + ``observed_data`` groups, design
   covariates from ``constant_data``);
7. PSIS-LOO with the Pareto-k table (``log_likelihood`` group);
8. for structural fits, the calibrated η² decomposition per LLM and the 7 × 7 dominance map
   with posterior intervals (a small sweep, :mod:`tomstats.report.calibrated`); formula fits
   get a note saying why it is skipped.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tomstats.glmm.convergence import dataset_convergence
from tomstats.report._document import (
    Check,
    Document,
    Image,
    Section,
    Table,
    Text,
    Verdict,
    check_output,
    figure_png,
    write_document,
)
from tomstats.report.calibrated import SWEEP_DRAWS, fit_sweep_blocks

__all__ = [
    "THRESHOLDS",
    "diagnostics_verdict",
    "fit_document",
    "load_fit",
    "report_variables",
    "write_fit_report",
]

#: Thresholds of the fallback diagnostics (Vehtari et al. 2021; Betancourt 2016): R-hat
#: ≤ 1.01, bulk and tail ESS ≥ 100 per chain, no divergences, no draws at the maximum tree
#: depth, E-BFMI ≥ 0.3 in every chain.
THRESHOLDS: dict[str, float] = {"r_hat": 1.01, "ess_per_chain": 100.0, "ebfmi": 0.3}

#: Variables with more elements than this per draw (per-item effects) are summarised in the
#: diagnostics but left out of the tables and plots.
MAX_ELEMENTS = 12
_MAX_PANELS = 16
_CONTEXT_NAMES = ("context_length", "context", "c")
_TOM_NAMES = ("tom_order", "tom", "t")
_LLM_NAMES = ("llm", "model", "model_id", "llm_idx", "model_idx")
_ITEM_NAMES = ("item", "item_id", "item_idx")
_ENGINES = ("h5netcdf", "netcdf4")


# --------------------------------------------------------------------------- loading


def load_fit(path: str | os.PathLike[str]) -> az.InferenceData:
    """Read a fit saved as netCDF and check it holds a posterior.

    Raises
    ------
    ValueError
        If the file does not exist, is not a netCDF/InferenceData file, or has no
        ``posterior`` group with draws (so it is not a fitted model).
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"FIT: {str(p)!r} is a folder, expected a fit netCDF file "
                         "(for a simulation folder use --simulation DIR)")
    if not p.is_file():
        raise ValueError(f"FIT: {str(p)!r} does not exist or is not a file")
    idata = None
    for engine in _ENGINES:
        try:
            idata = az.from_netcdf(p, engine=engine)
            break
        except ImportError:  # this engine's library is not installed: try the next one
            continue
        except Exception as exc:  # netCDF4/h5netcdf raise OSError, ValueError, KeyError, ...
            raise ValueError(f"FIT: {str(p)!r} is not a netCDF InferenceData file "
                             f"({type(exc).__name__}: {exc})") from exc
    if idata is None:
        raise ValueError(f"FIT: cannot read {str(p)!r}: neither h5py (for h5netcdf) nor "
                         "netCDF4 is installed")
    if "posterior" not in idata.groups():
        groups = list(idata.groups())
        raise ValueError(f"FIT: {str(p)!r} has no 'posterior' group (groups: {groups}); it is "
                         "not a fitted model — write fits with `tomstats fit`")
    post = idata.posterior
    if not post.data_vars or "chain" not in post.dims or "draw" not in post.dims:
        raise ValueError(f"FIT: {str(p)!r}: the 'posterior' group has no (chain, draw) variables")
    return idata


def report_variables(idata: az.InferenceData, max_elements: int = MAX_ELEMENTS) -> list[str]:
    """Posterior variables small enough to tabulate and plot (≤ ``max_elements`` each).

    Deterministic per-observation quantities and per-item effects are left out; the
    diagnostics still cover every variable.
    """
    post = idata.posterior
    out = []
    for name, da in post.data_vars.items():
        if _internal(str(name)):
            continue
        size = int(np.prod([n for d, n in da.sizes.items() if d not in ("chain", "draw")]))
        if size <= max_elements:
            out.append(str(name))
    return out


def _internal(name: str) -> bool:
    """Reparametrisation internals (``*_z``, ``*_scaled``, ``z_*``, ``L_*``): not reported."""
    return (name.endswith(("_z", "_scaled", "_dev")) or name.startswith(("z_", "L_"))
            or name == "beta_c")


# --------------------------------------------------------------------------- diagnostics


def _offenders(ds: xr.Dataset, bad: Callable[[np.ndarray], np.ndarray], limit: int = 6
               ) -> list[str]:
    names: list[str] = []
    for name, da in ds.data_vars.items():
        vals = np.asarray(da.values, dtype=float)
        mask = bad(vals)
        if not mask.any():
            continue
        if vals.ndim == 0:
            names.append(str(name))
            continue
        for idx in zip(*np.nonzero(mask), strict=True):
            coords = ",".join(str(da[d].values[i]) if d in da.coords else str(i)
                              for d, i in zip(da.dims, idx, strict=True))
            names.append(f"{name}[{coords}]")
    more = len(names) - limit
    return names[:limit] + ([f"… {more} more"] if more > 0 else [])


def _stat(ds: xr.Dataset, fn: Callable[[np.ndarray], float]) -> float:
    vals = [fn(np.asarray(v.values, dtype=float)) for v in ds.data_vars.values()]
    vals = [v for v in vals if not math.isnan(v)]
    return float(fn(np.asarray(vals))) if vals else math.nan


def _max_tree_depth(idata: az.InferenceData) -> int | None:
    for group in ("sample_stats", "posterior"):
        if group not in idata.groups():
            continue
        attrs = getattr(idata, group).attrs
        for key in ("max_tree_depth", "max_treedepth", "sampler_max_tree_depth"):
            if key in attrs:
                return int(attrs[key])
    return None


def _fallback_checks(idata: az.InferenceData) -> tuple[Check, ...]:
    post = idata.posterior
    n_chains = int(post.sizes["chain"])
    checks: list[Check] = []
    stats = idata.sample_stats if "sample_stats" in idata.groups() else None
    if stats is not None and "diverging" in stats:
        n_div = int(np.asarray(stats["diverging"].values, dtype=bool).sum())
        n_tot = int(np.prod(stats["diverging"].shape))
        checks.append(Check("divergences", n_div == 0, f"{n_div} of {n_tot} draws", "= 0",
                            "increase target_accept or reparameterise" if n_div else ""))
    else:
        checks.append(Check("divergences", None, "—", "= 0", "sample_stats has no 'diverging'"))
    depth_var = None
    if stats is not None:
        depth_var = next((v for v in ("reached_max_treedepth", "tree_depth") if v in stats), None)
    max_depth = _max_tree_depth(idata)
    if depth_var == "reached_max_treedepth":
        n_hit = int(np.asarray(stats[depth_var].values, dtype=bool).sum())
        checks.append(Check("tree depth", n_hit == 0, f"{n_hit} draws at the maximum",
                            "no draw at the maximum depth", ""))
    elif depth_var == "tree_depth":
        depth = np.asarray(stats["tree_depth"].values)
        if max_depth is None:
            checks.append(Check("tree depth", None, f"max observed {int(depth.max())}",
                                "no draw at the maximum depth",
                                "the fit does not record its max_tree_depth"))
        else:
            n_hit = int((depth >= max_depth).sum())
            checks.append(Check("tree depth", n_hit == 0, f"{n_hit} draws at depth {max_depth}",
                                f"< {max_depth} (max_tree_depth)", ""))
    else:
        checks.append(Check("tree depth", None, "—", "no draw at the maximum depth",
                            "sample_stats has no tree depth"))
    if stats is not None and "energy" in stats:
        ebfmi = np.atleast_1d(az.bfmi(idata))
        low = [f"chain {i}" for i, v in enumerate(ebfmi) if v < THRESHOLDS["ebfmi"]]
        checks.append(Check("E-BFMI", not low, f"min {float(ebfmi.min()):.3f}",
                            f"≥ {THRESHOLDS['ebfmi']} per chain", ", ".join(low)))
    else:
        checks.append(Check("E-BFMI", None, "—", f"≥ {THRESHOLDS['ebfmi']} per chain",
                            "sample_stats has no 'energy'"))
    conv = dataset_convergence(post)
    if n_chains < 2:
        checks.append(Check("R-hat", None, "—", f"≤ {THRESHOLDS['r_hat']}",
                            "needs at least 2 chains"))
    else:
        checks.append(_threshold_check("R-hat", conv["rhat"], lambda v: v > THRESHOLDS["r_hat"],
                                       np.nanmax, f"≤ {THRESHOLDS['r_hat']}", "max {:.4f}"))
    ess_min = THRESHOLDS["ess_per_chain"] * n_chains
    for method, label in (("bulk", "bulk ESS"), ("tail", "tail ESS")):
        ess = conv[f"ess_{method}"]
        checks.append(_threshold_check(label, ess, lambda v, m=ess_min: v < m, np.nanmin,
                                       f"≥ {ess_min:.0f} (100 per chain)", "min {:.0f}"))
    return tuple(checks)


def _threshold_check(name: str, ds: xr.Dataset, bad: Callable[[np.ndarray], np.ndarray],
                     agg: Callable[[np.ndarray], float], threshold: str, fmt: str) -> Check:
    value = _stat(ds, lambda a: float(agg(a)) if a.size else math.nan)
    offenders = _offenders(ds, lambda a: np.nan_to_num(bad(a), nan=False).astype(bool))
    if math.isnan(value):
        return Check(name, None, "—", threshold, "could not be computed (constant draws?)")
    return Check(name, not offenders, fmt.format(value), threshold, ", ".join(offenders))


_GLMM_NAMES = {"divergences": "divergences", "tree_depth": "tree depth", "ebfmi": "E-BFMI",
               "rhat": "R-hat", "ess_bulk": "bulk ESS", "ess_tail": "tail ESS"}
_GLMM_RULES = {"divergences": "= {t:g}", "tree_depth": "= {t:g} draws at the maximum",
               "ebfmi": "≥ {t:g} per chain", "rhat": "≤ {t:g}", "ess_bulk": "≥ {t:.0f}",
               "ess_tail": "≥ {t:.0f}"}
_STAT_NEEDED = {"divergences": "diverging", "tree_depth": "reached_max_treedepth",
                "ebfmi": "energy"}


def _glmm_checks(idata: az.InferenceData) -> tuple[Check, ...] | None:
    """Checks from ``tomstats.glmm.check_diagnostics`` (the rules ``tomstats fit`` applies).

    ``None`` when the GLMM stage is not importable or the fit has no ``sample_stats``. A
    check whose sampler statistic is absent is shown as not made (n/a), never as passed.
    """
    if "sample_stats" not in idata.groups():
        return None
    try:
        from tomstats.glmm import check_diagnostics
    except ImportError:
        return None
    report = check_diagnostics(idata)
    stats = idata.sample_stats
    out = []
    for c in report.checks:
        label = _GLMM_NAMES.get(c.name, c.name)
        rule = _GLMM_RULES.get(c.name, "{t:g}").format(t=c.threshold)
        need = _STAT_NEEDED.get(c.name)
        if need is not None and need not in stats:
            out.append(Check(label, None, "—", rule, f"sample_stats has no {need!r}"))
            continue
        value = f"{c.value:.4g}" if c.name in ("rhat", "ebfmi") else f"{c.value:.0f}"
        shown = ", ".join(c.offending[:6]) + (f" … {len(c.offending) - 6} more"
                                             if len(c.offending) > 6 else "")
        detail = shown if c.passed else "; ".join(x for x in (shown, f"try: {c.advice}") if x)
        out.append(Check(label, bool(c.passed), value, rule, detail))
    return tuple(out)


def diagnostics_verdict(idata: az.InferenceData) -> Verdict:
    """Pass/fail verdict on the sampler diagnostics, with thresholds and offending parameters.

    Uses :func:`tomstats.glmm.check_diagnostics`, so the report and ``tomstats fit`` apply the
    same rules; for an InferenceData without ``sample_stats`` (or without the GLMM stage),
    the fallback checks of :data:`THRESHOLDS`, which mark every check they cannot make.
    """
    return Verdict("Sampler diagnostics", _glmm_checks(idata) or _fallback_checks(idata))


# --------------------------------------------------------------------------- header


def _attrs(idata: az.InferenceData) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for group in ("posterior", "sample_stats", "observed_data"):
        if group in idata.groups():
            for k, v in getattr(idata, group).attrs.items():
                attrs.setdefault(str(k), v)
    if hasattr(idata, "attrs"):
        for k, v in dict(getattr(idata, "attrs", {}) or {}).items():
            attrs.setdefault(str(k), v)
    return attrs


def _is_tomstats_fit(attrs: dict[str, Any]) -> bool:
    return any("tomstats" in k.lower() or "tomstats" in str(v).lower()[:200]
               for k, v in attrs.items())


def _find(ds: xr.Dataset | None, names: Sequence[str]) -> xr.DataArray | None:
    if ds is None:
        return None
    for n in names:
        if n in ds.variables:
            return ds[n]
    return None


def _observed(idata: az.InferenceData) -> tuple[str, np.ndarray] | None:
    if "observed_data" not in idata.groups() or not idata.observed_data.data_vars:
        return None
    name = str(next(iter(idata.observed_data.data_vars)))
    return name, np.asarray(idata.observed_data[name].values).ravel()


def _design(idata: az.InferenceData, n_obs: int) -> dict[str, np.ndarray]:
    """Per-observation covariates (context, tom, llm, item) found in ``constant_data``."""
    const = idata.constant_data if "constant_data" in idata.groups() else None
    out = {}
    for key, names in (("context", _CONTEXT_NAMES), ("tom", _TOM_NAMES), ("llm", _LLM_NAMES),
                       ("item", _ITEM_NAMES)):
        da = _find(const, names)
        if da is not None and da.size == n_obs:
            out[key] = np.asarray(da.values).ravel()
    return out


def _is_glmm_fit(idata: az.InferenceData) -> bool:
    return "tomstats_glmm_format" in idata.posterior.attrs and "constant_data" in idata.groups()


def _glmm_data_summary(idata: az.InferenceData) -> pd.DataFrame:
    from tomstats.glmm import training_data

    df = training_data(idata)
    rows = [("data rows", f"{len(df):,}")]
    n_obs = idata.observed_data["y"].size if "observed_data" in idata.groups() else None
    if n_obs is not None and n_obs != len(df):
        rows.append(("observations after aggregation", f"{n_obs:,}"))
    if "correct" in df:
        rows.append(("accuracy", f"{df['correct'].mean():.3f}"))
    elif {"successes", "trials"} <= set(df.columns):
        rows.append(("questions (trials)", f"{int(df['trials'].sum()):,}"))
        rows.append(("accuracy", f"{df['successes'].sum() / df['trials'].sum():.3f}"))
    if "model" in df:
        names = [str(m) for m in pd.unique(df["model"])]
        shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
        rows.append(("LLMs", f"{len(names)} ({shown})"))
    if "item" in df:
        rows.append(("items", f"{df['item'].nunique():,}"))
    cells = [c for c in ("context_words", "tom_order") if c in df]
    if cells:
        rows.append((f"design cells ({' × '.join(cells)})",
                     str(len(df[cells].drop_duplicates()))))
    return pd.DataFrame(rows, columns=["quantity", "value"])


def _data_summary(idata: az.InferenceData) -> pd.DataFrame:
    if _is_glmm_fit(idata):
        return _glmm_data_summary(idata)
    obs = _observed(idata)
    if obs is None:
        return pd.DataFrame({"quantity": ["rows"], "value": ["— (no observed_data group)"]})
    name, y = obs
    d = _design(idata, y.size)
    rows = [("outcome", name), ("rows", f"{y.size:,}"), ("accuracy", f"{np.mean(y):.3f}")]
    if "llm" in d:
        rows.append(("LLMs", str(len(np.unique(d["llm"])))))
    if "item" in d:
        rows.append(("items", str(len(np.unique(d["item"])))))
    if "context" in d and "tom" in d:
        cells = len({(a, b) for a, b in zip(d["context"], d["tom"], strict=True)})
        rows.append(("design cells (context × ToM)", str(cells)))
    return pd.DataFrame(rows, columns=["quantity", "value"])


def _header_table(attrs: dict[str, Any]) -> pd.DataFrame:
    def show(v: Any) -> str:
        s = str(v)
        return s if len(s) <= 400 else s[:400] + " …"

    keys = sorted(attrs)
    return pd.DataFrame({"attribute": keys, "value": [show(attrs[k]) for k in keys]})


def _sampler_table(idata: az.InferenceData) -> pd.DataFrame:
    post = idata.posterior
    rows = [("chains", int(post.sizes["chain"])), ("draws per chain", int(post.sizes["draw"]))]
    groups = ", ".join(sorted(idata.groups()))
    rows.append(("groups", groups))
    return pd.DataFrame(rows, columns=["setting", "value"])


# --------------------------------------------------------------------------- plots


def _n_panels(ds: xr.Dataset, names: Sequence[str]) -> int:
    return sum(int(np.prod([n for d, n in ds[v].sizes.items() if d not in ("chain", "draw")]))
               for v in names)


def _flat_draws(ds: xr.Dataset, names: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """``[(label, draws (chain, draw))]`` for every scalar element of ``names``."""
    out = []
    for v in names:
        da = ds[v]
        other = [d for d in da.dims if d not in ("chain", "draw")]
        if not other:
            out.append((str(v), np.asarray(da.transpose("chain", "draw").values)))
            continue
        stacked = da.stack(_el=other).transpose("chain", "draw", "_el")
        for i in range(stacked.sizes["_el"]):
            label = ",".join(str(x) for x in np.atleast_1d(stacked["_el"].values[i]))
            out.append((f"{v}[{label}]", np.asarray(stacked.values[..., i])))
    return out


@contextlib.contextmanager
def _quiet_arviz() -> Iterator[None]:
    """Silence ArviZ 0.22's matplotlib-3.11 deprecation chatter (not the user's concern)."""
    from matplotlib import MatplotlibDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
        yield


def fig_trace(idata: az.InferenceData, var_names: Sequence[str]) -> Figure:
    """Trace plot (density and trace per variable, chains overlaid) with ArviZ."""
    fig = Figure(figsize=(11, 1.9 * len(var_names) + 0.4), layout="constrained")
    axes = fig.subplots(len(var_names), 2, squeeze=False)
    with _quiet_arviz():
        az.plot_trace(idata, var_names=list(var_names), compact=True, axes=axes, show=False)
    return fig


def fig_rank(idata: az.InferenceData, var_names: Sequence[str]) -> Figure:
    """Rank plots (one panel per scalar parameter): uniform bars when the chains mix."""
    n = _n_panels(idata.posterior, var_names)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(11, 2.3 * rows + 0.3), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    with _quiet_arviz():
        az.plot_rank(idata, var_names=list(var_names), ax=axes[:n], show=False)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig


def fig_energy(idata: az.InferenceData) -> Figure:
    """Energy plot: marginal energy vs energy transition distributions (with E-BFMI)."""
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    with _quiet_arviz():
        az.plot_energy(idata, ax=ax, show=False)
    return fig


def spec_prior_pdfs(attrs: dict[str, Any]) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Prior densities of scalar parameters from a tomstats fit's ``spec`` attribute.

    A prior on ``x_scaled`` with the spec's ``x_scale`` becomes the density of
    ``x = x_scale · x_scaled``: :math:`f_x(v) = f(v/s)/s`. Supported: normal, half_normal,
    student_t, half_student_t, exponential (as in :class:`tomstats.glmm.Prior`).
    """
    import json

    from scipy import stats

    try:
        spec = json.loads(str(attrs.get("spec", "{}")))
    except json.JSONDecodeError:
        return {}
    priors = spec.get("priors") if isinstance(spec, dict) else None
    if not isinstance(priors, dict):
        return {}
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    for name, d in priors.items():
        if not isinstance(d, dict):
            continue
        kind = d.get("dist")
        try:
            if kind == "normal":
                dist: Any = stats.norm(d["loc"], d["scale"])
            elif kind == "half_normal":
                dist = stats.halfnorm(scale=d["scale"])
            elif kind == "student_t":
                dist = stats.t(d["df"], d["loc"], d["scale"])
            elif kind == "half_student_t":
                dist = _HalfT(d["df"], d["scale"])
            elif kind == "exponential":
                dist = stats.expon(scale=1 / d["rate"])
            else:
                continue
        except (KeyError, TypeError, ZeroDivisionError):
            continue
        target, scale = name, 1.0
        if name.endswith("_scaled") and isinstance(spec.get(f"{name[:-7]}_scale"), (int, float)):
            target, scale = name[:-7], float(spec[f"{name[:-7]}_scale"])
        out[target] = (lambda v, dist=dist, s=scale: dist.pdf(np.asarray(v) / s) / s)
    return out


class _HalfT:
    """Half-Student-t(df, scale) density on x > 0."""

    def __init__(self, df: float, scale: float) -> None:
        from scipy import stats

        self._t = stats.t(df, 0.0, scale)

    def pdf(self, v: np.ndarray) -> np.ndarray:
        return np.where(v > 0, 2 * self._t.pdf(v), 0.0)


def fig_prior_posterior(idata: az.InferenceData, var_names: Sequence[str]) -> Figure:
    """Posterior density of each scalar parameter with its prior density overlaid.

    The prior comes from the ``prior`` group when there is one, else from the priors in the
    fit's ``spec`` attribute (:func:`spec_prior_pdfs`).
    """
    post = _flat_draws(idata.posterior, var_names)[:_MAX_PANELS]
    prior_ds = idata.prior if "prior" in idata.groups() else None
    prior_vars = [v for v in var_names if prior_ds is not None and v in prior_ds]
    prior = dict(_flat_draws(prior_ds, prior_vars)) if prior_ds is not None else {}
    pdfs = spec_prior_pdfs(_attrs(idata)) if prior_ds is None else {}
    cols = min(4, len(post))
    rows = math.ceil(len(post) / cols)
    fig = Figure(figsize=(11, 2.4 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (label, draws) in zip(axes, post, strict=False):
        x = draws.ravel()
        lo, hi = np.quantile(x, [0.001, 0.999])
        _kde_line(ax, x, "C0", "-", "posterior")
        if label in prior:
            p = prior[label].ravel()
            plo, phi = np.quantile(p, [0.005, 0.995])
            span = hi - lo
            _kde_line(ax, p[(p > min(plo, lo - span)) & (p < max(phi, hi + span))],
                      "C1", "--", "prior")
        elif label in pdfs:
            span = hi - lo
            grid = np.linspace(lo - span, hi + span, 200)
            ax.plot(grid, pdfs[label](grid), "--", color="C1", label="prior")
        ax.set_title(label, fontsize=9)
        ax.set_yticks([])
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
    for ax in axes[len(post):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=8, frameon=False)
    return fig


def _kde_line(ax: Any, x: np.ndarray, color: str, ls: str, label: str) -> None:
    x = x[np.isfinite(x)]
    if x.size < 2 or np.ptp(x) == 0:
        ax.axvline(float(x[0]) if x.size else 0.0, color=color, linestyle=ls, label=label)
        return
    grid, pdf = az.kde(x)
    ax.plot(grid, pdf, color=color, linestyle=ls, label=label)


def _binary(y: np.ndarray) -> bool:
    return y.size > 0 and bool(np.all(np.isin(y, (0, 1))))


def _pp_draws(idata: az.InferenceData, name: str, n_obs: int) -> np.ndarray | None:
    if "posterior_predictive" not in idata.groups():
        return None
    pp = idata.posterior_predictive
    if name not in pp:
        return None
    da = pp[name]
    other = [d for d in da.dims if d not in ("chain", "draw")]
    arr = np.asarray(da.stack(_s=("chain", "draw")).transpose("_s", *other).values)
    arr = arr.reshape(arr.shape[0], -1)
    return arr if arr.shape[1] == n_obs else None


def calibration_table(y: np.ndarray, p_hat: np.ndarray, bins: int = 10) -> pd.DataFrame:
    """Observed frequency of ``y = 1`` in equal-width bins of predicted probability.

    Returns one row per non-empty bin: ``bin_low, bin_high, n, predicted`` (mean ``p_hat``),
    ``observed`` (mean ``y``) and a 95 % Wilson interval ``observed_low, observed_high``.
    """
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p_hat, edges[1:-1]), 0, bins - 1)
    rows = []
    z = 1.959964
    for b in range(bins):
        m = idx == b
        n = int(m.sum())
        if n == 0:
            continue
        k = float(y[m].sum())
        f = k / n
        centre = (f + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(f * (1 - f) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        rows.append({"bin_low": edges[b], "bin_high": edges[b + 1], "n": n,
                     "predicted": float(p_hat[m].mean()), "observed": f,
                     "observed_low": centre - half, "observed_high": centre + half})
    return pd.DataFrame(rows)


def fig_calibration(y: np.ndarray, y_rep: np.ndarray) -> tuple[Figure, pd.DataFrame]:
    """Calibration curve for binary outcomes: observed frequency vs predicted probability.

    The predicted probability of observation :math:`i` is the posterior predictive mean
    :math:`\\hat p_i = \\frac1S\\sum_s y^{rep}_{s,i}`; observations are binned on
    :math:`\\hat p` and each bin's observed frequency is drawn with a 95 % Wilson interval.
    """
    tab = calibration_table(y, y_rep.mean(axis=0))
    return _draw_calibration(tab), tab


def _draw_calibration(tab: pd.DataFrame) -> Figure:
    """Draw a calibration table (``predicted, observed, observed_low, observed_high, n``)."""
    fig = Figure(figsize=(5.6, 5.0), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfect calibration")
    err = np.vstack([tab["observed"] - tab["observed_low"], tab["observed_high"] - tab["observed"]])
    ax.errorbar(tab["predicted"].to_numpy(), tab["observed"].to_numpy(),
                yerr=np.clip(err, 0, None), fmt="o-", color="C0", capsize=3,
                label="observed (95 % interval)")
    for _, r in tab.iterrows():
        ax.annotate(f"n={int(r['n'])}", (r["predicted"], r["observed"]), xytext=(4, -10),
                    textcoords="offset points", fontsize=7, color="#555")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("Predicted probability (posterior predictive mean)")
    ax.set_ylabel("Observed frequency correct")
    ax.set_title("Calibration (binned)")
    ax.legend(frameon=False, loc="upper left")
    ax.grid(alpha=0.3)
    return fig


def _num(v: Any) -> int | float:
    f = float(v)
    return int(f) if f.is_integer() else f


def cell_accuracy_table(y: np.ndarray, y_rep: np.ndarray, context: np.ndarray,
                        tom: np.ndarray, prob: float = 0.95) -> pd.DataFrame:
    """Observed and posterior predictive accuracy per design cell (context × ToM order).

    For each cell the predictive accuracy of draw :math:`s` is the mean of
    :math:`y^{rep}_{s,i}` over the cell's observations; the table gives its mean and central
    ``prob`` interval beside the observed accuracy.
    """
    frame = pd.DataFrame({"context": context, "tom": tom})
    rows = []
    q = ((1 - prob) / 2, 1 - (1 - prob) / 2)
    for (c, t), idx in frame.groupby(["context", "tom"], sort=True).indices.items():
        acc_draws = y_rep[:, idx].mean(axis=1)
        lo, hi = np.quantile(acc_draws, q)
        rows.append({"context_length": _num(c), "tom_order": _num(t), "n": len(idx),
                     "observed": float(y[idx].mean()), "predicted": float(acc_draws.mean()),
                     "predicted_low": float(lo), "predicted_high": float(hi)})
    return pd.DataFrame(rows)


def fig_cell_accuracy(tab: pd.DataFrame) -> Figure:
    """Posterior predictive accuracy by design cell (bands) with the observed accuracy (dots).

    ``tab`` has ``context_length, tom_order, observed, predicted, predicted_low,
    predicted_high`` and optionally ``panel`` (one panel per value, e.g. per LLM).
    """
    panels = list(pd.unique(tab["panel"])) if "panel" in tab else [None]
    panels = panels[:_MAX_PANELS]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols + 1.2, 3.6 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True).ravel()
    xs = np.unique(tab["context_length"].to_numpy(dtype=float))
    for ax, panel in zip(axes, panels, strict=False):
        sub = tab if panel is None else tab[tab["panel"] == panel]
        for i, (t, d) in enumerate(sub.groupby("tom_order", sort=True)):
            d = d.sort_values("context_length")
            x = d["context_length"].to_numpy(dtype=float)
            color = f"C{i}"
            ax.fill_between(x, d["predicted_low"].to_numpy(dtype=float),
                            d["predicted_high"].to_numpy(dtype=float), color=color, alpha=0.2)
            ax.plot(x, d["predicted"].to_numpy(dtype=float), "-", color=color,
                    label=f"ToM {float(t):g}")
            ax.plot(x, d["observed"].to_numpy(dtype=float), "o", color=color,
                    markeredgecolor="black")
        if np.all(xs > 0) and len(xs) > 1:
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{v:,.0f}" for v in xs])
            ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.set_xlabel("Context length (words)")
        ax.grid(alpha=0.3)
        if panel is not None:
            ax.set_title(str(panel), fontsize=10)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    axes[0].set_ylabel("Accuracy")
    axes[0].legend(fontsize=8, frameon=False, title="line: predicted; dot: observed",
                   title_fontsize=8)
    fig.suptitle("Accuracy by design cell: posterior predictive 95 % band and observed")
    return fig


# --------------------------------------------------------------------------- LOO


def loo_tables(idata: az.InferenceData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """PSIS-LOO estimate and the Pareto-k diagnostic table.

    Returns ``(estimate, pareto_k)``: ``elpd_loo, se, p_loo`` and the count and share of
    observations with :math:`\\hat k` in (−∞, 0.5], (0.5, good_k], (good_k, 1], (1, ∞), where
    ``good_k = min(1 − 1/log10(S), 0.7)`` for ``S`` posterior draws (Vehtari et al. 2024).
    """
    ll = idata.log_likelihood
    var_name = str(next(iter(ll.data_vars))) if len(ll.data_vars) > 1 else None
    with warnings.catch_warnings():  # high Pareto k is reported in the table, not warned
        warnings.filterwarnings("ignore", message=".*shape parameter of Pareto",
                                category=UserWarning)
        loo = az.loo(idata, pointwise=True, var_name=var_name)
    est = pd.DataFrame({"quantity": ["elpd_loo", "se", "p_loo"],
                        "value": [float(loo["elpd_loo"]), float(loo["se"]),
                                  float(loo["p_loo"])]})
    k = np.asarray(loo.pareto_k).ravel()
    n_samples = int(loo["n_samples"])
    good_k = float(loo["good_k"]) if "good_k" in loo else min(
        1 - 1 / math.log10(n_samples), 0.7)
    edges = [(-np.inf, 0.5, "good"), (0.5, good_k, "ok"), (good_k, 1.0, "bad"),
             (1.0, np.inf, "very bad")]
    rows = []
    for lo, hi, label in edges:
        n = int(((k > lo) & (k <= hi)).sum())
        rng = f"({lo:g}, {hi:.2f}]" if np.isfinite(lo) else f"(−∞, {hi:g}]"
        if not np.isfinite(hi):
            rng = f"({lo:g}, ∞)"
        rows.append({"Pareto k": rng, "label": label, "count": n, "share": n / k.size})
    return est, pd.DataFrame(rows)


# --------------------------------------------------------------------------- document


def fit_document(idata: az.InferenceData, name: str = "fit", *,
                 sweep_draws: int = SWEEP_DRAWS) -> Document:
    """Build the report :class:`~tomstats.report._document.Document` for a fit.

    Parameters
    ----------
    idata : arviz.InferenceData
        The fit (needs a ``posterior``; other groups are used when present).
    name : str
        Shown in the subtitle (usually the file name).
    sweep_draws : int
        Posterior draws of the calibrated sweep drawn for a structural fit
        (:func:`tomstats.report.calibrated.fit_sweep_blocks`); 0 leaves it out.
    """
    attrs = _attrs(idata)
    var_names = report_variables(idata)
    sections: list[Section] = [Section("", (diagnostics_verdict(idata),))]

    header: list[Any] = []
    if not _is_tomstats_fit(attrs):
        header.append(Text("This file carries no tomstats provenance attributes: it was not "
                           "written by tomstats.glmm.save_fit, so model, data hash and versions "
                           "are unknown.", "missing"))
    header += [Table(_data_summary(idata), caption="Data"),
               Table(_sampler_table(idata), caption="Sampling"),
               Table(_header_table(attrs), caption="Fit attributes (provenance)")]
    sections.append(Section("Model, data and provenance", tuple(header)))

    left_out = [str(v) for v in idata.posterior.data_vars if v not in var_names]
    summ: list[Any] = []
    if var_names:
        summary = az.summary(idata, var_names=var_names, hdi_prob=0.94, round_to="none")
        summ.append(Table(summary, caption="Posterior summary (94 % HDI)", index=True,
                          float_format="{:.4g}"))
    if left_out:
        summ.append(Text("Not tabulated or plotted (more than "
                         f"{MAX_ELEMENTS} elements each; covered by the diagnostics): "
                         + ", ".join(left_out) + ".", "note"))
    sections.append(Section("Posterior summary", tuple(summ)))

    plots: list[Any] = []
    if var_names:
        plots.append(Image(figure_png(fig_trace(idata, var_names)), "trace",
                           "Trace plots (left: density per chain; right: draws)."))
        if int(idata.posterior.sizes["chain"]) > 1:
            rank_vars = _limit_panels(idata.posterior, var_names)
            plots.append(Image(figure_png(fig_rank(idata, rank_vars)), "rank",
                               "Rank plots: near-uniform bars in every chain mean good mixing."))
        else:
            plots.append(Text("Rank plots need at least two chains.", "missing"))
    if "sample_stats" in idata.groups() and "energy" in idata.sample_stats:
        plots.append(Image(figure_png(fig_energy(idata)), "energy",
                           "Energy plot: the energy transition distribution should match the "
                           "marginal energy distribution (E-BFMI ≥ 0.3)."))
    else:
        plots.append(Text("No energy plot: sample_stats has no 'energy'.", "missing"))
    sections.append(Section("Sampler plots", tuple(plots)))

    dens: list[Any] = []
    if var_names:
        if "prior" not in idata.groups():
            has_spec = set(spec_prior_pdfs(attrs)) & set(var_names)
            dens.append(Text("No 'prior' group: the prior densities are drawn from the "
                             "priors in the fit's spec (for " + ", ".join(sorted(has_spec))
                             + ")." if has_spec else
                             "No 'prior' group and no priors in the fit's spec: posterior "
                             "densities are drawn without the prior.",
                             "note" if has_spec else "missing"))
        dens.append(Image(figure_png(fig_prior_posterior(idata, var_names)), "densities",
                          "Posterior densities (solid) with the prior overlaid (dashed)."))
    sections.append(Section("Posterior and prior", tuple(dens)))
    sections.append(Section("Posterior predictive checks", tuple(_ppc_blocks(idata))))
    sections.append(Section("Leave-one-out cross-validation (PSIS-LOO)",
                            tuple(_loo_blocks(idata))))
    sections.append(Section("Calibrated η² decomposition and ToM-dominance map",
                            tuple(fit_sweep_blocks(idata, draws=sweep_draws, name=name))))
    subtitle = f"{name} · {int(idata.posterior.sizes['chain'])} chains × " \
               f"{int(idata.posterior.sizes['draw'])} draws"
    return Document("tomstats fit report", subtitle, tuple(sections))


def _limit_panels(ds: xr.Dataset, names: Sequence[str]) -> list[str]:
    out, total = [], 0
    for v in names:
        n = _n_panels(ds, [v])
        if total + n > _MAX_PANELS:
            break
        out.append(v)
        total += n
    return out


def _glmm_ppc_blocks(idata: az.InferenceData) -> list[Any]:
    """Checks from :mod:`tomstats.glmm.ppc` (probabilities from the fit's own predictions,
    binomial rows weighted by their trials)."""
    from tomstats.glmm import accuracy_by_cell, calibration_curve

    cal = calibration_curve(idata, max_draws=400)
    cal_n = cal.rename(columns={"observed_lower": "observed_low", "observed_upper":
                                "observed_high", "trials": "n"})
    blocks: list[Any] = [Image(figure_png(_draw_calibration(cal_n)), "calibration",
                               "Calibration curve: observed rate correct (95 % Jeffreys "
                               "interval) in bins of the posterior mean probability.")]
    cells = accuracy_by_cell(idata, max_draws=400)
    if {"context_words", "tom_order"} <= set(cells.columns):
        tab = cells.rename(columns={"context_words": "context_length", "model": "panel",
                                    "predicted_lower": "predicted_low",
                                    "predicted_upper": "predicted_high",
                                    "expected": "predicted"})
        blocks.append(Image(figure_png(fig_cell_accuracy(tab)), "cells",
                            "Accuracy by design cell: posterior mean (line) and 95 % posterior "
                            "predictive band of the replicated accuracy, observed accuracy "
                            "(dots); one panel per LLM."))
        out = tab[(tab.observed < tab.predicted_low) | (tab.observed > tab.predicted_high)]
        blocks.append(Text(f"{len(out)} of {len(tab)} cells have an observed accuracy outside "
                           "the 95 % posterior predictive band; ppp is the posterior "
                           "predictive p-value P(replicated ≥ observed).", "note"))
        shown = cells.drop(columns=["expected_lower", "expected_upper"], errors="ignore")
        blocks.append(Table(shown, caption="Accuracy by design cell", float_format="{:.3f}"))
    else:
        blocks.append(Text("The fit's data have no context_words and tom_order columns: "
                           "accuracy by design cell not drawn.", "missing"))
    blocks.append(Table(cal, caption="Calibration bins", float_format="{:.3f}"))
    if "posterior_predictive" not in idata.groups():
        blocks.append(Text("No 'posterior_predictive' group: the bands above were simulated "
                           "from the posterior probabilities instead.", "note"))
    return blocks


def _ppc_blocks(idata: az.InferenceData) -> list[Any]:
    if _is_glmm_fit(idata):
        return _glmm_ppc_blocks(idata)
    obs = _observed(idata)
    if obs is None:
        return [Text("No 'observed_data' group: no posterior predictive checks.", "missing")]
    name, y = obs
    if not _binary(y):
        return [Text(f"Observed variable {name!r} is not binary (0/1): the binary checks "
                     "(calibration, accuracy by cell) do not apply.", "missing")]
    y_rep = _pp_draws(idata, name, y.size)
    if y_rep is None:
        return [Text(f"No 'posterior_predictive' group with {name!r} ({y.size} observations): "
                     "calibration and accuracy-by-cell checks not drawn. Refit with posterior "
                     "predictive sampling to add them.", "missing")]
    fig, cal = fig_calibration(y.astype(float), y_rep.astype(float))
    blocks: list[Any] = [Image(figure_png(fig), "calibration",
                               "Calibration curve: observed frequency correct in bins of the "
                               "posterior predictive probability.")]
    d = _design(idata, y.size)
    if "context" in d and "tom" in d:
        tab = cell_accuracy_table(y.astype(float), y_rep.astype(float),
                                  d["context"].astype(float), d["tom"].astype(float))
        blocks += [Image(figure_png(fig_cell_accuracy(tab)), "cells",
                         "Accuracy by design cell: posterior predictive mean and 95 % band "
                         "(lines), observed accuracy (dots)."),
                   Table(tab, caption="Accuracy by design cell", float_format="{:.3f}")]
        outside = tab[(tab.observed < tab.predicted_low) | (tab.observed > tab.predicted_high)]
        blocks.append(Text(f"{len(outside)} of {len(tab)} cells have an observed accuracy "
                           "outside the 95 % posterior predictive band.", "note"))
    else:
        blocks.append(Text("No per-observation context_length and tom_order in "
                           "'constant_data': accuracy by design cell not drawn.", "missing"))
    blocks.append(Table(cal, caption="Calibration bins", float_format="{:.3f}"))
    return blocks


def _loo_blocks(idata: az.InferenceData) -> list[Any]:
    if "log_likelihood" not in idata.groups() or not idata.log_likelihood.data_vars:
        return [Text("No 'log_likelihood' group: LOO and the Pareto-k table need pointwise "
                     "log-likelihoods (refit with log-likelihood storage).", "missing")]
    est, ktab = loo_tables(idata)
    bad = int(ktab.loc[ktab.label.isin(["bad", "very bad"]), "count"].sum())
    return [Table(est, caption="PSIS-LOO estimate"),
            Table(ktab, caption="Pareto k diagnostic", float_format="{:.3f}"),
            Text(f"{bad} observation(s) with Pareto k above the reliability threshold."
                 if bad else "All Pareto k values are below the reliability threshold.", "note")]


def write_fit_report(
    fit: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str = "html", *,
    sweep_draws: int = SWEEP_DRAWS,
) -> Path:
    """Write the report for a fit (netCDF) as HTML (one file) or Markdown + PNGs.

    Parameters
    ----------
    fit : path
        The fit, an ArviZ InferenceData netCDF (``tomstats fit --out fit.nc``).
    out : path
        The HTML file (``fmt="html"``) or the folder for ``report.md`` and its PNGs
        (``fmt="md"``).
    fmt : {"html", "md"}
        Output format.
    sweep_draws : int
        Posterior draws of the calibrated sweep for a structural fit (default
        :data:`~tomstats.report.calibrated.SWEEP_DRAWS`); 0 leaves it out.

    Returns
    -------
    pathlib.Path
        The HTML file or ``out/report.md``.
    """
    check_output(out, fmt)
    if isinstance(sweep_draws, bool) or not isinstance(sweep_draws, int) or sweep_draws < 0:
        raise ValueError(f"--sweep-draws must be a non-negative integer, got {sweep_draws!r}")
    idata = load_fit(fit)
    return write_document(fit_document(idata, Path(fit).name, sweep_draws=sweep_draws), out,
                          fmt)
