r"""The posterior (calibrated) sweep in a report: η² per LLM and the γ × α dominance map.

A structural fit's posterior (equation (1) as a GLMM) is turned into draws of the
simulator's parameters and the paper's study is run once per draw
(:func:`tomstats.simulation.posterior_sweep.posterior_study`). Two places show the result:

- the fit report (``tomstats report FIT.nc``) runs a small sweep itself —
  :data:`SWEEP_DRAWS` posterior draws (thinned evenly), :data:`SWEEP_REPLICATES` simulated
  studies of the paper's 5 × 3 design per draw and LLM, :data:`SWEEP_SENSITIVITY_REPLICATES`
  per draw and cell of the paper's 7 × 7 γ × α grid — so that it renders in seconds;
- the simulation report (``tomstats report --simulation DIR``) of a
  ``tomstats simulate CONFIG --posterior FIT.nc --out DIR`` folder reads the full sweep's
  ``decomposition_posterior.csv``, ``dominance_posterior.csv`` and ``summary.json``.

Both show the same blocks (:func:`calibrated_blocks`): η² of ToM order, context length and
their interaction per LLM with the 95 % posterior interval
:math:`[q_{2.5\%}, q_{97.5\%}]` over draws of the per-draw Monte Carlo mean
:math:`\bar\eta^2_s = \frac1R\sum_r \eta^2_{sr}` and the posterior predictive interval of one
new study; per LLM the posterior probability that ToM order carries more than half of the
systematic variance; and the 7 × 7 map of the posterior mean ToM share with
:math:`P(\text{share} > 0.5)` in every cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tomstats.report._document import Image, Table, Text, figure_png
from tomstats.simulation.files import POSTERIOR_FILES

# tomstats.simulation.figures (JAX, matplotlib) is imported where a figure or its labels are
# needed, so that `tomstats report --help`, which reads SWEEP_DRAWS here, stays light.

__all__ = [
    "POSTERIOR_FILES",
    "SWEEP_DRAWS",
    "SWEEP_REPLICATES",
    "SWEEP_SENSITIVITY_REPLICATES",
    "calibrated_blocks",
    "calibrated_sweep",
    "eta2_table",
    "fit_sweep_blocks",
    "llm_table",
]

#: Posterior draws of the sweep a fit report runs (thinned evenly from all chains).
SWEEP_DRAWS = 50
#: Simulated studies of the paper's 5 × 3 design per posterior draw and LLM in a fit report.
SWEEP_REPLICATES = 20
#: Simulated studies per posterior draw and γ × α grid cell in a fit report.
SWEEP_SENSITIVITY_REPLICATES = 20

_SOURCES = ("tom_order", "context_length", "interaction")


def _check_positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


def calibrated_sweep(
    idata: Any,
    *,
    draws: int = SWEEP_DRAWS,
    replicates: int = SWEEP_REPLICATES,
    sensitivity_replicates: int = SWEEP_SENSITIVITY_REPLICATES,
    name: str = "fit",
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Run the paper's study (5 × 3 design, 7 × 7 grid) once per posterior draw of a fit.

    The paper's configuration (:class:`tomstats.simulation.study.StudyConfig` defaults: 500
    questions a cell, seed 0, exact path, capability 1 on the grid) with the parameters
    replaced by ``draws`` evenly thinned posterior draws
    (:func:`tomstats.simulation.posterior_sweep.posterior_draws`), then
    :func:`tomstats.simulation.posterior_sweep.posterior_study`.

    Parameters
    ----------
    idata : arviz.InferenceData
        A structural fit from :func:`tomstats.glmm.fit`.
    draws, replicates, sensitivity_replicates : int
        Posterior draws; simulated studies per draw (and LLM); per draw and grid cell.
    name : str
        Names the fit in error messages.

    Returns
    -------
    decomposition, dominance : pandas.DataFrame
        The tables of ``decomposition_posterior.csv`` and ``dominance_posterior.csv``.
    summary : dict
        What ``summary.json`` holds.

    Raises
    ------
    ValueError
        ``idata`` is not a tomstats fit, is a formula model, or a budget is not a positive
        integer.
    """
    from tomstats.simulation.posterior_sweep import posterior_draws, posterior_study
    from tomstats.simulation.study import StudyConfig

    draws = _check_positive("draws", draws)
    replicates = _check_positive("replicates", replicates)
    sensitivity_replicates = _check_positive("sensitivity_replicates", sensitivity_replicates)
    pdraws = posterior_draws(idata, draws, name=name)
    return posterior_study(StudyConfig(), pdraws, replicates=replicates,
                           sensitivity_replicates=sensitivity_replicates, progress=False)


