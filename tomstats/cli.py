"""The ``tomstats`` command line.

Each subcommand lives with its stage: the table below names the module and the two
functions (``add_*_arguments(parser)`` and ``run_*(args) -> int``) that implement it.
Modules are imported only when their subcommand runs, so ``tomstats --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from tomstats._cli_options import DefaultsHelpFormatter
from tomstats._printable import PrintableStream, printable
from tomstats._version import __version__

__all__ = ["EXAMPLES", "examples_epilog", "main", "written_with_warnings"]

# name -> (module, argument-adder, runner, one-line help)
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "reproduce": ("tomstats.simulation.reproduce", "add_reproduce_arguments", "run_reproduce",
                  "run the simulation paper (Table 1, cells, 7×7 sensitivity, Figures 1–5)"),
    "simulate": ("tomstats.simulation.reproduce", "add_simulate_arguments", "run_simulate",
                 "run a simulation TOML (optionally once per posterior draw of a fit)"),
    "power": ("tomstats.planning.cli", "add_power_arguments", "run_power",
              "power and assurance curves: how many questions, stories and LLMs a study needs"),
    "stories": ("tomstats.stories.cli", "add_stories_arguments", "run_stories",
                "generate story items (context length × ToM order) as JSON Lines"),
    "evaluate": ("tomstats.evaluate.cli", "add_evaluate_arguments", "run_evaluate",
                 "put items to a language model and write a per-question log"),
    "fit": ("tomstats.glmm.cli", "add_fit_arguments", "run_fit",
            "fit a GLMM to an evaluation log: Bayesian (structural or formula), or maximum "
            "likelihood with --backend laplace"),
    "calibrate": ("tomstats.glmm.cli", "add_calibrate_arguments", "run_calibrate",
                  "turn a structural fit's posterior into simulator parameters"),
    "compare": ("tomstats.glmm.compare", "add_compare_arguments", "run_compare",
                "compare sampler fits by LOO (ArviZ's table and plot), or Laplace fits by "
                "likelihood-ratio tests (lme4's anova)"),
    "summarize": ("tomstats.analysis.cli", "add_summarize_arguments", "run_summarize",
                  "accuracy by model × context × ToM order with Wilson intervals and the "
                  "error taxonomy of an evaluation log"),
    "anova": ("tomstats.analysis.cli", "add_anova_arguments", "run_anova",
              "the paper's ANOVA table (η², partial η², ω², generalized η², intervals) for a "
              "real evaluation log"),
    "contrasts": ("tomstats.glmm.contrasts_cli", "add_contrasts_arguments", "run_contrasts",
                  "marginal means and contrasts (emmeans): which ToM orders differ, at which "
                  "context lengths, by how much; after the ANOVA or a GLMM fit"),
    "report": ("tomstats.report.cli", "add_report_arguments", "run_report",
               "write an HTML/Markdown report for a fit, an evaluation log or a simulation "
               "folder"),
}

#: The examples that end each ``--help`` ("" for ``tomstats --help``): command lines as a user
#: types them (tests/test_cli_help.py parses every one with the command's own parser).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("tomstats stories --out items.jsonl --n-per-cell 4 --seed 0",
         "tomstats evaluate --items items.jsonl --model models/heuristic-recency.toml "
         "--out run.jsonl",
         "tomstats anova run.jsonl",
         "tomstats fit run.jsonl --model structural --out fit.nc",
         "tomstats report fit.nc --out fit.html"),
    "reproduce": ("tomstats reproduce --out out/",
                  "tomstats reproduce --out quick/ --replicates 50 --no-figures"),
    "simulate": ("tomstats simulate simulations/paper.toml --out sim/",
                 "tomstats simulate simulations/paper.toml --posterior fit.nc --draws 100 "
                 "--out calibrated/"),
    "power": ("tomstats power simulations/power.toml --out power/",
              "tomstats power simulations/power.toml --along questions_per_cell=2,4,6,10,20 "
              "--out power-q/",
              "tomstats power --from-fit fit.json --data pilot.csv --term tom_order "
              "--out power-fit/",
              "tomstats power simulations/power.toml --compare-story-designs "
              "--along questions_per_cell=6,12,24 --test glmm-wald:alpha --out designs/"),
    "stories": ("tomstats stories --out items.jsonl --n-per-cell 4 --seed 0",
                "tomstats stories --design anatom --n 40 --seed 1 --all-types "
                "--out anatom.jsonl",
                "tomstats stories audit items.jsonl",
                "tomstats stories --out ladders.jsonl --n-per-cell 48 --seed 1 --within-story",
                "tomstats stories audit ladders.jsonl --per-length"),
    "evaluate": ("tomstats evaluate --items items.jsonl --model models/heuristic-recency.toml "
                 "--out run.jsonl",
                 "tomstats evaluate --repair run.jsonl"),
    "fit": ("tomstats fit run.jsonl --model structural --out fit.nc",
            "tomstats fit log.csv --map correct=is_correct,model=run_dir --model structural "
            "--out fit.nc",
            "tomstats fit log.csv --model 'correct ~ tom_order * log_context + (1 | model) + "
            "(1 | item)' --backend laplace --out fit.json"),
    "calibrate": ("tomstats calibrate fit.nc --out params.toml",
                  "tomstats calibrate fit.nc --prob 0.9 --out params.json"),
    "compare": ("tomstats compare structural=fit.nc formula=formula.nc --out loo.csv "
                "--plot loo.png",
                "tomstats compare intercepts.json slopes.json"),
    "summarize": ("tomstats summarize run.jsonl",
                  "tomstats summarize log.csv --map correct=is_correct --out cells.csv"),
    "anova": ("tomstats anova run.jsonl --ci 0.95",
              "tomstats anova log.csv --within tom_order context_words --subject model"),
    "contrasts": ("tomstats contrasts run.jsonl --specs tom_order --by context_words",
                  "tomstats contrasts log.csv --within tom_order context_words --specs "
                  "tom_order --adjust holm",
                  "tomstats contrasts run.jsonl --fit fit.json --specs tom_order "
                  "context_words --interaction --out contrasts.csv"),
    "report": ("tomstats report fit.nc --out fit.html",
               "tomstats report run.jsonl --out run.html",
               "tomstats report --simulation out/ --out paper.html"),
}


def examples_epilog(command: str) -> str:
    """The examples section of ``tomstats COMMAND --help`` (``""``: of ``tomstats --help``),
    kept as written by :class:`~tomstats._cli_options.DefaultsHelpFormatter`."""
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])


#: Exit codes of every subcommand (documented in the README and docs/getting-started.md):
#: 0 done; 1 some questions errored (re-running retries them); 2 bad input, nothing written;
#: 3 internal failure; 4 the result is written but its checks failed (sampler diagnostics, a
#: Laplace fit that did not converge, Pareto-k warnings): re-running the same command gives
#: the same result, ``--allow-warnings`` accepts it with 0. A reader that closes the pipe early
#: (``tomstats summarize LOG | head``) ends the command quietly with 141 = 128 + SIGPIPE, the
#: status a shell reports for ``yes | head``'s ``yes``; 130 = 128 + SIGINT on Ctrl-C.
EXIT_OK, EXIT_ERRORED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_WARNINGS = 0, 1, 2, 3, 4
EXIT_PIPE, EXIT_INTERRUPTED = 141, 130


def written_with_warnings(command: str, what: str, *, allow_warnings: bool,
                          advice: str = "") -> int:
    """The last line of a command whose result is written but failed its own checks, and its
    exit status: 4 (:data:`EXIT_WARNINGS`), or 0 with ``--allow-warnings``.

    The line is a warning in both cases (``tomstats CMD: warning: ...``), never an error: the
    result exists, and re-running gives the same one. ``advice`` (what to change) is printed
    only when the status is 4.
    """
    if allow_warnings:
        print(f"tomstats {command}: warning: {what} (exit 0: --allow-warnings)",
              file=sys.stderr)
        return EXIT_OK
    tail = f"; {advice}" if advice else ""
    print(f"tomstats {command}: warning: {what}{tail} (exit {EXIT_WARNINGS}: written with "
          f"warnings; pass --allow-warnings to accept it with exit 0)", file=sys.stderr)
    return EXIT_WARNINGS


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(load: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Build the parser; only the subcommands in ``load`` get their full arguments."""
    parser = _Parser(
        prog="tomstats",
        description="Separate theory-of-mind order from context length in LLM evaluations.",
        epilog=examples_epilog(""), formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tomstats {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="one of these; 'tomstats COMMAND --help' for its options")
    for name, (module, adder, _runner, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_,
                           epilog=examples_epilog(name), formatter_class=DefaultsHelpFormatter)
        if load is not None and name in load:
            getattr(importlib.import_module(module), adder)(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tomstats`` console command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(load=[command] if command in COMMANDS else [])
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    module, _adder, runner, _help = COMMANDS[args.command]
    joined = _join(args)
    if not isinstance(joined, bool):  # the exit status of a run that could not be joined
        return joined
    stdout = sys.stdout
    # what a command prints holds data (model names, answers, levels): control characters
    # in it are written as visible escapes, never sent to the terminal
    sys.stdout = PrintableStream(stdout)
    code = EXIT_INTERNAL
    try:
        code = _run(parser, args, module, runner)
        return code
    finally:
        sys.stdout = stdout
        if joined:
            from tomstats._distributed import finish

            finish(code)


def _join(args: argparse.Namespace) -> bool | int:
    """Join the multi-process run the options ask for (docs/cluster.md): whether one was
    joined, or the exit status when it cannot be (2: options that do not go together; 3: the
    coordinator not reached). A process that leaves the run removes its temporaries beside
    ``--out`` first."""
    from tomstats._cli_options import start_distributed

    try:
        if not start_distributed(args):
            return False
    except ValueError as exc:
        print(f"tomstats {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:  # DistributedError
        print(f"tomstats {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INTERNAL
    from tomstats import _distributed
    from tomstats._io import remove_own_temporaries

    out = getattr(args, "out", None)
    if out is not None:
        _distributed.on_abort(lambda: remove_own_temporaries(out))
    return True


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, module: str,
         runner: str) -> int:
    """Run the command; map its exceptions to the exit codes of :data:`EXIT_BAD_INPUT` & co."""
    try:
        _refuse_overwriting_inputs(parser, args)
        code = int(getattr(importlib.import_module(module), runner)(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader of stdout went away (``| head``): not bad input; stop quietly
        _silence_stdout()
        return EXIT_PIPE
    except (ValueError, TypeError, OSError) as exc:
        # bad input: a file, a field or a value the user can fix (OSError: unreadable input,
        # unwritable --out); one line, no traceback
        if os.environ.get("TOMSTATS_DEBUG"):
            traceback.print_exc()
        print(f"tomstats {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RecursionError, OverflowError, MemoryError) as exc:
        # an input too deep or too large for this machine: still bad input, not a bug
        if os.environ.get("TOMSTATS_DEBUG"):
            traceback.print_exc()
        print(f"tomstats {args.command}: error: {_too_large(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"tomstats {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the last line of defence: exit 3, not 1
        if os.environ.get("TOMSTATS_DEBUG"):
            traceback.print_exc()
        print(f"tomstats {args.command}: internal error: {type(exc).__name__}: "
              f"{_one_line(exc)} (a bug in tomstats: please report it; set TOMSTATS_DEBUG=1 "
              "for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


#: Options that name what a command writes; every other path it is given is an input.
_OUTPUT_DESTS = ("out", "plot")


def _refuse_overwriting_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, an ``--out``/``--plot`` that is one of the command's input
    files (also through a link or another spelling) or a folder holding one
    (:func:`tomstats._io.refuse_inputs_as_outputs`). Every other argument that names an
    existing path is an input (``NAME=PATH`` arguments by their ``PATH``)."""
    from tomstats._io import refuse_inputs_as_outputs

    values = vars(args)
    if all(values.get(d) is None for d in _OUTPUT_DESTS):
        return
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = {a.dest: (a.option_strings[-1] if a.option_strings else a.dest.upper())
             for a in sub.choices[args.command]._actions}
    outputs = {names.get(d, d): values[d] for d in _OUTPUT_DESTS if values.get(d) is not None}
    inputs: dict[str, list[str]] = {}
    for dest, v in values.items():
        if dest in _OUTPUT_DESTS or dest == "command":
            continue
        given = [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)]
        given += [x.split("=", 1)[1] for x in given if "=" in x]
        if given:
            inputs[names.get(dest, dest)] = given
    refuse_inputs_as_outputs(outputs, inputs)


def _silence_stdout() -> None:
    """Point stdout at the null device, so that the final flush of the interpreter does not
    raise again on the closed pipe (the idiom of the Python documentation on SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stdout without a file descriptor
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
    finally:
        os.close(devnull)


def _too_large(exc: BaseException) -> str:
    """The one line for an input that is too deep or too large (exit 2)."""
    if isinstance(exc, RecursionError):
        return ("an input is nested too deeply to read (JSON or TOML nested thousands of "
                "levels deep)")
    if isinstance(exc, OverflowError):
        return f"a number is too large: {_one_line(exc)}"
    return ("out of memory: the input or a size option is too large for this machine; make "
            "it smaller")


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return printable(" ".join(text.split()), keep="")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
