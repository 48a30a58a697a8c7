"""``simulate --posterior``: ``--replicates`` means what ``--help`` says (the total, split over
the draws), and the per-draw replicates of the main design and of the grid have their own
names."""

from __future__ import annotations

import json
from pathlib import Path

from tomstats.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def test_simulate_names_per_draw_replicates_apart(structural_fit, tmp_path, capsys):
    """simulate --posterior: --replicates-per-draw and --grid-replicates-per-draw are the
    studies per draw; --replicates is the total, split over the draws."""
    base = ["simulate", str(REPO / "simulations" / "paper.toml"), "--posterior",
            str(structural_fit), "--draws", "4", "--allow-warnings", "--no-figures", "--quiet"]
    assert main([*base, "--replicates-per-draw", "3", "--grid-replicates-per-draw", "2",
                 "--out", str(tmp_path / "a")]) == 0
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (s["replicates_per_draw"], s["sensitivity_replicates_per_draw"]) == (3, 2)
    assert main([*base, "--replicates", "20", "--out", str(tmp_path / "b")]) == 0
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s["replicates_per_draw"] == 5  # ceil(20 / 4 draws)
    # without --posterior the per-draw options are refused before work
    capsys.readouterr()
    rc = main(["simulate", str(REPO / "simulations" / "paper.toml"), "--replicates-per-draw",
               "3", "--out", str(tmp_path / "c")])
    assert rc == 2 and "--replicates-per-draw needs --posterior" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
    help_text = " ".join(build_parser(["simulate"])._subparsers._group_actions[0]
                         .choices["simulate"].format_help().split())
    assert "ceil(replicates / draws) per draw, unless --replicates-per-draw" in help_text
