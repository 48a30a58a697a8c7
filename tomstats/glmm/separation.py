r"""Separation: data that push a logit model's maximum-likelihood estimates to infinity.

A binary outcome is *separated* by the fixed effects when some direction :math:`b \ne 0`
of the coefficients orders every observation without error:

.. math::

    x_i^\top b \ge 0 \text{ for every success,}\qquad
    x_i^\top b \le 0 \text{ for every failure,}

with at least one inequality strict (complete or quasi-complete separation; Albert &
Anderson 1984). The likelihood then grows without bound along :math:`b`, so the "estimates"
an optimiser returns (24 to 115 on the logit scale, standard errors of :math:`10^4`) are
wherever it stopped. Random intercepts do not cure it: the integrand of the marginal
likelihood grows pointwise along :math:`b` as well.

:func:`separation` decides it exactly by the linear program of Konis (2007, the method of
R's ``safeBinaryRegression`` and ``detectseparation``): maximise
:math:`\sum_i s_i x_i^\top b` subject to :math:`s_i x_i^\top b \ge 0` and
:math:`-1 \le b_j \le 1`, with :math:`s_i = +1` for a success and :math:`-1` for a failure
(a binomial cell with both contributes both rows). The optimum is positive exactly when the
data are separated; the coefficients with :math:`b_j \ne 0` are those that diverge.
A grouping factor whose level has all successes is not separation of a mixed model (its
random intercept is shrunk), so only the fixed-effect design is checked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["separation"]

#: An LP optimum above this (columns scaled to max |x| = 1) means separated data.
_TOL = 1e-6


def separation(X: np.ndarray, y: np.ndarray, trials: np.ndarray | None = None,
               names: Sequence[str] | None = None) -> tuple[str, ...]:
    """Names of the fixed effects whose estimates are infinite; ``()`` when there are none.

    Parameters
    ----------
    X : ndarray, shape (n, p)
        Fixed-effect design (with the intercept column, if any; centring does not matter).
    y : ndarray, shape (n,)
        Successes per row.
    trials : ndarray, shape (n,), optional
        Trials per row (``None``: Bernoulli rows).
    names : sequence of str, optional
        Column names of ``X`` (default ``x0``, ``x1``, …).

    Returns
    -------
    tuple of str
        The columns with a non-zero component in the separating direction found by the
        linear program (module docstring), in column order.
    """
    from scipy.optimize import linprog

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = np.ones_like(y) if trials is None else np.asarray(trials, dtype=np.float64)
    names = [f"x{j}" for j in range(X.shape[1])] if names is None else list(names)
    keep = np.all(np.isfinite(X), axis=1) & np.isfinite(y) & (n > 0)
    X, y, n = X[keep], y[keep], n[keep]
    if X.size == 0:
        return ()
    scale = np.max(np.abs(X), axis=0)
    scale[scale == 0] = 1.0
    Xs = X / scale
    # rows with a success: x'b >= 0; rows with a failure: x'b <= 0
    A = np.vstack([Xs[y > 0], -Xs[y < n]])
    if A.shape[0] == 0:
        return ()
    res = linprog(-A.sum(axis=0), A_ub=-A, b_ub=np.zeros(A.shape[0]),
                  bounds=[(-1.0, 1.0)] * X.shape[1], method="highs")
    if res.status != 0 or -res.fun <= _TOL * max(1.0, A.shape[0] ** 0.5):
        return ()
    b = np.asarray(res.x)
    return tuple(nm for nm, v in zip(names, b, strict=True) if abs(v) > _TOL)
