"""Power from a Laplace fit (tomstats.planning.from_fit, ``tomstats power --from-fit``):
simulate from the fitted model with its design, refit every study, count rejections; checked
against lme4 simulating and refitting the same design (tests/reference/lme4_power.R)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.glmm._hints import InputError
from tomstats.glmm.lme import fit_lme
from tomstats.glmm.lme_result import LmeFit, lme_anova
from tomstats.planning import from_fit as ff
from tomstats.planning.from_fit import (
    lrt_statistics,
    power_from_fit,
    simulate_outcomes,
    term_columns,
)

REF = Path(__file__).resolve().parents[1] / "reference"
POWER_JSON = REF / "lme4_power.json"
REPO = REF.parents[1]


def _reference() -> dict:
    """lme4's power run: re-run (minutes) when TOMSTATS_RUN_R=1 and Rscript with lme4 is
    there, the committed JSON otherwise."""
    if os.environ.get("TOMSTATS_RUN_R") == "1" and shutil.which("Rscript"):
        probe = subprocess.run(["Rscript", "-e", "library(lme4)"], capture_output=True,
                               check=False)
        if probe.returncode == 0:
            out = Path(os.environ.get("TMPDIR", "/tmp")) / "lme4_power_rerun.json"
            subprocess.run(["Rscript", str(REF / "lme4_power.R"), "300", str(out)],
                           check=True, capture_output=True, timeout=3600)
            return json.loads(out.read_text())
    return json.loads(POWER_JSON.read_text())


@pytest.fixture(scope="module")
def ref() -> dict:
    return _reference()


@pytest.fixture(scope="module")
def fit(ref) -> LmeFit:
    """The reference's pilot data fitted with ``y ~ x + (1 + x | g)``."""
    return fit_lme(pd.DataFrame(ref["data"]), "y ~ x + (1 + x | g)")


def test_the_pilot_fit_is_lme4s(fit, ref):
    np.testing.assert_allclose(fit.beta, ref["pilot_fit"]["beta"], atol=1e-3)
    np.testing.assert_allclose(fit.theta, ref["pilot_fit"]["theta"], atol=1e-2)
    assert abs(fit.loglik - ref["pilot_fit"]["loglik"]) < 1e-3


def test_simulation_is_seeded_and_follows_the_fit(fit):
    a = simulate_outcomes(fit, 400, seed=3)
    np.testing.assert_array_equal(a, simulate_outcomes(fit, 400, seed=3))
    assert not np.array_equal(a, simulate_outcomes(fit, 400, seed=4))
    assert a.shape == (400, fit.n_obs) and set(np.unique(a)) <= {0.0, 1.0}
    # the marginal success rate of the model (random effects integrated out, by a separate
    # Monte Carlo over b) is that of the simulated studies
    rng = np.random.default_rng(0)
    x = fit.design.train["x"].to_numpy()
    T = fit.factors()[0]
    b = rng.standard_normal((4000, 2)) @ T.T
    p = 1 / (1 + np.exp(-(fit.beta[0] + b[:, :1] + (fit.beta[1] + b[:, 1:]) * x[None, :])))
    assert abs(a.mean() - p.mean()) < 0.01
    hi = simulate_outcomes(fit, 200, seed=1, set_effects={"x": 2.0})
    lo = simulate_outcomes(fit, 200, seed=1, set_effects={"x": -2.0})
    xs = x[fit.design.row_obs] if hasattr(fit.design, "row_obs") else x
    assert np.corrcoef(hi.mean(0), xs)[0, 1] > 0.5 > -0.5 > np.corrcoef(lo.mean(0), xs)[0, 1]


