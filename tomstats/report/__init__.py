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

Nothing is imported until it is first used (:pep:`562`), so ``tomstats report --help`` and
the report of a log or a Laplace fit come without what the others need (ArviZ, JAX).
"""


from __future__ import annotations

from tomstats._lazy import lazy_face

__getattr__, __dir__, __all__ = lazy_face(__name__, {
    "diagnostics_verdict": "tomstats.report.fit",
    "fit_document": "tomstats.report.fit",
    "load_fit": "tomstats.report.fit",
    "posterior_sweep_document": "tomstats.report.simulation",
    "simulation_document": "tomstats.report.simulation",
    "write_fit_report": "tomstats.report.fit",
    "write_simulation_report": "tomstats.report.simulation",
})
