r"""ANOVA of rows: n-way between, repeated-measures and mixed designs, with effect sizes.

:func:`anova` works on long data (one row per question) and returns a tidy
:class:`pandas.DataFrame` like ``pingouin.anova``: any number of between factors, within
factors with a ``subject`` (Greenhouse–Geisser, Huynh–Feldt, Mauchly), five effect sizes and
cluster-bootstrap intervals; its docstring states those formulas. The two-way ANOVA of cell
counts that the simulator runs, vectorised in JAX, is
:func:`tomstats.simulation.count_anova.anova_from_counts`; it returns the same
:data:`COLUMNS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from tomstats._validate import check_type, closest_hint, show_value
from tomstats.analysis.intervals import (
    bca_interval,
    ncf_eta2_interval,
    ncf_lambda_interval,
)

__all__ = ["COLUMNS", "EFFECT_SIZES", "INTERVALS", "RM_COLUMNS", "SS_TYPES",
           "anova", "check_interval", "check_levels", "huynh_feldt", "orthonormal_contrasts"]

#: Interval methods of :func:`anova` (``interval=``) and ``tomstats anova --interval``.
INTERVALS: tuple[str, ...] = ("bca", "ncf")

#: Columns shared by every ANOVA table of the package (rows and cell counts).
COLUMNS: tuple[str, ...] = ("source", "SS", "DF", "MS", "F", "p", "eta2", "partial_eta2")
#: The sums-of-squares types (I, II, III).
SS_TYPES = (1, 2, 3)


# ---------------------------------------------------------------------------------------------
# pandas: n-way between, repeated-measures and mixed designs, from rows
# ---------------------------------------------------------------------------------------------

#: Effect-size columns of :func:`anova`; with ``ci`` each gets ``<name>_low``/``<name>_high``.
EFFECT_SIZES: tuple[str, ...] = (
    "eta2",
    "partial_eta2",
    "omega2",
    "partial_omega2",
    "generalized_eta2",
)
#: Sphericity columns of :func:`anova` for designs with a ``subject``.
RM_COLUMNS: tuple[str, ...] = ("eps_gg", "eps_hf", "p_gg", "p_hf", "mauchly_W", "mauchly_p")

_Term = tuple[int, ...]
_MAX_GATHER = 10_000_000  # elements per chunk of bootstrap index draws
#: Distinct jackknife units (clusters, or rows, with their cell) evaluated for the BCa
#: acceleration at most; more are subsampled (identical units are pooled first).
_MAX_JACKKNIFE = 5_000


def _factorial_terms(k: int) -> list[_Term]:
    """All non-empty factor subsets of a full factorial in patsy/R order (by degree, then as
    ``A*B*C`` expands): ``(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)``."""
    terms: list[_Term] = []
    for f in range(k):
        terms = terms + [(f,)] + [t + (f,) for t in terms]
    return sorted(terms, key=len)


def _sum_coding(levels: int) -> np.ndarray:
    """Sum-to-zero contrasts (patsy ``Sum``): identity over the first levels, -1 on the last."""
    return np.vstack([np.eye(levels - 1), -np.ones((1, levels - 1))])


def orthonormal_contrasts(levels: int) -> np.ndarray:
    """Orthonormal contrasts over ``levels`` levels (columns orthogonal to 1 and to each
    other), shape ``(levels, levels - 1)``: the QR factor of ``[1, sum coding]`` after its
    first column. The within-subject tests of :func:`anova` and of the power analysis
    (:mod:`tomstats.planning.analyses`) use them; their F and ε do not depend on the choice
    of orthonormal basis."""
    q, _ = np.linalg.qr(np.hstack([np.ones((levels, 1)), _sum_coding(levels)]))
    return q[:, 1:]


def huynh_feldt(gg: Any, p: int, dfe: float) -> Any:
    r"""Huynh–Feldt :math:`\tilde\varepsilon` from the Greenhouse–Geisser
    :math:`\hat\varepsilon` of an effect with :math:`p` df and :math:`\nu` error df per
    contrast (car's formula): :math:`\tilde\varepsilon = \frac{(\nu + 1) p\hat\varepsilon
    - 2}{p(\nu - p\hat\varepsilon)}`, not capped (the tests use
    :math:`\min(1, \tilde\varepsilon)`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return ((dfe + 1) * p * gg - 2) / (p * (dfe - p * gg))


def _term_matrix(shape: tuple[int, ...], term: _Term, coding: Callable[[int], np.ndarray],
                 ones: Callable[[int], np.ndarray]) -> np.ndarray:
    """Columns of one term over the cells of a full factorial (C order over ``shape``)."""
    out = np.ones((1, 1))
    for f, levels in enumerate(shape):
        out = np.kron(out, coding(levels) if f in term else ones(levels))
    return out


def _term_df(shape: tuple[int, ...], term: _Term) -> int:
    return int(np.prod([shape[f] - 1 for f in term])) if term else 1


def _before(term: _Term, terms: list[_Term], ss_type: int) -> list[_Term]:
    """Terms the SS of ``term`` is adjusted for (``()`` is the intercept).

    Type I: the intercept and the terms before it; type II: the intercept and every term that
    does not contain it; type III: all other terms (sum-to-zero coding). The intercept itself
    (tested in repeated-measures strata) comes first in types I and II (car's
    :math:`N\\bar z^2`) and is adjusted for all terms in type III.
    """
    others = [t for t in terms if t != ()]
    if term == ():
        return others if ss_type == 3 else []
    if ss_type == 1:
        return [(), *others[: others.index(term)]]
    if ss_type == 2:
        return [(), *(t for t in others if t != term and not set(term) <= set(t))]
    return [(), *(t for t in others if t != term)]


def _term_bases(
    shape: tuple[int, ...], terms: list[_Term], ss_type: int, n: np.ndarray
) -> list[np.ndarray]:
    r"""Orthonormal bases :math:`U_T` (C × df_T) with :math:`SS_T = \lVert U_T^\top z\rVert^2`.

    ``z_c = s_c / \sqrt{n_c}`` are the scaled cell sums. :math:`U_T` spans the part of the
    weighted columns :math:`\sqrt{n}\,X_T` orthogonal to the columns of the terms it is adjusted
    for (:func:`_before`), so :math:`\lVert U_T^\top z\rVert^2 = RSS(\text{before}) -
    RSS(\text{before} + T)` of the weighted least-squares fit of the cell means: the exact SS
    without differences of large numbers.
    """
    sw = np.sqrt(n)[:, None]
    cols = {t: _term_matrix(shape, t, _sum_coding, lambda k: np.ones((k, 1))) * sw
            for t in [(), *terms]}
    bases = []
    for t in terms:
        design = np.hstack([cols[b] for b in _before(t, terms, ss_type)] + [cols[t]])
        q, _ = np.linalg.qr(design)
        bases.append(q[:, design.shape[1] - cols[t].shape[1]:])
    return bases


def _weighted_gram(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    r""":math:`X^\top \operatorname{diag}(w_b) X` for every row ``w_b`` of ``w`` (B, C), as one
    matrix product with the stacked outer products :math:`x_c x_c^\top` (C × p²)."""
    p = x.shape[1]
    outer = (x[:, :, None] * x[:, None, :]).reshape(x.shape[0], p * p)
    return (w @ outer).reshape(w.shape[0], p, p)


def _explained(x: np.ndarray, null: np.ndarray | None, sc: np.ndarray, n: np.ndarray) -> Any:
    r"""Weighted explained SS :math:`s^\top X (X^\top W X)^{-1} X^\top s` for a batch of weights.

    ``sc`` and ``n`` have shape (B, C). Solves a p × p system, or, when the orthogonal
    complement ``null`` of the columns is smaller, uses
    :math:`\sum_c s_c^2/n_c - (N^\top m)^\top (N^\top W^{-1} N)^{-1} N^\top m`, :math:`m = s/n`.
    """
    if null is None:
        if x.shape[1] == 0:
            return np.zeros(sc.shape[0])
        a = _weighted_gram(x, n)
        u = sc @ x
        return np.einsum("bi,bi->b", u, np.linalg.solve(a, u[..., None])[..., 0])
    full = np.sum(sc * sc / n, axis=-1)
    if null.shape[1] == 0:
        return full
    d = _weighted_gram(null, 1.0 / n)
    v = (sc / n) @ null
    return full - np.einsum("bi,bi->b", v, np.linalg.solve(d, v[..., None])[..., 0])


@dataclasses.dataclass(frozen=True)
class _Between:
    """A between-subjects full factorial: cell shape, term list and the SS machinery."""

    shape: tuple[int, ...]
    terms: list[_Term]
    ss_type: int
    n: np.ndarray  # (C,) cell sizes of the data
    bases: list[np.ndarray]

    @classmethod
    def build(cls, shape: tuple[int, ...], terms: list[_Term], ss_type: int,
              n: np.ndarray) -> _Between:
        return cls(shape, terms, ss_type, n, _term_bases(shape, terms, ss_type, n))

    def ss(self, z: np.ndarray) -> np.ndarray:
        """SS of every term (..., T) for scaled cell sums ``z`` (..., C), fixed cell sizes."""
        return np.stack([np.sum((z @ u) ** 2, axis=-1) for u in self.bases], axis=-1)

    def ss_weighted(self, sc: np.ndarray, n: np.ndarray) -> np.ndarray:
        """SS of every term for a batch with its own cell sizes (normal equations).

        ``sc``: centred cell sums (B, C); ``n``: cell sizes (B, C). Used by the bootstrap when
        resampled clusters change the cell sizes.
        """
        cache: dict[tuple[_Term, ...], Any] = {}
        cols = {t: _term_matrix(self.shape, t, _sum_coding, lambda k: np.ones((k, 1)))
                for t in [(), *self.terms]}
        n_cells = len(self.n)

        def explained(model: tuple[_Term, ...]) -> Any:
            if model not in cache:
                x = np.hstack([cols[t] for t in model])
                if 2 * x.shape[1] <= n_cells:
                    cache[model] = _explained(x, None, sc, n)
                else:
                    q, _ = np.linalg.qr(x, mode="complete")
                    cache[model] = _explained(x, q[:, x.shape[1]:], sc, n)
            return cache[model]

        out = []
        for t in self.terms:
            before = tuple(_before(t, self.terms, self.ss_type))
            out.append(explained((*before, t)) - explained(before))
        return np.stack(out, axis=-1)


def _name(term: _Term, names: Sequence[str]) -> str:
    return ":".join(names[f] for f in term)


def _f_p(f: Any, d1: Any, d2: Any) -> Any:
    with np.errstate(invalid="ignore", divide="ignore"):
        return scipy.stats.f.sf(f, d1, d2)


def _ss_tolerance(y: np.ndarray) -> float:
    r"""Sums of squares at or below :math:`10^{-12}\sum_i y_i^2` are rounding error of the
    orthogonal projections (pingouin prints them as :math:`\pm 10^{-15}`); they are set to
    exactly 0, so that a term without variation has SS 0, not a tiny number over a zero error
    that would print as F = ∞ and partial η² = 1."""
    return 1e-12 * float(np.sum(np.asarray(y, dtype=float) ** 2))


def _exact_zero(x: Any, tol: float) -> Any:
    """``x`` with entries of magnitude ≤ ``tol`` set to exactly 0."""
    a = np.asarray(x, dtype=float)
    return np.where(np.abs(a) <= tol, 0.0, a)


def _notes(ss: np.ndarray, sse: np.ndarray, ss_total: float, y: np.ndarray) -> list[str]:
    """Why a row's F, p or effect sizes are undefined (or infinite); ``""`` when they are not.

    A constant outcome leaves nothing to decompose (every SS is 0: F and every effect size are
    0/0, NaN). An error SS of 0 (every cell, or every subject × within cell, constant) makes
    the F ratio of a term with SS > 0 infinite (p = 0, as pingouin and R report it; R warns
    that F tests on an essentially perfect fit are unreliable) and 0/0 (NaN) for a term with
    SS 0.
    """
    if ss_total == 0:
        return [f"no variation: the outcome is {float(y[0]):g} in every row, so F and the "
                "effect sizes are undefined (0/0)"] * len(ss)
    out = []
    for a, e in zip(np.asarray(ss, dtype=float), np.asarray(sse, dtype=float), strict=True):
        if e != 0:
            out.append("")
        elif a == 0:
            out.append("SS 0 and no error variance (every cell constant): F and the partial "
                       "effect sizes are undefined (0/0)")
        else:
            out.append("no error variance (every cell constant): F is infinite and the F test "
                       "does not apply (a perfect fit)")
    return out


def _effect_sizes(
    ss: np.ndarray, df: np.ndarray, sse: np.ndarray, dfe: np.ndarray, ss_total: np.ndarray,
    n_obs: float, error_sum: np.ndarray, observed: np.ndarray,
) -> dict[str, np.ndarray]:
    """η², partial η², ω², partial ω², generalized η² of the effect rows (broadcast over a
    leading batch axis); see :func:`anova` for the formulas."""
    mse = sse / dfe
    tot = ss_total[..., None]
    obs_ss = np.sum(ss * observed, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "eta2": ss / tot,
            "partial_eta2": ss / (ss + sse),
            "omega2": (ss - df * mse) / (tot + mse),
            "partial_omega2": (ss - df * mse) / (ss + (n_obs - df) * mse),
            "generalized_eta2": ss / (ss + error_sum[..., None] + obs_ss - ss * observed),
        }


# ---------------------------------------------------------------------------------------------
# repeated measures: univariate tests on subject × within-cell means (car / afex)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _RMDesign:
    """Subjects in between cells, each with every within cell (after aggregation)."""

    between: _Between  # over between cells; terms include the intercept first
    cell_of_subject: np.ndarray  # (S,) between cell of each subject
    within_shape: tuple[int, ...]
    within_terms: list[_Term]  # with the intercept () first
    within_bases: list[np.ndarray]  # orthonormal (J × p_W)


def _rm_design(bshape: tuple[int, ...], cell_of_subject: np.ndarray, wshape: tuple[int, ...],
               ss_type: int) -> _RMDesign:
    n_g = np.bincount(cell_of_subject, minlength=int(np.prod(bshape))).astype(float)
    bterms = [(), *_factorial_terms(len(bshape))]
    between = _Between.build(bshape, bterms, ss_type, n_g)
    wterms = [(), *_factorial_terms(len(wshape))]
    wbases = [_term_matrix(wshape, w, orthonormal_contrasts,
                           lambda k: np.full((k, 1), 1.0 / np.sqrt(k))) for w in wterms]
    return _RMDesign(between, cell_of_subject, wshape, wterms, wbases)


def _rm_core(des: _RMDesign, y: np.ndarray, with_sphericity: bool) -> dict[str, Any]:
    r"""Univariate mixed-design ANOVA of subject × within-cell means ``y`` (..., S, J).

    For each within term :math:`W` (orthonormal contrasts :math:`Q_W`, J × p_W; the intercept
    stratum uses :math:`1/\sqrt J`) the transformed responses :math:`Z = Y Q_W` (S × p_W) are
    analysed between subjects: :math:`SS_{T:W} = \sum_k SS_T(Z_{\cdot k})` with the type I/II/III
    SS of :class:`_Between` (the intercept row :math:`T = ()` is the within effect itself), and
    the error :math:`SS_{E,W} = \operatorname{tr} E_W` with
    :math:`E_W = \sum_s (Z_s - \bar Z_{g(s)})(Z_s - \bar Z_{g(s)})^\top`, on
    :math:`(S - G)\,p_W` degrees of freedom — car's ``summary(Anova(mlm))`` univariate tests.
    """
    b = des.between
    n_g = b.n
    n_cells = len(n_g)
    onehot = np.zeros((n_cells, len(des.cell_of_subject)))
    onehot[des.cell_of_subject, np.arange(len(des.cell_of_subject))] = 1.0
    ss, sse, es = [], [], []
    for q in des.within_bases:
        z = y @ q  # (..., S, p)
        sums = np.einsum("gs,...sp->...gp", onehot, z)
        means = sums / n_g[:, None]
        resid = z - means[..., des.cell_of_subject, :]
        zz = sums / np.sqrt(n_g)[:, None]
        per_term = [np.einsum("gt,...gp->...tp", u, zz) for u in b.bases]
        ss.append(np.stack([np.sum(p * p, axis=(-2, -1)) for p in per_term], axis=-1))
        sse.append(np.sum(resid * resid, axis=(-2, -1)))
        if with_sphericity:
            es.append(np.einsum("...sp,...sq->...pq", resid, resid))
    yc = y - np.mean(y, axis=(-2, -1), keepdims=True)
    return {"ss": ss, "sse": sse, "E": es, "ss_total": np.sum(yc * yc, axis=(-2, -1))}


def _sphericity(e: np.ndarray, dfe: float, n_within_cells: int) -> tuple[float, ...]:
    """GG ε, HF ε, Mauchly's W and p for one error SSP matrix (orthonormal contrasts), with the
    formulas of car's ``summary.Anova.mlm`` (including its ``3 * nrow(P)`` term)."""
    p = e.shape[0]
    tr = np.trace(e)
    gg = tr * tr / (p * np.trace(e @ e))
    hf = huynh_feldt(gg, p, dfe)
    sign, logdet = np.linalg.slogdet(e)
    if sign <= 0:
        return gg, hf, np.nan, np.nan
    log_w = logdet - p * np.log(tr / p)
    rho = 1 - (2 * p * p + p + 2) / (6 * p * dfe)
    w2 = ((p + 2) * (p - 1) * (p - 2) * (2 * p**3 + 6 * p * p + 3 * n_within_cells + 2)
          / (288 * (dfe * p * rho) ** 2))
    z = -dfe * rho * log_w
    f = p * (p + 1) / 2 - 1
    pr1 = scipy.stats.chi2.sf(z, f)
    pr2 = scipy.stats.chi2.sf(z, f + 4)
    return gg, hf, float(np.exp(log_w)), float(pr1 + w2 * (pr2 - pr1))


# ---------------------------------------------------------------------------------------------
# cluster bootstrap
# ---------------------------------------------------------------------------------------------


def _cluster_stats(cell: np.ndarray, cluster: np.ndarray, y: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster (a cluster value within one cell): its cell and (count, Σy, Σy²)."""
    key = cell.astype(np.int64) * (int(cluster.max()) + 1) + cluster
    uniq, inv = np.unique(key, return_inverse=True)
    stats = np.stack([
        np.bincount(inv, minlength=len(uniq)).astype(float),
        np.bincount(inv, weights=y, minlength=len(uniq)),
        np.bincount(inv, weights=y * y, minlength=len(uniq)),
    ], axis=1)
    return uniq // (int(cluster.max()) + 1), stats


def _resample_cells(cell_of_cluster: np.ndarray, stats: np.ndarray, n_cells: int, n_boot: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Cell statistics (count, Σy, Σy²) of ``n_boot`` cluster-bootstrap resamples, (B, C, 3).

    In each cell its :math:`G_c` clusters are drawn :math:`G_c` times with replacement, for all
    resamples at once: clusters with identical statistics are pooled and the pooled counts drawn
    from one multinomial per resample when there are few distinct ones (e.g. 0/1 outcomes with
    one row per cluster), otherwise the cluster indices are drawn and their statistics summed.
    """
    out = np.empty((n_boot, n_cells, 3))
    order = np.argsort(cell_of_cluster, kind="stable")
    bounds = np.searchsorted(cell_of_cluster[order], np.arange(n_cells + 1))
    for c in range(n_cells):
        t = stats[order[bounds[c]: bounds[c + 1]]]
        g = len(t)
        uniq, counts = np.unique(t, axis=0, return_counts=True)
        if len(uniq) == 1:
            out[:, c] = g * uniq[0]
        elif 8 * len(uniq) <= g:
            draws = rng.multinomial(g, counts / g, size=n_boot)
            out[:, c] = draws @ uniq
        else:
            step = max(1, _MAX_GATHER // g)
            for lo in range(0, n_boot, step):
                hi = min(n_boot, lo + step)
                idx = rng.integers(0, g, size=(hi - lo, g))
                for j in range(3):
                    out[lo:hi, c, j] = t[:, j][idx].sum(axis=1)
    return out


def _jackknife_cells(cell_of_cluster: np.ndarray, stats: np.ndarray, n_cells: int,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The leave-one-cluster-out data as cell statistics, for the BCa acceleration: the full
    cell statistics (C, 3), and per distinct (cell, cluster statistics) its cell, its
    statistics and how many clusters share them (identical clusters give identical jackknife
    values, so 0/1 outcomes need at most a few evaluations per cell)."""
    full = np.zeros((n_cells, 3))
    np.add.at(full, cell_of_cluster, stats)
    uniq, counts = np.unique(np.column_stack([cell_of_cluster, stats]), axis=0,
                             return_counts=True)
    return full, uniq[:, 0].astype(np.int64), uniq[:, 1:], counts.astype(float)


def _jackknife_sample(cells: np.ndarray, weights: np.ndarray, rng: np.random.Generator,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """At most about :data:`_MAX_JACKKNIFE` of the distinct jackknife units: in each cell a
    uniform sample of its units, in proportion to the cell's share (at least 2), reweighted
    so that each cell's weights still sum to its number of clusters. Returns the kept rows
    and their weights; all rows, unchanged, when there are few enough."""
    if len(cells) <= _MAX_JACKKNIFE:
        return np.arange(len(cells)), weights
    keep, new_w = [], []
    for c in np.unique(cells):
        rows = np.flatnonzero(cells == c)
        k = min(len(rows), max(2, round(_MAX_JACKKNIFE * len(rows) / len(cells))))
        pick = np.sort(rng.choice(rows, size=k, replace=False))
        keep.append(pick)
        new_w.append(weights[pick] * weights[rows].sum() / weights[pick].sum())
    return np.concatenate(keep), np.concatenate(new_w)


def _intervals(sizes_of: Callable[[np.ndarray], dict[str, np.ndarray]], boot: np.ndarray,
               est: dict[str, np.ndarray], cell_of_cluster: np.ndarray, stats: np.ndarray,
               n_cells: int, ci: float, rng: np.random.Generator,
               ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """BCa intervals (:func:`tomstats.analysis.intervals.bca_interval`) of every effect size:
    ``sizes_of`` maps cell statistics (K, C, 3) to each effect size's (K, R) values; the
    resamples ``boot`` (B, C, 3) give the bootstrap distribution, the clusters left out one at
    a time (within their cell, the bootstrap's strata) the acceleration — from a weighted
    random subsample of them when there are more than :data:`_MAX_JACKKNIFE` distinct ones
    (the acceleration is a small correction; its sampling error is well below the
    bootstrap's)."""
    full, cells, left_out, weights = _jackknife_cells(cell_of_cluster, stats, n_cells)
    rows, weights = _jackknife_sample(cells, weights, rng)
    cells, left_out = cells[rows], left_out[rows]
    step = max(1, _MAX_GATHER // (3 * n_cells))
    parts = []
    for lo in range(0, len(cells), step):
        chunk = np.repeat(full[None], min(step, len(cells) - lo), axis=0)
        idx = np.arange(len(chunk))
        chunk[idx, cells[lo: lo + step]] -= left_out[lo: lo + step]
        parts.append(sizes_of(chunk))
    sizes_b = sizes_of(boot)
    out = {}
    for k in EFFECT_SIZES:
        jack = np.concatenate([p[k] for p in parts])
        out[k] = bca_interval(sizes_b[k], est[k], jack, cells, ci, weights)
    return out


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _names(value: Any, arg: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    check_type(value, (list, tuple), arg, "a column name or a list of column names")
    for v in value:
        check_type(v, str, f"{arg} entries", "column names (str)")
    return list(value)


def _first_bad(data: pd.DataFrame, mask: np.ndarray) -> tuple[str, str]:
    i = int(np.argmax(mask))
    return show_value(data.index[i]), str(i)


def _levels(col: pd.Series) -> list[Any]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        present = set(col.unique())
        return [c for c in col.cat.categories if c in present]
    uniq = pd.unique(col)
    try:
        return sorted(uniq)
    except TypeError:
        return list(uniq)


def _codes(data: pd.DataFrame, col: str) -> tuple[list[Any], np.ndarray]:
    levels = _levels(data[col])
    return levels, pd.Index(levels).get_indexer(data[col])


def _validate(
    data: Any, dv: Any, between: Any, within: Any, subject: Any, ss_type: Any, binary: Any,
    ci: Any, n_boot: Any, cluster: Any, seed: Any, observed: Any,
) -> tuple[list[str], list[str], list[str], np.ndarray]:
    check_type(data, pd.DataFrame, "data", "a pandas DataFrame (one row per observation)")
    check_type(dv, str, "dv", "a column name (str)")
    bfac = _names(between, "between")
    wfac = _names(within, "within")
    obs = _names(observed, "observed")
    if subject is not None:
        check_type(subject, str, "subject", "a column name (str) or None")
    if cluster is not None:
        check_type(cluster, str, "cluster", "a column name (str) or None")
    if isinstance(ss_type, bool) or not isinstance(ss_type, (int, np.integer)):
        raise TypeError(f"ss_type must be int (1, 2 or 3), got {type(ss_type).__name__} "
                        f"{ss_type!r}")
    check_type(binary, (bool, np.bool_), "binary")
    if ci is not None and (isinstance(ci, bool) or not isinstance(ci, (float, int))):
        raise TypeError(f"ci must be float (e.g. 0.95) or None, got {type(ci).__name__} {ci!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)):
        raise TypeError(f"n_boot must be int, got {type(n_boot).__name__} {n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be int, got {type(seed).__name__} {seed!r}")
    if ss_type not in SS_TYPES:
        raise ValueError(f"ss_type must be 1, 2 or 3, got {ss_type!r}")
    if ci is not None and not 0 < ci < 1:
        raise ValueError(f"ci must lie strictly between 0 and 1 (e.g. 0.95), got {ci!r}")
    if ci is not None and n_boot < 2:
        raise ValueError(f"n_boot must be at least 2 for an interval, got {n_boot}")
    if not bfac and not wfac and subject is None:
        raise ValueError("name at least one factor: between=[...] and/or within=[...]")
    if wfac and subject is None:
        raise ValueError(f"within factors {wfac} need subject= (the column naming the subject, "
                         "e.g. the model)")
    seen: dict[str, str] = {dv: "dv"}
    for role, names in (("between", bfac), ("within", wfac)):
        for f in names:
            if f in seen:
                where = f"in {role}" if seen[f] == role else f"(as {seen[f]} and as {role})"
                raise ValueError(f"factor {f!r} is named twice {where}")
            seen[f] = role
    for role, name in (("subject", subject), ("cluster", cluster)):
        if name is not None and name in seen:
            raise ValueError(f"{role} column {name!r} is also used as {seen[name]}")
        if name is not None:
            seen[name] = role
    for f in obs:
        if f not in bfac and f not in wfac:
            raise ValueError(f"observed factor {f!r} is not a between or within factor"
                             f"{closest_hint(f, bfac + wfac)}")
    cols = [str(c) for c in data.columns]
    for role, name in (("dv", dv), *(("between", f) for f in bfac), *(("within", f) for f in wfac),
                       ("subject", subject), ("cluster", cluster)):
        if name is not None and name not in data.columns:
            raise ValueError(f"{role} column {name!r} not in data{closest_hint(name, cols)}")
    if len(data) == 0:
        raise ValueError("data has no rows")
    col = data[dv]
    if not pd.api.types.is_numeric_dtype(col):
        bad = next((v for v in col if not isinstance(v, (int, float, np.number))), col.iloc[0])
        raise ValueError(f"dv column {dv!r} must be numeric, got dtype {col.dtype} "
                         f"(e.g. value {show_value(bad)})")
    y = col.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(y)
    if bad.any():
        idx, _ = _first_bad(data, bad)
        raise ValueError(f"dv column {dv!r} has a missing or infinite value at index {idx}: "
                         f"{show_value(col.iloc[int(np.argmax(bad))])}")
    if binary:
        bad = (y != 0.0) & (y != 1.0)
        if bad.any():
            idx, _ = _first_bad(data, bad)
            raise ValueError(f"binary=True but dv column {dv!r} has value "
                             f"{show_value(col.iloc[int(np.argmax(bad))])} at index {idx}; "
                             "expected only 0 and 1")
    for role, name in (*(("factor", f) for f in bfac + wfac), ("subject", subject),
                       ("cluster", cluster)):
        if name is None:
            continue
        na = data[name].isna().to_numpy()
        if na.any():
            idx, _ = _first_bad(data, na)
            raise ValueError(f"{role} column {name!r} has a missing value at index {idx}")
    return bfac, wfac, obs, y


def check_levels(data: pd.DataFrame, factors: Sequence[str], where: str = ""
                 ) -> list[tuple[list[Any], np.ndarray]]:
    """Levels (categories in order, else sorted) and integer codes of each factor; a
    ``ValueError`` names a factor with fewer than two levels (``where`` ends its subject)."""
    out = []
    for f in factors:
        levels, codes = _codes(data, f)
        if len(levels) < 2:
            shown = show_value(levels[0]) if levels else "(none)"
            raise ValueError(f"factor {f!r} has a single level {shown}{where}; an ANOVA "
                             "factor needs at least 2")
        out.append((levels, codes))
    return out


def _combo(names: list[str], levels: list[list[Any]], shape: tuple[int, ...], flat: int) -> str:
    idx = np.unravel_index(flat, shape)
    return ", ".join(f"{f}={show_value(lv[i])}"
                     for f, lv, i in zip(names, levels, idx, strict=True))


# ---------------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------------


def anova(
    data: pd.DataFrame,
    dv: str,
    between: str | Sequence[str] | None = None,
    *,
    within: str | Sequence[str] | None = None,
    subject: str | None = None,
    ss_type: int = 2,
    binary: bool = False,
    ci: float | None = None,
    n_boot: int = 2000,
    cluster: str | None = None,
    seed: int = 0,
    observed: str | Sequence[str] | None = None,
    interval: str = "bca",
) -> pd.DataFrame:
    r"""N-way between-subjects, repeated-measures or mixed ANOVA with effect sizes and intervals.

    **Between-subjects designs** (``between`` only): the model is the full factorial
    ``y ~ A * B * C * ...`` with all interactions, factors categorical whatever their dtype, on
    one row per observation; every factor combination needs data. The model is saturated in the
    cells, so everything is computed from per-cell statistics — cell size :math:`n_c`, sum
    :math:`s_c` and within-cell SS :math:`W_c = \sum (y - \bar y_c)^2`:
    :math:`SS_\text{res} = \sum_c W_c` on :math:`N - C` degrees of freedom, and the SS of a
    term :math:`T` is :math:`RSS(M_0) - RSS(M_0 + T)` of the weighted (weights :math:`n_c`)
    least-squares fit of the cell means, where :math:`M_0` is

    - type I: the intercept and the terms before :math:`T` (patsy/R order: main effects, then
      two-way interactions, ..., each in the order of ``between``);
    - type II: the intercept and every term that does not contain :math:`T`;
    - type III: all other terms, sum-to-zero coded.

    These equal statsmodels ``anova_lm(ols("y ~ C(A) * C(B) * ..."), typ=1|2)`` and
    ``anova_lm(ols("y ~ C(A, Sum) * C(B, Sum) * ..."), typ=3)``. The last row, ``Residual``,
    carries :math:`SS_\text{res}`, :math:`DF_\text{res}`, :math:`MS_\text{res}` and
    :math:`\eta^2 = SS_\text{res}/SS_\text{total}`; its other columns are NaN.

    **Repeated-measures and mixed designs** (``subject`` and ``within``, optionally
    ``between``): rows are first aggregated to the mean of each subject × within cell (as afex
    ``aov_car(..., fun_aggregate = mean)``); between factors must be constant within a subject.
    For each within term :math:`W` (and the between-subjects stratum) the orthonormal contrasts
    :math:`Q_W` of the within cells transform the subject's means, :math:`Z = Y Q_W`
    (S × p_W), and the between-subjects SS of type ``ss_type`` are summed over the columns of
    :math:`Z`: :math:`SS_{T:W} = \sum_k SS_T(Z_{\cdot k})`, error
    :math:`SS_{E,W} = \operatorname{tr} E_W` with
    :math:`E_W = \sum_s (Z_s - \bar Z_{g(s)})(Z_s - \bar Z_{g(s)})^\top` on
    :math:`DF_E = (S - G)\,p_W` (S subjects, G between cells), :math:`F = MS/MS_E`. This is
    car's ``Anova`` on the multivariate model, which afex ``aov_car`` reports (type II: the
    within effect itself is tested as :math:`N\bar z^2`, as car does). Sphericity, per within
    effect with :math:`p = p_W` error contrasts and :math:`d = S - G`:

    - Greenhouse–Geisser :math:`\hat\varepsilon_{GG} = \operatorname{tr}(E)^2 /
      (p\,\operatorname{tr}(E^2))`; ``p_gg`` is the F tail on :math:`\hat\varepsilon DF` and
      :math:`\hat\varepsilon DF_E`;
    - Huynh–Feldt :math:`\tilde\varepsilon_{HF} = ((d + 1)\,p\,\hat\varepsilon_{GG} - 2) /
      (p\,(d - p\,\hat\varepsilon_{GG}))`, reported uncapped (it may exceed 1, as car prints
      it); ``p_hf`` uses :math:`\min(1, \tilde\varepsilon_{HF})`, as afex and car do;
    - Mauchly's :math:`W = \det E / (\operatorname{tr}(E)/p)^p` with car's χ² approximation
      (:math:`\rho = 1 - (2p^2 + p + 2)/(6pd)`, statistic :math:`-d\rho\log W` on
      :math:`p(p+1)/2 - 1` df, plus the second-order term).

    For effects with 1 df the ε are 1, ``p_gg = p_hf = p`` and Mauchly is NaN; for
    between-subjects effects all six columns are NaN, and so they are when the error matrix is
    singular (:math:`d < p`, fewer subjects than contrasts), as in car. No ``Residual`` row:
    each effect carries its error stratum in ``SS_error`` and ``DF_error``. ``subject`` without
    ``within`` is a between-subjects ANOVA of the subjects' means.

    **Effect sizes**, with :math:`SS_E, DF_E, MS_E` the effect's error term (the residual in a
    between design), :math:`SS_\text{total} = \sum (y - \bar y)^2` over the analysed values (rows,
    or subject × cell means) and :math:`N` their number:

    - :math:`\eta^2 = SS/SS_\text{total}`;
    - partial :math:`\eta^2_p = SS/(SS + SS_E)` (afex ``pes``);
    - :math:`\omega^2 = (SS - DF\cdot MS_E)/(SS_\text{total} + MS_E)`;
    - partial :math:`\omega^2_p = (SS - DF\cdot MS_E)/(SS + (N - DF)\,MS_E)`;
    - generalized :math:`\eta^2_G = SS/(SS + \sum_\text{strata} SS_E + \sum_{O} SS_O -
      [\text{effect} \in O]\,SS)` (Olejnik & Algina 2003; afex ``ges``), where the sum over
      strata adds every distinct error term (the residual in a between design, so that
      :math:`\eta^2_G = \eta^2_p` there when nothing is observed) and :math:`O` are the effects
      that involve an ``observed`` (measured, not manipulated) factor.

    In unbalanced type II/III designs the SS do not add up to :math:`SS_\text{total}`; η² is
    still :math:`SS/SS_\text{total}` (like pingouin). For repeated measures ω² and partial ω²
    apply the same formulas with the effect's own error stratum (afex reports no ω²).

    **Intervals** (``ci``): bias-corrected and accelerated (BCa) intervals of every effect size
    from ``n_boot`` cluster-bootstrap resamples
    (:func:`tomstats.analysis.intervals.bca_interval`). Within every between cell (in RM
    designs: every subject × within cell) the clusters — the distinct values of ``cluster``
    there (stories, items), or the rows when ``cluster`` is None — are drawn with replacement
    as many times as the cell has clusters; the design (cells, subjects) stays fixed. All
    resamples are drawn and analysed at once (vectorised), from
    ``numpy.random.default_rng(seed)``: the same seed gives the same interval. The bias
    correction is the share of resamples below the estimate, the acceleration comes from the
    jackknife over the clusters within their cells (the bootstrap's strata). Unlike the
    percentile interval, BCa corrects for the upward bias of η²-type estimates near 0; where
    no resample falls on one side of the estimate (η² = 0 exactly, every resample above it)
    the interval runs from the estimate to the percentile bound on the other side. Bounds
    in columns ``<effect>_low`` and ``<effect>_high``.

    With ``interval="ncf"`` no bootstrap is run: partial η² gets the interval from inverting
    the noncentral F distribution of its F test
    (:func:`tomstats.analysis.intervals.ncf_eta2_interval`, Steiger 2004), and in a
    between-subjects design η² too (with :math:`F' = (\eta^2/DF)/((1 - \eta^2)/DF_E)`, as R's
    effectsize does); only those columns are added. With ``cluster`` in a between design the
    F test is the nested one: :math:`F/\hat D` on :math:`(DF, K - C)` degrees of freedom, with
    the design effect :math:`\hat D = MS_\text{clusters}/MS_\text{res}` of the :math:`K`
    clusters (a cluster value within one cell) in :math:`C` cells, and the noncentrality
    bounds scaled back by :math:`\hat D` (``attrs["design_effect"]``); without it the rows are
    taken as independent. NaN where F is NaN or infinite (a degenerate term).

    Parameters
    ----------
    data
        One row per observation (question).
    dv
        Numeric outcome column (0/1 correctness or any score).
    between
        Between-subjects factor column(s); any number.
    within
        Within-subject factor column(s) (needs ``subject``).
    subject
        Column naming the subject (e.g. the model/LLM) of a repeated-measures design.
    ss_type
        Sums of squares: 1 (sequential, in the order of ``between``), 2 (default) or 3.
    binary
        Require the outcome to be 0/1.
    ci
        Confidence level of the bootstrap intervals (e.g. 0.95); None (default) skips them.
    n_boot
        Bootstrap resamples (default 2000).
    cluster
        Column whose values are resampled as units within cells (stories, items); default: the
        rows.
    seed
        Seed of the bootstrap.
    observed
        Factors that are measured rather than manipulated, for generalized η² (as afex's
        ``observed``).
    interval
        ``"bca"`` (default): cluster-bootstrap BCa intervals of every effect size;
        ``"ncf"``: noncentral-F intervals of partial η² (and η² in between designs), no
        bootstrap (``n_boot`` and ``seed`` unused; ``cluster`` gives the design effect).

    Returns
    -------
    pandas.DataFrame
        One row per effect (patsy order; RM: as afex — between effects, then each within effect
        followed by its interactions with the between effects), named ``"A"``, ``"A:B"``, ...,
        and for between designs a last ``Residual`` row. Columns ``source, SS, DF, MS, F, p,
        eta2, partial_eta2, omega2, partial_omega2, generalized_eta2, SS_error, DF_error``; with
        a ``subject`` also ``eps_gg, eps_hf, p_gg, p_hf, mauchly_W, mauchly_p``; with ``ci``
        ``<effect size>_low, <effect size>_high`` for each effect size. A last column ``note``
        says why a row's F, p or effect sizes are NaN or infinite (a constant outcome; no
        error variance), ``""`` otherwise; sums of squares at rounding level are exactly 0.
        ``attrs`` records the design, ``ss_type``, the numbers of rows, cells and subjects, and
        the bootstrap settings.

    Raises
    ------
    TypeError
        An argument of the wrong type (the message names it).
    ValueError
        Unknown column (with the closest name), a column named twice, non-numeric or missing
        outcome, non-0/1 outcome with ``binary=True``, a missing factor/subject/cluster value, a
        factor with one level, an empty cell, a subject without some within cell or with two
        values of a between factor, no residual/error degrees of freedom, or a bad ``ss_type``,
        ``ci`` or ``n_boot``. Raised before any computation.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"tom": np.repeat([0, 1, 2], 40), "ctx": np.tile([200, 5000], 60)})
    >>> df["correct"] = rng.binomial(1, 0.8 - 0.2 * df["tom"])
    >>> anova(df, "correct", ["tom", "ctx"]).source.tolist()
    ['tom', 'ctx', 'tom:ctx', 'Residual']
    """
    check_interval(interval)
    bfac, wfac, obs, y = _validate(data, dv, between, within, subject, ss_type, binary, ci,
                                   n_boot, cluster, seed, observed)
    ss_type = int(ss_type)
    bcodes = check_levels(data, bfac)
    wcodes = check_levels(data, wfac)
    clus = None if cluster is None else pd.factorize(data[cluster])[0]
    boot_ci = ci if interval == "bca" else None
    if subject is None:
        frame = _anova_between(y, bfac, bcodes, ss_type, boot_ci, int(n_boot), clus,
                               int(seed), obs)
    else:
        frame = _anova_rm(data, y, subject, bfac, bcodes, wfac, wcodes, ss_type, boot_ci,
                          int(n_boot), clus, int(seed), obs)
    if ci is not None and interval == "ncf":
        deff = None
        if clus is not None and not wfac and subject is None:
            shape = tuple(len(lv) for lv, _ in bcodes)
            cell = np.ravel_multi_index(tuple(c for _, c in bcodes), shape)
            deff = _design_effect(y, cell, clus)
        _add_ncf_intervals(frame, float(ci), between_design=not wfac, deff=deff,
                           cluster=cluster)
    return frame




def check_interval(interval: Any) -> None:
    """``interval`` is one of :data:`INTERVALS`; else ValueError naming the value."""
    if not isinstance(interval, str) or interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}, got {interval!r}")


def _design_effect(y: np.ndarray, cell: np.ndarray, clus: np.ndarray
                   ) -> tuple[float, float] | None:
    r"""The design effect of clusters nested in cells and its degrees of freedom:
    :math:`\hat D = MS_\text{clusters} / MS_\text{res}` with
    :math:`MS_\text{clusters} = \sum_j n_j (\bar y_j - \bar y_{c(j)})^2 / (K - C)` over the
    :math:`K` clusters (a cluster value within one cell) of the :math:`C` cells, and
    :math:`K - C`. None when every cluster is one row (the rows are the units); NaN and 0
    when no cell has two clusters (the design effect cannot be estimated)."""
    _, stats = _cluster_stats(cell, clus, y)
    n_c = np.bincount(cell, minlength=int(cell.max()) + 1).astype(float)
    s_c = np.bincount(cell, weights=y, minlength=len(n_c))
    n_j, s_j, q_j = stats[:, 0], stats[:, 1], stats[:, 2]
    if len(n_j) == len(y):
        return None
    df_clu = float(len(n_j) - np.count_nonzero(n_c))
    df_res = float(len(y) - np.count_nonzero(n_c))
    if df_clu < 1:
        return float("nan"), 0.0
    ss_clu = float(np.sum(s_j * s_j / n_j) - np.sum(s_c * s_c / np.where(n_c > 0, n_c, 1)))
    ss_res = float(np.sum(q_j) - np.sum(s_c * s_c / np.where(n_c > 0, n_c, 1)))
    with np.errstate(invalid="ignore", divide="ignore"):  # no residual (every row right): NaN
        return float(np.float64(max(ss_clu, 0.0) / df_clu) / np.float64(ss_res / df_res)), \
            df_clu


def _add_ncf_intervals(frame: pd.DataFrame, ci: float, between_design: bool,
                       deff: tuple[float, float] | None = None, cluster: str | None = None
                       ) -> None:
    r"""Noncentral-F intervals of partial η² (and of η² in a between design) added to the
    table in place, before ``note``; NaN on the ``Residual`` row and where F is not finite.

    With clusters (``deff`` = :math:`(\hat D, K - C)` of :func:`_design_effect`) the F test
    is the nested one, :math:`F / \hat D` on :math:`(DF, K - C)` degrees of freedom, and its
    noncentrality bounds are scaled back to rows, :math:`\lambda = \hat D\,\lambda_K`. With
    one cluster per cell the bounds are NaN and the effect rows say why in ``note``."""
    f, d1, d2 = (frame[c].to_numpy(dtype=float) for c in ("F", "DF", "DF_error"))
    eff = np.isfinite(f)
    d1_ok, d2_ok = np.where(eff, d1, 1.0), np.where(eff, d2, 1.0)
    e = frame["eta2"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        f_by = {"partial_eta2": np.where(eff, f, np.nan),
                "eta2": np.where(eff & (e < 1), (e / d1_ok) / ((1 - e) / d2_ok), np.nan)}
    cols = {}
    for k, fk in f_by.items():
        if k == "eta2" and not between_design:
            continue
        if deff is None:
            cols[k] = ncf_eta2_interval(fk, d1_ok, d2_ok, ci)
            continue
        d_hat, df_k = deff
        if df_k < 1:
            cols[k] = (np.full(len(fk), np.nan), np.full(len(fk), np.nan))
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            f_k = fk / d_hat if d_hat > 0 else np.full_like(fk, np.nan)
        lam = ncf_lambda_interval(np.where(np.isfinite(f_k), f_k, np.nan), d1_ok, df_k, ci)
        n_eff = d1_ok + d2_ok + 1
        cols[k] = tuple(d_hat * b / (d_hat * b + n_eff) for b in lam)
    if deff is not None and deff[1] < 1:
        why = (f"no noncentral-F interval: one {cluster} cluster per cell, so the design "
               "effect cannot be estimated (--cluster names another unit)")
        frame["note"] = [n if n or not ok else why for n, ok in zip(frame["note"], eff,
                                                                    strict=True)]
    at = frame.columns.get_loc("note")
    for k in ("eta2", "partial_eta2"):
        if k in cols:
            for side, v in zip(("low", "high"), cols[k], strict=True):
                frame.insert(at, f"{k}_{side}", v)
                at += 1
    frame.attrs.update({"ci": ci, "ci_method": "noncentral F", "n_boot": None,
                        "bootstrap": None,
                        "design_effect": None if deff is None else float(deff[0])})


def _columns(rm: bool, ci: float | None) -> list[str]:
    cols = [*COLUMNS, *EFFECT_SIZES[2:], "SS_error", "DF_error"]
    if rm:
        cols += list(RM_COLUMNS)
    if ci is not None:
        cols += [f"{e}_{side}" for e in EFFECT_SIZES for side in ("low", "high")]
    return [*cols, "note"]


def _anova_between(
    y: np.ndarray, names: list[str], codes: list[tuple[list[Any], np.ndarray]], ss_type: int,
    ci: float | None, n_boot: int, clus: np.ndarray | None, seed: int, observed: list[str],
) -> pd.DataFrame:
    shape = tuple(len(lv) for lv, _ in codes)
    n_cells = int(np.prod(shape))
    flat = np.ravel_multi_index(tuple(c for _, c in codes), shape)
    n = np.bincount(flat, minlength=n_cells).astype(float)
    if (n == 0).any():
        combo = _combo(names, [lv for lv, _ in codes], shape, int(np.argmax(n == 0)))
        raise ValueError(f"empty cell: no rows with {combo}; every factor combination needs data")
    big_n = len(y)
    df_res = float(big_n - n_cells)
    if df_res <= 0:
        raise ValueError(
            f"no residual degrees of freedom: {big_n} rows for {n_cells} cells "
            f"({' × '.join(names)}); some cell needs more than one row")
    s = np.bincount(flat, weights=y, minlength=n_cells)
    dev = y - (s / n)[flat]
    tol = _ss_tolerance(y)
    ss_res = float(_exact_zero(np.sum(dev * dev), tol))
    ybar = s.sum() / big_n
    ss_total = float(_exact_zero(np.sum((y - ybar) ** 2), tol))
    terms = _factorial_terms(len(names))
    model = _Between.build(shape, terms, ss_type, n)
    z = (s - n * ybar) / np.sqrt(n)
    ss = _exact_zero(model.ss(z), tol)
    df = np.array([_term_df(shape, t) for t in terms], dtype=float)
    obs_flags = np.array([any(names[f] in observed for f in t) for t in terms], dtype=float)
    ms_res = ss_res / df_res
    with np.errstate(invalid="ignore", divide="ignore"):
        f_stat = ss / df / ms_res
    sizes = _effect_sizes(ss, df, np.full(len(terms), ss_res), np.full(len(terms), df_res),
                          np.asarray(ss_total), big_n, np.asarray(ss_res), obs_flags)
    nan = np.nan
    out: dict[str, Any] = {
        "source": [_name(t, names) for t in terms] + ["Residual"],
        "SS": [*ss, ss_res],
        "DF": [*df, df_res],
        "MS": [*(ss / df), ms_res],
        "F": [*f_stat, nan],
        "p": [*_f_p(f_stat, df, df_res), nan],
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        res_eta = float(np.divide(ss_res, ss_total))  # 0/0 (constant outcome): NaN
    for k, v in sizes.items():
        out[k] = [*v, res_eta if k == "eta2" else nan]
    out["SS_error"] = [ss_res] * len(terms) + [nan]
    out["DF_error"] = [df_res] * len(terms) + [nan]
    residual_note = ("" if ss_res else _notes(np.zeros(1), np.zeros(1), ss_total, y)[0]
                     if ss_total == 0 else "every cell is constant: no residual variance")
    out["note"] = [*_notes(ss, np.full(len(terms), ss_res), ss_total, y), residual_note]
    if ci is not None:
        rng = np.random.default_rng(seed)
        cl = np.arange(big_n) if clus is None else clus
        cell_of, stats = _cluster_stats(flat, cl, y)
        boot = _resample_cells(cell_of, stats, n_cells, n_boot, rng)

        def sizes_of(cells: np.ndarray) -> dict[str, np.ndarray]:
            nb, sb, qb = cells[..., 0], cells[..., 1], cells[..., 2]
            with np.errstate(invalid="ignore", divide="ignore"):
                nn = nb.sum(axis=1)
                ybar_b = sb.sum(axis=1) / nn
                sc = sb - nb * ybar_b[:, None]
                if np.all(nb == n):
                    ss_b = model.ss(sc / np.sqrt(n))
                else:
                    ss_b = model.ss_weighted(sc, nb)
                ss_res_b = np.sum(qb - sb * sb / nb, axis=1)
                ss_tot_b = np.sum(qb, axis=1) - sb.sum(axis=1) ** 2 / nn
                dfr_b = (nn - n_cells)[:, None]
                sizes_b = _effect_sizes(ss_b, df, ss_res_b[:, None], dfr_b, ss_tot_b,
                                        nn[:, None], ss_res_b, obs_flags)
                sizes_b["eta2"] = np.concatenate(
                    [sizes_b["eta2"], (ss_res_b / ss_tot_b)[:, None]], axis=1)
            return sizes_b

        est = {k: np.asarray(out[k][: len(terms) + (k == "eta2")], dtype=float)
               for k in EFFECT_SIZES}
        for k, (lo, hi) in _intervals(sizes_of, boot, est, cell_of, stats, n_cells, ci,
                                      rng).items():
            pad = [] if k == "eta2" else [nan]
            out[f"{k}_low"] = [*lo, *pad]
            out[f"{k}_high"] = [*hi, *pad]
    frame = pd.DataFrame(out, columns=_columns(False, ci))
    frame.attrs.update({
        "design": "between", "ss_type": ss_type, "dv_rows": big_n, "cells": n_cells,
        "between": list(names), "within": [], "subject": None, "observed": list(observed),
        **_boot_attrs(ci, n_boot, clus is not None, seed),
    })
    return frame


def _boot_attrs(ci: float | None, n_boot: int, clustered: bool, seed: int) -> dict[str, Any]:
    if ci is None:
        return {"ci": None}
    unit = "clusters" if clustered else "rows"
    return {"ci": ci, "n_boot": n_boot, "seed": seed, "ci_method": "BCa",
            "bootstrap": f"{unit} resampled with replacement within cells"}


def _anova_rm(
    data: pd.DataFrame, y: np.ndarray, subject: str, bnames: list[str],
    bcodes: list[tuple[list[Any], np.ndarray]], wnames: list[str],
    wcodes: list[tuple[list[Any], np.ndarray]], ss_type: int, ci: float | None, n_boot: int,
    clus: np.ndarray | None, seed: int, observed: list[str],
) -> pd.DataFrame:
    subjects, subj = _codes(data, subject)
    n_subj = len(subjects)
    bshape = tuple(len(lv) for lv, _ in bcodes)
    wshape = tuple(len(lv) for lv, _ in wcodes)
    n_b, n_w = int(np.prod(bshape)), int(np.prod(wshape))
    bflat = (np.ravel_multi_index(tuple(c for _, c in bcodes), bshape) if bcodes
             else np.zeros(len(y), dtype=np.int64))
    wflat = (np.ravel_multi_index(tuple(c for _, c in wcodes), wshape) if wcodes
             else np.zeros(len(y), dtype=np.int64))
    # between factors constant within each subject
    cell_of_subject = np.full(n_subj, -1, dtype=np.int64)
    cell_of_subject[subj] = bflat
    clash = cell_of_subject[subj] != bflat
    if clash.any():
        i = int(np.argmax(clash))
        first = int(np.flatnonzero((subj == subj[i]) & (bflat == cell_of_subject[subj[i]]))[0])
        for f, (lv, c) in zip(bnames, bcodes, strict=True):
            if c[i] != c[first]:
                raise ValueError(
                    f"between factor {f!r} varies within subject {show_value(subjects[subj[i]])} "
                    f"({subject!r}): values {show_value(lv[c[first]])} and {show_value(lv[c[i]])}")
    n_g = np.bincount(cell_of_subject, minlength=n_b)
    if (n_g == 0).any():
        combo = _combo(bnames, [lv for lv, _ in bcodes], bshape, int(np.argmax(n_g == 0)))
        raise ValueError(f"empty cell: no subjects with {combo}; every between combination "
                         "needs a subject")
    cell = subj * n_w + wflat
    count = np.bincount(cell, minlength=n_subj * n_w)
    if (count == 0).any():
        missing = int(np.argmax(count == 0))
        s_i, w_i = divmod(missing, n_w)
        combo = _combo(wnames, [lv for lv, _ in wcodes], wshape, w_i)
        raise ValueError(f"subject {show_value(subjects[s_i])} ({subject!r}) has no rows with "
                         f"{combo}; every subject needs every within cell")
    dfe_between = float(n_subj - n_b)
    if dfe_between <= 0:
        raise ValueError(f"no error degrees of freedom: {n_subj} subjects ({subject!r}) for "
                         f"{n_b} between cells; need more subjects than between cells")
    sums = np.bincount(cell, weights=y, minlength=n_subj * n_w)
    means = (sums / count).reshape(n_subj, n_w)
    des = _rm_design(bshape, cell_of_subject, wshape, ss_type)
    res = _rm_core(des, means, with_sphericity=True)
    bterms = des.between.terms
    rows, ss, df, sse, dfe, sph, obs_flags = [], [], [], [], [], [], []
    for wi, w in enumerate(des.within_terms):
        p_w = des.within_bases[wi].shape[1]
        e = res["E"][wi]
        d = dfe_between
        if w == ():
            stats: tuple[float, ...] = (np.nan,) * 4
        elif p_w == 1:
            stats = (1.0, 1.0, np.nan, np.nan)
        elif d < p_w:
            stats = (np.nan,) * 4
        else:
            with np.errstate(invalid="ignore", divide="ignore"):  # a zero error matrix
                stats = _sphericity(e, d, n_w)
        for ti, t in enumerate(bterms):
            if t == () and w == ():
                continue
            rows.append(":".join(x for x in (_name(t, bnames), _name(w, wnames)) if x))
            ss.append(res["ss"][wi][ti])
            df.append(_term_df(bshape, t) * p_w)
            sse.append(res["sse"][wi])
            dfe.append(d * p_w)
            sph.append(stats)
            obs_flags.append(any(bnames[f] in observed for f in t)
                             or any(wnames[f] in observed for f in w))
    tol = _ss_tolerance(means)
    ss_a, df_a = _exact_zero(ss, tol), np.array(df, dtype=float)
    sse_a, dfe_a = _exact_zero(sse, tol), np.array(dfe, dtype=float)
    ss_total_rm = float(_exact_zero(res["ss_total"], tol))
    obs_a = np.array(obs_flags, dtype=float)
    error_sum = float(_exact_zero(np.sum(res["sse"]), _ss_tolerance(means)))
    with np.errstate(invalid="ignore", divide="ignore"):
        f_stat = (ss_a / df_a) / (sse_a / dfe_a)
    p = _f_p(f_stat, df_a, dfe_a)
    sph_a = np.array(sph, dtype=float).reshape(-1, 4)
    gg, hf = sph_a[:, 0], sph_a[:, 1]
    p_gg = _f_p(f_stat, gg * df_a, gg * dfe_a)
    hf_c = np.minimum(1.0, hf)
    p_hf = _f_p(f_stat, hf_c * df_a, hf_c * dfe_a)
    n_obs = float(n_subj * n_w)
    sizes = _effect_sizes(ss_a, df_a, sse_a, dfe_a, np.asarray(ss_total_rm), n_obs,
                          np.asarray(error_sum), obs_a)
    out: dict[str, Any] = {"source": rows, "SS": ss_a, "DF": df_a, "MS": ss_a / df_a,
                           "F": f_stat, "p": p, **sizes, "SS_error": sse_a, "DF_error": dfe_a,
                           "eps_gg": gg, "eps_hf": hf, "p_gg": p_gg, "p_hf": p_hf,
                           "mauchly_W": sph_a[:, 2], "mauchly_p": sph_a[:, 3],
                           "note": _notes(ss_a, sse_a, ss_total_rm, means.ravel())}
    if ci is not None:
        rng = np.random.default_rng(seed)
        cl = np.arange(len(y)) if clus is None else clus
        cell_of, stats_c = _cluster_stats(cell, cl, y)
        boot = _resample_cells(cell_of, stats_c, n_subj * n_w, n_boot, rng)
        keep = [(wi, ti) for wi, w in enumerate(des.within_terms)
                for ti, t in enumerate(bterms) if not (t == () and w == ())]

        def sizes_of(cells: np.ndarray) -> dict[str, np.ndarray]:
            with np.errstate(invalid="ignore", divide="ignore"):
                ybs = (cells[..., 1] / cells[..., 0]).reshape(len(cells), n_subj, n_w)
                rb = _rm_core(des, ybs, with_sphericity=False)
                ss_b = np.stack([rb["ss"][wi][:, ti] for wi, ti in keep], axis=1)
                sse_b = np.stack([rb["sse"][wi] for wi, _ in keep], axis=1)
                err_b = np.sum(np.stack(rb["sse"], axis=1), axis=1)
                return _effect_sizes(ss_b, df_a, sse_b, dfe_a, rb["ss_total"], n_obs, err_b,
                                     obs_a)

        for k, (lo, hi) in _intervals(sizes_of, boot, sizes, cell_of, stats_c, n_subj * n_w,
                                      ci, rng).items():
            out[f"{k}_low"], out[f"{k}_high"] = lo, hi
    frame = pd.DataFrame(out, columns=_columns(True, ci))
    frame.attrs.update({
        "design": "mixed" if bnames and wnames else ("within" if wnames else "between"),
        "ss_type": ss_type, "dv_rows": len(y), "cells": n_b * n_w, "subjects": n_subj,
        "between": list(bnames), "within": list(wnames), "subject": subject,
        "observed": list(observed), "aggregated": "mean per subject × within cell",
        **_boot_attrs(ci, n_boot, clus is not None, seed),
    })
    return frame
