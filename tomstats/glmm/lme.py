r"""lme4-style GLMMs by maximum likelihood with any random-effects terms (``glmer``, nAGQ = 1).

``fit_lme(df, "correct ~ tom_order + (1 + tom_order | model) + (1 | item)")`` reads the
formula (checked by :func:`tomstats._expr.check_formula` before anything else), builds the
fixed design :math:`X` and, per random-effects term, the columns :math:`Z_k` and level codes
(:func:`tomstats.glmm.data.build_design`, as the samplers do), and maximises the Laplace
likelihood in float64 with one of two solvers of the same deviance (:func:`choose_engine`):
the interpreted :func:`tomstats.glmm.lme_numpy.numpy_lme_fit` (NumPy/SciPy; the default of
a single fit, which then imports no JAX) or the compiled
:func:`tomstats.glmm.lme_fit.lme_fit_arrays` (JAX).

Terms, as lme4 reads them:

- ``(1 + x | g)``: correlated intercept and slope per level of ``g``:
  :math:`b_{g} \sim N(0, \Sigma)`, :math:`\Sigma = TT^\top` with :math:`T` lower triangular
  (lme4's ``theta`` are its column-major lower-triangle elements);
- ``(1 + x || g)``: independent effects (:math:`T` diagonal; lme4 splits the term into
  ``(1 | g) + (0 + x | g)``); a categorical variable in a ``||`` term is refused (lme4 gives
  its levels a correlated block there, which is seldom what ``||`` is meant to say);
- several terms per factor (``(1 | g) + (0 + x | g)``), crossed factors, ``g1:g2`` and the
  nesting ``(1 | a/b)`` = ``(1 | a) + (1 | a:b)``;
- outcomes: 0/1 rows, ``successes | trials(n) ~ ...`` or lme4's ``cbind(successes, failures)``
  (``cbind(k, n - k)``).

Refused before any fit (one line, :class:`~tomstats.glmm._hints.InputError`): a grouping
factor with a single level (from the design builder), a term with as many random effects as
data rows or more (lme4's ``check.nobs.vs.nRE``), a grouping factor with as many levels as
rows (``check.nobs.vs.nlev``), and a slope that does not vary within the levels of its factor
next to that factor's intercept (the slope's effects cannot be told from the intercepts').

Every Laplace fit goes through here (``tomstats.glmm.fit(..., backend="laplace")``), random
intercepts as any other term; a formula without random terms is a logistic regression
(:func:`tomstats.glmm.lme_numpy.numpy_logistic_fit` or
:func:`tomstats.glmm.glm.logistic_fit`). For the JAX solver the design's shapes are padded to
buckets, so that a log of similar size reuses the compiled fit, kept in JAX's persistent
cache (:func:`tomstats.glmm.lme_fit.lme_fit_arrays` with ``bucket=True``). Separated data (a
fixed effect whose estimate is infinite) are named (:mod:`tomstats.glmm.separation`) and
the fit is marked as not converged. The result is a
:class:`tomstats.glmm.lme_result.LaplaceFit`.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tomstats._expr import CBIND
from tomstats.glmm._hints import InputError, hint
from tomstats.glmm._theta import TermShape
from tomstats.glmm.lme_result import (
    LaplaceConvergenceWarning,
    LaplaceFit,
    LaplaceSeparationWarning,
    LmeTerm,
    _effect_name,
)

__all__ = ["fit_lme", "needs_lme", "rewrite_cbind", "LME_OPTIONS", "ENGINES", "choose_engine"]

#: Options of :func:`fit_lme` passed on to the optimiser.
LME_OPTIONS = ("max_iter", "tol", "se", "max_inner", "engine")
#: Solvers of a fit: ``"numpy"`` (:mod:`tomstats.glmm.lme_numpy`: interpreted, no JAX),
#: ``"jax"`` (:mod:`tomstats.glmm.lme_fit`: compiled), ``"auto"`` (:func:`choose_engine`).
ENGINES = ("auto", "numpy", "jax")
#: ``engine="auto"`` fits with NumPy up to this many random effects :math:`q = \sum_k q_k
#: d_k` (its dense :math:`q\times q` Cholesky factor grows as :math:`q^3`; above it the JAX
#: solver's elimination of the largest term wins, compilation included).
NUMPY_MAX_EFFECTS = 1000


def choose_engine(engine: str, shapes: tuple[TermShape, ...]) -> str:
    """The solver of one fit: ``engine`` itself unless ``"auto"``; for ``"auto"``,
    ``"numpy"`` when the fit has at most :data:`NUMPY_MAX_EFFECTS` random effects (a single
    fit in a new process: JAX's import and compilation cost more than the interpreted fit),
    else ``"jax"``. Many refits of one design (``tomstats power --from-fit``) call the JAX
    solver directly, where one compilation serves them all."""
    if engine != "auto":
        return engine
    return "numpy" if sum(s.q * s.d for s in shapes) <= NUMPY_MAX_EFFECTS else "jax"
#: ``cbind(...) ~`` at the start of a formula: the formula language's own pattern
#: (:data:`tomstats._expr.CBIND`, anchored there at both ends) followed by the ``~``.
_CBIND = re.compile(r"^\s*" + CBIND.pattern.removeprefix("^").removesuffix("$") + r"\s*~")
#: Column added for the trials of ``cbind(successes, failures)``.
CBIND_TRIALS = "cbind_trials"


def rewrite_cbind(formula: str, df: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """lme4's ``cbind(k, n - k) ~ ...`` as ``k | trials(n) ~ ...``; ``cbind(k, f) ~ ...``
    as ``k | trials(cbind_trials) ~ ...`` with ``cbind_trials = k + f`` added to a copy of
    ``df``. Other formulas are returned as they are.

    Raises
    ------
    InputError
        ``cbind(k, n - m)`` with ``m`` other than ``k``, or a column that is not in ``df``.
    """
    if not isinstance(formula, str) or not formula.lstrip().startswith("cbind"):
        return formula, df
    m = _CBIND.match(formula)
    if m is None:
        raise InputError(f"formula {formula[:120]!r}: the left-hand side must be "
                         f"'cbind(successes, failures)' or 'cbind(successes, trials - "
                         f"successes)' with column names")
    rest = formula[m.end():]
    strip = lambda s: s.strip("`") if s else s  # noqa: E731
    k, n, k2, f = (strip(m.group(i)) for i in range(1, 5))
    if n is not None:
        if k2 != k:
            raise InputError(f"formula {formula[:120]!r}: cbind({k}, {n} - {k2}) must "
                             f"subtract the successes {k!r} from the trials")
        return f"{m.group(1)} | trials({m.group(2)}) ~{rest}", df
    for col in (k, f):
        if col not in df.columns:
            raise InputError(f"formula {formula[:120]!r}: column {col!r} of cbind() is not "
                             f"in the data (columns: {', '.join(map(str, df.columns))})")
    if CBIND_TRIALS in df.columns:
        raise InputError(f"formula {formula[:120]!r}: the data already have a column "
                         f"{CBIND_TRIALS!r}; write 'successes | trials(n) ~ ...' instead")
    out = df.copy()
    kk = pd.to_numeric(out[k], errors="coerce")
    ff = pd.to_numeric(out[f], errors="coerce")
    if kk.isna().any() or ff.isna().any() or (ff < 0).any():
        raise InputError(f"formula {formula[:120]!r}: cbind({k}, {f}) needs non-negative "
                         f"numbers in both columns")
    out[CBIND_TRIALS] = kk + ff
    return f"{m.group(1)} | trials({CBIND_TRIALS}) ~{rest}", out


def needs_lme(formula: str) -> bool:
    """Whether ``formula`` has more than random intercepts: an lme4 ``cbind(...)`` response,
    or a random term other than a plain intercept ``(1 | g)`` (slopes, ``0 + x``, ``||`` with
    several effects). Formulas outside the formula language give False. (Earlier versions
    sent only these formulas here; every Laplace fit now goes through :func:`fit_lme`.)"""
    from tomstats._expr import ExpressionError, check_formula

    if not isinstance(formula, str) or "~" not in formula:
        return False
    if formula.lstrip().startswith("cbind"):
        return True
    try:
        parts = check_formula(formula)
    except ExpressionError:
        return False
    return any(" ".join(expr.split()) != "1" for expr, _, _ in parts.random)


def _check_terms(spec: Any, md: Any, n_rows: int) -> None:
    """The refusals of the module docstring (one line each)."""
    for t in spec.random:
        effects = list(md.coords[f"{t.key}_effect"])
        q = len(md.coords[t.dim])
        d = len(effects)
        if q >= n_rows:
            raise InputError(f"random term {t.label}: the grouping factor {t.group!r} has "
                             f"{q} levels for {n_rows} data rows; a grouping factor needs "
                             f"fewer levels than rows (lme4: number of levels of each "
                             f"grouping factor must be < number of observations)")
        if q * d >= n_rows:
            raise InputError(f"random term {t.label}: {q} levels x {d} effects = {q * d} "
                             f"random effects for {n_rows} data rows; the data cannot "
                             f"support more random effects than rows (lme4: number of "
                             f"observations <= number of random effects). Drop a slope")
        if not t.correlated and any("[" in e for e in effects):
            cat = [e for e in effects if "[" in e]
            raise InputError(f"random term {t.label}: a categorical variable ({cat[0]}) in "
                             f"an uncorrelated '||' term is not supported (lme4 gives its "
                             f"levels a correlated block there); code it as a numeric 0/1 "
                             f"column, or write a correlated '|' term")
        if "Intercept" not in effects or d < 2:
            continue
        Z = np.asarray(md.arrays[f"Z_{t.key}"], dtype=float)
        codes = np.asarray(md.arrays[f"g_{t.key}"])
        counts = np.bincount(codes, minlength=q).astype(float)
        slopes = [j for j, e in enumerate(effects) if e != "Intercept"]
        means = np.stack([np.bincount(codes, weights=Z[:, j], minlength=q) / np.maximum(
            counts, 1.0) for j in slopes], axis=1)
        within = Z[:, slopes] - means[codes]
        scale = np.maximum(np.abs(Z[:, slopes]).max(axis=0), 1.0)
        for c, j in enumerate(slopes):
            if np.max(np.abs(within[:, c])) <= 1e-10 * scale[c]:
                raise InputError(
                    f"random term {t.label}: {effects[j]!r} is constant within every level "
                    f"of {t.group!r}, so its random slope cannot be told from the random "
                    f"intercept of {t.group!r}; drop it from the term (keep it as a fixed "
                    f"effect)")
        rank = np.linalg.matrix_rank(within, tol=1e-8 * float(np.max(scale)) * len(Z))
        if rank < len(slopes):
            raise InputError(f"random term {t.label}: its slopes are linearly dependent "
                             f"within the levels of {t.group!r} (rank {rank} of "
                             f"{len(slopes)}); drop one")


def fit_lme(
    data: pd.DataFrame,
    formula: str,
    *,
    family: str | None = None,
    columns: Mapping[str, str] | None = None,
    se: str = "hessian",
    max_iter: int = 100,
    tol: float | None = None,
    max_inner: int = 50,
    aggregate: bool | str = "auto",
    center: bool = True,
    trials: str | None = None,
    engine: str = "auto",
    **options: Any,
) -> LaplaceFit:
    """Maximum-likelihood (Laplace) fit of a logit GLMM with lme4 random-effects terms.

    Parameters
    ----------
    data : pandas.DataFrame
        The log (standard or mapped columns, as for :func:`tomstats.glmm.fit`).
    formula : str
        lme4-style formula, e.g. ``"correct ~ tom_order + (1 + tom_order | model) +
        (1 | item)"``, ``"cbind(k, n - k) ~ x + (1 + x || g)"``, ``"y ~ x + (1 | a/b)"``;
        without a random term, a logistic regression
        (:func:`tomstats.glmm.glm.logistic_fit`, covariance :math:`(X^\\top W X)^{-1}`).
    family : {"bernoulli", "binomial"}, optional
        As for :func:`tomstats.glmm.fit` (implied by the left-hand side otherwise).
    columns : mapping, optional
        ``{standard_name: your_column}`` renaming.
    se : {"hessian", "conditional"}
        lme4's ``vcov()`` (Hessian over :math:`(\\theta, \\beta)`, the default) or
        ``use.hessian = FALSE``.
    max_iter, tol, max_inner
        Outer Newton iterations (the NumPy engine: up to ``10 * max_iter`` quasi-Newton
        iterations, each cheaper), tolerance on the Newton decrement (default 1e-10),
        inner PIRLS iterations.
    aggregate : bool or "auto"
        Sum identical rows (same predictors, effects and groups) into binomial cells first
        ("auto": when that halves the observations); no estimate changes and the
        log-likelihood is reported for the rows as given.
    center : bool
        Centre the fixed predictors for the fit (no reported number changes).
    trials : str, optional
        The trials column of a binomial response (as for :func:`tomstats.glmm.fit`).
    engine : {"auto", "numpy", "jax"}
        The solver (:data:`ENGINES`): the same estimates from either, to the optimiser's
        tolerance. ``"auto"`` (:func:`choose_engine`): NumPy for up to
        :data:`NUMPY_MAX_EFFECTS` random effects (no JAX import, nothing to compile: what a
        single fit in a new process wants), else JAX.
    **options
        None accepted (named here so that a wrong option is refused in one line).

    Returns
    -------
    LaplaceFit
        A :class:`~tomstats.glmm.lme_result.LaplaceConvergenceWarning` is issued when the
        fit did not converge (a :class:`~tomstats.glmm.lme_result.LaplaceSeparationWarning`
        when the data are separated).
    """
    from tomstats._expr import check_formula
    from tomstats.glmm.data import build_design, prepare_data, response_arrays
    from tomstats.glmm.provenance import data_hash, package_versions, used_columns

    laplace = hint("backend='laplace'", "--backend laplace")
    if options:
        raise InputError(f"{laplace} does not take the option(s) {sorted(options)} (priors "
                         f"and parametrisation concern the Bayesian samplers); it takes "
                         f"{sorted(('aggregate', 'center', 'trials') + LME_OPTIONS)}")
    if not isinstance(formula, str) or "~" not in formula:
        raise InputError(
            f"{laplace} fits lme4-style formula models, e.g. 'correct ~ tom_order + "
            f"(1 + tom_order | model) + (1 | item)'; got "
            f"{hint(f'model={formula!r}', f'--model {formula}')} (the structural model needs "
            f"a sampler backend: numpyro or pymc)")
    if se not in ("hessian", "conditional"):
        raise InputError(f"se must be 'hessian' or 'conditional', got {se!r}")
    if not isinstance(engine, str) or engine not in ENGINES:
        raise InputError(f"engine must be one of {ENGINES}, got {engine!r}")
    for name, v in (("max_iter", max_iter), ("max_inner", max_inner)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be an integer >= 1, got {v!r}")
    if tol is not None and not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise InputError(f"tol must be a number in (0, 1), got {tol!r}")
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"fit_lme: data must be a pandas DataFrame, got {type(data).__name__}")
    df = prepare_data(data, columns).reset_index(drop=True)
    shown = formula
    formula, df = rewrite_cbind(formula, df)
    check_formula(formula)
    opts: dict[str, Any] = dict(aggregate=aggregate, center=center)
    if trials is not None:
        opts["trials"] = trials
    spec, md = build_design(formula, df, family=family, **opts)
    n_rows = len(df)
    _check_terms(spec, md, n_rows)

    terms = tuple(
        LmeTerm(group=t.group, effects=tuple(_effect_name(e) for e in
                                             md.coords[f"{t.key}_effect"]),
                correlated=bool(t.correlated), levels=tuple(map(str, md.coords[t.dim])),
                expr=t.expr)
        for t in spec.random)
    shapes = tuple(TermShape(d=t.d, q=t.q, correlated=t.correlated) for t in terms)
    Xc = np.asarray(md.arrays["X"], dtype=np.float64)
    mean = np.asarray(md.arrays["X_mean"], dtype=np.float64)
    y = md.y.astype(np.float64)
    n_trials = None if md.trials is None else md.trials.astype(np.float64)
    Zs = tuple(np.asarray(md.arrays[f"Z_{t.key}"], dtype=np.float64) for t in spec.random)
    gs = tuple(np.asarray(md.arrays[f"g_{t.key}"], dtype=np.int32) for t in spec.random)
    coef_names = tuple(_effect_name(c) for c in md.coords["coef"])
    solver = choose_engine(engine, shapes)
    r = (_solve(Xc, y, n_trials, Zs, gs, shapes, solver, max_iter=int(max_iter), tol=tol,
                se=se, max_inner=int(max_inner)) if terms else
         _solve_glm(Xc, y, n_trials, solver, max_iter=int(max_iter), tol=tol))
    separated: tuple[str, ...] = ()
    if _separation_possible(Xc, r, Zs, gs, shapes, tol):
        from tomstats.glmm.separation import separation

        separated = separation(Xc, y, n_trials, coef_names)
    # centred design -> the user's columns: beta = A beta_c, V = A V_c A'
    A = np.eye(Xc.shape[1])
    if md.intercept is not None:
        A[md.intercept] -= mean
        A[md.intercept, md.intercept] = 1.0
    beta = A @ r.beta
    cov = A @ r.cov @ A.T
    cov = 0.5 * (cov + cov.T)
    loglik = float(r.loglik)
    if spec.aggregate:  # the log-likelihood of the data rows, not of the binomial cells
        y_rows, n_tr = response_arrays(df, spec.response, spec.trials, spec.family)
        n_tr = np.ones_like(y_rows) if n_tr is None else n_tr
        n_cells = np.ones_like(md.y) if md.trials is None else md.trials
        loglik += (_log_binom(y_rows.astype(float), n_tr.astype(float))
                   - _log_binom(md.y.astype(float), n_cells.astype(float)))
    used = used_columns(spec, df)
    fit = LaplaceFit(
        formula=shown, family=spec.family, n_obs=md.n_obs, n_rows=n_rows,
        coef_names=coef_names, beta=beta, se=np.sqrt(np.clip(np.diagonal(cov), 0.0, None)),
        cov=cov, se_method="hessian" if int(r.cov_method) == 0 else "conditional",
        terms=terms, theta=np.asarray(r.theta, float), b=np.asarray(r.b, float),
        b_var=np.asarray(r.b_var, float), loglik=loglik,
        converged=bool(r.converged) and not separated, iterations=int(r.iterations),
        grad_norm=float(r.grad_norm), hess_min_eig=float(r.hess_min_eig),
        aggregated=bool(spec.aggregate), data_hash=data_hash(df, used),
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        versions=package_versions("laplace"),
        pearson=_pearson(r, Xc, Zs, gs, tuple(t.q for t in terms), md.row_obs,
                         *response_arrays(df, spec.response, spec.trials, spec.family)),
        separation=separated,
        design=_Design(spec=spec, train=df, Xc=Xc, mean=mean, y=y, trials=n_trials, Zs=Zs,
                       gs=gs, shapes=shapes))
    if separated:
        warnings.warn(
            f"tomstats.glmm.fit(backend='laplace'): fitted probabilities numerically 0 or 1 "
            f"occurred: the data are separated by {', '.join(separated)} (a level or a value "
            f"range with all 0s or all 1s), so their maximum-likelihood estimates are "
            f"infinite; do not trust the estimates. Try: drop or merge the separating "
            f"level, or a Bayesian fit (its priors keep the estimates finite)",
            LaplaceSeparationWarning, stacklevel=3)
    elif not fit.converged:
        warnings.warn(
            f"tomstats.glmm.fit(backend='laplace'): the fit of {shown!r} did not converge "
            f"after {fit.iterations} iteration(s) (max_iter={max_iter}); do not trust the "
            f"estimates. Try: rescale predictors, raise max_iter, simplify the random "
            f"effects, or check for separation (a group or predictor value with all 0s or "
            f"all 1s)", LaplaceConvergenceWarning, stacklevel=3)
    return fit


def _solve(Xc: np.ndarray, y: np.ndarray, trials: np.ndarray | None,
           Zs: tuple[np.ndarray, ...], gs: tuple[np.ndarray, ...], shapes: tuple[Any, ...],
           solver: str, **options: Any) -> Any:
    """The Laplace fit of the design by ``solver``: ``"numpy"``
    (:func:`tomstats.glmm.lme_numpy.numpy_lme_fit`), or ``"jax"``
    (:func:`tomstats.glmm.lme_fit.lme_fit_arrays` in float64, shapes padded to buckets so
    that a log of similar size reuses the compiled program, kept in JAX's persistent cache);
    results on the host."""
    if solver == "numpy":
        from tomstats.glmm.lme_numpy import numpy_lme_fit

        return numpy_lme_fit(Xc, y, trials, Zs, gs, shapes, **options)
    import jax

    from tomstats._compile_cache import enable_compilation_cache
    from tomstats.glmm.lme_fit import lme_fit_arrays

    enable_compilation_cache()
    with jax.enable_x64(True):
        r = lme_fit_arrays(Xc, y, trials, Zs, gs, shapes, bucket=True, **options)
        return jax.tree_util.tree_map(np.asarray, r)


@dataclass(frozen=True)
class _GlmResult:
    """:func:`tomstats.glmm.glm.logistic_fit`'s result in the solver's field names (no
    random effects)."""

    beta: np.ndarray
    cov: np.ndarray
    loglik: float
    converged: bool
    iterations: int
    theta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    b: np.ndarray = field(default_factory=lambda: np.zeros(0))
    b_var: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cov_method: int = 0
    grad_norm: float = float("nan")
    hess_min_eig: float = float("nan")


def _solve_glm(Xc: np.ndarray, y: np.ndarray, trials: np.ndarray | None, solver: str, *,
               max_iter: int, tol: float | None) -> _GlmResult:
    """A formula without random terms: logistic regression by Newton's method
    (:func:`tomstats.glmm.lme_numpy.numpy_logistic_fit` or
    :func:`tomstats.glmm.glm.logistic_fit`, by ``solver``)."""
    if solver == "numpy":
        from tomstats.glmm.lme_numpy import numpy_logistic_fit

        n = np.ones_like(y) if trials is None else trials
        r = numpy_logistic_fit(Xc, y, n, max_iter=max_iter,
                               **({} if tol is None else {"tol": tol}))
    else:
        import jax

        from tomstats.glmm.glm import logistic_fit

        with jax.enable_x64(True):
            r = logistic_fit(Xc, y, 1.0 if trials is None else trials, max_iter=max_iter,
                             tol=tol)
    return _GlmResult(beta=np.asarray(r.beta, float), cov=np.asarray(r.cov, float),
                      loglik=float(r.loglik), converged=bool(r.converged),
                      iterations=int(r.iterations))


def _log_binom(y: np.ndarray, n: np.ndarray) -> float:
    """:math:`\\sum\\log\\binom{n_i}{y_i}` of host arrays
    (:func:`tomstats.glmm.lme_numpy.log_binom`: no JAX)."""
    from tomstats.glmm.lme_numpy import log_binom

    return log_binom(y, n)


#: Largest fitted :math:`|\eta|` of a fit that may skip the separation check (see
#: :func:`_separation_possible`).
_SEPARATION_ETA = 8.0


def _separation_possible(X: np.ndarray, r: Any, Zs: tuple[np.ndarray, ...],
                         gs: tuple[np.ndarray, ...], shapes: tuple[Any, ...],
                         tol: float | None) -> bool:
    r"""Whether a fit needs the separation check (a linear program,
    :func:`tomstats.glmm.separation.separation`, whose SciPy import costs more than the fit).

    Separated data have no maximum: along the separating direction :math:`d` the deviance
    keeps falling, with gradient and curvature both proportional to the weights
    :math:`p_i(1-p_i) \approx e^{-|\eta_i|}` of the separated rows, so the Newton decrement
    there is of order :math:`e^{-|\eta_i|}`. A fit that meets the tolerance ``tol`` on the
    decrement must therefore have pushed those rows to :math:`|\eta_i| \gtrsim -\ln
    \mathrm{tol}` (23 at the default :math:`10^{-10}`). So the check is needed only when the
    fit did not converge, or some fitted :math:`|\eta_i|` (fixed part plus conditional modes,
    :math:`x_i^\top\hat\beta + \sum_k z_{ik}^\top\hat b_{k,g_k(i)}`) exceeds
    :math:`\min(8, -\tfrac12\ln\mathrm{tol})`.
    """
    if not bool(r.converged):
        return True
    eta = X @ r.beta
    o = 0
    for Z, g, s in zip(Zs, gs, shapes, strict=True):
        bk = np.asarray(r.b)[o: o + s.q * s.d].reshape(s.q, s.d)
        eta = eta + np.sum(Z * bk[g], axis=1)
        o += s.q * s.d
    limit = min(_SEPARATION_ETA, -0.5 * math.log(1e-10 if tol is None else tol))
    return not bool(np.all(np.isfinite(eta))) or float(np.max(np.abs(eta))) > limit


@dataclass(frozen=True)
class _Design:
    """What predictions and profiles need of the fit (kept in memory, not in JSON): the
    spec, the data as fitted, and the numeric design (centred ``Xc`` with its column means,
    the observations, each term's ``Z`` and level codes, the terms' shapes)."""

    spec: Any
    train: pd.DataFrame
    Xc: np.ndarray
    mean: np.ndarray
    y: np.ndarray
    trials: np.ndarray | None
    Zs: tuple[np.ndarray, ...]
    gs: tuple[np.ndarray, ...]
    shapes: tuple[Any, ...]


def _pearson(r: Any, Xc: np.ndarray, Zs: tuple[np.ndarray, ...], gs: tuple[np.ndarray, ...],
             levels: tuple[int, ...], row_obs: np.ndarray, y: np.ndarray,
             trials: np.ndarray | None) -> np.ndarray:
    """Pearson residuals :math:`(y_r - n_r p_r)/\\sqrt{n_r p_r(1-p_r)}` of the data rows at
    the conditional modes (lme4's ``resid(type = "pearson")``, summary's "Scaled
    residuals"); ``row_obs`` maps rows to the fitted observations."""
    eta = Xc @ r.beta
    o = 0
    for Z, g, q in zip(Zs, gs, levels, strict=True):
        bk = r.b[o: o + q * Z.shape[1]].reshape(q, Z.shape[1])
        eta = eta + np.sum(Z * bk[g], axis=1)
        o += bk.size
    p = (1.0 / (1.0 + np.exp(-eta)))[row_obs]
    y = np.asarray(y, dtype=float)
    n = np.ones_like(y) if trials is None else np.asarray(trials, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (y - n * p) / np.sqrt(n * p * (1.0 - p))
