r"""Joint Wald tests per fixed-effect term of a maximum-likelihood GLMM (R's ``car::Anova``
on a ``glmer`` fit, ``test.statistic = "Chisq"``).

A hypothesis :math:`L\beta = 0` on the fixed effects :math:`\beta` (estimate
:math:`\hat\beta`, covariance :math:`V`, lme4's ``vcov()``) has the Wald statistic

.. math::

    W = (L\hat\beta)^\top (L V L^\top)^{-1} (L\hat\beta), \qquad
    \mathrm{df} = \operatorname{rank} L, \qquad p = P(\chi^2_{\mathrm{df}} > W).

For the columns :math:`S` of a set of terms, :math:`L = I_S` (the rows of the identity that
pick them) and :math:`W(S) = \hat\beta_S^\top V_{SS}^{-1}\hat\beta_S`.

- **Type III** (``car:::Anova.III.mer``): each term :math:`t` (the intercept included) is
  tested alone, :math:`W_{III}(t) = W(S_t)` on :math:`|S_t|` df. The hypothesis is about the
  coefficients as coded, so it depends on the contrasts: with treatment coding (the default,
  the first level the reference) the test of a main effect that enters an interaction is the
  test of that effect at the reference level of the other factor(s) and the *other* numeric
  variable(s) at 0. Type III main effects mean "averaged over the other factors" only with
  sum-to-zero contrasts (``C(f, Sum)``, R's ``contr.sum``), as ``car`` warns; the
  highest-order terms, and models without interactions, do not depend on the coding.
- **Type II** (``car:::Anova.II.mer``): each term :math:`t` is tested after every term that
  does not contain it, i.e. ignoring its relatives :math:`R_t` (the other terms whose
  variables include all of :math:`t`'s; :math:`t` is marginal to them). ``car`` builds
  :math:`L` from the columns :math:`R_t \cup S_t` made :math:`V`-orthogonal to those of
  :math:`R_t` (``ConjComp``); the two Wald statistics then add up, so

  .. math:: W_{II}(t) = W(R_t \cup S_t) - W(R_t) \quad\text{on } |S_t| \text{ df},

  which is what is computed here (:math:`W(\varnothing) = 0`; for a term with no relatives
  Type II and III agree). Type II does not depend on the coding of factors and has no row
  for the intercept.

Terms and their columns come from the model's fixed part, read by the formula engine
(:func:`fixed_terms`), in the engine's order (intercept, main effects, then interactions,
as R orders them). :func:`tomstats.glmm.lme_result.format_wald` prints a table as car
does.

Bayesian fits: no table here. A posterior analogue (the posterior mass of a region around
:math:`L\beta = 0`, or a Bayes factor) is a different quantity with its own choices (prior,
region), not this test; compare models by LOO instead (:mod:`tomstats.glmm.compare`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["FixedTerm", "fixed_terms", "fixed_part", "wald_table", "wald_anova", "WALD_TYPES"]

#: Types :func:`wald_table` accepts, with the name each stands for.
WALD_TYPES = {2: "II", 3: "III", "2": "II", "3": "III", "II": "II", "III": "III"}

_INTERCEPT_NAMES = ("(Intercept)", "Intercept")


@dataclass(frozen=True)
class FixedTerm:
    """One term of a model's fixed part.

    Attributes
    ----------
    label : str
        The term as R names it: ``(Intercept)``, ``x``, ``g:x``.
    variables : frozenset of str
        The variables (formula factors) it multiplies; empty for the intercept.
    columns : tuple of int
        Its columns in the design (positions in the coefficient vector).
    """

    label: str
    variables: frozenset[str]
    columns: tuple[int, ...]

    @property
    def intercept(self) -> bool:
        """Whether this is the intercept."""
        return not self.variables


def _normalise_type(type: Any) -> str:
    try:
        return WALD_TYPES[type]
    except (KeyError, TypeError):
        raise ValueError(f"type must be 2 or 3 (also 'II', 'III'), got {type!r}") from None


def fixed_part(formula: str) -> tuple[str, str]:
    """(response as written, fixed part) of an lme4-style formula (``cbind(k, n - k)`` and
    ``k | trials(n)`` left-hand sides included)."""
    from tomstats.glmm.spec import parse_formula

    if not isinstance(formula, str) or formula.count("~") != 1:
        raise ValueError(f"formula must be a string 'response ~ terms', got {formula!r}")
    lhs, rhs = (s.strip() for s in formula.split("~"))
    return lhs, parse_formula(f"y ~ {rhs}")[2]


def fixed_terms(fixed: str, coef_names: Sequence[str]) -> tuple[FixedTerm, ...]:
    """The terms of a fixed part and their columns among ``coef_names``.

    The terms are the formula engine's (formulaic, the engine that built the design), in its
    order; a column belongs to a term when its name is the term's factors joined by ``:``,
    each factor as written or followed by a bracketed level (``g[T.b]:x``), which is how the
    engine names the columns it makes. Columns of a term are contiguous and terms come in
    the design's order, so each column is matched to the first term at or after the previous
    column's.

    Raises
    ------
    ValueError
        A coefficient that matches no term (a fit of another formula).
    """
    import formulaic

    from tomstats._expr import check_terms

    check_terms(fixed, "fixed part")  # the formula language, before the formula engine
    terms = list(formulaic.Formula(fixed))
    names = list(coef_names)
    patterns = []
    for t in terms:
        factors = [str(f) for f in t.factors if str(f) != "1"]
        if not factors:
            patterns.append(None)
            continue
        patterns.append(re.compile(":".join(re.escape(f) + r"(?:\[.*\])?" for f in factors)))
    assigned: list[list[int]] = [[] for _ in terms]
    k = 0
    for j, name in enumerate(names):
        while k < len(terms):
            pat = patterns[k]
            if (name in _INTERCEPT_NAMES) if pat is None else bool(pat.fullmatch(name)):
                break
            k += 1
        if k == len(terms):
            raise ValueError(f"coefficient {name!r} matches no term of the fixed part "
                             f"{fixed!r} (terms: {', '.join(str(t) for t in terms)})")
        assigned[k].append(j)
    out = []
    for t, cols in zip(terms, assigned, strict=True):
        variables = frozenset(str(f) for f in t.factors if str(f) != "1")
        out.append(FixedTerm(label="(Intercept)" if not variables else str(t),
                             variables=variables, columns=tuple(cols)))
    return tuple(out)


def _wald(beta: np.ndarray, cov: np.ndarray, cols: Sequence[int]) -> float:
    """:math:`W(S) = \\hat\\beta_S^\\top V_{SS}^{-1}\\hat\\beta_S` (0 for no columns)."""
    if not cols:
        return 0.0
    idx = np.asarray(cols)
    b = beta[idx]
    try:
        return float(b @ np.linalg.solve(cov[np.ix_(idx, idx)], b))
    except np.linalg.LinAlgError:
        return math.nan


def wald_table(beta: Any, cov: Any, terms: Sequence[FixedTerm], type: Any = 2
               ) -> pd.DataFrame:
    r"""Type II or Type III Wald :math:`\chi^2` tests of each fixed-effect term (module
    docstring): ``car::Anova(fit, type = "II" | "III")`` of a ``glmer`` fit.

    Parameters
    ----------
    beta : array, shape (p,)
        Fixed-effect estimates :math:`\hat\beta`.
    cov : array, shape (p, p)
        Their covariance :math:`V`.
    terms : sequence of FixedTerm
        The fixed part's terms with their columns (:func:`fixed_terms`).
    type : {2, 3, "II", "III"}
        Type II (each term after the terms not containing it; no intercept row) or Type III
        (each term alone, the intercept included).

    Returns
    -------
    pandas.DataFrame
        Index ``term`` (R's labels), columns ``Chisq`` :math:`W`, ``Df`` (the term's
        columns) and ``p`` :math:`P(\chi^2_{\mathrm{Df}} > W)`; ``attrs["type"]`` is
        ``"II"`` or ``"III"``.
    """
    from scipy.special import chdtrc  # χ² upper tail; scipy.stats would load its optimiser

    kind = _normalise_type(type)
    beta = np.asarray(beta, dtype=float)
    cov = np.asarray(cov, dtype=float)
    p = beta.shape[0]
    if cov.shape != (p, p):
        raise ValueError(f"cov must have shape ({p}, {p}) like beta, got {cov.shape}")
    rows = []
    for t in terms:
        if kind == "II" and t.intercept:
            continue
        if kind == "III":
            stat = _wald(beta, cov, t.columns)
        else:
            rel = [c for r in terms if r is not t and not r.intercept
                   and t.variables < r.variables for c in r.columns]
            stat = max(_wald(beta, cov, rel + list(t.columns)) - _wald(beta, cov, rel), 0.0)
        df = len(t.columns)
        pval = float(chdtrc(df, stat)) if df > 0 and math.isfinite(stat) else math.nan
        rows.append((t.label, stat if df > 0 else math.nan, df, pval))
    table = pd.DataFrame(rows, columns=["term", "Chisq", "Df", "p"]).set_index("term")
    table.attrs["type"] = kind
    return table


def wald_anova(fit: Any, type: Any = 2) -> pd.DataFrame:
    """:func:`wald_table` of a maximum-likelihood fit (a ``LaplaceFit``):
    its ``beta``, ``cov`` and the terms of its formula's fixed part."""
    _normalise_type(type)
    _, fixed = fixed_part(fit.formula)
    return wald_table(fit.beta, fit.cov, fixed_terms(fixed, fit.coef_names), type)
