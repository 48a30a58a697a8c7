"""Section 3: forest plot — posterior mean and HDI of the fixed effects (formula fits) or of
α, γ, δ, the σ's and the capabilities (structural fits), one row per parameter."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from tomstats.report._document import Image, Section, Text, figure_png
from tomstats.report.sections._context import FitContext, Param, hdi

__all__ = ["fig_forest", "forest_groups", "section"]

TITLE = "Forest plot"
_STRUCTURAL_GROUPS = (("α, γ, δ", ("alpha", "gamma", "delta", "alpha_llm", "gamma_llm")),
                      ("scales (σ, SD)", ("sigma_item", "capability_sd", "sd_gamma_llm")),
                      ("capabilities", ("capability", "capability_mu")))


def forest_groups(ctx: FitContext) -> list[tuple[str, list[Param]]]:
    """Rows of the forest plot, in titled groups.

    Formula fits: the fixed effects ``β`` (original scale) and the random-effect SDs.
    Structural fits: α, γ, δ (per LLM too when fitted), the scales, the capabilities.
    """
    by_var: dict[str, list[Param]] = {}
    for p in ctx.params:
        by_var.setdefault(p.var, []).append(p)
    if ctx.kind == "formula":
        groups = [("fixed effects β", by_var.get("beta", [])),
                  ("random-effect SDs", [p for v, ps in by_var.items() if v.startswith("sd_")
                                         for p in ps])]
    else:
        used: set[str] = set()
        groups = []
        for title, names in _STRUCTURAL_GROUPS:
            groups.append((title, [p for n in names for p in by_var.get(n, [])]))
            used.update(names)
        groups.append(("other", [p for v, ps in by_var.items() if v not in used
                                 and not v.startswith("corr_") for p in ps]))
    return [(t, ps) for t, ps in groups if ps]


def _split_by_scale(rows: list[tuple[Param, float, float, float]]
                    ) -> list[list[tuple[Param, float, float, float]]]:
    """Rows whose magnitudes differ by more than 30× go to separate panels (α per word and
    γ per order cannot share an axis)."""
    def mag(r: tuple[Param, float, float, float]) -> float:
        m = max(abs(r[2]), abs(r[3]))
        return math.log10(m) if m > 0 else -300.0

    out: list[list[tuple[Param, float, float, float]]] = []
    for r in sorted(rows, key=mag, reverse=True):
        if out and mag(out[-1][0]) - mag(r) < math.log10(30):
            out[-1].append(r)
        else:
            out.append([r])
    order = {id(r[0]): i for i, r in enumerate(rows)}
    return [sorted(panel, key=lambda r: order[id(r[0])]) for panel in out]


def _panel_title(title: str, part: list[tuple[Param, float, float, float]], i: int,
                 n_parts: int) -> str:
    """A group's title; when its rows are split by scale, each panel names its rows (up to
    three) instead of a bare "(1/2)"."""
    if n_parts == 1:
        return title
    labels = [r[0].label for r in part]
    if len(labels) <= 3:
        return f"{title}: {', '.join(labels)}"
    return f"{title} ({i + 1} of {n_parts}, by scale)"


def fig_forest(ctx: FitContext, groups: list[tuple[str, list[Param]]]) -> Figure:
    """One row per parameter: posterior mean (dot) and HDI (line); panels by group and scale."""
    post = ctx.idata.posterior
    panels: list[tuple[str, list[tuple[Param, float, float, float]]]] = []
    for title, params in groups:
        rows = []
        for p in params:
            d = p.draws(post).ravel()
            lo, hi = hdi(d, ctx.prob)
            rows.append((p, float(np.mean(d)), lo, hi))
        parts = _split_by_scale(rows)
        for i, part in enumerate(parts):
            panels.append((_panel_title(title, part, i, len(parts)), part))
    heights = [len(rows) + 1.2 for _, rows in panels]
    fig = Figure(figsize=(8.5, 0.32 * sum(heights) + 0.8), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (title, rows) in zip(axes, panels, strict=True):
        y = np.arange(len(rows))[::-1]
        means = np.array([r[1] for r in rows])
        lo = np.array([r[2] for r in rows])
        hi = np.array([r[3] for r in rows])
        ax.hlines(y, lo, hi, color="C0", lw=2)
        ax.plot(means, y, "o", color="C0", ms=5)
        if lo.min() <= 0 <= hi.max() or title.startswith(("fixed", "α")):
            ax.axvline(0, color="grey", ls=":", lw=1)
        ax.set_yticks(y, [r[0].label for r in rows], fontsize=9)
        ax.set_ylim(-0.8, len(rows) - 0.2)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
    axes[-1].set_xlabel(f"posterior mean (dot) and {100 * ctx.prob:g} % HDI (line)")
    return fig


def section(ctx: FitContext) -> Section:
    """The forest plot (or why there is none)."""
    groups = forest_groups(ctx)
    if not groups:
        return Section(TITLE, (Text("No fixed effects or structural parameters to draw.",
                                    "missing"),))
    what = ("fixed effects (original scale) and random-effect SDs" if ctx.kind == "formula"
            else "α, γ, δ, scales and capabilities")
    return Section(TITLE, (Image(figure_png(fig_forest(ctx, groups)), "forest",
                                 f"Forest plot of the {what}: posterior mean and "
                                 f"{100 * ctx.prob:g} % HDI; parameters on very different "
                                 "scales get their own panel."),))
