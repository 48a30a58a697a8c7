r"""Marginal means and contrasts of a GLMM (R's emmeans on a ``glmer`` fit).

:func:`fit_grid` makes the reference grid of a maximum-likelihood fit
(:class:`~tomstats.glmm.laplace_backend.LaplaceFit` or
:class:`~tomstats.glmm.lme_result.LmeFit`); :func:`tomstats.analysis.marginal.emmeans`
and :func:`~tomstats.analysis.marginal.contrasts` take it from there. The grid has every
combination of the levels of the formula's categorical variables (text, boolean or
categorical columns, and columns under ``C()``); each numeric variable is held at its mean
over the fitted rows (emmeans' ``cov.reduce = mean``; a transform such as
``log(context_words)`` is evaluated at the variable's mean), or takes the values ``at``
gives it. With :math:`X_g` the fixed-effects design of the grid's rows, coded as in the fit,

.. math::

    \hat m = X_g\hat\beta, \qquad V_m = X_g V X_g^\top

on the logit scale, with :math:`V` the fit's ``cov`` (lme4's ``vcov()``), and z-based
inference (:math:`\nu = \infty`, emmeans' ``df = Inf`` for ``glmer``). The random effects
enter nowhere: these are population-level (conditional on :math:`b = 0`) predictions, as
emmeans makes them.

:func:`posterior_contrasts` does the same for a Bayesian fit's posterior draws of
:math:`\beta` (ArviZ InferenceData from the NumPyro or PyMC backends): each draw gives
:math:`\theta^{(s)} = K W X_g\beta^{(s)}`; the summary is the posterior median, the
highest-density interval and the probability of direction.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import closest_hint, show_value
from tomstats.analysis.marginal import RefGrid

__all__ = ["design_grid", "fit_grid", "posterior_contrasts"]

_INTERCEPTS = ("Intercept", "(Intercept)")


def _grid_variables(fixed: str, train: pd.DataFrame
                    ) -> tuple[list[str], dict[str, list[Any]], Any]:
    """The fixed part's variables in formula order, the levels of its categorical ones (as
    the formula engine codes them) and the engine's model spec learned on ``train``."""
    import formulaic

    from tomstats._expr import FORMULA_CONTEXT, check_terms, expand_terms
    from tomstats._guards import check_footprint
    from tomstats.glmm.data import design_footprint

    variables = list(check_terms(fixed, "fixed part"))
    missing = [v for v in variables if v not in train.columns]
    if missing:
        raise ValueError(f"the fit's fixed part {fixed!r} reads column(s) {missing} that the "
                         f"data lack{closest_hint(missing[0], map(str, train.columns))}")
    check_footprint(design_footprint(fixed, train, len(train), "fixed part"), flag=None)
    try:
        spec = formulaic.model_matrix(fixed, train, na_action="raise",
                                      context=FORMULA_CONTEXT).model_spec
    except Exception as exc:
        raise ValueError(f"fixed part {fixed!r}: {exc}") from exc
    by_key = {"".join(str(k).split()): st.levels for k, st in spec.factor_contrasts.items()}
    levels: dict[str, list[Any]] = {}
    for key, f in expand_terms(fixed, "fixed part").factors.items():
        if f.column is not None and f.column not in levels and key in by_key:
            levels[f.column] = list(by_key[key])
    return variables, levels, spec


