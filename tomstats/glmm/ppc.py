"""Posterior predictive checks for binary outcomes (the LOO/WAIC comparison of fits is
:func:`tomstats.glmm.compare.compare`).

Every function returns a tidy ``pandas.DataFrame`` (the report stage draws them):

- :func:`calibration_curve` — predicted vs observed success rate in bins of predicted
  probability (a reliability diagram);
- :func:`separation_data` — rows sorted by predicted probability with their outcomes
  (a separation plot, Greenhill, Ward & Sacks 2011);
- :func:`accuracy_by_cell` — observed accuracy per design cell (model × context × ToM
  order) against its posterior predictive distribution.

Predicted probabilities come from :func:`tomstats.glmm.predict` on the fit's own rows, so
a fitted item/LLM effect is included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import check_probabilities
from tomstats.analysis.intervals import jeffreys_interval
from tomstats.glmm.fitting import fit_spec, predict, training_data
from tomstats.glmm.spec import StructuralSpec

__all__ = ["calibration_curve", "separation_data", "accuracy_by_cell",
           "observed_counts"]


def observed_counts(idata: Any) -> tuple[np.ndarray, np.ndarray]:
    """Successes and trials per data row of a fit."""
    spec = fit_spec(idata)
    df = training_data(idata)
    if isinstance(spec, StructuralSpec):
        resp, trials = (("correct", None) if spec.family == "bernoulli"
                        else ("successes", "trials"))
    else:
        resp, trials = spec.response, spec.trials
    y = df[resp].to_numpy(dtype=float)
    n = np.ones_like(y) if trials is None else df[trials].to_numpy(dtype=float)
    return y, n


def _p_draws(idata: Any, max_draws: int | None) -> np.ndarray:
    return predict(idata, max_draws=max_draws).to_numpy()


def calibration_curve(
    idata: Any,
    bins: int | Sequence[float] = 10,
    *,
    strategy: str = "uniform",
    prob: float = 0.95,
    max_draws: int | None = 1000,
) -> pd.DataFrame:
    r"""Predicted vs observed success rate in bins of the posterior-mean probability.

    For bin :math:`B`: ``predicted`` :math:`=\sum_{i\in B} n_i\bar p_i/\sum n_i` with
    :math:`\bar p_i` the posterior mean of :math:`p_i` (interval: quantiles over draws of
    the same weighted mean), ``observed`` :math:`=\sum y_i/\sum n_i` with a Jeffreys
    interval. A calibrated model has ``observed`` inside the interval around ``predicted``.

    Parameters
    ----------
    bins : int or sequence of float
        Number of bins, or bin edges in [0, 1].
    strategy : {"uniform", "quantile"}
        Equal-width bins on [0, 1], or bins with equal numbers of rows.
    prob : float
        Interval probability.
    max_draws : int, optional
        Posterior draws used (thinned evenly).
    """
    if strategy not in ("uniform", "quantile"):
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    p = _p_draws(idata, max_draws)
    y, n = observed_counts(idata)
    pm = p.mean(axis=0)
    if isinstance(bins, int):
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        edges = (np.linspace(0, 1, bins + 1) if strategy == "uniform"
                 else np.unique(np.quantile(pm, np.linspace(0, 1, bins + 1))))
    else:
        edges = np.asarray(bins, dtype=float)
    which = np.clip(np.searchsorted(edges, pm, side="right") - 1, 0, len(edges) - 2)
    a = (1 - prob) / 2
    rows = []
    for b in range(len(edges) - 1):
        m = which == b
        if not m.any():
            continue
        w = n[m]
        per_draw = (p[:, m] * w).sum(axis=1) / w.sum()
        k, nn = y[m].sum(), w.sum()
        lo, hi = jeffreys_interval(np.array([k]), np.array([nn]), prob)
        rows.append({"bin_lower": edges[b], "bin_upper": edges[b + 1], "n_rows": int(m.sum()),
                     "trials": int(nn), "predicted": float((pm[m] * w).sum() / nn),
                     "predicted_lower": float(np.quantile(per_draw, a)),
                     "predicted_upper": float(np.quantile(per_draw, 1 - a)),
                     "observed": float(k / nn), "observed_lower": float(lo[0]),
                     "observed_upper": float(hi[0])})
    return pd.DataFrame(rows)


def separation_data(idata: Any, *, prob: float = 0.95,
                    max_draws: int | None = 1000) -> pd.DataFrame:
    """Rows sorted by posterior-mean probability, with outcomes: a separation plot's data.

    Columns: ``row`` (data row), ``rank``, ``p_mean``, ``p_lower``, ``p_upper``,
    ``successes``, ``trials``, ``observed`` (rate), ``expected_total`` (running sum of
    expected successes) and ``observed_total`` (running sum of successes).
    """
    p = _p_draws(idata, max_draws)
    y, n = observed_counts(idata)
    a = (1 - prob) / 2
    order = np.argsort(p.mean(axis=0), kind="stable")
    pm = p.mean(axis=0)[order]
    return pd.DataFrame({
        "row": order, "rank": np.arange(order.size), "p_mean": pm,
        "p_lower": np.quantile(p, a, axis=0)[order],
        "p_upper": np.quantile(p, 1 - a, axis=0)[order],
        "successes": y[order], "trials": n[order], "observed": y[order] / n[order],
        "expected_total": np.cumsum(pm * n[order]), "observed_total": np.cumsum(y[order]),
    })


def accuracy_by_cell(
    idata: Any,
    by: Sequence[str] | None = None,
    *,
    prob: float = 0.95,
    max_draws: int | None = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    r"""Observed accuracy per design cell against the posterior predictive distribution.

    For each cell :math:`C` and draw :math:`s`: expected accuracy
    :math:`\sum_{i\in C} n_i p_i^{(s)}/\sum n_i`, and replicated accuracy
    :math:`\sum y^{rep}_i/\sum n_i` with :math:`y^{rep}_i\sim\text{Binomial}(n_i,p_i^{(s)})`.
    ``ppp`` is the posterior predictive p-value :math:`P(\text{rep} \ge \text{obs})`;
    values near 0 or 1 flag cells the model misfits.

    Parameters
    ----------
    by : sequence of str, optional
        Cell columns; default those of ``model``, ``context_words``, ``tom_order`` the
        fit's data have.
    """
    df = training_data(idata)
    if by is None:
        by = [c for c in ("model", "context_words", "tom_order") if c in df.columns]
    by = list(by)
    missing = [c for c in by if c not in df.columns]
    if missing:
        raise ValueError(f"by: column(s) {missing} not in the fit's data (has "
                         f"{list(df.columns)})")
    p = _p_draws(idata, max_draws)
    y, n = observed_counts(idata)
    rng = np.random.default_rng(seed)
    rep = rng.binomial(n.astype(np.int64)[None, :],
                       check_probabilities(p, "posterior predictive check")).astype(float)
    if by:
        cell = df.groupby(by, sort=True).ngroup().to_numpy()
        keys = df[by].drop_duplicates().sort_values(by).reset_index(drop=True)
    else:
        cell = np.zeros(len(df), dtype=np.int64)
        keys = pd.DataFrame(index=[0])
    C = int(cell.max()) + 1
    onehot = np.zeros((len(df), C))
    onehot[np.arange(len(df)), cell] = 1.0
    nt = n @ onehot
    obs = (y @ onehot) / nt
    exp_d = ((p * n) @ onehot) / nt
    rep_d = (rep @ onehot) / nt
    a = (1 - prob) / 2
    out = keys.copy()
    out["n_rows"] = onehot.sum(axis=0).astype(int)
    out["trials"] = nt.astype(int)
    out["observed"] = obs
    out["expected"] = exp_d.mean(axis=0)
    out["expected_lower"] = np.quantile(exp_d, a, axis=0)
    out["expected_upper"] = np.quantile(exp_d, 1 - a, axis=0)
    out["predicted_lower"] = np.quantile(rep_d, a, axis=0)
    out["predicted_upper"] = np.quantile(rep_d, 1 - a, axis=0)
    out["ppp"] = (rep_d >= obs[None, :] - 1e-12).mean(axis=0)
    return out


