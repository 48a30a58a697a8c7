"""Outputs never overwrite inputs (issue 31, item 9).

``summarize t.csv --out t.csv --force`` used to replace the log with its summary; now every
command refuses, before any work (exit 2, the input byte for byte as it was), an ``--out``
(or ``--plot``) that is one of its inputs — under the same name, another spelling, a symbolic
link or a hard link — or a result folder that holds one (``--force`` replaces the folder
whole). A symbolic link given as a result folder with ``--force`` is replaced without leaving
the link behind as a hidden temporary.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _tables import small_table as _table

from tomstats.cli import main


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def _same_spelled_otherwise(tmp: Path) -> str:
    (tmp / "sub").mkdir(exist_ok=True)
    return "sub/../t.csv"


def _symlink(tmp: Path) -> str:
    os.symlink(tmp / "t.csv", tmp / "link.csv")
    return "link.csv"


def _hardlink(tmp: Path) -> str:
    os.link(tmp / "t.csv", tmp / "hard.csv")
    return "hard.csv"


def _absolute(tmp: Path) -> str:
    return str(tmp / "t.csv")


SPELLINGS = {"same name": lambda tmp: "t.csv", "absolute path": _absolute,
             "sub/../t.csv": _same_spelled_otherwise, "symbolic link": _symlink,
             "hard link": _hardlink}

#: command → argv with {out} for the output; every one reads t.csv.
COMMANDS = {
    "summarize": ["summarize", "t.csv", "--out", "{out}", "--force"],
    "anova": ["anova", "t.csv", "--out", "{out}", "--force"],
    "contrasts": ["contrasts", "t.csv", "--out", "{out}", "--force"],
    "report": ["report", "t.csv", "--out", "{out}", "--force"],
    "fit": ["fit", "t.csv", "--model", "correct ~ tom_order + (1 | model)", "--backend",
            "laplace", "--out", "{out}", "--force"],
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_out_naming_the_input_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], command: str,
                                         spelling: str) -> None:
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    out = SPELLINGS[spelling](tmp_path)
    before = _snapshot(tmp_path)
    argv = [a.format(out=out) for a in COMMANDS[command]]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith(f"tomstats {command}: error: "), err
    assert "would destroy the input" in err[0], err[0]
    assert _snapshot(tmp_path) == before


def _other_inputs(tmp: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Commands whose input is not a table: (argv, files that must keep their content)."""
    from _ml_fits import intercepts_fit
    from _report_data import make_formula_fit, save_fit, write_simulation_dir

    fit = intercepts_fit(formula="correct ~ tom_order + (1 | model)", family="bernoulli",
                         n_obs=4, coef_names=("Intercept", "tom_order"),
                         beta=np.array([1.0, -0.5]), se=np.array([0.1, 0.1]),
                         cov=np.eye(2) * 0.01, groups=("model",), sd=np.array([0.5]),
                         levels=(("a", "b"),), ranef=np.array([0.1, -0.1]),
                         loglik=-2.0, converged=True, iterations=3, n_rows=4)
    fit.to_json(tmp / "a.json")
    os.symlink(tmp / "a.json", tmp / "table.csv")
    save_fit(make_formula_fit(), tmp / "f.nc")
    os.symlink(tmp / "f.nc", tmp / "p.toml")
    (tmp / "host.txt").write_text("A quiet afternoon in the old town. " * 40)
    sim = write_simulation_dir(tmp / "sim")
    (tmp / "folder").mkdir()
    _table(tmp / "folder" / "t.csv")
    return {
        "compare --out, a link to an input fit": (
            ["compare", "a.json", "b=a.json", "--out", "table.csv", "--force"], ["a.json"]),
        "calibrate --out, a link to the fit": (
            ["calibrate", "f.nc", "--out", "p.toml", "--force"], ["f.nc"]),
        "stories --weave, the same file": (
            ["stories", "--n-per-cell", "1", "--weave", "host.txt", "--out", "host.txt",
             "--force"], ["host.txt"]),
        "report --simulation, the same folder": (
            ["report", "--simulation", "sim", "--format", "md", "--out", "sim", "--force"],
            [str(p.relative_to(tmp)) for p in sim.rglob("*") if p.is_file()]),
        "report --format md, a folder holding the log": (
            ["report", "folder/t.csv", "--format", "md", "--out", "folder", "--force"],
            ["folder/t.csv"]),
        "evaluate --out, the item file": (
            ["evaluate", "--items", "host.txt", "--model", "m.toml", "--out", "host.txt"],
            ["host.txt"]),
    }


@pytest.mark.parametrize("case", ["compare --out, a link to an input fit",
                                  "calibrate --out, a link to the fit",
                                  "stories --weave, the same file",
                                  "report --simulation, the same folder",
                                  "report --format md, a folder holding the log",
                                  "evaluate --out, the item file"])
def test_other_commands_refuse_to_overwrite_inputs(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str],
                                                   case: str) -> None:
    monkeypatch.chdir(tmp_path)
    argv, kept = _other_inputs(tmp_path)[case]
    before = {k: (tmp_path / k).read_bytes() for k in kept}
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "would destroy the input" in err, err
    assert {k: (tmp_path / k).read_bytes() for k in kept} == before


def test_symlinked_out_folder_leaves_no_temporary(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``--out link --force`` where ``link`` points at an earlier result folder: the new
    result replaces the link (the folder it pointed at is left as it was) and no hidden
    ``.link.*`` entry remains."""
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.md").write_text("earlier\n")
    os.symlink(tmp_path / "old", tmp_path / "link")
    assert main(["report", "t.csv", "--format", "md", "--out", "link", "--force"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "old", "t.csv"]
    assert (tmp_path / "link").is_dir() and not (tmp_path / "link").is_symlink()
    assert (tmp_path / "old" / "report.md").read_text() == "earlier\n"
    assert "accuracy" in (tmp_path / "link" / "report.md").read_text().lower()


def test_a_new_out_beside_the_input_still_works(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    assert main(["summarize", "t.csv", "--out", "s.csv"]) == 0
    assert main(["summarize", "t.csv", "--out", "s.csv", "--force"]) == 0
    assert (tmp_path / "s.csv").read_text() != (tmp_path / "t.csv").read_text()
