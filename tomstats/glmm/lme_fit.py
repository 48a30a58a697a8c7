r"""Laplace fit of a logit GLMM with general random-effects terms (lme4's ``glmer``, nAGQ = 1).

Model (lme4's parametrisation, ``family = binomial``, :math:`\sigma = 1`):

.. math::

    y_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\qquad
    \eta_i = o_i + x_i^\top\beta + \sum_{k} z_{ik}^\top b_{k, g_k(i)},\qquad
    b_{k,j} = T_k u_{k,j},\quad u_{k,j} \sim N(0, I_{d_k}),

for random-effects terms :math:`k` with :math:`d_k` effects (the columns :math:`z_{ik}` of
``(1 + x | g)`` are :math:`(1, x_i)`) over the :math:`q_k` levels of factor :math:`g_k`.
:math:`T_k` is lower triangular (its column-major lower-triangle elements are lme4's
``theta``, the diagonal bounded below by 0 in lme4) for a correlated term, diagonal for an
uncorrelated ``||`` term, and :math:`\Sigma_k = T_k T_k^\top` is the covariance of
:math:`b_{k,j}`. :math:`\Lambda = \operatorname{blockdiag}(I_{q_k}\otimes T_k)` is the relative
covariance factor.

Laplace deviance (lme4's ``glmerLaplace``):

.. math::

    D(\theta, \beta) = -2\sum_i \log \operatorname{Binom}(y_i; n_i, p_i(\hat u))
        + \lVert\hat u\rVert^2 + \log\det A,\qquad
    A = \Lambda^\top Z^\top W Z \Lambda + I,

with :math:`\hat u` the conditional mode (penalised IRLS, Newton with step halving) and
:math:`W = \operatorname{diag}(n_i p_i(1 - p_i))` at :math:`\hat u`.

Structure: with :math:`\tilde z_{ik} = T_k^\top z_{ik}`, the block of :math:`A` for levels
:math:`a` of term :math:`j` and :math:`c` of term :math:`l` is
:math:`\delta_{jl}\delta_{ac}I + \sum_{i: g_j(i)=a, g_l(i)=c} w_i\tilde z_{ij}\tilde z_{il}^\top`,
accumulated by sums over the rows (no rows × effects matrix is formed). The term
with the most random effects (:math:`q_b d_b`) has a block-diagonal own block :math:`G`
(:math:`q_b` blocks of :math:`d_b\times d_b`); it is eliminated, leaving the dense Schur
complement :math:`S - E^\top G^{-1} E` over the other terms' effects:
:math:`\log\det A = \sum_a\log\det G_a + \log\det(S - E^\top G^{-1}E)`.

Row layout: where the grouping codes are concrete and padding adds at most a quarter of the
rows, the rows are reordered level by level of the big term and padded to the same number
per level with rows of no trials (:math:`n_i = y_i = 0`, zero covariates: they add nothing
to :math:`D` or to any sum). The big term's sums over a level's rows are then a reshape and a
sum, which XLA fuses with the elementwise work around them; the other terms' sums are
segment sums. The fit does not depend on the layout (``tests/glmm/test_lme_layout.py``).

Outer fit: :math:`(\theta, \beta)` jointly minimise :math:`D` (lme4's second stage,
``nAGQ = 1``) by Newton's method with the exact Hessian (JAX reverse-over-reverse through
two chord steps of the mode, which makes first and second derivatives exact at the
converged mode), eigenvalues made positive where indefinite, with backtracking (a rejected
step of length :math:`t` shrinks to the minimum of the quadratic through :math:`D` at 0, its
slope :math:`-\delta` and :math:`D` at :math:`t`, kept within :math:`[0.1t, 0.5t]`). Why Newton
and not lme4's BOBYQA: the deviance is smooth in :math:`\theta` over all of
:math:`\mathbb{R}^m` (a sign change of a column of :math:`T_k` changes no
:math:`\Sigma_k`), so no bound is needed, and Newton converges to the optimum to ~1e-10 in
the deviance in 5–15 iterations, where a derivative-free method stops at its own tolerance;
with the optimum found exactly the estimates differ from lme4's only by lme4's own
optimiser tolerance. At the end each column of :math:`T_k` with a negative diagonal element
is negated (with its :math:`u`), which gives lme4's representative (diagonal
:math:`\ge 0`).

Standard errors (lme4's ``vcov()``): ``se="hessian"``: :math:`2H^{-1}` restricted to
:math:`\beta`, :math:`H` the Hessian of :math:`D` over :math:`(\theta, \beta)` (exact here,
finite differences in lme4), falling back, as lme4 does, to the conditional covariance when
:math:`H` is not positive definite; ``se="conditional"``:
:math:`(X^\top W X - X^\top W Z\Lambda A^{-1}\Lambda^\top Z^\top W X)^{-1}` at
:math:`\hat\theta` (lme4's ``use.hessian = FALSE``, "RX").

Everything is pure JAX, so :func:`lme_fit_arrays` works under ``jax.jit`` and ``jax.vmap``
(``y`` may carry leading batch axes). Call it under ``jax.enable_x64(True)`` to match lme4.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tomstats.glmm._theta import n_theta, theta_index, theta_onehot
from tomstats.glmm.glm import log_binomial_coefficients

__all__ = ["TermShape", "LmeArrays", "lme_fit_arrays", "lme_deviance", "theta_start",
           "theta_to_factor"]

Array = jax.Array
_DIFF_STEPS = 2
#: Reuse the previous exact Hessian for a Newton step when, at the new point, the decrement
#: it gives is below this share of the previous decrement (quadratic convergence under way).
_CONTRACT = 0.01
#: On a CPU, the Hessian's rows are computed one after another (not vectorised) for designs
#: of fewer rows than this with at least this many parameters (measured on the power
#: benchmark's designs: faster there, slower for 3 parameters or 7,872 rows).
_HVP_MAP_ROWS = 4096
_HVP_MAP_PARAMS = 4


@dataclass(frozen=True)
class TermShape:
    """Static shape of one random-effects term.

    Attributes
    ----------
    d : int
        Effects per level (columns of the term's :math:`Z_k`).
    q : int
        Levels of the grouping factor.
    correlated : bool
        Lower-triangular :math:`T_k` (``|``) or diagonal (``||``).
    """

    d: int
    q: int
    correlated: bool

    @property
    def n_theta(self) -> int:
        """Number of :math:`\\theta` elements: :math:`d(d+1)/2` or :math:`d`."""
        return n_theta(self.d, self.correlated)

    def theta_index(self) -> tuple[tuple[int, int], ...]:
        """(row, column) of :math:`T_k` of each :math:`\\theta` element, lme4's order
        (column-major lower triangle)."""
        return theta_index(self.d, self.correlated)


def theta_start(shapes: tuple[TermShape, ...]) -> np.ndarray:
    """lme4's start: 1 on the diagonal of every :math:`T_k`, 0 elsewhere."""
    out = [1.0 if i == j else 0.0 for s in shapes for i, j in s.theta_index()]
    return np.asarray(out, dtype=float)


def theta_to_factor(theta: Any, shape: TermShape) -> Array:
    """:math:`T_k` (d × d) from the term's :math:`\\theta` elements."""
    theta = jnp.asarray(theta)
    # sum of theta times constant one-hot matrices: elementwise, so it fuses (a scatter into
    # a zero matrix is a kernel of its own on a CPU)
    onehot = jnp.asarray(theta_onehot(shape.d, shape.correlated), theta.dtype)
    return jnp.sum(theta[:, None, None] * onehot, axis=0)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class LmeArrays:
    """Result of :func:`lme_fit_arrays` (fields may carry leading batch axes ``...``).

    Attributes
    ----------
    theta : Array, shape (..., m)
        :math:`\\hat\\theta`, lme4's representative (every diagonal element of
        :math:`T_k` non-negative).
    beta, se : Array, shape (..., p)
    cov : Array, shape (..., p, p)
    cov_method : Array of int, shape (...)
        0: Hessian, 1: conditional (requested, or the fallback of a Hessian that is not
        positive definite).
    deviance : Array, shape (...)
        Laplace deviance :math:`D` without the binomial coefficients.
    loglik : Array, shape (...)
        :math:`-D/2 + \\sum\\log\\binom{n_i}{y_i}` (lme4's ``logLik()``).
    u : Array, shape (..., sum(q_k d_k))
        Spherical conditional modes :math:`\\hat u`, term by term in the given order, level
        major (level 0's :math:`d_k` effects first).
    b : Array, shape (..., sum(q_k d_k))
        Conditional modes :math:`\\hat b = \\Lambda\\hat u` (lme4's ``ranef()``), same layout.
    b_var : Array, shape (..., sum(q_k d_k^2))
        Conditional covariances of :math:`b_{k,j}` (:math:`T_k [A^{-1}]_{kj} T_k^\\top`,
        lme4's ``condVar``), each level's :math:`d_k\\times d_k` block row-major.
    grad_norm : Array, shape (...)
        Largest absolute gradient element of :math:`D` at the end.
    hess_min_eig : Array, shape (...)
        Smallest eigenvalue of the Hessian :math:`H` over :math:`(\\theta, \\beta)`.
    converged : Array of bool, shape (...)
    iterations : Array of int, shape (...)
    """

    theta: Array
    beta: Array
    se: Array
    cov: Array
    cov_method: Array
    deviance: Array
    loglik: Array
    u: Array
    b: Array
    b_var: Array
    grad_norm: Array
    hess_min_eig: Array
    converged: Array
    iterations: Array


#: Products with at most this many inner columns are written out elementwise.
_NARROW = 8


def _narrow_matmul(A: Array, B: Array) -> Array:
    """``A @ B`` for a design ``A`` (n, a) and ``B`` (a,) or (a, b): with few columns
    (:math:`a \\le 8`) as a sum of broadcast products, which XLA fuses with the elementwise
    work around it (a CPU matrix-product kernel call costs more than it computes here)."""
    if A.shape[1] > _NARROW:
        return A @ B
    if B.ndim == 1:
        return jnp.sum(A * B[None, :], axis=1)
    return jnp.sum(A[:, :, None] * B[None, :, :], axis=1)


def _inv_logdet(G: Array) -> tuple[Array, Array]:
    r"""Inverses of positive definite blocks ``G`` (q, d, d) and the sum of their
    log-determinants. For :math:`d \le 2` in closed form,
    :math:`\begin{pmatrix}a&b\\b&c\end{pmatrix}^{-1}
    = \frac{1}{ac-b^2}\begin{pmatrix}c&-b\\-b&a\end{pmatrix}` (elementwise, so XLA fuses it
    with its neighbours; a LAPACK call per block set costs more at these sizes), else by LU."""
    d = G.shape[-1]
    if d == 1:
        return 1.0 / G, jnp.sum(jnp.log(G))
    if d == 2:
        a, b, c = G[:, 0, 0], 0.5 * (G[:, 0, 1] + G[:, 1, 0]), G[:, 1, 1]
        det = a * c - b * b
        inv = jnp.stack([jnp.stack([c, -b], -1), jnp.stack([-b, a], -1)], -2) / det[:, None, None]
        return inv, jnp.sum(jnp.log(det))
    return jnp.linalg.inv(G), jnp.sum(jnp.linalg.slogdet(G)[1])


def _big_term(shapes: tuple[TermShape, ...]) -> int:
    """The term with the most random effects (:math:`q_k d_k`; the first of equals)."""
    return int(np.argmax([s.q * s.d for s in shapes]))


#: Rows are laid out level by level of the big term (:func:`_block_rows`) when the padding
#: this needs adds at most this share of rows.
_BLOCK_PAD = 0.25


def _block_rows(X: Array, y: Array, n: Array, offset: Array, Zs: tuple[Array, ...],
                gs: tuple[Array, ...], shapes: tuple[TermShape, ...]) -> tuple | None:
    """The rows reordered level by level of the big term and padded to ``r`` rows per level
    (``r`` the largest level's rows), or None where the codes are not concrete or the padding
    would exceed ``_BLOCK_PAD`` of the rows.

    A padding row has no trials (``n = y = 0``) and zero covariates, so it adds nothing to
    the deviance, its derivatives or any sum over rows: the fit is the same model. The
    reordering follows the codes only, so ``X``, ``y`` (with leading batch axes), ``n`` and
    ``offset`` may be traced."""
    big = _big_term(shapes)
    g = gs[big]
    if isinstance(g, jax.core.Tracer):
        return None
    g = np.asarray(g)
    q, n_obs = shapes[big].q, g.shape[0]
    counts = np.bincount(g, minlength=q)
    r = int(counts.max()) if n_obs else 0
    if n_obs == 0 or q * r > (1.0 + _BLOCK_PAD) * n_obs:
        return None
    if q * r == n_obs and np.all(g == np.repeat(np.arange(q), r)):
        return X, y, n, offset, Zs, gs  # already level by level
    order = np.argsort(g, kind="stable")
    starts = np.cumsum(counts) - counts
    pos = g[order] * r + (np.arange(n_obs) - np.repeat(starts, counts))
    size = q * r

    def place(a: Array, axis: int = 0) -> Array:
        """``a``'s rows (along ``axis``) at their new places, zeros in the padding."""
        a = jnp.moveaxis(jnp.asarray(a), axis, 0)
        out = jnp.zeros((size,) + a.shape[1:], a.dtype).at[pos].set(jnp.take(a, order, 0))
        return jnp.moveaxis(out, 0, axis)

    gs_new = tuple(jnp.asarray(np.repeat(np.arange(q), r), jnp.int32) if k == big
                   else place(gk) for k, gk in enumerate(gs))
    return (place(X), place(y, -1), place(n, -1), place(offset),
            tuple(place(z) for z in Zs), gs_new)


class _Problem:
    """One fit's data with its static block structure (a helper of the traced code)."""

    def __init__(self, X: Array, y: Array, n: Array, offset: Array, Zs: tuple[Array, ...],
                 gs: tuple[Array, ...], shapes: tuple[TermShape, ...],
                 blocked: bool = False) -> None:
        self.X, self.y, self.n, self.offset = X, y, n, offset
        self.Zs, self.gs, self.shapes = Zs, gs, shapes
        self.K = len(shapes)
        self.p = X.shape[1]
        sizes = [s.q * s.d for s in shapes]
        self.big = _big_term(shapes)
        # rows laid out level by level of the big term, the same number per level
        # (:func:`_block_rows`): its sums over rows are reshapes and sums, which XLA fuses,
        # where segment sums and gathers are separate (slow) kernels on a CPU
        self.blocked = blocked
        self.rest = tuple(k for k in range(self.K) if k != self.big)
        self.order = (self.big,) + self.rest
        # offsets of each term in the internal vector (big term first)
        off, o = {}, 0
        for k in self.order:
            off[k] = o
            o += sizes[k]
        self.off = off
        self.size = sizes
        self.q_tot = o
        self.nb = sizes[self.big]
        # offsets of each term in the user's vector (terms in the given order)
        uoff, o = {}, 0
        for k in range(self.K):
            uoff[k] = o
            o += sizes[k]
        self.uoff = uoff
        t = 0
        self.tslice = {}
        for k, s in enumerate(shapes):
            self.tslice[k] = (t, t + s.n_theta)
            t += s.n_theta
        self.m_theta = t

    # ------------------------------------------------------------------ pieces
    def factors(self, theta: Array) -> list[Array]:
        return [theta_to_factor(theta[a:b], self.shapes[k])
                for k, (a, b) in sorted(self.tslice.items())]

    def ztilde(self, theta: Array) -> list[Array]:
        """:math:`\\tilde z_{ik} = T_k^\\top z_{ik}` of every row, per term (n, d_k)."""
        return [_narrow_matmul(self.Zs[k], T) for k, T in enumerate(self.factors(theta))]

    def uterm(self, u: Array, k: int) -> Array:
        s = self.shapes[k]
        return u[self.off[k]: self.off[k] + self.size[k]].reshape(s.q, s.d)

    def by_row(self, k: int, per_level: Array) -> Array:
        """Rows' values of a per-level array (q_k, ...) of term ``k``, shape (n, ...)."""
        if self.blocked and k == self.big:
            q = per_level.shape[0]
            r = self.X.shape[0] // q
            tail = per_level.shape[1:]
            return jnp.broadcast_to(per_level[:, None], (q, r) + tail).reshape((q * r,) + tail)
        return per_level[self.gs[k]]

    def level_sum(self, k: int, by_rows: Array) -> Array:
        """Sums over the rows of each level of term ``k``: (n, ...) -> (q_k, ...)."""
        q = self.shapes[k].q
        if self.blocked and k == self.big:
            return by_rows.reshape((q, by_rows.shape[0] // q) + by_rows.shape[1:]).sum(axis=1)
        return jax.ops.segment_sum(by_rows, self.gs[k], q)

    def eta(self, u: Array, zt: list[Array], beta: Array) -> Array:
        e = self.offset + _narrow_matmul(self.X, beta)
        for k in range(self.K):
            e = e + jnp.sum(zt[k] * self.by_row(k, self.uterm(u, k)), axis=1)
        return e

    def ztv(self, v: Array, zt: list[Array]) -> Array:
        """:math:`\\Lambda^\\top Z^\\top v` in the internal order; ``v`` (n,) or (n, m)."""
        parts = []
        for k in self.order:
            s = self.shapes[k]
            if v.ndim == 1:
                prod = zt[k] * v[:, None]
                parts.append(self.level_sum(k, prod).reshape(-1))
            else:
                prod = zt[k][:, :, None] * v[:, None, :]
                parts.append(self.level_sum(k, prod).reshape(s.q * s.d, v.shape[1]))
        return jnp.concatenate(parts, axis=0)

    def own(self, w: Array, zt: list[Array], k: int) -> Array:
        """Diagonal blocks of term ``k``: :math:`I + \\sum w \\tilde z\\tilde z^\\top`,
        shape (q, d, d)."""
        s = self.shapes[k]
        outer = w[:, None, None] * zt[k][:, :, None] * zt[k][:, None, :]
        return self.level_sum(k, outer) + jnp.eye(s.d, dtype=w.dtype)

    def cross(self, w: Array, zt: list[Array], j: int, l: int) -> Array:
        """Dense block between terms ``j`` and ``l``, shape (q_j d_j, q_l d_l)."""
        sj, sl = self.shapes[j], self.shapes[l]
        idx = self.gs[j] * sl.q + self.gs[l]
        outer = w[:, None, None] * zt[j][:, :, None] * zt[l][:, None, :]
        blk = jax.ops.segment_sum(outer, idx, sj.q * sl.q)
        return blk.reshape(sj.q, sl.q, sj.d, sl.d).transpose(0, 2, 1, 3).reshape(
            sj.q * sj.d, sl.q * sl.d)

    @staticmethod
    def dense_blockdiag(B: Array) -> Array:
        q, d, _ = B.shape
        eye = jnp.eye(q, dtype=B.dtype)
        return (eye[:, None, :, None] * B[:, :, None, :]).reshape(q * d, q * d)

    def blocks(self, w: Array, zt: list[Array]) -> tuple[Array, Array | None, Array | None]:
        """``(G^-1, log det G, E, L)``: inverses of the big term's blocks (q_b, d_b, d_b),
        their total log-determinant, the blocks E between the big term and the others, and
        the Cholesky factor L of the Schur complement (E and L are None for one term)."""
        b = self.big
        Ginv, ldG = _inv_logdet(self.own(w, zt, b))
        if not self.rest:
            return Ginv, ldG, None, None
        E = jnp.concatenate([self.cross(w, zt, b, j) for j in self.rest], axis=1)
        rows = []
        for a, j in enumerate(self.rest):
            row = []
            for c, l in enumerate(self.rest):
                if a == c:
                    row.append(self.dense_blockdiag(self.own(w, zt, j)))
                elif a < c:
                    row.append(self.cross(w, zt, j, l))
                else:
                    row.append(None)
            rows.append(row)
        for a in range(len(self.rest)):
            for c in range(a):
                rows[a][c] = rows[c][a].T
        S = jnp.block(rows) if len(self.rest) > 1 else rows[0][0]
        GE = self.gsolve(Ginv, E)
        schur = S - E.T @ GE
        return Ginv, ldG, E, jnp.linalg.cholesky(0.5 * (schur + schur.T))

    def gsolve(self, Ginv: Array, r: Array) -> Array:
        """:math:`G^{-1} r` for ``r`` of shape (q_b d_b,) or (q_b d_b, m)."""
        q, d, _ = Ginv.shape
        if r.ndim == 1:
            # elementwise products and sums (fused), not a batched matrix product per level
            return jnp.sum(Ginv * r.reshape(q, 1, d), axis=2).reshape(-1)
        return jnp.sum(Ginv[:, :, :, None] * r.reshape(q, 1, d, -1), axis=2).reshape(q * d, -1)

    def solve(self, blk: tuple, r: Array) -> Array:
        """:math:`A^{-1} r` (internal order)."""
        Ginv, _, E, L = blk
        rb, rs = r[: self.nb], r[self.nb:]
        if E is None:
            return self.gsolve(Ginv, rb)
        xs = jax.scipy.linalg.cho_solve((L, True), rs - E.T @ self.gsolve(Ginv, rb))
        xb = self.gsolve(Ginv, rb - E @ xs)
        return jnp.concatenate([xb, xs], axis=0)

    def logdet(self, blk: tuple) -> Array:
        _, ldG, _, L = blk
        if L is None:
            return ldG
        return ldG + 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))

    def dev(self, eta: Array) -> Array:
        # y log p + (n - y) log(1 - p) = n log p - (n - y) eta: one log-sigmoid a row
        return -2.0 * jnp.sum(self.n * jax.nn.log_sigmoid(eta) - (self.n - self.y) * eta)

    def weights(self, eta: Array) -> tuple[Array, Array]:
        p = jax.nn.sigmoid(eta)
        return self.n * p * (1.0 - p), self.y - self.n * p

    def pdev(self, u: Array, zt: list[Array], beta: Array) -> Array:
        return self.dev(self.eta(u, zt, beta)) + jnp.sum(u * u)

    def laplace(self, u: Array, zt: list[Array], beta: Array) -> Array:
        eta = self.eta(u, zt, beta)
        w, _ = self.weights(eta)
        return self.dev(eta) + jnp.sum(u * u) + self.logdet(self.blocks(w, zt))

    # ------------------------------------------------------------------ solvers
    def pirls(self, u0: Array, theta: Array, beta: Array, tol: Array, max_iter: int) -> Array:
        """Conditional mode by penalised IRLS (Newton with step halving) from ``u0``."""
        eps = jnp.finfo(u0.dtype).eps
        zt = self.ztilde(theta)

        def cond(s):
            _, _, it, dec = s
            return (it < max_iter) & (dec > tol)

        def body(s):
            u, pd, it, _ = s
            w, res = self.weights(self.eta(u, zt, beta))
            r = self.ztv(res, zt) - u
            x = self.solve(self.blocks(w, zt), r)
            dec = jnp.sum(r * x)
            slack = 10 * eps * (jnp.abs(pd) + 1.0)
            quad = dec < 1e-8

            def hcond(h):
                _, pdn, k = h
                return ~((pdn <= pd + slack) | quad) & (k < 12)

            def hbody(h):
                t, _, k = h
                t = t * 0.5
                return t, self.pdev(u + t * x, zt, beta), k + 1

            t, pdn, _ = lax.while_loop(hcond, hbody,
                                       (jnp.ones((), u.dtype), self.pdev(u + x, zt, beta), 0))
            ok = ((pdn <= pd + slack) | quad) & jnp.isfinite(pdn)
            u_new = jnp.where(ok, u + t * x, u)
            dec = jnp.where(ok & jnp.isfinite(dec), dec, 0.0)
            return u_new, jnp.where(ok, pdn, pd), it + 1, dec

        init = (u0, self.pdev(u0, zt, beta), 0, jnp.asarray(jnp.inf, u0.dtype))
        return lax.while_loop(cond, body, init)[0]

    def ddev(self, phi: Array, u0: Array) -> Array:
        """Laplace deviance at ``phi = (theta, beta)`` with exact first and second
        derivatives at the ``phi`` where ``u0`` is the conditional mode (two chord steps
        :math:`u \\leftarrow u + A_0^{-1} r(u, \\phi)` carry the mode's dependence)."""
        m = self.m_theta
        theta, beta = phi[:m], phi[m:]
        u = lax.stop_gradient(u0)
        zt0 = self.ztilde(lax.stop_gradient(theta))
        w0, _ = self.weights(self.eta(u, zt0, lax.stop_gradient(beta)))
        blk0 = self.blocks(w0, zt0)
        zt = self.ztilde(theta)
        for _ in range(_DIFF_STEPS):
            _, res = self.weights(self.eta(u, zt, beta))
            u = u + self.solve(blk0, self.ztv(res, zt) - u)
        return self.laplace(u, zt, beta)

    def grad_hess(self, phi: Array, u: Array) -> tuple[Array, Array]:
        """Gradient and Hessian of :meth:`ddev`, reverse over reverse (on CPU the forward
        derivative of the segment sums, vmapped over directions, ran far slower)."""
        def g_aux(p: Array) -> tuple[Array, Array]:
            g = jax.grad(self.ddev)(p, u)
            return g, g

        H, g = jax.jacrev(g_aux, has_aux=True)(phi)
        return g, 0.5 * (H + H.T)

    def glm_start(self, iters: int = 30) -> Array:
        """Fixed effects of the GLM without random effects (IRLS, small ridge)."""
        p = self.p

        def body(_, beta):
            eta = self.offset + self.X @ beta
            w, res = self.weights(eta)
            H = self.X.T @ (w[:, None] * self.X) + 1e-8 * jnp.eye(p, dtype=beta.dtype)
            step = jnp.linalg.solve(H, self.X.T @ res)
            step = jnp.where(jnp.all(jnp.isfinite(step)), step, 0.0)
            return beta + step

        return lax.fori_loop(0, iters, body, jnp.zeros(p, self.X.dtype))

    def cond_cov(self, u: Array, theta: Array, beta: Array) -> Array:
        """Covariance of beta from the penalised system at fixed theta (lme4's RX)."""
        zt = self.ztilde(theta)
        w, _ = self.weights(self.eta(u, zt, beta))
        wx = w[:, None] * self.X
        F = self.ztv(wx, zt)
        M = self.X.T @ wx - F.T @ self.solve(self.blocks(w, zt), F)
        return jnp.linalg.inv(0.5 * (M + M.T))

    def cond_var(self, u: Array, theta: Array, beta: Array) -> Array:
        """Diagonal blocks of :math:`\\Lambda A^{-1}\\Lambda^\\top` per term and level, in the
        user's term order, flattened (each block row-major)."""
        zt = self.ztilde(theta)
        w, _ = self.weights(self.eta(u, zt, beta))
        Ginv, _, E, L = self.blocks(w, zt)
        out: dict[int, Array] = {}
        b = self.big
        if E is None:
            out[b] = Ginv
        else:
            r = L.shape[0]
            Sinv = jax.scipy.linalg.cho_solve((L, True), jnp.eye(r, dtype=L.dtype))
            F = self.gsolve(Ginv, E).reshape(self.shapes[b].q, self.shapes[b].d, r)
            out[b] = Ginv + jnp.einsum("adr,rs,aes->ade", F, Sinv, F)
            o = 0
            for j in self.rest:
                s = self.shapes[j]
                blk = Sinv[o: o + s.q * s.d, o: o + s.q * s.d].reshape(s.q, s.d, s.q, s.d)
                out[j] = jnp.einsum("aiaj->aij", blk)
                o += s.q * s.d
        Ts = self.factors(theta)
        return jnp.concatenate([jnp.einsum("ij,ajk,lk->ail", Ts[k], out[k], Ts[k]).reshape(-1)
                                for k in range(self.K)])

    def to_user(self, u: Array) -> Array:
        """Internal order → the user's term order."""
        return jnp.concatenate([u[self.off[k]: self.off[k] + self.size[k]]
                                for k in range(self.K)])


def _sym(H: Array) -> Array:
    return 0.5 * (H + H.T)


def _canonical(pr: _Problem, theta: Array, u: Array) -> tuple[Array, Array]:
    """Negate every column of :math:`T_k` whose diagonal element is negative (and the
    matching component of :math:`u`): the same model, lme4's representative."""
    th_parts, u_parts = [], {}
    for k, s in enumerate(pr.shapes):
        a, b = pr.tslice[k]
        T = theta_to_factor(theta[a:b], s)
        sign = jnp.where(jnp.diagonal(T) < 0, -1.0, 1.0).astype(theta.dtype)
        T = T * sign[None, :]
        idx = s.theta_index()
        th_parts.append(jnp.stack([T[i, j] for i, j in idx]))
        u_parts[k] = (pr.uterm(u, k) * sign[None, :]).reshape(-1)
    u_new = jnp.concatenate([u_parts[k] for k in pr.order])
    return jnp.concatenate(th_parts), u_new


def _fit_one(X, y, n, offset, Zs, gs, shapes, max_iter, tol, inner_tol, max_inner, se,
             theta0=None, beta0=None, blocked=False) -> LmeArrays:
    pr = _Problem(X, y, n, offset, Zs, gs, shapes, blocked)
    dtype = X.dtype
    eps = jnp.finfo(dtype).eps
    itol = jnp.asarray(inner_tol, dtype)
    m = pr.m_theta
    th0 = jnp.asarray(theta_start(shapes), dtype) if theta0 is None else theta0
    be0 = pr.glm_start() if beta0 is None else beta0
    phi0 = jnp.concatenate([th0, be0])
    mm = phi0.shape[0]

    def direction(g, H):
        lam, V = jnp.linalg.eigh(H)
        floor = 1e-8 * jnp.max(jnp.abs(lam)) + 1e3 * eps
        d = -V @ ((V.T @ g) / jnp.maximum(jnp.abs(lam), floor))
        d = jnp.where(jnp.all(jnp.isfinite(d)), d, -g)
        return d, -(g @ d)

    eye = jnp.eye(mm, dtype=dtype)
    one_by_one = (jax.default_backend() == "cpu" and mm >= _HVP_MAP_PARAMS
                  and X.shape[0] < _HVP_MAP_ROWS)

    def hessian_rows(hvp: Any) -> Array:
        # the Hessian's rows, one reverse pass of the gradient each: vectorised over the
        # rows, or (small designs with several parameters, on a CPU) one after another,
        # where XLA's CPU kernels for the vectorised gathers and scatters cost more than
        # the passes they batch
        if one_by_one:
            return lax.map(lambda e: hvp(e)[0], eye)
        return jax.vmap(hvp)(eye)[0]

    def cond(s):
        return ~s["done"]

    def body(s):
        first = s["it"] == 0
        cand = s["phi"] + s["t"] * s["d"]
        un = pr.pirls(s["u"], cand[:m], cand[m:], itol, max_inner)
        Dn = pr.laplace(un, pr.ztilde(cand[:m]), cand[m:])
        noise = 1e3 * eps * (jnp.abs(s["D"]) + 1.0)
        ok = first | (Dn <= s["D"] - 1e-4 * s["t"] * s["dec"] + noise)
        ok = ok & jnp.isfinite(Dn)
        # the gradient at every candidate, its forward pass kept for the Hessian's rows; the
        # Hessian only at an accepted point (a rejected step only halves t; under vmap the
        # cond becomes a select and both sides run)
        gn, hvp = jax.vjp(lambda p: jax.grad(pr.ddev)(p, un), cand)
        # the previous point's exact Hessian is reused for one step where the decrement it
        # gives here has fallen fast (the quadratic phase: the step still contracts, without
        # the Hessian's reverse pass per parameter); never twice in a row, and convergence is
        # only declared on an exact Hessian (the first time the reused one says "converged",
        # the exact one is computed and decides from then on)
        decq = direction(gn, s["H"])[1]
        stale_ok = (s["fresh"] & ~first & ~s["exact"] & (decq >= tol)
                    & (decq < _CONTRACT * s["dec"]))
        fresh = ok & ~stale_ok
        Hn = lax.cond(fresh, lambda: _sym(hessian_rows(hvp)), lambda: s["H"])
        exact_phase = s["exact"] | (ok & ~first & (decq < tol))
        ok = ok & jnp.all(jnp.isfinite(gn)) & jnp.all(jnp.isfinite(Hn))
        dn, decn = direction(gn, Hn)
        pick = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        it = s["it"] + ok.astype(s["it"].dtype)
        dec = pick(decn, s["dec"])
        # a rejected step is shortened to the minimum of the quadratic through D, its slope
        # -dec and Dn along the direction, kept within [0.1 t, 0.5 t] (halving where Dn is
        # not finite)
        curv = Dn - s["D"] + s["dec"] * s["t"]
        t_quad = s["dec"] * s["t"] ** 2 / (2.0 * curv)
        t_quad = jnp.where(jnp.isfinite(t_quad) & (curv > 0), t_quad, 0.5 * s["t"])
        t_back = jnp.clip(t_quad, 0.1 * s["t"], 0.5 * s["t"])
        t = jnp.where(ok, jnp.ones((), dtype), t_back)
        now_fresh = jnp.where(ok, fresh, s["fresh"])
        small = (dec < tol) & now_fresh
        stuck = ~ok & (s["t"] < 2.0 ** -30)
        out_of_steps = it > max_iter
        conv = small | (stuck & (dec < jnp.maximum(tol, noise)))
        return dict(phi=pick(cand, s["phi"]), u=pick(un, s["u"]), D=pick(Dn, s["D"]),
                    g=pick(gn, s["g"]), H=pick(Hn, s["H"]), d=pick(dn, s["d"]), dec=dec,
                    t=t, it=it, done=small | stuck | out_of_steps | ~jnp.isfinite(dec),
                    conv=conv, fresh=now_fresh, exact=jnp.where(ok, exact_phase, s["exact"]))

    init = dict(phi=phi0, u=jnp.zeros(pr.q_tot, dtype), D=jnp.asarray(jnp.inf, dtype),
                g=jnp.zeros(mm, dtype), H=jnp.eye(mm, dtype=dtype), d=jnp.zeros(mm, dtype),
                dec=jnp.asarray(jnp.inf, dtype), t=jnp.ones((), dtype),
                it=jnp.zeros((), jnp.int32), done=jnp.asarray(False),
                conv=jnp.asarray(False), fresh=jnp.asarray(False), exact=jnp.asarray(False))
    s = lax.while_loop(cond, body, init)
    phi, u, D = s["phi"], s["u"], s["D"]
    # the exact Hessian at the end (standard errors, the reported eigenvalue) where the loop
    # stopped on a reused one (out of iterations, or stuck)
    H = lax.cond(s["fresh"], lambda: s["H"], lambda: pr.grad_hess(phi, u)[1])
    theta, beta = _canonical(pr, phi[:m], u)[0], phi[m:]
    sign_u = _canonical(pr, phi[:m], u)[1]
    # the Hessian in the canonical representative: theta elements of a negated column
    # change sign, so H changes by a diagonal +-1 similarity (beta block unchanged)
    flip = jnp.concatenate([jnp.where(jnp.sign(theta) * jnp.sign(phi[:m]) < 0, -1.0, 1.0)
                            .astype(dtype), jnp.ones(pr.p, dtype)])
    H = H * flip[:, None] * flip[None, :]
    u = sign_u
    ccov = pr.cond_cov(u, theta, beta)
    lam = jnp.linalg.eigvalsh(H)
    if se == "hessian":
        full = 2.0 * jnp.linalg.inv(H)
        hcov = full[m:, m:]
        hcov = 0.5 * (hcov + hcov.T)
        good = (jnp.all(jnp.isfinite(full)) & (lam[0] > 0)
                & jnp.all(jnp.linalg.eigvalsh(hcov) > 0))
        cov = jnp.where(good, hcov, ccov)
        method = jnp.where(good, 0, 1)
    else:
        cov, method = ccov, jnp.ones((), jnp.int32)
    se_ = jnp.sqrt(jnp.diagonal(cov))
    finite = jnp.isfinite(D) & jnp.all(jnp.isfinite(phi)) & jnp.all(jnp.isfinite(se_))
    Ts = pr.factors(theta)
    b = jnp.concatenate([(pr.uterm(u, k) @ Ts[k].T).reshape(-1) for k in range(pr.K)])
    return LmeArrays(
        theta=theta, beta=beta, se=se_, cov=cov, cov_method=method.astype(jnp.int32),
        deviance=D, loglik=-0.5 * D + log_binomial_coefficients(y, n), u=pr.to_user(u), b=b,
        b_var=pr.cond_var(u, theta, beta), grad_norm=jnp.max(jnp.abs(s["g"])),
        hess_min_eig=lam[0], converged=s["conv"] & finite,
        iterations=jnp.maximum(s["it"] - 1, 0))


@partial(jax.jit, static_argnames=("shapes", "max_iter", "tol", "inner_tol", "max_inner", "se",
                                   "batch_trials", "blocked"))
def _fit_batch(X, y, n, offset, Zs, gs, shapes, max_iter, tol, inner_tol, max_inner, se,
               batch_trials, blocked):
    f = partial(_fit_one, shapes=shapes, max_iter=max_iter, tol=tol, inner_tol=inner_tol,
                max_inner=max_inner, se=se, blocked=blocked)
    return jax.vmap(lambda yy, nn: f(X, yy, nn, offset, Zs, gs),
                    in_axes=(0, 0 if batch_trials else None))(y, n)


@partial(jax.jit, static_argnames=("shapes", "max_iter", "tol", "inner_tol", "max_inner", "se",
                                   "batch_trials", "blocked"))
def _fit_map(X, y, n, offset, Zs, gs, shapes, max_iter, tol, inner_tol, max_inner, se,
             batch_trials, blocked, theta0=None, beta0=None):
    f = partial(_fit_one, shapes=shapes, max_iter=max_iter, tol=tol, inner_tol=inner_tol,
                max_inner=max_inner, se=se, theta0=theta0, beta0=beta0, blocked=blocked)
    if batch_trials:
        return lax.map(lambda a: f(X, a[0], a[1], offset, Zs, gs), (y, n))
    return lax.map(lambda yy: f(X, yy, n, offset, Zs, gs), y)


def _as(a: Any, dtype: Any) -> Any:
    """``a`` as an array of ``dtype``: a NumPy array where ``a`` is concrete host data (the
    compiled call takes it in one transfer, where a device array per input costs a dispatch
    each), a JAX array where it is one or is traced."""
    if isinstance(a, jax.Array):  # a device array or a tracer
        return jnp.asarray(a, dtype)
    return np.asarray(a, dtype)


def _arrays(X, y, trials, offset, Zs, gs, shapes):
    kind = X.dtype if isinstance(X, jax.Array) else np.asarray(X).dtype
    dtype = (jax.dtypes.canonicalize_dtype(kind) if jnp.issubdtype(kind, jnp.floating)
             else jnp.result_type(float))
    X = _as(X, dtype)
    n_obs = X.shape[0]
    y = _as(y, dtype)
    n = np.ones(n_obs, dtype) if trials is None else _as(trials, dtype)
    off = np.zeros(n_obs, dtype) if offset is None else _as(offset, dtype)
    Zs = tuple(_as(z, dtype) for z in Zs)
    gs = tuple(_as(g, np.int32) for g in gs)
    shapes = tuple(shapes)
    if len(Zs) != len(shapes) or len(gs) != len(shapes) or not shapes:
        raise ValueError("lme_fit_arrays: Zs, gs and shapes need one entry per random term "
                         "(at least one)")
    for k, (z, g, s) in enumerate(zip(Zs, gs, shapes, strict=True)):
        if z.shape != (n_obs, s.d) or g.shape != (n_obs,):
            raise ValueError(f"lme_fit_arrays: a term's Z must be ({n_obs}, {s.d}) and its "
                             f"codes ({n_obs},); got {z.shape} and {g.shape}")
        if isinstance(g, np.ndarray) and n_obs and (g.min() < 0 or g.max() >= s.q):
            raise ValueError(f"lme_fit_arrays: the codes of term {k} must lie in 0..{s.q - 1} "
                             f"(its q); got {int(g.min())}..{int(g.max())}")
    return X, y, n, off, Zs, gs, shapes, dtype


def lme_fit_arrays(
    X: Any, y: Any, trials: Any, Zs: tuple[Any, ...], gs: tuple[Any, ...],
    shapes: tuple[TermShape, ...], *, offset: Any = None, max_iter: int = 100,
    tol: float | None = None, se: str = "hessian", max_inner: int = 50,
    sequential: bool = False, start: tuple[Any, Any] | None = None,
) -> LmeArrays:
    """Maximum Laplace-likelihood fit (module docstring) on numeric arrays.

    Parameters
    ----------
    X : array, shape (n, p)
        Fixed-effect design; its float dtype is the computation's.
    y : array, shape (..., n)
        Successes; leading axes are replicates fitted with the same design (vmapped).
    trials : array, shape (n,) or (..., n), or None
        Trials per row (``None``: Bernoulli).
    Zs : tuple of arrays, shape (n, d_k)
        Random-effects columns of each term.
    gs : tuple of int arrays, shape (n,)
        0-based level codes of each term's grouping factor.
    shapes : tuple of TermShape
        Static shapes (``d``, ``q``, ``correlated``) of the terms.
    offset : array, shape (n,), optional
        Known part of the linear predictor.
    max_iter, tol, se, max_inner
        Outer Newton iterations, tolerance on the Newton decrement (default 1e-10 in
        float64), ``"hessian"`` or ``"conditional"`` covariance, inner PIRLS iterations.
    sequential : bool
        Fit the replicates one after another inside one compiled program (``lax.map``)
        instead of side by side (``vmap``): each fit stops at its own convergence, and
        XLA's CPU runtime has been seen to stall on large vmapped batches of these
        data-dependent loops (many refits of a simulation use this).
    start : (theta, beta), optional
        Starting values of the outer Newton iterations (``sequential`` only), e.g. the
        parameters a simulation drew from; default: lme4's :math:`\theta` start and the
        fixed effects of the GLM without random effects.

    Returns
    -------
    LmeArrays
    """
    if se not in ("hessian", "conditional"):
        raise ValueError(f"se must be 'hessian' or 'conditional', got {se!r}")
    X, y, n, off, Zs, gs, shapes, dtype = _arrays(X, y, trials, offset, Zs, gs, shapes)
    f64 = dtype == jnp.float64
    tol = (1e-10 if f64 else 1e-4) if tol is None else tol
    inner_tol = 1e-12 if f64 else 1e-6
    batch = y.shape[:-1]
    laid = _block_rows(X, y, n, off, Zs, gs, shapes)
    blocked = laid is not None
    if blocked:
        X, y, n, off, Zs, gs = laid
    yb = y.reshape((-1, y.shape[-1]))
    batch_trials = n.ndim > 1
    if batch_trials:
        n = (jnp if isinstance(n, jax.Array) else np).broadcast_to(n, y.shape).reshape(yb.shape)
    args = (X, yb, n, off, Zs, gs, shapes, int(max_iter), float(tol), float(inner_tol),
            int(max_inner), se, batch_trials, blocked)
    if start is not None and not sequential:
        raise ValueError("lme_fit_arrays: start is taken with sequential=True only")
    if sequential:
        th0, be0 = (None, None) if start is None else (jnp.asarray(v, dtype) for v in start)
        res = _fit_map(*args, theta0=th0, beta0=be0)
    else:
        res = _fit_batch(*args)
    if batch == yb.shape[:1]:
        return res
    return jax.tree_util.tree_map(lambda a: a.reshape(batch + a.shape[1:]), res)


@partial(jax.jit, static_argnames=("shapes",))
def _deviance(X, y, n, offset, Zs, gs, shapes, theta, beta):
    pr = _Problem(X, y, n, offset, Zs, gs, shapes)
    tol = jnp.asarray(1e-12 if X.dtype == jnp.float64 else 1e-6, X.dtype)
    u = pr.pirls(jnp.zeros(pr.q_tot, X.dtype), theta, beta, tol, 100)
    return pr.laplace(u, pr.ztilde(theta), beta)


def lme_deviance(X: Any, y: Any, trials: Any, Zs: tuple[Any, ...], gs: tuple[Any, ...],
                 shapes: tuple[TermShape, ...], theta: Any, beta: Any, *,
                 offset: Any = None) -> Array:
    """Laplace deviance :math:`D(\\theta, \\beta)` (no binomial coefficients) at given
    parameters, the conditional mode found afresh: lme4's ``devfun`` of the second stage."""
    X, y, n, off, Zs, gs, shapes, dtype = _arrays(X, y, trials, offset, Zs, gs, shapes)
    return _deviance(X, y, n, off, Zs, gs, shapes, jnp.asarray(theta, dtype),
                     jnp.asarray(beta, dtype))
