r"""Estimated marginal means and linear contrasts (R's emmeans): the one core.

Every quantity here is linear in the predictions of a *reference model* at the cells of a
*reference grid* (each combination of the levels of its factors). A model hands over its
cell predictions :math:`\hat m = X_g\hat\beta` and their covariance
:math:`V_m = X_g V X_g^\top` (on the link scale), with the residual degrees of freedom
:math:`\nu` (:math:`\nu = \infty` for asymptotic, z-based inference); a :class:`RefGrid`
holds them. Then, for a matrix :math:`L` of coefficients over the cells,

.. math::

    \hat\theta = L\hat m, \qquad \operatorname{Var}\hat\theta = L V_m L^\top,
    \qquad t = \hat\theta_j / \mathrm{se}_j, \quad \mathrm{se}_j =
    \sqrt{(L V_m L^\top)_{jj}},

with :math:`p = 2\,P(T_\nu > |t|)` (normal when :math:`\nu = \infty`) and the interval
:math:`\hat\theta_j \pm q\,\mathrm{se}_j`.

- **Marginal means** (:func:`emmeans`): the rows of :math:`L` average the cells that share a
  combination of the ``specs`` (and ``by``) levels with *equal weights* over the other
  factors (emmeans' default), whatever the cells' sizes. On the response scale of a logit
  model the mean is :math:`\operatorname{logit}^{-1}` of the link-scale mean, with the
  delta-method SE :math:`\hat p(1 - \hat p)\,\mathrm{se}` and the interval back-transformed
  from the link scale (emmeans' ``type = "response"``).
- **Contrasts** (:func:`contrasts`): coefficients :math:`K` over the marginal means within
  each ``by`` group, :math:`L = K W`. ``"pairwise"``: every difference
  :math:`\mu_i - \mu_j`, :math:`i < j`, in emmeans' order; ``"poly"``: orthogonal polynomials
  over equally spaced levels, each scaled to the smallest integers (emmeans' ``poly``,
  :func:`poly_coefficients`); ``interaction=True``: the Kronecker product of one contrast
  per factor (``(a_1 - a_2) × (b_1 - b_2)``, emmeans' ``interaction =``). On the response
  scale of a logit model the marginal means are first back-transformed,
  :math:`\hat p = \operatorname{logit}^{-1}\hat\mu` with covariance :math:`D V D^\top`,
  :math:`D = \operatorname{diag}(\hat p(1-\hat p))` (emmeans' ``regrid``), and the contrasts
  are differences of probabilities.
- **Adjustment** per family (the contrasts of one ``by`` group, :math:`m` of them, among
  :math:`k` means): ``"tukey"`` — the studentized range,
  :math:`p = P(Q_{k,\nu} > \sqrt2\,|t|)`, interval :math:`q = Q_{k,\nu}^{-1}(\text{level})/
  \sqrt 2` (pairwise comparisons only); ``"bonferroni"`` — :math:`\min(1, m p)`, interval
  :math:`q = t_\nu^{-1}(1 - (1-\text{level})/(2m))`; ``"holm"`` (step-down) and ``"fdr"``
  (Benjamini–Hochberg) adjust the p values and, as emmeans does, give Bonferroni intervals
  (neither defines an interval); ``"none"``. emmeans' defaults: ``"tukey"`` for pairwise
  comparisons, ``"none"`` for polynomial and interaction contrasts.

The models: :func:`tomstats.analysis.contrasts.anova_grid` (the cell means of an ANOVA of a
log) and :func:`tomstats.glmm.contrasts.fit_grid` (a maximum-likelihood GLMM). Nothing here
knows where the grid came from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ADJUSTMENTS", "LINKS", "METHODS", "RefGrid", "contrast_rows", "contrasts",
           "describe_contrasts", "describe_means", "emmeans", "emmeans_rows", "format_table",
           "p_adjust", "pairwise_coefficients", "poly_coefficients", "simple_effects"]

#: Multiplicity adjustments of :func:`contrasts`.
ADJUSTMENTS: tuple[str, ...] = ("tukey", "holm", "bonferroni", "fdr", "none")
#: Contrast methods of :func:`contrasts`.
METHODS: tuple[str, ...] = ("pairwise", "poly")
#: Links of a :class:`RefGrid`: identity (an ANOVA of proportions) or logit (a GLMM).
LINKS: tuple[str, ...] = ("identity", "logit")
#: Names of polynomial degrees (emmeans').
_DEGREES = ("linear", "quadratic", "cubic", "quartic", *(f"degree {d}" for d in range(5, 21)))
#: What a column holds where a combined table has no value (emmeans' ``rbind``).
DOT = "."


@dataclass(frozen=True)
class RefGrid:
    r"""A reference grid: a model's predictions at every combination of factor levels.

    Attributes
    ----------
    factors : tuple of str
        The grid's variables.
    levels : tuple of tuple
        Their levels, in order.
    estimate : ndarray, shape (C,)
        The prediction :math:`\hat m_c` at each cell (link scale), cells in C order over
        ``factors`` (the last varies fastest).
    cov : ndarray, shape (C, C)
        :math:`V_m`, the covariance of the predictions.
    df : float
        Degrees of freedom of the t tests and intervals; ``inf``: z (asymptotic).
    link : {"identity", "logit"}
        The model's link; ``"logit"`` gives the response (probability) scale.
    response : str
        What the response scale measures (for printing).
    averaged : tuple of str
        Variables the model averaged over (or held at their means) to make the grid.
    note : str
        How the grid was made (for printing).
    """

    factors: tuple[str, ...]
    levels: tuple[tuple[Any, ...], ...]
    estimate: np.ndarray
    cov: np.ndarray
    df: float
    link: str = "identity"
    response: str = "response"
    averaged: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if len(self.factors) != len(self.levels):
            raise ValueError(f"RefGrid: {len(self.factors)} factors but {len(self.levels)} "
                             "level lists")
        n = int(np.prod([len(lv) for lv in self.levels]))
        est = np.asarray(self.estimate, dtype=float)
        cov = np.asarray(self.cov, dtype=float)
        if est.shape != (n,) or cov.shape != (n, n):
            raise ValueError(f"RefGrid: {n} cells need estimate shape ({n},) and cov shape "
                             f"({n}, {n}), got {est.shape} and {cov.shape}")
        if self.link not in LINKS:
            raise ValueError(f"RefGrid: link must be one of {', '.join(LINKS)}, got "
                             f"{self.link!r}")
        if not (self.df > 0):
            raise ValueError(f"RefGrid: df must be positive (inf for z tests), got {self.df!r}")
        object.__setattr__(self, "estimate", est)
        object.__setattr__(self, "cov", cov)

    def cells(self) -> pd.DataFrame:
        """The grid's cells, one row each, in the order of :attr:`estimate`."""
        combos = list(itertools.product(*self.levels))
        return pd.DataFrame(combos, columns=list(self.factors))


