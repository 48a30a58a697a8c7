"""The significance level and the context decay no longer share the name alpha on the command
line: ``--level`` is the level, ``--along alpha_context=…`` varies equation (1)'s α; the old
spellings still work with a deprecation line. ``--replicates`` says what it means with a
posterior."""

from __future__ import annotations

import json
from pathlib import Path

from tomstats.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
BASE = ["power", str(REPO / "simulations" / "power.toml"), "--test", "anova:context_length",
        "--replicates", "20", "--no-figures", "--quiet"]


def _settings(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())["settings"]


def test_level_and_alpha_context(tmp_path, capsys):
    assert main([*BASE, "--along", "alpha_context=0,0.0002", "--level", "0.01",
                 "--out", str(tmp_path / "a")]) == 0
    s = _settings(tmp_path / "a")
    assert s["alpha"] == 0.01 and s["along"] == "alpha"
    assert "deprecated" not in capsys.readouterr().err


def test_old_spellings_work_with_a_deprecation_line(tmp_path, capsys):
    assert main([*BASE, "--along", "alpha=0,0.0002", "--alpha", "0.01",
                 "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "--alpha is deprecated; use --level" in err
    assert "alpha=... is deprecated; use --along alpha_context=" in err
    s = _settings(tmp_path / "b")
    assert s["alpha"] == 0.01 and s["along"] == "alpha"


def test_help_names_them_apart():
    sp = build_parser(["power"])._subparsers._group_actions[0].choices["power"]
    text = " ".join(sp.format_help().split())
    assert "--level A significance level" in text
    assert "alpha_context" in text and "--alpha A deprecated spelling of --level" in text
    assert "each draw serves about replicates/draws studies" in text

