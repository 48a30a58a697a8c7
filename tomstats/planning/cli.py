"""``tomstats power``: power and assurance curves from a simulation TOML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tomstats import _distributed
from tomstats._cli_options import (
    add_distributed_arguments,
    add_progress_argument,
    deprecated_alias,
    progress_wanted,
)
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
    p.add_argument("config", nargs="?", default=None,
                   help="simulation TOML (e.g. simulations/power.toml); its [power] table gives "
                        "the defaults of the options below (leave it out with --from-fit)")
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
    p.add_argument("--draws", type=int, default=None,
                   help="posterior draws used, thinned evenly (default 200 with --posterior, "
                        "all with a Bayesian --from-fit)")
    p.add_argument("--allow-warnings", action="store_true",
                   help="use a Bayesian fit (--posterior, --from-fit FIT.nc) that failed its "
                        "own checks (divergences, R-hat, ESS; refused otherwise)")
    p.add_argument("--compare-story-designs", nargs="*", default=None, metavar="TOML",
                   help="run the tests for a between-story design (a new story at every "
                        "context length) and a within-story one (length ladders) along "
                        "questions_per_cell, at the config's parameters and at those of each "
                        "simulation TOML given, and print the questions per cell, questions "
                        "per LLM, LLM calls and stories each needs for the target power "
                        "(default: off)")
    p.add_argument("--allow-failures", action="store_true",
                   help="report power among valid fits even when more than 1 %% fail")
    g = p.add_argument_group(
        "power from a fitted model (--from-fit; simr's powerSim/powerCurve/extend)",
        "simulate from a Laplace fit's fixed effects, random-effects covariance and design, "
        "refit every study, test a term; --test wald|lrt, --replicates, --seed, --level, "
        "--along and --by apply (NAME: a grouping factor = its levels, rows_per_FACTOR, or "
        "a coefficient = its value); from a Bayesian formula fit (.nc) each study draws its "
        "parameters from the posterior: assurance (--draws, --allow-warnings apply)")
    g.add_argument("--from-fit", default=None, metavar="FIT",
                   help="Laplace fit with random-effects terms (tomstats fit --backend laplace "
                        "--out FIT.json), or a Bayesian fit of a formula model (--backend "
                        "numpyro|pymc --out FIT.nc: assurance) to simulate from (default: "
                        "none, the TOML's model)")
    g.add_argument("--data", default=None, metavar="LOG",
                   help="the log the fit was made from (checked by the fit's data hash; "
                        "required with --from-fit)")
    g.add_argument("--term", default=None, metavar="NAME",
                   help="coefficient or formula term tested, e.g. x, 'belief:cue' (all its "
                        "columns; required with --from-fit)")
    g.add_argument("--compare", default=None, metavar="FORMULA",
                   help="reduced model nested in the fit's, tested by the likelihood ratio "
                        "(simr's fcompare), e.g. 'y ~ x + (1 | g)' for a fit of "
                        "'y ~ x + (1 + x | g)' (instead of --term; default: none)")
    g.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                   help="simulate with a coefficient set to VALUE, e.g. 'belief:cue=-0.6' "
                        "(repeatable; default: the fitted values)")
    g.add_argument("--refit", default=None, metavar="FORMULA",
                   help="model refitted and tested instead of the fit's, e.g. without its "
                        "random slope (default: none, the fit's own formula)")
    g.add_argument("--interval", choices=("wilson", "clopper-pearson"), default=None,
                   help="95 %% interval of power and type I error: Wilson's score interval, or "
                        "the Clopper–Pearson (exact) interval simr reports (default: wilson)")
    g.add_argument("--max-failed", type=float, default=0.1, metavar="SHARE",
                   help="stop a design point early when more than this share of its fits "
                        "failed")
    g.add_argument("--cores", type=int, default=None, metavar="N",
                   help="CPU cores refitting studies side by side (default: the usable CPUs "
                        "on a CPU backend, 1 on an accelerator; the result does not depend "
                        "on it)")
    p.add_argument("--no-figures", "--no-figure", action="store_true", help="skip power.png")
    add_progress_argument(p)
    p.add_argument("--quiet", action="store_true",
                   help="print no table (and no progress bar unless --progress)")
    add_distributed_arguments(p)


def _progress(args: argparse.Namespace) -> bool:
    """--progress/--no-progress as given; else off with --quiet, else on a terminal."""
    if not _distributed.is_writer():
        return False
    if args.progress is not None:
        return bool(args.progress)
    return False if args.quiet else progress_wanted(args)


#: Options of the TOML mode that do not apply with --from-fit (dest, flag).
_TOML_ONLY = (("questions_per_cell", "--questions-per-cell"), ("posterior", "--posterior"),
              ("items_per_cell", "--items-per-cell"), ("n_llms", "--n-llms"),
              ("path", "--path"), ("correction", "--correction"),
              ("compare_story_designs", "--compare-story-designs"))
_FIT_ONLY = (("data", "--data"), ("term", "--term"), ("set", "--set"), ("refit", "--refit"),
             ("compare", "--compare"), ("interval", "--interval"))


def _parse_set(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for text in items or []:
        name, eq, value = text.rpartition("=")
        name = name.strip()
        if not eq or not name:
            raise ValueError(f"--set: expected NAME=VALUE, e.g. 'belief:cue=-0.6', got {text!r}")
        try:
            out[name] = float(value)
        except ValueError as exc:
            raise ValueError(f"--set {name}: the value must be a number, got {value!r}") from exc
    return out


def _run_from_fit(args: argparse.Namespace) -> int:
    """``tomstats power --from-fit FIT.json --data LOG --term NAME`` (or ``--compare
    FORMULA``)."""
    from tomstats.planning.from_fit import FIT_TESTS, load_power_fit, power_from_fit
    from tomstats.planning.from_posterior import is_posterior

    if args.config is not None:
        raise ValueError(f"--from-fit: give a simulation TOML ({args.config!r}) or --from-fit, "
                         "not both")
    for dest, flag in _TOML_ONLY:
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{flag} does not apply with --from-fit (it belongs to the "
                             "TOML's model)")
    if args.data is None:
        raise ValueError("--from-fit needs --data (the log fitted)")
    if args.term is None and args.compare is None:
        raise ValueError("--from-fit needs --term (the coefficient or term tested) or "
                         "--compare (a reduced model)")
    if args.term is not None and args.compare is not None:
        raise ValueError("--term and --compare: give one (--compare tests the fit's model "
                         "against a reduced one)")
    tests = args.tests or ["wald" if args.compare is None else "lrt"]
    if len(tests) != 1 or tests[0] not in FIT_TESTS:
        raise ValueError(f"--test: with --from-fit one of {', '.join(FIT_TESTS)}, got "
                         f"{', '.join(tests)}")
    if args.compare is not None and tests[0] != "lrt":
        raise ValueError(f"--test {tests[0]}: --compare is a likelihood-ratio test "
                         f"(--test lrt, the default with it)")
    sets = _parse_set(args.set)
    dims = {k: _parse_along(getattr(args, k), f"--{k}") if getattr(args, k) else None
            for k in ("along", "by")}
    fit, df = load_power_fit(args.from_fit, args.data, allow_warnings=args.allow_warnings)
    if args.draws is not None and not is_posterior(fit):
        raise ValueError(f"--draws applies to a Bayesian fit (.nc); {args.from_fit!r} is a "
                         f"Laplace fit")
    if _distributed.is_writer():  # process 0 alone looks at and writes --out
        prepare_out_dir(args.out, force=args.force)
    result = power_from_fit(
        fit, args.term, compare=args.compare, data=df, test=tests[0], set_effects=sets,
        along=dims["along"], by=dims["by"],
        n_sims=1000 if args.replicates is None else args.replicates,
        seed=0 if args.seed is None else args.seed,
        alpha=0.05 if args.alpha is None else args.alpha,
        target=0.8 if args.target is None else args.target, max_failed=args.max_failed,
        refit=args.refit, draws=args.draws,
        allow_warnings=args.allow_warnings and is_posterior(fit),
        fit_name=args.from_fit, progress=_progress(args), allow_large=args.allow_large,
        cores=args.cores, interval=args.interval or "wilson")
    if not _distributed.is_writer():
        return 0
    with replaced_dir(args.out) as tmp:
        files = result.write(tmp, figure=not args.no_figures)
    if not args.quiet:
        print(result)
        print(f"wrote {len(files)} files to {args.out} ({result.seconds:.1f} s, "
              f"{result.refits} refits)")
    return 0


def run_power(args: argparse.Namespace) -> int:
    """``tomstats power``: a power curve from a simulation TOML, or from a Laplace fit with
    ``--from-fit`` (nothing is written when the input is refused or the run fails)."""
    if args.from_fit is not None:
        return _run_from_fit(args)
    for dest, flag in _FIT_ONLY:
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{flag} applies with --from-fit only")
    if args.config is None:
        raise ValueError("config: give a simulation TOML (e.g. simulations/power.toml), or "
                         "--from-fit FIT.json for the power of a fitted model")
    if (Path(args.out) / TABLE1).is_file():
        raise ValueError(f"--out: {args.out!r} holds a simulation run (table1.csv, "
                         "summary.json); write the power run into another folder, e.g. "
                         f"{str(Path(args.out) / 'power')!r}, where `tomstats report "
                         "--simulation` finds it")
    if args.compare_story_designs is not None:
        return _run_compare(args)
    if args.posterior is not None:  # a fit that failed its checks: refused before any work
        from tomstats.glmm.verdict import load_sound_fit

        load_sound_fit(args.posterior, allow_warnings=args.allow_warnings)
    if _distributed.is_writer():
        prepare_out_dir(args.out, force=args.force)
    cfg = load_study(args.config)
    spec = {name: getattr(args, name) for name, option in spec_options() if option.cli}
    for key in ("along", "by"):  # NAME=V1,V2,... -> {NAME: [V1, V2, ...]}
        spec[key] = _parse_along(spec[key], f"--{key}") if spec[key] else None
    result = power(cfg, **spec, questions_per_cell=args.questions_per_cell,
                   posterior=args.posterior, draws=200 if args.draws is None else args.draws,
                   allow_failures=args.allow_failures,
                   progress=_progress(args), allow_large=args.allow_large)
    if not _distributed.is_writer():
        return 0
    with replaced_dir(args.out) as tmp:
        files = write_power(result, tmp, figure=not args.no_figures)
    if not args.quiet:
        print(format_power(result))
        print(f"wrote {len(files)} files to {args.out} "
              f"({result.data.attrs['seconds']:.1f} s)")
    return 0


#: Options of a power curve that do not apply with --compare-story-designs (dest, flag).
_CURVE_ONLY = (("story_design", "--story-design (both designs are run)"),
               ("by", "--by"), ("posterior", "--posterior"), ("draws", "--draws"),
               ("path", "--path"), ("correction", "--correction"))


def _run_compare(args: argparse.Namespace) -> int:
    """``tomstats power CONFIG --compare-story-designs [TOML ...]``: the questions and LLM
    calls of a between- and a within-story design (nothing is written on bad input)."""
    from tomstats.planning.story_designs import compare_story_designs

    for dest, flag in _CURVE_ONLY:
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{flag} does not apply with --compare-story-designs")
    values = None
    if args.along is not None:
        (name, values), = _parse_along(args.along).items()
        if name != "questions_per_cell":
            raise ValueError(f"--along {name}: --compare-story-designs varies the questions "
                             "per cell; give --along questions_per_cell=V1,V2,...")
    if args.questions_per_cell is not None:
        raise ValueError("--questions-per-cell does not apply with --compare-story-designs "
                         "(give the values with --along questions_per_cell=V1,V2,...)")
    if _distributed.is_writer():
        prepare_out_dir(args.out, force=args.force)
    result = compare_story_designs(
        [args.config, *args.compare_story_designs], values=values, tests=args.tests,
        alpha=args.alpha, replicates=args.replicates, seed=args.seed, target=args.target,
        n_llms=args.n_llms, items_per_cell=args.items_per_cell,
        allow_failures=args.allow_failures, progress=_progress(args),
        allow_large=args.allow_large)
    if not _distributed.is_writer():
        return 0
    with replaced_dir(args.out) as tmp:
        files = result.write(tmp)
    if not args.quiet:
        print(result)
        print(f"wrote {len(files)} files to {args.out}")
    return 0