# --------------------------------------------------------------------------- marginal means


@dataclass(frozen=True)
class _Means:
    """Marginal means of a grid: labels, estimates, covariance, the by group of each row."""

    labels: pd.DataFrame  # by columns, then spec columns
    weights: np.ndarray  # (R, C) the rows of W over the grid's cells
    estimate: np.ndarray
    cov: np.ndarray
    group: np.ndarray  # (R,) index of the by group of each row
    specs: tuple[str, ...]
    by: tuple[str, ...]
    levels: dict[str, tuple[Any, ...]]


def _names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a factor name or a list of factor names, got "
                        f"{value!r}")
    return tuple(value)


def _check_factors(grid: RefGrid, specs: tuple[str, ...], by: tuple[str, ...]) -> None:
    from tomstats._validate import closest_hint

    if not specs:
        raise ValueError("specs: name at least one factor of the grid "
                         f"({', '.join(grid.factors)})")
    seen: set[str] = set()
    for role, names in (("specs", specs), ("by", by)):
        for f in names:
            if f not in grid.factors:
                raise ValueError(f"{role}: {f!r} is not a factor of the reference grid"
                                 f"{closest_hint(f, grid.factors)}")
            if f in seen:
                raise ValueError(f"{role}: factor {f!r} is named twice (specs and by must "
                                 "not share factors)")
            seen.add(f)


