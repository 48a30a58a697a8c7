"""Joint Wald tests per term (tomstats.glmm.wald) against ``car::Anova`` on ``glmer`` fits.

The reference is ``tests/reference/car_anova.json``, written by
``tests/reference/car_anova.R``; when ``Rscript`` with car, lme4 and jsonlite is here the
script is run afresh (into a temporary folder) and its output is used (the test output says
which). Each case stores its data, lme4's ``fixef()`` and ``vcov()`` and car's Type II and III
tables.

Two comparisons:

- the computation: lme4's own estimates and covariance through :func:`wald_table` give car's
  tables to 1e-8 (the formulas are the same; only rounding differs);
- the whole path: tomstats refits the data (``tomstats.glmm.fit(backend="laplace")``) and its
  tables are within 1e-4 of car's (chi-square relative, p absolute, df exact). The gap left
  is lme4's: its ``vcov()`` comes from a finite-difference Hessian, inexact at about 1e-5
  relative (the same model fitted with treatment and with sum coding gives Type II
  chi-squares that differ by that much in lme4, while tomstats' agree to 1e-8).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import r_reference

from tomstats.glmm.lme_result import format_wald
from tomstats.glmm.wald import FixedTerm, fixed_part, fixed_terms, wald_table

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT = REFERENCE / "car_anova.R"
COMMITTED = REFERENCE / "car_anova.json"
CASES = [c["name"] for c in json.loads(COMMITTED.read_text())["cases"]]
INTERCEPTS = [c for c in CASES if c.startswith("intercepts")]
SLOPES = [c for c in CASES if c.startswith("slopes")]
#: tomstats' refit against car (module docstring): chi-square relative, p absolute.
TOL = 1e-4


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("car", "lme4", "jsonlite"), Path(tmp), timeout=300)


@pytest.fixture(scope="module")
def car(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    ref, source = _reference(str(tmp_path_factory.mktemp("car")))
    print(f"\ncar reference: {source}; car {ref['car_version']}, lme4 {ref['lme4_version']}")
    return {c["name"]: c for c in ref["cases"]}


def _formulaic_names(case: dict[str, Any]) -> list[str]:
    """The coefficient names the formula engine gives the case's fixed part (tomstats' names
    of lme4's coefficients, in the same order)."""
    import formulaic

    return list(formulaic.model_matrix(fixed_part(case["tomstats"])[1],
                                       pd.DataFrame(case["data"])).columns)


def _r_label(label: str) -> str:
    """tomstats' term label as R writes it (``C(f, Sum)`` is R's ``f`` under contr.sum)."""
    import re

    return re.sub(r"C\((\w+), Sum\)", r"\1", label)


def _check(table: pd.DataFrame, ref: dict[str, Any], rtol: float, atol_p: float) -> float:
    """Compare a table with car's; return the largest absolute chi-square difference."""
    assert [_r_label(t) for t in table.index] == ref["terms"]
    assert table["Df"].tolist() == ref["df"]
    np.testing.assert_allclose(table["Chisq"], ref["chisq"], rtol=rtol)
    np.testing.assert_allclose(table["p"], ref["p"], rtol=0, atol=atol_p)
    return float(np.max(np.abs(table["Chisq"].to_numpy() - ref["chisq"])))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("kind", [2, 3])
def test_computation_equals_car_on_lme4s_estimates(car, name, kind):
    case = car[name]
    terms = fixed_terms(fixed_part(case["tomstats"])[1], _formulaic_names(case))
    table = wald_table(case["beta"], np.array(case["vcov"]), terms, kind)
    diff = _check(table, case[f"type{kind}"], rtol=1e-8, atol_p=1e-10)
    print(f"{name} type {kind}: max |chisq - car| = {diff:.2e}")


def test_type_ii_is_conditional_wald_and_ignores_the_coding(car):
    """Type II of a term is W(relatives + term) - W(relatives): written out here for the
    order:variant design by hand (order's relatives are order:variant), and the same under
    treatment and sum coding (lme4's own estimates; up to its finite-difference vcov)."""
    case = car["slopes_two_factors"]
    b, V = np.array(case["beta"]), np.array(case["vcov"])

    def w(cols: list[int]) -> float:
        return float(b[cols] @ np.linalg.solve(V[np.ix_(cols, cols)], b[cols]))

    # columns: (Intercept), order o1, o2, variant, x, o1:variant, o2:variant
    by_hand = [w([1, 2, 5, 6]) - w([5, 6]), w([3, 5, 6]) - w([5, 6]), w([4]), w([5, 6])]
    terms = fixed_terms("order * variant + x", _formulaic_names(case))
    np.testing.assert_allclose(wald_table(b, V, terms, 2)["Chisq"], by_hand, rtol=1e-12)
    np.testing.assert_allclose(case["type2"]["chisq"], car["slopes_two_factors_sum"]["type2"]
                               ["chisq"], rtol=1e-4)


@functools.cache
def _fit(name: str, data: str, formula: str) -> Any:
    from tomstats.glmm import fit

    return fit(pd.DataFrame(json.loads(data)), formula, backend="laplace")


def _refit(case: dict[str, Any]) -> Any:
    return _fit(case["name"], json.dumps(case["data"]), case["tomstats"])


def _refit_equals_car(case: dict[str, Any], result_type: str) -> None:
    res = _refit(case)
    assert type(res).__name__ == result_type
    for kind in (2, 3):
        diff = _check(res.anova_wald(kind), case[f"type{kind}"], rtol=TOL, atol_p=TOL)
        print(f"{case['name']} ({result_type}) type {kind}: max |chisq - car| = {diff:.2e}")


