"""Marginal means and contrasts of a maximum-likelihood GLMM (tomstats.glmm.contrasts)
against R's emmeans on an lme4 ``glmer`` fit.

The reference is ``tests/reference/emmeans_glmm.json``, written by
``tests/reference/emmeans_glmm.R``; when ``Rscript`` with emmeans, lme4 and jsonlite is
here the script is run afresh (into a temporary folder) and its output is used. The case
stores its data, lme4's ``fixef()`` and ``vcov()`` and emmeans' answers to each query.

Two comparisons, as in tests/glmm/test_wald.py:

- the computation: lme4's own estimates and covariance through :func:`fit_grid` and the
  core give emmeans' numbers within 1e-8 (Tukey bounds: R's ``qtukey`` is accurate to about
  4 decimals, so within 5e-4 SE);
- the whole path: tomstats refits the data (``tomstats.glmm.fit(backend="laplace")``) and
  every number is within 1e-4 of emmeans' (the refit's estimates differ from lme4's at
  about 1e-5).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import r_reference

from tomstats.analysis.marginal import contrasts, emmeans
from tomstats.glmm.contrasts import fit_grid

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT = REFERENCE / "emmeans_glmm.R"
COMMITTED = REFERENCE / "emmeans_glmm.json"
TUKEY_Q_TOL = 5e-4
COLUMNS = {"emmean": "estimate", "prob": "estimate", "estimate": "estimate", "SE": "se",
           "asymp.LCL": "lower", "asymp.UCL": "upper", "z.ratio": "statistic",
           "p.value": "p_adjusted"}
RATIO = {"odds.ratio": "odds_ratio", "asymp.LCL": "or_lower", "asymp.UCL": "or_upper",
         "z.ratio": "statistic", "p.value": "p_adjusted"}


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("emmeans", "lme4", "jsonlite"), Path(tmp))


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ref, source = _reference(str(tmp_path_factory.mktemp("emmeans_glmm")))
    print(f"\nemmeans reference: {source}; emmeans {ref['emmeans_version']}, "
          f"lme4 {ref['lme4_version']}")
    return ref["cases"][0]


def _r_name(name: str) -> str:
    """tomstats' coefficient name as lme4 spells it (``C(f)[T.1]`` is ``factor(f)1``)."""
    name = "(Intercept)" if name == "Intercept" else name  # (a fit of earlier versions)
    return re.sub(r"C\((\w+)\)\[T\.([^\]]+)\]", r"factor(\1)\2", name)


def _lme4_fit(case: dict[str, Any], refit: Any) -> SimpleNamespace:
    """lme4's estimates and covariance in tomstats' coefficient order."""
    order = [case["coef_names"].index(_r_name(n)) for n in refit.coef_names]
    beta = np.array(case["beta"])[order]
    cov = np.array(case["vcov"])[np.ix_(order, order)]
    return SimpleNamespace(formula=case["tomstats"], beta=beta, cov=cov,
                           coef_names=refit.coef_names, n_rows=refit.n_rows)


@functools.cache
def _fit(data: str, formula: str) -> Any:
    from tomstats.glmm import fit

    return fit(pd.DataFrame(json.loads(data)), formula, backend="laplace")


def _refit(case: dict[str, Any]) -> Any:
    return _fit(json.dumps(case["data"]), case["tomstats"])


def _ours(fit: Any, data: pd.DataFrame, q: dict[str, Any]) -> pd.DataFrame:
    grid = fit_grid(fit, data, at=None if q["at"] is None else {"x": q["at"]})
    by = q["by"] or None
    if q["kind"] == "emmeans":
        return emmeans(grid, q["specs"], by, level=q["level"], scale=q["scale"])
    return contrasts(grid, q["specs"], by, method=q["method"] if q["interaction"]
                     else q["method"][0], interaction=q["interaction"], adjust=q["adjust"],
                     level=q["level"], scale=q["scale"])


def _check(ours: pd.DataFrame, r: dict[str, list], columns: dict[str, str], tukey: bool,
           tol: float) -> float:
    assert len(ours) == len(r["SE"])
    worst = 0.0
    for col, values in r.items():
        if col in columns:
            want = np.array(values, dtype=float)
            have = ours[columns[col]].to_numpy(dtype=float)
            if tukey and col in ("asymp.LCL", "asymp.UCL"):
                scale = ours["se"].to_numpy() * (ours["odds_ratio"].to_numpy()
                                                 if columns is RATIO else 1.0)
                np.testing.assert_allclose((have - want) / scale, 0.0,
                                           atol=TUKEY_Q_TOL + tol, err_msg=col)
                continue
            np.testing.assert_allclose(have, want, rtol=tol, atol=tol, err_msg=col)
            gap = np.abs(have - want) / np.maximum(np.abs(want), 1.0)
            worst = max(worst, float(np.max(gap)))
        elif col == "df":
            assert all(v is None for v in values) and np.isinf(ours["df"]).all()
        elif col not in ("SE", "null"):  # labels; a ratio's "a / b" is the log's "a - b"
            assert [str(v) for v in ours[col]] == [str(v).replace(" / ", " - ")
                                                   for v in values], col
    return worst


