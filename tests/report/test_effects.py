"""The fit report answers "is there an effect?": probability of direction and a ROPE."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest
from _report_data import make_fit, make_formula_fit

from tomstats.report.sections.effects import (
    effects_section,
    effects_table,
    key_effects,
    parse_rope,
)

ROOT = Path(__file__).resolve().parents[2]


def _gamma_near_zero():
    idata = make_fit()
    rng = np.random.default_rng(5)
    idata.posterior["gamma"] = (("chain", "draw"), rng.normal(0.1, 0.1, (2, 200)))
    return idata


def test_probability_of_direction_and_hdi() -> None:
    idata = _gamma_near_zero()
    tab = effects_table(key_effects(idata)).set_index("effect")
    x = idata.posterior["gamma"].to_numpy().ravel()
    row = tab.loc["γ (ToM order)"]
    assert row["P(> 0)"] == pytest.approx(np.mean(x > 0))
    assert row["pd"] == pytest.approx(max(np.mean(x > 0), np.mean(x < 0)))
    assert 0.75 < row["pd"] < 0.92  # ≈ Φ(1) = 0.84 for N(0.1, 0.1)
    lo, hi = az.hdi(x, hdi_prob=0.94)
    assert (row["HDI low"], row["HDI high"]) == pytest.approx((lo, hi), abs=1e-12)
    assert "higher ToM order lowers accuracy" in row["reading"]


def test_rope_decisions() -> None:
    idata = _gamma_near_zero()
    effects = key_effects(idata)
    x = idata.posterior["gamma"].to_numpy().ravel()
    tab = effects_table(effects, parse_rope(["gamma=0.5"])).set_index("effect")
    assert tab.loc["γ (ToM order)", "% in ROPE"] == pytest.approx(
        100 * np.mean((x >= -0.5) & (x <= 0.5)))
    assert "practically no effect" in tab.loc["γ (ToM order)", "decision"]
    tab = effects_table(effects, parse_rope(["gamma=-0.05,0.05"])).set_index("effect")
    assert "undecided" in tab.loc["γ (ToM order)", "decision"]
    tab = effects_table(key_effects(make_fit()), {"gamma": (-0.1, 0.1)}).set_index("effect")
    assert "practical size" in tab.loc["γ (ToM order)", "decision"]


def test_formula_fit_effects() -> None:
    names = [e.name for e in key_effects(make_formula_fit())]
    assert names == ["fb", "implicit", "fb:implicit"]
    sec = effects_section(make_formula_fit())
    assert "fb lowers the log-odds" in sec.blocks[0].text
    with pytest.raises(ValueError, match="not a key effect.*'fb'"):
        effects_section(make_formula_fit(), {"gamma": (-1.0, 1.0)})


@pytest.mark.parametrize("bad", ["gamma", "gamma=x", "gamma=1,0", "gamma=1,2,3"])
def test_parse_rope_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="--rope"):
        parse_rope([bad])


def test_cli_fit_report_has_effects(tmp_path: Path) -> None:
    from _fits import failed_fit

    fit = failed_fit()  # a structural fit written by tomstats fit (its checks fail: 30 draws)
    run = [sys.executable, "-m", "tomstats", "report", str(fit), "--sweep-draws", "0"]
    proc = subprocess.run([*run, "--out", str(tmp_path / "r.html"), "--rope", "gamma=0.1"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Is there an effect?" in html and "% in ROPE" in html
    assert html.index("Is there an effect?") < html.index(">Parameters<")
    proc = subprocess.run([*run, "--out", str(tmp_path / "s.html"), "--rope", "zeta=0.1"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "not a key effect" in proc.stderr
    assert not (tmp_path / "s.html").exists()
