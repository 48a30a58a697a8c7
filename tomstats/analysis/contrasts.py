r"""Which ToM orders differ, at which context lengths, by how much: marginal means and
contrasts after the ANOVA of a log (``tomstats contrasts``).

:func:`anova_grid` makes the reference grid of a log's ANOVA (the cell means and their
covariance); :func:`tomstats.analysis.marginal.emmeans` and
:func:`~tomstats.analysis.marginal.contrasts` take it from there, as R's emmeans does after
``lm`` or afex's ``aov_ez``. The reference model is the full factorial of the cells,
estimated by their means; with :math:`U` units (the rows, or the subjects) in :math:`G`
between cells, :math:`W` within cells per unit, :math:`y_u` the unit's :math:`W` values
and :math:`n_g` units in between cell :math:`g`:

.. math::

    \hat m_{g\cdot} = \frac{1}{n_g}\sum_{u \in g} y_u, \qquad
    \hat\Sigma = \frac{1}{U - G}\sum_u (y_u - \hat m_{g(u)\cdot})
    (y_u - \hat m_{g(u)\cdot})^\top, \qquad
    \operatorname{Cov}(\hat m_{gw}, \hat m_{g'w'}) = [g = g']\,\hat\Sigma_{ww'}/n_g,

on :math:`\nu = U - G` degrees of freedom.

- **Between designs** (no ``subject``): each row is a unit and :math:`W = 1`, so
  :math:`\hat\Sigma` is the residual mean square of ``lm(y ~ A * B)`` and a mean's SE is
  :math:`\sqrt{MS_\text{res}\sum_c w_c^2/n_c}` on :math:`N - C` df: emmeans on ``lm``.
- **Repeated-measures and mixed designs** (``subject``, ``within``): the rows are averaged
  per subject × within cell first (afex's ``fun_aggregate = mean``) and the reference model
  is the *multivariate* linear model of those means on the between factors (one column per
  within cell, an unstructured covariance :math:`\hat\Sigma`): what emmeans uses for an afex
  ``aov_ez`` fit with ``afex_options(emmeans_model = "multivariate")``, afex's default.
  A contrast of within cells is then a paired comparison: its t is the one-sample t of the
  subjects' contrast values (pingouin's ``pairwise_tests``), on :math:`S - G` df. (The
  univariate model, afex's other choice, pools the error strata and assumes sphericity.)
- ``subject`` without ``within``: the between factors compared on the subjects' means, as in
  :func:`tomstats.analysis.log_anova.log_anova`.

Marginal means weight the cells equally (emmeans' default), so in an unbalanced design a
marginal mean is the mean of the cell means, not the share of correct rows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tomstats._validate import show_value
from tomstats.analysis.log_anova import check_design, prepare_log
from tomstats.analysis.marginal import RefGrid
from tomstats.analysis.row_anova import check_levels

__all__ = ["anova_grid", "multivariate_grid"]


def multivariate_grid(y: np.ndarray, unit_group: np.ndarray, n_groups: int
                      ) -> tuple[np.ndarray, np.ndarray, int]:
    r"""Cell means, their covariance and the residual df of the multivariate linear model
    (module docstring).

    Parameters
    ----------
    y : ndarray, shape (U, W)
        One row per unit (row or subject), one column per within cell.
    unit_group : ndarray of int, shape (U,)
        The between cell of each unit, in ``range(n_groups)``.
    n_groups : int

    Returns
    -------
    estimate : ndarray, shape (G * W,)
        :math:`\hat m`, between cells outer, within cells inner.
    cov : ndarray, shape (G * W, G * W)
        :math:`\operatorname{diag}(1/n_g)\otimes\hat\Sigma`.
    df : int
        :math:`U - G`.
    """
    y = np.asarray(y, dtype=float)
    counts = np.bincount(unit_group, minlength=n_groups).astype(float)
    sums = np.zeros((n_groups, y.shape[1]))
    np.add.at(sums, unit_group, y)
    means = sums / counts[:, None]
    resid = y - means[unit_group]
    df = y.shape[0] - n_groups
    sigma = resid.T @ resid / df
    return means.ravel(), np.kron(np.diag(1.0 / counts), sigma), df


def anova_grid(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    dv: str = "correct",
    between: str | Sequence[str] | None = None,
    within: str | Sequence[str] | None = None,
    subject: str | None = None,
    columns: dict[str, str] | None = None,
    paired: bool = False,
) -> RefGrid:
    """The reference grid of a log's ANOVA (module docstring): the cell means of every
    between × within cell with their covariance and df.

    Parameters
    ----------
    data, dv, between, within, subject, columns, paired
        As for :func:`tomstats.analysis.log_anova.log_anova` (the same defaults: the paper's
        two-way between design; ``subject`` ``"model"`` with ``within``).

    Returns
    -------
    RefGrid
        Factors ``between + within``; identity link (the response scale is the mean
        outcome, the proportion correct for ``correct``); ``df`` :math:`U - G`.

    Raises
    ------
    ValueError
        As :func:`~tomstats.analysis.log_anova.log_anova` (unknown column, one-level factor,
        empty cell, a subject missing a within cell), a subject with two values of a between
        factor, or no residual degrees of freedom (one unit per between cell).
    """
    prep = prepare_log(data, dv=dv, between=between, within=within, subject=subject,
                       columns=columns, paired=paired)
    df, bfac, wfac, subject = prep.data, prep.between, prep.within, prep.subject
    check_design(df, bfac, wfac, subject, "")
    blevels = [lv for lv, _ in check_levels(df, bfac)]
    wlevels = [lv for lv, _ in check_levels(df, wfac)]
    y = df[dv].to_numpy(dtype=float)
    bcell = _cell_index(df, bfac, blevels)
    wcell = _cell_index(df, wfac, wlevels)
    n_w = int(np.prod([len(lv) for lv in wlevels])) if wfac else 1
    n_g = int(np.prod([len(lv) for lv in blevels])) if bfac else 1
    if subject is None:
        units, unit_group = y[:, None], bcell
        unit_name = "rows"
    else:
        units, unit_group = _subject_means(df, subject, bfac, bcell, wcell, y, n_w)
        unit_name = f"{subject} values"
    if units.shape[0] - n_g < 1:
        raise ValueError(f"no residual degrees of freedom: {units.shape[0]} {unit_name} in "
                         f"{n_g} between cell(s); marginal means need more units than cells")
    est, cov, dfe = multivariate_grid(units, unit_group, n_g)
    what = "proportion correct" if dv == "correct" else f"mean {dv}"
    if subject is None:
        note = (f"linear model of the {len(y)} rows on the full factorial of the cells "
                f"(residual SE, {dfe} df)")
    elif wfac:
        note = (f"multivariate linear model of the {units.shape[0]} {subject} × within-cell "
                f"means (afex's emmeans_model = 'multivariate'; {dfe} df)")
    else:
        note = f"linear model of the {units.shape[0]} means per {subject} ({dfe} df)"
    return RefGrid(tuple(bfac + wfac), tuple(tuple(lv) for lv in blevels + wlevels), est, cov,
                   float(dfe), link="identity", response=what, note=note)


def _cell_index(df: pd.DataFrame, factors: list[str], levels: list[list]) -> np.ndarray:
    """C-order index of each row's cell over ``factors`` (0 without factors)."""
    if not factors:
        return np.zeros(len(df), dtype=int)
    codes = [pd.Index(lv).get_indexer(df[f]) for f, lv in zip(factors, levels, strict=True)]
    return np.ravel_multi_index(tuple(codes), tuple(len(lv) for lv in levels))


