"""Section: for structural fits, the calibrated η² decomposition and 7 × 7 ToM-dominance map
with posterior intervals (:mod:`tomstats.report.posterior_sweep`); formula fits get a note."""

from __future__ import annotations

from tomstats.report._document import Section
from tomstats.report.posterior_sweep import fit_sweep_blocks
from tomstats.report.sections._context import FitContext

__all__ = ["TITLE", "section"]

TITLE = "Calibrated η² decomposition and ToM-dominance map"


def section(ctx: FitContext) -> Section:
    """The calibrated sweep's blocks (``ctx.sweep_draws`` posterior draws; 0 leaves it out)."""
    return Section(TITLE, tuple(fit_sweep_blocks(ctx.idata, draws=ctx.sweep_draws,
                                                 name=ctx.name)))
