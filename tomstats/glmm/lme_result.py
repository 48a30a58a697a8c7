r"""The one result of a maximum-likelihood (Laplace) GLMM fit, :class:`LaplaceFit`: every
fit of :func:`tomstats.glmm.lme.fit_lme` (``tomstats.glmm.fit(..., backend="laplace")``),
random intercepts, slopes, ``||``, nested and crossed terms, or none (a logistic regression).
It speaks lme4's vocabulary: ``fixef``, ``ranef``, ``VarCorr``, ``vcov``, ``predict``,
``simulate``, ``confint`` (Wald or profile), ``logLik``/``AIC``/``BIC``/``deviance``,
``anova`` (likelihood-ratio tests of nested fits) and ``anova_wald`` (``car::Anova``), and
prints as ``summary(glmer(...))``. It is saved as one JSON format (``tomstats-lme-fit``);
the random-intercept format of earlier versions (``tomstats-laplace-fit``) is read into it.

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

from tomstats.glmm._rprint import r_abbreviate, r_coef_table, r_format, r_named
from tomstats.glmm._theta import n_theta, theta_index, theta_onehot
from tomstats.glmm.diagnostics import DiagnosticsWarning
from tomstats.glmm.fit_file import JSON_FORMAT_VERSION, check_ml_dict, load_ml_dict

__all__ = ["LaplaceFit", "LmeFit", "LmeTerm", "LaplaceConvergenceWarning",
           "LaplaceSeparationWarning", "LmeConvergenceWarning", "lme_anova", "format_anova",
           "format_wald", "wald_text", "fit_structure", "nesting_problem", "SINGULAR_TOL",
           "SINGULAR_MESSAGE", "FORMAT", "OLD_FORMAT"]

#: The JSON format of every Laplace fit.
FORMAT = "tomstats-lme-fit"
#: The random-intercept JSON format of earlier versions, still read (:meth:`LaplaceFit.from_dict`).
OLD_FORMAT = "tomstats-laplace-fit"
_FORMAT_VERSION = JSON_FORMAT_VERSION
#: lme4's ``isSingular`` tolerance on the diagonal elements of the :math:`T_k`.
SINGULAR_TOL = 1e-4
#: What lme4 says of a singular fit.
SINGULAR_MESSAGE = "boundary (singular) fit: see help('isSingular')"


class LaplaceConvergenceWarning(DiagnosticsWarning):
    """The maximum-likelihood (Laplace) fit did not converge; its estimates may be wrong."""


class LaplaceSeparationWarning(LaplaceConvergenceWarning):
    """The data are separated: some fixed-effect estimates are infinite (the fit cannot
    converge; :mod:`tomstats.glmm.separation`)."""


#: The name of the same warning in the general-terms path of earlier versions.
LmeConvergenceWarning = LaplaceConvergenceWarning


def _floats(a: Any) -> Any:
    """Nested lists of floats with non-finite values as ``None`` (strict JSON)."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim == 0:
        v = float(arr)
        return v if math.isfinite(v) else None
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
class LaplaceFit:
    r"""A maximum-likelihood (Laplace) GLMM fit: lme4's ``glmer`` (``nAGQ = 1``).

    One type for every formula (random intercepts, slopes, ``||``, nested, crossed, or no
    random term: a logistic regression), with lme4's vocabulary: :meth:`fixef`,
    :meth:`ranef`, :meth:`VarCorr`, :meth:`vcov`, :meth:`predict`, :meth:`simulate`,
    :meth:`confint`, :meth:`logLik`, :meth:`AIC`, :meth:`BIC`, :attr:`deviance`,
    :meth:`anova`, :meth:`anova_wald`; ``print(fit)`` shows ``summary(glmer(...))``.

    Attributes
    ----------
    formula : str
        The formula as given.
    family : {"bernoulli", "binomial"}
        The data rows' likelihood (logit link; lme4 calls both ``binomial``).
    n_obs, n_rows : int
        Observations the likelihood evaluated (binomial cells when aggregated) and data
        rows (lme4's ``nobs()``, the :math:`N` of BIC).
    coef_names : tuple of str
        Fixed effects, lme4's names (``"(Intercept)"``, ``"x"``, ``"C(g)[T.b]"``).
    beta, se : ndarray, shape (p,)
        :math:`\hat\beta` and :math:`\sqrt{\operatorname{diag} V}`.
    cov : ndarray, shape (p, p)
        :math:`V`, the covariance of :math:`\hat\beta` (lme4's ``vcov()``).
    se_method : {"hessian", "conditional"}
        How ``cov`` was computed ("conditional" also when the Hessian was not positive
        definite, as lme4 falls back).
    terms : tuple of LmeTerm
        The random-effects terms (empty for a logistic regression).
    theta : ndarray
        :math:`\hat\theta`, term by term (lme4's ``getME(m, "theta")`` within a term; for a
        random intercept the SD).
    b : ndarray
        Conditional modes, term by term, level-major (each level's effects together).
    b_var : ndarray
        Conditional covariance of each level's effects, term by term, each
        :math:`d_k\times d_k` block row-major (NaN when unknown: a fit read from the old
        random-intercept format).
    loglik : float
        Laplace log-likelihood of the data rows (lme4's ``logLik()``).
    converged : bool
        The optimiser met its tolerance with finite values, and the data are not separated.
    iterations : int
    grad_norm : float
        Largest absolute gradient element of the deviance at the optimum.
    hess_min_eig : float
        Smallest eigenvalue of the deviance's Hessian over :math:`(\theta, \beta)`.
    aggregated : bool
        Whether identical rows were summed into binomial cells for the fit.
    data_hash, created_at : str
    versions : dict
    pearson : ndarray, shape (n_rows,)
        Pearson residuals of the data rows at the conditional modes.
    separation : tuple of str
        Fixed effects whose estimates are infinite because the data are separated
        (:func:`tomstats.glmm.separation.separation`); empty when there are none.
    design : object
        What :meth:`predict`, :meth:`simulate` and profile intervals need of the data (kept
        in memory, not in JSON; ``None`` for a fit read from a file).
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
    separation: tuple[str, ...] = ()
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
        """:math:`-2\\ell` (what lme4's ``summary`` prints as ``deviance``)."""
        return -2.0 * self.loglik

    @property
    def aic(self) -> float:
        """:math:`-2\\ell + 2d`."""
        return self.deviance + 2.0 * self.n_params

    @property
    def bic(self) -> float:
        """:math:`-2\\ell + d\\ln N`, :math:`N` the data rows."""
        return self.deviance + math.log(self.n_rows) * self.n_params

    @property
    def df_resid(self) -> int:
        """:math:`N - d`."""
        return self.n_rows - self.n_params

    def logLik(self) -> float:  # noqa: N802 - lme4's name
        """:math:`\\ell`, the Laplace log-likelihood of the data rows (lme4's ``logLik()``;
        its degrees of freedom are :attr:`n_params`)."""
        return float(self.loglik)

    def AIC(self) -> float:  # noqa: N802 - lme4's name
        """:math:`\\mathrm{AIC} = -2\\ell + 2d` (lme4's ``AIC()``)."""
        return self.aic

    def BIC(self) -> float:  # noqa: N802 - lme4's name
        """:math:`\\mathrm{BIC} = -2\\ell + d\\ln N` (lme4's ``BIC()``)."""
        return self.bic

    # ---------------------------------------------------- names of earlier versions
    @property
    def groups(self) -> tuple[str, ...]:
        """The grouping factor of each random-effects term (``"model"``, ``"model:item"``)."""
        return tuple(t.group for t in self.terms)

    @property
    def n_levels(self) -> tuple[int, ...]:
        """Levels of each term's grouping factor."""
        return tuple(t.q for t in self.terms)

    @property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """Level labels of each term's grouping factor (sorted, as in the design)."""
        return tuple(t.levels for t in self.terms)

    @property
    def sd(self) -> np.ndarray:
        """The SD of every random effect, term by term (for random intercepts one per
        term: :math:`\\hat\\sigma_k`)."""
        if not self.terms:
            return np.zeros(0)
        return np.concatenate([np.sqrt(np.clip(np.diagonal(S), 0.0, None))
                               for S in self.covariances()])

    # ------------------------------------------------------------------ singular fits
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
    def fixef(self) -> pd.Series:
        """:math:`\\hat\\beta` by coefficient name (lme4's ``fixef()``)."""
        return pd.Series(np.asarray(self.beta, dtype=float), index=pd.Index(
            list(self.coef_names), name="coef"), name="estimate")

    def vcov(self) -> pd.DataFrame:
        """:math:`V`, the covariance of :math:`\\hat\\beta` (lme4's ``vcov()``)."""
        names = pd.Index(list(self.coef_names), name="coef")
        return pd.DataFrame(np.asarray(self.cov, dtype=float), index=names, columns=names)

    def VarCorr(self) -> pd.DataFrame:  # noqa: N802 - lme4's name
        """Variance components as lme4's ``as.data.frame(VarCorr(m))``: ``group``,
        ``var1``, ``var2`` (empty for a variance), ``vcov`` (variance or covariance) and
        ``sdcor`` (SD or correlation); variances of every term first, then its
        correlations (:math:`\\Sigma_k = T_kT_k^\\top`, :math:`\\sigma = 1`)."""
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

    #: The name of :meth:`VarCorr` in earlier versions.
    varcorr = VarCorr

    def variance_components(self) -> pd.DataFrame:
        """One row per random effect: ``group``, ``effect``, ``n_levels``, ``sd``
        :math:`\\hat\\sigma` and ``variance`` :math:`\\hat\\sigma^2` (the diagonal of
        :meth:`VarCorr`; kept from earlier versions)."""
        rows = [(t.group, e, t.q) for t in self.terms for e in t.effects]
        sd = self.sd
        return pd.DataFrame({"group": [r[0] for r in rows], "effect": [r[1] for r in rows],
                             "n_levels": [r[2] for r in rows], "sd": sd, "variance": sd ** 2})

    def fixed_effects(self, level: float = 0.95) -> pd.DataFrame:
        """Estimates with Wald tests and intervals: ``estimate`` :math:`\\hat\\beta_j`,
        ``se``, ``z`` :math:`= \\hat\\beta_j/\\mathrm{se}_j`, ``p`` :math:`= 2\\Phi(-|z|)`,
        ``ci_lower``/``ci_upper`` :math:`= \\hat\\beta_j \\mp z_{(1+\\text{level})/2}\\,
        \\mathrm{se}_j` (index: coefficient names; lme4's ``coef(summary(m))``)."""
        from scipy.special import ndtr, ndtri  # scipy.stats would load its optimiser

        _check_level(level)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.beta / self.se
        q = float(ndtri(0.5 + level / 2.0))
        return pd.DataFrame(
            {"estimate": self.beta, "se": self.se, "z": z, "p": 2.0 * ndtr(-np.abs(z)),
             "ci_lower": self.beta - q * self.se, "ci_upper": self.beta + q * self.se},
            index=pd.Index(list(self.coef_names), name="coef"))

    #: The name of :meth:`fixed_effects` in earlier versions (not lme4's ``summary``, which
    #: is ``print(fit)``).
    summary = fixed_effects

    def ranef(self) -> pd.DataFrame:
        """Conditional modes and conditional SDs (lme4's ``ranef(condVar = TRUE)``):
        ``group``, ``level``, ``effect``, ``estimate``, ``cond_sd`` (one row per level and
        effect, terms in formula order)."""
        rows, o, ov = [], 0, 0
        for t in self.terms:
            bk = self.b[o: o + t.q * t.d].reshape(t.q, t.d)
            vk = self.b_var[ov: ov + t.q * t.d * t.d].reshape(t.q, t.d, t.d)
            o += t.q * t.d
            ov += t.q * t.d * t.d
            for a, lv in enumerate(t.levels):
                for i, e in enumerate(t.effects):
                    v = vk[a, i, i]
                    rows.append((t.group, lv, e, bk[a, i],
                                 math.sqrt(max(v, 0.0)) if math.isfinite(v) else math.nan))
        return pd.DataFrame(rows, columns=["group", "level", "effect", "estimate", "cond_sd"])

    #: The name of :meth:`ranef` in earlier versions.
    random_effects = ranef

    # ------------------------------------------------------------------ tests
    def anova_wald(self, type: int | str = 2) -> pd.DataFrame:
        """Type II or III Wald chi-square test of each fixed-effect term, as
        ``car::Anova(fit, type = "II" | "III")``: columns ``Chisq``, ``Df``, ``p``
        (:func:`tomstats.glmm.wald.wald_table`, whose docstring states the formulas; print
        with :func:`format_wald`)."""
        from tomstats.glmm.wald import wald_anova

        return wald_anova(self, type)

    def anova(self, *others: LaplaceFit, names: Sequence[str] | None = None) -> pd.DataFrame:
        """Likelihood-ratio tests of this fit and nested fits of the same data (lme4's
        ``anova(m0, m1)``; :func:`lme_anova`: :math:`\\chi^2 = 2(\\ell_1 - \\ell_0)` on
        :math:`d_1 - d_0` degrees of freedom)."""
        return lme_anova(self, *others, names=names)

    def confint(self, level: float = 0.95, method: str = "wald") -> pd.DataFrame:
        """Intervals of the fixed effects: ``method="wald"``
        (:math:`\\hat\\beta_j \\mp z_{(1+\\text{level})/2}\\mathrm{se}_j`) or ``"profile"``
        (lme4's ``confint(method = "profile")``, :mod:`tomstats.glmm.lme_profile`; needs the
        in-memory fit, not one read from JSON). Columns ``lower``, ``upper``."""
        _check_level(level)
        if method == "wald":
            t = self.fixed_effects(level)
            return pd.DataFrame({"lower": t["ci_lower"], "upper": t["ci_upper"]})
        if method != "profile":
            raise ValueError(f"confint: method must be 'wald' or 'profile', got {method!r}")
        if self.design is None:
            raise ValueError("confint(method='profile') needs the data: refit with "
                             "tomstats.glmm.fit (a fit read from JSON has none)")
        from tomstats.glmm.lme_profile import profile_intervals

        lo, hi = profile_intervals(self, level)
        return pd.DataFrame({"lower": lo, "upper": hi},
                            index=pd.Index(list(self.coef_names), name="coef"))

    def predict(self, newdata: pd.DataFrame | None = None, *, random: bool = True,
                type: str = "response") -> np.ndarray:
        """Predictions (lme4's ``predict``): ``random=True`` adds the conditional modes of
        the levels seen in the fit (0 for new levels, lme4's ``allow.new.levels``),
        ``random=False`` is the population level (``re.form = NA``); ``type`` is
        ``"response"`` (probability) or ``"link"`` (logit)
        (:func:`tomstats.glmm.lme_predict.predict`)."""
        from tomstats.glmm.lme_predict import predict

        return predict(self, newdata, random=random, type=type)

    def simulate(self, nsim: int = 1, seed: int = 0, *, use_u: bool = False) -> np.ndarray:
        """Outcomes simulated from the fitted model on the fitted rows (lme4's
        ``simulate()``): successes of shape ``(nsim, n_rows)``, new random effects
        :math:`b_k \\sim N(0, \\hat\\Sigma_k)` for each simulation (``use_u=False``,
        lme4's default) or the conditional modes (``use.u = TRUE``)
        (:func:`tomstats.glmm.lme_predict.simulate`)."""
        from tomstats.glmm.lme_predict import simulate

        return simulate(self, nsim, seed, use_u=use_u)

    # ------------------------------------------------------------------ printing
    def __repr__(self) -> str:
        """One line (formula, rows, log-likelihood, convergence); ``print()`` shows the
        lme4-style summary."""
        from tomstats._printable import summary_line

        state = ("converged" if self.converged else
                 f"not converged ({self.iterations} iterations)")
        return summary_line(self, self.formula, f"{self.family}, {self.n_rows} rows",
                            f"logLik {float(self.loglik):.2f}", state,
                            "singular" if self.singular else "")

    def __str__(self) -> str:
        """lme4's ``summary(glmer(...))``: fit statistics, scaled residuals, random effects
        (terms by decreasing number of levels, as lme4 orders them), fixed effects with Wald
        tests, their correlations, and what went wrong (a singular or separated fit, no
        convergence)."""
        head = (["Generalized linear mixed model fit by maximum likelihood (Laplace",
                 "  Approximation) [tomstats]"] if self.terms else
                ["Generalized linear model fit by maximum likelihood [tomstats]"])
        lines = head + [" Family: binomial  ( logit )", f"Formula: {self.formula}", ""]
        # lme4's .prt.aictab: rounded to 1 decimal, formatted together (df.resid apart)
        stats = r_format(np.round([self.aic, self.bic, self.loglik, self.deviance], 1))
        lines += r_named(["AIC", "BIC", "logLik", "deviance", "df.resid"],
                         [*(v.strip() for v in stats), str(self.df_resid)]) + [""]
        if self.pearson.size:
            qs = np.quantile(self.pearson[np.isfinite(self.pearson)], [0, .25, .5, .75, 1])
            big = float(np.max(np.abs(qs)))  # zapsmall(qs, 5), then 4 significant digits
            qs = np.round(qs, max(0, 5 - math.ceil(math.log10(big))) if big > 0 else 5)
            lines += ["Scaled residuals: ", *r_named(["Min", "1Q", "Median", "3Q", "Max"],
                                                     r_format(qs, 4)), ""]
        if self.terms:
            lines += ["Random effects:"] + _format_varcorr(self)
            grp: dict[str, int] = {}
            for t in _by_levels(self.terms):
                grp.setdefault(t.group, t.q)
            lines += [f"Number of obs: {self.n_rows}, groups:  "
                      + "; ".join(f"{g}, {q}" for g, q in grp.items()), ""]
        else:
            lines += [f"Number of obs: {self.n_rows}", ""]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.beta / self.se
        from scipy.special import ndtr

        lines += ["Fixed effects:", *r_coef_table(self.coef_names, self.beta, self.se, z,
                                                  2.0 * ndtr(-np.abs(z)))]
        lines += _format_corr(self)
        if self.se_method == "conditional":
            lines.append("(standard errors from the penalised system at fixed theta: the "
                         "Hessian was not positive definite or se='conditional')")
        if self.singular:
            lines.append(self.singular_advice())
        if self.separation:
            lines.append("WARNING: fitted probabilities numerically 0 or 1 occurred: the data "
                         f"are separated by {', '.join(self.separation)}; their estimates and "
                         "standard errors are meaningless (the maximum is at infinity)")
        elif not self.converged:
            lines.append(f"WARNING: the fit did not converge ({self.iterations} iterations, "
                         f"max |gradient| {self.grad_norm:.2g}); the estimates are unreliable")
        return "\n".join(lines)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (non-finite numbers as ``null``), format :data:`FORMAT`."""
        return {
            "format": FORMAT, "format_version": _FORMAT_VERSION, "backend": "laplace",
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
            "separation": list(self.separation),
        }

    def to_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the fit as JSON atomically (temporary file, then rename); return the path."""
        from tomstats._io import atomic_write_text, ensure_writable_file

        p = ensure_writable_file(path, field="path")
        atomic_write_text(p, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return p

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaplaceFit:
        """Inverse of :meth:`to_dict`, checked whole against the schema of
        :func:`tomstats.glmm.fit_file.check_ml_dict` (``ValueError`` naming the field; the
        stored formula and terms are data, re-read by the formula language). A fit in the
        random-intercept format of earlier versions (:data:`OLD_FORMAT`) is read as the
        same model: a term ``(1 | g)`` per group, :math:`\\theta_k` its SD, the conditional
        modes as stored (their conditional variances unknown: NaN) and lme4's name
        ``(Intercept)``."""
        fmt = check_ml_dict(dict(d) if isinstance(d, Mapping) else d)
        try:
            return (_from_old_dict if fmt == OLD_FORMAT else _from_dict)(cls, d)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed Laplace fit: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> LaplaceFit:
        """Read a fit written by :meth:`to_json` (or by an earlier version, in either of its
        formats), checked whole by the one fit reader
        (:func:`tomstats.glmm.fit_file.load_ml_dict`)."""
        _, d = load_ml_dict(path)
        return cls.from_dict(d)


#: The name of :class:`LaplaceFit` for fits with general random-effects terms in earlier
#: versions: the same class.
LmeFit = LaplaceFit


def _common(d: Mapping[str, Any]) -> dict[str, Any]:
    """The fields both JSON formats share, as :class:`LaplaceFit`'s arguments."""
    p = len(d["coef_names"])
    return dict(
        formula=str(d["formula"]), family=str(d["family"]), n_obs=int(d["n_obs"]),
        n_rows=int(d["n_rows"]), coef_names=tuple(_effect_name(str(c))
                                                  for c in d["coef_names"]),
        beta=_array(d["beta"], (p,)), se=_array(d["se"], (p,)), cov=_array(d["cov"], (p, p)),
        se_method=str(d.get("se_method", "hessian")), loglik=float(_array(d["loglik"])),
        converged=bool(d["converged"]), iterations=int(d["iterations"]),
        aggregated=bool(d.get("aggregated", False)), data_hash=str(d.get("data_hash", "")),
        created_at=str(d.get("created_at", "")), versions=dict(d.get("versions", {})),
        separation=tuple(map(str, d.get("separation", ()))))


def _from_dict(cls: type[LaplaceFit], d: Mapping[str, Any]) -> LaplaceFit:
    terms = tuple(LmeTerm(group=str(t["group"]), effects=tuple(map(str, t["effects"])),
                          correlated=bool(t["correlated"]),
                          levels=tuple(map(str, t["levels"])), expr=str(t.get("expr", "")))
                  for t in d["terms"])
    m = sum(t.n_theta for t in terms)
    nb = sum(t.q * t.d for t in terms)
    nv = sum(t.q * t.d * t.d for t in terms)
    return cls(**_common(d), terms=terms, theta=_array(d["theta"], (m,)),
               b=_array(d["b"], (nb,)), b_var=_array(d["b_var"], (nv,)),
               grad_norm=float(_array(d.get("grad_norm"))),
               hess_min_eig=float(_array(d.get("hess_min_eig"))),
               pearson=_array(d.get("pearson", [])))


def _from_old_dict(cls: type[LaplaceFit], d: Mapping[str, Any]) -> LaplaceFit:
    """A ``tomstats-laplace-fit`` (random intercepts only) as the one type."""
    n_levels = [int(v) for v in d["n_levels"]]
    terms = tuple(LmeTerm(group=str(g), effects=("(Intercept)",), correlated=True,
                          levels=tuple(map(str, lv)), expr="1")
                  for g, lv in zip(d["groups"], d["levels"], strict=True))
    return cls(**_common(d), terms=terms, theta=_array(d["sd"], (len(terms),)),
               b=_array(d["ranef"], (sum(n_levels),)), b_var=np.full(sum(n_levels), np.nan))


def _effect_name(name: str) -> str:
    """lme4's name of the intercept (formulaic's is ``Intercept``)."""
    return "(Intercept)" if name == "Intercept" else name


def _by_levels(terms: Sequence[LmeTerm]) -> list[LmeTerm]:
    """The terms as lme4 orders them: by decreasing number of levels of their grouping
    factor (ties in formula order)."""
    return sorted(terms, key=lambda t: -t.q)


def _check_level(level: float) -> None:
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def _format_corr(fit: LaplaceFit) -> list[str]:
    """summary's "Correlation of Fixed Effects" (lower triangle, 2 to 12 coefficients):
    :math:`V_{ij}/(\\mathrm{se}_i\\mathrm{se}_j)`."""
    p = len(fit.coef_names)
    if not 1 < p <= 12:
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = fit.cov / np.outer(fit.se, fit.se)
    rows = r_abbreviate(fit.coef_names, 11)  # lme4's labels: rows 11 characters, columns 6
    cols = r_abbreviate(fit.coef_names, 6)
    # R's format(round(corr, 3), nsmall = 3): one width for every value; the matrix printed
    # as text, left-aligned, each column as wide as its label or its values
    text = r_format(np.round(corr, 3).ravel(), nsmall=3)
    vw = len(text[0])
    w = max(len(r) for r in rows[1:])
    cw = [max(vw, len(c)) for c in cols[:-1]]
    lines = ["", "Correlation of Fixed Effects:",
             " " * (w + 1) + " ".join(f"{c:<{n}}" for c, n in zip(cols[:-1], cw, strict=True))]
    for i in range(1, p):
        cells = [(text[i * p + j] if j < i else "").ljust(cw[j]) for j in range(p - 1)]
        lines.append(f"{rows[i]:<{w}} {' '.join(cells)}")
    return lines


def _format_varcorr(fit: LaplaceFit) -> list[str]:
    """The "Random effects:" table of ``summary(glmer)`` (lme4's ``formatVC``, 4 significant
    digits): Groups, Name, Variance, Std.Dev., Corr (the lower triangle beside each effect
    after the first, 2 decimals); terms by decreasing number of levels, as lme4 orders them
    (an uncorrelated term's effects as groups ``g``, ``g.1``, ...); printed as R prints a
    text matrix, left-aligned."""
    rows: list[tuple[str, str, float, float, list[str]]] = []
    seen: dict[str, int] = {}
    cov = dict(zip(fit.terms, fit.covariances(), strict=True))
    for t in _by_levels(fit.terms):
        S = cov[t]
        sd = np.sqrt(np.clip(np.diagonal(S), 0.0, None))
        blocks = [list(range(t.d))] if t.correlated else [[i] for i in range(t.d)]
        for idx in blocks:
            n = seen.get(t.group, 0)
            seen[t.group] = n + 1
            label = t.group if n == 0 else f"{t.group}.{n}"
            with np.errstate(invalid="ignore", divide="ignore"):
                C = S[np.ix_(idx, idx)] / np.outer(sd[idx], sd[idx])
            text = r_format(np.round(C, 2).ravel(), nsmall=2)
            for r, i in enumerate(idx):
                rows.append((label if r == 0 else "", t.effects[i], S[i, i], sd[i],
                             [text[r * len(idx) + c] for c in range(r)]))
    ncorr = max(len(r[4]) for r in rows)
    var = r_format([r[2] for r in rows], 4)
    sds = r_format([r[3] for r in rows], 4)
    header = ["Groups", "Name", "Variance", "Std.Dev."] + ["Corr"] * (ncorr > 0) + \
        [""] * max(ncorr - 1, 0)
    table = [[g, nm, v, s_, *(c + [""] * (ncorr - len(c)))]
             for (g, nm, _, _, c), v, s_ in zip(rows, var, sds, strict=True)]
    widths = [max(len(header[j]), *(len(r[j]) for r in table)) for j in range(len(header))]
    return ["".join(f" {cell:<{w}}" for cell, w in zip(line, widths, strict=True))
            for line in [header, *table]]


def fit_structure(fit: Any) -> tuple[set[str], dict[str, set[str]], set[tuple[str, str, str]]]:
    """What a fit estimates: its fixed effects, the varying effects of each grouping factor,
    and the (group, effect, effect) pairs whose correlation it estimates (a fit's terms; an
    object without them, one random intercept per name in its ``groups``), with lme4's name
    ``(Intercept)``."""
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
    fixed = {_effect_name(c) for c in fit.coef_names}
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
    for f in fits:
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
