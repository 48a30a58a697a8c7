r"""Maximum-likelihood GLMMs as a backend of :func:`tomstats.glmm.fit` (``backend="laplace"``).

``fit(df, "correct ~ x + (1 | model) + (1 | item)", backend="laplace")`` reads the formula
and builds the design exactly as the samplers do (:func:`tomstats.glmm.data.build_design`),
then maximises the Laplace approximation of the likelihood with
:func:`tomstats.glmm.laplace.laplace_fit` in float64 (lme4's ``glmer``, ``nAGQ = 1``):

.. math::

    y_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\qquad
    \eta_i = x_i^\top\beta + \sum_{k=1}^K b_{k, g_k(i)},\qquad
    b_{k,j} \sim N(0, \sigma_k^2).

Only random *intercepts* ``(1 | g)`` are supported (crossed or nested, ``g1/g2``); a formula
without random terms is an ordinary logistic regression
(:func:`tomstats.glmm.glm.logistic_fit`). The result, :class:`LaplaceFit`, reports what lme4's
``summary(glmer(...))`` does:

- fixed effects :math:`\hat\beta_j` on the scale of the user's columns, standard errors
  (lme4's ``vcov()``: the Hessian of the Laplace deviance by default), Wald
  :math:`z_j = \hat\beta_j / \mathrm{se}_j`, two-sided :math:`p_j = 2\Phi(-|z_j|)` and
  Wald intervals :math:`\hat\beta_j \pm z_{1-a/2}\,\mathrm{se}_j`;
- variance components :math:`\hat\sigma_k` (``Std.Dev.``) and :math:`\hat\sigma_k^2`;
- conditional modes :math:`\hat b_{k,j}` of the random effects (lme4's ``ranef()``);
- the Laplace log-likelihood :math:`\ell` (lme4's ``logLik()``),
  :math:`\mathrm{AIC} = -2\ell + 2d` and :math:`\mathrm{BIC} = -2\ell + d\ln N` with
  :math:`d = p + K` parameters and :math:`N` data rows (lme4's ``nobs()``).

Identical rows may be summed into binomial cells first (``aggregate="auto"``, as for the
samplers); the estimates do not change, and :math:`\ell` is reported for the rows as given:
:math:`\ell_\text{rows} = \ell_\text{cells} - \sum_\text{cells}\log\binom{n_c}{y_c} +
\sum_\text{rows}\log\binom{n_r}{y_r}` (0/1 rows have no binomial coefficient, as in lme4).
With an intercept the predictors are centred for the fit (``center=True``, the default)
and :math:`\hat\beta` and its covariance are mapped back
(:math:`\beta_0 = \beta_0^c - \sum_j \bar x_j \beta_j^c`, :math:`V = A V^c A^\top`); the
maximum likelihood fit is invariant to this, so ``center`` changes no reported number.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from tomstats._compile_cache import enable_compilation_cache
from tomstats._io import atomic_write_text, ensure_writable_file
from tomstats.glmm._hints import InputError, hint
from tomstats.glmm.data import build_design, prepare_data, response_arrays
from tomstats.glmm.diagnostics import DiagnosticsWarning
from tomstats.glmm.fit_file import JSON_FORMAT_VERSION, FitFileError, check_ml_dict, load_ml_dict
from tomstats.glmm.provenance import data_hash, package_versions, used_columns
from tomstats.glmm.separation import separation
from tomstats.glmm.spec import FormulaSpec

__all__ = ["LaplaceFit", "LaplaceConvergenceWarning", "LaplaceSeparationWarning", "fit_laplace",
           "LAPLACE_OPTIONS", "SINGULAR_MESSAGE"]

#: Options of :func:`fit_laplace` passed on to :func:`tomstats.glmm.laplace.laplace_fit`.
LAPLACE_OPTIONS = ("max_iter", "tol", "se", "max_inner")
#: Spec options a Laplace fit accepts (the formula ones that do not concern a sampler).
_SPEC_OPTIONS = ("aggregate", "trials", "center")
_FORMAT = "tomstats-laplace-fit"
_FORMAT_VERSION = JSON_FORMAT_VERSION
#: A random-intercept SD below this is reported as a boundary (singular) fit, as lme4 does.
_SINGULAR_SD = 1e-4
#: What lme4 says of a singular fit.
SINGULAR_MESSAGE = "boundary (singular) fit: see help('isSingular')"


class LaplaceConvergenceWarning(DiagnosticsWarning):
    """The maximum-likelihood (Laplace) fit did not converge; its estimates may be wrong."""


class LaplaceSeparationWarning(LaplaceConvergenceWarning):
    """The data are separated: some fixed-effect estimates are infinite (the fit cannot
    converge; :mod:`tomstats.glmm.separation`)."""


def _floats(a: Any) -> list:
    """Nested lists of floats with non-finite values as ``None`` (strict JSON)."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim == 0:
        v = float(arr)
        return v if math.isfinite(v) else None  # type: ignore[return-value]
    return [_floats(v) for v in arr]


