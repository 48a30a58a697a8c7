r"""Intervals. For a binomial proportion :math:`k/n`: Wilson (summaries, Monte Carlo error of
a power estimate, calibration bins), Clopper–Pearson (the exact interval simr gives a power
estimate, on request) and Jeffreys (observed proportions beside posterior
predictive intervals); every interval of a proportion in the package comes from here. For a
bootstrapped statistic: the bias-corrected and accelerated (BCa) interval of the ANOVA's
effect sizes. For η² and partial η² of an F test: the interval from inverting the noncentral F
distribution (Steiger 2004)."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = ["bca_interval", "clopper_pearson_interval", "jeffreys_interval",
           "ncf_eta2_interval", "ncf_lambda_interval", "wilson_interval"]


def wilson_interval(k: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval for a binomial proportion :math:`k/n`.

    .. math::

        \frac{\hat\pi + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat\pi(1-\hat\pi)}{n}
        + \frac{z^2}{4n^2}}}{1 + z^2/n},\qquad z = \Phi^{-1}\!\left(\tfrac{1+\text{level}}{2}
        \right)

    NaN where :math:`n = 0`.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = np.where(k == 0, 0.0, np.clip(centre - half, 0, 1))
    hi = np.where(k == n, 1.0, np.clip(centre + half, 0, 1))
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def jeffreys_interval(k: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Jeffreys interval for a binomial proportion :math:`k/n`: the equal-tailed interval of
    :math:`\operatorname{Beta}(k + \tfrac12, n - k + \tfrac12)` at ``level``, with the lower
    end 0 when :math:`k = 0` and the upper end 1 when :math:`k = n`."""
    # SciPy only when a Jeffreys interval is asked for: Wilson intervals start without it
    from scipy.stats import beta

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    a = (1 - level) / 2
    lo = np.where(k > 0, beta.ppf(a, k + 0.5, n - k + 0.5), 0.0)
    hi = np.where(k < n, beta.ppf(1 - a, k + 0.5, n - k + 0.5), 1.0)
    return lo, hi