def _grid_frame(variables: list[str], levels: dict[str, list[Any]], train: pd.DataFrame,
                at: Mapping[str, Sequence[Any]]) -> tuple[pd.DataFrame, list[str],
                                                           list[tuple[Any, ...]], list[str]]:
    """The grid's rows (C order over the grid factors), the factors, their levels and the
    words saying where each numeric variable is held."""
    factors, flevels, held = [], [], []
    values: dict[str, list[Any]] = {}
    for v in variables:
        if v in at:
            given = list(at[v])
            if not given:
                raise ValueError(f"at: {v!r} has no values")
            if v in levels:
                unknown = [x for x in given if x not in levels[v]]
                if unknown:
                    raise ValueError(f"at: {show_value(unknown[0])} is not a level of {v!r} "
                                     f"(levels: {', '.join(map(str, levels[v]))})")
            values[v] = given
        elif v in levels:
            values[v] = levels[v]
        else:
            col = pd.to_numeric(train[v], errors="coerce")
            if col.isna().any():
                raise ValueError(f"column {v!r} is neither categorical in the formula nor "
                                 "numeric")
            values[v] = [float(col.mean())]
            held.append(f"{v} at its mean {values[v][0]:.4g}")
        if v in levels or len(values[v]) > 1:
            factors.append(v)
            flevels.append(tuple(values[v]))
    combos = list(itertools.product(*flevels)) if factors else [()]
    frame = pd.DataFrame(combos, columns=factors)
    for v in variables:
        if v not in factors:
            frame[v] = values[v][0]
        if isinstance(train[v].dtype, pd.CategoricalDtype):
            frame[v] = pd.Categorical(frame[v], categories=train[v].cat.categories)
        elif v in levels:  # a categorical column's levels keep its type (numbers, text)
            frame[v] = frame[v].astype(train[v].dtype)
    return frame, factors, flevels, held


def design_grid(fixed: str, train: pd.DataFrame, coef_names: Sequence[str],
                at: Mapping[str, Sequence[Any]] | None = None
                ) -> tuple[np.ndarray, list[str], list[tuple[Any, ...]], list[str]]:
    """The fixed-effects design :math:`X_g` of the reference grid (module docstring).

    Parameters
    ----------
    fixed : str
        The fixed part of the formula (formula-engine syntax, e.g. ``"C(tom_order) * x"``).
    train : pandas.DataFrame
        The fitted rows: they fix the coding (levels, stateful transforms) and the means of
        the numeric variables.
    coef_names : sequence of str
        The fit's coefficient names; the design's must be the same.
    at : mapping, optional
        ``{variable: values}``: a numeric variable on these values (a grid factor when
        there are several), or a categorical one restricted to these levels.

    Returns
    -------
    X : ndarray, shape (C, p)
    factors : list of str
    levels : list of tuple
    held : list of str
        Where each numeric variable not in the grid is held (for printing).
    """
    at = dict(at or {})
    variables, levels, spec = _grid_variables(fixed, train)
    for v in at:
        if v not in variables:
            raise ValueError(f"at: {v!r} is not a variable of the fixed part {fixed!r}"
                             f"{closest_hint(v, variables)}")
    frame, factors, flevels, held = _grid_frame(variables, levels, train, at)
    from tomstats._expr import FORMULA_CONTEXT

    try:
        mm = spec.get_model_matrix(frame, na_action="raise", context=FORMULA_CONTEXT)
    except Exception as exc:
        raise ValueError(f"fixed part {fixed!r} on the reference grid: {exc}") from exc
    names = ["Intercept" if c in _INTERCEPTS else str(c) for c in mm.columns]
    want = ["Intercept" if c in _INTERCEPTS else str(c) for c in coef_names]
    if names != want:
        raise ValueError(f"the data code the fixed part {fixed!r} into the columns {names}, "
                         f"not the fit's {want}: give the data the fit was made from")
    return np.asarray(mm, dtype=float), factors, flevels, held


def _fixed(formula: str) -> str:
    from tomstats.glmm.wald import fixed_part

    return fixed_part(formula)[1]


def _train(fit: Any, data: pd.DataFrame | None, columns: Mapping[str, str] | None
           ) -> pd.DataFrame:
    """The fitted rows: the fit's own (an in-memory LmeFit) or ``data`` prepared as the fit
    prepared them."""
    from tomstats.glmm.data import prepare_data

    if data is None:
        design = getattr(fit, "design", None)
        if design is None:
            raise ValueError("fit_grid needs the data the fit was made from (data=...): a "
                             f"{type(fit).__name__} does not keep them")
        return design.train
    train = prepare_data(data, columns).reset_index(drop=True)
    if len(train) != fit.n_rows:
        raise ValueError(f"the data have {len(train)} rows but the fit was made from "
                         f"{fit.n_rows}: give the data the fit was made from (the same rows, "
                         "errors dropped or kept as for the fit)")
    return train