def _run(case: dict[str, Any], fit: Any, tol: float) -> float:
    data = pd.DataFrame(case["data"])
    worst = 0.0
    for q in case["queries"]:
        where = f"{q['kind']} {q['specs']} | {q['by']} {q['scale']} {q['adjust']}"
        ours = _ours(fit, data, q)
        tukey = q["adjust"] == "tukey"
        try:
            worst = max(worst, _check(ours, q["result"], COLUMNS, tukey, tol))
            if "ratio" in q:
                worst = max(worst, _check(ours, q["ratio"], RATIO, tukey, tol))
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    return worst


def test_lme4_estimates_give_emmeans(case) -> None:
    worst = _run(case, _lme4_fit(case, _refit(case)), 1e-8)
    print(f"lme4's beta and vcov: max |tomstats - emmeans| / max(|emmeans|, 1) = {worst:.1e}")


def test_refit_gives_emmeans(case) -> None:
    refit = _refit(case)
    assert type(refit).__name__ == "LaplaceFit"
    worst = _run(case, refit, 1e-4)
    print(f"tomstats' Laplace refit: max |tomstats - emmeans| / max(|emmeans|, 1) = "
          f"{worst:.1e}")


def test_grid_needs_the_fits_data(case, tmp_path) -> None:
    from tomstats.glmm import LaplaceFit

    refit = _refit(case)
    data = pd.DataFrame(case["data"])
    with pytest.raises(ValueError, match="rows but the fit was made from"):
        fit_grid(refit, data.iloc[:-3])
    with pytest.raises(ValueError, match="not a variable of the fixed part"):
        fit_grid(refit, data, at={"context": [1]})
    with pytest.raises(ValueError, match="not a level of 'tom_order'"):
        fit_grid(refit, data, at={"tom_order": [3]})
    # a fit in memory keeps its rows; one read back from its JSON needs them given
    np.testing.assert_array_equal(fit_grid(refit).estimate, fit_grid(refit, data).estimate)
    with pytest.raises(ValueError, match="needs the data"):
        fit_grid(LaplaceFit.from_json(refit.to_json(tmp_path / "fit.json")))
    grid = fit_grid(refit, data, at={"tom_order": [0, 2]})
    assert grid.levels[0] == (0, 2)
    assert "x at its mean" in grid.note
    # a numeric variable given values is a grid factor, evaluated at them (also where the
    # column holds integers): one unit of x moves every cell's logit by its coefficient
    whole = data.assign(x=data["x"].round().astype(int))
    grid = fit_grid(refit, whole, at={"x": [-0.5, 0.5]})
    assert grid.factors == ("tom_order", "context_words", "x")
    assert grid.levels[2] == (-0.5, 0.5)
    step = np.diff(grid.estimate.reshape(-1, 2), axis=1)
    np.testing.assert_allclose(step, refit.beta[list(refit.coef_names).index("x")], rtol=1e-12)


def test_command_line_reads_a_fit_json(case, tmp_path, capsys) -> None:
    """``tomstats contrasts LOG --fit FIT.json``: a LaplaceFit JSON holding lme4's estimates
    and covariance gives emmeans' link-scale Holm comparisons (in the CSV of --out)."""
    import dataclasses

    from tomstats.cli import main

    data = pd.DataFrame(case["data"])
    refit = _refit(case)
    lme4 = _lme4_fit(case, refit)
    fit = dataclasses.replace(refit, beta=lme4.beta, se=np.sqrt(np.diag(lme4.cov)),
                              cov=lme4.cov)
    fit.to_json(tmp_path / "fit.json")
    data.to_csv(tmp_path / "log.csv", index=False)
    out = tmp_path / "pairs.csv"
    assert main(["contrasts", str(tmp_path / "log.csv"), "--fit", str(tmp_path / "fit.json"),
                 "--specs", "tom_order", "--adjust", "holm", "--scale", "link",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Holm" in printed and "odds_ratio" in printed
    q = next(q for q in case["queries"] if q["kind"] == "contrast" and q["adjust"] == "holm"
             and q["specs"] == ["tom_order"] and not q["by"])
    got = pd.read_csv(out)
    for theirs, ours in (("estimate", "estimate"), ("SE", "se"), ("p.value", "p_adjusted"),
                         ("asymp.LCL", "lower")):
        np.testing.assert_allclose(got[ours], q["result"][theirs], rtol=1e-8)
