"""Sections 6 and 7: posterior predictive checks for binary outcomes (calibration, accuracy
by design cell or condition) that say in words where the observed data fall outside the
predictive intervals, and PSIS-LOO with the Pareto-k table."""

from __future__ import annotations

import math
import warnings

import arviz as az
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats.analysis.intervals import wilson_interval
from tomstats.report._document import Image, Section, Table, Text, figure_png
from tomstats.report.sections._cells import (
    cell_columns,
    cell_intervals,
    cell_plot_table,
    fig_cell_accuracy,
)
from tomstats.report.sections._context import FitContext
from tomstats.report.sections._ppc import PPCData, group_intervals, misfit_sentence, ppc_data

__all__ = ["calibration_intervals", "calibration_table", "fig_calibration_check", "loo_section",
           "loo_tables", "ppc_section"]

PPC_TITLE = "Posterior predictive checks"
LOO_TITLE = "Leave-one-out cross-validation (PSIS-LOO)"
N_BINS = 10


def calibration_table(y: np.ndarray, p_hat: np.ndarray, bins: int = 10) -> pd.DataFrame:
    """Observed frequency of ``y = 1`` in equal-width bins of predicted probability.

    Returns one row per non-empty bin: ``bin_low, bin_high, n, predicted`` (mean ``p_hat``),
    ``observed`` (mean ``y``) and a 95 % Wilson interval ``observed_low, observed_high``
    (:func:`tomstats.analysis.intervals.wilson_interval`).
    """
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p_hat, edges[1:-1]), 0, bins - 1)
    rows = []
    for b in range(bins):
        m = idx == b
        n = int(m.sum())
        if n == 0:
            continue
        k = float(y[m].sum())
        lo, hi = wilson_interval(k, n, 0.95)
        rows.append({"bin_low": edges[b], "bin_high": edges[b + 1], "n": n,
                     "predicted": float(p_hat[m].mean()), "observed": k / n,
                     "observed_low": float(lo), "observed_high": float(hi)})
    return pd.DataFrame(rows)


def loo_tables(idata: az.InferenceData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """PSIS-LOO estimate and the Pareto-k diagnostic table.

    Returns ``(estimate, pareto_k)``: ``elpd_loo, se, p_loo`` and the count and share of
    observations with :math:`\\hat k` in (−∞, 0.5], (0.5, good_k], (good_k, 1], (1, ∞), where
    ``good_k = min(1 − 1/log10(S), 0.7)`` for ``S`` posterior draws (Vehtari et al. 2024).
    """
    ll = idata.log_likelihood
    var_name = str(next(iter(ll.data_vars))) if len(ll.data_vars) > 1 else None
    with warnings.catch_warnings():  # high Pareto k is reported in the table, not warned
        warnings.filterwarnings("ignore", message=".*shape parameter of Pareto",
                                category=UserWarning)
        loo = az.loo(idata, pointwise=True, var_name=var_name)
    est = pd.DataFrame({"quantity": ["elpd_loo", "se", "p_loo"],
                        "value": [float(loo["elpd_loo"]), float(loo["se"]),
                                  float(loo["p_loo"])]})
    k = np.asarray(loo.pareto_k).ravel()
    n_samples = int(loo["n_samples"])
    good_k = float(loo["good_k"]) if "good_k" in loo else min(
        1 - 1 / math.log10(n_samples), 0.7)
    edges = [(-np.inf, 0.5, "good"), (0.5, good_k, "ok"), (good_k, 1.0, "bad"),
             (1.0, np.inf, "very bad")]
    rows = []
    for lo, hi, label in edges:
        n = int(((k > lo) & (k <= hi)).sum())
        rng = (f"({lo:.2f}, {hi:.2f}]" if np.isfinite(lo) else f"(−∞, {hi:.2f}]") \
            if np.isfinite(hi) else f"({lo:.2f}, ∞)"
        rows.append({"Pareto k": rng, "label": label, "count": n, "share": n / k.size})
    return est, pd.DataFrame(rows)


# --------------------------------------------------------------------------- new checks


def calibration_intervals(d: PPCData, prob: float, bins: int = N_BINS
                          ) -> tuple[pd.DataFrame, list[str]]:
    """Calibration bins: rows binned on their posterior mean probability (equal width on
    [0, 1]), each bin's observed rate against its predicted rate and the HDI of its
    replicated rate (:func:`~tomstats.report.sections._ppc.group_intervals`)."""
    pm = (d.p if d.p is not None else d.rep / d.n).mean(axis=0)
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.searchsorted(edges, pm, side="right") - 1, 0, bins - 1)
    used = np.unique(which)
    codes = np.searchsorted(used, which)
    tab = group_intervals(d, codes, prob)
    tab.insert(0, "bin", [f"{edges[b]:.1f}–{edges[b + 1]:.1f}" for b in used])
    names = [f"bin {edges[b]:.1f}–{edges[b + 1]:.1f}" for b in used]
    return tab, names


