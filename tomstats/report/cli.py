"""``tomstats report``: an HTML or Markdown report for a fit or a simulation folder.

Examples
--------
``tomstats report fit.nc --out report.html`` — a GLMM fit (ArviZ InferenceData netCDF);
``tomstats report --simulation out/ --out paper.html`` — a ``reproduce``/``simulate`` output
folder, or a calibrated sweep (``simulate CONFIG --posterior FIT.nc --out DIR``);
``tomstats report fit.nc --format md --out report/`` — Markdown plus PNGs in a folder.
"""

from __future__ import annotations

import argparse

from tomstats.report.calibrated import SWEEP_DRAWS

__all__ = ["add_report_arguments", "run_report"]

_DEFAULT_OUT = {"html": "report.html", "md": "report"}


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` subcommand's arguments to ``parser``."""
    parser.add_argument("fit", nargs="?", metavar="FIT.nc",
                        help="a fit written by `tomstats fit` (ArviZ InferenceData netCDF)")
    parser.add_argument("--simulation", metavar="DIR",
                        help="report on a `tomstats reproduce`/`simulate` output folder "
                             "(or a calibrated sweep: `simulate --posterior`) instead")
    parser.add_argument("--out", metavar="PATH",
                        help="output: the HTML file (default report.html) or, with --format "
                             "md, the folder for report.md and its PNGs (default report/)")
    parser.add_argument("--format", choices=("html", "md"), default="html", dest="format",
                        help="html: one self-contained file (default); md: Markdown + PNGs")
    parser.add_argument("--sweep-draws", type=int, default=None, metavar="N",
                        help="structural fits: posterior draws of the calibrated η² and "
                             f"dominance sweep in the report (default {SWEEP_DRAWS}; 0 "
                             "leaves it out)")


def run_report(args: argparse.Namespace) -> int:
    """Run ``tomstats report``; returns the exit status (errors raise ``ValueError``)."""
    fmt = getattr(args, "format", "html")
    if fmt not in _DEFAULT_OUT:
        raise ValueError(f"--format: expected 'html' or 'md', got {fmt!r}")
    if (args.fit is None) == (args.simulation is None):
        raise ValueError("give exactly one of FIT.nc or --simulation DIR "
                         f"(got FIT.nc={args.fit!r}, --simulation={args.simulation!r})")
    out = args.out if args.out is not None else _DEFAULT_OUT[fmt]
    sweep_draws = getattr(args, "sweep_draws", None)
    if sweep_draws is not None and args.simulation is not None:
        raise ValueError("--sweep-draws applies to a fit report (FIT.nc), not to --simulation")
    if args.simulation is not None:
        from tomstats.report.simulation import write_simulation_report

        path = write_simulation_report(args.simulation, out, fmt)
    else:
        from tomstats.report.fit import write_fit_report

        path = write_fit_report(args.fit, out, fmt,
                                sweep_draws=SWEEP_DRAWS if sweep_draws is None else sweep_draws)
    print(f"wrote {path}")
    return 0
