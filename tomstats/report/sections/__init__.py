"""The fit report as a list of sections: each a function ``section(ctx) -> Section`` of a
:class:`~tomstats.report.sections._context.FitContext`, in page order (:data:`SECTIONS`).

A new plot is one new function here, not another branch in :mod:`tomstats.report.fit`.

=====================  =====================================================================
module                 section
=====================  =====================================================================
``verdict``            sampler-diagnostics verdict and the page's interval convention
``parameters``         parameter table with readable names (``β fb``, ``SD of model
                       intercepts``)
``forest``             forest plot of the fixed effects (structural: α, γ, δ, σ, capabilities)
``random_effects``     group SDs, a caterpillar plot and a table per grouping factor
``predictions``        predicted accuracy by condition (marginal and typical group) with the
                       observed proportions; structural fits: context × ToM order cells
``checks``             calibration and design-cell checks that say where observed data fall
                       outside the predictive intervals; PSIS-LOO
``sweep``              structural fits: calibrated η² decomposition and dominance map
``priors``             prior over posterior for every parameter with a prior; prior table
``traces``             one labelled trace row and rank panel per parameter; energy plot
``provenance``         data, sampling and the fit's attributes (last)
=====================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Callable

from tomstats.report._document import Section
from tomstats.report.sections import (
    checks,
    forest,
    parameters,
    predictions,
    priors,
    provenance,
    random_effects,
    sweep,
    traces,
    verdict,
)
from tomstats.report.sections._context import (
    INTERVAL_PROB,
    MAX_ELEMENTS,
    FitContext,
    build_context,
    param_label,
    prior_key,
)

__all__ = ["INTERVAL_PROB", "MAX_ELEMENTS", "SECTIONS", "FitContext", "build_context",
           "param_label", "prior_key"]

#: The fit report's sections in page order: results first, provenance last.
SECTIONS: tuple[Callable[[FitContext], Section], ...] = (
    verdict.section,
    parameters.section,
    forest.section,
    random_effects.section,
    predictions.section,
    checks.ppc_section,
    checks.loo_section,
    sweep.section,
    priors.section,
    traces.section,
    provenance.section,
)
