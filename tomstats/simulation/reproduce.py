"""The simulation paper in one command, and simulation TOML files in general.

``tomstats reproduce --out DIR`` runs the paper's study (``simulations/paper.toml`` ships
the same settings): the 5×3 design at five capability levels, the 7×7 γ × α sensitivity
grid, and writes ``table1.csv``, ``decomposition.csv``, ``cells.csv``, ``sensitivity.csv``,
``summary.json`` and ``fig1.png`` … ``fig5.png``. ``tomstats simulate FILE.toml`` does the
same for any simulation file, optionally once per posterior draw of a structural GLMM fit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from tomstats import _distributed
from tomstats._args import MAX_SEED
from tomstats._cli_options import (
    add_distributed_arguments,
    add_figures_argument,
    add_progress_argument,
    progress_wanted,
)
from tomstats._guards import Footprint, check_footprint
from tomstats._io import (
    add_out_arguments,
    ensure_writable_dir,
    prepare_out_dir,
    replaced_dir,
    staged_files,
)
from tomstats._validate import check_type
from tomstats._version import __version__
from tomstats.simulation.files import CELLS, DECOMPOSITION, SENSITIVITY, SUMMARY, TABLE1
from tomstats.simulation.paper import PAPER_BANDS, PAPER_TABLE1
from tomstats.simulation.sensitivity_grid import sensitivity, sensitivity_table
from tomstats.simulation.simulator import PATHS, SOURCES, simulate, simulation_footprint
from tomstats.simulation.study import StudyConfig, load_study, study_from_dict

# StudyConfig and load_study are defined in tomstats.simulation.study and importable from here too
__all__ = [
    "is_paper_study",
    "run_study",
    "study_footprint",
    "table1",
    "write_study",
    "add_reproduce_arguments",
    "run_reproduce",
    "add_simulate_arguments",
    "run_simulate",
]

# ---------------------------------------------------------------------------------------
# running and summarising
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StudyResult:
    """Outputs of :func:`run_study` (DataFrames as written to CSV, plus raw datasets)."""

    config: StudyConfig
    table1: pd.DataFrame
    decomposition: pd.DataFrame
    cells: pd.DataFrame
    sensitivity: pd.DataFrame
    summary: dict[str, Any]
    main: xr.Dataset
    grid: xr.Dataset

    def __repr__(self) -> str:
        """One line: the study's size (cells, capability levels, replicates, the grid)."""
        from tomstats._printable import summary_line

        sizes = ", ".join(f"{k} {v}" for k, v in self.main.sizes.items())
        grid = ", ".join(f"{k} {v}" for k, v in self.grid.sizes.items())
        return summary_line(self, f"main study: {sizes}", f"sensitivity grid: {grid}",
                            f"tables: table1 ({len(self.table1)} rows), decomposition, cells, "
                            f"sensitivity", full=False)


def _decomposition(ds: xr.Dataset) -> pd.DataFrame:
    """Per capability level: MC means of % total, η², partial η², F, share (+95 % MC)."""
    rows = []
    for cap in ds["capability"].values:
        sub = ds.sel(capability=cap)
        for src in SOURCES:
            eta = sub["eta2"].sel(source=src)
            row = {
                "capability": float(cap),
                "factor": src,
                "pct_total": 100 * float(eta.mean()),
                "pct_total_low": 100 * float(eta.quantile(0.025)),
                "pct_total_high": 100 * float(eta.quantile(0.975)),
                "eta2": float(eta.mean()),
                "partial_eta2": float(sub["partial_eta2"].sel(source=src).mean()),
                "F": float(sub["F"].sel(source=src).mean()),
                "share_systematic": float(sub["share"].sel(systematic=src).mean())
                if src != "residual" else float("nan"),
            }
            if src == "residual":
                row.update(partial_eta2=float("nan"), F=float("nan"))
            rows.append(row)
    return pd.DataFrame(rows)


