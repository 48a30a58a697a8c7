"""Section 9: sampler plots — one labelled trace row and one labelled rank panel per
parameter element (not one unlabelled panel per vector), and the energy plot."""

from __future__ import annotations

import math

import arviz as az
import numpy as np
from matplotlib.figure import Figure

from tomstats.report._document import Image, Section, Text, figure_png
from tomstats.report.sections._context import FitContext, Param, quiet_arviz

__all__ = ["MAX_ROWS", "fig_energy", "fig_rank", "fig_trace", "section"]

TITLE = "Sampler plots"
MAX_ROWS = 24


def fig_trace(ctx: FitContext, params: list[Param]) -> Figure:
    """Per parameter: density of each chain (left) and its draws (right), titled with the
    parameter's readable name."""
    post = ctx.idata.posterior
    fig = Figure(figsize=(11, 1.7 * len(params) + 0.4), layout="constrained")
    axes = fig.subplots(len(params), 2, squeeze=False)
    for (left, right), p in zip(axes, params, strict=True):
        draws = p.draws(post)
        for c in range(draws.shape[0]):
            x = draws[c]
            if np.ptp(x) > 0:
                grid, pdf = az.kde(x)
                left.plot(grid, pdf, color=f"C{c}", lw=1)
            right.plot(x, color=f"C{c}", lw=0.5, alpha=0.8)
        left.set_title(p.label, fontsize=9, loc="left")
        right.set_title(f"{p.label} — draws per chain", fontsize=9, loc="left")
        left.set_yticks([])
        for ax in (left, right):
            ax.tick_params(labelsize=7)
    return fig


def fig_rank(ctx: FitContext, params: list[Param]) -> Figure:
    """Rank plots, one panel per parameter: the histogram of each chain's ranks among all
    draws, stacked; near-uniform bars in every chain mean good mixing."""
    post = ctx.idata.posterior
    n = len(params)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(11, 2.2 * rows + 0.3), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, p in zip(axes, params, strict=False):
        draws = p.draws(post)
        chains, m = draws.shape
        ranks = np.argsort(np.argsort(draws.ravel(), kind="stable"), kind="stable")
        ranks = ranks.reshape(chains, m)
        bins = np.linspace(0, chains * m, min(20, m) + 1)
        width = bins[1] - bins[0]
        uniform = m / (len(bins) - 1)
        for c in range(chains):
            h, _ = np.histogram(ranks[c], bins=bins)
            top = max(int(h.max()), 1)
            ax.bar(bins[:-1], h / top * 0.8, width=width, bottom=c, align="edge",
                   color=f"C{c}", edgecolor="white", lw=0.3)
            ax.axhline(c + 0.8 * uniform / top, color="k", ls=":", lw=0.6)
        ax.set_yticks(np.arange(chains) + 0.4, [str(c) for c in range(chains)], fontsize=7)
        ax.set_xticks([])
        ax.set_title(p.label, fontsize=9)
    axes[0].set_ylabel("chain")
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig


def fig_energy(idata: object) -> Figure:
    """Energy plot: marginal energy vs energy transition distributions (with E-BFMI)."""
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    with quiet_arviz():
        az.plot_energy(idata, ax=ax, show=False)
    return fig


def section(ctx: FitContext) -> Section:
    """Trace plots, rank plots and the energy plot (or why each is missing)."""
    params = ctx.params[:MAX_ROWS]
    blocks: list = []
    if params:
        blocks.append(Image(figure_png(fig_trace(ctx, params)), "trace",
                            "Trace plots, one row per parameter (left: density per chain; "
                            "right: draws per chain, one colour per chain)."))
        if int(ctx.idata.posterior.sizes["chain"]) > 1:
            blocks.append(Image(figure_png(fig_rank(ctx, params)), "rank",
                                "Rank plots, one panel per parameter: each chain's ranks "
                                "among all draws; near-uniform bars (dotted line: uniform) in "
                                "every chain mean good mixing."))
        else:
            blocks.append(Text("Rank plots need at least two chains.", "missing"))
        if len(ctx.params) > MAX_ROWS:
            blocks.append(Text(f"{len(ctx.params) - MAX_ROWS} more parameters not drawn "
                               "(the diagnostics cover them).", "note"))
    idata = ctx.idata
    if "sample_stats" in idata.groups() and "energy" in idata.sample_stats:
        blocks.append(Image(figure_png(fig_energy(idata)), "energy",
                            "Energy plot: the energy transition distribution should match "
                            "the marginal energy distribution (E-BFMI ≥ 0.3)."))
    else:
        blocks.append(Text("No energy plot: sample_stats has no 'energy'.", "missing"))
    return Section(TITLE, tuple(blocks))
