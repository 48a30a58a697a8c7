"""The interpreted Laplace fit (:mod:`tomstats.glmm.lme_numpy`): its gradient is the
derivative of the deviance, it finds the compiled solver's optimum with the same result
(fixed effects, SEs, :math:`\\theta`, conditional modes and variances, log-likelihood), it
never imports JAX, and the engine option is checked like every other.

Its agreement with lme4 is tested where the references are: ``test_glmm_lme.py`` (slopes,
``||``, nesting, a singular fit; the default engine), ``test_laplace.py`` (random
intercepts, both engines) and ``test_laplace_backend.py`` (no random terms: statsmodels).
Here each engine comparison compiles one JAX fit, so they are in the slow run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.glmm._hints import InputError
from tomstats.glmm._theta import TermShape
from tomstats.glmm.lme import NUMPY_MAX_EFFECTS, choose_engine, fit_lme

REPO = Path(__file__).resolve().parents[2]
REF = REPO / "tests" / "reference"


def _case(file: str, name: str) -> dict:
    """A simulated case of a committed lme4 reference (its data are in the JSON)."""
    cases = {c["name"]: c for c in json.loads((REF / file).read_text())["cases"]}
    return cases[name]


def _frame(case: dict) -> pd.DataFrame:
    return pd.DataFrame(case["data"])


def _sim(seed: int = 4, n_g: int = 12, n_items: int = 15) -> pd.DataFrame:
    """LLM x item log, one row per pair: a correlated LLM slope of x and item intercepts."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_g), n_items)
    item = np.tile(np.arange(n_items), n_g)
    x = rng.normal(size=g.size)
    b = rng.multivariate_normal([0, 0], [[0.8, 0.2], [0.2, 0.3]], n_g)
    eta = 0.2 + 0.5 * x + b[g, 0] + b[g, 1] * x + rng.normal(0, 0.7, n_items)[item]
    y = (rng.random(g.size) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"y": y, "x": x, "g": g, "item": item})


def test_gradient_is_the_derivative_of_the_deviance():
    """The exact gradient (module docstring) against central differences of the deviance,
    at a point away from the optimum (where the mode's response to the parameters
    matters), for a correlated slope term next to an intercept term."""
    from tomstats.glmm.lme_numpy import _Laplace, _rows

    fit = fit_lme(_sim(), "y ~ x + (1 + x | g) + (1 | item)", engine="numpy")
    d = fit.design
    lap = _Laplace(d.Xc, d.y, np.ones_like(d.y), np.zeros_like(d.y), _rows(d.Zs, d.gs, d.shapes),
                   d.shapes)
    rng = np.random.default_rng(1)
    phi = np.concatenate([fit.theta, [0.0, 0.0]]) + rng.normal(0, 0.3, fit.theta.size + 2)
    _, grad = lap.value_grad(phi)
    h = 1e-5
    fd = [(lap.value_grad(phi + e)[0] - lap.value_grad(phi - e)[0]) / (2 * h)
          for e in np.eye(phi.size) * h]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)
    assert np.max(np.abs(grad)) > 1.0  # away from the optimum, so the check means something


