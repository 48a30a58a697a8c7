"""``tomstats report``: an HTML or Markdown report for a fit, an evaluation log or a simulation.

Examples
--------
``tomstats report fit.nc --out report.html`` — a GLMM fit (ArviZ InferenceData netCDF);
``tomstats report run.jsonl --out log.html`` — an evaluation log (the runner's ``.jsonl``, or a
``.csv``/``.tsv``/``.parquet`` table with one row per question; ``--map``/``--query`` as in
``tomstats fit``): accuracy by cell, the ANOVA table, the error taxonomy, the next command;
``tomstats report --simulation out/ --out paper.html`` — a ``reproduce``/``simulate`` output
folder, or a calibrated sweep (``simulate CONFIG --posterior FIT.nc --out DIR``);
``tomstats report fit.nc --format md --out report/`` — Markdown plus PNGs in a folder.

An existing ``--out`` file (or non-empty ``--format md`` folder) is refused unless ``--force``;
the Markdown folder is written beside ``--out`` and swapped in whole.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tomstats._args import count_arg
from tomstats._cli_options import add_progress_argument, progress_wanted
from tomstats._io import (
    prepare_out_dir,
    prepare_out_file,
    refuse_inputs_as_outputs,
    replaced_dir,
)
from tomstats.analysis.sizes import check_bootstrap_size
from tomstats.analysis.table import add_selection_arguments, parse_mapping
from tomstats.report.posterior_sweep import SWEEP_DRAWS

# The writers are imported by run_report, each report's stack only for that report (a fit's
# report loads ArviZ; ``report --help`` and a log's report do not).

__all__ = ["add_report_arguments", "run_report"]

_DEFAULT_OUT = {"html": "report.html", "md": "report"}
_LOG_ONLY = {"map": "--map", "query": "--query", "n_boot": "--n-boot"}


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` subcommand's arguments to ``parser``."""
    parser.add_argument("fit", nargs="?", metavar="FIT.nc|LOG",
                        help="a fit written by `tomstats fit` (ArviZ InferenceData netCDF), or "
                             "an evaluation log (.jsonl from `tomstats evaluate`, or a .csv/"
                             ".tsv/.parquet table with one row per question)")
    parser.add_argument("--simulation", metavar="DIR",
                        help="report on a `tomstats reproduce`/`simulate` output folder "
                             "(or a calibrated sweep: `simulate --posterior`) instead")
    parser.add_argument("--out", metavar="PATH",
                        help="output: the HTML file (default report.html) or, with --format "
                             "md, the folder for report.md and its PNGs (default report/)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing --out file (or --format md folder, swapped in "
                             "whole)")
    parser.add_argument("--format", choices=("html", "md"), default="html", dest="format",
                        help="html: one self-contained file (default); md: Markdown + PNGs")
    parser.add_argument("--sweep-draws", type=int, default=None, metavar="N",
                        help="structural fits: posterior draws of the calibrated η² and "
                             f"dominance sweep in the report (default {SWEEP_DRAWS}; 0 "
                             "leaves it out)")
    add_selection_arguments(parser, ("correct", "model", "tom_order", "context_words",
                                     "error_category", "story_id"),
                            "evaluation logs: ")
    parser.add_argument("--allow-large", action="store_true",
                        help="evaluation logs: run the bootstrap even when the size guard "
                             "estimates more memory than is available or more than a day")
    parser.add_argument("--rope", action="append", default=None, metavar="NAME=LOW,HIGH",
                        help="fit reports: a region of practical equivalence for a key effect "
                             "(gamma, alpha, delta, or a fixed effect of a formula fit), e.g. "
                             "gamma=-0.1,0.1 or gamma=0.1 for [-0.1, 0.1]; repeatable (default: "
                             "none, the report gives the probability of direction only)")
    parser.add_argument("--n-boot", type=count_arg, default=None, metavar="N",
                        help="evaluation logs: cluster-bootstrap (BCa) intervals of every "
                             "effect size from N resamples; 0 leaves the intervals out "
                             "(default: noncentral-F intervals of η² and partial η², no "
                             "bootstrap)")
    add_progress_argument(parser, "fit reports: a line before each long phase (predictive "
                                  "checks, PSIS-LOO, calibrated sweep)")


def _check_out(out: str, fmt: str, force: bool) -> None:
    """``--out`` is valid for ``fmt`` and, unless ``force``, does not hold an earlier report."""
    from tomstats.report._document import check_output

    check_output(out, fmt)
    if fmt == "html":
        prepare_out_file(out, force=force)
    else:
        prepare_out_dir(out, force=force)


def run_report(args: argparse.Namespace) -> int:
    """Run ``tomstats report``; returns the exit status (errors raise ``ValueError``)."""
    from tomstats.report.log import is_log
    from tomstats.report.sections.effects import parse_rope

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
    log = args.fit is not None and is_log(args.fit)
    if not log:
        given = [flag for name, flag in _LOG_ONLY.items() if getattr(args, name, None)
                 is not None]
        if given:
            raise ValueError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to "
                             "an evaluation log report (.jsonl/.csv/.parquet), not to "
                             + ("--simulation" if args.simulation is not None else
                                f"{args.fit!r}"))
    elif sweep_draws is not None:
        raise ValueError("--sweep-draws applies to a fit report (FIT.nc), not to an "
                         "evaluation log")
    rope_specs = getattr(args, "rope", None)
    if rope_specs and (log or args.simulation is not None):
        raise ValueError("--rope applies to a fit report (FIT.nc), not to "
                         + ("--simulation" if args.simulation is not None
                            else "an evaluation log"))
    rope = parse_rope(rope_specs)
    refuse_inputs_as_outputs({"--out": out}, {"FIT": args.fit, "--simulation": args.simulation})
    _check_out(out, fmt, getattr(args, "force", False))
    if args.simulation is not None:
        def write(dest: Path) -> Path:
            from tomstats.report.simulation import write_simulation_report

            return write_simulation_report(args.simulation, dest, fmt)
    elif log:
        from tomstats.analysis.log_anova import DEFAULT_INTERVAL

        interval = DEFAULT_INTERVAL if args.n_boot is None else "bca"
        n_boot = 2000 if args.n_boot is None else args.n_boot
        if n_boot < 0:
            raise ValueError(f"--n-boot must be a non-negative integer, got {n_boot}")
        if interval == "bca":
            check_bootstrap_size(n_boot, allow_large=args.allow_large)
        columns = parse_mapping(args.map)

        def write(dest: Path) -> Path:
            from tomstats.report.log import write_log_report

            return write_log_report(args.fit, dest, fmt, columns=columns, query=args.query,
                                    n_boot=n_boot, interval=interval)
    else:
        draws = SWEEP_DRAWS if sweep_draws is None else sweep_draws

        def write(dest: Path) -> Path:
            from tomstats.report.fit import write_fit_report

            return write_fit_report(args.fit, dest, fmt, sweep_draws=draws, rope=rope,
                                    progress=progress_wanted(args))
    if fmt == "html":
        path = write(Path(out))
    else:  # the Markdown folder is written beside --out and swapped in whole
        with replaced_dir(out) as tmp:
            try:
                path = Path(out) / write(tmp).relative_to(tmp)
            except OSError as exc:  # an unreadable input, not a failed write: say so
                if exc.filename is not None and str(exc.filename).startswith(str(tmp)):
                    raise
                text = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
                raise ValueError(text) from None
    print(f"wrote {path}")
    return 0
