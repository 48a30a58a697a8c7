r"""Maximum-likelihood GLMMs by the Laplace approximation (lme4's ``glmer``, ``nAGQ = 1``).

Model (binomial or Bernoulli outcomes, logit link, :math:`K \ge 1` grouping factors of
random intercepts, crossed or nested):

.. math::

    y_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\qquad
    \eta_i = x_i^\top\beta + \sum_{k=1}^K \theta_k u_{k, g_k(i)},\qquad
    u_{k,j} \sim N(0, 1)\ \text{iid},

so :math:`b = \Lambda u` with :math:`\Lambda = \operatorname{diag}(\theta_k)` and the
random-intercept SDs are :math:`\mathrm{sd}_k = |\theta_k|` (lme4's ``theta``; the binomial
family has :math:`\sigma = 1`).

Laplace deviance, exactly as lme4 defines it (``glmerLaplace``):

.. math::

    -2\ell(\beta, \theta) = -2\sum_i \log \operatorname{Binom}(y_i; n_i, p_i(\hat u))
        + \lVert\hat u\rVert^2 + \log\det(\Lambda^\top Z^\top W Z\Lambda + I),

with :math:`\hat u` the conditional mode (penalised IRLS at fixed :math:`\beta, \theta`)
and :math:`W = \operatorname{diag}(n_i p_i (1 - p_i))` at the mode. The binomial
coefficients are included, so :math:`\ell` equals lme4's ``logLik()`` on the same data
(for 0/1 rows they vanish).

Structure: :math:`Z` holds indicator columns, so :math:`A = \Lambda Z^\top W Z\Lambda + I`
has diagonal blocks :math:`I + \theta_k^2 D_k` (:math:`D_k` the sums of :math:`w_i` per
level) and dense off-diagonal blocks :math:`\theta_k\theta_l C_{kl}` (sums of :math:`w_i`
per pair of levels). The largest factor :math:`b` is eliminated through its diagonal block
:math:`G = I + \theta_b^2 D_b`, leaving the Schur complement
:math:`S - E^\top G^{-1} E` over the other factors' levels (small: the LLMs), which is
factorised densely; :math:`\log\det A = \sum\log G_{jj} + \log\det(S - E^\top G^{-1} E)`.
No rows × effects matrix is ever formed.

Fit: :math:`(\theta, \beta)` jointly minimise the Laplace deviance (as lme4 does after its
``nAGQ = 0`` start), by Newton's method with the exact Hessian (JAX autodiff through two
chord steps of the inner mode from the converged mode, which makes the first and second
derivatives exact), eigenvalue-modified when indefinite, with step halving. The inner mode
is found by penalised IRLS with step halving. The deviance is even in each
:math:`\theta_k`, so :math:`\theta` is optimised unconstrained (smooth through 0: an SD of
0 is allowed, as in lme4) and :math:`|\theta|` reported.

Standard errors (lme4's ``vcov()``): ``se="hessian"`` (lme4's default for ``glmer``,
``use.hessian = TRUE``) inverts the Hessian :math:`H` of the deviance over
:math:`(\theta, \beta)` and takes :math:`2 H^{-1}` restricted to :math:`\beta`;
``se="conditional"`` (``use.hessian = FALSE``) uses the penalised system at fixed
:math:`\theta`: :math:`(X^\top W X - X^\top W Z\Lambda A^{-1} \Lambda Z^\top W X)^{-1}`.
As lme4 does, the Hessian result falls back to the conditional one when :math:`H` is not
positive definite.

Everything is pure JAX (``while_loop``), so :func:`laplace_fit` works under ``jax.jit``
and ``jax.vmap``; ``y`` may carry leading batch axes (replicates with the same design).
Use float64 (``with jax.enable_x64(True):``) to match lme4 to many digits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tomstats._io import atomic_write_bytes
from tomstats.glmm.glm import log_binomial_coefficients

__all__ = ["LaplaceResult", "laplace_fit", "laplace_loglik", "bucket_size", "wald_z", "wald_p",
           "lrt"]

Array = jax.Array

#: Chord steps of the inner mode from the converged mode in the differentiable deviance
#: (:meth:`_Problem.ddev`): two make its first and second derivatives exact.
_DIFF_STEPS = 2


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


class _Problem:
    """Data of one fit with the static block structure (a helper of the traced code)."""

    def __init__(self, X: Array, y: Array, n: Array, groups: Array,
                 n_levels: tuple[int, ...], grid: bool = False) -> None:
        self.X, self.y, self.n = X, y, n
        # grid: two factors fully crossed with one row per pair, rows ordered
        # small-factor-major (row = s * q_big + b); sums per level are then reshapes
        self.grid = grid
        self.q = tuple(int(v) for v in n_levels)
        self.K = len(self.q)
        self.big = int(np.argmax(self.q))
        self.small = tuple(k for k in range(self.K) if k != self.big)
        self.order = (self.big,) + self.small
        self.qb = self.q[self.big]
        self.qs = sum(self.q[k] for k in self.small)
        off, o = {}, 0
        for k in self.order:
            off[k] = o
            o += self.q[k]
        self.off = off
        self.g = [groups[:, k] for k in range(self.K)]
        self.gflat = [self.g[k] + off[k] for k in range(self.K)]
        # pair indices of the off-diagonal blocks: (big, j) and (j, l), j < l small
        self.pair = {}
        for a, j in enumerate(self.small):
            self.pair[(self.big, j)] = self.g[self.big] * self.q[j] + self.g[j]
            for l in self.small[a + 1:]:
                self.pair[(j, l)] = self.g[j] * self.q[l] + self.g[l]

    # ----------------------------------------------------------------- pieces
    def eta(self, u: Array, theta: Array, beta: Array) -> Array:
        e = self.X @ beta
        for k in range(self.K):
            if self.grid:
                uk = u[self.off[k]: self.off[k] + self.q[k]]
                e = e + theta[k] * (jnp.tile(uk, self.qs) if k == self.big
                                    else jnp.repeat(uk, self.qb))
            else:
                e = e + theta[k] * u[self.gflat[k]]
        return e

    def zt(self, v: Array, k: int) -> Array:
        """:math:`Z_k^\\top v`: sums of ``v`` (rows first) per level of factor ``k``."""
        if self.grid:
            m = v.reshape((self.qs, self.qb) + v.shape[1:])
            return m.sum(0) if k == self.big else m.sum(1)
        return jax.ops.segment_sum(v, self.g[k], num_segments=self.q[k])

    def pair_sum(self, w: Array, j: int, l: int) -> Array:
        """Sums of ``w`` per pair of levels of factors ``j`` and ``l``, shape (q_j, q_l)."""
        if self.grid:  # only the pair (big, small) exists
            return w.reshape(self.qs, self.qb).T
        return jax.ops.segment_sum(w, self.pair[(j, l)],
                                   num_segments=self.q[j] * self.q[l]).reshape(self.q[j],
                                                                                self.q[l])

    def ztv(self, v: Array, theta: Array) -> Array:
        """:math:`\\Lambda Z^\\top v` in the internal order (big factor first)."""
        parts = []
        for k in self.order:
            t = theta[k] if v.ndim == 1 else theta[k]
            parts.append(t * self.zt(v, k))
        return jnp.concatenate(parts, axis=0)

    def blocks(self, w: Array, theta: Array) -> tuple[Array, Array | None, Array | None]:
        """(G diagonal of the big block, E, Cholesky factor of the Schur complement)."""
        one = jnp.ones((), w.dtype)
        b = self.big
        dg = one + theta[b] ** 2 * self.zt(w, b)
        if not self.small:
            return dg, None, None
        E = jnp.concatenate([theta[b] * theta[j] * self.pair_sum(w, b, j)
                             for j in self.small], axis=1)
        rows = []
        for a, j in enumerate(self.small):
            row = []
            for c, l in enumerate(self.small):
                if a == c:
                    row.append(jnp.diag(one + theta[j] ** 2 * self.zt(w, j)))
                elif a < c:
                    row.append(theta[j] * theta[l] * self.pair_sum(w, j, l))
                else:
                    row.append(None)
            rows.append(row)
        for a in range(len(self.small)):
            for c in range(a):
                rows[a][c] = rows[c][a].T
        S = jnp.block(rows) if len(self.small) > 1 else rows[0][0]
        schur = S - E.T @ (E / dg[:, None])
        return dg, E, jnp.linalg.cholesky(schur)

    def solve(self, blk: tuple[Array, Array | None, Array | None], r: Array) -> Array:
        """:math:`A^{-1} r` (``r`` of shape (q,) or (q, m), internal order)."""
        dg, E, L = blk
        rb, rs = r[: self.qb], r[self.qb:]
        dgb = dg if r.ndim == 1 else dg[:, None]
        if E is None:
            return rb / dgb
        xs = jax.scipy.linalg.cho_solve((L, True), rs - E.T @ (rb / dgb))
        xb = (rb - E @ xs) / dgb
        return jnp.concatenate([xb, xs], axis=0)

    def logdet(self, blk: tuple[Array, Array | None, Array | None]) -> Array:
        dg, _, L = blk
        out = jnp.sum(jnp.log(dg))
        if L is not None:
            out = out + 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
        return out

    def dev(self, eta: Array) -> Array:
        """:math:`-2\\sum_i \\log\\operatorname{Binom}(y_i; n_i, p_i)` without the
        binomial coefficients."""
        return -2.0 * jnp.sum(self.y * jax.nn.log_sigmoid(eta)
                              + (self.n - self.y) * jax.nn.log_sigmoid(-eta))

    def weights(self, eta: Array) -> tuple[Array, Array]:
        p = jax.nn.sigmoid(eta)
        return self.n * p * (1.0 - p), self.y - self.n * p

    def newton(self, u: Array, theta: Array, beta: Array) -> tuple[Array, Array]:
        """Newton increment of the conditional mode and the decrement :math:`r^\\top x`."""
        w, res = self.weights(self.eta(u, theta, beta))
        r = self.ztv(res, theta) - u
        x = self.solve(self.blocks(w, theta), r)
        return x, r @ x

    def pdev(self, u: Array, theta: Array, beta: Array) -> Array:
        return self.dev(self.eta(u, theta, beta)) + u @ u

    def laplace(self, u: Array, theta: Array, beta: Array) -> Array:
        eta = self.eta(u, theta, beta)
        w, _ = self.weights(eta)
        return self.dev(eta) + u @ u + self.logdet(self.blocks(w, theta))

    # ----------------------------------------------------------------- solvers
    def pirls(self, u0: Array, theta: Array, beta: Array, tol: Array, max_iter: int) -> Array:
        """Conditional mode by penalised IRLS (Newton with step halving) from ``u0``."""
        eps = jnp.finfo(u0.dtype).eps

        def cond(s):
            _, _, it, dec = s
            return (it < max_iter) & (dec > tol)

        def body(s):
            u, pd, it, _ = s
            x, dec = self.newton(u, theta, beta)
            slack = 10 * eps * (jnp.abs(pd) + 1.0)

            # in Newton's quadratic region the full step is taken: the change of the
            # penalised deviance is then below its rounding error and cannot be judged
            quad = dec < 1e-8

            def hcond(h):
                _, pdn, k = h
                return ~((pdn <= pd + slack) | quad) & (k < 12)

            def hbody(h):
                t, _, k = h
                t = t * 0.5
                return t, self.pdev(u + t * x, theta, beta), k + 1

            t, pdn, _ = lax.while_loop(hcond, hbody,
                                       (jnp.ones((), u.dtype), self.pdev(u + x, theta, beta), 0))
            ok = ((pdn <= pd + slack) | quad) & jnp.isfinite(pdn)
            u_new = jnp.where(ok, u + t * x, u)
            dec = jnp.where(ok & jnp.isfinite(dec), dec, 0.0)  # stop when no progress
            return u_new, jnp.where(ok, pdn, pd), it + 1, dec

        init = (u0, self.pdev(u0, theta, beta), 0, jnp.asarray(jnp.inf, u0.dtype))
        return lax.while_loop(cond, body, init)[0]

    def ddev(self, phi: Array, u0: Array) -> Array:
        """Laplace deviance at ``phi = (theta, beta)``, differentiable to second order at
        the ``phi`` where ``u0`` is the exact conditional mode.

        The mode's dependence on ``phi`` is carried by two chord steps
        :math:`u \\leftarrow u + A_0^{-1} r(u, \\phi)` from ``u0``, with :math:`A_0` (the
        penalised Hessian at ``u0``) held constant: since :math:`r(u_0, \\phi_0) = 0` and
        :math:`\\partial r/\\partial u = -A`, the error after them is
        :math:`O(\\lVert\\phi - \\phi_0\\rVert^3)`, so the deviance's first and second
        derivatives at :math:`\\phi_0` are exact, and only the final log-determinant is
        differentiated through a factorisation.
        """
        theta, beta = phi[: self.K], phi[self.K:]
        u = lax.stop_gradient(u0)
        th0, be0 = lax.stop_gradient(theta), lax.stop_gradient(beta)
        w0, _ = self.weights(self.eta(u, th0, be0))
        blk0 = self.blocks(w0, th0)
        for _ in range(_DIFF_STEPS):
            _, res = self.weights(self.eta(u, theta, beta))
            u = u + self.solve(blk0, self.ztv(res, theta) - u)
        return self.laplace(u, theta, beta)

    def grad_hess(self, phi: Array, u: Array) -> tuple[Array, Array]:
        """Gradient and Hessian of :meth:`ddev` (forward over reverse; the gradient's
        primal computed once, its linearisation pushed along the unit vectors)."""
        g, jvp = jax.linearize(lambda p: jax.grad(self.ddev)(p, u), phi)
        H = jax.vmap(jvp)(jnp.eye(phi.shape[0], dtype=phi.dtype))
        return g, 0.5 * (H + H.T)

    def glm_start(self, iters: int = 30) -> Array:
        """Fixed effects of the GLM without random effects (IRLS, small ridge)."""
        p = self.X.shape[1]

        def body(_, beta):
            eta = self.X @ beta
            w, res = self.weights(eta)
            H = self.X.T @ (w[:, None] * self.X) + 1e-8 * jnp.eye(p, dtype=beta.dtype)
            step = jnp.linalg.solve(H, self.X.T @ res)
            step = jnp.where(jnp.all(jnp.isfinite(step)), step, 0.0)
            return beta + step

        return lax.fori_loop(0, iters, body, jnp.zeros(p, self.X.dtype))

    def cond_cov(self, u: Array, theta: Array, beta: Array) -> Array:
        """Covariance of beta from the penalised system at fixed theta (RX of lme4)."""
        w, _ = self.weights(self.eta(u, theta, beta))
        wx = w[:, None] * self.X
        F = self.ztv(wx, theta)  # Lambda Z' W X, internal order, (q, p)
        blk = self.blocks(w, theta)
        M = self.X.T @ wx - F.T @ self.solve(blk, F)
        return jnp.linalg.inv(0.5 * (M + M.T))


def _fit_one(X: Array, y: Array, n: Array, groups: Array, n_levels: tuple[int, ...],
             max_iter: int, tol: float, inner_tol: float, max_inner: int,
             se: str, grid: bool = False) -> LaplaceResult:
    pr = _Problem(X, y, n, groups, n_levels, grid)
    K = pr.K
    dtype = X.dtype
    eps = jnp.finfo(dtype).eps
    itol = jnp.asarray(inner_tol, dtype)
    q_tot = sum(pr.q)
    phi0 = jnp.concatenate([jnp.ones(K, dtype), pr.glm_start()])
    m = phi0.shape[0]

    def direction(g, H):
        """Newton direction with the Hessian's eigenvalues made positive."""
        lam, V = jnp.linalg.eigh(H)
        floor = 1e-8 * jnp.max(jnp.abs(lam)) + 1e3 * eps
        d = -V @ ((V.T @ g) / jnp.maximum(jnp.abs(lam), floor))
        d = jnp.where(jnp.all(jnp.isfinite(d)), d, -g)
        return d, -(g @ d)

    # One trial point per pass (a single PIRLS and a single gradient/Hessian in the traced
    # loop keep the compiled program small): the first pass evaluates the start, later ones
    # phi + t d; an accepted trial gives the next Newton direction, a rejected one halves t.
    def cond(s):
        return ~s["done"]

    def body(s):
        first = s["it"] == 0
        cand = s["phi"] + s["t"] * s["d"]
        un = pr.pirls(s["u"], cand[:K], cand[K:], itol, max_inner)
        Dn = pr.laplace(un, cand[:K], cand[K:])
        gn, Hn = pr.grad_hess(cand, un)
        noise = 1e3 * eps * (jnp.abs(s["D"]) + 1.0)
        ok = first | (Dn <= s["D"] - 1e-4 * s["t"] * s["dec"] + noise)
        ok = ok & jnp.isfinite(Dn) & jnp.all(jnp.isfinite(gn)) & jnp.all(jnp.isfinite(Hn))
        dn, decn = direction(gn, Hn)
        pick = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        it = s["it"] + ok.astype(s["it"].dtype)
        dec = pick(decn, s["dec"])
        t = jnp.where(ok, jnp.ones((), dtype), 0.5 * s["t"])
        small = dec < tol
        stuck = ~ok & (s["t"] < 2.0 ** -30)
        out_of_steps = it > max_iter
        conv = small | (stuck & (dec < jnp.maximum(tol, noise)))
        return dict(phi=pick(cand, s["phi"]), u=pick(un, s["u"]), D=pick(Dn, s["D"]),
                    H=pick(Hn, s["H"]), d=pick(dn, s["d"]), dec=dec, t=t, it=it,
                    done=small | stuck | out_of_steps | ~jnp.isfinite(dec), conv=conv)

    init = dict(phi=phi0, u=jnp.zeros(q_tot, dtype), D=jnp.asarray(jnp.inf, dtype),
                H=jnp.eye(m, dtype=dtype), d=jnp.zeros(m, dtype),
                dec=jnp.asarray(jnp.inf, dtype), t=jnp.ones((), dtype),
                it=jnp.zeros((), jnp.int32), done=jnp.asarray(False),
                conv=jnp.asarray(False))
    s = lax.while_loop(cond, body, init)
    phi, u, D, H = s["phi"], s["u"], s["D"], s["H"]
    theta, beta = phi[:K], phi[K:]
    ccov = pr.cond_cov(u, theta, beta)
    if se == "hessian":
        full = 2.0 * jnp.linalg.inv(H)
        hcov = full[K:, K:]
        hcov = 0.5 * (hcov + hcov.T)
        good = jnp.all(jnp.isfinite(full)) & jnp.all(jnp.linalg.eigvalsh(hcov) > 0)
        cov = jnp.where(good, hcov, ccov)
    else:
        cov = ccov
    se_ = jnp.sqrt(jnp.diagonal(cov))
    finite = jnp.isfinite(D) & jnp.all(jnp.isfinite(phi)) & jnp.all(jnp.isfinite(se_))
    const = log_binomial_coefficients(y, n)
    ranef = jnp.concatenate([theta[k] * u[pr.off[k]: pr.off[k] + pr.q[k]] for k in range(K)])
    return LaplaceResult(beta=beta, se=se_, cov=cov, sd=jnp.abs(theta),
                         loglik=-0.5 * D + const, converged=s["conv"] & finite,
                         iterations=jnp.maximum(s["it"] - 1, 0), ranef=ranef)


