"""Every ``--help`` of ``tomstats`` ends with examples that parse, and every option has help
text (issue 33, part 5); ``stories`` reports what it wrote on stdout like every other command.

The walk covers the top-level parser and each subcommand's full parser
(``build_parser(load=...)``); the defaults shown are checked by
tests/test_cli_conventions.py.
"""

from __future__ import annotations

import argparse
import shlex

import pytest

from tomstats.cli import COMMANDS, EXAMPLES, build_parser, main


def _parsers() -> dict[str, argparse.ArgumentParser]:
    top = build_parser(load=list(COMMANDS))
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"": top, **sub.choices}


PARSERS = _parsers()


def test_every_command_has_examples() -> None:
    assert set(EXAMPLES) == set(PARSERS)


@pytest.mark.parametrize("name", list(PARSERS), ids=lambda n: n or "tomstats")
def test_help_ends_with_examples(name: str) -> None:
    text = PARSERS[name].format_help().rstrip("\n")
    section = text[text.rindex("\nexamples:\n") + 1:].splitlines()
    lines = [ln.strip() for ln in section[1:]]
    assert lines == list(EXAMPLES[name]), text  # the last section, each command whole
    assert len(lines) >= 1 and all(ln.startswith("tomstats ") for ln in lines)


@pytest.mark.parametrize("name", list(PARSERS), ids=lambda n: n or "tomstats")
def test_every_option_has_help(name: str) -> None:
    parser = PARSERS[name]
    missing = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
               if not a.help or not a.help.strip()]
    assert not missing, f"tomstats {name}: options without help: {missing}"


@pytest.mark.parametrize(("name", "line"), [(n, ln) for n, lines in EXAMPLES.items()
                                            for ln in lines])
def test_examples_parse(name: str, line: str) -> None:
    """Each example is a command line the command's parser accepts (options spelled as the
    parser has them, values of the right type)."""
    argv = shlex.split(line)[1:]
    args = build_parser(load=[argv[0]]).parse_args(argv)
    assert args.command == (name or argv[0])


def test_target_accept_help_shows_default() -> None:
    text = PARSERS["fit"].format_help()
    row = text[text.index("\n  --target-accept"):text.index("\n  --max-tree-depth")]
    assert "acceptance" in row and "(default 0.9)" in " ".join(row.split())


def test_stories_reports_what_it_wrote_on_stdout(tmp_path, capsys) -> None:
    out = tmp_path / "items.jsonl"
    assert main(["stories", "--out", str(out), "--n-per-cell", "2", "--contexts", "200",
                 "--orders", "0", "1", "--seed", "0", "--no-progress"]) == 0
    cap = capsys.readouterr()
    n = sum(1 for line in out.read_text(encoding="utf-8").splitlines() if line.strip())
    assert f"wrote {n} items to {out}" in cap.out
    assert "wrote" not in cap.err
