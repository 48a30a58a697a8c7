"""Section 5: predicted accuracy by condition (as bambi's ``plot_predictions``).

Formula fits: the probability correct over a grid of the formula's predictors, marginal over
the random effects (averaged over new groups drawn from the fitted population) and
conditional on a typical group (random effects 0), with the observed proportions and their
intervals on top. Structural fits: the context length × ToM order cells per LLM.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats.analysis.intervals import jeffreys_interval
from tomstats.report._document import Image, Section, Table, Text, figure_png
from tomstats.report.sections._cells import (
    cell_intervals,
    cell_plot_table,
    fig_cell_accuracy,
    fixed_covariates,
    random_groups,
)
from tomstats.report.sections._context import FitContext, hdi_columns
from tomstats.report.sections._ppc import ppc_data

__all__ = ["prediction_grid", "prediction_table", "section"]

TITLE = "Predicted accuracy by condition"
#: New groups drawn per posterior draw for the marginal (population-averaged) prediction.
N_NEW_GROUPS = 40
_MAX_DRAWS = 300
_TYPICAL = "__typical__"


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def prediction_grid(ctx: FitContext, data: pd.DataFrame
                    ) -> tuple[pd.DataFrame, str | None, str | None]:
    """Grid of conditions: ``x`` (the numeric predictor with most values, else the first),
    ``colour`` (the next predictor) and the others at their mean (numeric) or most common
    value. Discrete predictors (≤ 8 values) take their observed values; others 25 points
    (x) or their 10/50/90 % quantiles (colour)."""
    covs = fixed_covariates(ctx, data)
    if not covs:
        return pd.DataFrame(index=[0]), None, None
    nums = [c for c in covs if _numeric(data[c])]
    x = max(nums, key=lambda c: data[c].nunique()) if nums else covs[0]
    rest = [c for c in covs if c != x]
    colour = rest[0] if rest else None

    def values(c: str, n_cont: int) -> np.ndarray:
        s = data[c]
        if s.nunique() <= 8 or not _numeric(s):
            return np.sort(s.unique())
        if n_cont == 3:
            return np.unique(np.quantile(s.to_numpy(dtype=float), [0.1, 0.5, 0.9]))
        return np.linspace(float(s.min()), float(s.max()), n_cont)

    xs = values(x, 25)
    cs = values(colour, 3) if colour else np.array([None])
    rows = []
    for cv in cs:
        for xv in xs:
            r = {x: xv}
            if colour:
                r[colour] = cv
            rows.append(r)
    grid = pd.DataFrame(rows)
    for c in rest[1:]:
        s = data[c]
        grid[c] = float(s.mean()) if _numeric(s) and s.nunique() > 2 else s.mode().iloc[0]
    return grid, x, colour


def _predict(ctx: FitContext, grid: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Draws (S, rows) of P(correct): marginal over random effects, conditional on 0."""
    from tomstats.glmm import predict

    groups = random_groups(ctx)
    typical = grid.copy()
    for g in groups:
        typical[g] = _TYPICAL
    cond = np.asarray(predict(ctx.idata, typical, new_levels="zero",
                              max_draws=_MAX_DRAWS).values, dtype=float)
    if not groups:
        return cond, cond
    reps = []
    for k in range(N_NEW_GROUPS):
        r = grid.copy()
        for g in groups:
            r[g] = f"__new_{k}__"
        reps.append(r)
    big = pd.concat(reps, ignore_index=True)
    p = np.asarray(predict(ctx.idata, big, new_levels="sample", seed=1,
                           max_draws=_MAX_DRAWS).values, dtype=float)
    marg = p.reshape(p.shape[0], N_NEW_GROUPS, len(grid)).mean(axis=1)
    return marg, cond