@partial(jax.jit, static_argnames=("n_levels", "max_iter", "tol", "inner_tol", "max_inner",
                                   "se", "batch_trials", "grid"))
def _fit_batch(X, y, n, groups, n_levels, max_iter, tol, inner_tol, max_inner, se,
               batch_trials, grid=False):
    f = partial(_fit_one, n_levels=n_levels, max_iter=max_iter, tol=tol, grid=grid,
                inner_tol=inner_tol, max_inner=max_inner, se=se)
    return jax.vmap(lambda yy, nn: f(X, yy, nn, groups),
                    in_axes=(0, 0 if batch_trials else None))(y, n)


#: Static arguments of the compiled single fit (:func:`_fit_single`).
_STATIC = ("n_levels", "max_iter", "tol", "inner_tol", "max_inner", "se", "grid")
#: One data set, no batch axis: one compiled program, without the batching of
#: :func:`_fit_batch` (whose tracing costs about as much again).
_fit_single = jax.jit(_fit_one, static_argnames=_STATIC)


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


def _is_grid(groups: Array, n_levels: tuple[int, ...]) -> bool:
    """Two factors fully crossed, one row per pair, rows ordered small-factor-major.

    Then every per-level sum is a reshape and a sum (no scatter), the layout of the
    simulated logs of :func:`tomstats.planning.run.power`. Only decided for concrete ``groups``.
    """
    if len(n_levels) != 2:
        return False
    try:
        g = np.asarray(groups)
    except jax.errors.TracerArrayConversionError:
        return False
    big = int(np.argmax(n_levels))
    qb, qs = n_levels[big], n_levels[1 - big]
    if g.shape[0] != qb * qs:
        return False
    return bool(np.array_equal(g[:, big], np.tile(np.arange(qb), qs))
                and np.array_equal(g[:, 1 - big], np.repeat(np.arange(qs), qb)))


