"""``tomstats power``: power and assurance curves from a simulation TOML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tomstats._cli_options import add_progress_argument, deprecated_alias, progress_wanted
from tomstats._io import add_out_arguments, prepare_out_dir, replaced_dir
from tomstats.planning.analyses import TESTS
from tomstats.planning.result import format_power, write_power
from tomstats.planning.run import power
from tomstats.simulation.files import TABLE1
from tomstats.simulation.study import load_study, spec_options

__all__ = ["add_power_arguments", "run_power"]


def _parse_along(text: str, flag: str = "--along") -> dict[str, list[float]]:
    if "=" not in text:
        raise ValueError(f"{flag}: expected NAME=V1,V2,..., got {text!r}")
    name, vals = (t.strip() for t in text.split("=", 1))
    try:
        values = [float(v) for v in vals.split(",") if v.strip()]
    except ValueError as exc:
        raise ValueError(f"{flag} {name}: values must be numbers, got {vals!r}") from exc
    if name == "alpha":
        print(f"tomstats power: {flag} alpha=... is deprecated; use {flag} alpha_context=... "
              "(the context decay α; the significance level is --level)", file=sys.stderr)
    # alpha_context: equation (1)'s context decay α (the significance level is --level)
    return {"alpha" if name == "alpha_context" else name: values}


def add_power_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats power``."""
    p.add_argument("config", help="simulation TOML (e.g. simulations/power.toml); its [power] "
                                  "table gives the defaults of the options below")
    add_out_arguments(p, folder=True, what="output folder", size_guard=True)
    for name, option in spec_options():  # the [power] fields, declared once in PowerSpec
        if not option.cli:
            continue
        flag = option.flag or "--" + name.replace("_", "-")
        kw: dict[str, Any] = {"dest": name, "default": None}
        kw.update({k: v for k, v in (("type", option.type), ("metavar", option.metavar),
                                      ("choices", option.choices)) if v is not None})
        if option.repeat:
            kw["action"] = "append"
        if option.help is not None:
            kw["help"] = option.help.format(tests=", ".join(TESTS))
        p.add_argument(flag, **kw)
    deprecated_alias(p, "--alpha", "--level", dest="alpha", type=float, metavar="A")
    p.add_argument("--questions-per-cell", type=int, default=None, metavar="N",
                   help="questions per cell and LLM when --along varies something else "
                        "(default: the TOML's questions_per_cell)")
    p.add_argument("--posterior", default=None,
                   help="structural GLMM fit (netCDF): report assurance beside plug-in power "
                        "(default: none, plug-in power at the TOML's parameters)")
    p.add_argument("--draws", type=int, default=200, help="posterior draws used (default 200)")
    p.add_argument("--allow-warnings", action="store_true",
                   help="use a --posterior fit that failed its own checks (divergences, "
                        "R-hat, ESS; refused otherwise)")
    p.add_argument("--allow-failures", action="store_true",
                   help="report power among valid fits even when more than 1 %% fail")
    p.add_argument("--no-figures", "--no-figure", action="store_true", help="skip power.png")
    add_progress_argument(p)
    p.add_argument("--quiet", action="store_true",
                   help="print no table (and no progress bar unless --progress)")


def _progress(args: argparse.Namespace) -> bool:
    """--progress/--no-progress as given; else off with --quiet, else on a terminal."""
    if args.progress is not None:
        return bool(args.progress)
    return False if args.quiet else progress_wanted(args)


def run_power(args: argparse.Namespace) -> int:
    """``tomstats power``: a power curve from a simulation TOML (nothing is written when the
    input is refused or the run fails)."""
    if (Path(args.out) / TABLE1).is_file():
        raise ValueError(f"--out: {args.out!r} holds a simulation run (table1.csv, "
                         "summary.json); write the power run into another folder, e.g. "
                         f"{str(Path(args.out) / 'power')!r}, where `tomstats report "
                         "--simulation` finds it")
    if args.posterior is not None:  # a fit that failed its checks: refused before any work
        from tomstats.glmm.verdict import load_sound_fit

        load_sound_fit(args.posterior, allow_warnings=args.allow_warnings)
    prepare_out_dir(args.out, force=args.force)
    cfg = load_study(args.config)
    spec = {name: getattr(args, name) for name, option in spec_options() if option.cli}
    for key in ("along", "by"):  # NAME=V1,V2,... -> {NAME: [V1, V2, ...]}
        spec[key] = _parse_along(spec[key], f"--{key}") if spec[key] else None
    result = power(cfg, **spec, questions_per_cell=args.questions_per_cell,
                   posterior=args.posterior, draws=args.draws,
                   allow_failures=args.allow_failures,
                   progress=_progress(args), allow_large=args.allow_large)
    with replaced_dir(args.out) as tmp:
        files = write_power(result, tmp, figure=not args.no_figures)
    if not args.quiet:
        print(format_power(result))
        print(f"wrote {len(files)} files to {args.out} "
              f"({result.data.attrs['seconds']:.1f} s)")
    return 0