@pytest.mark.parametrize("name", INTERCEPTS)
def test_random_intercepts_fit_equals_car(car, name):
    _refit_equals_car(car[name], "LaplaceFit")


@pytest.mark.slow  # compiling the general engine for this design takes 20-80 s on two cores
@pytest.mark.parametrize("name", SLOPES)
def test_random_slopes_fit_equals_car(car, name):
    _refit_equals_car(car[name], "LaplaceFit")  # the one result type


def _lme_fit_of(case: dict[str, Any]) -> Any:
    """An LmeFit holding lme4's estimates and covariance (lme4's ``(Intercept)`` name): the
    method's wiring without a refit."""
    from tomstats.glmm.lme_result import LmeFit

    names = ["(Intercept)" if n == "Intercept" else n for n in _formulaic_names(case)]
    beta = np.array(case["beta"])
    cov = np.array(case["vcov"])
    return LmeFit(formula=case["tomstats"], family="bernoulli", n_obs=len(case["data"]["y"]),
                  n_rows=len(case["data"]["y"]), coef_names=tuple(names), beta=beta,
                  se=np.sqrt(np.diag(cov)), cov=cov, se_method="hessian", terms=(),
                  theta=np.zeros(0), b=np.zeros(0), b_var=np.zeros(0),
                  loglik=case["loglik"], converged=True, iterations=1)


@pytest.mark.parametrize("name", SLOPES)
def test_lme_fit_method_reads_its_formula(car, name):
    case = car[name]
    fit = _lme_fit_of(case)
    for kind, label in ((2, "II"), (3, "III")):
        _check(fit.anova_wald(label), case[f"type{kind}"], rtol=1e-8, atol_p=1e-10)


def test_printout_in_cars_layout(car):
    case = car["intercepts_factor_by_covariate"]
    text = format_wald(_refit(case).anova_wald(2), "y")
    lines = text.splitlines()
    assert lines[0] == "Analysis of Deviance Table (Type II Wald chisquare tests)"
    assert lines[2] == "Response: y"
    assert lines[3].split() == ["Chisq", "Df", "Pr(>Chisq)"]
    rows = {ln.split()[0]: ln.split() for ln in lines[4:7]}
    ref = case["type2"]
    for term, chisq, df in zip(ref["terms"], ref["chisq"], ref["df"], strict=True):
        assert float(rows[term][1]) == pytest.approx(chisq, abs=1e-4)
        assert int(rows[term][2]) == df
    assert rows["x"][-1] == "***" and lines[-1].startswith("Signif. codes:")
    three = format_wald(_refit(case).anova_wald(3), "y")
    assert "(Type III Wald chisquare tests)" in three and "(Intercept)" in three
    assert "depend on the coding" in three


def _write_log(case: dict[str, Any], path: Path) -> Path:
    pd.DataFrame(case["data"]).to_csv(path, index=False)
    return path


def test_fit_command_prints_the_table(car, tmp_path, capsys):
    from tomstats.cli import main

    case = car["intercepts_factor_by_covariate"]
    log = _write_log(case, tmp_path / "log.csv")
    api = _refit(case)  # the same design: the command reuses its compiled program
    for flag, kind in (([], "II"), (["--anova", "III"], "III"), (["--anova", "none"], None)):
        out = tmp_path / f"fit{kind}.json"
        rc = main(["fit", str(log), "--model", case["tomstats"], "--backend", "laplace",
                   "--out", str(out), *flag])
        printed = capsys.readouterr().out
        assert rc == 0
        if kind is None:
            assert "Analysis of Deviance" not in printed
            continue
        assert format_wald(api.anova_wald(kind), "y") in printed
        assert printed.index("Fixed effects:") < printed.index("Analysis of Deviance")


def test_anova_flag_refused_for_a_sampler(car, tmp_path, capsys):
    from tomstats.cli import main

    log = _write_log(car["intercepts_factor_by_covariate"], tmp_path / "log.csv")
    rc = main(["fit", str(log), "--model", "y ~ cond + (1 | subj)", "--anova", "III",
               "--out", str(tmp_path / "f.nc")])
    err = capsys.readouterr().err
    assert rc == 2 and "--anova III" in err and "--backend laplace" in err
    assert not (tmp_path / "f.nc").exists()


def test_report_shows_both_types(car, tmp_path):
    from tomstats.report.laplace import laplace_document, term_tests_table

    case = car["slopes_two_factors_sum"]
    fit = _lme_fit_of(case)
    table = term_tests_table(fit)
    assert table["term"].map(_r_label).tolist() == case["type2"]["terms"]
    np.testing.assert_allclose(table["chi² (Type II)"], case["type2"]["chisq"], rtol=1e-8)
    np.testing.assert_allclose(table["p (Type III)"], case["type3"]["p"][1:], atol=1e-10)
    doc = laplace_document(fit)
    fixed = next(s for s in doc.sections if s.title == "Fixed effects")
    assert any(getattr(b, "frame", None) is not None and "chi² (Type II)" in b.frame.columns
               for b in fixed.blocks)


def test_bad_type_and_foreign_coefficients_are_refused(car):
    case = car["intercepts_factor_by_covariate"]
    fit = _lme_fit_of(case)
    with pytest.raises(ValueError, match=r"type must be 2 or 3.*got 4"):
        fit.anova_wald(4)
    with pytest.raises(ValueError, match=r"coefficient 'z' matches no term"):
        fixed_terms("cond * x", ["Intercept", "cond[T.b]", "z"])
    lone = (FixedTerm("(Intercept)", frozenset(), (0,)),)
    assert wald_table([0.5], [[0.25]], lone, 2).empty  # Type II has no intercept row
    assert wald_table([0.5], [[0.25]], lone, 3)["Chisq"].iloc[0] == pytest.approx(1.0)
