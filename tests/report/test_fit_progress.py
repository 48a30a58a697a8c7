"""``tomstats report FIT.nc``: the long silent phases (posterior predictive checks, PSIS-LOO,
the calibrated sweep) get one line on stderr before and their time after, with
``--progress`` (the project's convention: default on only when stderr is a terminal)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _fits import ROOT, failed_fit


def test_progress_lines_name_the_long_phases(tmp_path: Path) -> None:
    path = failed_fit()
    cmd = [sys.executable, "-m", "tomstats", "report", str(path), "--out",
           str(tmp_path / "r.html"), "--sweep-draws", "0", "--progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("report: ")]
    starts = [x for x in lines if x.endswith("…")]
    assert [x.split(" (")[0] for x in starts] == [
        "report: posterior predictive checks", "report: PSIS-LOO"]  # no sweep: 0 draws
    done = [x for x in lines if " done in " in x]
    assert len(done) == 2 and all(x.endswith(" s") for x in done)
    assert (tmp_path / "r.html").stat().st_size > 0


def test_no_progress_lines_unless_asked(capsys, monkeypatch) -> None:
    from tomstats.report import fit

    def slow(ctx):  # noqa: ANN001, ANN202 - a stand-in section maker
        return "section"

    monkeypatch.setitem(fit._SLOW_SECTIONS, slow, "a slow phase (why)")
    ctx = type("Ctx", (), {"sweep_draws": 0})()
    assert fit._made(slow, ctx, False) == "section"
    assert capsys.readouterr().err == ""
    assert fit._made(slow, ctx, True) == "section"
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "report: a slow phase (why) …" and err[1].startswith(
        "report: a slow phase done in ")
    assert fit._made(lambda c: "quick", ctx, True) == "quick"  # not a slow section: silent
    assert capsys.readouterr().err == ""
