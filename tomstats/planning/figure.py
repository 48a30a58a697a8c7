"""The power figure: one curve per test with its Monte Carlo band (``power.png``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats.simulation.figures import require_columns

__all__ = ["POWER_COLUMNS", "fig_power"]


POWER_COLUMNS = ("kind", "along", "value", "test", "power", "ci_low", "ci_high")


_TEST_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf")


def fig_power(power: pd.DataFrame, target: float = 0.8) -> Figure:
    """Power curves: one line per test, the 95 % Monte Carlo interval as a band.

    ``power`` is ``power.csv`` of ``tomstats power``
    (:meth:`tomstats.planning.result.PowerResult.frame`).
    Plug-in power is drawn solid, assurance (when present) dashed; the target power is a
    dotted horizontal line. Sizes (questions, stories, LLMs) are drawn on a log axis. With a
    second dimension (columns ``by`` and ``by_value``) there is one panel per test and one
    line per value of ``by``.
    """
    df = require_columns(power, POWER_COLUMNS, "power")
    along = str(df["along"].iloc[0])
    tests = list(dict.fromkeys(df["test"]))
    styles = {"plug-in": "-", "assurance": "--"}
    if "by_value" in df.columns:
        by = str(df["by"].iloc[0]).replace("_", " ")
        ncol = min(3, len(tests))
        nrow = -(-len(tests) // ncol)
        fig = Figure(figsize=(4.2 * ncol + 0.6, 3.4 * nrow + 0.4), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrow, ncol, sharey=True, squeeze=False)).ravel()
        levels = sorted(df["by_value"].unique())
        for ax, test in zip(axes, tests, strict=False):
            for i, b in enumerate(levels):
                color = _TEST_COLORS[i % len(_TEST_COLORS)]
                sel = (df["test"] == test) & (df["by_value"] == b)
                for kind, sub in df[sel].groupby("kind", sort=False):
                    label = f"{by} = {b:g}" + ("" if kind == "plug-in" else f" ({kind})")
                    _power_line(ax, sub, styles.get(str(kind), ":"), color, label)
            _power_axes(ax, df, along, target)
            ax.set_title(test, fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
        for i, ax in enumerate(axes):
            ax.set_visible(i < len(tests))
            if i % ncol:
                ax.set_ylabel("")
        return fig
    fig = Figure(figsize=(7.0, 4.4), layout="constrained")
    ax = fig.subplots()
    for i, test in enumerate(tests):
        color = _TEST_COLORS[i % len(_TEST_COLORS)]
        for kind, sub in df[df["test"] == test].groupby("kind", sort=False):
            label = test if kind == "plug-in" else f"{test} ({kind})"
            _power_line(ax, sub, styles.get(str(kind), ":"), color, label)
    _power_axes(ax, df, along, target)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def _power_line(ax: Any, sub: pd.DataFrame, style: str, color: str, label: str) -> None:
    """One power curve with its Monte Carlo band."""
    sub = sub.sort_values("value")
    ax.plot(sub["value"], sub["power"], style, color=color, marker="o", ms=3.5, label=label)
    ax.fill_between(sub["value"], sub["ci_low"], sub["ci_high"], color=color, alpha=0.15, lw=0)


def _power_axes(ax: Any, df: pd.DataFrame, along: str, target: float) -> None:
    """Target line, log axis for sizes spanning a decade, labels and grid."""
    ax.axhline(target, color="black", ls=":", lw=1, label=f"target {target:.0%}")
    if along in ("questions_per_cell", "items_per_cell", "n_llms") and df["value"].min() > 0 \
            and df["value"].max() / df["value"].min() > 8:
        ax.set_xscale("log")
        values = np.unique(df["value"].to_numpy(dtype=float))
        if values.size <= 12:  # the values tried, written out, rather than powers of ten
            ax.set_xticks(values, [f"{v:g}" for v in values])
            ax.minorticks_off()
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(along.replace("_", " "))
    ax.set_ylabel("power (rejection rate)")
    ax.grid(alpha=0.3)
