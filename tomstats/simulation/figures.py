"""The simulation paper's five figures, drawn from a ``tomstats reproduce`` output folder.

Each ``fig_*`` function takes the tidy table that ``reproduce`` writes (as a
:class:`pandas.DataFrame`) and returns a :class:`matplotlib.figure.Figure`; no global
pyplot state is touched, so the functions are safe in servers, tests and notebooks.
:func:`write_paper_figures` reads a whole output folder and writes ``fig1.png`` …
``fig5.png`` into it atomically.

======  =====================================================  =====================
Figure  Content                                                Input
======  =====================================================  =====================
1       % of total variance per source, ± sd over capability   ``table1.csv``
2       accuracy by context length × ToM order, 95 % CIs       ``cells.csv``
3       main effects of context length and ToM order           ``cells.csv``
4       variance decomposition across capability levels        ``decomposition.csv``
5       ToM share of systematic variance on the γ × α grid     ``sensitivity.csv``
======  =====================================================  =====================

Two more draw a calibrated sweep (``tomstats simulate CONFIG --posterior FIT.nc``, or the
structural-fit section of a fit report): :func:`fig_eta2_posterior` (η² per LLM with 95 %
posterior intervals, from ``decomposition_posterior.csv``) and
:func:`fig_dominance_posterior` (the γ × α map's posterior mean ToM share with the posterior
probability of ToM dominance in each cell, from ``dominance_posterior.csv``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats._io import atomic_path
from tomstats.simulation.files import (
    CELLS_COLUMNS,
    DECOMPOSITION_COLUMNS,
    POSTERIOR_DECOMPOSITION_COLUMNS,
    read_simulation_dir,
    require_columns,
)
from tomstats.simulation.paper import PAPER_TABLE1

__all__ = [
    "FACTOR_LABELS",
    "PAPER_TABLE1",
    "fig_variance_decomposition",
    "fig_cells",
    "fig_main_effects",
    "fig_decomposition_by_capability",
    "fig_sensitivity",
    "fig_eta2_posterior",
    "fig_dominance_posterior",
    "default_point",
    "paper_figures",
    "reference_capability",
    "save_figure",
    "sensitivity_grid",
    "write_paper_figures",
]

#: Display names of the ANOVA sources, in the paper's order.
FACTOR_LABELS: dict[str, str] = {
    "tom_order": "ToM order",
    "context_length": "Context length",
    "interaction": "Interaction",
    "residual": "Residual",
}

_COLORS = {"tom_order": "#1f77b4", "context_length": "#ff7f0e", "interaction": "#2ca02c",
           "residual": "#9e9e9e"}
_ORDER_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e")


def _factor_rows(table1: pd.DataFrame) -> pd.DataFrame:
    known = set(FACTOR_LABELS)
    unknown = sorted(set(table1["factor"].astype(str)) - known)
    if unknown:
        raise ValueError(f"table1: unknown factor(s) {unknown}; expected {sorted(known)}")
    if table1["factor"].duplicated().any():
        dup = table1.loc[table1["factor"].duplicated(), "factor"].iloc[0]
        raise ValueError(f"table1: factor {dup!r} appears more than once")
    order = [f for f in FACTOR_LABELS if f in set(table1["factor"])]
    return table1.set_index("factor").loc[order]


def _select_capability(cells: pd.DataFrame, capability: float, name: str) -> pd.DataFrame:
    caps = np.unique(cells["capability"].to_numpy(dtype=float))
    hit = np.isclose(caps, float(capability), rtol=0, atol=1e-9)
    if not hit.any():
        raise ValueError(
            f"{name}: capability {capability!r} not in the table; levels are {caps.tolist()}"
        )
    sub = cells[np.isclose(cells["capability"].to_numpy(dtype=float), caps[hit][0])]
    dup = sub.duplicated(["context_length", "tom_order"])
    if dup.any():
        row = sub[dup].iloc[0]
        raise ValueError(f"{name}: cell (context_length={row['context_length']}, "
                         f"tom_order={row['tom_order']}) appears more than once")
    return sub


def _order_label(t: float) -> str:
    t_int = int(round(t))
    if not math.isclose(t, t_int):
        return f"order {t:g}"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(t_int if t_int < 20 else t_int % 10, "th")
    return f"{t_int}{suffix} order"


# --------------------------------------------------------------------------- figures


def fig_variance_decomposition(
    table1: pd.DataFrame, reference: Mapping[str, Mapping[str, float]] | None = None
) -> Figure:
    """Figure 1: percentage of total variance per ANOVA source, ± sd across capability levels.

    The percentage of total variance is :math:`100\\,\\eta^2_X = 100\\,SS_X/SS_{total}`;
    the error bars are the standard deviation of that percentage across capability levels
    (column ``sd_pct``).

    Parameters
    ----------
    table1 : pandas.DataFrame
        ``table1.csv``: columns ``factor, pct_total, sd_pct`` (others ignored), rows among
        ``tom_order, context_length, interaction, residual``.
    reference : mapping, optional
        ``{factor: {"pct_total": value}}`` to mark beside each bar (e.g.
        :data:`PAPER_TABLE1`), drawn as black diamonds.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = _factor_rows(require_columns(table1, ("factor", "pct_total", "sd_pct"), "table1"))
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    pct = rows["pct_total"].to_numpy(dtype=float)
    sd = np.nan_to_num(rows["sd_pct"].to_numpy(dtype=float), nan=0.0)
    ax.bar(x, pct, yerr=sd, capsize=6, color=[_COLORS[f] for f in rows.index],
           edgecolor="black", linewidth=0.6, error_kw={"elinewidth": 1.2})
    for xi, p, s in zip(x, pct, sd, strict=True):
        ax.annotate(f"{p:.1f}%", (xi, p + s), xytext=(0, 4), textcoords="offset points",
                    ha="center", va="bottom", fontsize=9)
    if reference is not None:
        ref = [float(reference.get(f, {}).get("pct_total", np.nan)) for f in rows.index]
        ax.plot(x + 0.3, ref, "D", color="black", markersize=5, label="paper (Table 1)")
        ax.legend(loc="upper left", frameon=False)
    ax.set_xticks(x, [FACTOR_LABELS[f] for f in rows.index])
    ax.set_ylabel("% of total variance (η² × 100)")
    ax.set_ylim(0, max(100.0, float(np.nanmax(pct + sd)) * 1.12))
    ax.set_title("Variance decomposition (mean ± sd across capability levels)")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def fig_cells(cells: pd.DataFrame, capability: float = 1.0) -> Figure:
    """Figure 2: accuracy by context length (log axis) and ToM order, with 95 % CIs.

    Parameters
    ----------
    cells : pandas.DataFrame
        ``cells.csv``: ``capability, context_length, tom_order, accuracy, ci_low, ci_high``
        and optionally ``expected`` (the analytic cell probability, drawn dashed).
    capability : float, default 1.0
        The capability level to draw (the paper's reference model is 1.0).

    Returns
    -------
    matplotlib.figure.Figure
    """
    sub = _select_capability(require_columns(cells, CELLS_COLUMNS, "cells"), capability, "cells")
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    orders = np.unique(sub["tom_order"].to_numpy(dtype=float))
    for i, t in enumerate(orders):
        d = sub[np.isclose(sub["tom_order"].to_numpy(dtype=float), t)]
        d = d.sort_values("context_length")
        c = d["context_length"].to_numpy(dtype=float)
        acc = d["accuracy"].to_numpy(dtype=float)
        err = np.vstack([acc - d["ci_low"].to_numpy(dtype=float),
                         d["ci_high"].to_numpy(dtype=float) - acc])
        color = _ORDER_COLORS[i % len(_ORDER_COLORS)]
        ax.errorbar(c, acc, yerr=np.clip(err, 0, None), fmt="o-", color=color, capsize=4,
                    label=_order_label(t))
        if "expected" in d.columns and d["expected"].notna().all():
            ax.plot(c, d["expected"].to_numpy(dtype=float), "--", color=color, alpha=0.6,
                    linewidth=1)
    contexts = np.unique(sub["context_length"].to_numpy(dtype=float))
    ax.set_xscale("log")
    ax.set_xticks(contexts, [f"{v:,.0f}" for v in contexts])
    ax.minorticks_off()
    ax.set_ylim(0, 1)
    ax.set_xlabel("Context length (words, log scale)")
    ax.set_ylabel("Accuracy")
    title = f"Accuracy by context length and ToM order (capability {capability:g})"
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    if "expected" in sub.columns and sub["expected"].notna().all():
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], linestyle="--", color="grey"))
        labels.append("expected (eq. 1)")
    ax.legend(handles, labels, frameon=False, loc="lower left")
    ax.grid(alpha=0.3)
    return fig