def test_extend_copies_levels_and_rows():
    df = pd.DataFrame({"g": ["a", "a", "b", "c"], "x": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 1, 0]})
    ext = ff._extend(df, "g", 5)
    assert ext["g"].nunique() == 5 and len(ext) == 4 + 2 + 1
    assert list(ext.loc[ext["g"] == "a~3", "x"]) == [1.0, 2.0]
    assert list(ext.loc[ext["g"] == "b~4", "x"]) == [3.0]
    assert list(ff._extend(df, "g", 2)["g"]) == ["a", "a", "b"]
    rows = ff._rows_per_level(df, "g", 3)
    assert rows.groupby("g").size().tolist() == [3, 3, 3]
    assert list(rows.loc[rows["g"] == "a", "x"]) == [1.0, 2.0, 1.0]


def test_term_columns_of_factors_and_interactions():
    names = ("(Intercept)", "belief[T.true]", "cue[T.b]", "cue[T.c]",
             "belief[T.true]:cue[T.b]", "belief[T.true]:cue[T.c]")
    assert term_columns(names, "cue") == [2, 3]
    assert term_columns(names, "belief:cue") == [4, 5]
    assert term_columns(names, "cue:belief") == [4, 5]
    assert term_columns(names, "cue[T.b]") == [2]
    with pytest.raises(InputError, match="its coefficients: \\(Intercept\\), belief"):
        term_columns(names, "tom")


def test_power_is_seeded_and_reports_failures_and_type_one_error(fit):
    a = power_from_fit(fit, "x", n_sims=20, seed=5, set_effects={"x": 1.5}, progress=False)
    b = power_from_fit(fit, "x", n_sims=20, seed=5, set_effects={"x": 1.5}, progress=False)
    pd.testing.assert_frame_equal(a.table, b.table)
    row = a.table.iloc[0]
    assert row["n_valid"] + row["n_failed"] == row["n_sims"] == 20
    assert row["power"] > 0.9 and abs(row["estimate"] - 1.5) < 0.3
    assert row["null_n_sims"] == 20 and row["null_power"] <= 0.25
    assert "type I error" in str(a) and a.refits == 40


def test_along_an_effect_by_rows_shares_the_null_studies(fit):
    res = power_from_fit(fit, "x", along={"x": [0.0, 1.5]}, by={"rows_per_g": [30]},
                         n_sims=10, seed=6, progress=False)
    t = res.table
    assert list(t.columns[:2]) == ["rows_per_g", "x"] and list(t["x"]) == [0.0, 1.5]
    assert list(t["n_rows"]) == [600, 600]
    # both effects share one design, so one run at 0 serves both rows
    assert t["null_power"].iloc[0] == t["null_power"].iloc[1] and res.refits == 30
    assert t["power"].iloc[1] >= t["power"].iloc[0]
    assert "rows_per_g = 30  x = 1.5" in str(res)


def _two_proportions_agree(k1: int, n1: int, k2: int, n2: int, z: float = 3.0) -> bool:
    p = (k1 + k2) / (n1 + n2)
    se = np.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    return abs(k1 / n1 - k2 / n2) <= z * se + 1e-12


def test_wald_power_equals_lme4s_at_two_design_points(fit, ref):
    """The same design simulated by lme4 (simulate + refit, 300 studies per point) and here
    (120 studies per point): the powers agree within 3 Monte Carlo standard errors of their
    difference, at the pilot's 20 groups and extended to 30 (simr's extend)."""
    res = power_from_fit(fit, "x", n_sims=120, seed=11, set_effects={"x": ref["effect"]},
                         along={"g": [20, 30]}, type_one=False, progress=False)
    pts = {p["name"]: p for p in ref["points"]}
    for (_, row), name in zip(res.table.iterrows(), ("g=20", "g=30"), strict=True):
        r = pts[name]
        assert row["n_rows"] == r["n_rows"]
        assert row["n_failed"] <= 2
        assert _two_proportions_agree(int(round(row["power"] * row["n_valid"])),
                                      int(row["n_valid"]), r["wald_rejected"], r["n_valid"]), \
            (name, row["power"], r["wald_rejected"] / r["n_valid"])
    # the design points differ enough for the test to tell them apart
    assert pts["g=30"]["wald_rejected"] > pts["g=20"]["wald_rejected"] + 20


