r"""The interpreted Laplace fit: NumPy and SciPy, no JAX, nothing to compile.

It maximises the same Laplace likelihood as :mod:`tomstats.glmm.lme_fit` (lme4's ``glmer``,
nAGQ = 1; the model, :math:`\theta`, :math:`T_k`, :math:`\Lambda` and the deviance

.. math::

    D(\theta, \beta) = -2\sum_i \log \operatorname{Binom}(y_i; n_i, p_i(\hat u))
        + \lVert\hat u\rVert^2 + \log\det A,\qquad A = M^\top W M + I,\quad M = Z\Lambda,

are defined there), and returns the same fields (:class:`NumpyLme`), so that
:func:`tomstats.glmm.lme.fit_lme` makes the same :class:`~tomstats.glmm.lme_result.LaplaceFit`
of either. A single fit in a new process runs here by default
(:data:`tomstats.glmm.lme.ENGINES`): it pays no JAX import and no XLA compilation, which cost
more than the whole fit of a log of a few thousand rows.

**Sparse rows.** Row :math:`i` of :math:`Z` has :math:`R = \sum_k d_k` non-zeros, at the
columns of its levels (level-major, terms in the formula's order: the layout of lme_fit's
``u`` and ``b``). They are kept as two (n, R) arrays (columns and values, :class:`_Rows`);
the values of :math:`M` are :math:`Z_k T_k` per term. Then :math:`M^\top v` is a
``bincount``, :math:`Mu` a gather, and :math:`A` a ``bincount`` of the :math:`R^2` products
:math:`w_i m_{ia} m_{ib}` of each row into a dense :math:`q\times q` array (:math:`q = \sum_k
q_k d_k`), factored by a dense Cholesky (``scipy.linalg.cho_factor``; a few hundred effects
here).

**Conditional modes** by penalised IRLS (Newton on :math:`\lVert\cdot\rVert^2`-penalised
deviance with step halving, to a decrement :math:`r^\top A^{-1} r \le 10^{-12}`), started
from the previous evaluation's mode.

**Exact gradient** at the mode (:meth:`_Laplace.value_grad`). With :math:`r_i = y_i -
n_ip_i`, :math:`w_i = n_ip_i(1-p_i)`, :math:`w'_i = w_i(1-2p_i)`, the leverages
:math:`h_i = m_i^\top A^{-1} m_i`, :math:`v = A^{-1}M^\top(w'\circ h)` (the mode's response
enters through :math:`d\hat u/d\phi = A^{-1}\partial_\phi(M^\top r - u)`) and :math:`s = Mv`:

.. math::

    \partial_\beta D = X^\top(-2r + w'\circ h - w\circ s),\qquad
    \partial_{\theta_j} D = \sum_i\big[(-2r_i + w'_ih_i - w_is_i)(N_j\hat u)_i
        + r_i (N_jv)_i\big] + 2\sum_i w_i\,n_{ij}^\top A^{-1}m_i,

where :math:`N_j = Z\,\partial\Lambda/\partial\theta_j` (one non-zero per row:
:math:`T_k`'s element :math:`(a, c)` takes :math:`z_{ika}` to the column of effect
:math:`c`).

**Outer fit** (lme4's second stage): L-BFGS-B over :math:`(\theta, \beta)` from lme4's
:math:`\theta` start (:func:`tomstats.glmm._theta.theta_start`) and the GLM's
:math:`\beta`, with lme4's bounds (the diagonal of every :math:`T_k` at least 0, so the
result is lme4's representative); then the Hessian :math:`H` by central differences of the
exact gradient (step :math:`10^{-4}`) and Newton steps with it (bound coordinates held)
until the decrement :math:`g^\top H^{-1}g` is below ``tol`` (default :math:`10^{-10}`),
which puts the optimum where lme_fit's Newton iterations put it. Standard errors as
lme_fit's: :math:`2H^{-1}` over :math:`\beta` where :math:`H` is positive definite, else the
conditional covariance :math:`(X^\top WX - X^\top WMA^{-1}M^\top WX)^{-1}`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, gammaln

from tomstats.glmm._theta import TermShape, theta_onehot, theta_start

__all__ = ["NumpyLme", "numpy_lme_fit", "numpy_logistic_fit", "log_binom"]

#: PIRLS stops at this decrement :math:`r^\top A^{-1}r` (lme_fit's float64 inner tolerance).
_INNER_TOL = 1e-12
#: Central-difference step of the Hessian (of the exact gradient).
_FD_STEP = 1e-4
#: Newton steps with the finite-difference Hessian after the quasi-Newton stage.
_POLISH = 8
#: The quasi-Newton stage stops at this estimated decrement: close enough to the optimum
#: that the Hessian there is the optimum's to about 1e-7 (at 1e-4 the standard errors
#: moved by 1e-4, relative).
_BFGS_DEC = 1e-10
#: Up to this many random effects the BLAS runs on one thread: a factorisation of a few
#: hundred columns gains nothing from more, and on a busy machine its threads spin (on two
#: shared cores the fit of the start-up benchmark's slopes design took 7x longer).
_ONE_THREAD_EFFECTS = 2000


def _blas_threads(q: int) -> contextlib.AbstractContextManager[Any]:
    """One BLAS thread for a small system (:data:`_ONE_THREAD_EFFECTS`), where threadpoolctl
    is installed."""
    if q > _ONE_THREAD_EFFECTS:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; only slower without it
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def log_binom(y: np.ndarray, n: np.ndarray) -> float:
    """:math:`\\sum_i\\log\\binom{n_i}{y_i}` (the binomial coefficients of the
    log-likelihood), on the host."""
    y = np.asarray(y, float)
    n = np.asarray(n, float)
    return float(np.sum(gammaln(n + 1.0) - gammaln(y + 1.0) - gammaln(n - y + 1.0)))


@dataclass(frozen=True)
class NumpyLme:
    """The fields of :class:`tomstats.glmm.lme_fit.LmeArrays` that a fit's result reads,
    computed without JAX (their meaning is documented there)."""

    theta: np.ndarray
    beta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    cov_method: int
    deviance: float
    loglik: float
    u: np.ndarray
    b: np.ndarray
    b_var: np.ndarray
    grad_norm: float
    hess_min_eig: float
    converged: bool
    iterations: int


@dataclass(frozen=True)
class _Rows:
    """:math:`Z` row by row: each row's columns (level-major, terms in order) and values.

    Attributes
    ----------
    cols : ndarray of int, shape (n, R)
    z : ndarray, shape (n, R)
    pairs : ndarray of int, shape (n * R * R,)
        Flat index into a (q, q) array of every pair of a row's columns.
    q : int
    spans : tuple of (int, int)
        Each term's positions in the R columns of a row.
    rr, cc : ndarray of int, shape (m,)
        For each :math:`\\theta` element (row ``a``, column ``c`` of its :math:`T_k`): the
        positions in R of effect ``a`` and of effect ``c`` of its term.
    """

    cols: np.ndarray
    z: np.ndarray
    pairs: np.ndarray
    q: int
    spans: tuple[tuple[int, int], ...]
    rr: np.ndarray
    cc: np.ndarray


def _rows(Zs: tuple[np.ndarray, ...], gs: tuple[np.ndarray, ...],
          shapes: tuple[TermShape, ...]) -> _Rows:
    cols, spans, rr, cc = [], [], [], []
    q = r = 0
    for g, s in zip(gs, shapes, strict=True):
        cols.append(q + np.asarray(g, np.int64)[:, None] * s.d + np.arange(s.d)[None, :])
        spans.append((r, r + s.d))
        for a, c in s.theta_index():
            rr.append(r + a)
            cc.append(r + c)
        q += s.q * s.d
        r += s.d
    C = np.concatenate(cols, axis=1)
    pairs = (C[:, :, None] * q + C[:, None, :]).reshape(-1)
    return _Rows(cols=C, z=np.concatenate([np.asarray(Z, float) for Z in Zs], axis=1),
                 pairs=pairs, q=q, spans=tuple(spans), rr=np.asarray(rr, np.int64),
                 cc=np.asarray(cc, np.int64))


@dataclass
class _Mode:
    """The conditional mode at one :math:`(\\theta, \\beta)` and what the deviance and its
    gradient need there."""

    theta: np.ndarray
    beta: np.ndarray
    u: np.ndarray
    mv: np.ndarray       # values of M = Z Lambda, (n, R)
    p: np.ndarray
    w: np.ndarray
    res: np.ndarray
    chol: Any
    dev: float           # -2 log-likelihood without the binomial coefficients
    logdet: float

    @property
    def laplace(self) -> float:
        return self.dev + float(self.u @ self.u) + self.logdet


class _Laplace:
    """One fit's data (:math:`X`, :math:`y`, :math:`n`, offset, :class:`_Rows`)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, n: np.ndarray, offset: np.ndarray,
                 rows: _Rows, shapes: tuple[TermShape, ...]) -> None:
        self.X, self.y, self.n, self.offset, self.rows = X, y, n, offset, rows
        self.shapes = shapes
        self.m = sum(s.n_theta for s in shapes)
        self.p = X.shape[1]
        self.onehot = [theta_onehot(s.d, s.correlated) for s in shapes]
        self.u = np.zeros(rows.q)   # the start of the next evaluation without ``last``
        self.last: _Mode | None = None  # the last mode: the next evaluation predicts from it
        self.evaluations = 0
        self.max_inner = 50

    # ------------------------------------------------------------------ pieces
    def factors(self, theta: np.ndarray) -> list[np.ndarray]:
        out, t = [], 0
        for s, E in zip(self.shapes, self.onehot, strict=True):
            out.append(np.tensordot(theta[t: t + s.n_theta], E, axes=1))
            t += s.n_theta
        return out

    def mvalues(self, theta: np.ndarray) -> np.ndarray:
        """Values of :math:`M = Z\\Lambda` at the rows' columns: :math:`Z_kT_k` per term."""
        rw = self.rows
        mv = np.empty_like(rw.z)
        for (a, b), T in zip(rw.spans, self.factors(theta), strict=True):
            mv[:, a:b] = rw.z[:, a:b] @ T
        return mv

    def mt(self, mv: np.ndarray, v: np.ndarray) -> np.ndarray:
        """:math:`M^\\top v`."""
        return np.bincount(self.rows.cols.ravel(), weights=(mv * v[:, None]).ravel(),
                           minlength=self.rows.q)

    def system(self, mv: np.ndarray, w: np.ndarray) -> Any:
        """Cholesky factor of :math:`A = M^\\top WM + I`."""
        q = self.rows.q
        prod = (w[:, None, None] * mv[:, :, None] * mv[:, None, :]).ravel()
        A = np.bincount(self.rows.pairs, weights=prod, minlength=q * q).reshape(q, q)
        A[np.diag_indices(q)] += 1.0
        return cho_factor(A, lower=True, check_finite=False)

    def dev(self, eta: np.ndarray) -> float:
        # y log p + (n - y) log(1 - p) = n log p - (n - y) eta
        return -2.0 * float(np.sum(-self.n * np.logaddexp(0.0, -eta) - (self.n - self.y) * eta))

    def predict(self, last: _Mode, theta: np.ndarray, beta: np.ndarray) -> np.ndarray:
        r"""The mode at ``(theta, beta)`` to first order from the ``last`` one:
        :math:`\hat u + A^{-1}(\partial_\phi g)\,\Delta\phi` with :math:`g = M^\top r - u`
        (so :math:`\partial_\phi g\,\Delta\phi = M_\Delta^\top r - M^\top W(X\Delta\beta
        + M_\Delta\hat u)`, :math:`M_\Delta = Z\Lambda(\Delta\theta)`, :math:`\Lambda` being
        linear in :math:`\theta`)."""
        m_d = self.mvalues(theta - last.theta)
        d_eta = self.X @ (beta - last.beta) + np.sum(m_d * last.u[self.rows.cols], axis=1)
        rhs = self.mt(m_d, last.res) - self.mt(last.mv, last.w * d_eta)
        return last.u + cho_solve(last.chol, rhs, check_finite=False)

    def mode(self, theta: np.ndarray, beta: np.ndarray, max_iter: int = 50) -> _Mode:
        """Penalised IRLS from the prediction of the last mode (:meth:`predict`) or from
        ``self.u``, whichever has the smaller penalised deviance; the state at the mode."""
        mv = self.mvalues(theta)
        fixed = self.offset + self.X @ beta
        cols = self.rows.cols

        def eta_of(v: np.ndarray) -> np.ndarray:
            return fixed + np.sum(mv * v[cols], axis=1)

        eps = np.finfo(float).eps
        u = self.u if self.last is None else self.last.u
        eta = eta_of(u)
        pd = self.dev(eta) + u @ u
        if self.last is not None:
            u_p = self.predict(self.last, theta, beta)
            eta_p = eta_of(u_p)
            pd_p = self.dev(eta_p) + u_p @ u_p
            if pd_p < pd:
                u, eta, pd = u_p, eta_p, pd_p
        for _ in range(max_iter):
            p = expit(eta)
            w, res = self.n * p * (1.0 - p), self.y - self.n * p
            r = self.mt(mv, res) - u
            x = cho_solve(self.system(mv, w), r, check_finite=False)
            dec = float(r @ x)
            if not np.isfinite(dec):
                break
            slack = 10 * eps * (abs(pd) + 1.0)
            t = 1.0
            for _ in range(13):
                eta_new = eta_of(u + t * x)
                pd_new = self.dev(eta_new) + (u + t * x) @ (u + t * x)
                if pd_new <= pd + slack or dec < 1e-8:
                    break
                t *= 0.5
            else:
                break
            if not np.isfinite(pd_new):
                break
            u, eta, pd = u + t * x, eta_new, pd_new
            if dec <= _INNER_TOL:
                break
        p = expit(eta)
        w = self.n * p * (1.0 - p)
        chol = self.system(mv, w)
        logdet = 2.0 * float(np.sum(np.log(np.diagonal(chol[0]))))
        self.evaluations += 1
        md = _Mode(theta=theta, beta=beta, u=u, mv=mv, p=p, w=w, res=self.y - self.n * p,
                   chol=chol, dev=self.dev(eta), logdet=logdet)
        if np.isfinite(md.laplace):
            self.last = md
        return md

    def inverse(self, md: _Mode) -> np.ndarray:
        return cho_solve(md.chol, np.eye(self.rows.q), check_finite=False)

    def value_grad(self, phi: np.ndarray) -> tuple[float, np.ndarray]:
        """:math:`D` and its exact gradient at ``phi`` (module docstring)."""
        theta, beta = phi[: self.m], phi[self.m:]
        md = self.mode(theta, beta, self.max_inner)
        D = md.laplace
        if not np.isfinite(D):
            return np.inf, np.zeros_like(phi)
        rw = self.rows
        Ainv = self.inverse(md)
        R = rw.cols.shape[1]
        Ag = Ainv.ravel()[rw.pairs].reshape(-1, R, R)     # A^-1 at each row's pairs
        Am = np.einsum("iab,ib->ia", Ag, md.mv)           # (A^-1 m_i) at the row's columns
        h = np.sum(md.mv * Am, axis=1)
        wd = md.w * (1.0 - 2.0 * md.p)
        v = cho_solve(md.chol, self.mt(md.mv, wd * h), check_finite=False)
        s = np.sum(md.mv * v[rw.cols], axis=1)
        coef = -2.0 * md.res + wd * h - md.w * s
        g_beta = self.X.T @ coef
        zr = rw.z[:, rw.rr]
        col_c = rw.cols[:, rw.cc]
        g_theta = (coef @ (zr * md.u[col_c]) + md.res @ (zr * v[col_c])
                   + 2.0 * md.w @ (zr * Am[:, rw.cc]))
        return D, np.concatenate([g_theta, g_beta])

    def conditional(self, md: _Mode, Ainv: np.ndarray, theta: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """At the mode: lme4's RX covariance of :math:`\\beta`,
        :math:`(X^\\top WX - X^\\top WMA^{-1}M^\\top WX)^{-1}`, and the conditional
        covariances :math:`T_k[A^{-1}]_{ka}T_k^\\top` of every level (row-major, flattened)."""
        wx = md.w[:, None] * self.X
        F = np.stack([self.mt(md.mv, wx[:, j]) for j in range(self.p)], axis=1)
        M = self.X.T @ wx - F.T @ (Ainv @ F)
        parts, o = [], 0
        for s, T in zip(self.shapes, self.factors(theta), strict=True):
            idx = o + np.arange(s.q)[:, None] * s.d + np.arange(s.d)[None, :]
            blk = Ainv[idx[:, :, None], idx[:, None, :]]
            parts.append(np.einsum("ij,ajk,lk->ail", T, blk, T).reshape(-1))
            o += s.q * s.d
        return np.linalg.inv(0.5 * (M + M.T)), np.concatenate(parts)


def _signs(theta: np.ndarray, shapes: tuple[TermShape, ...]
           ) -> tuple[np.ndarray, list[np.ndarray]]:
    """lme4's representative: the sign of each :math:`\\theta` element and of each term's
    effects that negates every column of :math:`T_k` with a negative diagonal element (the
    same :math:`\\Sigma_k`, the same deviance)."""
    per_theta, per_effect, t = [], [], 0
    for s in shapes:
        diag = np.ones(s.d)
        for k, (i, j) in enumerate(s.theta_index()):
            if i == j and theta[t + k] < 0:
                diag[j] = -1.0
        per_theta += [diag[j] for _, j in s.theta_index()]
        per_effect.append(diag)
        t += s.n_theta
    return np.asarray(per_theta), per_effect


def _bfgs(fg: Any, x: np.ndarray, max_iter: int
          ) -> tuple[np.ndarray, float, np.ndarray, int]:
    """BFGS (inverse-Hessian update, backtracking line search with the sufficient-decrease
    condition) on ``fg(x) -> (value, gradient)``, until its estimate of the decrement
    :math:`g^\top B g` falls below :data:`_BFGS_DEC` (the Newton steps of
    :func:`_polish` take it from there). Returns the point, value, gradient, iterations."""
    f, g = fg(x)
    B = np.eye(x.size)
    it = 0
    for it in range(1, max_iter + 1):
        d = -B @ g
        slope = float(g @ d)
        if not slope < 0:
            B = np.eye(x.size)
            d, slope = -g, -float(g @ g)
        if -slope < _BFGS_DEC:
            break
        t = 1.0
        noise = 1e3 * np.finfo(float).eps * (abs(f) + 1.0)
        while True:
            fn, gn = fg(x + t * d)
            # near the optimum (a tiny slope) a change of f is below its rounding error:
            # the full step is taken where f did not grow beyond that
            if fn <= f + 1e-4 * t * slope or (-slope < 1e-6 and fn <= f + noise):
                break
            curv = fn - f - slope * t
            t_quad = -slope * t * t / (2.0 * curv) if np.isfinite(fn) and curv > 0 else 0.5 * t
            t = min(max(t_quad, 0.1 * t), 0.5 * t)
            if t < 1e-12:
                return x, f, g, it
        s, yv = t * d, gn - g
        sy = float(s @ yv)
        if sy > 1e-12 * float(np.sqrt((s @ s) * (yv @ yv))):
            if it == 1:  # scale the first guess by the curvature seen
                B = B * (sy / float(yv @ yv))
            By = B @ yv
            B = B + ((sy + yv @ By) / sy**2) * np.outer(s, s) - (np.outer(By, s)
                                                                 + np.outer(s, By)) / sy
        x, f, g = x + s, fn, gn
    return x, f, g, it


def _starts(shapes: tuple[TermShape, ...]) -> list[int]:
    """Each term's first position in :math:`u` (terms in order, level-major)."""
    return [int(o) for o in np.cumsum([0] + [s.q * s.d for s in shapes])[:-1]]


def _hessian(f: _Laplace, phi: np.ndarray) -> np.ndarray:
    """Central differences of the exact gradient, symmetrised."""
    k = phi.size
    H = np.empty((k, k))
    last = f.last
    for j in range(k):
        e = np.zeros(k)
        e[j] = _FD_STEP
        f.last = last
        gp = f.value_grad(phi + e)[1]
        f.last = last
        gm = f.value_grad(phi - e)[1]
        H[:, j] = (gp - gm) / (2.0 * _FD_STEP)
    f.last = last
    return 0.5 * (H + H.T)


def _polish(f: _Laplace, phi: np.ndarray, D: float, g: np.ndarray, H: np.ndarray,
            tol: float) -> tuple[np.ndarray, float, np.ndarray, float, int]:
    """Newton steps with the Hessian ``H`` (its eigenvalues made positive) until the
    decrement :math:`g^\\top H^{-1}g` is below ``tol``, and one step more from there (as
    the last step of Newton's method overshoots its tolerance: a decrement of 1e-10 still
    leaves 1e-6 in a poorly determined coefficient); returns the point, :math:`D`, the
    gradient, the decrement before the last step and the steps taken."""
    eps = np.finfo(float).eps
    dec, steps = np.inf, 0
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(np.abs(lam), 1e-8 * np.max(np.abs(lam)) + 1e3 * eps)
    for _ in range(_POLISH):
        d = -V @ ((V.T @ g) / lam)
        dec_here = float(-(g @ d))
        if dec_here < tol * 1e-6:  # nothing left to gain
            dec = dec_here
            break
        new = phi + d
        Dn, gn = f.value_grad(new)
        if not Dn <= D + 1e3 * eps * (abs(D) + 1.0):
            dec = min(dec, dec_here)
            break
        phi, D, g, steps, dec = new, Dn, gn, steps + 1, dec_here
        if dec < tol:
            break
    return phi, D, g, dec, steps


def numpy_lme_fit(X: np.ndarray, y: np.ndarray, trials: np.ndarray | None,
                  Zs: tuple[np.ndarray, ...], gs: tuple[np.ndarray, ...],
                  shapes: tuple[TermShape, ...], *, offset: np.ndarray | None = None,
                  max_iter: int = 100, tol: float | None = None, se: str = "hessian",
                  max_inner: int = 50) -> NumpyLme:
    """Maximum Laplace-likelihood fit (module docstring) of host arrays, the arguments as
    :func:`tomstats.glmm.lme_fit.lme_fit_arrays`' for one data set.

    Parameters
    ----------
    X : ndarray, shape (n, p)
    y, trials : ndarray, shape (n,)
        Successes and trials (``None``: Bernoulli).
    Zs, gs, shapes
        Each random term's columns, 0-based level codes and shape.
    offset : ndarray, shape (n,), optional
    max_iter : int
        The quasi-Newton stage takes up to ``10 * max_iter`` iterations (each cheaper than
        a Newton iteration of :mod:`~tomstats.glmm.lme_fit`).
    tol : float, optional
        Decrement :math:`g^\\top H^{-1}g` of a converged fit (default 1e-10).
    se : {"hessian", "conditional"}
    max_inner : int
        PIRLS iterations per evaluation.

    Returns
    -------
    NumpyLme
    """
    rows = _rows(Zs, gs, shapes)
    with _blas_threads(rows.q):
        return _fit(X, y, trials, rows, shapes, offset=offset, max_iter=max_iter, tol=tol,
                    se=se, max_inner=max_inner)


def _fit(X: np.ndarray, y: np.ndarray, trials: np.ndarray | None, rows: _Rows,
         shapes: tuple[TermShape, ...], *, offset: np.ndarray | None, max_iter: int,
         tol: float | None, se: str, max_inner: int) -> NumpyLme:
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    n = np.ones_like(y) if trials is None else np.asarray(trials, float)
    off = np.zeros_like(y) if offset is None else np.asarray(offset, float)
    tol = 1e-10 if tol is None else float(tol)
    f = _Laplace(X, y, n, off, rows, shapes)
    f.max_inner = int(max_inner)
    m = f.m
    phi0 = np.concatenate([theta_start(shapes), numpy_logistic_fit(X, y, n, off).beta])
    phi, D, g, nit = _bfgs(f.value_grad, phi0, 10 * int(max_iter))
    H = _hessian(f, phi)
    phi, D, g, dec, steps = _polish(f, phi, D, g, H, tol)
    # lme4's representative (diagonals >= 0): theta, u, the gradient and H change sign
    # together (a +-1 similarity of H)
    flip, effect_signs = _signs(phi[:m], shapes)
    flip = np.concatenate([flip, np.ones(f.p)])
    phi, g, H = phi * flip, g * flip, H * flip[:, None] * flip[None, :]
    theta, beta = phi[:m], phi[m:]
    u_end = f.u if f.last is None else f.last.u
    f.last = None
    f.u = np.concatenate([(u_end[o: o + s.q * s.d].reshape(s.q, s.d) * sg).reshape(-1)
                          for s, sg, o in zip(shapes, effect_signs, _starts(shapes),
                                              strict=True)])
    md = f.mode(theta, beta, max_inner)
    Ainv = f.inverse(md)
    ccov, b_var = f.conditional(md, Ainv, theta)
    lam = np.linalg.eigvalsh(H)
    cov, method = ccov, 1
    if se == "hessian":
        with np.errstate(all="ignore"):
            full = 2.0 * np.linalg.inv(H) if np.all(np.isfinite(H)) else H * np.nan
        hcov = 0.5 * (full[m:, m:] + full[m:, m:].T)
        if (np.all(np.isfinite(full)) and lam[0] > 0
                and np.all(np.linalg.eigvalsh(hcov) > 0)):
            cov, method = hcov, 0
    se_ = np.sqrt(np.diagonal(cov))
    b = np.concatenate([(md.u[o: o + s.q * s.d].reshape(s.q, s.d) @ T.T).reshape(-1)
                        for s, T, o in zip(shapes, f.factors(theta), _starts(shapes),
                                           strict=True)])
    finite = np.isfinite(D) and np.all(np.isfinite(phi)) and np.all(np.isfinite(se_))
    return NumpyLme(theta=theta, beta=beta, se=se_, cov=cov, cov_method=method,
                    deviance=float(D), loglik=-0.5 * float(D) + log_binom(y, n), u=md.u, b=b,
                    b_var=b_var, grad_norm=float(np.max(np.abs(g))),
                    hess_min_eig=float(lam[0]), converged=bool(finite and dec < tol),
                    iterations=nit + steps)


@dataclass(frozen=True)
class NumpyLogistic:
    """Logistic regression by Newton's method (:func:`numpy_logistic_fit`)."""

    beta: np.ndarray
    cov: np.ndarray
    loglik: float
    converged: bool
    iterations: int


def numpy_logistic_fit(X: np.ndarray, y: np.ndarray, n: np.ndarray,
                       offset: np.ndarray | None = None, max_iter: int = 30,
                       tol: float = 1e-14) -> NumpyLogistic:
    """The binomial GLM of :mod:`tomstats.glmm.glm` (its definitions: Newton's method with
    step halving, decrement :math:`s^\\top H^{-1}s \\le` ``tol`` :math:`(1 + |\\ell|)`,
    not converged when some :math:`|\\eta_i| > 30`), on the host: the start of the mixed
    fit, and the fit of a formula without random terms."""
    off = np.zeros(X.shape[0]) if offset is None else offset
    p = X.shape[1]
    eps = np.finfo(float).eps

    def loglik(b: np.ndarray) -> float:
        eta = off + X @ b
        return float(np.sum(-n * np.logaddexp(0.0, -eta) - (n - y) * eta))

    def step(b: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        pr = expit(off + X @ b)
        H = X.T @ ((n * pr * (1.0 - pr))[:, None] * X)
        s = X.T @ (y - n * pr)
        ridge = np.sqrt(eps) * np.max(np.diagonal(H)) * np.eye(p)
        d = np.linalg.solve(H + ridge, s)
        return d, float(s @ d), H

    beta = np.zeros(p)
    ll = loglik(beta)
    it, dec = 0, np.inf
    while it < max_iter and dec > tol * (1.0 + abs(ll)):
        if np.any((np.abs(off + X @ beta) > 30.0) & (n > 0)):
            break
        d, dec, _ = step(beta)
        t = 1.0
        lln = loglik(beta + d)
        while not (lln >= ll - 10 * eps * (abs(ll) + 1.0) or dec < 1e-6) and t > 1e-9:
            t *= 0.5
            lln = loglik(beta + t * d)
        it += 1
        if not (np.isfinite(dec) and np.isfinite(lln)):
            break
        beta, ll = beta + t * d, lln
    _, dec_end, H = step(beta)
    with np.errstate(all="ignore"):
        cov = np.linalg.inv(H)
    cov = 0.5 * (cov + cov.T)
    sep = bool(np.any((np.abs(off + X @ beta) > 30.0) & (n > 0)))
    conv = (dec_end <= tol * (1.0 + abs(ll)) * 10 and np.isfinite(ll)
            and bool(np.all(np.isfinite(np.diagonal(cov)))) and not sep)
    return NumpyLogistic(beta=beta, cov=cov, loglik=ll + log_binom(y, n),
                         converged=bool(conv), iterations=it)