def _marginal(sub: pd.DataFrame, by: str) -> pd.DataFrame:
    """Unweighted marginal mean accuracy over the other factor, with a 95 % interval.

    The cell standard error is recovered from the CI half-width, ``(hi - lo)/(2·1.96)``; the
    marginal's standard error is :math:`\\sqrt{\\sum_k se_k^2}/K` (independent cells).
    """
    se = (sub["ci_high"].astype(float) - sub["ci_low"].astype(float)) / (2 * 1.959964)
    tmp = sub.assign(_se2=se**2)
    g = tmp.groupby(by, sort=True)
    out = pd.DataFrame({"accuracy": g["accuracy"].mean(),
                        "se": np.sqrt(g["_se2"].sum()) / g.size()})
    return out


def fig_main_effects(cells: pd.DataFrame, capability: float = 1.0) -> Figure:
    """Figure 3: marginal effects of context length (left) and ToM order (right).

    Each marginal is the unweighted mean of the cell accuracies over the other factor
    (equal to the pooled accuracy in a balanced design); its 95 % interval is
    :math:`\\bar a \\pm 1.96\\sqrt{\\sum_k se_k^2}/K` with the cell standard errors
    :math:`se_k` recovered from the cells' CI half-widths.

    Parameters
    ----------
    cells : pandas.DataFrame
        ``cells.csv`` (see :func:`fig_cells`).
    capability : float, default 1.0
        The capability level to draw.

    Returns
    -------
    matplotlib.figure.Figure
    """
    sub = _select_capability(require_columns(cells, CELLS_COLUMNS, "cells"), capability, "cells")
    fig = Figure(figsize=(9.0, 3.8), layout="constrained")
    ax_c, ax_t = fig.subplots(1, 2, sharey=True)
    mc = _marginal(sub, "context_length")
    x = mc.index.to_numpy(dtype=float)
    ax_c.errorbar(x, mc["accuracy"].to_numpy(dtype=float),
                  yerr=1.959964 * mc["se"].to_numpy(dtype=float), fmt="o-", color="#ff7f0e",
                  capsize=4)
    ax_c.set_xscale("log")
    ax_c.set_xticks(x, [f"{v:,.0f}" for v in x])
    ax_c.minorticks_off()
    ax_c.set_xlabel("Context length (words, log scale)")
    ax_c.set_ylabel("Accuracy (marginal mean)")
    ax_c.set_title("Context length")
    mt = _marginal(sub, "tom_order")
    t = mt.index.to_numpy(dtype=float)
    ax_t.bar(np.arange(len(t)), mt["accuracy"].to_numpy(dtype=float),
             yerr=1.959964 * mt["se"].to_numpy(dtype=float), capsize=6,
             color=[_ORDER_COLORS[i % len(_ORDER_COLORS)] for i in range(len(t))],
             edgecolor="black", linewidth=0.6)
    for i, a in enumerate(mt["accuracy"]):
        ax_t.annotate(f"{a:.3f}", (i, a), xytext=(0, 6), textcoords="offset points",
                      ha="center", fontsize=9)
    ax_t.set_xticks(np.arange(len(t)), [_order_label(v) for v in t])
    ax_t.set_xlabel("ToM order")
    ax_t.set_title("ToM order")
    for ax in (ax_c, ax_t):
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3, axis="y")
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(f"Main effects (capability {capability:g}; 95 % intervals)")
    return fig