def _factor_labels() -> Mapping[str, str]:
    from tomstats.simulation.figures import FACTOR_LABELS

    return FACTOR_LABELS


def eta2_table(decomposition: pd.DataFrame) -> pd.DataFrame:
    """One row per LLM and systematic source: η², its 95 % posterior and predictive
    intervals, and the source's percentage of the systematic (between-cell) variance."""
    d = decomposition[decomposition["source"].isin(_SOURCES)].copy()
    d["order"] = d["source"].map({s: i for i, s in enumerate(_SOURCES)})
    d["llm"] = d["llm"].astype(str)
    d["llm_order"] = d["llm"].map({v: i for i, v in enumerate(pd.unique(d["llm"]))})
    d = d.sort_values(["llm_order", "order"], kind="stable")
    out = pd.DataFrame({
        "LLM": d["llm"],
        "source": d["source"].map(_factor_labels()),
        "η² (mean)": d["eta2_mean"],
        "95 % low": d["eta2_low"],
        "95 % high": d["eta2_high"],
        "predictive 2.5 %": d["eta2_pred_low"] if "eta2_pred_low" in d else math.nan,
        "predictive 97.5 %": d["eta2_pred_high"] if "eta2_pred_high" in d else math.nan,
    })
    if {"share_mean", "share_low", "share_high"} <= set(d.columns):
        out["% of systematic"] = 100 * d["share_mean"]
        out["% low"] = 100 * d["share_low"]
        out["% high"] = 100 * d["share_high"]
    return out.reset_index(drop=True)


def llm_table(summary: Mapping[str, Any]) -> pd.DataFrame:
    """Per LLM: posterior mean capability, ToM order's percentage of the systematic variance
    with its 95 % interval, and the posterior probability that ToM order dominates (share
    > 0.5)."""
    rows = []
    for llm, d in dict(summary.get("per_llm", {})).items():
        share = d.get("tom_share", {})
        rows.append({
            "LLM": str(llm),
            "capability m": float(d.get("capability", {}).get("mean", math.nan)),
            "ToM % of systematic": 100 * float(share.get("mean", math.nan)),
            "% low": 100 * float(share.get("low", math.nan)),
            "% high": 100 * float(share.get("high", math.nan)),
            "P(ToM dominant)": float(d.get("p_tom_dominant", math.nan)),
        })
    return pd.DataFrame(rows)


