"""A one-chain fit's report shows R-hat as n/a (verdict and table), lists only the priors
that apply, and lets no raw ArviZ warning through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _fits import ROOT, fit_file

from tomstats.glmm import load_fit
from tomstats.report.fit import fit_document
from tomstats.report.sections import FitContext
from tomstats.report.sections.parameters import parameter_table


def test_one_chain_rhat_is_na() -> None:
    path, code, text = fit_file(30, 30, 1)
    assert code == 4, text
    idata = load_fit(path)
    verdict = fit_document(idata, sweep_draws=0).sections[0].blocks[0]
    rhat = next(c for c in verdict.checks if c.name == "R-hat")
    assert rhat.passed is None and rhat.value == "n/a" and "one chain" in rhat.detail
    assert set(parameter_table(FitContext(idata))["R-hat"]) == {"n/a"}


def test_one_chain_report_is_quiet(tmp_path: Path) -> None:
    path, _code, _text = fit_file(30, 30, 1)
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "tomstats", "report", str(path), "--out",
                           str(out), "--sweep-draws", "0"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "Shape validation" not in proc.stderr
    html = out.read_text()
    prior_rows = html[html.index("<caption>Priors"):]
    prior_rows = prior_rows[:prior_rows.index("</table>")]
    assert "gamma" in prior_rows
    # two LLMs, independent capabilities: no population sd, no random slopes
    for absent in ("capability_sd", "sd_gamma_llm", "sd_alpha_llm_scaled"):
        assert absent not in prior_rows
