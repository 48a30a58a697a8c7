"""Section 2: the parameter table, with readable names (``β fb``, ``SD of model
intercepts``) beside the names in the fit (``beta[fb]``, ``sd_model[Intercept]``)."""

from __future__ import annotations

import warnings

import arviz as az
import pandas as pd

from tomstats.glmm.diagnostics import arviz_log_quiet
from tomstats.report._document import Section, Table, Text
from tomstats.report.sections._context import MAX_ELEMENTS, FitContext, _internal, quiet_arviz

__all__ = ["parameter_table", "section"]

TITLE = "Parameters"


def parameter_table(ctx: FitContext) -> pd.DataFrame:
    """Posterior mean, sd, HDI, MCSE, ESS and R-hat of every reported element.

    Columns: ``parameter`` (readable), ``name in fit``, ``mean``, ``sd``, ``hdi low``,
    ``hdi high``, ``mcse mean``, ``ess bulk``, ``ess tail``, ``r hat`` (ArviZ's
    :func:`arviz.summary` with ``hdi_prob=ctx.prob``).
    """
    if not ctx.params:
        return pd.DataFrame()
    with quiet_arviz(), warnings.catch_warnings(), arviz_log_quiet():
        warnings.simplefilter("ignore", RuntimeWarning)  # R-hat of a constant element
        summ = az.summary(ctx.idata, var_names=ctx.var_names, hdi_prob=ctx.prob,
                          round_to="none")
    lo_col, hi_col = [c for c in summ.columns if str(c).startswith("hdi_")][:2]
    pct = f"{100 * ctx.prob:g}"
    one_chain = int(ctx.idata.posterior.sizes["chain"]) == 1
    rows = []
    for p in ctx.params:
        key = p.var + (f"[{', '.join(p.coords)}]" if p.coords else "")
        if key not in summ.index:
            continue
        r = summ.loc[key]
        rows.append({"parameter": p.label, "name in fit": p.key, "mean": r["mean"],
                     "sd": r["sd"], f"{pct} % HDI low": r[lo_col], f"{pct} % HDI high": r[hi_col],
                     "MCSE": r["mcse_mean"], "ESS bulk": r["ess_bulk"],
                     "ESS tail": r["ess_tail"],
                     # R-hat compares chains: not defined for one (as the docs say), not lost
                     "R-hat": "n/a" if one_chain else r["r_hat"]})
    return pd.DataFrame(rows)


def _left_out_text(ctx: FitContext) -> str | None:
    big = [f"{v} ({n} elements)" for v, n in ctx.left_out.items()
           if not _internal(v) and n > MAX_ELEMENTS]
    internal = [v for v in ctx.left_out if _internal(v)]
    parts = []
    if big:
        parts.append(f"Not tabulated here (more than {MAX_ELEMENTS} elements each; see the "
                     "random-effects section, and the diagnostics cover them): "
                     + ", ".join(big) + ".")
    if internal:
        parts.append("Sampler internals of the non-centred parametrisation, covered by the "
                     "diagnostics only: " + ", ".join(internal) + ".")
    if ctx.centred:
        parts.append("β (centred predictors), beta_c in the fit, is the same model with the "
                     "predictors centred at their means: its slopes equal β's, its intercept "
                     "is the log-odds at the predictors' means (the one the intercept prior "
                     "is on).")
    return " ".join(parts) or None


def section(ctx: FitContext) -> Section:
    """The parameter table and a note on what it leaves out (and why)."""
    blocks: list = []
    tab = parameter_table(ctx)
    if len(tab):
        blocks.append(Table(tab, caption=f"Posterior summary ({100 * ctx.prob:g} % HDI)",
                            float_format="{:.4g}"))
    else:
        blocks.append(Text("The posterior has no parameter small enough to tabulate.",
                           "missing"))
    note = _left_out_text(ctx)
    if note:
        blocks.append(Text(note, "note"))
    return Section(TITLE, tuple(blocks))
