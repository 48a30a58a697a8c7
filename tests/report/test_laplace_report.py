"""``tomstats report FIT.json`` recognises a Laplace (maximum-likelihood) fit and reports it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _ml_fits import intercepts_fit
from scipy.stats import norm

from tomstats.glmm.lme_result import LaplaceFit
from tomstats.report.laplace import fixed_effects_table, is_laplace_fit, laplace_document

ROOT = Path(__file__).resolve().parents[2]


def _fit(converged: bool = True) -> LaplaceFit:
    beta, se = np.array([1.5, -2.0, 0.1]), np.array([0.3, 0.4, 0.5])
    return intercepts_fit(
        formula="correct ~ fb + implicit + (1 | model)", family="bernoulli", n_obs=512,
        coef_names=("Intercept", "fb", "implicit"), beta=beta, se=se, cov=np.diag(se ** 2),
        groups=("model",), sd=np.array([0.7]),
        levels=(tuple(f"m{i}" for i in range(8)),), ranef=np.linspace(-1, 1, 8),
        loglik=-250.0, converged=converged, iterations=7, n_rows=512)


def test_fixed_effects_match_wald_formulas() -> None:
    tab = fixed_effects_table(_fit()).set_index("term")
    z = np.array([1.5 / 0.3, -2.0 / 0.4, 0.1 / 0.5])
    np.testing.assert_allclose(tab["z"], z)
    np.testing.assert_allclose(tab["p"], 2 * norm.sf(np.abs(z)))
    np.testing.assert_allclose(tab["95 % low"], [1.5 - 1.959964 * 0.3, -2.0 - 1.959964 * 0.4,
                                                 0.1 - 1.959964 * 0.5], atol=1e-6)


def test_document_blocks() -> None:
    doc = laplace_document(_fit(converged=False), "m.json")
    verdict = doc.sections[0].blocks[0]
    assert verdict.label == "FAIL"
    titles = [s.title for s in doc.sections]
    assert titles[1:] == ["Fixed effects", "Random effects", "Fit statistics", "Provenance"]
    text = " ".join(b.text for s in doc.sections for b in s.blocks if hasattr(b, "text"))
    assert "fb lowers the log-odds" in text and "implicit raises" in text
    assert "interval includes 0" in text and "interval excludes 0" in text


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_cli_reports_laplace_json(tmp_path: Path, fmt: str) -> None:
    fit = _fit().to_json(tmp_path / "fit.json")
    assert is_laplace_fit(fit)
    out = tmp_path / ("r.html" if fmt == "html" else "r")
    proc = subprocess.run([sys.executable, "-m", "tomstats", "report", str(fit), "--out",
                           str(out), "--format", fmt], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    page = (out if fmt == "html" else out / "report.md").read_text()
    assert "maximum likelihood" in page and "Fixed effects" in page and "AIC" in page
    assert "-2" in page and "0.7" in page


def test_cli_reports_lme_fit_with_slopes(tmp_path: Path) -> None:
    """An lme4-style fit with a random slope (JSON format "tomstats-lme-fit")."""
    from _report_data import formula_log

    from tomstats.glmm.lme_result import LmeFit

    csv, fit = tmp_path / "f.csv", tmp_path / "lme.json"
    formula_log(0)[0].to_csv(csv, index=False)
    run = [sys.executable, "-m", "tomstats"]
    proc = subprocess.run([*run, "fit", str(csv), "--model", "correct ~ fb + (1 + fb | model)",
                           "--backend", "laplace", "--out", str(fit)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode in (0, 4), proc.stderr
    assert is_laplace_fit(fit)
    out = tmp_path / "r.html"
    proc = subprocess.run([*run, "report", str(fit), "--out", str(out)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    res = LmeFit.from_json(fit)
    fe = fixed_effects_table(res).set_index("term")
    np.testing.assert_allclose(fe["z"], res.beta / res.se)
    assert "Variance components" in page and "fb lowers the log-odds" in page
    assert "(Intercept) raises" not in page