def _array(v: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Inverse of :func:`_floats` (``None`` → NaN)."""
    def conv(x: Any) -> Any:
        if isinstance(x, list):
            return [conv(e) for e in x]
        return np.nan if x is None else float(x)

    arr = np.asarray(conv(v), dtype=float)
    if shape is not None:
        arr = arr.reshape(shape)
    return arr


def _stars(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else \
        "." if p < 0.1 else ""


def _fmt_p(p: float) -> str:
    if not np.isfinite(p):
        return "NA"
    return "< 2e-16" if p < 2e-16 else f"{p:.3g}"


@dataclass(frozen=True)
class LaplaceFit:
    r"""A maximum-likelihood (Laplace) GLMM fit: :func:`tomstats.glmm.fit` with
    ``backend="laplace"``.

    Attributes
    ----------
    formula : str
        The lme4-style formula fitted.
    family : {"bernoulli", "binomial"}
        Outcome family of the data rows (logit link).
    n_obs : int
        Observations the likelihood evaluated (binomial cells when rows were aggregated).
    n_rows : int
        Data rows (lme4's ``nobs()``; the :math:`N` of BIC).
    coef_names : tuple of str
        Fixed-effect names (formulaic's, e.g. ``"Intercept"``, ``"x"``, ``"C(g)[T.b]"``).
    beta, se : ndarray, shape (p,)
        Estimates :math:`\hat\beta` and standard errors
        :math:`\sqrt{\operatorname{diag} V}`.
    cov : ndarray, shape (p, p)
        :math:`V`, the covariance of :math:`\hat\beta` (lme4's ``vcov()``).
    groups : tuple of str
        Grouping factor of each random intercept (``"model"``, ``"model:item"``).
    sd : ndarray, shape (K,)
        Random-intercept SDs :math:`\hat\sigma_k`.
    n_levels : tuple of int
        Levels of each grouping factor.
    levels : tuple of tuple of str
        Level labels of each factor (sorted, as in the design).
    ranef : ndarray, shape (sum(n_levels),)
        Conditional modes :math:`\hat b_{k,j}`, factor by factor in the order of ``groups``.
    loglik : float
        Laplace log-likelihood :math:`\ell` of the data rows (lme4's ``logLik()``).
    converged : bool
        The optimiser met its tolerance with finite values, and the data are not separated
        (with separated data the maximum is at infinity: ``separation`` names the terms).
    iterations : int
        Outer Newton iterations used.
    se_method : {"hessian", "conditional"}
        How ``cov`` was computed (see :func:`tomstats.glmm.laplace.laplace_fit`).
    aggregated : bool
        Whether identical rows were summed into binomial cells for the fit.
    data_hash : str
        SHA-256 of the data columns read (as in the samplers' fits).
    created_at : str
        UTC time of the fit (ISO 8601).
    versions : dict
        Versions of Python and the packages used.
    separation : tuple of str
        Fixed effects whose estimates are infinite because the data are separated
        (:func:`tomstats.glmm.separation.separation`); empty when there are none.
    """

    formula: str
    family: str
    n_obs: int
    coef_names: tuple[str, ...]
    beta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    groups: tuple[str, ...]
    sd: np.ndarray
    n_levels: tuple[int, ...]
    levels: tuple[tuple[str, ...], ...]
    ranef: np.ndarray
    loglik: float
    converged: bool
    iterations: int
    n_rows: int
    se_method: str = "hessian"
    aggregated: bool = False
    data_hash: str = ""
    created_at: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    separation: tuple[str, ...] = ()

    # ------------------------------------------------------------------ statistics

    @property
    def n_params(self) -> int:
        """:math:`d = p + K`: fixed effects plus random-intercept variances."""
        return len(self.coef_names) + len(self.groups)

    @property
    def deviance(self) -> float:
        """:math:`-2\\ell` (what lme4's ``summary`` prints as ``deviance``)."""
        return -2.0 * self.loglik

    @property
    def aic(self) -> float:
        """:math:`\\mathrm{AIC} = -2\\ell + 2d`, :math:`d = p + K` (lme4's ``AIC()``)."""
        return self.deviance + 2.0 * self.n_params

    @property
    def bic(self) -> float:
        """:math:`\\mathrm{BIC} = -2\\ell + d\\ln N`, :math:`N` = data rows (lme4's ``BIC()``)."""
        return self.deviance + math.log(self.n_rows) * self.n_params

    @property
    def singular(self) -> bool:
        """Some :math:`\\hat\\sigma_k < 10^{-4}`: a boundary fit (lme4's ``isSingular()``)."""
        return bool(np.any(self.sd < _SINGULAR_SD))

    def singular_advice(self) -> str:
        """lme4's words for a boundary fit (:data:`SINGULAR_MESSAGE`), what is at the boundary
        and what to do about it; empty when the fit is not singular."""
        zero = [g for g, v in zip(self.groups, self.sd, strict=True) if v < _SINGULAR_SD]
        if not zero:
            return ""
        parts = "; ".join(f"(1 | {g}): SD of (Intercept) ~ 0" for g in zero)
        return (f"{SINGULAR_MESSAGE}\n  {parts}. The data do not support this random-effects "
                f"structure: drop the term with variance ~0, refit, and compare the two fits' "
                f"JSON by a likelihood-ratio test with tomstats compare; "
                f"fixed effects and their SEs stay valid, the variance components at the "
                f"boundary are not estimates to report")

    def summary(self, level: float = 0.95) -> pd.DataFrame:
        """Fixed effects with Wald tests and intervals.

        Columns ``estimate`` :math:`\\hat\\beta_j`, ``se``, ``z`` :math:`=\\hat\\beta_j /
        \\mathrm{se}_j`, ``p`` :math:`= 2\\Phi(-|z|)`, ``ci_lower``/``ci_upper``
        :math:`= \\hat\\beta_j \\mp z_{(1+\\text{level})/2}\\,\\mathrm{se}_j`; indexed by
        coefficient name.
        """
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.beta / self.se
        # the standard library's normal quantile and erfc (scipy.stats takes longer to import
        # than the whole fit): 2 Phi(-|z|) = erfc(|z| / sqrt 2), exact in the far tail
        q = NormalDist().inv_cdf(0.5 + level / 2.0)
        p = np.array([math.erfc(abs(v) / math.sqrt(2.0)) if math.isfinite(v) else math.nan
                      for v in z.tolist()])
        return pd.DataFrame(
            {"estimate": self.beta, "se": self.se, "z": z, "p": p,
             "ci_lower": self.beta - q * self.se, "ci_upper": self.beta + q * self.se},
            index=pd.Index(list(self.coef_names), name="coef"))

    def anova_wald(self, type: int | str = 2) -> pd.DataFrame:
        """Type II or III Wald chi-square test of each fixed-effect term, as
        ``car::Anova(fit, type = "II" | "III")``: columns ``Chisq``, ``Df``, ``p``
        (:func:`tomstats.glmm.wald.wald_table`, whose docstring states the formulas; print
        with :func:`tomstats.glmm.lme_result.format_wald`)."""
        from tomstats.glmm.wald import wald_anova

        return wald_anova(self, type)

    def variance_components(self) -> pd.DataFrame:
        """Random intercepts: ``group``, ``n_levels``, ``sd`` :math:`\\hat\\sigma_k` and
        ``variance`` :math:`\\hat\\sigma_k^2` (lme4's ``VarCorr()``)."""
        return pd.DataFrame({"group": list(self.groups), "n_levels": list(self.n_levels),
                             "sd": self.sd, "variance": self.sd ** 2})

    def random_effects(self) -> pd.DataFrame:
        """Conditional modes :math:`\\hat b_{k,j}`: ``group``, ``level``, ``estimate``
        (lme4's ``ranef()``), one row per level of each factor."""
        groups = [g for g, n in zip(self.groups, self.n_levels, strict=True) for _ in range(n)]
        levels = [lv for lvs in self.levels for lv in lvs]
        return pd.DataFrame({"group": groups, "level": levels, "estimate": self.ranef})

    # ------------------------------------------------------------------ printing

    def __str__(self) -> str:
        lines = ["Generalized linear mixed model fit by maximum likelihood (Laplace "
                 "Approximation) [tomstats]" if self.groups else
                 "Generalized linear model fit by maximum likelihood [tomstats]",
                 f" Family: {self.family}  ( logit )",
                 f"Formula: {self.formula}", ""]
        stats = pd.DataFrame([[self.aic, self.bic, self.loglik, self.deviance,
                               self.n_rows - self.n_params]],
                             columns=["AIC", "BIC", "logLik", "deviance", "df.resid"])
        lines += [stats.to_string(index=False, float_format=lambda v: f"{v:.1f}"), ""]
        if self.groups:
            w = max(6, *(len(g) for g in self.groups))
            lines += ["Random effects:",
                      f" {'Groups':<{w}} Name        {'Variance':>10} {'Std.Dev.':>10}"]
            lines += [f" {g:<{w}} (Intercept) {v * v:>10.4g} {v:>10.4g}"
                      for g, v in zip(self.groups, self.sd, strict=True)]
            grp = "; ".join(f"{g}, {n}" for g, n in zip(self.groups, self.n_levels,
                                                         strict=True))
            lines += [f"Number of obs: {self.n_rows}, groups:  {grp}", ""]
        else:
            lines += [f"Number of obs: {self.n_rows}", ""]
        s = self.summary()
        fe = pd.DataFrame({"Estimate": s["estimate"].map(lambda v: f"{v:.4g}"),
                           "Std. Error": s["se"].map(lambda v: f"{v:.4g}"),
                           "z value": s["z"].map(lambda v: f"{v:.3f}"),
                           "Pr(>|z|)": s["p"].map(_fmt_p),
                           "": s["p"].map(_stars)}, index=s.index)
        fe.index.name = None
        lines += ["Fixed effects:", fe.to_string(),
                  "---", "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
        if self.singular:
            lines.append(self.singular_advice())
        if self.separation:
            lines.append("WARNING: fitted probabilities numerically 0 or 1 occurred: the data "
                         f"are separated by {', '.join(self.separation)}; their estimates and "
                         "standard errors are meaningless (the maximum is at infinity)")
        elif not self.converged:
            lines.append(f"WARNING: the fit did not converge ({self.iterations} iterations); "
                         "the estimates are unreliable")
        return "\n".join(lines)

    # ------------------------------------------------------------------ JSON


    def __repr__(self) -> str:
        """One line (formula, rows, log-likelihood, convergence); ``print()`` shows the
        lme4-style summary of :meth:`__str__`."""
        return _fit_line(self, self.singular)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (non-finite numbers as ``null``)."""
        return {
            "format": _FORMAT, "format_version": _FORMAT_VERSION, "backend": "laplace",
            "formula": self.formula, "family": self.family, "n_obs": self.n_obs,
            "n_rows": self.n_rows, "coef_names": list(self.coef_names),
            "beta": _floats(self.beta), "se": _floats(self.se), "cov": _floats(self.cov),
            "groups": list(self.groups), "sd": _floats(self.sd),
            "n_levels": list(self.n_levels), "levels": [list(v) for v in self.levels],
            "ranef": _floats(self.ranef), "loglik": _floats(self.loglik),
            "converged": self.converged, "iterations": self.iterations,
            "se_method": self.se_method, "aggregated": self.aggregated,
            "aic": _floats(self.aic), "bic": _floats(self.bic),
            "data_hash": self.data_hash, "created_at": self.created_at,
            "versions": dict(self.versions), "separation": list(self.separation),
        }

    def to_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the fit as JSON atomically (temporary file, then rename); return the path."""
        p = ensure_writable_file(path, field="path")
        atomic_write_text(p, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return p

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaplaceFit:
        """Inverse of :meth:`to_dict`, checked whole against the schema of
        :func:`tomstats.glmm.fit_file.check_ml_dict` (``ValueError`` naming the field)."""
        if check_ml_dict(dict(d) if isinstance(d, Mapping) else d) != _FORMAT:
            raise ValueError(f"not a tomstats Laplace fit (\"format\": {d.get('format')!r}; "
                             f"expected {_FORMAT!r})")
        try:
            p, K = len(d["coef_names"]), len(d["groups"])
            n_levels = tuple(int(v) for v in d["n_levels"])
            return cls(
                formula=str(d["formula"]), family=str(d["family"]), n_obs=int(d["n_obs"]),
                coef_names=tuple(map(str, d["coef_names"])), beta=_array(d["beta"], (p,)),
                se=_array(d["se"], (p,)), cov=_array(d["cov"], (p, p)),
                groups=tuple(map(str, d["groups"])), sd=_array(d["sd"], (K,)),
                n_levels=n_levels,
                levels=tuple(tuple(map(str, v)) for v in d["levels"]),
                ranef=_array(d["ranef"], (sum(n_levels),)),
                loglik=float(_array(d["loglik"])), converged=bool(d["converged"]),
                iterations=int(d["iterations"]), n_rows=int(d["n_rows"]),
                se_method=str(d.get("se_method", "hessian")),
                aggregated=bool(d.get("aggregated", False)),
                data_hash=str(d.get("data_hash", "")),
                created_at=str(d.get("created_at", "")),
                versions=dict(d.get("versions", {})),
                separation=tuple(map(str, d.get("separation", ()))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed Laplace fit: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> LaplaceFit:
        """Read a fit written by :meth:`to_json`, checked whole by the one fit reader
        (:func:`tomstats.glmm.fit_file.load_ml_dict`)."""
        fmt, d = load_ml_dict(path)
        if fmt != _FORMAT:
            raise FitFileError(f"{str(path)!r} is a {fmt!r} fit, not {_FORMAT!r}")
        return cls.from_dict(d)


# ---------------------------------------------------------------------------- fitting


def _log_binom(y: np.ndarray, n: np.ndarray) -> float:
    """:func:`tomstats.glmm.glm.log_binomial_coefficients` of host arrays, in float64."""
    # lazy: the JAX stack runs the fit only; a LaplaceFit is read, printed and saved without it
    import jax
    import jax.numpy as jnp

    from tomstats.glmm.glm import log_binomial_coefficients

    with jax.enable_x64(True):
        return float(log_binomial_coefficients(jnp.asarray(y, jnp.float64),
                                               jnp.asarray(n, jnp.float64)))


#: Largest fitted :math:`|\eta|` of a fit that may skip the separation check (see
#: :func:`_separation_possible`).
_SEPARATION_ETA = 8.0


def _separation_possible(X: np.ndarray, beta: np.ndarray, codes: np.ndarray,
                         n_levels: tuple[int, ...], ranef: np.ndarray, converged: bool,
                         tol: float | None) -> bool:
    r"""Whether a random-intercept fit needs the separation check (a linear program,
    :func:`tomstats.glmm.separation.separation`, whose SciPy import costs more than the fit).

    Separated data have no maximum: along the separating direction :math:`d` the deviance
    keeps falling, with gradient and curvature both proportional to the weights
    :math:`p_i(1-p_i) pprox e^{-|\eta_i|}` of the separated rows, so the Newton decrement
    there is of order :math:`e^{-|\eta_i|}`. A fit that meets the tolerance ``tol`` on the
    decrement must therefore have pushed those rows to :math:`|\eta_i| \gtrsim -\ln
    \mathrm{tol}` (23 at the default :math:`10^{-10}`). So the check is needed only when the
    fit did not converge, or some fitted :math:`|\eta_i|` (fixed part plus conditional modes)
    exceeds :math:`\min(8, -	frac12\ln\mathrm{tol})`.
    """
    if not converged:
        return True
    off = np.concatenate([[0], np.cumsum(n_levels)[:-1]]).astype(int)
    eta = X @ beta
    for k in range(codes.shape[1]):
        eta = eta + ranef[off[k] + codes[:, k]]
    limit = min(_SEPARATION_ETA, -0.5 * math.log(1e-10 if tol is None else tol))
    return not bool(np.all(np.isfinite(eta))) or float(np.max(np.abs(eta))) > limit


def _check_random_intercepts(spec: Any, md: Any) -> None:
    for t in spec.random:
        effects = list(md.coords[f"{t.key}_effect"])
        if effects != ["Intercept"]:
            laplace = hint("backend='laplace'", "--backend laplace")
            raise InputError(
                f"{laplace} fits formula models with random intercepts only; "
                f"{t.label} has the varying effect(s) {effects}. Write (1 | {t.group}), or "
                f"use a sampler backend (numpyro, pymc) for random slopes")


def fit_laplace(
    data: pd.DataFrame,
    model: str,
    *,
    family: str | None = None,
    columns: Mapping[str, str] | None = None,
    max_iter: int = 100,
    tol: float | None = None,
    se: str = "hessian",
    max_inner: int = 50,
    **spec_options: Any,
) -> LaplaceFit:
    """Maximum-likelihood fit of a random-intercept logit GLMM (Laplace approximation).

    Parameters
    ----------
    data : pandas.DataFrame
        As for :func:`tomstats.glmm.fit` (standard or mapped columns).
    model : str
        lme4-style formula with random intercepts only, e.g. ``"correct ~ tom_order *
        log_context + (1 | model) + (1 | item)"`` or ``"successes | trials(n) ~ x +
        (1 | model)"``; no random term: logistic regression.
    family : {"bernoulli", "binomial"}, optional
        As for :func:`tomstats.glmm.fit`.
    columns : mapping, optional
        ``{standard_name: your_column}`` renaming.
    max_iter, tol, se, max_inner
        Passed to :func:`tomstats.glmm.laplace.laplace_fit` (``se``: ``"hessian"``, lme4's
        default, or ``"conditional"``). Without random terms ``max_iter``/``tol`` go to
        :func:`tomstats.glmm.glm.logistic_fit` and the covariance is :math:`(X^\\top W X)^{-1}`.
    **spec_options
        ``aggregate`` (``"auto"``: sum identical rows into binomial cells when that halves
        the observations; no estimate changes), ``trials``, ``center`` (no reported number
        changes). Priors and sampler options do not apply.

    Returns
    -------
    LaplaceFit
        A :class:`LaplaceConvergenceWarning` is issued when the fit did not converge.
    """
    import jax  # lazy, as in _log_binom: the JAX stack only to fit

    laplace = hint("backend='laplace'", "--backend laplace")
    if not isinstance(model, str) or "~" not in model:
        raise InputError(
            f"{laplace} fits formula models with random intercepts only, e.g. "
            f"'correct ~ tom_order + (1 | model) + (1 | item)'; got "
            f"{hint(f'model={model!r}', f'--model {model}')} (the structural model needs a "
            f"sampler backend: numpyro or pymc)")
    bad = sorted(set(spec_options) - set(_SPEC_OPTIONS))
    if bad:
        raise InputError(f"{laplace} does not take the option(s) {bad} (priors and "
                         f"parametrisation concern the Bayesian samplers); it takes "
                         f"{sorted(_SPEC_OPTIONS + LAPLACE_OPTIONS)}")
    if se not in ("hessian", "conditional"):
        raise ValueError(f"se must be 'hessian' or 'conditional', got {se!r}")
    for name, v in (("max_iter", max_iter), ("max_inner", max_inner)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if tol is not None and not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    df = prepare_data(data, columns).reset_index(drop=True)
    spec, md = build_design(model, df, family=family, **spec_options)
    assert isinstance(spec, FormulaSpec)
    _check_random_intercepts(spec, md)

    Xc = np.asarray(md.arrays["X"], dtype=np.float64)
    mean = np.asarray(md.arrays["X_mean"], dtype=np.float64)
    y = md.y.astype(np.float64)
    trials = None if md.trials is None else md.trials.astype(np.float64)
    K = len(spec.random)
    enable_compilation_cache()
    with jax.enable_x64(True):
        if K == 0:  # lazy, as jax above: the JAX solvers
            from tomstats.glmm.glm import logistic_fit

            r = logistic_fit(Xc, y, 1.0 if trials is None else trials, max_iter=int(max_iter),
                             tol=tol)
            sd, ranef = np.zeros(0), np.zeros(0)
            se_method = "hessian"
        else:
            from tomstats.glmm.laplace import laplace_fit

            codes = np.column_stack([md.arrays[f"g_{t.key}"] for t in spec.random])
            n_levels = tuple(len(md.coords[t.dim]) for t in spec.random)
            r = laplace_fit(Xc, y, trials, codes, n_levels, max_iter=int(max_iter), tol=tol,
                            se=se, max_inner=int(max_inner), bucket=True)
            sd, ranef = np.asarray(r.sd, dtype=float), np.asarray(r.ranef, dtype=float)
            se_method = se
        beta_c = np.asarray(r.beta, dtype=float)
        cov_c = np.asarray(r.cov, dtype=float)
        loglik = float(r.loglik)
        converged = bool(r.converged)
        iterations = int(r.iterations)
    separated: tuple[str, ...] = ()
    if K == 0 or _separation_possible(Xc, beta_c, codes, n_levels, ranef, converged,
                                            tol):
        separated = separation(Xc, y, trials, md.coords["coef"])
    converged = converged and not separated
    # centred design → the user's columns: beta = A beta_c, V = A V_c A'
    A = np.eye(Xc.shape[1])
    if md.intercept is not None:
        A[md.intercept] -= mean
        A[md.intercept, md.intercept] = 1.0
    beta = A @ beta_c
    cov = A @ cov_c @ A.T
    cov = 0.5 * (cov + cov.T)
    with np.errstate(invalid="ignore"):
        se_ = np.sqrt(np.diagonal(cov))
    if spec.aggregate:  # ℓ of the data rows, not of the binomial cells
        y_rows, n_rows_tr = response_arrays(df, spec.response, spec.trials, spec.family)
        n_rows_tr = np.ones_like(y_rows) if n_rows_tr is None else n_rows_tr
        n_cells = np.ones_like(md.y) if md.trials is None else md.trials
        loglik += (_log_binom(y_rows.astype(float), n_rows_tr.astype(float))
                   - _log_binom(md.y.astype(float), n_cells.astype(float)))
    used = used_columns(spec, df)
    res = LaplaceFit(
        formula=spec.formula, family=spec.family, n_obs=md.n_obs,
        coef_names=tuple(md.coords["coef"]), beta=beta,
        se=se_, cov=cov, groups=tuple(t.group for t in spec.random), sd=sd,
        n_levels=tuple(len(md.coords[t.dim]) for t in spec.random),
        levels=tuple(tuple(map(str, md.coords[t.dim])) for t in spec.random),
        ranef=ranef, loglik=loglik, converged=converged, iterations=iterations,
        n_rows=len(df), se_method=se_method, aggregated=bool(spec.aggregate),
        data_hash=data_hash(df, used),
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        versions=package_versions("laplace"), separation=separated)
    if separated:
        warnings.warn(
            f"tomstats.glmm.fit(backend='laplace'): fitted probabilities numerically 0 or 1 "
            f"occurred: the data are separated by {', '.join(separated)} (a level or a value "
            f"range with all 0s or all 1s), so their maximum-likelihood estimates are "
            f"infinite; do not trust the estimates. Try: drop or merge the separating "
            f"level, or a Bayesian fit (its priors keep the estimates finite)",
            LaplaceSeparationWarning, stacklevel=3)
    elif not converged:
        warnings.warn(
            f"tomstats.glmm.fit(backend='laplace'): the fit of {spec.formula!r} did not "
            f"converge after {iterations} iteration(s) (max_iter={max_iter}); do not trust "
            f"the estimates. Try: rescale predictors, raise max_iter, simplify the random "
            f"effects, or check for separation (a group or predictor value with all 0s or "
            f"all 1s)", LaplaceConvergenceWarning, stacklevel=3)
    return res


def _fit_line(fit: Any, singular: bool) -> str:
    """The one-line ``repr`` of a maximum-likelihood fit (:class:`LaplaceFit`, and
    :class:`~tomstats.glmm.lme_result.LmeFit`)."""
    from tomstats._printable import summary_line

    state = "converged" if fit.converged else f"not converged ({fit.iterations} iterations)"
    return summary_line(fit, fit.formula, f"{fit.family}, {fit.n_rows} rows",
                        f"logLik {float(fit.loglik):.2f}", state,
                        "singular" if singular else "")