def fig_decomposition_by_capability(decomposition: pd.DataFrame) -> Figure:
    """Figure 4: % of total variance per source across capability levels.

    Left: :math:`100\\,\\eta^2` of ToM order, context length and their interaction at each
    capability level, with the 95 % Monte Carlo interval across replicates. Right: each
    source's share of systematic variance, :math:`SS_X / SS_{between\\,cells}` (column
    ``share_systematic``, drawn when present).

    Parameters
    ----------
    decomposition : pandas.DataFrame
        ``decomposition.csv``: ``capability, factor, pct_total, pct_total_low,
        pct_total_high`` and optionally ``share_systematic``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = require_columns(decomposition, DECOMPOSITION_COLUMNS, "decomposition")
    d = d[d["factor"].astype(str) != "residual"]
    unknown = sorted(set(d["factor"].astype(str)) - set(FACTOR_LABELS))
    if unknown:
        raise ValueError(f"decomposition: unknown factor(s) {unknown}; "
                         f"expected {sorted(FACTOR_LABELS)}")
    if d.empty:
        raise ValueError("decomposition: no rows besides 'residual'")
    has_share = "share_systematic" in d.columns and d["share_systematic"].notna().all()
    fig = Figure(figsize=(9.6 if has_share else 6.4, 4.0), layout="constrained")
    axes = fig.subplots(1, 2) if has_share else [fig.add_subplot()]
    factors = [f for f in FACTOR_LABELS if f in set(d["factor"])]
    caps = np.unique(d["capability"].to_numpy(dtype=float))
    width = 0.8 / len(factors)
    pos = np.arange(len(caps))
    ax = axes[0]
    for i, f in enumerate(factors):
        s = d[d["factor"] == f].set_index("capability").reindex(caps)
        pct = s["pct_total"].to_numpy(dtype=float)
        err = np.vstack([pct - s["pct_total_low"].to_numpy(dtype=float),
                         s["pct_total_high"].to_numpy(dtype=float) - pct])
        ax.bar(pos + (i - (len(factors) - 1) / 2) * width, pct, width,
               yerr=np.clip(err, 0, None), capsize=3, color=_COLORS[f], edgecolor="black",
               linewidth=0.5, label=FACTOR_LABELS[f])
    ax.set_xticks(pos, [f"{c:g}×" for c in caps])
    ax.set_xlabel("Model capability m")
    ax.set_ylabel("% of total variance (95 % MC interval)")
    ax.set_title("Variance explained by capability level")
    top = float(np.nanmax(d["pct_total_high"].to_numpy(dtype=float)))
    ax.set_ylim(top=top * 1.25 if top > 0 else 1.0)
    ax.legend(frameon=False, loc="upper center", ncol=len(factors))
    ax.grid(alpha=0.3, axis="y")
    ax.spines[["top", "right"]].set_visible(False)
    if has_share:
        ax2 = axes[1]
        for f in factors:
            s = d[d["factor"] == f].set_index("capability").reindex(caps)
            ax2.plot(caps, 100 * s["share_systematic"].to_numpy(dtype=float), "o-",
                     color=_COLORS[f], label=FACTOR_LABELS[f])
        ax2.axhline(50, color="black", linestyle=":", linewidth=1)
        ax2.set_ylim(0, 100)
        ax2.set_xticks(caps, [f"{c:g}×" for c in caps])
        ax2.set_xlabel("Model capability m")
        ax2.set_ylabel("% of systematic (between-cell) variance")
        ax2.set_title("Share of systematic variance")
        ax2.grid(alpha=0.3)
        ax2.spines[["top", "right"]].set_visible(False)
    return fig


def _edges(centers: np.ndarray) -> np.ndarray:
    if centers.size == 1:
        return np.array([centers[0] - 0.5, centers[0] + 0.5])
    mid = (centers[1:] + centers[:-1]) / 2
    return np.concatenate([[2 * centers[0] - mid[0]], mid, [2 * centers[-1] - mid[-1]]])


def sensitivity_grid(
    sensitivity: pd.DataFrame, value: str = "tom_share", name: str = "sensitivity"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pivot ``sensitivity.csv`` to ``(gammas, alphas, share[gamma, alpha])``.

    ``value`` names the column to pivot (``tom_share``; ``tom_share_mean`` or ``p_dominant``
    for ``dominance_posterior.csv``); ``name`` is the table's name in error messages.
    Raises ``ValueError`` when the rows do not form a complete γ × α grid.
    """
    s = require_columns(sensitivity, ("gamma", "alpha", value), name)
    if s.duplicated(["gamma", "alpha"]).any():
        row = s[s.duplicated(["gamma", "alpha"])].iloc[0]
        raise ValueError(f"{name}: grid point (gamma={row['gamma']}, alpha={row['alpha']}) "
                         "appears more than once")
    grid = s.pivot(index="gamma", columns="alpha", values=value).sort_index()
    grid = grid.reindex(sorted(grid.columns), axis=1)
    if grid.isna().to_numpy().any():
        raise ValueError(f"{name}: rows do not form a complete gamma × alpha grid "
                         f"({len(s)} rows for {grid.shape[0]} × {grid.shape[1]} points)")
    return (grid.index.to_numpy(dtype=float), grid.columns.to_numpy(dtype=float),
            grid.to_numpy(dtype=float))


