"""Reports: one self-contained HTML file (or Markdown + PNGs) per fit or simulation folder.

- :func:`write_fit_report` — a GLMM fit (ArviZ InferenceData netCDF): diagnostics verdict,
  provenance, summary table, trace/rank/energy plots, prior vs posterior, binary posterior
  predictive checks, PSIS-LOO with Pareto k and, for structural fits, the calibrated η²
  decomposition and 7 × 7 dominance map with posterior intervals
  (:mod:`tomstats.report.posterior_sweep`);
- :func:`write_simulation_report` — a ``tomstats reproduce``/``simulate`` folder: Table 1
  beside the paper's, the five figures, parameters and seed; or a calibrated sweep's folder
  (``simulate --posterior``): η² per LLM and the dominance map with posterior intervals.

The command line is ``tomstats report FIT.nc --out report.html`` and
``tomstats report --simulation DIR --out report.html`` (``--format md`` for Markdown).
"""

from __future__ import annotations

from tomstats.report.fit import diagnostics_verdict, fit_document, load_fit, write_fit_report
from tomstats.report.simulation import (
    posterior_sweep_document,
    simulation_document,
    write_simulation_report,
)

__all__ = [
    "diagnostics_verdict",
    "fit_document",
    "load_fit",
    "posterior_sweep_document",
    "simulation_document",
    "write_fit_report",
    "write_simulation_report",
]