#: Each compiles a JAX fit (10-20 s on two busy cores), so all are in the slow run; the
#: default run compares the engines through test_laplace_backend.py (random intercepts: the
#: default fit against laplace_fit) and test_glmm_lme.py::test_hessian_se_is_exact (the
#: default fit's SEs against the JAX deviance's finite-difference Hessian).
ENGINE_CASES = [
    # correlated slope whose second diagonal of T is 0 at the optimum (a singular fit)
    pytest.param("lme4_slopes.json", "sim_singular_slope", marks=pytest.mark.slow),
    pytest.param("lme4_slopes.json", "sim_uncorrelated_binomial", marks=pytest.mark.slow),
    pytest.param("lme4_slopes.json", "sim_nested_several_terms", marks=pytest.mark.slow),
    pytest.param("lme4_laplace.json", "sim_crossed_bernoulli", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("file, name", ENGINE_CASES)
def test_the_engines_give_the_same_fit(file, name):
    case = _case(file, name)
    df = _frame(case)
    a = fit_lme(df, case["formula"], engine="numpy")
    b = fit_lme(df, case["formula"], engine="jax")
    assert a.converged and b.converged and a.se_method == b.se_method
    np.testing.assert_allclose(a.beta, b.beta, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.se, b.se, rtol=1e-5)
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-5)
    np.testing.assert_allclose(a.b, b.b, rtol=0, atol=1e-5)
    np.testing.assert_allclose(a.b_var, b.b_var, rtol=1e-4, atol=1e-8)
    assert a.loglik == pytest.approx(b.loglik, abs=1e-7)
    assert a.singular == b.singular == case["singular"]
    # the same result type, so the same reports
    ci_a, ci_b = a.confint(method="wald"), b.confint(method="wald")
    np.testing.assert_allclose(ci_a[["lower", "upper"]], ci_b[["lower", "upper"]], atol=1e-5)
    assert a.aic == pytest.approx(b.aic, abs=1e-6) and a.bic == pytest.approx(b.bic, abs=1e-6)


def test_a_numpy_fit_imports_no_jax(tmp_path):
    """A single fit through the package face (slopes, a formula without random terms, the
    printout, Wald intervals, VarCorr, JSON) in a new interpreter leaves JAX unloaded;
    importing the compiled solver afterwards loads it (so the check can fail)."""
    log = tmp_path / "log.csv"
    _sim().to_csv(log, index=False)
    script = (
        "import sys, json, pandas as pd\n"
        "import tomstats, tomstats.glmm as glmm\n"
        f"df = pd.read_csv({str(log)!r})\n"
        "f = glmm.fit(df, 'y ~ x + (1 + x | g) + (1 | item)', backend='laplace')\n"
        "g = glmm.fit(df, 'y ~ x', backend='laplace')\n"
        "text = str(f) + str(g)\n"
        "f.confint(method='wald'); f.VarCorr()\n"
        f"f.to_json({str(tmp_path / 'f.json')!r})\n"
        "before = 'jax' in sys.modules\n"
        "import tomstats.glmm.lme_fit\n"
        "print(json.dumps([before, 'jax' in sys.modules, f.converged, g.converged]))\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [False, True, True, True]


def test_auto_chooses_numpy_for_a_single_small_fit():
    small = (TermShape(d=2, q=40, correlated=True), TermShape(d=1, q=200, correlated=True))
    assert choose_engine("auto", small) == "numpy"
    big = (TermShape(d=1, q=NUMPY_MAX_EFFECTS + 1, correlated=True),)
    assert choose_engine("auto", big) == "jax"
    assert choose_engine("jax", small) == "jax" and choose_engine("numpy", big) == "numpy"


@pytest.mark.parametrize("engine", ["torch", 1, None])
def test_a_bad_engine_is_refused_in_one_line(engine):
    with pytest.raises(InputError, match=r"engine must be one of \('auto', 'numpy', 'jax'\)"
                       ) as info:
        fit_lme(_sim(), "y ~ x + (1 | g)", engine=engine)
    assert "\n" not in str(info.value) and repr(engine) in str(info.value)


def test_cli_engine_option(tmp_path, capsys):
    from tomstats.cli import main

    log = tmp_path / "log.csv"
    _sim().to_csv(log, index=False)
    out = tmp_path / "fit.json"
    args = ["fit", str(log), "--model", "y ~ x + (1 + x | g) + (1 | item)", "--backend",
            "laplace", "--out", str(out)]
    assert main([*args, "--option", "engine=torch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "engine must be one of" in err[0] and not out.exists()
    assert main([*args, "--option", "engine=numpy"]) == 0
    assert "Random effects:" in capsys.readouterr().out and out.exists()
