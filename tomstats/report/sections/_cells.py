"""Accuracy by design cell, shared by the prediction and check sections: the cells of a fit's
data, their observed and predictive intervals, and the figure of both."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats.report.sections._context import FitContext
from tomstats.report.sections._ppc import PPCData, group_intervals

__all__ = ["cell_accuracy_table", "cell_columns", "cell_intervals", "cell_plot_table",
           "fig_cell_accuracy", "fixed_covariates", "random_groups"]


def random_groups(ctx: FitContext) -> list[str]:
    """Grouping columns of the formula's random terms (``(1 | a/b)`` → ``a, b``)."""
    cols: list[str] = []
    for t in ctx.spec.get("random", []) or []:
        cols += str(t.get("group", "")).replace("/", ":").split(":")
    return [c for c in dict.fromkeys(cols) if c]


def fixed_covariates(ctx: FitContext, data: pd.DataFrame) -> list[str]:
    """Data columns the formula's fixed part reads (``fb * implicit`` → ``fb, implicit``)."""
    fixed = str(ctx.spec.get("fixed", ""))
    skip = {ctx.spec.get("response"), ctx.spec.get("trials"), *random_groups(ctx)}
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", fixed)
    return [c for c in dict.fromkeys(names) if c in data.columns and c not in skip]


MAX_PANELS = 16


def _num(v: Any) -> int | float:
    f = float(v)
    return int(f) if f.is_integer() else f


def cell_accuracy_table(y: np.ndarray, y_rep: np.ndarray, context: np.ndarray,
                        tom: np.ndarray, prob: float = 0.95) -> pd.DataFrame:
    """Observed and posterior predictive accuracy per design cell (context × ToM order).

    For each cell the predictive accuracy of draw :math:`s` is the mean of
    :math:`y^{rep}_{s,i}` over the cell's observations; the table gives its mean and central
    ``prob`` interval beside the observed accuracy.
    """
    frame = pd.DataFrame({"context": context, "tom": tom})
    rows = []
    q = ((1 - prob) / 2, 1 - (1 - prob) / 2)
    for (c, t), idx in frame.groupby(["context", "tom"], sort=True).indices.items():
        acc_draws = y_rep[:, idx].mean(axis=1)
        lo, hi = np.quantile(acc_draws, q)
        rows.append({"context_length": _num(c), "tom_order": _num(t), "n": len(idx),
                     "observed": float(y[idx].mean()), "predicted": float(acc_draws.mean()),
                     "predicted_low": float(lo), "predicted_high": float(hi)})
    return pd.DataFrame(rows)


def fig_cell_accuracy(tab: pd.DataFrame, title: str = "") -> Figure:
    """Posterior predictive accuracy by design cell (bands) with the observed accuracy (dots).

    ``tab`` has ``context_length, tom_order, observed, predicted, predicted_low,
    predicted_high`` and optionally ``panel`` (one panel per value, e.g. per LLM).
    """
    panels = list(pd.unique(tab["panel"])) if "panel" in tab else [None]
    panels = panels[:MAX_PANELS]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols + 1.2, 3.6 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True).ravel()
    xs = np.unique(tab["context_length"].to_numpy(dtype=float))
    for ax, panel in zip(axes, panels, strict=False):
        sub = tab if panel is None else tab[tab["panel"] == panel]
        for i, (t, d) in enumerate(sub.groupby("tom_order", sort=True)):
            d = d.sort_values("context_length")
            x = d["context_length"].to_numpy(dtype=float)
            color = f"C{i}"
            ax.fill_between(x, d["predicted_low"].to_numpy(dtype=float),
                            d["predicted_high"].to_numpy(dtype=float), color=color, alpha=0.2)
            ax.plot(x, d["predicted"].to_numpy(dtype=float), "-", color=color,
                    label=f"ToM {float(t):g}")
            obs = d["observed"].to_numpy(dtype=float)
            if {"obs low", "obs high"} <= set(d.columns):
                err = np.clip([obs - d["obs low"].to_numpy(dtype=float),
                               d["obs high"].to_numpy(dtype=float) - obs], 0, None)
                ax.errorbar(x, obs, yerr=err, fmt="none", color=color, capsize=2, lw=0.8)
            ax.plot(x, obs, "o", color=color, markeredgecolor="black")
        if np.all(xs > 0) and len(xs) > 1:
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{v:,.0f}" for v in xs])
            ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.set_xlabel("Context length (words)")
        ax.grid(alpha=0.3)
        if panel is not None:
            ax.set_title(str(panel), fontsize=10)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    axes[0].set_ylabel("Accuracy")
    axes[0].legend(fontsize=8, frameon=False, title="line: predicted; dot: observed",
                   title_fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def cell_columns(ctx: FitContext, design: pd.DataFrame) -> list[str]:
    """Columns defining the design cells of the accuracy check: ``model``,
    ``context_words``, ``tom_order`` when present (structural fits and formula fits on the
    paper's design), else the formula's discrete predictors (≤ 8 values each)."""
    cols = [c for c in ("model", "context_words", "tom_order") if c in design]
    if {"context_words", "tom_order"} <= set(cols) or ctx.kind != "formula":
        return cols
    disc = [c for c in fixed_covariates(ctx, design) if design[c].nunique() <= 8]
    return disc or cols


def cell_intervals(d: PPCData, cols: list[str], prob: float) -> tuple[pd.DataFrame, list[str]]:
    """:func:`~tomstats.report.sections._ppc.group_intervals` per design cell of ``cols``."""
    design = d.design[cols].astype(str) if cols else pd.DataFrame(index=d.design.index)
    if cols:
        keys = d.design[cols].drop_duplicates().sort_values(cols).reset_index(drop=True)
        codes = d.design.groupby(cols, sort=True).ngroup().to_numpy()
    else:
        keys = pd.DataFrame(index=[0])
        codes = np.zeros(len(design), dtype=np.int64)
    tab = group_intervals(d, codes, prob)
    out = pd.concat([keys.reset_index(drop=True), tab], axis=1)
    names = [", ".join(f"{c} {_fmt(r[c])}" for c in cols) or "all rows"
             for _, r in keys.iterrows()]
    return out, names


def _fmt(v: object) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def cell_plot_table(tab: pd.DataFrame) -> pd.DataFrame | None:
    """The cell table in :func:`fig_cell_accuracy`'s columns (``None`` without context and
    ToM order)."""
    if not {"context_words", "tom_order"} <= set(tab.columns):
        return None
    out = tab.rename(columns={"context_words": "context_length", "model": "panel",
                              "pred low": "predicted_low", "pred high": "predicted_high"})
    return out