def _observed(data: pd.DataFrame, y: np.ndarray, n: np.ndarray, grid: pd.DataFrame,
              x: str | None, colour: str | None, prob: float) -> pd.DataFrame:
    """Observed proportion per grid condition (continuous x binned to its nearest grid
    point in 6 quantile bins; continuous colour to the nearest grid value)."""
    df = pd.DataFrame({"k": y, "n": n})
    keys = []
    for c in (x, colour):
        if c is None:
            continue
        gv = np.asarray(pd.unique(grid[c]))
        s = data[c]
        if len(gv) == s.nunique() or not _numeric(s):
            df[c] = s.to_numpy()
        elif c == x:
            q = pd.qcut(s.astype(float), 6, duplicates="drop")
            df[c] = s.astype(float).groupby(q, observed=True).transform("mean").to_numpy()
        else:
            vals = s.to_numpy(dtype=float)
            df[c] = gv[np.abs(vals[:, None] - gv[None, :].astype(float)).argmin(axis=1)]
        keys.append(c)
    if not keys:
        out = pd.DataFrame({"k": [y.sum()], "n": [n.sum()]})
    else:
        out = df.groupby(keys, sort=True)[["k", "n"]].sum().reset_index()
    lo, hi = jeffreys_interval(out["k"].to_numpy(), out["n"].to_numpy(), prob)
    out["observed"] = out["k"] / out["n"]
    out["low"], out["high"] = lo, hi
    return out


def prediction_table(ctx: FitContext) -> tuple[pd.DataFrame, pd.DataFrame, str | None,
                                                str | None]:
    """``(predictions, observed, x, colour)``: per grid condition the marginal and the
    conditional probability (mean and HDI), and the observed proportions."""
    from tomstats.glmm import training_data
    from tomstats.glmm.ppc import observed_counts

    def make() -> tuple:
        data = training_data(ctx.idata)
        grid, x, colour = prediction_grid(ctx, data)
        marg, cond = _predict(ctx, grid)
        pct = f"{100 * ctx.prob:g} %"
        tab = grid.copy()
        for name, draws in (("marginal", marg), ("typical group", cond)):
            lo, hi = hdi_columns(draws, ctx.prob)
            tab[f"{name} mean"] = draws.mean(axis=0)
            tab[f"{name} {pct} low"], tab[f"{name} {pct} high"] = lo, hi
        y, n = observed_counts(ctx.idata)
        obs = _observed(data, y, n, grid, x, colour, ctx.prob)
        return tab, obs, x, colour

    return ctx.cached("predictions", make)


def _dodge(i: int, n: int) -> float:
    """Offset of colour ``i`` of ``n`` at a categorical x position (within ±0.35)."""
    step = min(0.25, 0.7 / max(n, 1))
    return step * (i - 0.5 * (n - 1)) - 0.03


def fig_predictions(tab: pd.DataFrame, obs: pd.DataFrame, x: str | None, colour: str | None,
                    prob: float) -> Figure:
    """Two panels (marginal, typical group): predicted probability with its HDI and the
    observed proportions with their intervals."""
    pct = f"{100 * prob:g} %"
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    discrete = x is None or tab[x].nunique() <= 8 or not _numeric(tab[x])
    groups = list(tab.groupby(colour, sort=True)) if colour else [(None, tab)]
    ogroups = dict(list(obs.groupby(colour, sort=True))) if colour else {None: obs}
    xpos_map = ({v: i for i, v in enumerate(sorted(pd.unique(tab[x])))}
                if x and (discrete or not _numeric(tab[x])) else None)
    for ax, name, title in ((axes[0], "marginal", "marginal over random effects"),
                            (axes[1], "typical group", "typical group (random effects 0)")):
        for i, (cv, d) in enumerate(groups):
            color = f"C{i}"
            label = f"{colour} = {cv:.3g}" if isinstance(cv, float) else (
                f"{colour} = {cv}" if colour else "predicted")
            if x is None:
                xs = np.array([0.0])
            elif xpos_map is not None:
                xs = np.array([xpos_map[v] for v in d[x]], dtype=float) + _dodge(i, len(groups))
            else:
                xs = d[x].to_numpy(dtype=float)
            m = d[f"{name} mean"].to_numpy()
            lo, hi = d[f"{name} {pct} low"].to_numpy(), d[f"{name} {pct} high"].to_numpy()
            if xpos_map is not None or x is None:
                ax.errorbar(xs, m, yerr=np.clip([m - lo, hi - m], 0, None), fmt="s",
                            color=color, capsize=4, ms=6, label=label)
            else:
                ax.fill_between(xs, lo, hi, color=color, alpha=0.2)
                ax.plot(xs, m, "-", color=color, label=label)
            od = ogroups.get(cv)
            if od is not None and len(od):
                if x is None:
                    ox = np.array([0.15])
                elif xpos_map is not None:
                    ox = np.array([xpos_map.get(v, np.nan) for v in od[x]], dtype=float) \
                        + _dodge(i, len(groups)) + 0.06
                else:
                    ox = od[x].to_numpy(dtype=float)
                om = od["observed"].to_numpy()
                ax.errorbar(ox, om, yerr=np.clip([om - od["low"], od["high"] - om], 0, None),
                            fmt="o", mfc="white", color=color, capsize=2, ms=5)
        if xpos_map is not None:
            ax.set_xticks(list(xpos_map.values()), [f"{v:.4g}" if isinstance(v, float)
                                                    else str(v) for v in xpos_map])
        ax.set_xlabel(x or "")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("P(correct)")
    axes[0].legend(fontsize=8, frameon=False,
                   title=f"filled: predicted ({pct} HDI); open: observed", title_fontsize=8)
    return fig


