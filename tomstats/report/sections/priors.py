"""Section 8: priors — every reported parameter's posterior density with its prior drawn
over it, and a readable table of the priors (which parameter each applies to)."""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tomstats.report._document import Image, Section, Table, Text, figure_png
from tomstats.report.sections._context import FitContext, Param, prior_text

__all__ = ["MAX_PANELS", "densities_caption", "fig_prior_posterior", "prior_table",
           "section"]

TITLE = "Priors and posteriors"
MAX_PANELS = 32
PRIOR_STYLE = {"color": "C1", "linestyle": "--"}


def _kde_line(ax: object, x: np.ndarray, label: str, **style: object) -> None:
    x = x[np.isfinite(x)]
    if x.size < 2 or np.ptp(x) == 0:
        ax.axvline(float(x[0]) if x.size else 0.0, label=label, **style)
        return
    grid, pdf = az.kde(x)
    ax.plot(grid, pdf, label=label, **style)


def fig_prior_posterior(ctx: FitContext, params: list[Param]) -> Figure:
    """One panel per parameter, titled with its readable name: posterior density (solid)
    and, where the parameter has a prior, the prior (dashed) — from the ``prior`` group when
    it holds the variable, else the spec's prior (:meth:`FitContext.param_prior`)."""
    post = ctx.idata.posterior
    cols = min(4, len(params))
    rows = math.ceil(len(params) / cols)
    fig = Figure(figsize=(11, 2.4 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, p in zip(axes, params, strict=False):
        x = p.draws(post).ravel()
        lo, hi = np.quantile(x, [0.001, 0.999])
        span = hi - lo if hi > lo else max(abs(lo), 1e-12)
        _kde_line(ax, x, "posterior", color="C0", linestyle="-")
        prior_draws = ctx.prior_draws(p)
        if prior_draws is not None:
            pd_ = prior_draws[np.isfinite(prior_draws)]
            plo, phi = np.quantile(pd_, [0.005, 0.995])
            keep = pd_[(pd_ > min(plo, lo - span)) & (pd_ < max(phi, hi + span))]
            _kde_line(ax, keep, "prior", **PRIOR_STYLE)
        else:
            prior = ctx.param_prior(p)
            if prior is not None:
                grid = np.linspace(lo - span, hi + span, 200)
                dens = prior[1](grid)
                keep = (grid >= 0) | (dens > 0)  # a positive prior starts at 0
                ax.plot(grid[keep], dens[keep], label="prior", **PRIOR_STYLE)
        ax.set_title(p.label, fontsize=9)
        ax.set_yticks([])
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
    for ax in axes[len(params):]:
        ax.set_visible(False)
    with_prior = [ax for ax in axes[:len(params)] if len(ax.get_lines()) > 1]
    (with_prior or [axes[0]])[0].legend(fontsize=8, frameon=False)
    return fig


def prior_table(ctx: FitContext) -> pd.DataFrame:
    """The spec's priors that apply to this fit (:func:`tomstats.glmm.header.applicable_priors`):
    key, distribution in words and the reported parameters it applies to (by
    :func:`~tomstats.report.sections._context.prior_key`)."""
    applies: dict[str, list[str]] = {}
    for p in ctx.params:
        got = ctx.param_prior(p)
        if got is not None:
            applies.setdefault(got[0], []).append(p.label)
    from tomstats.glmm.header import applicable_priors

    # only the priors that apply to a parameter of this fit (the one rule of `tomstats fit`'s
    # header): the population sd of a non-hierarchical fit's capabilities is not listed
    useful = set(applicable_priors(ctx.idata))
    rows = []
    for key, d in sorted(ctx.priors.items()):
        if key not in useful:
            continue
        on = applies.get(key, [])
        if not on:
            if key.startswith("lkj_"):
                on = [f"correlations of the {key[4:]} effects"]
            elif key.endswith("_scaled") and key[:-7] in ctx.idata.posterior.data_vars:
                base = key[:-7]
                scale = ctx.spec.get(f"{base}_scale")
                on = [f"{base} / {scale:g}" if isinstance(scale, (int, float)) else base]
            else:
                on = ["— (not a reported parameter of this fit)"]
        rows.append({"prior on": key, "distribution": prior_text(d),
                     "applies to": ", ".join(on)})
    return pd.DataFrame(rows)


def densities_caption(ctx: FitContext, params: list[Param], with_prior: list[Param],
                      has_group: bool) -> str:
    """Caption of the densities figure: how many panels carry a prior, where it comes from,
    and which panels have none (named, since they are derived quantities)."""
    text = (f"Posterior densities (solid) with the prior (dashed) on the {len(with_prior)} of "
            f"{len(params)} panels whose parameter has a prior of its own"
            + (" (from the fit's 'prior' group)." if has_group
               else " (from the priors recorded in the fit's spec)."))
    without = [p.label for p in params if p not in with_prior]
    if not without:
        return text
    centred_icpt = [p for p in params if p.var == "beta" and p.coords[:1] == ("Intercept",)]
    if ctx.kind == "formula" and ctx.centred and centred_icpt and without == [
            centred_icpt[0].label]:
        return text + (f" {without[0]} has none: the intercept prior is on the intercept at "
                       "the predictors' means, β Intercept (centred predictors).")
    return text + f" No prior of its own (derived quantities): {', '.join(without)}."


def section(ctx: FitContext) -> Section:
    """Prior-vs-posterior densities and the prior table."""
    params = ctx.params[:MAX_PANELS]
    blocks: list = []
    if not params:
        return Section(TITLE, (Text("No parameter small enough to draw.", "missing"),))
    has_group = "prior" in ctx.idata.groups()
    with_prior = [p for p in params if (ctx.prior_draws(p) is not None if has_group
                                        else ctx.param_prior(p) is not None)]
    if not has_group and not ctx.priors:
        blocks.append(Text("No 'prior' group and no priors in the fit's spec: posterior "
                           "densities are drawn without the prior.", "missing"))
    blocks.append(Image(figure_png(fig_prior_posterior(ctx, params)), "densities",
                        densities_caption(ctx, params, with_prior, has_group)))
    if len(ctx.params) > MAX_PANELS:
        blocks.append(Text(f"{len(ctx.params) - MAX_PANELS} more parameters not drawn.",
                           "note"))
    if ctx.priors:
        blocks.append(Table(prior_table(ctx), caption="Priors"))
    return Section(TITLE, tuple(blocks))
