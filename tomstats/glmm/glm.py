r"""Logistic regression (binomial GLM, logit link) by Newton's method in JAX, vmappable.

Model: :math:`y_i \sim \operatorname{Binomial}(n_i, p_i)`, :math:`\operatorname{logit} p_i =
x_i^\top\beta` (Bernoulli rows: :math:`n_i = 1`). The log-likelihood, binomial coefficients
included (so it equals statsmodels' ``GLM(..., family=Binomial())`` and, for 0/1 rows,
``Logit``),

.. math::

    \ell(\beta) = \sum_i \Big[\log\binom{n_i}{y_i} + y_i\log p_i + (n_i - y_i)\log(1 - p_i)
    \Big],

is maximised by Newton's method (for the canonical link identical to IRLS / Fisher
scoring): :math:`\beta \leftarrow \beta + t\,H^{-1}s` with score
:math:`s = X^\top(y - np)`, information :math:`H = X^\top W X`,
:math:`W = \operatorname{diag}(n_i p_i(1 - p_i))`, and :math:`t` halved until
:math:`\ell` does not decrease. It stops when the Newton decrement :math:`s^\top H^{-1} s`
(twice the predicted remaining gain of :math:`\ell`) falls below
``tol`` :math:`\cdot (1 + |\ell|)`. Standard errors are
:math:`\sqrt{\operatorname{diag}(H^{-1})}` at :math:`\hat\beta`.

A fit is marked not converged when the decrement test is not met within ``max_iter``
iterations, when a value is not finite, or when a fitted probability is numerically 0 or 1
(:math:`|\eta_i| > 30` on a row with :math:`n_i > 0`, R's ``glm`` warning): that is
(quasi-)complete separation, where the maximum likelihood estimate does not exist.

Everything is pure JAX (``lax.while_loop``), so :func:`logistic_fit` runs under ``jax.jit``
and ``jax.vmap`` (one fit per replicate in :func:`tomstats.planning.run.power`). Use float64
(``with jax.enable_x64(True):``) for results equal to statsmodels to 1e-6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["LogisticFit", "logistic_fit", "saturated_loglik", "binomial_loglik",
           "log_binomial_coefficients"]

Array = jax.Array

#: A linear predictor beyond this magnitude means a fitted probability of 0 or 1.
_ETA_SEPARATION = 30.0


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class LogisticFit:
    """Result of :func:`logistic_fit` (fields gain leading axes under ``jax.vmap``).

    Attributes
    ----------
    beta : Array, shape (p,)
        Maximum likelihood estimates :math:`\\hat\\beta`.
    se : Array, shape (p,)
        Standard errors :math:`\\sqrt{\\operatorname{diag}(X^\\top W X)^{-1}}`.
    cov : Array, shape (p, p)
        :math:`(X^\\top W X)^{-1}` at :math:`\\hat\\beta`.
    loglik : Array, shape ()
        :math:`\\ell(\\hat\\beta)`, binomial coefficients included.
    converged : Array of bool, shape ()
        Decrement test met, values finite, no separation.
    iterations : Array of int, shape ()
        Newton iterations used.
    """

    beta: Array
    se: Array
    cov: Array
    loglik: Array
    converged: Array
    iterations: Array


def log_binomial_coefficients(y: Any, n: Any) -> Array:
    """:math:`\\sum_i \\log\\binom{n_i}{y_i}`, the constant of a binomial log-likelihood."""
    g = jax.scipy.special.gammaln
    return jnp.sum(g(n + 1.0) - g(y + 1.0) - g(n - y + 1.0))


def binomial_loglik(eta: Array, successes: Array, trials: Array) -> Array:
    """Binomial log-likelihood at linear predictor ``eta`` (coefficients included).

    :math:`\\sum_i \\log\\binom{n_i}{y_i} + y_i\\log\\sigma(\\eta_i)
    + (n_i - y_i)\\log\\sigma(-\\eta_i)`, computed with ``log_sigmoid`` (no overflow).
    """
    y, n = successes, trials
    return (jnp.sum(y * jax.nn.log_sigmoid(eta) + (n - y) * jax.nn.log_sigmoid(-eta))
            + log_binomial_coefficients(y, n))


def saturated_loglik(successes: Any, trials: Any = 1.0) -> Array:
    """Log-likelihood of the saturated model (one probability per row, :math:`\\hat p_i =
    y_i / n_i`).

    :math:`\\sum_i \\log\\binom{n_i}{y_i} + y_i\\log\\hat p_i + (n_i - y_i)\\log(1-\\hat p_i)`
    with :math:`0\\log 0 = 0`. Twice its difference from a model's :math:`\\ell` is that
    model's deviance; with rows = design cells it is the likelihood-ratio statistic of any
    cell-level effect left out of the model.
    """
    y = jnp.asarray(successes)
    if not jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(jnp.result_type(float))
    n = jnp.broadcast_to(jnp.asarray(trials, y.dtype), y.shape)
    safe_n = jnp.where(n > 0, n, 1.0)
    p = y / safe_n
    xlogy = jax.scipy.special.xlogy
    return jnp.sum(xlogy(y, p) + xlogy(n - y, 1.0 - p)) + log_binomial_coefficients(y, n)


def _cholesky_small(H: Array) -> Array:
    """Lower Cholesky factor of a small SPD matrix, unrolled over its static size.

    Elementwise operations only (no LAPACK call), so under ``jax.vmap`` thousands of
    small systems become a handful of vector operations.
    """
    p = H.shape[-1]
    L = [[jnp.zeros((), H.dtype)] * p for _ in range(p)]
    for j in range(p):
        d = H[j, j] - sum((L[j][k] ** 2 for k in range(j)), jnp.zeros((), H.dtype))
        L[j][j] = jnp.sqrt(d)
        for i in range(j + 1, p):
            s = H[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), jnp.zeros((), H.dtype))
            L[i][j] = s / L[j][j]
    return jnp.stack([jnp.stack(row) for row in L])


def _spd_solve(H: Array, B: Array) -> Array:
    """:math:`H^{-1}B` for SPD ``H`` (p, p) and ``B`` (p,) or (p, m), by Cholesky."""
    p = H.shape[-1]
    if p > 12:
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H, lower=True), B)
    L = _cholesky_small(H)
    rows = [B[i] for i in range(p)]
    z: list[Array] = []
    for i in range(p):  # L z = B
        z.append((rows[i] - sum((L[i, k] * z[k] for k in range(i)), 0.0 * rows[i])) / L[i, i])
    x: list[Array] = [0.0 * rows[0]] * p
    for i in reversed(range(p)):  # L' x = z
        x[i] = (z[i] - sum((L[k, i] * x[k] for k in range(i + 1, p)), 0.0 * rows[i])) / L[i, i]
    return jnp.stack(x)


def _check(X: Any, successes: Any, trials: Any) -> tuple[Array, Array, Array]:
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    if X.ndim != 2:
        raise ValueError(f"logistic_fit: X must be a 2-d (n, p) array, got shape {X.shape}")
    y = jnp.asarray(successes, X.dtype)
    if y.shape != (X.shape[0],):
        raise ValueError(f"logistic_fit: successes must have shape ({X.shape[0]},) like the "
                         f"rows of X, got {y.shape}")
    n = jnp.asarray(trials, X.dtype)
    if n.ndim > 1 or (n.ndim == 1 and n.shape[0] != X.shape[0]):
        raise ValueError(f"logistic_fit: trials must be a scalar or have shape "
                         f"({X.shape[0]},), got {n.shape}")
    return X, y, jnp.broadcast_to(n, y.shape)


def logistic_fit(X: Any, successes: Any, trials: Any = 1.0, *, max_iter: int = 50,
                 tol: float | None = None) -> LogisticFit:
    """Maximum likelihood logistic regression by Newton's method with step halving.

    Parameters
    ----------
    X : array, shape (n, p)
        Design matrix (include the intercept column yourself). Its float dtype is the
        computation's dtype.
    successes : array, shape (n,)
        Successes :math:`y_i` per row (0/1 for Bernoulli rows).
    trials : scalar or array, shape (n,)
        Trials :math:`n_i` per row (default 1: Bernoulli). Rows with :math:`n_i = 0` add
        nothing.
    max_iter : int
        Maximum Newton iterations.
    tol : float, optional
        Stop when the decrement :math:`s^\\top H^{-1}s \\le` ``tol`` :math:`(1 + |\\ell|)`
        (default 1e-14 in float64, 1e-8 in float32).

    Returns
    -------
    LogisticFit

    Examples
    --------
    >>> import jax, numpy as np
    >>> from tomstats.glmm.glm import logistic_fit
    >>> X = np.column_stack([np.ones(4), [0.0, 1.0, 2.0, 3.0]])
    >>> with jax.enable_x64(True):
    ...     f = logistic_fit(X, np.array([2.0, 4, 5, 9]), 10.0)
    >>> round(float(f.beta[1]), 3), bool(f.converged)
    (1.032, True)
    """
    X, y, n = _check(X, successes, trials)
    dtype = X.dtype
    p = X.shape[1]
    if tol is None:
        tol = 1e-14 if dtype == jnp.float64 else 1e-8
    eps = jnp.finfo(dtype).eps
    ridge = jnp.sqrt(eps) * jnp.eye(p, dtype=dtype)

    def loglik(beta: Array) -> Array:
        return binomial_loglik(X @ beta, y, n)

    def step(beta: Array) -> tuple[Array, Array, Array]:
        eta = X @ beta
        pr = jax.nn.sigmoid(eta)
        w = n * pr * (1.0 - pr)
        s = X.T @ (y - n * pr)
        H = X.T @ (w[:, None] * X)
        d = _spd_solve(H + ridge * jnp.max(jnp.diagonal(H)), s)
        return d, s @ d, H

    # start: intercept-like start from the pooled proportion, other coefficients 0
    pbar = jnp.clip((jnp.sum(y) + 0.5) / (jnp.sum(n) + 1.0), 1e-6, 1 - 1e-6)
    col_const = jnp.all(X == X[:1], axis=0) & (X[0] != 0)
    beta0 = jnp.where(col_const & (jnp.cumsum(col_const) == 1),
                      jnp.log(pbar / (1 - pbar)) / jnp.where(X[0] != 0, X[0], 1.0), 0.0)

    def separated(beta: Array) -> Array:
        return jnp.any((jnp.abs(X @ beta) > _ETA_SEPARATION) & (n > 0))

    def cond(s: tuple) -> Array:
        beta, ll, it, dec = s
        # a separated fit stops at once: it will be reported as not converged
        return (it < max_iter) & (dec > tol * (1.0 + jnp.abs(ll))) & ~separated(beta)

    def body(s: tuple) -> tuple:
        beta, ll, it, _ = s
        d, dec, _ = step(beta)
        slack = 10 * eps * (jnp.abs(ll) + 1.0)

        # in Newton's quadratic region (small decrement) the full step is taken: there a
        # change of the log-likelihood is below its rounding error and no line search
        # could judge it
        quad = dec < 1e-6

        def hcond(h: tuple) -> Array:
            _, lln, k = h
            return ~((lln >= ll - slack) | quad) & (k < 30)

        def hbody(h: tuple) -> tuple:
            t, _, k = h
            t = 0.5 * t
            return t, loglik(beta + t * d), k + 1

        t, lln, _ = lax.while_loop(hcond, hbody,
                                   (jnp.ones((), dtype), loglik(beta + d), 0))
        ok = ((lln >= ll - slack) | quad) & jnp.isfinite(dec) & jnp.isfinite(lln)
        beta = jnp.where(ok, beta + t * d, beta)
        # no acceptable step: stop; convergence is judged on the final decrement below
        return beta, jnp.where(ok, lln, ll), it + 1, jnp.where(ok, dec, 0.0)

    init = (beta0, loglik(beta0), 0, jnp.asarray(jnp.inf, dtype))
    beta, ll, it, dec = lax.while_loop(cond, body, init)
    _, dec_end, H = step(beta)
    cov = _spd_solve(H, jnp.eye(p, dtype=dtype))
    cov = 0.5 * (cov + cov.T)
    se = jnp.sqrt(jnp.diagonal(cov))
    converged = ((dec_end <= tol * (1.0 + jnp.abs(ll)) * 10) & jnp.isfinite(ll)
                 & jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(se)) & ~separated(beta))
    return LogisticFit(beta=beta, se=se, cov=cov, loglik=ll, converged=converged,
                       iterations=jnp.asarray(it, jnp.int32))