def _subject_means(df: pd.DataFrame, subject: str, bfac: list[str], bcell: np.ndarray,
                   wcell: np.ndarray, y: np.ndarray, n_w: int) -> tuple[np.ndarray, np.ndarray]:
    """Per subject: the mean of each within cell (afex's ``fun_aggregate = mean``) and the
    between cell (refused when it is not constant)."""
    subj, names = pd.factorize(df[subject], sort=True)
    n_s = len(names)
    groups = np.full(n_s, -1)
    groups[subj] = bcell  # the last row's between cell of each subject
    bad = np.flatnonzero(groups[subj] != bcell)
    if bad.size:
        i = int(bad[0])
        s = subj[i]
        j = int(np.flatnonzero(subj == s)[-1])  # the row whose cell was kept
        f = next(f for f in bfac if df[f].iloc[i] != df[f].iloc[j])
        raise ValueError(f"subject {subject}={show_value(names[s])} has two values of the "
                         f"between factor {f!r}: {show_value(df[f].iloc[i])} and "
                         f"{show_value(df[f].iloc[j])}; a between factor must be constant "
                         "within a subject")
    flat = subj * n_w + wcell
    sums = np.bincount(flat, weights=y, minlength=n_s * n_w)
    counts = np.bincount(flat, minlength=n_s * n_w)
    return (sums / counts).reshape(n_s, n_w), groups
