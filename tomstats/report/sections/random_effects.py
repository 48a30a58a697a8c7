"""Section 4: random effects — one caterpillar plot and one table per grouping factor, with
the group SDs (per-LLM intercepts are often the most useful output of a fit)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from tomstats.report._document import Image, Section, Table, Text, figure_png
from tomstats.report.sections._context import FitContext, hdi, param_label, term_label

__all__ = ["GroupEffects", "fig_caterpillar", "group_effects", "label_positions",
           "level_table", "section"]

TITLE = "Random effects"
#: With more levels than this, only the top and bottom :data:`N_NAMED` are named.
MAX_NAMED = 30
N_NAMED = 5
#: With more levels than this, the table shows the top and bottom :data:`N_TABLE`.
MAX_TABLE = 40
N_TABLE = 10
#: Height of a caterpillar plot with many levels (inches), and the vertical room one named
#: level's label needs (inches, 8-point text with a little air).
MANY_HEIGHT = 7.5
LABEL_ROOM = 0.17
LOG_ODDS = "log-odds scale"


@dataclass(frozen=True)
class GroupEffects:
    """Per-level effects of one grouping factor (and effect)."""

    key: str  # file-name-safe identifier
    title: str  # "model intercepts"
    levels: tuple[str, ...]
    draws: np.ndarray  # (S, n_levels)
    sd: np.ndarray | None  # (S,) draws of the group SD
    sd_label: str
    centre: float  # reference line (0 for deviations, the population mean for capabilities)
    centre_label: str
    scale: str = LOG_ODDS  # what the x axis measures


def _levels_draws(da: xr.DataArray) -> tuple[tuple[str, ...], np.ndarray]:
    other = [d for d in da.dims if d not in ("chain", "draw")]
    dim = other[0]
    stacked = da.stack(_s=("chain", "draw")).transpose("_s", dim)
    levels = tuple(map(str, da[dim].values)) if dim in da.coords else tuple(
        str(i) for i in range(da.sizes[dim]))
    return levels, np.asarray(stacked.values, dtype=float)


def _flat(post: xr.Dataset, name: str) -> np.ndarray | None:
    if name not in post.data_vars:
        return None
    da = post[name]
    if [d for d in da.dims if d not in ("chain", "draw")]:
        return None
    return np.asarray(da.values, dtype=float).ravel()


def group_effects(ctx: FitContext) -> list[GroupEffects]:
    """Every grouping factor's per-level effects.

    Formula fits: ``re_<key>`` per effect (intercepts, slopes) with ``sd_<key>``.
    Structural fits: the capabilities per LLM (around ``capability_mu`` with
    ``capability_sd``), per-LLM γ and α when fitted, and the item effects (``sigma_item``).
    """
    post = ctx.idata.posterior
    out: list[GroupEffects] = []
    for name in post.data_vars:
        name = str(name)
        if not name.startswith("re_"):
            continue
        key = name[3:]
        da = post[name]
        other = [d for d in da.dims if d not in ("chain", "draw")]
        if len(other) != 2:
            continue
        eff_dim = other[1]
        effects = list(map(str, da[eff_dim].values)) if eff_dim in da.coords else ["0"]
        for j, eff in enumerate(effects):
            levels, draws = _levels_draws(da.isel({eff_dim: j}))
            sd = None
            if f"sd_{key}" in post.data_vars:
                sd = np.asarray(post[f"sd_{key}"].isel({post[f"sd_{key}"].dims[-1]: j}).values,
                                dtype=float).ravel()
            words = "intercepts" if eff in ("Intercept", "1") else f"slopes on {term_label(eff)}"
            out.append(GroupEffects(_safe(f"{key}_{eff}"), f"{key} {words}", levels, draws, sd,
                                    param_label(f"sd_{key}", [eff]), 0.0, "0 (population)"))
    for var, sd_name, title, centre_name, scale in (
            ("capability", "capability_sd", "capabilities per LLM", "capability_mu",
             "capability m, a multiple of the baseline log-odds β₀ = ln(0.85/0.15)"),
            ("gamma_llm", "sd_gamma_llm", "γ per LLM", "gamma", "log-odds per ToM order"),
            ("alpha_llm", None, "α per LLM", "alpha", "α of equation (1)"),
            ("item_effect", "sigma_item", "item effects", None, LOG_ODDS)):
        if var not in post.data_vars or len([d for d in post[var].dims
                                   if d not in ("chain", "draw")]) != 1:
            continue
        levels, draws = _levels_draws(post[var])
        centre = _flat(post, centre_name) if centre_name else None
        sd = _flat(post, sd_name) if sd_name else None
        if centre is not None:
            ref, ref_label = float(centre.mean()), param_label(centre_name)
        elif var == "capability":  # fixed-effect capabilities: the paper's reference LLM
            ref, ref_label = 1.0, "m = 1 (reference LLM)"
        else:
            ref, ref_label = 0.0, "0"
        out.append(GroupEffects(_safe(var), title, levels, draws, sd,
                                param_label(sd_name) if sd is not None
                                else "none (levels not pooled)", ref, ref_label,
                                scale))
    return out


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", s).strip("_")


def _summaries(g: GroupEffects, prob: float) -> pd.DataFrame:
    lo, hi = zip(*(hdi(g.draws[:, j], prob) for j in range(g.draws.shape[1])), strict=True)
    tab = pd.DataFrame({"level": g.levels, "mean": g.draws.mean(axis=0), "low": lo,
                        "high": hi})
    return tab.sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)


def label_positions(rows: list[int], step: float, n: int) -> list[float]:
    """Where to write the labels of the named ``rows`` (data units, sorted ascending) so that
    neighbours are at least ``step`` apart: the bottom half is pushed up from its lowest
    row, the top half down from its highest, each label as close to its row as it can be.
    """
    half = len(rows) // 2
    low, high = rows[:half], rows[half:]
    pos: list[float] = []
    for y in low:
        pos.append(max(float(y), pos[-1] + step) if pos else float(y))
    top: list[float] = []
    for y in reversed(high):
        top.append(min(float(y), top[-1] - step) if top else min(float(y), n - 1.0))
    return pos + top[::-1]


def fig_caterpillar(g: GroupEffects, prob: float) -> Figure:
    """Levels sorted by posterior mean with their HDIs; with more than :data:`MAX_NAMED`
    levels only the top and bottom :data:`N_NAMED` are named, their labels spread apart
    (at least :data:`LABEL_ROOM` inches) and joined to their rows by short leader lines."""
    tab = _summaries(g, prob).iloc[::-1].reset_index(drop=True)  # largest at the top
    n = len(tab)
    many = n > MAX_NAMED
    height = MANY_HEIGHT if many else min(0.24 * n + 1.4, 11.0)
    fig = Figure(figsize=(8.0, height), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(n)
    ax.hlines(y, tab["low"], tab["high"], color="C0", lw=1.8 if not many else 0.8)
    ax.plot(tab["mean"], y, "o", color="C0", ms=4 if not many else 2)
    ax.axvline(g.centre, color="grey", ls=":", lw=1, label=g.centre_label)
    if many:
        keep = list(range(N_NAMED)) + list(range(n - N_NAMED, n))
        # data units per inch of the axes (the title and x label take about 1.3 in)
        step = LABEL_ROOM * (n + 1) / (height - 1.3)
        pos = label_positions(keep, step, n)
        ax.set_yticks(pos, [str(tab["level"][i]) for i in keep], fontsize=8)
        ax.tick_params(axis="y", length=0, pad=16)
        blend = blended_transform_factory(ax.transAxes, ax.transData)
        for row, at in zip(keep, pos, strict=True):
            ax.plot([-0.03, -0.012, 0.0], [at, at, row], color="grey", lw=0.6,
                    transform=blend, clip_on=False)
        ax.set_ylabel(f"{n} levels, sorted (top and bottom {N_NAMED} named)")
    else:
        ax.set_yticks(y, list(map(str, tab["level"])), fontsize=8)
    ax.set_ylim(-1, n)
    title = g.title
    if g.sd is not None:
        lo, hi = hdi(g.sd, prob)
        title += f" — {g.sd_label} {g.sd.mean():.3g} [{lo:.3g}, {hi:.3g}]"
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(f"posterior mean and {100 * prob:g} % HDI ({g.scale})")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig


def level_table(g: GroupEffects, prob: float) -> tuple[pd.DataFrame, bool]:
    """Levels sorted by posterior mean (``rank, level, mean, HDI``); the top and bottom
    :data:`N_TABLE` only when there are more than :data:`MAX_TABLE` levels (flag true)."""
    tab = _summaries(g, prob)
    tab.insert(0, "rank", np.arange(1, len(tab) + 1))
    pct = f"{100 * prob:g} % HDI"
    tab = tab.rename(columns={"low": f"{pct} low", "high": f"{pct} high"})
    if len(tab) > MAX_TABLE:
        return pd.concat([tab.head(N_TABLE), tab.tail(N_TABLE)]), True
    return tab, False


def sd_table(groups: list[GroupEffects], prob: float) -> pd.DataFrame:
    """One row per grouping factor: number of levels and the group SD (mean, HDI)."""
    rows = []
    for g in groups:
        lo, hi = hdi(g.sd, prob) if g.sd is not None else (np.nan, np.nan)
        rows.append({"grouping factor": g.title, "levels": len(g.levels),
                     "SD parameter": g.sd_label or "—",
                     "SD mean": float(g.sd.mean()) if g.sd is not None else np.nan,
                     f"{100 * prob:g} % HDI low": lo, f"{100 * prob:g} % HDI high": hi})
    return pd.DataFrame(rows)


def section(ctx: FitContext) -> Section:
    """Group SDs, then per grouping factor a caterpillar plot and a table."""
    groups = group_effects(ctx)
    if not groups:
        return Section(TITLE, (Text("The model has no random effects or per-LLM parameters.",
                                    "note"),))
    blocks: list = [Table(sd_table(groups, ctx.prob), caption="Group SDs",
                          float_format="{:.3g}")]
    for g in groups:
        blocks.append(Image(figure_png(fig_caterpillar(g, ctx.prob)), f"caterpillar_{g.key}",
                            f"Caterpillar plot of the {g.title}: levels sorted by posterior "
                            f"mean, {100 * ctx.prob:g} % HDI."))
        tab, cut = level_table(g, ctx.prob)
        blocks.append(Table(tab, caption=f"Levels of the {g.title}"
                            + (f" (top and bottom {N_TABLE} of {len(g.levels)})" if cut
                               else ""), float_format="{:.3g}"))
    return Section(TITLE, tuple(blocks))