def _star(ax: Any, x: float, y: float) -> None:
    """Mark a parameter point on a γ × α heatmap."""
    ax.plot(x, y, marker="*", markersize=16, color="gold", alpha=0.9,
            markeredgecolor="black", linestyle="none")


def _grid_axes(fig: Figure, ax: Any, mesh: Any, a_s: np.ndarray, gammas: np.ndarray,
               label: str) -> None:
    """Colour bar (with the 0.5 line), grid-value ticks and axis labels of a γ × α heatmap."""
    cbar = fig.colorbar(mesh, ax=ax)
    cbar.set_label(label)
    cbar.ax.axhline(0.5, color="black", linestyle="--")
    ax.set_xticks(a_s, [f"{v:.2f}" for v in a_s])
    ax.set_yticks(gammas, [f"{v:.2f}" for v in gammas])
    ax.set_xlabel("Context decay rate α (×10⁻⁴ per word)")
    ax.set_ylabel("ToM penalty γ")


def fig_sensitivity(
    sensitivity: pd.DataFrame, default: tuple[float, float] | None = None
) -> Figure:
    """Figure 5: ToM share of systematic variance over the γ × α grid.

    The share at each grid point is :math:`SS_{ToM} / SS_{between\\,cells}`; cells above 0.5
    are *ToM-dominant*. The dashed line is the 0.5 contour (the dominance boundary) and the
    star marks the default parameters.

    Parameters
    ----------
    sensitivity : pandas.DataFrame
        ``sensitivity.csv``: ``gamma, alpha, tom_share`` (one row per grid point).
    default : (gamma, alpha), optional
        The default parameters, marked with a star.

    Returns
    -------
    matplotlib.figure.Figure
    """
    gammas, alphas, share = sensitivity_grid(sensitivity)
    if default is not None:
        try:
            g0, a0 = (float(v) for v in default)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"default: expected (gamma, alpha), got {default!r}") from exc
        if not (math.isfinite(g0) and math.isfinite(a0)):
            raise ValueError(f"default: gamma and alpha must be finite, got {default!r}")
    scale = 1e-4
    a_s = alphas / scale
    fig = Figure(figsize=(6.8, 5.4), layout="constrained")
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(_edges(a_s), _edges(gammas), share, cmap="RdBu_r", vmin=0, vmax=1,
                         shading="flat")
    for i, g in enumerate(gammas):
        for j, a in enumerate(a_s):
            v = share[i, j]
            ax.text(a, g, f"{v:.2f}", ha="center", va="center", fontsize=7.5,
                    color="white" if abs(v - 0.5) > 0.3 else "black")
    if share.shape[0] > 1 and share.shape[1] > 1 and share.min() < 0.5 < share.max():
        ax.contour(a_s, gammas, share, levels=[0.5], colors="black", linestyles="--",
                   linewidths=1.5)
    star = ""
    if default is not None:
        _star(ax, a0 / scale, g0)
        star = f"; ★ default γ = {g0:.3g}, α = {a0:.3g}"
    n_dom = int((share > 0.5).sum())
    _grid_axes(fig, ax, mesh, a_s, gammas, "ToM share of systematic variance")
    ax.set_title(f"ToM dominant (share > 0.5) in {n_dom} of {share.size} grid points\n"
                 f"dashed: share = 0.5{star}", fontsize=10.5)
    return fig