def _marginal(grid: RefGrid, specs: tuple[str, ...], by: tuple[str, ...]) -> _Means:
    r"""Equal-weight means over the factors outside ``specs`` and ``by``.

    Row order as emmeans prints them: by groups in turn (the first ``by`` factor varying
    fastest), within a group the ``specs`` combinations with the first factor fastest."""
    _check_factors(grid, specs, by)
    pos = {f: i for i, f in enumerate(grid.factors)}
    shape = tuple(len(lv) for lv in grid.levels)
    idx = np.indices(shape).reshape(len(shape), -1)  # (F, C) level index of each cell
    keep = [*by, *specs]
    rows, labels, groups = [], [], []

    def first_fastest(names: Sequence[str]) -> list[tuple[int, ...]]:
        ranges = [range(shape[pos[f]]) for f in reversed(names)]
        return [tuple(reversed(c)) for c in itertools.product(*ranges)]

    for g, bcombo in enumerate(first_fastest(by)):
        for scombo in first_fastest(specs):
            combo = (*bcombo, *scombo)
            mask = np.ones(idx.shape[1], dtype=bool)
            for f, i in zip(keep, combo, strict=True):
                mask &= idx[pos[f]] == i
            rows.append(mask / mask.sum())
            labels.append([grid.levels[pos[f]][i] for f, i in zip(keep, combo, strict=True)])
            groups.append(g)
    W = np.array(rows)
    est = W @ grid.estimate
    cov = W @ grid.cov @ W.T
    frame = pd.DataFrame(labels, columns=keep)
    return _Means(frame, W, est, 0.5 * (cov + cov.T), np.array(groups), specs, by,
                  {f: grid.levels[pos[f]] for f in keep})


def _check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    return float(level)


def _check_scale(scale: Any) -> str:
    if scale not in ("link", "response"):
        raise ValueError(f"scale must be 'link' or 'response', got {scale!r}")
    return str(scale)


def _quantile(prob: np.ndarray | float, df: float) -> np.ndarray:
    """Quantile of Student's t on ``df`` (the normal's when ``df`` is infinite)."""
    from scipy.special import ndtri, stdtrit

    prob = np.asarray(prob, dtype=float)
    return ndtri(prob) if math.isinf(df) else stdtrit(df, prob)


def _two_sided(stat: np.ndarray, df: float) -> np.ndarray:
    """:math:`2 P(T_\\nu > |t|)` (normal when :math:`\\nu = \\infty`)."""
    from scipy.special import ndtr, stdtr

    a = -np.abs(stat)
    return 2.0 * (ndtr(a) if math.isinf(df) else stdtr(df, a))


