"""One set of command-line conventions over every subcommand, checked on the parsers that
``tomstats.cli`` builds: every option's default in ``--help``, one progress flag
(``--progress/--no-progress``, default: when stderr is a terminal), ``--no-figures`` wherever
figures are made, and no progress-bar lines in redirected output."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tomstats._cli_options import DefaultsHelpFormatter
from tomstats.cli import COMMANDS, build_parser

REPO = Path(__file__).resolve().parents[1]

#: Subcommands that show progress bars (long simulations, samplers, model calls).
PROGRESS = ("reproduce", "simulate", "power", "stories", "evaluate", "fit", "report")
#: Subcommands that write figures.
FIGURES = ("reproduce", "simulate", "power")
_FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction,
          argparse.BooleanOptionalAction, argparse._HelpAction, argparse._VersionAction)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(load=list(COMMANDS))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_shows_its_default(name):
    sp = _subparsers()[name]
    assert sp.formatter_class is DefaultsHelpFormatter
    fmt = sp._get_formatter()
    missing = []
    for a in sp._actions:
        if not a.option_strings or a.required or a.help == argparse.SUPPRESS:
            continue
        if isinstance(a, _FLAGS) and not isinstance(a, argparse.BooleanOptionalAction):
            continue  # an off switch: its default is "off"
        if "default" not in fmt._expand_help(a).lower():
            missing.append(a.option_strings[-1])
    assert not missing, f"tomstats {name}: options without a stated default: {missing}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_one_progress_flag(name):
    sp = _subparsers()[name]
    opts = {o: a for a in sp._actions for o in a.option_strings}
    if name in PROGRESS:
        a = opts.get("--progress")
        assert a is not None and isinstance(a, argparse.BooleanOptionalAction), name
        assert "--no-progress" in a.option_strings and a.default is None
        assert "terminal" in a.help
    else:
        assert "--progress" not in opts and "--no-progress" not in opts, name


@pytest.mark.parametrize("name", FIGURES)
def test_no_figures_wherever_figures_are_made(name):
    opts = {o for a in _subparsers()[name]._actions for o in a.option_strings}
    assert "--no-figures" in opts


def test_progress_resolves_to_the_terminal():
    from tomstats._cli_options import progress_wanted

    sp = _subparsers()["power"]
    assert progress_wanted(sp.parse_args(["x.toml", "--out", "o", "--progress"])) is True
    assert progress_wanted(sp.parse_args(["x.toml", "--out", "o", "--no-progress"])) is False
    # under pytest stderr is captured, not a terminal
    assert progress_wanted(sp.parse_args(["x.toml", "--out", "o"])) is sys.stderr.isatty()


def test_redirected_output_has_no_progress_lines(tmp_path):
    """stderr redirected to a file: no tqdm bar, no compilation notice; with --progress the
    first-run compilation is announced."""
    cmd = [sys.executable, "-m", "tomstats", "power", str(REPO / "simulations" / "power.toml"),
           "--along", "questions_per_cell=10", "--test", "anova:tom_order",
           "--replicates", "20", "--no-figures"]
    quiet = subprocess.run([*cmd, "--out", str(tmp_path / "a")], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "study/s" not in quiet.stderr and "\r" not in quiet.stderr
    assert "compiling" not in quiet.stderr
    loud = subprocess.run([*cmd, "--out", str(tmp_path / "b"), "--progress"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "compiling the study program, about" in loud.stderr
    assert "once per shape" in loud.stderr


def test_reproduce_announces_its_compilation(tmp_path):
    cmd = [sys.executable, "-m", "tomstats", "reproduce", "--replicates", "2", "--no-figures",
           "--quiet"]
    quiet = subprocess.run([*cmd, "--out", str(tmp_path / "a")], capture_output=True,
                           text=True, timeout=600, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "compiling" not in quiet.stderr and "rep/s" not in quiet.stderr
    loud = subprocess.run([*cmd, "--out", str(tmp_path / "b"), "--progress"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "compiling the simulation programs, about" in loud.stderr