def clopper_pearson_interval(k: Any, n: Any, level: float = 0.95
                             ) -> tuple[np.ndarray, np.ndarray]:
    r"""Clopper–Pearson ("exact") interval for a binomial proportion :math:`k/n`, as R's
    ``binom.test`` and simr's power intervals give it:

    .. math::

        \left[B^{-1}\!\left(\tfrac{a}{2};\, k,\, n - k + 1\right),\;
        B^{-1}\!\left(1 - \tfrac{a}{2};\, k + 1,\, n - k\right)\right],
        \qquad a = 1 - \text{level},

    with :math:`B^{-1}(q; \alpha, \beta)` the Beta quantile, the lower end 0 when
    :math:`k = 0` and the upper end 1 when :math:`k = n`; NaN where :math:`n = 0`."""
    from scipy.stats import beta

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    a = (1 - level) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(a, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - a, k + 1, n - k), 1.0)
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def bca_interval(
    boot: Any, estimate: Any, jackknife: Any, stratum: Any, ci: float = 0.95,
    weights: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Bias-corrected and accelerated (BCa) bootstrap interval (Efron 1987; Efron &
    Tibshirani 1993, §14.3 and eq. 15.36), per column, for a bootstrap stratified by
    ``stratum``.

    With :math:`\hat\theta` the estimate, :math:`\theta^*_b` the :math:`B` resampled values
    (NaN ones left out) and :math:`\hat\theta_{(i)}` the estimate without jackknife unit
    :math:`i` of stratum :math:`j` (:math:`n_j` units, unit :math:`i` counted ``weights[i]``
    times):

    .. math::

        \hat z_0 = \Phi^{-1}\!\Big(\frac{\#\{\theta^*_b < \hat\theta\}
            + \#\{\theta^*_b \le \hat\theta\}}{2B}\Big),\qquad
        U_i = (n_j - 1)\,(\bar\theta_{(j)} - \hat\theta_{(i)}),\qquad
        \hat a = \frac{1}{6}\,\frac{\sum_j \sum_{i \in j} U_i^3 / n_j^3}
            {\big(\sum_j \sum_{i \in j} U_i^2 / n_j^2\big)^{3/2}},

    .. math::

        \alpha_{1,2} = \Phi\!\Big(\hat z_0 + \frac{\hat z_0 + z_{(1 \mp \text{ci})/2}}
            {1 - \hat a\,(\hat z_0 + z_{(1 \mp \text{ci})/2})}\Big),

    and the interval is the :math:`\alpha_1` and :math:`\alpha_2` quantiles of the
    :math:`\theta^*_b` (linear interpolation): SciPy's ``bootstrap(method="BCa")`` with one
    sample per stratum. :math:`\hat a = 0` where the jackknife values do not vary.

    **The interval always contains the estimate.** Where the resamples lie far to one side
    of :math:`\hat\theta` — the bias of an η²-type estimate near 0 can be many times its
    bootstrap spread — :math:`|\hat z_0|` is large and both BCa bounds can fall on that side
    (SciPy returns them so); with no resample at all on one side (:math:`\hat z_0 =
    \mp\infty`, e.g. :math:`\eta^2 = 0` exactly and every resample above it) BCa is
    undefined (SciPy returns NaN). In both cases the bootstrap cannot place the quantity on
    the estimate's far side, and the interval runs from the estimate to the percentile bound
    on the resamples' side: :math:`[\hat\theta, q_{(1+\text{ci})/2}]` (or
    :math:`[q_{(1-\text{ci})/2}, \hat\theta]`), :math:`q` the resamples' quantiles. For an
    effect near 0 read the test, not the interval. NaN where the estimate or every resample
    is NaN.

    Parameters
    ----------
    boot
        Resampled values, shape (B, R): one column per quantity.
    estimate
        The estimates, shape (R,).
    jackknife
        Leave-one-unit-out estimates, shape (J, R).
    stratum
        The stratum (bootstrap cell) of each jackknife unit, shape (J,).
    ci
        Confidence level, in (0, 1).
    weights
        How many units each jackknife row stands for (identical units pooled), shape (J,);
        default 1 each.

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds, each of shape (R,).
    """
    from scipy.special import ndtr, ndtri

    boot = np.asarray(boot, dtype=float)
    est = np.asarray(estimate, dtype=float)
    jack = np.asarray(jackknife, dtype=float)
    strata = np.unique(np.asarray(stratum), return_inverse=True)[1]
    w = np.ones(len(jack)) if weights is None else np.asarray(weights, dtype=float)
    n_j = np.bincount(strata, weights=w)
    wj = w[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(jack)
        tot = np.zeros((len(n_j), jack.shape[1]))
        cnt = np.zeros_like(tot)
        np.add.at(tot, strata, np.where(finite, wj * jack, 0.0))
        np.add.at(cnt, strata, np.where(finite, wj, 0.0))
        mean_j = tot / cnt
        u = (n_j[strata, None] - 1) * (mean_j[strata] - jack)
        u = np.where(finite & (n_j[strata, None] > 1), u, 0.0)
        num = np.sum(wj * u**3 / n_j[strata, None] ** 3, axis=0)
        den = np.sum(wj * u**2 / n_j[strata, None] ** 2, axis=0)
        accel = np.where(den > 0, num / (6 * den**1.5), 0.0)
        valid = ~np.isnan(boot)
        b_eff = valid.sum(axis=0)
        share = (np.sum(valid & (boot < est), axis=0)
                 + np.sum(valid & (boot <= est), axis=0)) / (2 * b_eff)
        z0 = ndtri(share)
        z = ndtri((1 - ci) / 2)
        n1, n2 = z0 + z, z0 - z
        a1 = ndtr(z0 + n1 / (1 - accel * n1))
        a2 = ndtr(z0 + n2 / (1 - accel * n2))
    lo, hi = np.full(est.shape, np.nan), np.full(est.shape, np.nan)
    for r in range(est.size):
        col = boot[valid[:, r], r]
        if np.isnan(est[r]) or col.size == 0:
            continue
        q1, q2 = np.quantile(col, [a1[r], a2[r]]) if 0 < share[r] < 1 else (np.nan, np.nan)
        if q1 <= est[r] <= q2:
            lo[r], hi[r] = q1, q2
        elif share[r] < 0.5:  # the resamples (nearly) all above the estimate
            lo[r], hi[r] = est[r], np.quantile(col, (1 + ci) / 2)
        else:  # (nearly) all below it
            lo[r], hi[r] = np.quantile(col, (1 - ci) / 2), est[r]
    return lo, hi


def _ncf_root(f: float, d1: float, d2: float, target: float) -> float:
    r"""The noncentrality :math:`\lambda \ge 0` with ``ncf.cdf(f, d1, d2, lambda) = target``,
    0 where even :math:`\lambda = 0` gives a CDF at or below ``target`` (the CDF falls with
    :math:`\lambda`). Brent's method on a bracket that doubles until it holds the root."""
    from scipy.optimize import brentq
    from scipy.stats import f as central_f
    from scipy.stats import ncf

    def gap(lam: float) -> float:
        cdf = central_f.cdf(f, d1, d2) if lam == 0 else ncf.cdf(f, d1, d2, lam)
        return float(cdf) - target

    if gap(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, max(1.0, 2.0 * f * d1)
    for _ in range(200):
        if gap(hi) < 0:
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the CDF reaches 0 long before 2**200
        return float("nan")
    return float(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500))


def ncf_lambda_interval(f: Any, df1: Any, df2: Any, ci: float = 0.95
                        ) -> tuple[np.ndarray, np.ndarray]:
    r"""Equal-tailed confidence interval of the noncentrality :math:`\lambda` of an F test
    (Steiger 2004, "Beyond the F test"), vectorised over terms.

    With :math:`G_\lambda` the CDF of the noncentral :math:`F(d_1, d_2, \lambda)` and
    :math:`a = 1 - \text{ci}`, the bounds solve

    .. math::

        G_{\lambda_\text{lo}}(F_\text{obs}) = 1 - a/2, \qquad
        G_{\lambda_\text{hi}}(F_\text{obs}) = a/2 .

    :math:`G_\lambda(F)` falls as :math:`\lambda` grows, so each equation has one root where
    :math:`G_0(F_\text{obs})` exceeds its right side; where it does not, the bound is 0:
    :math:`\lambda_\text{lo} = 0` when :math:`F_\text{obs}` is at or below the central
    :math:`1 - a/2` quantile (the test's :math:`p \ge a/2`), and also
    :math:`\lambda_\text{hi} = 0` when it is at or below the :math:`a/2` quantile (so
    :math:`F_\text{obs} = 0` gives :math:`[0, 0]`). Roots by Brent's method on a bracket that
    doubles from :math:`\max(1, 2 F d_1)`, to a relative tolerance of :math:`10^{-12}`, with
    :func:`scipy.stats.ncf`.

    Parameters
    ----------
    f
        Observed F statistics, shape (R,) or scalar; NaN or :math:`+\infty` (a degenerate
        term: no effect or no error variance) give NaN bounds, as R's effectsize does.
    df1, df2
        Numerator and denominator degrees of freedom, broadcast against ``f``; NaN gives NaN.
    ci
        Confidence level, in (0, 1).

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds of :math:`\lambda`, in ``f``'s broadcast shape.

    Raises
    ------
    ValueError
        ``ci`` outside (0, 1), a negative F, or degrees of freedom that are not positive.
    """
    if isinstance(ci, bool) or not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise ValueError(f"ci must lie strictly between 0 and 1 (e.g. 0.95), got {ci!r}")
    f_a, d1_a, d2_a = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (f, df1, df2)))
    if np.any(f_a < 0):
        raise ValueError(f"F must be >= 0, got {float(f_a[f_a < 0].flat[0])!r}")
    for name, d in (("df1", d1_a), ("df2", d2_a)):
        if np.any(d <= 0) or np.any(np.isneginf(d)):
            raise ValueError(f"{name} must be > 0, got {float(d[d <= 0].flat[0])!r}")
    a = 1.0 - float(ci)
    lo, hi = np.full(f_a.shape, np.nan), np.full(f_a.shape, np.nan)
    ok = np.isfinite(f_a) & np.isfinite(d1_a) & np.isfinite(d2_a)
    for i in np.ndindex(f_a.shape):
        if not ok[i]:
            continue
        args = (float(f_a[i]), float(d1_a[i]), float(d2_a[i]))
        lo[i] = _ncf_root(*args, 1.0 - a / 2)
        hi[i] = _ncf_root(*args, a / 2)
    return lo, hi