def _structural(ctx: FitContext) -> Section:
    d = ppc_data(ctx)
    if isinstance(d, str):
        return Section(TITLE, (Text(d, "missing"),))
    cols = [c for c in ("model", "context_words", "tom_order") if c in d.design]
    cells, _ = ctx.cached("cells_structural", lambda: cell_intervals(d, cols, ctx.prob))
    tab = cell_plot_table(cells)
    if tab is None:
        return Section(TITLE, (Text("No per-observation context length and ToM order in the "
                                    "fit's data: accuracy by design cell not drawn.",
                                    "missing"),))
    pct = f"{100 * ctx.prob:g} %"
    what = "expected accuracy" if d.p is not None else "posterior predictive accuracy"
    image = Image(figure_png(fig_cell_accuracy(tab)), "predictions",
                  f"Accuracy by context length × ToM order: {what} (line) and its {pct} HDI "
                  f"(band), observed accuracy (dots, {pct} Jeffreys interval)"
                  + ("; one panel per LLM." if "panel" in tab else "."))
    return Section(TITLE, (image,))


def section(ctx: FitContext) -> Section:
    """Predicted accuracy by condition (formula fits) or by design cell (structural fits)."""
    if ctx.kind != "formula":
        return _structural(ctx)
    if not ctx.is_glmm:
        return Section(TITLE, (Text("Predictions need a fit written by tomstats.glmm.fit "
                                    "(its spec and data).", "missing"),))
    tab, obs, x, colour = prediction_table(ctx)
    pct = f"{100 * ctx.prob:g} %"
    others = [c for c in tab.columns if c not in (x, colour) and not c.startswith(
        ("marginal", "typical"))]
    held = (" Other predictors held at " + ", ".join(f"{c} = {tab[c].iloc[0]:.3g}"
                                                     if isinstance(tab[c].iloc[0], float)
                                                     else f"{c} = {tab[c].iloc[0]}"
                                                     for c in others) + ".") if others else ""
    caption = (f"Predicted P(correct) by {x or 'condition'}"
               + (f" and {colour}" if colour else "") + f" with {pct} HDI: left marginal over "
               f"the random effects ({N_NEW_GROUPS} new groups drawn from the fitted "
               "population per posterior draw, averaged), right conditional on a typical group "
               f"(random effects 0); open circles are observed proportions ({pct} Jeffreys "
               "interval)." + held)
    blocks = [Image(figure_png(fig_predictions(tab, obs, x, colour, ctx.prob)), "predictions",
                    caption),
              Table(tab, caption="Predicted probability correct by condition",
                    float_format="{:.3f}")]
    return Section(TITLE, tuple(blocks))