# --------------------------------------------------------------------------- calibrated sweeps

#: ANOVA sources drawn by :func:`fig_eta2_posterior`, in the paper's order.
_SYSTEMATIC_SOURCES = ("tom_order", "context_length", "interaction")


def fig_eta2_posterior(decomposition: pd.DataFrame) -> Figure:
    """η² of ToM order, context length and their interaction per LLM, with 95 % intervals.

    One row of points per LLM: the posterior mean
    :math:`\\bar\\eta^2 = \\frac{1}{SR}\\sum_{s,r}\\eta^2_{sr}` and, as a bar, the 2.5 %–97.5 %
    quantiles over posterior draws of the per-draw Monte Carlo mean (columns ``eta2_mean``,
    ``eta2_low``, ``eta2_high`` of ``decomposition_posterior.csv``, see
    :mod:`tomstats.simulation.posterior_sweep`).

    Parameters
    ----------
    decomposition : pandas.DataFrame
        ``llm, source, eta2_mean, eta2_low, eta2_high`` (other columns and the ``residual``
        rows are ignored).

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = require_columns(decomposition, POSTERIOR_DECOMPOSITION_COLUMNS, "decomposition_posterior")
    d = d[d["source"].isin(_SYSTEMATIC_SOURCES)]
    if d.empty:
        raise ValueError(f"decomposition_posterior: no rows for the sources "
                         f"{list(_SYSTEMATIC_SOURCES)}")
    llms = list(pd.unique(d["llm"].astype(str)))
    fig = Figure(figsize=(7.2, 1.2 + 0.75 * len(llms)), layout="constrained")
    ax = fig.add_subplot()
    offsets = np.linspace(-0.22, 0.22, len(_SYSTEMATIC_SOURCES))
    for k, src in enumerate(_SYSTEMATIC_SOURCES):
        sub = d[d["source"] == src].set_index(d.loc[d["source"] == src, "llm"].astype(str))
        sub = sub.reindex(llms)
        y = np.arange(len(llms)) + offsets[k]
        mean = sub["eta2_mean"].to_numpy(dtype=float)
        lo = sub["eta2_low"].to_numpy(dtype=float)
        hi = sub["eta2_high"].to_numpy(dtype=float)
        ax.errorbar(mean, y, xerr=[np.clip(mean - lo, 0, None), np.clip(hi - mean, 0, None)],
                    fmt="o", color=_COLORS[src], capsize=3, label=FACTOR_LABELS[src])
    ax.set_yticks(np.arange(len(llms)), llms)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("η² (share of total variance), posterior mean and 95 % interval")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="best")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title("Calibrated variance decomposition per LLM", fontsize=10.5)
    return fig


def fig_dominance_posterior(
    dominance: pd.DataFrame, fitted: tuple[float, float] | None = None
) -> Figure:
    """The γ × α dominance map of a calibrated sweep, with posterior probabilities.

    Colour: the posterior mean ToM share of systematic variance in each grid cell
    (``tom_share_mean``); text: that mean and ``P`` = the posterior probability that the
    per-draw mean share exceeds 0.5 (``p_dominant``). The dashed line is the 0.5 contour of
    the mean share.

    Parameters
    ----------
    dominance : pandas.DataFrame
        ``dominance_posterior.csv``: ``gamma, alpha, tom_share_mean, p_dominant`` (one row
        per grid cell).
    fitted : (gamma, alpha), optional
        The fit's posterior mean (γ, α), marked with a star when it lies inside the grid.

    Returns
    -------
    matplotlib.figure.Figure
    """
    gammas, alphas, share = sensitivity_grid(dominance, "tom_share_mean",
                                             "dominance_posterior")
    _, _, prob = sensitivity_grid(dominance, "p_dominant", "dominance_posterior")
    scale = 1e-4
    a_s = alphas / scale
    fig = Figure(figsize=(7.6, 6.0), layout="constrained")
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(_edges(a_s), _edges(gammas), share, cmap="RdBu_r", vmin=0, vmax=1,
                         shading="flat")
    for i, g in enumerate(gammas):
        for j, a in enumerate(a_s):
            v = share[i, j]
            ax.text(a, g, f"{v:.2f}\nP {prob[i, j]:.2f}", ha="center", va="center",
                    fontsize=7, color="white" if abs(v - 0.5) > 0.3 else "black")
    if share.shape[0] > 1 and share.shape[1] > 1 and share.min() < 0.5 < share.max():
        ax.contour(a_s, gammas, share, levels=[0.5], colors="black", linestyles="--",
                   linewidths=1.5)
    note = ""
    if fitted is not None:
        g0, a0 = (float(v) for v in fitted)
        ge, ae = _edges(gammas), _edges(a_s)
        if ge[0] <= g0 <= ge[-1] and ae[0] <= a0 / scale <= ae[-1]:
            _star(ax, a0 / scale, g0)
            note = f"; ★ fitted γ = {g0:.3g}, α = {a0:.3g}"
        else:
            note = f"; fitted γ = {g0:.3g}, α = {a0:.3g} lies outside the grid"
    n_dom = int((share > 0.5).sum())
    _grid_axes(fig, ax, mesh, a_s, gammas, "Posterior mean ToM share of systematic variance")
    ax.set_title(f"Posterior mean share > 0.5 in {n_dom} of {share.size} cells; "
                 f"P = P(share > 0.5)\ndashed: mean share = 0.5{note}", fontsize=10)
    return fig


# --------------------------------------------------------------------------- a whole folder


def default_point(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(gamma, alpha)`` from ``summary["params"]``, or ``None`` when absent."""
    params = summary.get("params")
    if not isinstance(params, Mapping) or "gamma" not in params or "alpha" not in params:
        return None
    return float(params["gamma"]), float(params["alpha"])


