"""A fit that failed its own checks is refused downstream (exit 2, naming the checks) unless
``--allow-warnings``; what is built on it says so at the top (one check:
:mod:`tomstats.glmm.verdict`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _fits import ROOT, RUN, failed_fit
from _report_data import make_fit

from tomstats.glmm.verdict import failed_checks, require_sound_fit


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN, *args], capture_output=True, text=True, cwd=ROOT)


def test_failed_checks_of_synthetic_fits() -> None:
    good, bad = make_fit(draws=1000), make_fit(draws=1000, diverging=3)
    assert failed_checks(good) == ()
    assert failed_checks(bad) == ("divergences",)
    with pytest.raises(ValueError, match=r"failed its own checks \(divergences\).*"
                                         r"--allow-warnings"):
        require_sound_fit(bad, allow_warnings=False, name="x.nc")
    assert require_sound_fit(bad, allow_warnings=True) == ("divergences",)


@pytest.fixture(scope="module")
def bad() -> Path:
    return failed_fit()


def test_simulate_posterior_refuses_then_allows(bad: Path, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    cfg = str(ROOT / "simulations" / "paper.toml")
    proc = _run("simulate", cfg, "--posterior", str(bad), "--draws", "2", "--replicates",
                "2", "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert "failed its own checks (rhat" in proc.stderr and "--allow-warnings" in proc.stderr
    assert not out.exists()
    proc = _run("simulate", cfg, "--posterior", str(bad), "--draws", "2", "--replicates",
                "2", "--out", str(out), "--allow-warnings")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("warning: the fit failed its own checks (rhat")
    summary = json.loads((out / "summary.json").read_text())
    assert "rhat" in summary["fit"]["failed_checks"]
    html = tmp_path / "sweep.html"
    proc = _run("report", "--simulation", str(out), "--out", str(html))
    assert proc.returncode == 0, proc.stderr
    text = html.read_text()
    warn = text.index('class="warning"')
    assert "failed its own checks (rhat" in text[warn:warn + 300]
    assert warn < text.index("Calibrated η² decomposition")  # at the top


def test_power_posterior_refuses(bad: Path, tmp_path: Path) -> None:
    out = tmp_path / "power"
    proc = _run("power", str(ROOT / "simulations" / "power.toml"), "--posterior", str(bad),
                "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert "failed its own checks (rhat" in proc.stderr and "--allow-warnings" in proc.stderr
    assert not out.exists()
    proc = _run("power", str(ROOT / "simulations" / "power.toml"), "--posterior", str(bad),
                "--allow-warnings", "--along", "questions_per_cell=10,20", "--test",
                "anova:tom_order", "--replicates", "20", "--draws", "5", "--out", str(out),
                "--no-figure", "--quiet")
    assert proc.returncode == 0, proc.stderr
    html = tmp_path / "power.html"
    assert _run("report", "--simulation", str(out), "--out", str(html)).returncode == 0
    text = html.read_text()
    warn = text.index('class="warning">The fit')
    assert "failed its own checks (rhat" in text[warn:warn + 200]
    assert warn < text.index("Assumptions")  # at the top


def test_calibrate_refuses_then_allows(bad: Path, tmp_path: Path) -> None:
    out = tmp_path / "params.toml"
    proc = _run("calibrate", str(bad), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "failed its own checks (rhat" in proc.stderr and not out.exists()
    proc = _run("calibrate", str(bad), "--out", str(out), "--allow-warnings")
    assert proc.returncode == 0, proc.stderr
    assert "failed its own checks" in proc.stderr and out.is_file()