def _expit(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


def emmeans(grid: RefGrid, specs: str | Sequence[str], by: str | Sequence[str] | None = None,
            *, level: float = 0.95, scale: str = "link") -> pd.DataFrame:
    r"""Estimated marginal means of ``specs`` (within each ``by`` group), R's ``emmeans``.

    .. math::

        \hat\mu = W\hat m,\quad \operatorname{Var}\hat\mu = W V_m W^\top,\quad
        \hat\mu_j \pm t_{\nu,(1+\text{level})/2}\,\mathrm{se}_j,

    :math:`W` averaging the grid's cells with equal weights over the other factors (module
    docstring). On the response scale of a logit grid: :math:`\hat p = \operatorname
    {logit}^{-1}\hat\mu`, :math:`\mathrm{se} = \hat p(1-\hat p)\,\mathrm{se}_\mu`, bounds
    :math:`\operatorname{logit}^{-1}` of the link-scale bounds.

    Parameters
    ----------
    grid : RefGrid
    specs : str or sequence of str
        Factors whose means (or combinations) are wanted.
    by : str or sequence of str, optional
        Factors held fixed: one set of means per combination of their levels.
    level : float, default 0.95
        Coverage of the intervals.
    scale : {"link", "response"}, default "link"
        For a logit grid: logits or probabilities. An identity grid's two scales agree.

    Returns
    -------
    pandas.DataFrame
        Columns: the ``by`` factors, the ``specs`` factors, ``estimate``, ``se``, ``df``
        (``inf``: z), ``lower``, ``upper``. ``attrs``: ``scale``, ``level``, ``averaged``
        (the factors averaged over), ``link``.
    """
    specs_t, by_t = _names(specs, "specs"), _names(by, "by")
    level = _check_level(level)
    scale = _check_scale(scale)
    m = _marginal(grid, specs_t, by_t)
    se = np.sqrt(np.clip(np.diagonal(m.cov), 0.0, None))
    q = float(_quantile((1.0 + level) / 2.0, grid.df))
    est, lo, hi = m.estimate, m.estimate - q * se, m.estimate + q * se
    if scale == "response" and grid.link == "logit":
        p = _expit(est)
        est, se, lo, hi = p, p * (1.0 - p) * se, _expit(lo), _expit(hi)
    out = m.labels.copy()
    out["estimate"], out["se"], out["df"] = est, se, grid.df
    out["lower"], out["upper"] = lo, hi
    out.attrs.update(scale=scale, level=level, link=grid.link, response=grid.response,
                     averaged=[f for f in grid.factors if f not in (*specs_t, *by_t)],
                     specs=list(specs_t), by=list(by_t))
    return out


# --------------------------------------------------------------------------- coefficients


def _numeric_label(values: Sequence[Any]) -> bool:
    """Every level reads as a number (emmeans then prefixes the factor's name)."""
    for v in values:
        try:
            float(str(v))
        except ValueError:
            return False
    return True


def _level_text(factor: str, value: Any, numeric: bool) -> str:
    return f"{factor}{value}" if numeric else str(value)


def pairwise_coefficients(k: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """All differences ``mean_i - mean_j``, ``i < j``, in emmeans' order (rows), over ``k``
    means (columns); and the pairs."""
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    K = np.zeros((len(pairs), k))
    for r, (i, j) in enumerate(pairs):
        K[r, i], K[r, j] = 1.0, -1.0
    return K, pairs


def poly_coefficients(k: int, max_degree: int | None = None) -> np.ndarray:
    r"""Orthogonal polynomial contrasts over ``k`` equally spaced levels, scaled to integers
    as emmeans' ``poly.emmc`` does, shape ``(degrees, k)``.

    Each column of R's ``poly(1:k, d)`` (orthonormal, degree :math:`d \le \min(6, k - 1)`)
    is divided by its smallest entry above 0.01, then (while some entry is more than 0.05
    from an integer) by that largest distance, and rounded: for 3 levels ``(-1, 0, 1)`` and
    ``(1, -2, 1)``; for 5 the linear ``(-2, -1, 0, 1, 2)``.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"polynomial contrasts need at least 2 levels, got {k!r}")
    degree = min(6, k - 1) if max_degree is None else min(int(max_degree), k - 1, 20)
    x = np.arange(1, k + 1, dtype=float)
    # R's poly(): QR of the centred Vandermonde matrix, columns normalised
    V = np.vander(x - x.mean(), degree + 1, increasing=True)
    Q, R = np.linalg.qr(V)
    Z = Q * np.diag(R)  # signs as R's poly (the leading coefficient of each degree positive)
    Z = Z[:, 1:] / np.linalg.norm(Z[:, 1:], axis=0)
    out = np.empty((degree, k))
    for j in range(degree):
        con = Z[:, j]
        con = con / con[con > 0.01].min()
        z = np.max(np.abs(con - np.round(con)))
        while z > 0.05:
            con = con / z
            z = np.max(np.abs(con - np.round(con)))
        out[j] = np.round(con)
    return out


def _method_coefficients(method: str, levels: Sequence[Any], factor: str | None,
                         numeric: bool) -> tuple[np.ndarray, list[str]]:
    """Coefficients over one factor's (or one combination's) means and the row labels."""
    k = len(levels)
    if method == "pairwise":
        K, pairs = pairwise_coefficients(k)
        labels = [str(levels[i]) if factor is None else _level_text(factor, levels[i], numeric)
                  for i in range(k)]
        return K, [f"{labels[i]} - {labels[j]}" for i, j in pairs]
    if method == "poly":
        K = poly_coefficients(k)
        return K, list(_DEGREES[: K.shape[0]])
    raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")


# --------------------------------------------------------------------------- adjustment


def p_adjust(p: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    r"""Adjusted p values of one family (R's ``p.adjust``): ``"holm"`` —
    :math:`\max_{j \le i}\min(1, (m - j + 1)p_{(j)})`; ``"bonferroni"`` —
    :math:`\min(1, m p)`; ``"fdr"`` (Benjamini–Hochberg) —
    :math:`\min_{j \ge i}\min(1, m p_{(j)}/j)`; ``"none"``; :math:`p_{(j)}` the ordered p."""
    p = np.asarray(p, dtype=float)
    m = p.size
    if method == "none" or m == 0:
        return p.copy()
    if method == "bonferroni":
        return np.minimum(1.0, m * p)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ps))
    elif method == "fdr":
        adj = np.minimum.accumulate((m * ps / np.arange(1, m + 1))[::-1])[::-1]
        adj = np.minimum(1.0, adj)
    else:
        raise ValueError(f"p_adjust: method must be holm, bonferroni, fdr or none, got "
                         f"{method!r}")
    out = np.empty(m)
    out[order] = adj
    return out


def _tukey_p(stat: np.ndarray, k: int, df: float) -> np.ndarray:
    from scipy.stats import studentized_range

    if k < 2:
        return _two_sided(stat, df)
    return np.clip(studentized_range.sf(np.sqrt(2.0) * np.abs(stat), k, df), 0.0, 1.0)


def _tukey_q(level: float, k: int, df: float) -> float:
    from scipy.stats import studentized_range

    if k < 2:
        return float(_quantile((1.0 + level) / 2.0, df))
    return float(studentized_range.ppf(level, k, df)) / math.sqrt(2.0)


def _adjusted(stat: np.ndarray, df: float, adjust: str, n_means: int, level: float
              ) -> tuple[np.ndarray, np.ndarray, float, str]:
    """(raw p, adjusted p, the interval's quantile, the interval's adjustment) of a family."""
    m = stat.size
    raw = _two_sided(stat, df)
    if adjust == "tukey":
        return raw, _tukey_p(stat, n_means, df), _tukey_q(level, n_means, df), "tukey"
    ci = "none" if adjust == "none" or m <= 1 else "bonferroni"
    tail = (1.0 - level) / 2.0 / (m if ci == "bonferroni" else 1)
    return raw, p_adjust(raw, adjust), float(_quantile(1.0 - tail, df)), ci


# --------------------------------------------------------------------------- contrasts


def _check_adjust(adjust: Any, kinds: set[str]) -> str:
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    if adjust == "tukey" and kinds != {"pairwise"}:
        raise ValueError("adjust='tukey' (the studentized range) applies to pairwise "
                         "comparisons of means only; for polynomial or interaction contrasts "
                         "use holm, bonferroni, fdr or none")
    return str(adjust)


@dataclass(frozen=True)
class _Plan:
    r"""The coefficients of a set of contrasts: means :math:`W\hat m`, contrasts :math:`K`
    (block-diagonal over the by groups), the family (by group) of each contrast, labels."""

    means: _Means
    K: np.ndarray  # (Q, R)
    group: np.ndarray  # (Q,)
    labels: pd.DataFrame  # by columns, then the contrast label column(s)
    methods: tuple[str, ...]
    interaction: bool
    n_means: int


def _plan(grid: RefGrid, specs: str | Sequence[str], by: str | Sequence[str] | None,
          method: str | Sequence[str], interaction: bool) -> _Plan:
    """Check the arguments of :func:`contrasts` and lay out its coefficients."""
    specs_t, by_t = _names(specs, "specs"), _names(by, "by")
    methods = (tuple([method] * len(specs_t)) if isinstance(method, str)
               else _names(method, "method"))
    for mth in methods:
        if mth not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {mth!r}")
    if interaction:
        if len(specs_t) < 2:
            raise ValueError("interaction contrasts need at least two factors in specs, got "
                             f"{list(specs_t)}")
        if len(methods) != len(specs_t):
            raise ValueError(f"interaction contrasts need one method per factor ({len(specs_t)}"
                             f"), got {list(methods)}")
    elif len(set(methods)) != 1:
        raise ValueError("several methods apply only with interaction=True, got "
                         f"{list(methods)}")
    elif methods[0] == "poly" and len(specs_t) > 1:
        raise ValueError(f"polynomial contrasts are over one ordered factor, got specs "
                         f"{list(specs_t)} (use interaction=True for one contrast per factor)")
    m = _marginal(grid, specs_t, by_t)
    Kg, names = _group_coefficients(m, methods, bool(interaction))
    n_groups = int(m.group.max()) + 1
    K = np.kron(np.eye(n_groups), Kg)  # the means are ordered by group, Kg's rows within
    group = np.repeat(np.arange(n_groups), Kg.shape[0])
    first = [int(np.flatnonzero(m.group == g)[0]) for g in range(n_groups)]
    labels = pd.DataFrame({f: np.repeat(m.labels[f].to_numpy()[first], Kg.shape[0])
                           for f in by_t})
    for col, values in names.items():
        labels[col] = list(values) * n_groups
    return _Plan(m, K, group, labels, methods, bool(interaction), Kg.shape[1])


def emmeans_rows(grid: RefGrid, specs: str | Sequence[str],
                 by: str | Sequence[str] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of :func:`emmeans`: their labels and :math:`W` over the grid's cells (for
    draws of the cell predictions, :func:`tomstats.glmm.contrasts.posterior_contrasts`)."""
    m = _marginal(grid, _names(specs, "specs"), _names(by, "by"))
    return m.labels.copy(), m.weights


def contrast_rows(grid: RefGrid, specs: str | Sequence[str],
                  by: str | Sequence[str] | None = None, *,
                  method: str | Sequence[str] = "pairwise", interaction: bool = False
                  ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    r"""The rows of :func:`contrasts`: their labels, :math:`W` (means over cells) and
    :math:`K` (contrasts over means), so that the contrasts are :math:`K g(W\hat m)` with
    :math:`g` the identity or, on the response scale, the inverse link."""
    plan = _plan(grid, specs, by, method, interaction)
    return plan.labels.copy(), plan.means.weights, plan.K


def contrasts(grid: RefGrid, specs: str | Sequence[str], by: str | Sequence[str] | None = None,
              *, method: str | Sequence[str] = "pairwise", interaction: bool = False,
              adjust: str | None = None, level: float = 0.95, scale: str = "link"
              ) -> pd.DataFrame:
    r"""Contrasts of estimated marginal means (emmeans' ``contrast``/``pairs``), with tests,
    intervals and a multiplicity adjustment per ``by`` group.

    For each ``by`` group :math:`g` with means :math:`\hat\mu_g` (:func:`emmeans`) the
    contrasts are :math:`\hat\theta = K\hat\mu_g`, :math:`\operatorname{Var}\hat\theta =
    K\,\operatorname{Var}(\hat\mu_g)K^\top`, :math:`t = \hat\theta/\mathrm{se}` on the grid's
    df (z when infinite), :math:`p = 2P(T > |t|)`, adjusted within the group (module
    docstring), interval :math:`\hat\theta \pm q\,\mathrm{se}` with the adjustment's
    :math:`q`.

    Parameters
    ----------
    grid : RefGrid
    specs : str or sequence of str
        The factor(s) compared. ``method="pairwise"`` over several compares every pair of
        their level combinations; ``"poly"`` needs one factor; ``interaction=True`` one
        contrast per factor, multiplied.
    by : str or sequence of str, optional
        Simple effects: the contrasts within each combination of these factors' levels
        (emmeans' ``by``), each its own family.
    method : {"pairwise", "poly"} or a sequence of them, default "pairwise"
        One per ``specs`` factor with ``interaction=True``.
    interaction : bool, default False
        Interaction contrasts: the rows of :math:`K = K_{f_k}\otimes\cdots\otimes K_{f_1}`
        (the first factor's contrast varying fastest), e.g. the difference between two ToM
        orders' differences at two context lengths.
    adjust : {"tukey", "holm", "bonferroni", "fdr", "none"}, optional
        Default emmeans': ``"tukey"`` for pairwise comparisons, ``"none"`` otherwise.
    level : float, default 0.95
    scale : {"link", "response"}, default "link"
        For a logit grid: differences of logits (log odds ratios; the table adds
        ``odds_ratio`` and its interval) or of probabilities (the means back-transformed
        first, delta method).

    Returns
    -------
    pandas.DataFrame
        Columns: the ``by`` factors; ``contrast`` (``"a - b"``, ``"linear"``), or with
        ``interaction=True`` one column ``<factor>_<method>`` per factor; ``estimate``,
        ``se``, ``df``, ``statistic`` (t, or z when df is infinite), ``p`` (unadjusted),
        ``p_adjusted``, ``lower``, ``upper`` (adjusted as the module docstring says); for a
        logit grid on the link scale also ``odds_ratio``, ``or_lower``, ``or_upper``
        (:math:`e^{\hat\theta}` and its bounds). ``attrs``: ``adjust``, ``ci_adjust`` (the
        interval's), ``family_size`` (contrasts per group), ``n_means`` (means per group),
        ``level``, ``scale``, ``statistic`` (``"t"`` or ``"z"``).

    Raises
    ------
    ValueError
        An unknown factor, method, adjustment or scale; ``"poly"`` over several factors
        without ``interaction``; ``interaction`` with one factor; ``"tukey"`` for anything
        but pairwise comparisons.
    """
    level = _check_level(level)
    scale = _check_scale(scale)
    plan = _plan(grid, specs, by, method, interaction)
    kinds = set(plan.methods) if not plan.interaction else {"interaction"}
    adjust = ("tukey" if kinds == {"pairwise"} else "none") if adjust is None else adjust
    adjust = _check_adjust(adjust, kinds)
    mu, cov = plan.means.estimate, plan.means.cov
    if scale == "response" and grid.link == "logit":
        mu = _expit(mu)
        d = mu * (1.0 - mu)
        cov = cov * d[:, None] * d[None, :]  # emmeans' regrid: the delta method
    est = plan.K @ mu
    se = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", plan.K, cov, plan.K), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = est / se
    out = plan.labels.copy()
    raw, adj = np.empty_like(est), np.empty_like(est)
    lower, upper = np.empty_like(est), np.empty_like(est)
    ci_adjust = "none"
    for g in np.unique(plan.group):
        rows = plan.group == g
        raw[rows], adj[rows], q, ci_adjust = _adjusted(stat[rows], grid.df, adjust,
                                                        plan.n_means, level)
        lower[rows], upper[rows] = est[rows] - q * se[rows], est[rows] + q * se[rows]
    out["estimate"], out["se"], out["df"] = est, se, grid.df
    out["statistic"], out["p"], out["p_adjusted"] = stat, raw, adj
    out["lower"], out["upper"] = lower, upper
    if grid.link == "logit" and scale == "link":
        out["odds_ratio"] = np.exp(est)
        out["or_lower"], out["or_upper"] = np.exp(lower), np.exp(upper)
    specs_t, by_t = plan.means.specs, plan.means.by
    out.attrs.update(adjust=adjust, ci_adjust=ci_adjust,
                     family_size=int(np.sum(plan.group == 0)), n_means=plan.n_means,
                     level=level, scale=scale, link=grid.link, response=grid.response,
                     statistic="z" if math.isinf(grid.df) else "t",
                     method=list(plan.methods), interaction=plan.interaction,
                     specs=list(specs_t), by=list(by_t),
                     averaged=[f for f in grid.factors if f not in (*specs_t, *by_t)])
    return out


def _group_coefficients(m: _Means, methods: tuple[str, ...], interaction: bool
                        ) -> tuple[np.ndarray, dict[str, list[str]]]:
    """:math:`K` over one by group's means (specs combinations, first factor fastest) and
    the label columns of its rows."""
    if interaction:
        Ks, labels = [], []
        for f, mth in zip(m.specs, methods, strict=True):
            K, lab = _method_coefficients(mth, m.levels[f], None, False)
            Ks.append(K)
            labels.append(lab)
        K = Ks[0]
        for Kf in Ks[1:]:
            K = np.kron(Kf, K)  # the first factor's contrast varies fastest
        sizes = [len(lab) for lab in labels]
        cols: dict[str, list[str]] = {}
        for i, (f, mth) in enumerate(zip(m.specs, methods, strict=True)):
            inner = int(np.prod(sizes[:i]))
            outer = int(np.prod(sizes[i + 1:]))
            cols[f"{f}_{mth}"] = [lab for _ in range(outer) for lab in labels[i]
                                  for _ in range(inner)]
        return K, cols
    if len(m.specs) == 1:
        f = m.specs[0]
        K, lab = _method_coefficients(methods[0], m.levels[f], f,
                                      _numeric_label(m.levels[f]))
        return K, {"contrast": lab}
    first = m.labels.loc[m.group == 0, list(m.specs)]
    numeric = {f: _numeric_label(m.levels[f]) for f in m.specs}
    combos = [" ".join(_level_text(f, v, numeric[f]) for f, v in zip(m.specs, row, strict=True))
              for row in first.itertuples(index=False, name=None)]
    K, pairs = pairwise_coefficients(len(combos))
    return K, {"contrast": [f"{combos[i]} - {combos[j]}" for i, j in pairs]}


def simple_effects(grid: RefGrid, factors: Sequence[str] | None = None, *,
                   method: str = "pairwise", adjust: str | None = None, level: float = 0.95,
                   scale: str = "link") -> pd.DataFrame:
    """Simple effects of each factor within every combination of the others (emmeans'
    ``contrast(..., simple = "each")``): :func:`contrasts` of ``f`` by the other
    ``factors`` for each ``f``, stacked.

    Returns
    -------
    pandas.DataFrame
        A first column ``effect`` (the factor compared), then one column per factor (``"."``
        in the compared factor's own column, emmeans' placeholder), ``contrast`` and the
        columns of :func:`contrasts`. ``attrs`` as :func:`contrasts`', with ``family_size``
        per effect.
    """
    names = list(grid.factors if factors is None else _names(factors, "factors"))
    if len(names) < 2:
        raise ValueError(f"simple effects need at least two factors, got {names}")
    parts, attrs, sizes = [], {}, {}
    for f in names:
        others = [o for o in names if o != f]
        t = contrasts(grid, f, by=others, method=method, adjust=adjust, level=level,
                      scale=scale)
        attrs = dict(t.attrs)
        sizes[f] = t.attrs["family_size"]
        t = t.copy()
        t.insert(0, "effect", f)
        for col in names:
            if col not in t.columns:
                t.insert(1 + names.index(col), col, DOT)
        t = t[["effect", *names, *[c for c in t.columns if c not in ("effect", *names)]]]
        t[names] = t[names].astype(object)
        parts.append(t)
    out = pd.concat(parts, ignore_index=True)
    attrs.update(family_size=sizes, specs=names, by=[])
    out.attrs = attrs
    return out


# --------------------------------------------------------------------------- printing

#: How each number column is printed.
_FORMATS = {"estimate": "{:.4f}", "se": "{:.4f}", "lower": "{:.4f}", "upper": "{:.4f}",
            "statistic": "{:.3f}", "odds_ratio": "{:.3f}", "or_lower": "{:.3f}",
            "or_upper": "{:.3f}", "median": "{:.4f}", "mean": "{:.4f}", "sd": "{:.4f}",
            "hdi_lower": "{:.4f}", "hdi_upper": "{:.4f}", "pd": "{:.4f}"}
_ADJUST_WORDS = {"tukey": "Tukey's studentized range", "holm": "Holm's step-down",
                 "bonferroni": "Bonferroni", "fdr": "Benjamini–Hochberg (FDR)", "none": "none"}


def _number(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return fmt.format(v)


def _p_text(p: float) -> str:
    if p != p:
        return "—"
    return "<.0001" if p < 1e-4 else f"{p:.4f}"


def format_table(table: pd.DataFrame) -> str:
    """A table of :func:`emmeans`, :func:`contrasts` or :func:`simple_effects` as text:
    estimates and intervals to 4 decimals, p values to 4 (``<.0001`` below), df as integers
    (``inf`` for z tests)."""
    show = pd.DataFrame(index=table.index)
    for c in table.columns:
        col = table[c]
        if c in _FORMATS:
            show[c] = [_number(v, _FORMATS[c]) for v in col]
        elif c in ("p", "p_adjusted"):
            show[c] = [_p_text(float(v)) for v in col]
        elif c == "df":
            show[c] = [_number(float(v), "{:.0f}" if math.isinf(float(v))
                               or float(v) == round(float(v)) else "{:.2f}") for v in col]
        else:
            show[c] = [str(v) for v in col]
    if "statistic" in show.columns:
        show = show.rename(columns={"statistic": table.attrs.get("statistic", "t")})
    return show.to_string(index=False)


def describe_means(table: pd.DataFrame) -> str:
    """One line saying what :func:`emmeans`' table holds."""
    a = table.attrs
    scale = (f"{a.get('response', 'response')}" if a.get("scale") == "response"
             or a.get("link") == "identity" else "logit scale")
    by = f" within each {' × '.join(a['by'])}" if a.get("by") else ""
    over = (f", averaged over {', '.join(a['averaged'])}" if a.get("averaged") else "")
    return (f"Marginal means of {' × '.join(a['specs'])}{by} ({scale}{over}); "
            f"{a['level']:.0%} intervals")


def describe_contrasts(table: pd.DataFrame) -> str:
    """One line saying what :func:`contrasts`' (or :func:`simple_effects`') table holds."""
    a = table.attrs
    kind = ("interaction contrasts" if a.get("interaction")
            else "polynomial contrasts" if a.get("method") == ["poly"]
            else "pairwise comparisons")
    if a.get("link") == "logit":
        scale = ("differences of probabilities" if a.get("scale") == "response"
                 else "differences of logits (log odds ratios)")
    else:
        scale = f"differences of {a.get('response', 'means')}"
    if isinstance(a.get("family_size"), dict):
        what = f"each of {', '.join(a['family_size'])} within every level of the others"
        kind = f"simple effects: {kind}"
    else:
        by = f" within each {' × '.join(a['by'])}" if a.get("by") else ""
        over = f", averaged over {', '.join(a['averaged'])}" if a.get("averaged") else ""
        what = f"{' × '.join(a['specs'])}{by}{over}"
    adjust = _ADJUST_WORDS[a["adjust"]]
    ci = ("" if a["ci_adjust"] in ("none", a["adjust"])
          else f", intervals {_ADJUST_WORDS[a['ci_adjust']]}")
    fam = a.get("family_size")
    size = ("" if isinstance(fam, dict) or a["adjust"] == "none"
            else f" among {a['n_means']} means" if a["adjust"] == "tukey"
            else f" over {fam} contrasts per family")
    tests = (f"{a['statistic']} tests, p unadjusted" if a["adjust"] == "none"
             else f"{a['statistic']} tests, p adjusted by {adjust}{size}")
    return (f"{kind[0].upper()}{kind[1:]} of {what} ({scale}; {tests}{ci}; "
            f"{a['level']:.0%} intervals)")
