"""Result objects show one short line as their ``repr`` (what a notebook or the REPL prints
for a bare name), never a dump of their arrays or tables; ``print()`` keeps the full summary
(issue 33, part 7). The objects are built directly, small, without fitting anything (the
``repr`` of a real ``LmeFit``: tests/glmm/test_glmm_lme.py::test_summary_prints_as_glmer).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr


def _one_line(text: str, *facts: str) -> None:
    assert "\n" not in text and len(text) < 300, text
    assert "array(" not in text and "Dataset" not in text and "DataFrame" not in text, text
    for f in facts:
        assert f in text, (f, text)


def test_laplace_fit() -> None:
    from _ml_fits import intercepts_fit

    fit = intercepts_fit(
        formula="correct ~ x + (1 | model)", family="bernoulli", n_obs=1000,
        coef_names=("Intercept", "x"), beta=np.array([0.5, -1.25]), se=np.array([0.1, 0.2]),
        cov=np.diag([0.01, 0.04]), groups=("model",), sd=np.array([0.0]),
        levels=(tuple(f"m{i}" for i in range(400)),), ranef=np.zeros(400), loglik=-612.345,
        converged=True, iterations=7, n_rows=1000)
    _one_line(repr(fit), "LaplaceFit", "correct ~ x + (1 | model)", "1000 rows",
              "logLik -612.35", "converged", "singular", "print()")
    full = str(fit)
    assert full.startswith("Generalized linear mixed model") and "Fixed effects" in full
    assert "-1.25" in full


def _power_table(points: int) -> pd.DataFrame:
    cols = {"n_rows": 100, "n_obs": 100, "n_sims": 50, "n_valid": 50, "n_failed": 0,
            "n_singular": 0, "estimate": 0.3, "stopped_early": False}
    rows = []
    for i in range(points):
        r = {"model": 10 * (i + 1), **cols, "power": 0.2 + 0.3 * i, "ci_low": 0.1,
             "ci_high": 0.9}
        r.update({f"null_{k}": v for k, v in cols.items()})
        r.update(null_power=0.04, null_ci_low=0.01, null_ci_high=0.1)
        rows.append(r)
    return pd.DataFrame(rows)


def test_fit_power_result() -> None:
    from tomstats.planning.from_fit import FitPowerResult

    res = FitPowerResult(table=_power_table(3), formula="correct ~ x + (1 | model)",
                         term="x", test="wald", columns=("x",), effects={}, along="model",
                         by=None, alpha=0.05, target=0.8, seed=3, n_sims=50, seconds=1.0,
                         refits=300)
    _one_line(repr(res), "FitPowerResult", "wald test of x", "3 design point(s)",
              "power 20.0–80.0 %", "50 studies per point, seed 3", "print()")
    full = str(res)
    assert len(full.splitlines()) == 5  # the head, the legend of failed/singular, 3 points
    assert "model = 30" in full and "type I error" in full


def test_power_result() -> None:
    from tomstats.planning.result import PowerResult

    shape = (1, 3, 2)
    data = xr.Dataset(
        {v: (("kind", "value", "test"), np.full(shape, x)) for v, x in
         (("power", 0.5), ("ci_low", 0.4), ("ci_high", 0.6), ("estimate", 0.1),
          ("n_fits", 100), ("n_failed", 0), ("n_rejected", 50))},
        coords={"kind": ["power"], "value": [10, 20, 40],
                "test": ["anova:tom_order", "anova:interaction"]},
        attrs={"along": "questions_per_cell", "replicates": 100, "alpha": 0.05, "seed": 0,
               "target": 0.8})
    res = PowerResult(data)
    _one_line(repr(res), "PowerResult", "questions_per_cell at 3 values",
              "anova:tom_order, anova:interaction", "100 studies per value", "print()")


def test_diagnostics_report() -> None:
    from tomstats.glmm.diagnostics import DiagnosticCheck, DiagnosticsReport

    def check(name: str, passed: bool) -> DiagnosticCheck:
        return DiagnosticCheck(name=name, value=1.2, threshold=1.01, passed=passed,
                               offending=("gamma",) if not passed else (), advice="more draws",
                               description=name)

    rep = DiagnosticsReport(checks=(check("divergences", True), check("rhat", False)),
                            chains=4, draws=1000)
    _one_line(repr(rep), "DiagnosticsReport", "1 of 2 failed (rhat)", "4 chains x 1000 draws")
    assert "try:" in str(rep)  # print() keeps the advice


def test_paper_fit() -> None:
    from tomstats.model import Params
    from tomstats.simulation.paper import PaperFit

    fit = PaperFit(params=Params(alpha=2e-4, gamma=0.9, delta=1e-5, sigma=0.3),
                   predicted={"a": 1.0, "b": 2.0}, target={"a": 1.1, "b": 2.0},
                   residuals={"a": -0.1, "b": 0.0}, cost=0.005)
    _one_line(repr(fit), "PaperFit", "alpha 0.0002", "gamma 0.9", "2 targets", "cost 0.005")


def test_study_result() -> None:
    from tomstats.simulation.reproduce import StudyResult

    main = xr.Dataset({"eta2": (("capability", "replicate"), np.zeros((5, 200)))})
    grid = xr.Dataset({"share": (("gamma", "alpha"), np.zeros((7, 7)))})
    frame = pd.DataFrame({"x": range(50)})
    res = StudyResult(config=None, table1=frame, decomposition=frame, cells=frame,
                      sensitivity=frame, summary={}, main=main, grid=grid)
    _one_line(repr(res), "StudyResult", "capability 5, replicate 200", "gamma 7, alpha 7",
              "table1 (50 rows)")