def ncf_eta2_interval(f: Any, df1: Any, df2: Any, ci: float = 0.95
                      ) -> tuple[np.ndarray, np.ndarray]:
    r"""Confidence interval of partial :math:`\eta^2` by inverting the noncentral F
    (Steiger 2004), vectorised over terms.

    The noncentrality bounds of :func:`ncf_lambda_interval` map to partial :math:`\eta^2` by

    .. math::

        \eta^2_p = \frac{\lambda}{\lambda + d_1 + d_2 + 1},

    since :math:`\lambda = N f^2` with Cohen's :math:`f^2 = \eta^2_p / (1 - \eta^2_p)` and
    :math:`N = d_1 + d_2 + 1` observations in a one-way design (Steiger 2004; MBESS
    ``ci.pvaf``). In a factorial design :math:`N = d_2 + \text{cells}` and the mapping is
    :math:`\lambda/(\lambda + N)`; the two differ by :math:`O(\text{cells}/N)`, and R's
    effectsize (``F_to_eta2``, 0.8 to 1.0) instead maps :math:`\lambda/(\lambda + d_2)`, the
    sample formula :math:`F d_1 / (F d_1 + d_2)` at :math:`F = \lambda / d_1`. The bounds are
    monotone in :math:`\lambda`, so the interval keeps its coverage; it is :math:`[0,\cdot]`
    whenever the F test's :math:`p \ge a/2`, and :math:`[0, 0]` for :math:`F = 0`. For
    :math:`\eta^2` (not partial) pass :math:`F' = (\eta^2/d_1) / ((1 - \eta^2)/d_2)`, the F of
    the term treated as the model's only one (effectsize and MBESS ``ci.R2`` do the same).

    Parameters
    ----------
    f, df1, df2, ci
        As in :func:`ncf_lambda_interval`.

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper bounds of partial :math:`\eta^2`.

    Examples
    --------
    >>> from tomstats.analysis.intervals import ncf_eta2_interval
    >>> lo, hi = ncf_eta2_interval([0.0, 0.5, 30.0], 2, 100)
    >>> [(round(float(a), 4), round(float(b), 4)) for a, b in zip(lo, hi)]
    [(0.0, 0.0), (0.0, 0.0634), (0.2217, 0.4881)]
    """
    lo, hi = ncf_lambda_interval(f, df1, df2, ci)
    n = np.asarray(df1, dtype=float) + np.asarray(df2, dtype=float) + 1.0
    return lo / (lo + n), hi / (hi + n)
