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

Structure: the block of :math:`A` for levels :math:`a` of term :math:`j` and :math:`c` of
term :math:`l` is :math:`\delta_{jl}\delta_{ac}I + T_j^\top\big(\sum_{i: g_j(i)=a,
g_l(i)=c} w_i z_{ij} z_{il}^\top\big)T_l`, accumulated by sums over the rows (no rows ×
effects matrix is formed); the factors :math:`T_k` enter only after the sums, per level, so
that derivatives in :math:`\theta` cost no work per row beyond the weights'. The term
with the most random effects (:math:`q_b d_b`) has a block-diagonal own block :math:`G`
(:math:`q_b` blocks of :math:`d_b\times d_b`); it is eliminated, leaving the dense Schur
complement :math:`S - E^\top G^{-1} E` over the other terms' effects:
:math:`\log\det A = \sum_a\log\det G_a + \log\det(S - E^\top G^{-1}E)`.

Row layout (:func:`_plan`, where the grouping codes are concrete): the rows are reordered
level by level of the big term and padded to the same number per level with rows of no
trials (:math:`n_i = y_i = 0`, zero covariates: they add nothing to :math:`D` or to any sum),
where that adds at most a quarter of the rows. The big term's sums over a level's rows are
then a reshape and a sum, which XLA fuses with the elementwise work around them; a term
fully crossed with it (every pair of levels once: one row per LLM and passage) has its rows
in level order within every block, so its sums are reshapes too; other terms' sums are
segment sums. With ``bucket=True`` the levels of every term and the rows are padded to the
sizes of :func:`bucket_size` (levels without rows: conditional mode 0, a factor 1 of the
log-determinant), so that a log of similar size reuses the compiled program, which a single
fit keeps in JAX's persistent cache (:func:`_fit_stored`). The fit depends on neither
(``tests/glmm/test_lme_layout.py``).

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
optimiser tolerance. Many refits one after another (``sequential=True``, power
simulations) take quasi-Newton steps instead: each refit starts from the exact Hessian of
the refit before it (at that one's optimum; the first of a sequence computes it at its start),
updates it by BFGS from the gradients of its accepted points, computes the exact Hessian
afresh only where progress is slow (a shortened step, or a decrement that fell by less than
a factor 4) and, at the end, where the updated matrix says "converged": the exact Hessian
there decides convergence and gives the standard errors, as in a single fit. The optimum is
the same to the tolerance (the estimates of a refit agree with those of a single fit to
~1e-6, not bit for bit, and depend on the refit before it only that far); a refit costs
about one exact Hessian where Newton's steps cost one each. A single fit computes the exact
Hessian at every point, a smaller program that compiles faster. At the end each
column of :math:`T_k` with a negative diagonal element
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

import dataclasses
import functools
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tomstats._io import atomic_write_bytes
from tomstats.glmm._theta import TermShape, theta_onehot, theta_start
from tomstats.glmm.glm import log_binomial_coefficients

__all__ = ["TermShape", "LmeArrays", "lme_fit_arrays", "lme_deviance", "theta_start",
           "theta_to_factor"]

Array = jax.Array
_DIFF_STEPS = 2
#: Power refits (``sequential``) update the Hessian by BFGS between exact ones; the exact
#: Hessian is computed afresh where the step before had to be shortened or the updated
#: matrix gives a Newton decrement above this share of the previous one (slow progress).
_SLOW = 0.25
#: On a CPU, the Hessian's rows are computed one after another (not vectorised) for designs
#: of fewer rows than this with at least this many parameters (measured on the power
#: benchmark's designs: faster there, slower for 3 parameters or 7,872 rows).
_HVP_MAP_ROWS = 4096
_HVP_MAP_PARAMS = 4


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


def bucket_size(q: int) -> int:
    r"""The smallest size of the padding ladder at least ``q``: ``q`` itself up to 8, then
    four sizes per doubling (multiples of :math:`2^{\lfloor\log_2(q-1)\rfloor-2}`: 10, 12,
    14, 16, 20, ..., 40, 48, 56, 64, ...), so padding adds at most 25 %."""
    q = int(q)
    if q <= 8:
        return q
    step = 2 ** ((q - 1).bit_length() - 3)
    return -(-q // step) * step


#: Rows are laid out level by level of the big term (:func:`_plan`) when that makes at most
#: this share more rows than the rows as given (after padding to buckets, if asked).
_BLOCK_PAD = 0.25


@dataclass(frozen=True)
class _Layout:
    """Where each data row goes in the fitted arrays (a host-side plan, :func:`_plan`).

    Attributes
    ----------
    shapes : tuple of TermShape
        The terms' shapes as fitted (levels padded to buckets, or as given).
    rows : int
        Rows of the fitted arrays (the data rows plus padding rows of no trials).
    pos : ndarray of int, shape (n,)
        The fitted row of each data row.
    gs : tuple of ndarray
        Level codes of every fitted row, per term (padding rows: a valid level).
    blocked : bool
        Rows level by level of the big term, the same number per level.
    crossed : int
        A term whose levels each level of the big term holds once each, in order (its sums
        are reshapes too), or -1.
    """

    shapes: tuple[TermShape, ...]
    rows: int
    pos: np.ndarray
    gs: tuple[np.ndarray, ...]
    blocked: bool = False
    crossed: int = -1

    @property
    def identity(self) -> bool:
        """The rows stay as given: nothing to move or pad."""
        n = self.pos.shape[0]
        return self.rows == n and bool(np.array_equal(self.pos, np.arange(n)))


def _plan(gs: tuple[np.ndarray, ...], shapes: tuple[TermShape, ...], bucket: bool) -> _Layout:
    """The row layout of a fit with concrete level codes ``gs``.

    With ``bucket`` every level count and the number of rows (or rows per level) is padded
    to :func:`bucket_size`: levels without rows (conditional mode 0, a factor 1 of the
    log-determinant) and rows of no trials (:math:`n_i = y_i = 0`, zero covariates: no term
    of the deviance or of any sum). The deviance, its derivatives and the estimates are
    unchanged, and designs of similar size share one compiled program.

    Where the padding stays within :data:`_BLOCK_PAD`, the rows are put level by level of
    the big term (:func:`_big_term`), ``r`` rows per level (the largest level's count), so
    that its sums over rows are reshapes; where moreover another term's levels are each
    held once by every level of the big term (a fully crossed design, one row per pair),
    that term's rows are in level order within each block (``crossed``), and its sums are
    reshapes as well.
    """
    n = int(gs[0].shape[0]) if gs else 0
    pad = bucket_size if bucket else int
    fitted = tuple(TermShape(d=s.d, q=pad(s.q), correlated=s.correlated) for s in shapes)
    plain_rows = pad(n)
    plain = _Layout(fitted, plain_rows, np.arange(n),
                    tuple(np.concatenate([np.asarray(g, np.int32),
                                          np.zeros(plain_rows - n, np.int32)]) for g in gs))
    if n == 0:
        return plain
    big = _big_term(fitted)
    g = np.asarray(gs[big])
    qb = fitted[big].q
    for j in range(len(gs)):
        if j == big or shapes[j].q * shapes[big].q != n:
            continue
        key = g.astype(np.int64) * shapes[j].q + np.asarray(gs[j])
        if np.array_equal(np.sort(key), np.arange(n)):  # every pair once: crossed
            qj = fitted[j].q
            if qb * qj > (1.0 + _BLOCK_PAD) * plain_rows:
                break
            pos = g.astype(np.int64) * qj + np.asarray(gs[j])
            return _Layout(fitted, qb * qj, pos, _block_codes(gs, pos, qb * qj, big, qb, qj, j),
                           blocked=True, crossed=j)
    counts = np.bincount(g, minlength=qb)
    r = pad(int(counts.max()))
    if qb * r > (1.0 + _BLOCK_PAD) * plain_rows:
        return plain
    order = np.argsort(g, kind="stable")
    starts = np.cumsum(counts) - counts
    pos = np.empty(n, np.int64)
    pos[order] = g[order] * r + (np.arange(n) - np.repeat(starts, counts))
    return _Layout(fitted, qb * r, pos, _block_codes(gs, pos, qb * r, big, qb, r, -1),
                   blocked=True)


def _block_codes(gs: tuple[np.ndarray, ...], pos: np.ndarray, rows: int, big: int, qb: int,
                 r: int, crossed: int) -> tuple[np.ndarray, ...]:
    """The level codes of every fitted row of a blocked layout (padding rows: the big term's
    level of their block, the crossed term's level of their place, else level 0)."""
    out = []
    for k, gk in enumerate(gs):
        if k == big:
            out.append(np.repeat(np.arange(qb, dtype=np.int32), r))
        elif k == crossed:
            out.append(np.tile(np.arange(r, dtype=np.int32), qb))
        else:
            c = np.zeros(rows, np.int32)
            c[pos] = gk
            out.append(c)
    return tuple(out)


def _place(layout: _Layout, a: Any, axis: int = 0) -> Any:
    """``a``'s rows (along ``axis``) at their fitted places, zeros in the padding (NumPy for
    host arrays, JAX for device or traced ones, e.g. replicated outcomes)."""
    if isinstance(a, jax.Array):
        a = jnp.moveaxis(a, axis, 0)
        out = jnp.zeros((layout.rows,) + a.shape[1:], a.dtype).at[layout.pos].set(a)
        return jnp.moveaxis(out, 0, axis)
    a = np.moveaxis(np.asarray(a), axis, 0)
    out = np.zeros((layout.rows,) + a.shape[1:], a.dtype)
    out[layout.pos] = a
    return np.moveaxis(out, 0, axis)


class _Problem:
    """One fit's data with its static block structure (a helper of the traced code)."""

    def __init__(self, X: Array, y: Array, n: Array, offset: Array, Zs: tuple[Array, ...],
                 gs: tuple[Array, ...], shapes: tuple[TermShape, ...],
                 blocked: bool = False, crossed: int = -1) -> None:
        self.X, self.y, self.n, self.offset = X, y, n, offset
        self.Zs, self.gs, self.shapes = Zs, gs, shapes
        # the random-effects columns one by one, each a vector over the rows: the per-row
        # work is then on (rows,) arrays (and (directions, rows) ones in the Hessian), where
        # a trailing axis of 1 or 2 effects made XLA's CPU loops and reductions slow
        self.zc = tuple(tuple(Z[:, a] for a in range(s.d)) for Z, s in zip(Zs, shapes,
                                                                          strict=True))
        self.K = len(shapes)
        self.p = X.shape[1]
        sizes = [s.q * s.d for s in shapes]
        self.big = _big_term(shapes)
        # rows laid out level by level of the big term, the same number per level
        # (:func:`_plan`): its sums over rows are reshapes and sums, which XLA fuses, where
        # segment sums and gathers are separate (slow) kernels on a CPU; so are those of a
        # term crossed with it (each block holds its levels once each, in order)
        self.blocked = blocked
        self.crossed = crossed if blocked else -1
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

    def uterm(self, u: Array, k: int) -> Array:
        s = self.shapes[k]
        return u[self.off[k]: self.off[k] + self.size[k]].reshape(s.q, s.d)

    def by_row(self, k: int, per_level: Array) -> Array:
        """Rows' values of a per-level array (q_k, ...) of term ``k``, shape (n, ...)."""
        tail = per_level.shape[1:]
        if self.blocked and k == self.big:
            q = per_level.shape[0]
            r = self.X.shape[0] // q
            return jnp.broadcast_to(per_level[:, None], (q, r) + tail).reshape((q * r,) + tail)
        if k == self.crossed:
            q = per_level.shape[0]
            qb = self.X.shape[0] // q
            return jnp.broadcast_to(per_level[None], (qb, q) + tail).reshape((qb * q,) + tail)
        return per_level[self.gs[k]]

    def level_sum(self, k: int, by_rows: Array) -> Array:
        """Sums over the rows of each level of term ``k``: (n, ...) -> (q_k, ...)."""
        q = self.shapes[k].q
        if self.blocked and k == self.big:
            return by_rows.reshape((q, by_rows.shape[0] // q) + by_rows.shape[1:]).sum(axis=1)
        if k == self.crossed:
            return by_rows.reshape((by_rows.shape[0] // q, q) + by_rows.shape[1:]).sum(axis=0)
        return jax.ops.segment_sum(by_rows, self.gs[k], q)

    def eta(self, u: Array, Ts: list[Array], beta: Array) -> Array:
        r""":math:`o_i + x_i^\top\beta + \sum_k z_{ik}^\top b_{k,g_k(i)}`, the modes
        :math:`b_{k,a} = T_k u_{k,a}` formed per level (the factors enter no per-row work)."""
        e = self.offset + _narrow_matmul(self.X, beta)
        for k in range(self.K):
            b = self.uterm(u, k) @ Ts[k].T
            for a, z in enumerate(self.zc[k]):
                e = e + z * self.by_row(k, b[:, a])
        return e

    def ztv(self, v: Array, Ts: list[Array]) -> Array:
        r""":math:`\Lambda^\top Z^\top v` in the internal order; ``v`` (n,) or (n, m): the sums
        :math:`\sum_{i \in a} z_{ik} v_i` per level, then :math:`T_k^\top` per level."""
        parts = []
        for k in self.order:
            s = self.shapes[k]
            if v.ndim == 1:
                sums = jnp.stack([self.level_sum(k, z * v) for z in self.zc[k]], axis=1)
                parts.append((sums @ Ts[k]).reshape(-1))
            else:
                sums = jnp.stack([self.level_sum(k, z[:, None] * v) for z in self.zc[k]],
                                 axis=1)
                parts.append(jnp.einsum("adm,de->aem", sums, Ts[k]).reshape(s.q * s.d,
                                                                            v.shape[1]))
        return jnp.concatenate(parts, axis=0)

    def _outer_sums(self, w: Array, j: int, l: int, sums: Any) -> Array:
        r""":math:`\sum w z_{ja} z_{lb}` over the rows of each level (pair) by ``sums``,
        shape (levels, d_j, d_l); for ``j == l`` each product once (the matrix is
        symmetric)."""
        zj, zl = self.zc[j], self.zc[l]
        cell = {}
        for a in range(len(zj)):
            for b in range(len(zl)):
                if j == l and b < a:
                    cell[a, b] = cell[b, a]
                else:
                    cell[a, b] = sums(w * zj[a] * zl[b])
        return jnp.stack([jnp.stack([cell[a, b] for b in range(len(zl))], -1)
                          for a in range(len(zj))], -2)

    def own(self, w: Array, Ts: list[Array], k: int) -> Array:
        r"""Diagonal blocks of term ``k``: :math:`I + T_k^\top(\sum w z z^\top)T_k`,
        shape (q, d, d)."""
        s = self.shapes[k]
        M = self._outer_sums(w, k, k, lambda v: self.level_sum(k, v))
        return jnp.einsum("di,ade,ej->aij", Ts[k], M, Ts[k]) + jnp.eye(s.d, dtype=w.dtype)

    def cross(self, w: Array, Ts: list[Array], j: int, l: int) -> Array:
        r"""Dense block between terms ``j`` and ``l``, shape (q_j d_j, q_l d_l):
        :math:`T_j^\top(\sum w z_j z_l^\top)T_l` per pair of levels."""
        sj, sl = self.shapes[j], self.shapes[l]
        if j == self.big and l == self.crossed:  # rows are (level of j, level of l) in order
            C = self._outer_sums(w, j, l, lambda v: v)
        else:
            pair = self.gs[j] * sl.q + self.gs[l]
            C = self._outer_sums(w, j, l,
                                 lambda v: jax.ops.segment_sum(v, pair, sj.q * sl.q))
        C = jnp.einsum("di,bde,ej->bij", Ts[j], C, Ts[l])
        return C.reshape(sj.q, sl.q, sj.d, sl.d).transpose(0, 2, 1, 3).reshape(
            sj.q * sj.d, sl.q * sl.d)

    @staticmethod
    def dense_blockdiag(B: Array) -> Array:
        q, d, _ = B.shape
        eye = jnp.eye(q, dtype=B.dtype)
        return (eye[:, None, :, None] * B[:, :, None, :]).reshape(q * d, q * d)

    def blocks(self, w: Array, Ts: list[Array]) -> tuple[Array, Array | None, Array | None]:
        """``(G^-1, log det G, E, L)``: inverses of the big term's blocks (q_b, d_b, d_b),
        their total log-determinant, the blocks E between the big term and the others, and
        the Cholesky factor L of the Schur complement (E and L are None for one term)."""
        b = self.big
        Ginv, ldG = _inv_logdet(self.own(w, Ts, b))
        if not self.rest:
            return Ginv, ldG, None, None
        E = jnp.concatenate([self.cross(w, Ts, b, j) for j in self.rest], axis=1)
        rows = []
        for a, j in enumerate(self.rest):
            row = []
            for c, l in enumerate(self.rest):
                if a == c:
                    row.append(self.dense_blockdiag(self.own(w, Ts, j)))
                elif a < c:
                    row.append(self.cross(w, Ts, j, l))
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

    def pdev(self, u: Array, Ts: list[Array], beta: Array) -> Array:
        return self.dev(self.eta(u, Ts, beta)) + jnp.sum(u * u)

    def laplace(self, u: Array, Ts: list[Array], beta: Array) -> Array:
        eta = self.eta(u, Ts, beta)
        w, _ = self.weights(eta)
        return self.dev(eta) + jnp.sum(u * u) + self.logdet(self.blocks(w, Ts))

    # ------------------------------------------------------------------ solvers
    def pirls(self, u0: Array, theta: Array, beta: Array, tol: Array, max_iter: int) -> Array:
        """Conditional mode by penalised IRLS (Newton with step halving) from ``u0``."""
        eps = jnp.finfo(u0.dtype).eps
        Ts = self.factors(theta)

        def cond(s):
            _, _, it, dec = s
            return (it < max_iter) & (dec > tol)

        def body(s):
            u, pd, it, _ = s
            w, res = self.weights(self.eta(u, Ts, beta))
            r = self.ztv(res, Ts) - u
            x = self.solve(self.blocks(w, Ts), r)
            dec = jnp.sum(r * x)
            slack = 10 * eps * (jnp.abs(pd) + 1.0)
            quad = dec < 1e-8

            def hcond(h):
                _, pdn, k = h
                return ~((pdn <= pd + slack) | quad) & (k < 12)

            def hbody(h):
                t, _, k = h
                t = t * 0.5
                return t, self.pdev(u + t * x, Ts, beta), k + 1

            t, pdn, _ = lax.while_loop(hcond, hbody,
                                       (jnp.ones((), u.dtype), self.pdev(u + x, Ts, beta), 0))
            ok = ((pdn <= pd + slack) | quad) & jnp.isfinite(pdn)
            u_new = jnp.where(ok, u + t * x, u)
            dec = jnp.where(ok & jnp.isfinite(dec), dec, 0.0)
            return u_new, jnp.where(ok, pdn, pd), it + 1, dec

        init = (u0, self.pdev(u0, Ts, beta), 0, jnp.asarray(jnp.inf, u0.dtype))
        return lax.while_loop(cond, body, init)[0]

    def ddev(self, phi: Array, u0: Array) -> Array:
        """Laplace deviance at ``phi = (theta, beta)`` with exact first and second
        derivatives at the ``phi`` where ``u0`` is the conditional mode (two chord steps
        :math:`u \\leftarrow u + A_0^{-1} r(u, \\phi)` carry the mode's dependence)."""
        m = self.m_theta
        theta, beta = phi[:m], phi[m:]
        u = lax.stop_gradient(u0)
        Ts0 = self.factors(lax.stop_gradient(theta))
        w0, _ = self.weights(self.eta(u, Ts0, lax.stop_gradient(beta)))
        blk0 = self.blocks(w0, Ts0)
        Ts = self.factors(theta)
        for _ in range(_DIFF_STEPS):
            _, res = self.weights(self.eta(u, Ts, beta))
            u = u + self.solve(blk0, self.ztv(res, Ts) - u)
        return self.laplace(u, Ts, beta)

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

    def conditional(self, u: Array, theta: Array, beta: Array) -> tuple[Array, Array]:
        """At the mode ``u``: the covariance of beta from the penalised system at fixed theta
        (lme4's RX), and the diagonal blocks of :math:`\\Lambda A^{-1}\\Lambda^\\top` per term
        and level in the user's term order, flattened (each block row-major); one
        factorisation of :math:`A` serves both."""
        Ts = self.factors(theta)
        w, _ = self.weights(self.eta(u, Ts, beta))
        blk = self.blocks(w, Ts)
        wx = w[:, None] * self.X
        F = self.ztv(wx, Ts)
        M = self.X.T @ wx - F.T @ self.solve(blk, F)
        Ginv, _, E, L = blk
        out: dict[int, Array] = {}
        b = self.big
        if E is None:
            out[b] = Ginv
        else:
            r = L.shape[0]
            Sinv = jax.scipy.linalg.cho_solve((L, True), jnp.eye(r, dtype=L.dtype))
            GE = self.gsolve(Ginv, E).reshape(self.shapes[b].q, self.shapes[b].d, r)
            out[b] = Ginv + jnp.einsum("adr,rs,aes->ade", GE, Sinv, GE)
            o = 0
            for j in self.rest:
                s = self.shapes[j]
                sub = Sinv[o: o + s.q * s.d, o: o + s.q * s.d].reshape(s.q, s.d, s.q, s.d)
                out[j] = jnp.einsum("aiaj->aij", sub)
                o += s.q * s.d
        Ts = self.factors(theta)
        var = jnp.concatenate([jnp.einsum("ij,ajk,lk->ail", Ts[k], out[k], Ts[k]).reshape(-1)
                               for k in range(self.K)])
        return jnp.linalg.inv(0.5 * (M + M.T)), var

    def to_user(self, u: Array) -> Array:
        """Internal order → the user's term order."""
        return jnp.concatenate([u[self.off[k]: self.off[k] + self.size[k]]
                                for k in range(self.K)])


def _sym(H: Array) -> Array:
    return 0.5 * (H + H.T)


def _bfgs(B: Array, step: Array, dg: Array) -> Array:
    r"""BFGS update of a Hessian approximation ``B`` by a step :math:`s` and the change
    :math:`y` of the gradient along it,
    :math:`B_+ = B - \frac{Bss^\top B}{s^\top Bs} + \frac{yy^\top}{y^\top s}`;
    ``B`` unchanged where the curvature :math:`y^\top s` is not positive (the update would
    not stay positive definite) or the step is 0."""
    Bs = B @ step
    sBs = step @ Bs
    ys = dg @ step
    good = (ys > 1e-12 * jnp.sqrt((dg @ dg) * (step @ step))) & (sBs > 0)
    safe = lambda v: jnp.where(good, v, 1.0)  # noqa: E731
    new = B - jnp.outer(Bs, Bs) / safe(sBs) + jnp.outer(dg, dg) / safe(ys)
    return jnp.where(good, _sym(new), B)


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
             theta0=None, beta0=None, blocked=False, crossed=-1, reuse=False, hess0=None
             ) -> LmeArrays | tuple[LmeArrays, Array]:
    """One fit (module docstring). With ``reuse`` (refits one after another) the Hessian is
    updated by BFGS between exact ones, and ``hess0`` may give ``(H, have)``: a Hessian to
    start from (where ``have``; the previous refit's exact one at its optimum) instead of
    the exact one at the start; the fit then returns ``(result, H)``, ``H`` its exact
    Hessian at the optimum (lme4's representative of theta)."""
    pr = _Problem(X, y, n, offset, Zs, gs, shapes, blocked, crossed)
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
    H0, have0 = (eye, jnp.asarray(False)) if hess0 is None else hess0
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
        # the first point of a refit that starts from the previous refit's Hessian
        carried = first & have0
        # a closing pass (``force``): the loop stopped on a reused Hessian, so the exact one
        # is computed at the same point (t = 0; standard errors and the reported eigenvalue
        # need it), by the loop's own code rather than a second copy of it in the program
        force = s["force"]
        cand = s["phi"] + s["t"] * s["d"]
        un = pr.pirls(s["u"], cand[:m], cand[m:], itol, max_inner)
        Dn = pr.laplace(un, pr.factors(cand[:m]), cand[m:])
        noise = 1e3 * eps * (jnp.abs(s["D"]) + 1.0)
        ok = first | force | (Dn <= s["D"] - 1e-4 * s["t"] * s["dec"] + noise)
        ok = ok & jnp.isfinite(Dn)
        # the gradient at every candidate, its forward pass kept for the Hessian's rows
        gn, hvp = jax.vjp(lambda p: jax.grad(pr.ddev)(p, un), cand)
        if reuse:
            # quasi-Newton (BFGS) between exact Hessians: the exact one at the start, then
            # rank-two updates from the gradients of the accepted points (no reverse pass
            # per parameter). The exact Hessian is computed afresh where progress is slow (the
            # step was shortened, or the decrement fell by less than the factor _SLOW), and
            # where the updated matrix says "converged": the exact one decides (convergence
            # is only declared on it, and the standard errors are its). The Hessian only at
            # an accepted point (a rejected step only shortens t)
            B = _bfgs(s["H"], cand - s["phi"], gn - s["g"])
            decb = direction(gn, B)[1]
            slow = (s["t"] < 1.0) | (decb > _SLOW * s["dec"])
            fresh = ok & ((first & ~carried) | force | slow | (decb < tol))
            Hn = lax.cond(fresh, lambda: _sym(hessian_rows(hvp)), lambda: B)
        else:
            # the exact Hessian at every candidate: a smaller program (it compiles faster;
            # a rejected step is rare, and under vmap a cond would run both sides anyway)
            fresh = ok
            Hn = _sym(hessian_rows(hvp))
        ok = ok & jnp.all(jnp.isfinite(gn)) & jnp.all(jnp.isfinite(Hn))
        dn, decn = direction(gn, Hn)
        pick = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
        it = s["it"] + (ok & ~force).astype(s["it"].dtype)
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
        conv = jnp.where(force, s["conv"] | small,
                         small | (stuck & (dec < jnp.maximum(tol, noise))))
        stop = small | stuck | out_of_steps | ~jnp.isfinite(dec)
        closing = stop & ~now_fresh & ~force
        return dict(phi=pick(cand, s["phi"]), u=pick(un, s["u"]), D=pick(Dn, s["D"]),
                    g=pick(gn, s["g"]), H=pick(Hn, s["H"]), d=pick(dn, s["d"]), dec=dec,
                    t=jnp.where(closing, jnp.zeros((), dtype), t), it=it,
                    done=force | (stop & ~closing), force=closing, conv=conv,
                    fresh=now_fresh)

    init = dict(phi=phi0, u=jnp.zeros(pr.q_tot, dtype), D=jnp.asarray(jnp.inf, dtype),
                g=jnp.zeros(mm, dtype), H=H0, d=jnp.zeros(mm, dtype),
                dec=jnp.asarray(jnp.inf, dtype), t=jnp.ones((), dtype),
                it=jnp.zeros((), jnp.int32), done=jnp.asarray(False), force=jnp.asarray(False),
                conv=jnp.asarray(False), fresh=jnp.asarray(False))
    s = lax.while_loop(cond, body, init)
    phi, u, D, H = s["phi"], s["u"], s["D"], s["H"]
    (theta, sign_u), beta = _canonical(pr, phi[:m], u), phi[m:]
    # the Hessian in the canonical representative: theta elements of a negated column
    # change sign, so H changes by a diagonal +-1 similarity (beta block unchanged)
    flip = jnp.concatenate([jnp.where(jnp.sign(theta) * jnp.sign(phi[:m]) < 0, -1.0, 1.0)
                            .astype(dtype), jnp.ones(pr.p, dtype)])
    H = H * flip[:, None] * flip[None, :]
    u = sign_u
    ccov, b_var = pr.conditional(u, theta, beta)
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
    out = LmeArrays(
        theta=theta, beta=beta, se=se_, cov=cov, cov_method=method.astype(jnp.int32),
        deviance=D, loglik=-0.5 * D + log_binomial_coefficients(y, n), u=pr.to_user(u), b=b,
        b_var=b_var, grad_norm=jnp.max(jnp.abs(s["g"])),
        hess_min_eig=lam[0], converged=s["conv"] & finite,
        iterations=jnp.maximum(s["it"] - 1, 0))
    if hess0 is not None:
        return out, H
    return out


#: Static arguments of the compiled fits.
_STATIC = ("shapes", "max_iter", "tol", "inner_tol", "max_inner", "se", "blocked", "crossed")


@partial(jax.jit, static_argnames=_STATIC + ("batch_trials",))
def _fit_batch(X, y, n, offset, Zs, gs, shapes, max_iter, tol, inner_tol, max_inner, se,
               batch_trials, blocked, crossed):
    f = partial(_fit_one, shapes=shapes, max_iter=max_iter, tol=tol, inner_tol=inner_tol,
                max_inner=max_inner, se=se, blocked=blocked, crossed=crossed)
    return jax.vmap(lambda yy, nn: f(X, yy, nn, offset, Zs, gs),
                    in_axes=(0, 0 if batch_trials else None))(y, n)


@partial(jax.jit, static_argnames=_STATIC + ("batch_trials",))
def _fit_map(X, y, n, offset, Zs, gs, shapes, max_iter, tol, inner_tol, max_inner, se,
             batch_trials, blocked, crossed, theta0=None, beta0=None):
    f = partial(_fit_one, shapes=shapes, max_iter=max_iter, tol=tol, inner_tol=inner_tol,
                max_inner=max_inner, se=se, theta0=theta0, beta0=beta0, blocked=blocked,
                crossed=crossed, reuse=True)
    mm = X.shape[1] + sum(s.n_theta for s in shapes)

    def step(carry, a):
        # each refit starts from the Hessian of the last refit that converged before it
        res, H = f(X, a[0], a[1] if batch_trials else n, offset, Zs, gs, hess0=carry)
        good = res.converged & jnp.all(jnp.isfinite(H))
        return (jnp.where(good, H, carry[0]), carry[1] | good), res

    start = (jnp.eye(mm, dtype=X.dtype), jnp.asarray(False))
    return lax.scan(step, start, (y, n) if batch_trials else (y, y))[1]


#: One data set, no batch axis: one compiled program, without the batching of
#: :func:`_fit_batch` (whose tracing costs about as much again, and under which every
#: ``lax.cond`` of the loop runs both of its sides).
_fit_single = jax.jit(_fit_one, static_argnames=_STATIC)

#: Folder, inside JAX's persistent compilation cache, of the exported single-fit programs.
_EXPORTED = "tomstats-laplace"


@functools.cache
def _source_hash() -> bytes:
    """SHA-256 of the solver's source: this module, :mod:`tomstats.glmm.glm` and
    :mod:`tomstats.glmm._theta`."""
    import hashlib
    import sys

    from tomstats.glmm import _theta, glm

    h = hashlib.sha256()
    for mod in (sys.modules[__name__], glm, _theta):
        h.update(Path(mod.__file__).read_bytes())
    return h.digest()


#: The exported programs this process has read or written, by :func:`_program_key`.
_LOADED: dict[str, Any] = {}


def _program_key(args: tuple[np.ndarray, ...], static: dict[str, Any]) -> str:
    """What an exported program depends on: the solver's source (this module,
    :mod:`tomstats.glmm.glm`, :mod:`tomstats.glmm._theta`), JAX's version and backend, the
    static arguments and the shapes and dtypes of the data."""
    import hashlib

    import jaxlib

    h = hashlib.sha256(_source_hash())
    h.update(repr((jax.__version__, jaxlib.__version__, jax.default_backend(),
                   sorted(static.items()), [(a.shape, str(a.dtype)) for a in args])).encode())
    return h.hexdigest()[:32]


def _fit_stored(X: np.ndarray, y: np.ndarray, n: np.ndarray, offset: np.ndarray,
                Zs: tuple[np.ndarray, ...], gs: tuple[np.ndarray, ...], **static: Any
                ) -> LmeArrays:
    """:func:`_fit_single` of host arrays, its traced and lowered program kept on disk for
    the next process.

    When JAX's persistent compilation cache is on (:mod:`tomstats._compile_cache`), the
    program is exported (:func:`jax.export.export`, StableHLO) into the cache folder under a
    key of everything it depends on (:func:`_program_key`). A new process that finds it skips
    tracing and lowering and compiles it from the persistent cache. A file that cannot be
    read or run is exported again and replaced; without the cache nothing is written.
    """
    cache = jax.config.jax_compilation_cache_dir
    if not cache:
        return _fit_single(X, y, n, offset, Zs, gs, **static)
    K = len(Zs)
    args = (X, y, n, offset, *Zs, *gs)
    key = _program_key(args, static)
    if key in _LOADED:  # read before in this process (refits of one design: profiles)
        return LmeArrays(*_LOADED[key](*args))
    path = Path(cache) / _EXPORTED / f"fit-{key}.jaxexport"
    if path.is_file():
        try:
            call = jax.export.deserialize(bytearray(path.read_bytes())).call
            res = LmeArrays(*call(*args))
            _LOADED[key] = call
            return res
        except Exception:  # noqa: BLE001 - a damaged or foreign file: export it again
            pass

    def fit_program(*a: Array) -> tuple[Array, ...]:
        r = _fit_one(a[0], a[1], a[2], a[3], a[4: 4 + K], a[4 + K:], **static)
        return tuple(getattr(r, f.name) for f in dataclasses.fields(r))

    exported = jax.export.export(jax.jit(fit_program))(*args)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, bytes(exported.serialize()))
    except OSError:
        pass  # a read-only cache folder: the fit still runs
    _LOADED[key] = exported.call
    return LmeArrays(*_LOADED[key](*args))


def _unpad(res: LmeArrays, fitted: tuple[TermShape, ...], shapes: tuple[TermShape, ...]
           ) -> LmeArrays:
    """The results of a fit with padded levels for the terms' own levels (on the host: a
    slice in the program would make its shape depend on the exact level counts)."""
    if fitted == shapes:
        return res
    res = jax.tree_util.tree_map(np.asarray, res)
    cuts = {"u": lambda s: s.d, "b": lambda s: s.d, "b_var": lambda s: s.d * s.d}
    out = {}
    for name, per_level in cuts.items():
        a, o, parts = getattr(res, name), 0, []
        for f, s in zip(fitted, shapes, strict=True):
            parts.append(a[..., o: o + s.q * per_level(s)])
            o += f.q * per_level(f)
        out[name] = np.concatenate(parts, axis=-1)
    return dataclasses.replace(res, **out)


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
    # concrete codes on the host (the row layout is planned from them)
    gs = tuple(jnp.asarray(g, jnp.int32) if isinstance(g, jax.core.Tracer)
               else np.asarray(g, np.int32) for g in gs)
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
    sequential: bool = False, start: tuple[Any, Any] | None = None, bucket: bool = False,
) -> LmeArrays:
    """Maximum Laplace-likelihood fit (module docstring) on numeric arrays.

    One data set (``y`` and ``trials`` without batch axes) is fitted by one compiled program
    without a batch axis; given as host (NumPy) arrays, its traced program is kept in JAX's
    persistent compilation cache when that is on (:func:`_fit_stored`). With concrete level
    codes the rows are laid out as :func:`_plan` says (the results do not depend on it).

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
        Fit the replicates one after another inside one compiled program (``lax.scan``)
        instead of side by side (``vmap``): each fit stops at its own convergence, and
        XLA's CPU runtime has been seen to stall on large vmapped batches of these
        data-dependent loops (many refits of a simulation use this). Quasi-Newton steps
        between exact Hessians, each fit starting from the exact Hessian of the last
        converged fit before it (module docstring): the same replicates in the same order
        give the same results.
    start : (theta, beta), optional
        Starting values of the outer Newton iterations (``sequential`` only), e.g. the
        parameters a simulation drew from; default: lme4's :math:`\\theta` start and the
        fixed effects of the GLM without random effects.
    bucket : bool
        Pad the levels of every term and the rows to the sizes of :func:`bucket_size`
        (levels without rows, rows of no trials: the estimates are unchanged; needs concrete
        level codes), so that designs of similar size share one compiled program.

    Returns
    -------
    LmeArrays
        Padded levels (``bucket``) left out: ``u``, ``b`` and ``b_var`` have the terms' own
        sizes (as NumPy arrays, then).
    """
    if se not in ("hessian", "conditional"):
        raise ValueError(f"se must be 'hessian' or 'conditional', got {se!r}")
    X, y, n, off, Zs, gs, shapes, dtype = _arrays(X, y, trials, offset, Zs, gs, shapes)
    if start is not None and not sequential:
        raise ValueError("lme_fit_arrays: start is taken with sequential=True only")
    f64 = dtype == jnp.float64
    static = dict(max_iter=int(max_iter), tol=float((1e-10 if f64 else 1e-4) if tol is None
                                                     else tol),
                  inner_tol=1e-12 if f64 else 1e-6, max_inner=int(max_inner), se=se)
    concrete_codes = all(isinstance(g, np.ndarray) for g in gs)
    if bucket and not concrete_codes:
        raise ValueError("lme_fit_arrays: bucket=True needs concrete level codes gs")
    fitted, blocked, crossed = shapes, False, -1
    if concrete_codes:
        lay = _plan(gs, shapes, bucket)
        fitted, blocked, crossed = lay.shapes, lay.blocked, lay.crossed
        if not lay.identity:
            X, off = _place(lay, X), _place(lay, off)
            Zs = tuple(_place(lay, z) for z in Zs)
            y, n = _place(lay, y, -1), _place(lay, n, -1)
        gs = lay.gs
    static.update(shapes=fitted, blocked=blocked, crossed=crossed)
    if y.ndim == 1 and n.ndim == 1 and not sequential:
        if all(isinstance(a, np.ndarray) for a in (X, y, n, off, *Zs)):
            res = _fit_stored(X, y, n, off, Zs, gs, **static)
        else:
            res = _fit_single(X, y, n, off, Zs, gs, **static)
        return _unpad(res, fitted, shapes)
    batch = y.shape[:-1]
    yb = y.reshape((-1, y.shape[-1]))
    batch_trials = n.ndim > 1
    if batch_trials:
        n = (jnp if isinstance(n, jax.Array) else np).broadcast_to(n, y.shape).reshape(yb.shape)
    if sequential:
        th0, be0 = (None, None) if start is None else (jnp.asarray(v, dtype) for v in start)
        res = _fit_map(X, yb, n, off, Zs, gs, batch_trials=batch_trials, theta0=th0,
                       beta0=be0, **static)
    else:
        res = _fit_batch(X, yb, n, off, Zs, gs, batch_trials=batch_trials, **static)
    res = _unpad(res, fitted, shapes)
    if batch == yb.shape[:1]:
        return res
    return jax.tree_util.tree_map(lambda a: a.reshape(batch + a.shape[1:]), res)


@partial(jax.jit, static_argnames=("shapes",))
def _deviance(X, y, n, offset, Zs, gs, shapes, theta, beta):
    pr = _Problem(X, y, n, offset, Zs, gs, shapes)
    tol = jnp.asarray(1e-12 if X.dtype == jnp.float64 else 1e-6, X.dtype)
    u = pr.pirls(jnp.zeros(pr.q_tot, X.dtype), theta, beta, tol, 100)
    return pr.laplace(u, pr.factors(theta), beta)


def lme_deviance(X: Any, y: Any, trials: Any, Zs: tuple[Any, ...], gs: tuple[Any, ...],
                 shapes: tuple[TermShape, ...], theta: Any, beta: Any, *,
                 offset: Any = None) -> Array:
    """Laplace deviance :math:`D(\\theta, \\beta)` (no binomial coefficients) at given
    parameters, the conditional mode found afresh: lme4's ``devfun`` of the second stage."""
    X, y, n, off, Zs, gs, shapes, dtype = _arrays(X, y, trials, offset, Zs, gs, shapes)
    return _deviance(X, y, n, off, Zs, gs, shapes, jnp.asarray(theta, dtype),
                     jnp.asarray(beta, dtype))