def reference_capability(cells: pd.DataFrame) -> float:
    """The paper's reference capability 1.0 when present, else the median level."""
    caps = np.unique(cells["capability"].to_numpy(dtype=float))
    if np.isclose(caps, 1.0).any():
        return 1.0
    return float(caps[len(caps) // 2])


def save_figure(fig: Figure, path: str | os.PathLike[str], dpi: int = 120) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return path


def paper_figures(data: Mapping[str, Any]) -> dict[str, Figure]:
    """The five figures from :func:`read_simulation_dir` output, keyed ``fig1`` … ``fig5``."""
    cap = reference_capability(data["cells"])
    return {
        "fig1": fig_variance_decomposition(data["table1"]),
        "fig2": fig_cells(data["cells"], capability=cap),
        "fig3": fig_main_effects(data["cells"], capability=cap),
        "fig4": fig_decomposition_by_capability(data["decomposition"]),
        "fig5": fig_sensitivity(data["sensitivity"], default=default_point(data["summary"])),
    }


def write_paper_figures(out_dir: str | os.PathLike[str], dpi: int = 120) -> list[Path]:
    """Read a ``reproduce`` folder and write ``fig1.png`` … ``fig5.png`` into it.

    All five figures are drawn before any file is written, and each file is written
    atomically, so a bad input leaves the folder unchanged.

    Parameters
    ----------
    out_dir : path
        Folder holding ``table1.csv``, ``decomposition.csv``, ``cells.csv``,
        ``sensitivity.csv`` and ``summary.json``.
    dpi : int, default 120
        Resolution of the PNGs.

    Returns
    -------
    list of pathlib.Path
        The five PNG paths, in figure order.
    """
    data = read_simulation_dir(out_dir)
    figs = paper_figures(data)
    return [save_figure(fig, Path(out_dir) / f"{name}.png", dpi=dpi)
            for name, fig in figs.items()]
