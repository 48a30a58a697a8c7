"""Posterior predictive draws shared by the prediction and check sections, the interval table
of any grouping of the observations, and the sentence that says where observed data fall
outside their predictive intervals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tomstats._validate import check_probabilities
from tomstats.analysis.intervals import jeffreys_interval
from tomstats.report.sections._context import FitContext, hdi_columns

__all__ = ["PPCData", "group_intervals", "misfit_sentence", "ppc_data"]

MAX_DRAWS = 400
_DESIGN = {"context_words": ("context_length", "context", "c", "context_words"),
           "tom_order": ("tom_order", "tom", "t"),
           "model": ("llm", "model", "model_id", "llm_idx", "model_idx")}


@dataclass(frozen=True)
class PPCData:
    """Per data row: outcome ``y`` (successes), ``n`` trials, draws ``p`` (S, rows) of the
    success probability (``None`` when the fit only has replicated outcomes), replicated
    successes ``rep`` (S, rows) and the design columns ``design``."""

    y: np.ndarray
    n: np.ndarray
    p: np.ndarray | None
    rep: np.ndarray
    design: pd.DataFrame
    source: str  # how the draws were made, for captions


def _glmm(ctx: FitContext) -> PPCData:
    from tomstats.glmm import predict, training_data
    from tomstats.glmm.ppc import observed_counts

    p = np.asarray(predict(ctx.idata, max_draws=MAX_DRAWS).values, dtype=float)
    y, n = observed_counts(ctx.idata)
    rng = np.random.default_rng(0)
    rep = rng.binomial(n.astype(np.int64)[None, :],
                       check_probabilities(p, "posterior predictive check")).astype(float)
    return PPCData(y, n, p, rep, training_data(ctx.idata),
                   "probabilities of the fit's own rows (tomstats.glmm.predict), replicated "
                   "outcomes drawn from them")


def _foreign(ctx: FitContext) -> PPCData | str:
    idata = ctx.idata
    if "observed_data" not in idata.groups() or not idata.observed_data.data_vars:
        return "No 'observed_data' group: no posterior predictive checks."
    name = str(next(iter(idata.observed_data.data_vars)))
    y = np.asarray(idata.observed_data[name].values).ravel()
    if not (y.size and np.all(np.isin(y, (0, 1)))):
        return (f"Observed variable {name!r} is not binary (0/1): the binary checks "
                "(calibration, accuracy by cell) do not apply.")
    pp = idata.posterior_predictive if "posterior_predictive" in idata.groups() else None
    if pp is None or name not in pp:
        return (f"No 'posterior_predictive' group with {name!r} ({y.size} observations): "
                "calibration and accuracy-by-cell checks not drawn. Refit with posterior "
                "predictive sampling to add them.")
    da = pp[name]
    other = [d for d in da.dims if d not in ("chain", "draw")]
    rep = np.asarray(da.stack(_s=("chain", "draw")).transpose("_s", *other).values,
                     dtype=float).reshape(-1, y.size)
    if rep.shape[0] > MAX_DRAWS:
        rep = rep[np.unique(np.linspace(0, rep.shape[0] - 1, MAX_DRAWS).round().astype(int))]
    design = {}
    const = idata.constant_data if "constant_data" in idata.groups() else None
    for std, names in _DESIGN.items():
        for nm in names:
            if const is not None and nm in const and const[nm].size == y.size:
                design[std] = np.asarray(const[nm].values).ravel()
                break
    return PPCData(y.astype(float), np.ones(y.size), None, rep, pd.DataFrame(design),
                   f"the fit's posterior_predictive draws of {name!r}")


def ppc_data(ctx: FitContext) -> PPCData | str:
    """The draws for the checks, or a sentence saying why there are none (computed once)."""
    return ctx.cached("ppc", lambda: _glmm(ctx) if ctx.is_glmm else _foreign(ctx))


def group_intervals(d: PPCData, codes: np.ndarray, prob: float) -> pd.DataFrame:
    """Observed and predicted rate per group of rows (``codes`` 0..G−1).

    For group :math:`g` and draw :math:`s`: expected rate :math:`\\sum n_i p_i^{(s)} / \\sum
    n_i` and replicated rate :math:`\\sum y^{rep,(s)}_i / \\sum n_i`; ``predicted`` is the
    mean expected rate (the replicated one when ``p`` is absent), ``rep low/high`` the HDI
    of the replicated rate, ``obs low/high`` the Jeffreys interval of the observed rate,
    ``outside`` the signed distance of the observed rate from the replicated HDI (0 inside).
    """
    G = int(codes.max()) + 1 if codes.size else 0
    onehot = np.zeros((codes.size, G))
    onehot[np.arange(codes.size), codes] = 1.0
    nt = d.n @ onehot
    k = d.y @ onehot
    rep = (d.rep @ onehot) / nt
    exp = ((d.p * d.n) @ onehot) / nt if d.p is not None else rep
    rlo, rhi = hdi_columns(rep, prob)
    elo, ehi = hdi_columns(exp, prob)
    olo, ohi = jeffreys_interval(k, nt, prob)
    obs = k / nt
    outside = np.where(obs > rhi, obs - rhi, np.where(obs < rlo, obs - rlo, 0.0))
    return pd.DataFrame({"n": nt.astype(int), "observed": obs, "obs low": olo, "obs high": ohi,
                         "predicted": exp.mean(axis=0), "pred low": elo, "pred high": ehi,
                         "rep low": rlo, "rep high": rhi, "outside": outside})


def misfit_sentence(tab: pd.DataFrame, names: list[str], what: str, prob: float) -> str | None:
    """Where observed rates fall outside their predictive intervals, in words; ``None`` when
    every one lies inside.

    ``names`` label the rows of ``tab`` (from :func:`group_intervals`). The sentence names
    each group outside, its observed and predicted rate, the interval and the distance, and
    compares the count with the ≈ (1 − prob) share expected by chance.
    """
    bad = np.flatnonzero(tab["outside"].to_numpy() != 0)
    if bad.size == 0:
        return None
    m = len(tab)
    order = bad[np.argsort(-np.abs(tab["outside"].to_numpy()[bad]))]
    parts = []
    for i in order[:6]:
        r = tab.iloc[i]
        side = "above" if r["outside"] > 0 else "below"
        parts.append(f"{names[i]}: observed {r['observed']:.3f} (n = {int(r['n'])}) vs "
                     f"predicted {r['predicted']:.3f} [{r['rep low']:.3f}, {r['rep high']:.3f}]"
                     f", {abs(r['outside']):.3f} {side} the interval")
    more = f"; and {bad.size - 6} more" if bad.size > 6 else ""
    expected = (1 - prob) * m
    chance = (f" About {expected:.1f} of {m} would fall outside by chance alone"
              + (", so this many points to a misfit." if bad.size > max(1.0, 2 * expected)
                 else ", so this alone is weak evidence of misfit."))
    pct = f"{100 * prob:g} %"
    return (f"Observed accuracy falls outside the {pct} posterior predictive interval in "
            f"{bad.size} of {m} {what}: " + "; ".join(parts) + more + "." + chance)
