"""A parameter whose posterior is barely narrower than its prior is named (fit output and
report); prior sds come from the prior's definition, checked against SciPy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from _fits import ROOT, fit_file
from scipy import stats

from tomstats.glmm.prior_width import prior_sd, prior_width


def test_prior_sd_against_scipy() -> None:
    assert prior_sd({"dist": "normal", "loc": 3.0, "scale": 2.0}) == pytest.approx(2.0)
    assert prior_sd({"dist": "half_normal", "scale": 1.5}) == pytest.approx(
        stats.halfnorm(scale=1.5).std())
    assert prior_sd({"dist": "student_t", "df": 5.0, "loc": 0.0, "scale": 2.0}) == \
        pytest.approx(stats.t(5, 0, 2).std())
    t = stats.t(5, 0, 2)
    m = t.expect(abs)
    half_sd = np.sqrt(t.expect(lambda x: x * x) - m * m)
    assert prior_sd({"dist": "half_student_t", "df": 5.0, "scale": 2.0}) == \
        pytest.approx(half_sd, rel=1e-6)
    assert prior_sd({"dist": "exponential", "rate": 4.0}) == pytest.approx(
        stats.expon(scale=0.25).std())
    assert prior_sd({"dist": "student_t", "df": 2.0, "loc": 0.0, "scale": 1.0}) == np.inf
    assert np.isnan(prior_sd({"dist": "lkj", "eta": 2.0}))


def test_unidentified_context_is_flagged(tmp_path) -> None:
    path, code, text = fit_file(200, 200, 2, data="narrow")
    assert code in (0, 4), text
    from tomstats.glmm import load_fit

    tab = prior_width(load_fit(path)).set_index("parameter")
    post = load_fit(path).posterior
    # independent: posterior sd of the sampled alpha_scaled against its N(0, 5) prior
    assert tab.loc["alpha", "ratio"] == pytest.approx(
        float(post["alpha_scaled"].std(ddof=1)) / 5.0, rel=1e-6)
    assert tab.loc["alpha", "prior_only"] and tab.loc["delta", "prior_only"]
    assert not tab.loc["gamma", "prior_only"]
    note = next(ln for ln in text.splitlines() if ln.startswith("note: the posterior of"))
    assert "alpha" in note and "delta" in note and "gamma" not in note
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "tomstats", "report", str(path), "--out",
                           str(out), "--sweep-draws", "0"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    warn = html.index('class="warning">The posterior of alpha')
    assert warn < html.index(">Parameters<")


def test_identified_fit_has_no_note() -> None:
    _path, _code, text = fit_file(30, 30, 2)
    assert "barely narrower than its prior" not in text
