r"""Intervals for a binomial proportion :math:`k/n`: Wilson (summaries, Monte Carlo error of a
power estimate, calibration bins) and Jeffreys (observed proportions beside posterior
predictive intervals). Every interval of a proportion in the package comes from here."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = ["jeffreys_interval", "wilson_interval"]


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
