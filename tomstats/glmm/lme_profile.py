r"""Profile-likelihood intervals of the fixed effects of a
:class:`~tomstats.glmm.lme_result.LaplaceFit` (lme4's ``confint(m, method = "profile")``).

For coefficient :math:`j` the profiled deviance :math:`D_p(b) = \min_{\theta,
\beta_{-j}} D(\theta, \beta)\,|_{\beta_j = b}` is a refit with the column :math:`x_j` moved
into the offset (:math:`b\,x_j`); the signed root

.. math::

    \zeta(b) = \operatorname{sign}(b - \hat\beta_j)\sqrt{D_p(b) - D(\hat\theta, \hat\beta)}

is approximately standard normal, and the interval is
:math:`\{b: |\zeta(b)| \le z_{(1+\text{level})/2}\}`, its ends found by Brent's method
(to :math:`10^{-6}\,\mathrm{se}_j`). lme4 interpolates :math:`\zeta` with a spline through a
grid of refits instead; both aim at the same roots.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["profile_intervals"]


def profile_intervals(fit: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper profile-likelihood limits of every fixed effect of ``fit`` (a
    :class:`~tomstats.glmm.lme_result.LaplaceFit` with its data; typed ``Any``: the result's
    method imports this module, which imports nothing of it)."""
    import jax
    from scipy.optimize import brentq
    from scipy.special import ndtri  # scipy.stats would load much more

    from tomstats.glmm.lme_fit import lme_fit_arrays

    des = fit.design
    X = des.Xc + des.mean[None, :]  # the user's columns (the intercept column is 1)
    p = X.shape[1]
    zq = float(ndtri(0.5 + level / 2.0))
    lower, upper = np.full(p, np.nan), np.full(p, np.nan)

    def deviance(j: int, b: float) -> float:
        keep = [c for c in range(p) if c != j]
        with jax.enable_x64(True):
            r = lme_fit_arrays(X[:, keep], des.y, des.trials, des.Zs, des.gs, des.shapes,
                               offset=b * X[:, j])
            return float(r.deviance)

    for j in range(p):
        beta, se = float(fit.beta[j]), float(fit.se[j])
        d0 = deviance(j, beta)

        def zeta(b: float, j: int = j, beta: float = beta, d0: float = d0) -> float:
            return float(np.sign(b - beta) * np.sqrt(max(deviance(j, b) - d0, 0.0)))

        for sign, out in ((-1.0, lower), (1.0, upper)):
            step = 1.2 * zq * se
            b = beta + sign * step
            z = zeta(b)
            tries = 0
            while abs(z) < zq and tries < 12:
                step *= 1.6
                b = beta + sign * step
                z = zeta(b)
                tries += 1
            if abs(z) < zq:
                continue  # flat profile: no finite limit on this side
            out[j] = brentq(lambda v, s=sign: zeta(v) - s * zq, min(beta, b), max(beta, b),
                            xtol=1e-6 * se)
    return lower, upper