@pytest.mark.slow
def test_lrt_power_equals_lme4s(fit, ref):
    res = power_from_fit(fit, "x", test="lrt", n_sims=300, seed=12,
                         set_effects={"x": ref["effect"]}, along={"g": [20, 30]},
                         type_one=False, progress=False)
    pts = {p["name"]: p for p in ref["points"]}
    for (_, row), name in zip(res.table.iterrows(), ("g=20", "g=30"), strict=True):
        r = pts[name]
        assert _two_proportions_agree(int(round(row["power"] * row["n_valid"])),
                                      int(row["n_valid"]), r["lrt_rejected"], r["n_valid"])


@pytest.mark.slow
@pytest.mark.parametrize("test", ["wald", "lrt"])
def test_type_one_error_at_zero(fit, test):
    """The slope of x at 0 in the correlated-slopes model: the test rejects 5 % of the
    studies, within 3 Monte Carlo standard errors (1000 studies: se 0.69 %)."""
    res = power_from_fit(fit, "x", test=test, n_sims=1000, seed=21, set_effects={"x": 0.0},
                         type_one=False, progress=False)
    row = res.table.iloc[0]
    n = row["n_valid"]
    assert n >= 990
    assert abs(row["power"] - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / n)


@pytest.mark.parametrize("kwargs, message", [
    ({"term": "nope"}, "no coefficient or formula term of that name"),
    ({"term": "x", "set_effects": {"slope": 1.0}}, r"no coefficient 'slope' in the fit \(its "
                                                   r"coefficients: \(Intercept\), x\)"),
    ({"term": "x", "along": {"llm": [30]}}, "not a grouping factor of the fit"),
    ({"term": "x", "along": {"g": [1.5]}}, "whole numbers >= 2"),
    ({"term": "x", "along": {"rows_per_g": [0]}}, "whole numbers >= 1"),
    ({"term": "x", "test": "t"}, "test must be one of wald, lrt"),
    ({"term": "x", "n_sims": 0}, "n_sims must be an integer"),
    # a design the formula's terms cannot be fitted to: one row per level of g
    ({"term": "x", "along": {"rows_per_g": [1]}}, "needs fewer levels than rows"),
    # --compare: a reduced model nested in the fit's, written in the formula language
    ({}, "give a term to test or a reduced model"),
    ({"term": "x", "compare": "y ~ 1 + (1 + x | g)"}, "one of the two"),
    ({"compare": "y ~ 1 + (1 + x | g)", "test": "wald"}, "tested by the likelihood ratio"),
    ({"compare": "y ~ 1 + (1 | g)", "refit": "y ~ x + (1 | g)"}, "compare and refit"),
    ({"compare": "x ~ 1 + (1 | g)"}, "needs the same response"),
    ({"compare": "y ~ x + g + (1 | g)"}, r"not nested in the fit's 'y ~ x \+ \(1 \+ x \| g\)'"
                                         r", which lacks the fixed effect\(s\) g\[T.g02\]"),
    ({"compare": "y ~ x + (1 + x | g)"}, "the same parameters as the fit"),
    ({"compare": "y ~ x + (1 | g) + __import__('os').system('true')"},
     "compare .*'.' at position 35 is not allowed in a formula"),
    ({"compare": ""}, "compare is empty"),
    ({"compare": 3}, "compare must be a formula string"),
])
def test_bad_input_is_one_line(fit, kwargs, message):
    with pytest.raises(InputError, match=message) as info:
        power_from_fit(fit, progress=False, **kwargs)
    assert "\n" not in str(info.value)