def table1(decomposition: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1: means over capability levels, sd of % total across them.

    Columns ``factor, pct_total, sd_pct, eta2, partial_eta2, F``; rows ``tom_order,
    context_length, interaction, residual``.
    """
    g = decomposition.groupby("factor", sort=False)
    out = pd.DataFrame({
        "pct_total": g["pct_total"].mean(),
        "sd_pct": g["pct_total"].std(ddof=1),
        "eta2": g["eta2"].mean(),
        "partial_eta2": g["partial_eta2"].mean(),
        "F": g["F"].mean(),
    }).reindex(list(SOURCES))
    out.loc["residual", ["eta2", "partial_eta2", "F", "sd_pct"]] = np.nan
    return out.rename_axis("factor").reset_index()


def _cells(ds: xr.Dataset) -> pd.DataFrame:
    """Cell accuracy (MC mean) with a 95 % interval for one study's cell accuracy.

    With ≥ 40 replicates the interval is the 2.5 %/97.5 % quantile of the simulated cell
    accuracies; with fewer, the normal interval :math:`\\bar p \\pm 1.96\\sqrt{\\bar p(1-\\bar
    p)/n}` of the within-cell Bernoulli variance.
    """
    acc = ds["accuracy"]
    mean = acc.mean("replicate")
    if ds.sizes["replicate"] >= 40:
        low = acc.quantile(0.025, dim="replicate").drop_vars("quantile")
        high = acc.quantile(0.975, dim="replicate").drop_vars("quantile")
    else:
        half = 1.96 * np.sqrt(mean * (1 - mean) / ds["trials"])
        low, high = (mean - half).clip(0, 1), (mean + half).clip(0, 1)
    df = xr.Dataset({"accuracy": mean, "ci_low": low, "ci_high": high,
                     "expected": ds["p_expected"]}).to_dataframe().reset_index()
    return df[["capability", "context_length", "tom_order", "accuracy", "ci_low", "ci_high",
               "expected"]]


def _bands(t1: pd.DataFrame, n_dominant: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pct = dict(zip(t1["factor"], t1["pct_total"], strict=True))
    for name, (value, band) in PAPER_BANDS.items():
        got = float(n_dominant) if name == "n_dominant" else float(pct[name])
        out[name] = {"paper": value, "band": band, "measured": got,
                     "inside": bool(abs(got - value) <= band)}
    return out


def study_footprint(config: StudyConfig) -> Footprint:
    """Memory and time of :func:`run_study` (main design, then the sensitivity grid)."""
    main = simulation_footprint(config.design, config.replicates, path=config.path)
    grid = simulation_footprint(config.design, config.sensitivity_replicates, path=config.path,
                                n_points=len(config.gamma) * len(config.alpha))
    return main + grid


def is_paper_study(config: Any) -> bool:
    """Whether a run's configuration is the paper's own study, the only one graded against it.

    The paper's study is the :class:`StudyConfig` default (``tomstats reproduce``,
    ``simulations/paper.toml``): its design (5 context lengths × 3 ToM orders, 500 questions
    a cell, capabilities 0.7–1.3), equation (1)'s fitted parameters and the 7 × 7 γ × α grid
    at capability 1. Replicates, seed and path may differ (they change the Monte Carlo error,
    not the study). ``config`` is :meth:`StudyConfig.to_dict`'s form (``summary.json``'s
    ``config``); anything else (an older folder without it) is not the paper's study.
    """
    if not isinstance(config, dict):
        return False
    paper = StudyConfig().to_dict()
    sens = {k: v for k, v in dict(config.get("sensitivity") or {}).items() if k != "replicates"}
    same = all(config.get(k) == paper[k] for k in ("design", "params"))
    return same and sens == {k: v for k, v in paper["sensitivity"].items() if k != "replicates"}


def run_study(config: StudyConfig, *, progress: bool | None = None,
              allow_large: bool = False) -> StudyResult:
    """Run the main design and the sensitivity grid of ``config``; summarise both.

    The size guard (:func:`study_footprint`) runs first; ``allow_large=True`` skips it.
    """
    check_type(config, StudyConfig, "config",
               "a tomstats.StudyConfig (see tomstats.load_study)")
    check_footprint(study_footprint(config), allow_large=allow_large)
    t0 = time.perf_counter()
    main = simulate(config.design, config.params, replicates=config.replicates,
                    seed=config.seed, path=config.path, progress=progress, allow_large=True)
    t1 = time.perf_counter()
    grid = sensitivity(config.params, design=config.design, gamma=config.gamma,
                       alpha=config.alpha, capability=config.sensitivity_capability,
                       replicates=config.sensitivity_replicates, seed=config.seed + 1,
                       path=config.path, progress=progress, allow_large=True)
    t2 = time.perf_counter()
    decomposition = _decomposition(main)
    tab = table1(decomposition)
    cells = _cells(main)
    sens = sensitivity_table(grid)
    n_dom = int(sens["dominant"].sum())
    per_rep = (grid["tom_share"] > 0.5).sum(("gamma", "alpha"))
    summary = {
        "package_version": __version__,
        "seed": config.seed,
        "replicates": config.replicates,
        "path": config.path,
        "params": config.params.to_dict(),
        "config": config.to_dict(),
        "design": config.design.to_dict(),
        "table1": tab.replace({np.nan: None}).to_dict(orient="records"),
        "paper_table1": {k: {kk: (None if np.isnan(vv) else vv) for kk, vv in v.items()}
                         for k, v in PAPER_TABLE1.items()},
        "systematic_share": {
            src: float(main["share"].sel(systematic=src).mean()) for src in SOURCES[:3]
        },
        "sensitivity": {
            "n_dominant": n_dom,
            "n_cells": int(sens.shape[0]),
            "n_dominant_low": int(per_rep.quantile(0.025)),
            "n_dominant_high": int(per_rep.quantile(0.975)),
            "capability": config.sensitivity_capability,
            "replicates": config.sensitivity_replicates,
        },
        "paper_bands": _bands(tab, n_dom),
        "seconds": {"main": t1 - t0, "sensitivity": t2 - t1},
    }
    return StudyResult(config, tab, decomposition, cells, sens, summary, main, grid)


def write_study(result: StudyResult, out: str | os.PathLike[str],
                figures: bool = True) -> list[Path]:
    """Write the CSVs, ``summary.json`` and figures into ``out``.

    Everything is first written to a temporary folder beside ``out`` and then moved in file
    by file with ``os.replace``, so ``out`` never holds a half-written file.
    """
    check_type(result, StudyResult, "result", "a StudyResult (from tomstats.run_study)")
    out = ensure_writable_dir(out)
    with staged_files(out) as staged:
        stage = staged.stage
        result.table1.to_csv(stage / TABLE1, index=False)
        result.decomposition.to_csv(stage / DECOMPOSITION, index=False)
        result.cells.to_csv(stage / CELLS, index=False)
        result.sensitivity.to_csv(stage / SENSITIVITY, index=False)
        (stage / SUMMARY).write_text(json.dumps(result.summary, indent=2) + "\n")
        if figures:
            from tomstats.simulation.figures import write_paper_figures

            write_paper_figures(stage)
    return staged.written


def format_table1(t1: pd.DataFrame, paper_values: bool = True) -> str:
    """Table 1 as aligned text, next to the paper's values (only for the paper's own study:
    ``paper_values``; a study of your own is not the paper's)."""
    lines = [f"{'factor':<16}{'% total':>9}{'sd':>7}{'eta2':>8}{'eta2_p':>8}{'F':>9}"
             + (f"   {'paper % (sd)':>14}" if paper_values else "")]
    for _, r in t1.iterrows():
        paper = PAPER_TABLE1[r["factor"]]
        psd = "" if np.isnan(paper["sd_pct"]) else f" ({paper['sd_pct']:.1f})"
        ref = f"   {paper['pct_total']:>8.1f}{psd:<6}" if paper_values else ""

        def fmt(v: float, spec: str) -> str:
            return "—" if pd.isna(v) else format(v, spec)

        lines.append(
            f"{r['factor']:<16}{r['pct_total']:>9.2f}{fmt(r['sd_pct'], '.2f'):>7}"
            f"{fmt(r['eta2'], '.3f'):>8}{fmt(r['partial_eta2'], '.3f'):>8}"
            f"{fmt(r['F'], '.1f'):>9}{ref}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------


def _common_arguments(p: argparse.ArgumentParser) -> None:
    add_out_arguments(p, folder=True, what="output folder", size_guard=True)
    p.add_argument("--replicates", type=int, default=None,
                   help="Monte Carlo replicates of the main design (default: 1000, or the "
                        "simulation TOML's [simulation] replicates); with simulate --posterior "
                        "the total over the draws, ceil(replicates / draws) per draw, unless "
                        "--replicates-per-draw")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed (default: the TOML's, 0)")
    p.add_argument("--path", default=None,
                   help="'exact' (binomial cell counts, default) or 'bernoulli' (per question)")
    add_figures_argument(p, "fig1.png … fig5.png")
    add_progress_argument(p, "progress bars")
    p.add_argument("--quiet", action="store_true",
                   help="print no table (and no progress bars unless --progress)")
    add_distributed_arguments(p)


def add_reproduce_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats reproduce``."""
    _common_arguments(p)


def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats simulate``."""
    p.add_argument("config", help="simulation TOML (e.g. simulations/paper.toml)")
    _common_arguments(p)
    p.add_argument("--posterior", default=None,
                   help="structural GLMM fit (netCDF): run once per posterior draw")
    p.add_argument("--draws", type=int, default=200,
                   help="posterior draws to use with --posterior (thinned evenly; default 200)")
    p.add_argument("--replicates-per-draw", type=int, default=None, metavar="N",
                   help="with --posterior: simulated studies of the main design per draw "
                        "(default: ceil(replicates / draws))")
    p.add_argument("--grid-replicates-per-draw", type=int, default=None, metavar="N",
                   help="with --posterior: simulated studies per γ × α grid point per draw "
                        "(default: ceil(the TOML's sensitivity replicates / draws))")
    p.add_argument("--allow-warnings", action="store_true",
                   help="use a --posterior fit that failed its own checks (divergences, "
                        "R-hat, ESS; refused otherwise); the summary and report say so")


def _progress(args: argparse.Namespace) -> bool | None:
    """--progress/--no-progress as given; else off with --quiet, else on a terminal."""
    if not _distributed.is_writer():
        return False
    if args.progress is not None:
        return bool(args.progress)
    return False if args.quiet else progress_wanted(args)


def _announce_compilation(args: argparse.Namespace) -> None:
    """One line on stderr before the simulation programs compile (the bars stand still)."""
    if _progress(args):
        print("compiling the simulation programs, about 5 s (more on a busy machine), once "
              "per shape and process", file=sys.stderr, flush=True)


def _validate_cli(args: argparse.Namespace) -> None:
    if args.path is not None and args.path not in PATHS:
        raise ValueError(f"--path must be one of {PATHS}, got {args.path!r}")
    if args.replicates is not None and args.replicates < 1:
        raise ValueError(f"--replicates must be >= 1, got {args.replicates}")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    if args.seed is not None and args.seed > MAX_SEED:
        raise ValueError(f"--seed must be at most 2**63 - 1 = {MAX_SEED}, got {args.seed}")
    for flag in ("replicates_per_draw", "grid_replicates_per_draw"):
        v = getattr(args, flag, None)
        name = "--" + flag.replace("_", "-")
        if v is not None and v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
        if v is not None and getattr(args, "posterior", None) is None:
            raise ValueError(f"{name} needs --posterior (without it, use --replicates)")
    if _distributed.is_writer():  # process 0 alone looks at and writes --out
        prepare_out_dir(args.out, force=args.force)


def _finish(result: StudyResult, args: argparse.Namespace) -> int:
    if not _distributed.is_writer():  # process 0 writes and prints
        return 0
    result.summary["run"] = _distributed.provenance()
    with replaced_dir(args.out) as tmp:
        files = write_study(result, tmp, figures=not args.no_figures)
    if not args.quiet:
        paper_study = is_paper_study(result.summary.get("config"))
        print(format_table1(result.table1, paper_values=paper_study))
        s = result.summary["sensitivity"]
        paper = (f"; paper: {PAPER_BANDS['n_dominant'][0]:.0f}/{s['n_cells']}"
                 if paper_study else "")
        print(f"\nToM-dominant grid cells: {s['n_dominant']}/{s['n_cells']} "
              f"(95% MC range {s['n_dominant_low']}–{s['n_dominant_high']}{paper})")
        print(f"wrote {len(files)} files to {args.out}")
    return 0


def run_reproduce(args: argparse.Namespace) -> int:
    """``tomstats reproduce``: the paper's study with the package defaults."""
    _validate_cli(args)
    config = study_from_dict({}, {"replicates": args.replicates, "seed": args.seed,
                                   "path": args.path})
    _announce_compilation(args)
    result = run_study(config, progress=_progress(args),
                       allow_large=args.allow_large)
    return _finish(result, args)


def run_simulate(args: argparse.Namespace) -> int:
    """``tomstats simulate``: a simulation TOML, optionally per posterior draw."""
    _validate_cli(args)
    config = load_study(args.config, replicates=args.replicates, seed=args.seed,
                        path=args.path)
    if args.posterior is None:
        _announce_compilation(args)
        return _finish(run_study(config, progress=_progress(args),
                                 allow_large=args.allow_large), args)
    from tomstats.simulation.posterior_sweep import run_posterior_study

    def sweep(out: Path) -> str:
        return run_posterior_study(config, args.posterior, draws=args.draws, out=out,
                                   replicates=args.replicates_per_draw,
                                   sensitivity_replicates=args.grid_replicates_per_draw,
                                   progress=_progress(args), allow_large=args.allow_large,
                                   allow_warnings=args.allow_warnings)

    if not _distributed.is_writer():  # computes its share, writes nothing
        sweep(Path(args.out))
        return 0
    with replaced_dir(args.out) as tmp:
        out = sweep(tmp)
    if not args.quiet:
        print(out.replace(str(tmp), str(Path(args.out))))
    return 0

