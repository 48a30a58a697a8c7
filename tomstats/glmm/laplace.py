r"""Random-intercept GLMMs on numeric arrays (lme4's ``glmer``, ``nAGQ = 1``): the array
interface of the power simulations (:mod:`tomstats.planning.analyses`), on the one Laplace
solver :func:`tomstats.glmm.lme_fit.lme_fit_arrays`.

Model (binomial or Bernoulli outcomes, logit link, :math:`K \ge 1` grouping factors of
random intercepts, crossed or nested):

.. math::

    y_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\qquad
    \eta_i = x_i^\top\beta + \sum_{k=1}^K \theta_k u_{k, g_k(i)},\qquad
    u_{k,j} \sim N(0, 1)\ \text{iid},

the special case :math:`d_k = 1`, :math:`z_{ik} = 1` of the general model of
:mod:`tomstats.glmm.lme_fit`, whose Laplace deviance (lme4's ``glmerLaplace``, binomial
coefficients included in :math:`\ell`) it maximises, by the same Newton iterations with the
exact Hessian. The random-intercept SDs are :math:`\mathrm{sd}_k = |\theta_k|`.

Standard errors (lme4's ``vcov()``): ``se="hessian"`` (lme4's default for ``glmer``)
inverts the Hessian :math:`H` of the deviance over :math:`(\theta, \beta)` and takes
:math:`2 H^{-1}` restricted to :math:`\beta`; ``se="conditional"`` (``use.hessian =
FALSE``) uses the penalised system at fixed :math:`\theta`. As lme4 does, the Hessian result
falls back to the conditional one when :math:`H` is not positive definite.

Everything is pure JAX, so :func:`laplace_fit` works under ``jax.jit`` and ``jax.vmap``;
``y`` may carry leading batch axes (replicates with the same design). Use float64
(``with jax.enable_x64(True):``) to match lme4 to many digits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tomstats.glmm.lme_fit import TermShape, bucket_size, lme_deviance, lme_fit_arrays

__all__ = ["LaplaceResult", "laplace_fit", "laplace_loglik", "bucket_size", "wald_z", "wald_p",
           "lrt"]

Array = jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class LaplaceResult:
    """Result of :func:`laplace_fit` (fields may carry leading batch axes ``...``).

    Attributes
    ----------
    beta : Array, shape (..., p)
        Fixed effects :math:`\\hat\\beta` (maximum Laplace likelihood).
    se : Array, shape (..., p)
        Standard errors, :math:`\\sqrt{\\operatorname{diag}(\\text{cov})}`.
    cov : Array, shape (..., p, p)
        Covariance of :math:`\\hat\\beta` (see ``se=`` of :func:`laplace_fit`).
    sd : Array, shape (..., K)
        Random-intercept SDs :math:`|\\hat\\theta_k|`, in the order of the columns of
        ``groups``.
    loglik : Array, shape (...)
        Laplace log-likelihood, equal to lme4's ``logLik()`` (binomial coefficients
        included).
    converged : Array of bool, shape (...)
        The outer Newton iteration met its tolerance (and every value is finite).
    iterations : Array of int, shape (...)
        Outer Newton iterations used.
    ranef : Array, shape (..., sum(n_levels))
        Conditional modes of the random effects :math:`\\hat b = \\hat\\theta_k \\hat u_k`
        (lme4's ``ranef()``), concatenated in the order of the columns of ``groups``:
        factor 0's levels ``0 .. n_levels[0] - 1`` first, then factor 1's, and so on.
    """

    beta: Array
    se: Array
    cov: Array
    sd: Array
    loglik: Array
    converged: Array
    iterations: Array
    ranef: Array


def _concrete(*arrays: Any) -> bool:
    """No argument is being traced (``jit``/``vmap``): host-side preparation is possible."""
    return not any(isinstance(a, jax.core.Tracer) for a in arrays)


def _check(X: Any, y: Any, trials: Any, groups: Any, n_levels: Any):
    # concrete inputs are checked and converted in NumPy: every eager jnp operation would
    # be an XLA program of its own (compiled, or read from the persistent cache)
    xp = np if _concrete(X, y, trials, groups) else jnp
    X = xp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    dtype = jax.dtypes.canonicalize_dtype(X.dtype)
    X = X.astype(dtype)
    y = xp.asarray(y, dtype)
    groups = xp.asarray(groups)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d (n, p) array, got shape {X.shape}")
    n_obs = X.shape[0]
    if groups.ndim == 1:
        groups = groups[:, None]
    if groups.ndim != 2 or groups.shape[0] != n_obs:
        raise ValueError(f"groups must be an (n, K) integer array with n = {n_obs}, got "
                         f"shape {groups.shape}")
    if not jnp.issubdtype(groups.dtype, jnp.integer):
        raise ValueError("groups must hold integer level codes (0-based)")
    if y.ndim < 1 or y.shape[-1] != n_obs:
        raise ValueError(f"y must have shape (..., {n_obs}), got {y.shape}")
    n_levels = tuple(int(v) for v in n_levels)
    if len(n_levels) != groups.shape[1] or not n_levels or min(n_levels) < 1:
        raise ValueError(f"n_levels must give a positive level count for each of the "
                         f"{groups.shape[1]} grouping factor(s), got {n_levels}")
    if trials is None:
        n = xp.ones(n_obs, dtype)
    else:
        n = xp.asarray(trials, dtype)
        if n.shape[-1] != n_obs:
            raise ValueError(f"trials must have shape (..., {n_obs}), got {n.shape}")
    return X, y, n, groups, n_levels, dtype


def _terms(groups: Any, n_levels: tuple[int, ...], dtype: Any
           ) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[TermShape, ...]]:
    """The random intercepts as terms of :func:`~tomstats.glmm.lme_fit.lme_fit_arrays`: a
    column of ones each, the factor's codes and the shape ``d = 1``."""
    n_obs = groups.shape[0]
    xp = np if isinstance(groups, np.ndarray) else jnp
    ones = xp.ones((n_obs, 1), dtype)
    return ((ones,) * len(n_levels), tuple(groups[:, k] for k in range(len(n_levels))),
            tuple(TermShape(d=1, q=q, correlated=True) for q in n_levels))


def laplace_fit(
    X: Any,
    y: Any,
    trials: Any,
    groups: Any,
    n_levels: tuple[int, ...],
    *,
    max_iter: int = 100,
    tol: float | None = None,
    se: str = "hessian",
    max_inner: int = 50,
    bucket: bool = False,
) -> LaplaceResult:
    """Maximum Laplace-likelihood fit of a logit GLMM with crossed random intercepts.

    Minimises the Laplace deviance jointly over :math:`(\\theta, \\beta)` with
    :func:`tomstats.glmm.lme_fit.lme_fit_arrays` (Newton's method with the exact autodiff
    Hessian, the conditional mode by penalised IRLS at each point).

    Parameters
    ----------
    X : array, shape (n, p)
        Fixed-effect design (with the intercept column, uncentred or centred: the
        estimates refer to the columns as given). Its float dtype is the computation's
        dtype (float64 under ``jax.enable_x64`` matches lme4).
    y : array, shape (..., n)
        Successes; leading axes are replicates fitted with the same ``X``/``groups``
        (vmapped).
    trials : array, shape (n,) or (..., n), or None
        Trials per row; ``None`` means Bernoulli rows (``y`` 0/1).
    groups : int array, shape (n, K)
        0-based level codes of the K grouping factors.
    n_levels : tuple of int
        Number of levels of each factor (static).
    max_iter : int
        Maximum outer Newton iterations.
    tol : float, optional
        Convergence tolerance on the Newton decrement :math:`g^\top H^{-1} g` of the
        deviance (default 1e-10 in float64, 1e-4 in float32).
    se : {"hessian", "conditional"}
        ``"hessian"``: :math:`2H^{-1}` over :math:`(\\theta, \\beta)`, restricted to
        :math:`\\beta` (lme4's ``vcov`` default for ``glmer``); ``"conditional"``: the
        penalised system at fixed :math:`\\hat\\theta` (lme4's ``use.hessian = FALSE``).
    max_inner : int
        Maximum penalised-IRLS iterations per evaluation.
    bucket : bool
        Pad one data set (concrete arrays) to the shapes of :func:`bucket_size` (rows of
        zero trials, levels without rows): the estimates are unchanged, and a log of similar
        size reuses the compiled program.

    Returns
    -------
    LaplaceResult
        With the batch axes of ``y`` leading every field.
    """
    if se not in ("hessian", "conditional"):
        raise ValueError(f"se must be 'hessian' or 'conditional', got {se!r}")
    X, y, n, groups, n_levels, dtype = _check(X, y, trials, groups, n_levels)
    if _concrete(groups):
        groups = np.asarray(groups)
    Zs, gs, shapes = _terms(groups, n_levels, dtype)
    r = lme_fit_arrays(X, y, n, Zs, gs, shapes, max_iter=max_iter, tol=tol, se=se,
                       max_inner=max_inner, bucket=bucket and _concrete(groups))
    return LaplaceResult(beta=r.beta, se=r.se, cov=r.cov, sd=abs(r.theta), loglik=r.loglik,
                         converged=r.converged, iterations=r.iterations, ranef=r.b)


def laplace_loglik(X: Any, y: Any, trials: Any, groups: Any, n_levels: tuple[int, ...],
                   beta: Any, sd: Any) -> Array:
    """Laplace log-likelihood at given ``beta`` and ``sd`` (no optimisation; one data set).

    Useful to check a fit or to profile; equals lme4's deviance function value times
    :math:`-1/2` plus the log binomial coefficients.
    """
    from tomstats.glmm.glm import log_binomial_coefficients

    X, y, n, groups, n_levels, dtype = _check(X, y, trials, groups, n_levels)
    Zs, gs, shapes = _terms(groups, n_levels, dtype)
    D = lme_deviance(X, y, n, Zs, gs, shapes, jnp.asarray(sd, dtype), jnp.asarray(beta, dtype))
    return -0.5 * D + log_binomial_coefficients(jnp.asarray(y), jnp.asarray(n))


def wald_z(result: LaplaceResult, index: int) -> Array:
    """Wald statistic :math:`z = \\hat\\beta_j / \\mathrm{se}_j` of coefficient ``index``."""
    return result.beta[..., index] / result.se[..., index]


def wald_p(result: LaplaceResult, index: int) -> Array:
    """Two-sided Wald p-value :math:`2\\Phi(-|z|)` of coefficient ``index``."""
    return 2.0 * jax.scipy.stats.norm.sf(jnp.abs(wald_z(result, index)))


def lrt(full: LaplaceResult, reduced: LaplaceResult, df: int | None = None
        ) -> tuple[Array, Array]:
    """Likelihood-ratio test of nested fits: :math:`\\Lambda = 2(\\ell_1 - \\ell_0)`.

    ``reduced`` is the same data fitted with fewer fixed-effect columns. The p-value is the
    :math:`\\chi^2_{df}` upper tail, ``df`` defaulting to the difference in the number of
    fixed effects. The statistic is clipped at 0. Returns ``(statistic, p_value)``.
    """
    if df is None:
        df = full.beta.shape[-1] - reduced.beta.shape[-1]
    if df < 1:
        raise ValueError(f"lrt: df must be >= 1 (the full model needs more coefficients), "
                         f"got {df}")
    stat = jnp.maximum(2.0 * (full.loglik - reduced.loglik), 0.0)
    return stat, jax.scipy.special.gammaincc(0.5 * df, 0.5 * stat)
