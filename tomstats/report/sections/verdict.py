"""Section 1: the sampler-diagnostics verdict, and the page's interval convention.

Divergences, tree depth, E-BFMI, R-hat, bulk and tail ESS, each with its threshold and the
offending parameters (:func:`tomstats.glmm.check_diagnostics`, the rules ``tomstats fit``
applies; the fallback :data:`THRESHOLDS` for an InferenceData not written by tomstats).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import arviz as az
import numpy as np
import xarray as xr

from tomstats.glmm.rhat_ess import dataset_convergence
from tomstats.report._document import Check, Section, Text, Verdict
from tomstats.report.sections._context import FitContext, interval_note

__all__ = ["THRESHOLDS", "diagnostics_verdict", "section"]

#: Thresholds of the fallback diagnostics (Vehtari et al. 2021; Betancourt 2016): R-hat
#: ≤ 1.01, bulk and tail ESS ≥ 100 per chain, no divergences, no draws at the maximum tree
#: depth, E-BFMI ≥ 0.3 in every chain.
THRESHOLDS: dict[str, float] = {"r_hat": 1.01, "ess_per_chain": 100.0, "ebfmi": 0.3}



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
                            "raise the target acceptance rate or reparametrise" if n_div
                            else ""))
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
    from tomstats.glmm.diagnostics import advice

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
        # the page is read by whoever refits: advice as ``tomstats fit`` flags, the syntax
        # of the verdict ``tomstats fit`` prints (a Python caller's keywords are the same
        # names with underscores)
        try:
            tip = advice(c.name, "cli")
        except KeyError:
            tip = c.advice
        detail = shown if c.passed else "; ".join(x for x in (shown, f"try: {tip}") if x)
        out.append(Check(label, bool(c.passed), value, rule, detail))
    if int(idata.posterior.sizes["chain"]) < 2 and "rhat" not in [c.name for c in report.checks]:
        out.insert(3, Check("R-hat", None, "n/a", _GLMM_RULES["rhat"].format(t=THRESHOLDS["r_hat"]),
                            "R-hat compares chains: one chain has none (run --chains 2 or "
                            "more to check convergence)"))
    return tuple(out)


def diagnostics_verdict(idata: az.InferenceData) -> Verdict:
    """Pass/fail verdict on the sampler diagnostics, with thresholds and offending parameters.

    Uses :func:`tomstats.glmm.check_diagnostics`, so the report and ``tomstats fit`` apply the
    same rules; for an InferenceData without ``sample_stats`` (or without the GLMM stage),
    the fallback checks of :data:`THRESHOLDS`, which mark every check they cannot make.
    """
    return Verdict("Sampler diagnostics", _glmm_checks(idata) or _fallback_checks(idata))


def section(ctx: FitContext) -> Section:
    """The verdict box, then the page's one statement of its interval convention."""
    return Section("", (diagnostics_verdict(ctx.idata), Text(interval_note(ctx.prob), "note")))