def bucket_size(q: int) -> int:
    r"""The smallest size of the padding ladder at least ``q``: ``q`` itself up to 8, then
    four sizes per doubling (multiples of :math:`2^{\lfloor\log_2(q-1)\rfloor-2}`: 10, 12,
    14, 16, 20, ..., 40, 48, 56, 64, ...), so padding adds at most 25 %."""
    q = int(q)
    if q <= 8:
        return q
    step = 2 ** ((q - 1).bit_length() - 3)
    return -(-q // step) * step


def _crossed_order(groups: np.ndarray, n_levels: tuple[int, ...]) -> np.ndarray | None:
    """Rows in grid order (:func:`_is_grid`) when two factors are fully crossed with one row
    per pair of levels, else ``None`` (the fit does not depend on the order of the rows)."""
    if len(n_levels) != 2:
        return None
    big = int(np.argmax(n_levels))
    qb, qs = n_levels[big], n_levels[1 - big]
    if groups.shape[0] != qb * qs or groups.min() < 0 or np.any(groups.max(0) >= n_levels):
        return None
    key = groups[:, 1 - big].astype(np.int64) * qb + groups[:, big]
    order = np.argsort(key, kind="stable")
    return order if np.array_equal(key[order], np.arange(qb * qs)) else None


def _padded(X: np.ndarray, y: np.ndarray, n: np.ndarray, groups: np.ndarray,
            n_levels: tuple[int, ...], grid: bool):
    """The design padded to :func:`bucket_size` shapes, so that logs of similar size share
    one compiled program: rows of zero trials (no term of the likelihood, zero weight) and
    levels without rows (conditional mode 0, a factor 1 of the log-determinant), which
    leave the Laplace deviance, its derivatives and the estimates unchanged.

    A grid stays a grid (every padded pair of levels gets a row); otherwise the rows are
    padded to :func:`bucket_size` of their number. Returns ``(X, y, n, groups, n_levels,
    grid)`` padded.
    """
    Q = tuple(bucket_size(q) for q in n_levels)
    if grid and int(np.argmax(Q)) != int(np.argmax(n_levels)):
        grid = False  # a tie of the padded sizes would change which factor is the big one
    if grid:
        big = int(np.argmax(n_levels))
        qb, qs = Q[big], Q[1 - big]
        pos = groups[:, 1 - big] * qb + groups[:, big]
        rows = qb * qs
        new_groups = np.empty((rows, 2), groups.dtype)
        new_groups[:, big] = np.tile(np.arange(qb), qs)
        new_groups[:, 1 - big] = np.repeat(np.arange(qs), qb)
    else:
        rows = bucket_size(X.shape[0])
        pos = np.arange(X.shape[0])
        new_groups = np.zeros((rows, groups.shape[1]), groups.dtype)
        new_groups[pos] = groups
    out = []
    for a in (X, y, n):
        b = np.zeros((rows,) + a.shape[1:], a.dtype)
        b[pos] = a
        out.append(b)
    return (*out, new_groups, Q, grid)


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

    Minimises the Laplace deviance (module docstring) jointly over
    :math:`(\\theta, \\beta)` by Newton's method with the exact autodiff Hessian and step
    halving, the conditional mode :math:`\\hat u` found by penalised IRLS at each point.

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
        Convergence tolerance on the Newton decrement :math:`g^\\top H^{-1} g` of the
        deviance (default 1e-10 in float64, 1e-4 in float32).
    se : {"hessian", "conditional"}
        ``"hessian"``: :math:`2H^{-1}` over :math:`(\\theta, \\beta)`, restricted to
        :math:`\\beta` (lme4's ``vcov`` default for ``glmer``); ``"conditional"``: the
        penalised system at fixed :math:`\\hat\\theta` (lme4's ``use.hessian = FALSE``;
        cheaper, smaller when :math:`\\hat\\beta` and :math:`\\hat\\theta` correlate).
    max_inner : int
        Maximum penalised-IRLS iterations per evaluation.
    bucket : bool
        Pad one data set (``y`` without batch axes, concrete arrays) to the shapes of
        :func:`bucket_size` with rows of zero trials and levels without rows
        (:func:`_padded`): the estimates are unchanged, and a log of similar size reuses the
        compiled program (from JAX's persistent cache in a new process).

    One concrete data set is fitted by one compiled program (no batch axis), its rows put
    in grid order when two factors are fully crossed with one row per pair.

    Returns
    -------
    LaplaceResult
        With the batch axes of ``y`` leading every field.
    """
    if se not in ("hessian", "conditional"):
        raise ValueError(f"se must be 'hessian' or 'conditional', got {se!r}")
    X, y, n, groups, n_levels, dtype = _check(X, y, trials, groups, n_levels)
    f64 = dtype == jnp.float64
    if tol is None:
        tol = 1e-10 if f64 else 1e-4
    inner_tol = 1e-12 if f64 else 1e-6
    if y.ndim == 1 and n.ndim == 1 and _concrete(X, y, n, groups):
        return _fit_concrete(X, y, n, groups, n_levels, bucket, max_iter=int(max_iter),
                             tol=float(tol), inner_tol=float(inner_tol),
                             max_inner=int(max_inner), se=se)
    batch_shape = y.shape[:-1]
    yb = y.reshape((-1, y.shape[-1]))
    batch_trials = n.ndim > 1
    if batch_trials:
        n = jnp.broadcast_to(n, y.shape).reshape(yb.shape)
    res = _fit_batch(X, yb, n, groups, n_levels, int(max_iter), float(tol), float(inner_tol),
                     int(max_inner), se, batch_trials, _is_grid(groups, n_levels))
    return jax.tree_util.tree_map(lambda a: a.reshape(batch_shape + a.shape[1:]), res)


def _fit_concrete(X: np.ndarray, y: np.ndarray, n: np.ndarray, groups: np.ndarray,
                  n_levels: tuple[int, ...], bucket: bool, **static: Any) -> LaplaceResult:
    """One data set in one compiled program: grid order when crossed, padded if
    ``bucket``."""
    groups = np.asarray(groups)
    order = _crossed_order(groups, n_levels)
    if order is not None:
        X, y, n, groups = X[order], y[order], n[order], groups[order]
    grid = order is not None
    if not bucket:
        return _fit_stored(X, y, n, groups, n_levels=n_levels, grid=grid, **static)
    Xp, yp, n_p, gp, padded, grid = _padded(X, y, n, groups, n_levels, grid)
    res = _fit_stored(Xp, yp, n_p, gp, n_levels=padded, grid=grid, **static)
    # the padded levels' modes (0) are dropped on the host: a slice in the program would
    # make its shape, and so the compiled program, depend on the exact level counts
    ranef = np.asarray(res.ranef)
    starts = np.cumsum((0,) + padded[:-1])
    kept = np.concatenate([ranef[s: s + q] for s, q in zip(starts, n_levels, strict=True)])
    return dataclasses.replace(res, ranef=jax.device_put(kept))


#: Folder, inside JAX's persistent compilation cache, of the exported single-fit programs.
_EXPORTED = "tomstats-laplace"


def _program_key(args: tuple[np.ndarray, ...], static: dict[str, Any]) -> str:
    """What an exported program depends on: this module's and :mod:`tomstats.glmm.glm`'s
    source, JAX's version, the static arguments and the shapes and dtypes of the data."""
    import hashlib
    import sys

    import jaxlib

    from tomstats.glmm import glm

    h = hashlib.sha256()
    for mod in (sys.modules[__name__], glm):
        h.update(Path(mod.__file__).read_bytes())
    h.update(repr((jax.__version__, jaxlib.__version__, jax.default_backend(),
                   sorted(static.items()), [(a.shape, str(a.dtype)) for a in args])).encode())
    return h.hexdigest()[:32]


def _fit_stored(*args: np.ndarray, **static: Any) -> LaplaceResult:
    """:func:`_fit_single`, its traced and lowered program kept on disk for the next process.

    When JAX's persistent compilation cache is on (:mod:`tomstats._compile_cache`), the
    program is exported (:func:`jax.export.export`, StableHLO) into the cache folder under a
    key of everything it depends on (:func:`_program_key`). A new process that finds it skips
    tracing and lowering (a fifth of a warm start) and compiles it from the persistent cache.
    A file that cannot be read or run is exported again and replaced; without the cache
    nothing is written.
    """
    cache = jax.config.jax_compilation_cache_dir
    if not cache:
        return _fit_single(*args, **static)
    path = Path(cache) / _EXPORTED / f"fit-{_program_key(args, static)}.jaxexport"
    if path.is_file():
        try:
            return LaplaceResult(*jax.export.deserialize(bytearray(path.read_bytes()))
                                 .call(*args))
        except Exception:  # noqa: BLE001 - a damaged or foreign file: export it again
            pass
    flat = jax.jit(lambda *a: dataclasses.astuple(_fit_one(*a, **static)))
    exported = jax.export.export(flat)(*args)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, bytes(exported.serialize()))
    except OSError:
        pass  # a read-only cache folder: the fit still runs
    return LaplaceResult(*exported.call(*args))


def laplace_loglik(X: Any, y: Any, trials: Any, groups: Any, n_levels: tuple[int, ...],
                   beta: Any, sd: Any) -> Array:
    """Laplace log-likelihood at given ``beta`` and ``sd`` (no optimisation; one data set).

    Useful to check a fit or to profile; equals lme4's deviance function value times
    :math:`-1/2` plus the log binomial coefficients.
    """
    X, y, n, groups, n_levels, dtype = _check(X, y, trials, groups, n_levels)
    X, y, n, groups = (jnp.asarray(a) for a in (X, y, n, groups))
    pr = _Problem(X, y, n, groups, n_levels)
    theta = jnp.asarray(sd, dtype)
    beta = jnp.asarray(beta, dtype)
    tol = 1e-12 if dtype == jnp.float64 else 1e-6
    u = pr.pirls(jnp.zeros(sum(pr.q), dtype), theta, beta, jnp.asarray(tol, dtype), 100)
    const = log_binomial_coefficients(y, n)
    return -0.5 * pr.laplace(u, theta, beta) + const


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
