r"""The result of :func:`tomstats.glmm.lme.fit_lme`: what lme4's ``summary(glmer(...))``,
``VarCorr``, ``ranef(condVar = TRUE)``, ``confint``, ``predict`` and ``anova`` report.

- Variance components: per term :math:`\Sigma_k = T_kT_k^\top` (:math:`\sigma = 1` for the
  binomial family), standard deviations :math:`\sqrt{\Sigma_{k,ii}}` and correlations
  :math:`\Sigma_{k,ij}/\sqrt{\Sigma_{k,ii}\Sigma_{k,jj}}`.
- Singular fit (lme4's ``isSingular(tol = 1e-4)``): some diagonal element of a
  :math:`T_k` (an element of :math:`\theta` whose lme4 lower bound is 0) below
  :math:`10^{-4}`: a variance at 0 or a correlation at :math:`\pm 1`.
- :math:`\ell` (lme4's ``logLik()``), :math:`d = p + \dim\theta` parameters,
  :math:`\mathrm{AIC} = -2\ell + 2d`, :math:`\mathrm{BIC} = -2\ell + d\ln N` (:math:`N` data
  rows), deviance :math:`-2\ell`, residual df :math:`N - d`.
- Wald tests and intervals: :math:`z_j = \hat\beta_j/\mathrm{se}_j`,
  :math:`p_j = 2\Phi(-|z_j|)`, :math:`\hat\beta_j \pm z_{1-a/2}\mathrm{se}_j`.
- Profile-likelihood intervals for fixed effects (lme4's ``confint(method = "profile")``):
  the :math:`\beta_j` where the signed root deviance
  :math:`\zeta(\beta_j) = \operatorname{sign}(\beta_j - \hat\beta_j)
  \sqrt{D_p(\beta_j) - D(\hat\beta, \hat\theta)}` equals :math:`\mp z_{1-a/2}`, with
  :math:`D_p(\beta_j)` the Laplace deviance minimised over :math:`\theta` and the other
  :math:`\beta` (each a refit with :math:`\beta_j x_j` as an offset).
- Likelihood-ratio test of nested fits (lme4's ``anova(m0, m1)``, :func:`lme_anova`):
  :math:`\chi^2 = 2(\ell_1 - \ell_0)` on :math:`d_1 - d_0` degrees of freedom.
- Joint Wald tests per term (``car::Anova`` Type II/III): :mod:`tomstats.glmm.wald`, printed
  by :func:`format_wald`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tomstats.glmm._theta import n_theta, theta_index, theta_onehot
from tomstats.glmm.fit_file import JSON_FORMAT_VERSION, FitFileError, check_ml_dict, load_ml_dict
from tomstats.glmm.laplace_backend import (
    SINGULAR_MESSAGE,
    LaplaceConvergenceWarning,
    _array,
    _fit_line,
    _floats,
    _fmt_p,
    _stars,
)

__all__ = ["LmeTerm", "LmeFit", "LmeConvergenceWarning", "lme_anova", "format_anova",
           "format_wald", "wald_text", "fit_structure", "nesting_problem", "SINGULAR_TOL",
           "SINGULAR_MESSAGE"]

_FORMAT = "tomstats-lme-fit"
_FORMAT_VERSION = JSON_FORMAT_VERSION
#: lme4's ``isSingular`` tolerance on the diagonal elements of the :math:`T_k`.
SINGULAR_TOL = 1e-4


class LmeConvergenceWarning(LaplaceConvergenceWarning):
    """The maximum-likelihood (Laplace) fit did not converge; its estimates may be wrong."""


@dataclass(frozen=True)
class LmeTerm:
    """One random-effects term as fitted.

    Attributes
    ----------
    group : str
        Grouping factor (``"model"``, ``"model:template"`` for nesting).
    effects : tuple of str
        Names of the varying effects (``"(Intercept)"``, ``"x"``).
    correlated : bool
        ``|`` (a full covariance) or ``||`` (independent effects).
    levels : tuple of str
        Level labels of the grouping factor (sorted).
    expr : str
        The effects' formula as written (``"1 + x"``).
    """

    group: str
    effects: tuple[str, ...]
    correlated: bool
    levels: tuple[str, ...]
    expr: str = ""

    @property
    def d(self) -> int:
        """Effects per level."""
        return len(self.effects)

    @property
    def q(self) -> int:
        """Levels of the grouping factor."""
        return len(self.levels)

    @property
    def n_theta(self) -> int:
        """:math:`\\theta` elements of the term: :math:`d(d+1)/2` or :math:`d`."""
        return n_theta(self.d, self.correlated)

    @property
    def label(self) -> str:
        """The term as lme4 writes it: ``(1 + x | g)``."""
        return f"({self.expr or ' + '.join(self.effects)} {'|' if self.correlated else '||'} "\
               f"{self.group})"

    def theta_index(self) -> tuple[tuple[int, int], ...]:
        """(row, column) of :math:`T` of each :math:`\\theta` element (lme4's order)."""
        return theta_index(self.d, self.correlated)

    def factor(self, theta: np.ndarray) -> np.ndarray:
        """:math:`T` from the term's :math:`\\theta` elements (shape ``(..., n_theta)``;
        leading axes, e.g. posterior draws, give ``(..., d, d)``)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1:] != (self.n_theta,):
            raise ValueError(f"term {self.label!r}: {self.n_theta} theta elements expected, "
                             f"got shape {theta.shape}")
        return np.tensordot(theta, theta_onehot(self.d, self.correlated), axes=1)


@dataclass(frozen=True)
class LmeFit:
    r"""A maximum-likelihood (Laplace) GLMM fit with general random-effects terms.

    Attributes
    ----------
    formula : str
        The formula as given.
    family : {"bernoulli", "binomial"}
    n_obs, n_rows : int
        Observations the likelihood evaluated (binomial cells when aggregated) and data
        rows (lme4's ``nobs()``, the :math:`N` of BIC).
    coef_names : tuple of str
    beta, se : ndarray, shape (p,)
    cov : ndarray, shape (p, p)
        Covariance of :math:`\hat\beta` (lme4's ``vcov()``).
    se_method : {"hessian", "conditional"}
        How ``cov`` was computed ("conditional" also when the Hessian was not positive
        definite, as lme4 falls back).
    terms : tuple of LmeTerm
    theta : ndarray
        :math:`\hat\theta`, term by term (lme4's ``getME(m, "theta")`` within a term).
    b : ndarray
        Conditional modes, term by term, level-major (each level's effects together).
    b_var : ndarray
        Conditional covariance of each level's effects, term by term, each
        :math:`d_k\times d_k` block row-major.
    loglik : float
        Laplace log-likelihood of the data rows (lme4's ``logLik()``).
    converged : bool
    iterations : int
    grad_norm : float
        Largest absolute gradient element of the deviance at the optimum.
    hess_min_eig : float
        Smallest eigenvalue of the deviance's Hessian over :math:`(\theta, \beta)`.
    aggregated : bool
    data_hash, created_at : str
    versions : dict
    pearson : ndarray, shape (n_rows,)
        Pearson residuals of the data rows at the conditional modes.
    """

    formula: str
    family: str
    n_obs: int
    n_rows: int
    coef_names: tuple[str, ...]
    beta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    se_method: str
    terms: tuple[LmeTerm, ...]
    theta: np.ndarray
    b: np.ndarray
    b_var: np.ndarray
    loglik: float
    converged: bool
    iterations: int
    grad_norm: float = float("nan")
    hess_min_eig: float = float("nan")
    aggregated: bool = False
    data_hash: str = ""
    created_at: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    pearson: np.ndarray = field(default_factory=lambda: np.zeros(0))
    design: Any = field(default=None, compare=False, repr=False)

    # ------------------------------------------------------------------ parameters
    def _theta_slices(self) -> list[slice]:
        out, o = [], 0
        for t in self.terms:
            out.append(slice(o, o + t.n_theta))
            o += t.n_theta
        return out

    def factors(self) -> list[np.ndarray]:
        """:math:`T_k` of each term."""
        return [t.factor(self.theta[s]) for t, s in zip(self.terms, self._theta_slices(),
                                                         strict=True)]

    def covariances(self) -> list[np.ndarray]:
        """:math:`\\Sigma_k = T_kT_k^\\top` of each term."""
        return [T @ T.T for T in self.factors()]

    @property
    def n_params(self) -> int:
        """:math:`d = p + \\dim\\theta` (lme4's ``attr(logLik(m), "df")``)."""
        return len(self.coef_names) + int(self.theta.size)

    @property
    def deviance(self) -> float:
        """:math:`-2\\ell`."""
        return -2.0 * self.loglik

    @property
    def aic(self) -> float:
        """:math:`-2\\ell + 2d`."""
        return self.deviance + 2.0 * self.n_params

    @property
    def bic(self) -> float:
        """:math:`-2\\ell + d\\ln N`."""
        return self.deviance + math.log(self.n_rows) * self.n_params

    @property
    def df_resid(self) -> int:
        """:math:`N - d`."""
        return self.n_rows - self.n_params

    def singular_terms(self) -> list[LmeTerm]:
        """Terms with a diagonal element of :math:`T_k` below :data:`SINGULAR_TOL`."""
        return [t for t, T in zip(self.terms, self.factors(), strict=True)
                if np.any(np.diagonal(T) < SINGULAR_TOL)]

    @property
    def singular(self) -> bool:
        """lme4's ``isSingular()``."""
        return bool(self.singular_terms())

    def singular_advice(self) -> str:
        """What lme4 says of a singular fit, and what to do about it (empty otherwise)."""
        bad = self.singular_terms()
        if not bad:
            return ""
        parts = []
        for t, S in zip(self.terms, self.covariances(), strict=True):
            if t not in bad:
                continue
            sd = np.sqrt(np.clip(np.diagonal(S), 0.0, None))
            zero = [e for e, s in zip(t.effects, sd, strict=True) if s < SINGULAR_TOL]
            if zero:
                parts.append(f"{t.label}: SD of {', '.join(zero)} ~ 0")
            else:
                parts.append(f"{t.label}: a correlation at +-1 (covariance of rank < {t.d})")
        return (f"{SINGULAR_MESSAGE}\n  {'; '.join(parts)}. The data do not support this "
                f"random-effects structure: drop the effect with variance ~0 (or make the "
                f"term uncorrelated with '||'), refit, and compare the two fits' JSON by "
                f"a likelihood-ratio test with tomstats compare; fixed effects and their "
                f"SEs stay valid, the variance components at the boundary are not "
                f"estimates to report")

    # ------------------------------------------------------------------ tables
    def varcorr(self) -> pd.DataFrame:
        """Variance components as lme4's ``as.data.frame(VarCorr(m))``: ``group``,
        ``var1``, ``var2`` (empty for a variance), ``vcov`` (variance or covariance) and
        ``sdcor`` (SD or correlation); variances of every term first, then its
        correlations."""
        rows = []
        for t, S in zip(self.terms, self.covariances(), strict=True):
            sd = np.sqrt(np.clip(np.diagonal(S), 0.0, None))
            for i, e in enumerate(t.effects):
                rows.append((t.group, e, "", S[i, i], sd[i]))
            if t.correlated:
                for i in range(t.d):
                    for j in range(i + 1, t.d):
                        with np.errstate(invalid="ignore", divide="ignore"):
                            c = S[i, j] / (sd[i] * sd[j])
                        rows.append((t.group, t.effects[i], t.effects[j], S[i, j], c))
        return pd.DataFrame(rows, columns=["group", "var1", "var2", "vcov", "sdcor"])

    def fixed_effects(self, level: float = 0.95) -> pd.DataFrame:
        """Estimates with Wald tests and intervals: ``estimate``, ``se``, ``z``, ``p``,
        ``ci_lower``, ``ci_upper`` (index: coefficient names)."""
        from scipy.special import ndtr, ndtri  # scipy.stats would load its optimiser

        _check_level(level)
        z = self.beta / self.se
        q = float(ndtri(0.5 + level / 2.0))
        return pd.DataFrame(
            {"estimate": self.beta, "se": self.se, "z": z, "p": 2.0 * ndtr(-np.abs(z)),
             "ci_lower": self.beta - q * self.se, "ci_upper": self.beta + q * self.se},
            index=pd.Index(list(self.coef_names), name="coef"))

    def random_effects(self) -> pd.DataFrame:
        """Conditional modes and conditional SDs (lme4's ``ranef(condVar = TRUE)``):
        ``group``, ``level``, ``effect``, ``estimate``, ``cond_sd``."""
        rows, o, ov = [], 0, 0
        for t in self.terms:
            bk = self.b[o: o + t.q * t.d].reshape(t.q, t.d)
            vk = self.b_var[ov: ov + t.q * t.d * t.d].reshape(t.q, t.d, t.d)
            o += t.q * t.d
            ov += t.q * t.d * t.d
            for a, lv in enumerate(t.levels):
                for i, e in enumerate(t.effects):
                    rows.append((t.group, lv, e, bk[a, i], math.sqrt(max(vk[a, i, i], 0.0))))
        return pd.DataFrame(rows, columns=["group", "level", "effect", "estimate", "cond_sd"])

    def anova_wald(self, type: int | str = 2) -> pd.DataFrame:
        """Type II or III Wald chi-square test of each fixed-effect term, as
        ``car::Anova(fit, type = "II" | "III")``: columns ``Chisq``, ``Df``, ``p``
        (:func:`tomstats.glmm.wald.wald_table`, whose docstring states the formulas; print
        with :func:`tomstats.glmm.lme_result.format_wald`)."""
        from tomstats.glmm.wald import wald_anova

        return wald_anova(self, type)

    def confint(self, level: float = 0.95, method: str = "wald") -> pd.DataFrame:
        """Intervals of the fixed effects: ``method="wald"`` or ``"profile"`` (module
        docstring; needs the in-memory fit, not one read from JSON). Columns ``lower``,
        ``upper``."""
        _check_level(level)
        if method == "wald":
            t = self.fixed_effects(level)
            return pd.DataFrame({"lower": t["ci_lower"], "upper": t["ci_upper"]})
        if method != "profile":
            raise ValueError(f"confint: method must be 'wald' or 'profile', got {method!r}")
        if self.design is None:
            raise ValueError("confint(method='profile') needs the data: refit with fit_lme "
                             "(a fit read from JSON has none)")
        from tomstats.glmm.lme_profile import profile_intervals

        lo, hi = profile_intervals(self, level)
        return pd.DataFrame({"lower": lo, "upper": hi},
                            index=pd.Index(list(self.coef_names), name="coef"))

    def predict(self, newdata: pd.DataFrame | None = None, *, random: bool = True,
                type: str = "response") -> np.ndarray:
        """Predictions (lme4's ``predict``): ``random=True`` adds the conditional modes of
        the levels seen in the fit (0 for new levels, lme4's ``allow.new.levels``),
        ``random=False`` is the population level (``re.form = NA``); ``type`` is
        ``"response"`` (probability) or ``"link"`` (logit)."""
        from tomstats.glmm.lme_predict import predict

        return predict(self, newdata, random=random, type=type)

    # ------------------------------------------------------------------ printing
    def __repr__(self) -> str:
        """One line (formula, rows, log-likelihood, convergence); ``print()`` shows the
        lme4-style summary."""
        return _fit_line(self, self.singular)

    def __str__(self) -> str:
        lines = ["Generalized linear mixed model fit by maximum likelihood (Laplace",
                 "  Approximation) [tomstats]",
                 " Family: binomial  ( logit )", f"Formula: {self.formula}", ""]
        stats = pd.DataFrame([[self.aic, self.bic, self.loglik, self.deviance, self.df_resid]],
                             columns=["AIC", "BIC", "logLik", "deviance", "df.resid"])
        lines += [stats.to_string(index=False, float_format=lambda v: f"{v:.1f}"), ""]
        if self.pearson.size:
            qs = np.quantile(self.pearson[np.isfinite(self.pearson)], [0, .25, .5, .75, 1])
            lines += ["Scaled residuals: ",
                      pd.DataFrame([qs], columns=["Min", "1Q", "Median", "3Q", "Max"])
                      .to_string(index=False, float_format=lambda v: f"{v:.4f}"), ""]
        lines += ["Random effects:"] + _format_varcorr(self)
        grp = {}
        for t in self.terms:
            grp.setdefault(t.group, t.q)
        lines += [f"Number of obs: {self.n_rows}, groups:  "
                  + "; ".join(f"{g}, {q}" for g, q in grp.items()), ""]
        s = self.fixed_effects()
        fe = pd.DataFrame({"Estimate": s["estimate"].map(lambda v: f"{v:.5g}"),
                           "Std. Error": s["se"].map(lambda v: f"{v:.5g}"),
                           "z value": s["z"].map(lambda v: f"{v:.3f}"),
                           "Pr(>|z|)": s["p"].map(_fmt_p), "": s["p"].map(_stars)},
                          index=s.index)
        fe.index.name = None
        lines += ["Fixed effects:", fe.to_string(), "---",
                  "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
        p = len(self.coef_names)
        if 1 < p <= 12:
            with np.errstate(invalid="ignore", divide="ignore"):
                corr = self.cov / np.outer(self.se, self.se)
            short = [_abbrev(c) for c in self.coef_names]
            lines += ["", "Correlation of Fixed Effects:",
                      " " * (max(len(s) for s in short) + 1) + " ".join(
                          f"{s:<6}" for s in short[:-1])]
            w = max(len(s) for s in short)
            for i in range(1, p):
                lines.append(f"{short[i]:<{w}} " + " ".join(
                    f"{corr[i, j]:>6.3f}" for j in range(i)))
        if self.se_method == "conditional":
            lines.append("(standard errors from the penalised system at fixed theta: the "
                         "Hessian was not positive definite or se='conditional')")
        if self.singular:
            lines.append(self.singular_advice())
        if not self.converged:
            lines.append(f"WARNING: the fit did not converge ({self.iterations} iterations, "
                         f"max |gradient| {self.grad_norm:.2g}); the estimates are unreliable")
        return "\n".join(lines)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (non-finite numbers as ``null``)."""
        return {
            "format": _FORMAT, "format_version": _FORMAT_VERSION, "backend": "laplace",
            "formula": self.formula, "family": self.family, "n_obs": self.n_obs,
            "n_rows": self.n_rows, "coef_names": list(self.coef_names),
            "beta": _floats(self.beta), "se": _floats(self.se), "cov": _floats(self.cov),
            "se_method": self.se_method,
            "terms": [{"group": t.group, "effects": list(t.effects),
                       "correlated": t.correlated, "levels": list(t.levels),
                       "expr": t.expr} for t in self.terms],
            "theta": _floats(self.theta), "b": _floats(self.b), "b_var": _floats(self.b_var),
            "loglik": _floats(self.loglik), "aic": _floats(self.aic), "bic": _floats(self.bic),
            "singular": self.singular, "converged": self.converged,
            "iterations": self.iterations, "grad_norm": _floats(self.grad_norm),
            "hess_min_eig": _floats(self.hess_min_eig), "aggregated": self.aggregated,
            "data_hash": self.data_hash, "created_at": self.created_at,
            "versions": dict(self.versions), "pearson": _floats(self.pearson),
        }

    def to_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the fit as JSON atomically; return the path."""
        from tomstats._io import atomic_write_text, ensure_writable_file

        p = ensure_writable_file(path, field="path")
        atomic_write_text(p, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return p

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LmeFit:
        """Inverse of :meth:`to_dict`, checked whole against the schema of
        :func:`tomstats.glmm.fit_file.check_ml_dict` (``ValueError`` naming the field; the
        stored formula and terms are data, re-read by the formula language)."""
        if check_ml_dict(dict(d) if isinstance(d, Mapping) else d) != _FORMAT:
            raise ValueError(f"not a tomstats lme fit (\"format\": {d.get('format')!r}; "
                             f"expected {_FORMAT!r})")
        try:
            terms = []
            for t in d["terms"]:
                terms.append(LmeTerm(group=str(t["group"]),
                                     effects=tuple(map(str, t["effects"])),
                                     correlated=bool(t["correlated"]),
                                     levels=tuple(map(str, t["levels"])),
                                     expr=str(t.get("expr", ""))))
            p = len(d["coef_names"])
            m = sum(t.n_theta for t in terms)
            nb = sum(t.q * t.d for t in terms)
            nv = sum(t.q * t.d * t.d for t in terms)
            return cls(
                formula=str(d["formula"]), family=str(d["family"]), n_obs=int(d["n_obs"]),
                n_rows=int(d["n_rows"]), coef_names=tuple(d["coef_names"]),
                beta=_array(d["beta"], (p,)), se=_array(d["se"], (p,)),
                cov=_array(d["cov"], (p, p)), se_method=str(d.get("se_method", "hessian")),
                terms=tuple(terms), theta=_array(d["theta"], (m,)), b=_array(d["b"], (nb,)),
                b_var=_array(d["b_var"], (nv,)), loglik=float(_array(d["loglik"])),
                converged=bool(d["converged"]), iterations=int(d["iterations"]),
                grad_norm=float(_array(d.get("grad_norm"))),
                hess_min_eig=float(_array(d.get("hess_min_eig"))),
                aggregated=bool(d.get("aggregated", False)),
                data_hash=str(d.get("data_hash", "")), created_at=str(d.get("created_at", "")),
                versions=dict(d.get("versions", {})),
                pearson=_array(d.get("pearson", [])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed lme fit: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> LmeFit:
        """Read a fit written by :meth:`to_json`, checked whole by the one fit reader
        (:func:`tomstats.glmm.fit_file.load_ml_dict`)."""
        fmt, d = load_ml_dict(path)
        if fmt != _FORMAT:
            raise FitFileError(f"{str(path)!r} is a {fmt!r} fit, not {_FORMAT!r}")
        return cls.from_dict(d)


def _check_level(level: float) -> None:
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def _abbrev(name: str) -> str:
    """Short column label of the fixed-effect correlation table (R's ``abbreviate``-like)."""
    if name == "(Intercept)":
        return "(Intr)"
    return name if len(name) <= 6 else name[:6]


def _format_varcorr(fit: LmeFit) -> list[str]:
    """The "Random effects:" table of ``summary(glmer)``: Groups, Name, Variance, Std.Dev.,
    Corr (lower triangle beside each effect after the first)."""
    rows = []
    seen: dict[str, int] = {}
    for t, S in zip(fit.terms, fit.covariances(), strict=True):
        sd = np.sqrt(np.clip(np.diagonal(S), 0.0, None))
        blocks = [(list(range(t.d)), True)] if t.correlated else [([i], False)
                                                                 for i in range(t.d)]
        for idx, corr in blocks:
            n = seen.get(t.group, 0)
            seen[t.group] = n + 1
            label = t.group if n == 0 else f"{t.group}.{n}"
            for r, i in enumerate(idx):
                cells = []
                if corr:
                    for j in idx[:r]:
                        with np.errstate(invalid="ignore", divide="ignore"):
                            cells.append(f"{S[i, j] / (sd[i] * sd[j]):.2f}")
                rows.append((label if r == 0 else "", t.effects[i], S[i, i], sd[i],
                             " ".join(f"{c:>5}" for c in cells)))
    wg = max(6, *(len(r[0]) for r in rows))
    wn = max(4, *(len(r[1]) for r in rows))
    corr = " Corr" if any(t.correlated and t.d > 1 for t in fit.terms) else ""
    out = [f" {'Groups':<{wg}} {'Name':<{wn}} {'Variance':>9} {'Std.Dev.':>9}{corr}"]
    out += [f" {g:<{wg}} {n:<{wn}} {v:>9.4g} {s:>9.4g} {c}".rstrip() for g, n, v, s, c in rows]
    return out


def fit_structure(fit: Any) -> tuple[set[str], dict[str, set[str]], set[tuple[str, str, str]]]:
    """What a fit estimates: its fixed effects, the varying effects of each grouping factor,
    and the (group, effect, effect) pairs whose correlation it estimates (an LmeFit's terms,
    or the random intercepts of a LaplaceFit), with lme4's name ``(Intercept)``."""
    terms = getattr(fit, "terms", None)
    if terms is None:
        terms = [LmeTerm(group=g, effects=("(Intercept)",), correlated=True, levels=())
                 for g in getattr(fit, "groups", ())]
    effects: dict[str, set[str]] = {}
    pairs: set[tuple[str, str, str]] = set()
    for t in terms:
        effects.setdefault(t.group, set()).update(t.effects)
        if t.correlated:
            pairs.update((t.group, a, b) for a in t.effects for b in t.effects if a < b)
    fixed = {"(Intercept)" if c == "Intercept" else c for c in fit.coef_names}  # LaplaceFit's
    return fixed, effects, pairs


def nesting_problem(small: Any, big: Any) -> str:
    """Why ``small`` is not a special case of ``big`` (empty when it is): every fixed effect
    of ``small`` is one of ``big``'s, and so is every varying effect of a grouping factor and
    every correlation it estimates (a model made by dropping terms, effects or correlations).
    Coefficients are matched by name."""
    fixed_s, eff_s, pairs_s = fit_structure(small)
    fixed_b, eff_b, pairs_b = fit_structure(big)
    missing = sorted(fixed_s - fixed_b)
    if missing:
        return f"the fixed effect(s) {', '.join(missing)}"
    for g, effects in eff_s.items():
        extra = sorted(effects - eff_b.get(g, set()))
        if extra:
            return f"the random effect(s) {', '.join(extra)} of {g!r}"
    extra_pairs = sorted(pairs_s - pairs_b)
    if extra_pairs:
        g, a, b = extra_pairs[0]
        return f"the correlation of {a} and {b} within {g!r}"
    return ""


def _response(formula: str) -> tuple[str | None, ...]:
    """The columns a formula's left-hand side names: (successes, trials, failures), so that
    ``k | trials(n)`` and ``cbind(k, n - k)`` are one response; the text before ``~`` for
    a formula outside the language."""
    from tomstats._expr import ExpressionError, check_formula

    try:
        parts = check_formula(formula)
    except ExpressionError:
        return (formula.split("~")[0].strip(),)
    return parts.response, parts.trials, parts.failures


def lme_anova(*fits: Any, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Likelihood-ratio tests of nested fits of the same data (lme4's ``anova(m0, m1)``).

    Fits are ordered by their number of parameters :math:`d`; each row after the first tests
    it against the row before: ``Chisq`` :math:`= 2(\\ell_i - \\ell_{i-1})` (clipped at 0),
    ``Df`` :math:`= d_i - d_{i-1}`, ``p`` the :math:`\\chi^2_{Df}` upper tail. Columns
    ``npar``, ``AIC``, ``BIC``, ``logLik``, ``deviance``, ``Chisq``, ``Df``, ``p``.
    A test of a variance component at 0 (on the boundary) is conservative, as in lme4.

    Raises
    ------
    ValueError
        Fewer than two fits, fits of different data (rows or response), or a fit that is not
        nested in the next larger one (:func:`nesting_problem`: a likelihood-ratio test
        compares a model with a special case of it).
    """
    from scipy.special import chdtrc

    if len(fits) < 2:
        raise ValueError("lme_anova: give at least two fits")
    for f in fits:  # an LmeFit, or the random-intercept LaplaceFit (same statistics)
        if not all(hasattr(f, a) for a in ("loglik", "n_params", "aic", "bic", "n_rows",
                                           "formula")):
            raise ValueError(f"lme_anova: every fit must be a maximum-likelihood (Laplace) "
                             f"fit, got {type(f).__name__}")
    names = list(names) if names is not None else [f"m{i}" for i in range(len(fits))]
    if len(names) != len(fits):
        raise ValueError("lme_anova: give one name per fit")
    ref = fits[0]
    for nm, f in zip(names, fits, strict=True):
        if f.n_rows != ref.n_rows:
            raise ValueError(f"lme_anova: {nm} was fitted to {f.n_rows} rows, {names[0]} to "
                             f"{ref.n_rows}; models compared by a likelihood ratio must be "
                             f"fitted to the same data")
        if _response(f.formula) != _response(ref.formula):
            raise ValueError(f"lme_anova: {nm} models {f.formula.split('~')[0].strip()!r}, "
                             f"{names[0]} {ref.formula.split('~')[0].strip()!r}; the response "
                             f"must be the same")
    order = sorted(range(len(fits)), key=lambda i: fits[i].n_params)
    for i, j in zip(order[:-1], order[1:], strict=True):
        why = nesting_problem(fits[i], fits[j])
        if why:
            raise ValueError(f"lme_anova: {names[i]} ({fits[i].formula}) is not nested in "
                             f"{names[j]} ({fits[j].formula}): {names[j]} lacks {why}; a "
                             f"likelihood-ratio test compares a model with one made from it "
                             f"by dropping terms")
    rows = []
    prev = None
    for i in order:
        f = fits[i]
        row = {"model": names[i], "npar": f.n_params, "AIC": f.aic, "BIC": f.bic,
               "logLik": f.loglik, "deviance": f.deviance, "Chisq": np.nan, "Df": np.nan,
               "p": np.nan}
        if prev is not None:
            df = f.n_params - prev.n_params
            stat = max(2.0 * (f.loglik - prev.loglik), 0.0)
            row.update(Chisq=stat, Df=df, p=float(chdtrc(df, stat)) if df > 0 else np.nan)
        rows.append(row)
        prev = f
    return pd.DataFrame(rows).set_index("model")


def format_anova(table: pd.DataFrame, formulas: Mapping[str, str]) -> str:
    """:func:`lme_anova`'s table as lme4's ``print(anova(m0, m1))``: the models with their
    formulas, then ``npar``, ``AIC``, ``BIC``, ``logLik``, ``deviance`` (2 decimals),
    ``Chisq`` (4), ``Df`` and ``Pr(>Chisq)`` (4 significant digits) with R's significance
    stars."""
    def num(v: float, fmt: str) -> str:
        return "" if not np.isfinite(v) else format(v, fmt)

    def pval(p: float) -> str:
        return "" if not np.isfinite(p) else "< 2.2e-16" if p < 2.2e-16 else f"{p:.4g}"

    shown = pd.DataFrame(index=table.index)
    shown["npar"] = table["npar"].map(lambda v: f"{int(v)}")
    for c in ("AIC", "BIC", "logLik", "deviance"):
        shown[c] = table[c].map(lambda v: num(v, ".2f"))
    shown["Chisq"] = table["Chisq"].map(lambda v: num(v, ".4f"))
    shown["Df"] = table["Df"].map(lambda v: num(v, ".0f"))
    shown["Pr(>Chisq)"] = table["p"].map(pval)
    stars = table["p"].map(_stars)
    if stars.str.len().any():
        shown[""] = stars
    shown.index.name = None
    lines = ["Models:"] + [f"{name}: {formulas[name]}" for name in table.index]
    lines += [ln.rstrip() for ln in shown.to_string().splitlines()]
    if stars.str.len().any():
        lines += ["---", "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
    return "\n".join(lines)


def wald_text(fit: Any, type: Any = 2) -> str:
    """:func:`format_wald` of :func:`tomstats.glmm.wald.wald_anova` of ``fit``, with its
    response; empty when the table has no row (a model with an intercept only and Type II)."""
    from tomstats.glmm.wald import fixed_part, wald_anova

    table = wald_anova(fit, type)
    return format_wald(table, fixed_part(fit.formula)[0]) if len(table) else ""


def _fmt_anova_p(values: pd.Series) -> list[str]:
    """p-values as R prints an anova table: below 1e-4 in scientific notation with up to 4
    significant digits (``< 2.2e-16`` below that), the others in fixed notation with the
    decimals that give the smallest of them 4 significant digits."""
    fixed = [v for v in values if math.isfinite(v) and v >= 1e-4]
    dec = max((3 - math.floor(math.log10(v)) for v in fixed if v > 0), default=4)
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append("")
        elif v < 2.2e-16:
            out.append("< 2.2e-16")
        elif v < 1e-4:
            out.append(f"{v:.4g}")
        else:
            out.append(f"{v:.{dec}f}")
    return out


def format_wald(table: pd.DataFrame, response: str = "") -> str:
    """:func:`tomstats.glmm.wald.wald_table`'s table as ``car``'s ``print(Anova(fit))``: the
    heading, the response, columns ``Chisq`` (4 decimals), ``Df`` and ``Pr(>Chisq)`` with R's
    significance stars."""
    kind = table.attrs.get("type", "II")
    shown = pd.DataFrame(index=[str(i) for i in table.index])
    shown["Chisq"] = [f"{v:.4f}" if math.isfinite(v) else "" for v in table["Chisq"]]
    shown["Df"] = [f"{int(v)}" for v in table["Df"]]
    shown["Pr(>Chisq)"] = _fmt_anova_p(table["p"])
    shown[""] = [_stars(v).ljust(3) for v in table["p"]]
    lines = [f"Analysis of Deviance Table (Type {kind} Wald chisquare tests)", ""]
    if response:
        lines.append(f"Response: {response}")
    lines += [ln.rstrip() for ln in shown.to_string().splitlines()]
    lines += ["---", "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
    if kind == "III" and any(":" in str(i) for i in table.index):
        lines += ["(Type III tests of terms inside an interaction depend on the coding: with",
                  " treatment contrasts they test effects at the reference level, and at 0 of",
                  " numeric variables; C(f, Sum) makes them averages over levels)"]
    return "\n".join(lines)