def fit_grid(fit: Any, data: pd.DataFrame | None = None, *,
             at: Mapping[str, Sequence[Any]] | None = None,
             columns: Mapping[str, str] | None = None) -> RefGrid:
    r"""The reference grid of a maximum-likelihood GLMM fit (module docstring):
    :math:`\hat m = X_g\hat\beta`, :math:`V_m = X_g V X_g^\top`, logit link, z tests.

    Parameters
    ----------
    fit : LaplaceFit or LmeFit
        From :func:`tomstats.glmm.fit` with ``backend="laplace"`` (or read back from its
        JSON).
    data : pandas.DataFrame, optional
        The data the fit was made from (the same rows and ``columns`` mapping); optional for
        an :class:`~tomstats.glmm.lme_result.LmeFit` still holding its data.
    at : mapping, optional
        ``{variable: values}`` (see :func:`design_grid`), e.g. ``{"log_context":
        [5.3, 6.9, 8.5]}`` to compare ToM orders at three context lengths of a model linear
        in ``log_context``.
    columns : mapping, optional
        ``{standard name: your column}``, as given to the fit.

    Returns
    -------
    RefGrid
        ``df`` infinite, ``link="logit"``; the response scale is the probability of a
        correct answer.
    """
    for attr in ("formula", "beta", "cov", "coef_names", "n_rows"):
        if not hasattr(fit, attr):
            raise TypeError(f"fit must be a maximum-likelihood fit (LaplaceFit or LmeFit), "
                            f"got {type(fit).__name__}")
    fixed = _fixed(fit.formula)
    X, factors, levels, held = design_grid(fixed, _train(fit, data, columns), fit.coef_names,
                                           at)
    if not factors:
        raise ValueError(f"the fixed part {fixed!r} has no categorical variable to make a "
                         "grid of (wrap a column in C() or give a numeric one values with at)")
    beta = np.asarray(fit.beta, dtype=float)
    cov = np.asarray(fit.cov, dtype=float)
    est = X @ beta
    vm = X @ cov @ X.T
    random = getattr(fit, "groups", None) or getattr(fit, "terms", None)
    note = ("population-level predictions of the fixed effects (random effects at 0)"
            if random else "predictions of the fixed effects")
    if held:
        note += "; " + ", ".join(held)
    return RefGrid(tuple(factors), tuple(levels), est, 0.5 * (vm + vm.T), float("inf"),
                   link="logit", response="probability correct", note=note,
                   averaged=tuple(h.split(" ")[0] for h in held))


# --------------------------------------------------------------------------- posterior