def test_needs_a_laplace_fit_with_its_data(fit, tmp_path):
    back = LmeFit.from_json(fit.to_json(tmp_path / "fit.json"))
    with pytest.raises(InputError, match="needs the data it was fitted to"):
        power_from_fit(back, "x")
    other = fit.design.train.assign(y=1 - fit.design.train["y"])
    with pytest.raises(InputError, match="not the data the fit"):
        power_from_fit(back, "x", data=other)

    class Posterior:
        posterior = None

    with pytest.raises(InputError, match="not a tomstats Bayesian fit"):
        power_from_fit(Posterior(), "x")
    with pytest.raises(InputError, match="draws and allow_warnings apply to a Bayesian"):
        power_from_fit(fit, "x", draws=10)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tomstats", "power", *args],
                          capture_output=True, text=True, cwd=cwd, check=False, timeout=600,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})


def test_cli_runs_and_writes(fit, tmp_path):
    fit.to_json(tmp_path / "fit.json")
    fit.design.train.to_csv(tmp_path / "log.csv", index=False)
    res = _cli("--from-fit", "fit.json", "--data", "log.csv", "--term", "x", "--set", "x=1.5",
               "--along", "rows_per_g=15,30", "--replicates", "10", "--test", "lrt",
               "--out", "out", "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(tmp_path / "out" / "power.csv")
    assert list(table["rows_per_g"]) == [15, 30] and list(table["n_rows"]) == [300, 600]
    meta = json.loads((tmp_path / "out" / "power.json").read_text())
    assert meta["test"] == "lrt" and meta["effects"] == {"x": 1.5}
    assert "power of the lrt test of x" in res.stdout
    # simr's conventions: the interval named, failed/singular spelled out, the curve drawn
    assert "95 % Wilson intervals" in res.stdout
    assert "(power run + type I run)" in res.stdout
    assert "effect size:" not in res.stdout  # the effect is the one given with --set
    assert (tmp_path / "out" / "power.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote 3 files" in res.stdout


def test_power_at_the_fitted_effect_says_so(fit):
    """Without set_effects the power is for the fitted effect: the printout gives its value
    and simr's warning that observed power is no planning answer."""
    res = power_from_fit(fit, "x", n_sims=10, seed=2, progress=False)
    x = float(fit.beta[list(fit.coef_names).index("x")])
    assert res.fitted == {"x": pytest.approx(x)}
    text = str(res)
    assert f"effect size: x = {x:.4g} (the fitted value)" in text
    assert "observed power" in text and "--set NAME=VALUE" in text
    given = power_from_fit(fit, "x", n_sims=10, seed=2, set_effects={"x": 1.5},
                           progress=False)
    assert given.fitted == {"x": 1.5} and "effect size:" not in str(given)


def test_clopper_pearson_intervals_on_request(fit):
    """interval="clopper-pearson": the exact interval (SciPy's binomtest as the reference)
    of the same rejections; the power itself does not change."""
    from scipy.stats import binomtest

    kw = dict(n_sims=20, seed=5, set_effects={"x": 0.4}, progress=False)
    wilson = power_from_fit(fit, "x", **kw)
    exact = power_from_fit(fit, "x", interval="clopper-pearson", **kw)
    pd.testing.assert_series_equal(wilson.table["power"], exact.table["power"])
    for prefix in ("", "null_"):
        r = exact.table.iloc[0]
        k = round(r[f"{prefix}power"] * r[f"{prefix}n_valid"])
        ci = binomtest(int(k), int(r[f"{prefix}n_valid"])).proportion_ci(method="exact")
        assert (r[f"{prefix}ci_low"], r[f"{prefix}ci_high"]) == pytest.approx(
            (ci.low, ci.high), rel=1e-10, abs=1e-12)
    assert "95 % Clopper–Pearson intervals" in str(exact)
    with pytest.raises(ValueError, match="interval must be one of wilson, clopper-pearson"):
        power_from_fit(fit, "x", interval="exact", **kw)


def test_power_curve_frame(fit):
    """The curve of a run along a dimension: power and type I error at each value, in the
    columns the TOML path's figure draws."""
    res = power_from_fit(fit, "x", along={"x": [0.5, 1.5]}, n_sims=8, seed=1,
                         progress=False)
    curve = res.curve()
    assert set(curve["test"]) == {"wald: x", "type I error"}
    assert set(curve["along"]) == {"x"} and set(curve["kind"]) == {"plug-in"}
    power = curve[curve["test"] == "wald: x"].sort_values("value")
    assert power["value"].tolist() == [0.5, 1.5]
    assert power["power"].tolist() == res.table["power"].tolist()
    assert curve[curve["test"] == "type I error"]["power"].tolist() == \
        res.table["null_power"].tolist()


@pytest.mark.parametrize("args, message", [
    (["--term", "x", "--set", "slope=1"], "no coefficient 'slope'"),
    (["--term", "x", "--along", "llm=10,20"], "not a grouping factor of the fit"),
    (["--term", "nope"], "no coefficient or formula term"),
    (["--term", "x", "--test", "anova:tom_order"], "one of wald, lrt"),
    (["--term", "x", "--set", "x"], "expected NAME=VALUE"),
    (["--term", "x", "--posterior", "fit.nc"], "--posterior does not apply"),
    ([], "--from-fit needs --term"),
    (["--compare", "y ~ x + g + (1 | g)"], "not nested in the fit's"),
    (["--compare", "y ~ x + (1 | g)", "--test", "wald"], "--compare is a likelihood-ratio"),
    (["--term", "x", "--compare", "y ~ 1 + (1 + x | g)"], "--term and --compare: give one"),
])
def test_cli_bad_input_exit_2_nothing_written(fit, tmp_path, args, message):
    fit.to_json(tmp_path / "fit.json")
    fit.design.train.to_csv(tmp_path / "log.csv", index=False)
    res = _cli("--from-fit", "fit.json", "--data", "log.csv", *args, "--out", "out",
               cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_damaged_netcdf_and_a_wrong_log(fit, tmp_path):
    (tmp_path / "fit.nc").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    fit.design.train.to_csv(tmp_path / "log.csv", index=False)
    res = _cli("--from-fit", "fit.nc", "--data", "log.csv", "--term", "x", "--out", "out",
               cwd=tmp_path)
    assert res.returncode == 2 and "not a readable netCDF" in res.stderr
    fit.to_json(tmp_path / "fit.json")
    fit.design.train.assign(y=1 - fit.design.train["y"]).to_csv(tmp_path / "other.csv",
                                                                 index=False)
    res = _cli("--from-fit", "fit.json", "--data", "other.csv", "--term", "x", "--out", "out",
               cwd=tmp_path)
    assert res.returncode == 2 and "'other.csv' is not the log the fit 'fit.json'" in res.stderr
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- docs numbers

DOCS = REPO / "docs" / "power-from-fit.md"


def docs_examples(fit: LmeFit) -> dict[str, pd.DataFrame]:
    """The runs whose numbers docs/power-from-fit.md shows (same settings and seeds)."""
    curve = power_from_fit(fit, "x", set_effects={"x": 0.25}, along={"g": [20, 30, 40]},
                           n_sims=100, seed=1, progress=False).table
    rows = []
    for name, refit in (("slope kept", None), ("slope dropped", "y ~ x + (1 | g)")):
        for test in ("wald", "lrt"):
            t = power_from_fit(fit, "x", test=test, set_effects={"x": 0.0}, n_sims=200,
                               seed=2, type_one=False, refit=refit, progress=False).table
            rows.append({"model": name, "test": test, **t.iloc[0].to_dict()})
    return {"curve": curve, "barr": pd.DataFrame(rows)}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def docs_tables(ex: dict[str, pd.DataFrame]) -> dict[str, list[list[str]]]:
    """The page's tables, cell by cell, from :func:`docs_examples`."""
    curve = [["groups", "power (%)", "95 % CI", "type I error (%)", "failed", "singular"]]
    for _, r in ex["curve"].iterrows():
        curve.append([str(int(r["g"])), _pct(r["power"]),
                      f"{_pct(r['ci_low'])}–{_pct(r['ci_high'])}", _pct(r["null_power"]),
                      str(int(r["n_failed"] + r["null_n_failed"])),
                      str(int(r["n_singular"] + r["null_n_singular"]))])
    barr = [["model refitted", "test", "type I error (%)", "95 % CI", "studies"]]
    for _, r in ex["barr"].iterrows():
        barr.append([r["model"], r["test"], _pct(r["power"]),
                     f"{_pct(r['ci_low'])}–{_pct(r['ci_high'])}", str(int(r["n_valid"]))])
    return {"curve": curve, "barr": barr}


def _page_table(anchor: str) -> list[list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    rows, seen = [], False
    for line in text[text.index(anchor):].splitlines():
        if line.startswith("|"):
            seen = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set(":-") and c for c in cells):
                rows.append(cells)
        elif seen:
            break
    return rows


@pytest.mark.slow
def test_docs_numbers_are_the_commands(fit):
    """Every number of the page's two tables is what its runs give (same seeds)."""
    tables = docs_tables(docs_examples(fit))
    assert _page_table("<!-- table: curve -->") == tables["curve"]
    assert _page_table("<!-- table: barr -->") == tables["barr"]


def test_a_random_intercepts_fit_json_is_read_and_an_old_one_refitted(fit, tmp_path):
    """`tomstats fit --backend laplace` writes a random-intercepts formula in the one JSON
    format, read as it is; a fit in the random-intercept format of earlier versions is
    refitted from the log (and another log refused)."""
    from _ml_fits import old_intercepts_dict

    from tomstats.glmm import fit as glmm_fit
    from tomstats.planning.from_fit import load_laplace_fit

    log = fit.design.train[["y", "x", "g"]]
    log.to_csv(tmp_path / "log.csv", index=False)
    ri = glmm_fit(log, "y ~ x + (1 | g)", "laplace")
    ri.to_json(tmp_path / "ri.json")
    back, df = load_laplace_fit(tmp_path / "ri.json", tmp_path / "log.csv")
    assert isinstance(back, LmeFit) and back.terms == ri.terms and back.design is None
    res = power_from_fit(back, "x", data=df, n_sims=10, seed=1, type_one=False,
                         progress=False)
    assert res.table["n_sims"].iloc[0] == 10
    old = old_intercepts_dict(
        formula=ri.formula, family=ri.family, n_obs=ri.n_obs, n_rows=ri.n_rows,
        coef_names=("Intercept", "x"), beta=ri.beta, se=ri.se, cov=ri.cov, groups=ri.groups,
        sd=ri.sd, levels=ri.levels, ranef=ri.b, loglik=ri.loglik, data_hash=ri.data_hash)
    (tmp_path / "old.json").write_text(json.dumps(old))
    again, _ = load_laplace_fit(tmp_path / "old.json", tmp_path / "log.csv")
    assert again.design is not None and again.loglik == pytest.approx(ri.loglik, abs=1e-8)
    log.assign(y=1 - log["y"]).to_csv(tmp_path / "other.csv", index=False)
    with pytest.raises(InputError, match="is not the log the fit"):
        load_laplace_fit(tmp_path / "old.json", tmp_path / "other.csv")


def test_all_columns_of_a_factor_are_tested_together(ref):
    """A three-level factor: Wald chi-square and LRT on its 2 columns (simr's fcompare)."""
    df = pd.DataFrame(ref["data"])
    df["arm"] = np.array(["a", "b", "c"])[np.arange(len(df)) % 3]
    m = fit_lme(df, "y ~ x + arm + (1 + x | g)")
    for test in ("wald", "lrt"):
        res = power_from_fit(m, "arm", test=test, n_sims=20, seed=4, progress=False,
                             set_effects={"arm[T.b]": 1.0, "arm[T.c]": -1.0})
        assert res.columns == ("arm[T.b]", "arm[T.c]")
        row = res.table.iloc[0]
        assert row["power"] >= 0.9 and row["null_power"] <= 0.25
    # the reduced model written out (simr's fcompare): the same studies, the same 2-df test
    red = power_from_fit(m, compare="y ~ x + (1 + x | g)", n_sims=20, seed=4, progress=False,
                         set_effects={"arm[T.b]": 1.0, "arm[T.c]": -1.0})
    assert red.df == 2 and red.columns == res.columns and not red.boundary
    pd.testing.assert_frame_equal(red.table, res.table)


def test_compare_dropping_a_coefficient_rejects_as_the_lrt_of_the_term(fit):
    """--compare with the fit less x is --test lrt --term x: the same studies, refits and
    rejections, at the effect and at 0, for the same seed."""
    kw = {"n_sims": 20, "seed": 5, "set_effects": {"x": 0.4}, "progress": False,
          "along": {"rows_per_g": [20, 30]}}
    term = power_from_fit(fit, "x", test="lrt", **kw)
    red = power_from_fit(fit, compare="y ~ 1 + (1 + x | g)", **kw)
    pd.testing.assert_frame_equal(red.table, term.table)
    assert red.df == 1 and red.test == "lrt" and red.columns == ("x",)
    assert "against y ~ 1 + (1 + x | g) (fixed x; chi-square on 1 df)" in str(red)
    assert "conservative" not in str(red)
    # the rejections are not all alike (the comparison can tell runs apart)
    assert 0 < term.table["power"].iloc[0] < 1 or 0 < term.table["power"].iloc[1] < 1


def test_compare_dropping_the_random_slope_is_lme4s_anova(fit):
    """The statistic of a reduced model without the random slope (and its correlation) is
    the LRT of two separate fits of one simulated study (lme_anova: 2 df), and the power
    run says the p-value is conservative (a variance tested at 0)."""
    reduced = "y ~ x + (1 | g)"
    ys = simulate_outcomes(fit, 2, seed=8, set_effects={"x": 0.3})
    assert ys.shape[1] == fit.n_rows  # Bernoulli rows: one observation per row
    stats = lrt_statistics(fit, reduced, ys)
    for i in range(2):
        study = fit.design.train[["y", "x", "g"]].assign(y=ys[i])
        table = lme_anova(fit_lme(study, reduced), fit_lme(study, fit.formula))
        assert table["Df"].iloc[1] == 2
        assert abs(max(stats[i], 0.0) - table["Chisq"].iloc[1]) < 2e-3, (stats[i], table)
    assert np.ptp(stats) > 0.1  # two different studies, two different statistics
    res = power_from_fit(fit, compare=reduced, n_sims=10, seed=3, progress=False)
    assert res.df == 2 and res.boundary and res.columns == ()
    assert "random x | g; correlation (Intercept)~x | g" in res.term
    assert "conservative" in str(res)
    row = res.table.iloc[0]
    assert row["n_sims"] == row["null_n_sims"] == 10 and res.refits == 40


def test_the_null_of_compare_sets_what_it_drops_to_zero(fit):
    """The type I error simulates from the fit with the dropped variance, or the dropped
    correlation, at 0: Σ's row and column of x, or its off-diagonal entry."""
    formula, df0 = ff._prepare(fit, None, None)
    S = fit.covariances()[0]
    for reduced, want in (("y ~ x + (1 | g)", np.diag([S[0, 0], 0.0])),
                          ("y ~ x + (1 + x || g)", np.diag(np.diag(S)))):
        comp = ff._comparison(fit, reduced, formula, df0)
        T = ff._null_factors(fit, comp)[0]
        np.testing.assert_allclose(T @ T.T, want, atol=1e-12)
    assert ff._comparison(fit, "y ~ x + (1 + x || g)", formula, df0).df == 1


def test_cli_compare_writes_the_test_it_ran(fit, tmp_path):
    fit.to_json(tmp_path / "fit.json")
    fit.design.train.to_csv(tmp_path / "log.csv", index=False)
    res = _cli("--from-fit", "fit.json", "--data", "log.csv", "--compare", "y ~ x + (1 | g)",
               "--replicates", "5", "--out", "out", "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "out" / "power.json").read_text())
    assert meta["compare"] == "y ~ x + (1 | g)" and meta["df"] == 2 and meta["boundary"]
    assert meta["test"] == "lrt" and "conservative" in res.stdout


@pytest.mark.slow
def test_a_real_log_extended_to_more_llms(shared_data):
    """storysim triplets (8 LLMs x 100 stories, a correlated ToM-order slope per LLM):
    power for a smaller ToM-order effect with the LLMs doubled as simr's extend."""
    ss = pd.read_csv(shared_data / "storysim_items.csv")
    keep = ((ss.experiment == "triplets") & ss.prompt_variant.isin(["original", "spaced"])
            & (ss.quality_flag != "failed_run"))
    df = ss[keep].reset_index(drop=True)
    m = fit_lme(df, "correct ~ tom_order + prompt_variant + (1 + tom_order | model) "
                    "+ (1 | item_id)")
    q = m.terms[0].q
    res = power_from_fit(m, "tom_order", set_effects={"tom_order": -0.2},
                         along={"model": [2 * q]}, n_sims=10, seed=1, progress=False)
    row = res.table.iloc[0]
    assert row["model"] == 2 * q and row["n_rows"] == 2 * len(df)
    assert row["n_valid"] + row["n_failed"] == 10 and row["null_n_sims"] == 10
    assert abs(row["estimate"] + 0.2) < 0.3


def test_size_guard_refuses_a_run_of_years_before_any_work(fit):
    with pytest.raises(ValueError, match="power from a fit too large: would take about"):
        power_from_fit(fit, "x", n_sims=10**9, progress=False)


def test_refits_on_several_cores_give_the_same_result(fit):
    # blocks of 25 studies (the last of 10, padded) are simulated in order from one stream and
    # refitted side by side, one a core: the table is the same whatever the number of cores
    kw = dict(n_sims=60, seed=2, progress=False, set_effects={"x": 0.4})
    one = power_from_fit(fit, "x", cores=1, **kw)
    for cores in (2, 3):
        pd.testing.assert_frame_equal(one.table, power_from_fit(fit, "x", cores=cores,
                                                                **kw).table)
    lrt = dict(compare="y ~ x + (1 | g)", n_sims=30, seed=1, chunk=10, progress=False,
               type_one=False)
    pd.testing.assert_frame_equal(power_from_fit(fit, cores=1, **lrt).table,
                                  power_from_fit(fit, cores=2, **lrt).table)


@pytest.mark.parametrize("cores", [0, -1, 1.5, True])
def test_cores_must_be_a_positive_integer(fit, cores):
    with pytest.raises(InputError, match=f"cores must be an integer >= 1, got {cores!r}"):
        power_from_fit(fit, "x", n_sims=5, progress=False, cores=cores)


def test_a_point_stops_early_when_too_many_fits_fail_alike_on_any_cores(fit, monkeypatch):
    import tomstats.planning.from_fit as ff

    real = ff._refit

    def failing(a, X, ys, theta, eta, cores=1):
        r = real(a, X, ys, theta, eta, cores)
        # a study "fails" by its own outcomes (an odd number of successes): the same studies
        # fail however the blocks are split between cores
        bad = ys.sum(axis=1) % 2 == 1
        return dataclasses.replace(r, converged=r.converged & ~bad)

    monkeypatch.setattr(ff, "_refit", failing)
    kw = dict(n_sims=100, seed=4, chunk=10, max_failed=0.3, progress=False, type_one=False)
    one = power_from_fit(fit, "x", cores=1, **kw)
    row = one.table.iloc[0]
    assert row["stopped_early"] and row["n_valid"] + row["n_failed"] < 100
    assert row["n_failed"] > 0.3 * (row["n_valid"] + row["n_failed"])
    assert (row["n_valid"] + row["n_failed"]) % 10 == 0  # stopped at a block's end
    pd.testing.assert_frame_equal(one.table, power_from_fit(fit, "x", cores=3, **kw).table)
