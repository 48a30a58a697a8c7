"""Report on a fitted GLMM: an ArviZ InferenceData saved as netCDF by ``tomstats fit``.

The page is the list of sections in :data:`tomstats.report.sections.SECTIONS`, each a small
function of the fit (:mod:`tomstats.report.sections`), in this order: the diagnostics
verdict (and the page's interval convention, a 94 % HDI), the parameter table with readable
names, the forest plot, random effects (caterpillar plots, tables, group SDs), predicted
accuracy by condition, posterior predictive checks that say where the data fall outside the
predictive intervals, PSIS-LOO, the calibrated sweep of a structural fit, priors over
posteriors with the prior table, trace/rank/energy plots, and provenance last.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import arviz as az

from tomstats.report._document import Document, Section, check_output, write_document
from tomstats.report.posterior_sweep import SWEEP_DRAWS
from tomstats.report.sections import SECTIONS, FitContext, checks, sweep
from tomstats.report.sections._cells import cell_accuracy_table, fig_cell_accuracy
from tomstats.report.sections._context import MAX_ELEMENTS
from tomstats.report.sections.checks import calibration_table, loo_tables
from tomstats.report.sections.verdict import (  # noqa: F401 - _fallback_checks for old callers
    THRESHOLDS,
    _fallback_checks,
    diagnostics_verdict,
)

__all__ = [
    "MAX_ELEMENTS",
    "THRESHOLDS",
    "calibration_table",
    "cell_accuracy_table",
    "diagnostics_verdict",
    "fig_cell_accuracy",
    "fit_document",
    "load_fit",
    "loo_tables",
    "report_variables",
    "write_fit_report",
]

#: The sections that take long without a word (seconds to minutes on large fits), and the
#: line announcing each on stderr when progress is wanted.
_SLOW_SECTIONS = {
    checks.ppc_section: "posterior predictive checks (a replicate data set per draw)",
    checks.loo_section: "PSIS-LOO (leave-one-out cross-validation, one weight per draw and "
                        "observation)",
    sweep.section: "calibrated sweep (the paper's study at each thinned posterior draw)",
}


def _made(make: Callable[[FitContext], Section], ctx: FitContext, progress: bool) -> Section:
    """``make(ctx)``, with one line on stderr before a slow section and its time after."""
    what = _SLOW_SECTIONS.get(make) if progress else None
    if what is None or (make is sweep.section and ctx.sweep_draws == 0):
        return make(ctx)
    print(f"report: {what} …", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    section = make(ctx)
    print(f"report: {what.split(' (')[0]} done in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    return section


def load_fit(path: str | os.PathLike[str]) -> az.InferenceData:
    """Read a fit saved as netCDF, checked whole by the one fit reader
    (:func:`tomstats.glmm.fit_file.read_netcdf_fit`).

    Raises
    ------
    ValueError
        If the file does not exist, is not a netCDF/InferenceData file of ``tomstats fit``,
        or fails a check of its schema (the message names the field and the value).
    """
    from tomstats.glmm.fit_file import read_netcdf_fit

    p = Path(path)
    if p.is_dir():
        raise ValueError(f"FIT: {str(p)!r} is a folder, expected a fit netCDF file "
                         "(for a simulation folder use --simulation DIR)")
    if not p.is_file():
        raise ValueError(f"FIT: {str(p)!r} does not exist or is not a file")
    return read_netcdf_fit(p, "FIT")


def report_variables(idata: az.InferenceData) -> list[str]:
    """Posterior variables small enough to tabulate and plot (≤ :data:`MAX_ELEMENTS`
    elements each, no reparametrisation internals or per-level random effects)."""
    return FitContext(idata).var_names


def fit_document(idata: az.InferenceData, name: str = "fit", *,
                 sweep_draws: int = SWEEP_DRAWS,
                 rope: Mapping[str, tuple[float, float]] | None = None,
                 progress: bool = False) -> Document:
    """Build the report :class:`~tomstats.report._document.Document` for a fit.

    Parameters
    ----------
    idata : arviz.InferenceData
        The fit (needs a ``posterior``; other groups are used when present).
    name : str
        Shown in the subtitle (usually the file name).
    sweep_draws : int
        Posterior draws of the calibrated sweep drawn for a structural fit
        (:func:`tomstats.report.posterior_sweep.fit_sweep_blocks`); 0 leaves it out.
    rope : mapping, optional
        ``{effect: (low, high)}`` regions of practical equivalence for the "Is there an
        effect?" section (:func:`tomstats.report.sections.effects.effects_section`), which
        follows the diagnostics verdict.
    progress : bool
        Print one line on stderr before each long silent phase (posterior predictive checks,
        PSIS-LOO, the calibrated sweep) and its time after (``tomstats report --progress``).
    """
    from tomstats.report.sections.effects import effects_section

    effects = effects_section(idata, rope)  # an unknown --rope name: before any drawing
    ctx = FitContext(idata, name, sweep_draws)
    made = [_made(make, ctx, progress) for make in SECTIONS]
    sections = (*made[:1], effects, *made[1:])
    post = idata.posterior
    subtitle = f"{name} · {int(post.sizes['chain'])} chains × {int(post.sizes['draw'])} draws"
    return Document("tomstats fit report", subtitle, sections)


def write_fit_report(
    fit: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str = "html", *,
    sweep_draws: int = SWEEP_DRAWS, rope: Mapping[str, tuple[float, float]] | None = None,
    progress: bool = False,
) -> Path:
    """Write the report for a fit (netCDF) as HTML (one file) or Markdown + PNGs.

    Parameters
    ----------
    fit : path
        The fit, an ArviZ InferenceData netCDF (``tomstats fit --out fit.nc``), or a
        maximum-likelihood fit's JSON (``tomstats fit --backend laplace --out fit.json``),
        whose short report is :func:`tomstats.report.laplace.laplace_document`.
    out : path
        The HTML file (``fmt="html"``) or the folder for ``report.md`` and its PNGs
        (``fmt="md"``).
    fmt : {"html", "md"}
        Output format.
    sweep_draws : int
        Posterior draws of the calibrated sweep for a structural fit (default
        :data:`~tomstats.report.posterior_sweep.SWEEP_DRAWS`); 0 leaves it out.
    rope : mapping, optional
        Regions of practical equivalence per key effect (see :func:`fit_document`).
    progress : bool
        A line on stderr before each long silent phase (see :func:`fit_document`).

    Returns
    -------
    pathlib.Path
        The HTML file or ``out/report.md``.
    """
    check_output(out, fmt)
    if isinstance(sweep_draws, bool) or not isinstance(sweep_draws, int) or sweep_draws < 0:
        raise ValueError(f"--sweep-draws must be a non-negative integer, got {sweep_draws!r}")
    from tomstats.report.laplace import is_laplace_fit, write_laplace_report

    if is_laplace_fit(fit):
        return write_laplace_report(fit, out, fmt)
    idata = load_fit(fit)
    return write_document(fit_document(idata, Path(fit).name, sweep_draws=sweep_draws,
                                       rope=rope, progress=progress), out, fmt)