def _hdi(draws: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Highest-density interval of each column: the narrowest interval holding
    :math:`\\lceil \\text{prob}\\cdot S\\rceil` of the :math:`S` sorted draws (ArviZ's)."""
    s = np.sort(draws, axis=0)
    n = s.shape[0]
    k = int(np.floor(prob * n))
    widths = s[k:] - s[: n - k]
    i = np.argmin(widths, axis=0)
    cols = np.arange(s.shape[1])
    return s[i, cols], s[i + k, cols]


def posterior_contrasts(idata: Any, data: pd.DataFrame, specs: str | Sequence[str],
                        by: str | Sequence[str] | None = None, *,
                        method: str | Sequence[str] = "pairwise", interaction: bool = False,
                        hdi_prob: float = 0.95, scale: str = "link",
                        at: Mapping[str, Sequence[Any]] | None = None,
                        columns: Mapping[str, str] | None = None,
                        means: bool = False) -> pd.DataFrame:
    r"""Posterior contrasts (or marginal means) of a Bayesian formula fit.

    Each posterior draw :math:`\beta^{(s)}` (``posterior["beta"]``, coordinate ``coef``)
    gives the grid's predictions :math:`X_g\beta^{(s)}` (:func:`design_grid` on ``data``) and
    from them, by the same coefficients as :func:`tomstats.analysis.marginal.contrasts`, the
    draws :math:`\theta^{(s)}` (on the response scale the means are back-transformed per
    draw: differences of probabilities). Reported: the posterior median, the
    ``hdi_prob`` highest-density interval and the probability of direction
    :math:`\mathrm{pd} = \max(P(\theta > 0), P(\theta < 0))` over the draws. No multiplicity
    adjustment: the joint posterior needs none.

    Parameters
    ----------
    idata : arviz.InferenceData
        A formula fit of :func:`tomstats.glmm.fit` with a sampler backend.
    data : pandas.DataFrame
        The data it was fitted to.
    specs, by, method, interaction, scale, at, columns
        As for :func:`tomstats.analysis.marginal.contrasts` and :func:`fit_grid`.
    hdi_prob : float, default 0.95
    means : bool, default False
        The marginal means instead of contrasts (``pd`` left out).

    Returns
    -------
    pandas.DataFrame
        The label columns of :func:`~tomstats.analysis.marginal.contrasts` (or
        :func:`~tomstats.analysis.marginal.emmeans`), ``median``, ``mean``, ``sd``,
        ``hdi_lower``, ``hdi_upper`` and (contrasts) ``pd``.
    """
    from tomstats.analysis.marginal import contrast_rows, emmeans_rows

    if not 0 < hdi_prob < 1:
        raise ValueError(f"hdi_prob must be in (0, 1), got {hdi_prob!r}")
    post = getattr(idata, "posterior", None)
    if post is None or "beta" not in post:
        raise ValueError("posterior_contrasts needs a formula fit's posterior with 'beta' "
                         "draws (the structural model has no fixed-effects design)")
    formula = idata.posterior.attrs.get("model") or idata.attrs.get("model")
    if not formula or "~" not in str(formula):
        raise ValueError("the posterior does not record a formula (attrs['model']); "
                         "posterior contrasts need a formula fit")
    beta = post["beta"]
    coef = [str(c) for c in beta.coords["coef"].values]
    draws = beta.stack(sample=("chain", "draw")).transpose("sample", "coef").to_numpy()
    train = _train_for(data, columns)
    n_rows = idata.attrs.get("n_rows")
    if n_rows is not None and int(n_rows) != len(train):
        raise ValueError(f"the data have {len(train)} rows but the fit was made from "
                         f"{int(n_rows)}: give the data the fit was made from")
    X, factors, levels, _held = design_grid(_fixed(str(formula)), train, coef, at)
    cells = draws @ X.T  # (S, C)
    grid = RefGrid(tuple(factors), tuple(levels), cells.mean(axis=0), np.cov(cells.T)
                   .reshape(len(X), len(X)), float("inf"), link="logit")
    if means:
        labels, L = emmeans_rows(grid, specs, by)
        theta = cells @ L.T
        if scale == "response":
            theta = 1.0 / (1.0 + np.exp(-theta))
    else:
        labels, W, K = contrast_rows(grid, specs, by, method=method, interaction=interaction)
        mu = cells @ W.T
        if scale == "response":
            mu = 1.0 / (1.0 + np.exp(-mu))
        theta = mu @ K.T
    lo, hi = _hdi(theta, hdi_prob)
    out = labels.copy()
    out["median"] = np.median(theta, axis=0)
    out["mean"] = theta.mean(axis=0)
    out["sd"] = theta.std(axis=0, ddof=1)
    out["hdi_lower"], out["hdi_upper"] = lo, hi
    if not means:
        out["pd"] = np.maximum((theta > 0).mean(axis=0), (theta < 0).mean(axis=0))
    out.attrs.update(hdi_prob=hdi_prob, scale=scale, n_draws=theta.shape[0])
    return out


def _train_for(data: pd.DataFrame, columns: Mapping[str, str] | None) -> pd.DataFrame:
    from tomstats.glmm.data import prepare_data

    return prepare_data(data, columns).reset_index(drop=True)