def _fitted_point(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    params = summary.get("params")
    try:
        return float(params["gamma"]["mean"]), float(params["alpha"]["mean"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def calibrated_blocks(decomposition: pd.DataFrame, dominance: pd.DataFrame,
                      summary: Mapping[str, Any], intro: str,
                      fitted: tuple[float, float] | None = None) -> list[Any]:
    """Report blocks of a calibrated sweep: intro, η² table and figure, per-LLM dominance,
    the dominance map and the count of ToM-dominant cells.

    ``fitted`` is the (γ, α) marked on the map; by default the means over the sweep's draws
    (``summary["params"]``). A fit report passes the means over all draws, the ones its
    parameter table shows, so that a page states one posterior mean per parameter.
    """
    from tomstats.simulation.figures import fig_dominance_posterior, fig_eta2_posterior

    blocks: list[Any] = [Text(intro, "note")]
    blocks.append(Table(eta2_table(decomposition),
                        caption="η² per LLM with 95 % posterior intervals (over draws of the "
                                "per-draw Monte Carlo mean) and posterior predictive intervals "
                                "(one new study of this design)", float_format="{:.3g}"))
    blocks.append(Image(figure_png(fig_eta2_posterior(decomposition)), "calibrated_eta2",
                        "η² of ToM order, context length and their interaction per LLM: "
                        "posterior mean (dot) and 95 % posterior interval (bar)."))
    per_llm = llm_table(summary)
    if not per_llm.empty:
        blocks.append(Table(per_llm, caption="Per LLM: ToM order's share of the systematic "
                                             "variance and the posterior probability that it "
                                             "exceeds one half", float_format="{:.3g}"))
    dom = dict(summary.get("dominance", {}))
    cap = dom.get("capability")
    point = _fitted_point(summary) if fitted is None else fitted
    blocks.append(Image(figure_png(fig_dominance_posterior(dominance, point)),
                        "calibrated_dominance",
                        "γ × α dominance map under the posterior: colour and upper number = "
                        "posterior mean ToM share of systematic variance, P = posterior "
                        "probability that the share exceeds 0.5"
                        + (f" (capability m = {float(cap):g})" if cap is not None else "")
                        + ". The grid sweeps γ and α; only δ and σ carry posterior uncertainty "
                          "into it."))
    nd = dom.get("n_dominant")
    if isinstance(nd, Mapping):
        blocks.append(Text(
            f"ToM-dominant grid cells: posterior mean {float(nd['mean']):.1f} of "
            f"{int(dom.get('n_cells', len(dominance)))} (95 % posterior interval "
            f"{float(nd['low']):.0f}–{float(nd['high']):.0f}); the paper reports "
            f"{int(dom.get('paper_n_dominant', 39))} of 49 at its fixed parameters.", "p"))
    return blocks


def _budget(summary: Mapping[str, Any]) -> str:
    return (f"{summary.get('draws_used', '?')} of {summary.get('draws_available', '?')} "
            f"posterior draws (thinned evenly), {summary.get('replicates_per_draw', '?')} "
            f"simulated studies per draw and LLM, "
            f"{summary.get('sensitivity_replicates_per_draw', '?')} per draw and grid cell")


def _skip_reason(idata: Any) -> str | None:
    """Why a fit has no calibrated sweep (a formula model), or ``None``."""
    attrs = dict(getattr(getattr(idata, "posterior", None), "attrs", {}) or {})
    kind = attrs.get("model_kind")
    if kind is None and "spec" in attrs:
        try:
            kind = json.loads(str(attrs["spec"])).get("kind")
        except (TypeError, ValueError, AttributeError):
            kind = None
    if kind == "formula":
        return (f"Skipped: this is the formula model {str(attrs.get('model', '?'))!r}, whose "
                "coefficients are not equation (1)'s parameters. The calibrated η² "
                "decomposition and dominance map need a structural fit "
                "(tomstats fit LOG --model structural).")
    return None


def fit_sweep_blocks(
    idata: Any,
    *,
    draws: int = SWEEP_DRAWS,
    replicates: int = SWEEP_REPLICATES,
    sensitivity_replicates: int = SWEEP_SENSITIVITY_REPLICATES,
    name: str = "fit",
) -> list[Any]:
    """The fit report's section for a structural fit, or a block saying why it is absent.

    ``draws=0`` leaves the sweep out (stated in the report). A formula fit gets a note; a
    fit the sweep cannot use (not written by :func:`tomstats.glmm.fit`, non-finite draws)
    gets the reason as a *missing* block.
    """
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 0:
        raise ValueError(f"sweep draws must be a non-negative integer, got {draws!r}")
    reason = _skip_reason(idata)
    if reason is not None:
        return [Text(reason, "note")]
    if draws == 0:
        return [Text("Calibrated sweep left out (--sweep-draws 0).", "note")]
    try:
        decomp, dom, summary = calibrated_sweep(
            idata, draws=draws, replicates=replicates,
            sensitivity_replicates=sensitivity_replicates, name=name)
    except ValueError as exc:
        return [Text(f"No calibrated sweep: {exc}", "missing")]
    secs = sum(float(v) for v in dict(summary.get("seconds", {})).values())
    intro = ("The paper's study — 5 context lengths × 3 ToM orders × 500 questions, analysed "
             "by the two-way ANOVA, and the 7 × 7 γ × α sensitivity grid — simulated once per "
             f"posterior draw of this fit: {_budget(summary)} ({secs:.0f} s). A small budget "
             "keeps the report quick; for the full study run: tomstats simulate "
             f"simulations/paper.toml --posterior {name} --draws 200 --out DIR, then "
             "tomstats report --simulation DIR.")
    post = idata.posterior  # the page's parameter table: means over every draw
    fitted = ((float(post["gamma"].mean()), float(post["alpha"].mean()))
              if "gamma" in post and "alpha" in post else None)
    return calibrated_blocks(decomp, dom, summary, intro, fitted)