def fig_calibration_check(tab: pd.DataFrame, prob: float) -> Figure:
    """Observed rate (Jeffreys interval) against the predicted rate per bin, with the HDI of
    the replicated rate as a grey band; bins outside it in red."""
    fig = Figure(figsize=(5.8, 5.2), layout="constrained")
    ax = fig.add_subplot()
    pct = f"{100 * prob:g} %"
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfect calibration")
    x = tab["predicted"].to_numpy()
    ax.vlines(x, tab["rep low"], tab["rep high"], color="0.6", lw=7, alpha=0.6,
              label=f"predictive {pct} HDI")
    out = tab["outside"].to_numpy() != 0
    err = np.clip(np.vstack([tab["observed"] - tab["obs low"],
                             tab["obs high"] - tab["observed"]]), 0, None)
    for mask, color, label in ((~out, "C0", f"observed ({pct} interval)"),
                               (out, "C3", "observed, outside the predictive HDI")):
        if mask.any():
            ax.errorbar(x[mask], tab["observed"].to_numpy()[mask], yerr=err[:, mask], fmt="o",
                        color=color, capsize=3, label=label)
    for i, (_, r) in enumerate(tab.iterrows()):  # alternate below/above: neighbours apart
        ax.annotate(f"n={int(r['n'])}", (r["predicted"], r["observed"]),
                    xytext=(10, -11 if i % 2 == 0 else 5), textcoords="offset points",
                    fontsize=7, color="#555")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("Predicted probability (posterior mean, binned)")
    ax.set_ylabel("Observed rate correct")
    ax.set_title("Calibration")
    ax.legend(frameon=False, loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _ppc_tables(ctx: FitContext) -> tuple[PPCData, pd.DataFrame, list[str], pd.DataFrame,
                                          list[str], list[str]] | str:
    d = ppc_data(ctx)
    if isinstance(d, str):
        return d

    def make() -> tuple:
        cal, cal_names = calibration_intervals(d, ctx.prob)
        cols = cell_columns(ctx, d.design)
        cells, cell_names = cell_intervals(d, cols, ctx.prob)
        return d, cal, cal_names, cells, cell_names, cols

    return ctx.cached("ppc_tables", make)


def _shown(tab: pd.DataFrame, prob: float) -> pd.DataFrame:
    pct = f"{100 * prob:g} %"
    return tab.rename(columns={"obs low": "observed low", "obs high": "observed high",
                               "pred low": f"expected {pct} low",
                               "pred high": f"expected {pct} high",
                               "rep low": f"predictive {pct} low",
                               "rep high": f"predictive {pct} high",
                               "outside": "outside by"})


def ppc_section(ctx: FitContext) -> Section:
    """Calibration plot and sentence, accuracy-by-cell sentence and table (and, for formula
    fits on the paper's design, the cell plot; structural fits draw it under predictions)."""
    got = _ppc_tables(ctx)
    if isinstance(got, str):
        return Section(PPC_TITLE, (Text(got, "missing"),))
    d, cal, cal_names, cells, cell_names, cols = got
    pct = f"{100 * ctx.prob:g} %"
    blocks: list = [Image(figure_png(fig_calibration_check(cal, ctx.prob)), "calibration",
                          f"Calibration: observed rate correct ({pct} Jeffreys interval) in "
                          "bins of the posterior mean probability, against the bin's "
                          f"predicted rate and the {pct} HDI of its replicated rate (grey).")]
    s = misfit_sentence(cal, cal_names, "calibration bins", ctx.prob)
    blocks.append(Text(s, "warning") if s else Text(
        f"Every calibration bin's observed rate lies inside its {pct} posterior predictive "
        f"interval ({len(cal)} bins).", "note"))
    if cols:
        plot_tab = cell_plot_table(cells)
        if plot_tab is not None and ctx.kind == "formula":
            blocks.append(Image(figure_png(fig_cell_accuracy(plot_tab)), "cells",
                                "Accuracy by design cell: expected accuracy (line) and its "
                                f"{pct} HDI (band), observed accuracy (dots)."))
        s = misfit_sentence(cells, cell_names, f"design cells ({' × '.join(cols)})", ctx.prob)
        blocks.append(Text(s, "warning") if s else Text(
            f"Every design cell's observed accuracy ({' × '.join(cols)}) lies inside its "
            f"{pct} posterior predictive interval ({len(cells)} cells).", "note"))
        blocks.append(Table(_shown(cells, ctx.prob), caption="Accuracy by design cell",
                            float_format="{:.3f}"))
    else:
        blocks.append(Text("The fit's data have no design columns (context_words, tom_order, "
                           "or discrete predictors): accuracy by design cell not checked.",
                           "missing"))
    blocks.append(Table(_shown(cal, ctx.prob), caption="Calibration bins",
                        float_format="{:.3f}"))
    blocks.append(Text(f"Draws: {d.source}. The predictive interval of a bin or cell is "
                       "the HDI of its replicated rate (posterior uncertainty and binomial "
                       "noise).", "note"))
    return Section(PPC_TITLE, tuple(blocks))


def loo_section(ctx: FitContext) -> Section:
    """PSIS-LOO estimate and Pareto-k table (or why not)."""
    idata = ctx.idata
    if "log_likelihood" not in idata.groups() or not idata.log_likelihood.data_vars:
        return Section(LOO_TITLE, (Text(
            "No 'log_likelihood' group: LOO and the Pareto-k table need pointwise "
            "log-likelihoods (refit with log-likelihood storage).", "missing"),))
    est, ktab = loo_tables(idata)
    bad = int(ktab.loc[ktab.label.isin(["bad", "very bad"]), "count"].sum())
    return Section(LOO_TITLE, (
        Table(est, caption="PSIS-LOO estimate"),
        Table(ktab, caption="Pareto k diagnostic", float_format="{:.3f}"),
        Text(f"{bad} observation(s) with Pareto k above the reliability threshold."
             if bad else "All Pareto k values are below the reliability threshold.", "note")))
