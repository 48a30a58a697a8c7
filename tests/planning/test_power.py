"""Power analysis (tomstats.planning): type I error at the nominal level, the analytic
noncentral-F power, decisions equal to statsmodels' on the same simulated data, assurance
from a posterior, reproducibility, and bad input refused before any work."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.stats

import tomstats
from tomstats.analysis.intervals import wilson_interval
from tomstats.design import CONTEXT, TOM, Design, Factor, paper_design
from tomstats.model import Params
from tomstats.planning.analyses import decide, parse_test
from tomstats.planning.result import PowerFailureError
from tomstats.simulation.count_anova import anova_from_stats
from tomstats.simulation.study import PowerSpec, StudyConfig

DESIGN1 = paper_design().with_(capability=(1.0,))
NULL = Params(alpha=7e-5, gamma=0.0, delta=0.0, sigma=0.6)


def _mc_band(p: float, n: int, k: float = 3.0) -> tuple[float, float]:
    se = np.sqrt(p * (1 - p) / n)
    return p - k * se, p + k * se


def test_wilson_interval_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(0, 10), (3, 10), (50, 100), (999, 1000), (1000, 1000)]:
        lo, hi = wilson_interval(k, n)
        rlo, rhi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert lo == pytest.approx(rlo, abs=1e-12) and hi == pytest.approx(rhi, abs=1e-12)


def test_anova_type1_error_at_nominal_level():
    # gamma = delta = 0: accuracy depends on context only, so the ToM main effect and the
    # interaction are null on the probability scale that the ANOVA tests.
    res = tomstats.power(StudyConfig(design=DESIGN1, params=NULL),
                         along={"questions_per_cell": [40]},
                         tests=["anova:tom_order", "anova:interaction"], replicates=2000,
                         seed=11, progress=False)
    lo, hi = _mc_band(0.05, 2000)
    for test in ("anova:tom_order", "anova:interaction"):
        p = float(res.data["power"].sel(kind="plug-in", value=40, test=test))
        assert lo <= p <= hi, (test, p)


def test_glm_lrt_and_wald_type1_error_at_nominal_level():
    # delta = 0 and sigma = 0: the logit is exactly linear in equation (1)'s predictors.
    res = tomstats.power(StudyConfig(design=DESIGN1,
                                     params=Params(alpha=7e-5, gamma=1.2, delta=0.0,
                                                   sigma=0.0)),
                         along={"questions_per_cell": [50]},
                         tests=["glm-lrt:delta", "glm-wald:delta"], replicates=2000, seed=3,
                         progress=False)
    lo, hi = _mc_band(0.05, 2000)
    for test in ("glm-lrt:delta", "glm-wald:delta"):
        p = float(res.data["power"].sel(kind="plug-in", value=50, test=test))
        assert lo <= p <= hi, (test, p)
    # the estimate of delta is unbiased around 0
    est = float(res.data["estimate"].sel(kind="plug-in", value=50, test="glm-lrt:delta"))
    assert abs(est) < 2e-5


#: Rejection rate of the GLMM Wald test of delta at a true delta of 0 (paper design, five
#: LLMs, default alpha, gamma, sigma, 20 questions per cell, a = 0.05), measured on 2,000
#: studies (seed 12; MC se 0.005) and stated in docs/planning.md: slightly liberal, as Wald
#: tests of GLMMs with few levels of a grouping factor (here 5 LLMs) are.
GLMM_WALD_TYPE1 = 0.0545


def test_glmm_wald_type1_error_matches_its_documented_value():
    p = StudyConfig().params
    res = tomstats.power(StudyConfig(), Params(p.alpha, p.gamma, 0.0, p.sigma),
                         along={"questions_per_cell": [20]},
                         tests=["glmm-wald:delta", "glmm-lrt:delta"], replicates=400, seed=5,
                         progress=False)
    lo, hi = _mc_band(GLMM_WALD_TYPE1, 400)
    for test in ("glmm-wald:delta", "glmm-lrt:delta"):
        sel = dict(kind="plug-in", value=20, test=test)
        assert int(res.data["n_failed"].sel(**sel)) == 0
        rate = float(res.data["power"].sel(**sel))
        assert lo <= rate <= hi, (test, rate)
    est = float(res.data["estimate"].sel(kind="plug-in", value=20, test="glmm-wald:delta"))
    assert abs(est) < 3e-5  # delta-hat centred on 0 (its sd is about 1e-4 here)


@pytest.mark.parametrize("shift", [0.0, 0.15, 0.3, 0.45])
def test_gaussian_balanced_anova_power_equals_noncentral_f(shift):
    """The decision rule of the power module on Gaussian cell data gives scipy's ncf power."""
    rng = np.random.default_rng(int(shift * 100))
    a, b, n, sd, reps, alpha = 3, 4, 8, 1.0, 4000, 0.05
    mu = np.zeros((a, b))
    mu[:, 0] += shift * np.array([-1, 0, 1])  # interaction: a pattern in one column only
    y = mu[None, :, :, None] + sd * rng.standard_normal((reps, a, b, n))
    sums = y.sum(-1)
    within = ((y - y.mean(-1, keepdims=True)) ** 2).sum(-1)
    tab = anova_from_stats(sums, np.full((a, b), float(n)), within, balanced=True,
                           p_values=False)
    st = {"anova_F": np.asarray(tab.F)[..., :3], "anova_peta": np.asarray(tab.partial_eta2)}
    rej, ok, _ = decide(parse_test("anova:interaction"), st, alpha, n, (a, b), 1)
    inter = mu - mu.mean(1, keepdims=True) - mu.mean(0, keepdims=True) + mu.mean()
    lam = n * (inter ** 2).sum() / sd ** 2
    df1, df2 = (a - 1) * (b - 1), a * b * (n - 1)
    expected = scipy.stats.ncf.sf(scipy.stats.f.isf(alpha, df1, df2), df1, df2, lam) \
        if lam > 0 else alpha
    lo, hi = _mc_band(expected, reps)
    assert ok.all()
    assert lo <= rej.mean() <= hi


def test_decisions_equal_statsmodels_on_the_same_data():
    import statsmodels.api as sm
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    design = paper_design().with_(capability=(1.0,), n_per_cell=30)
    res = tomstats.power(StudyConfig(design=design), along={"questions_per_cell": [30]},
                         tests=["anova:interaction", "anova:context_length", "glm-lrt:delta",
                                "glm-wald:gamma"],
                         replicates=150, seed=5, keep_data=True, progress=False)
    succ = res.data["successes"].sel(kind="plug-in", value=30).isel(llm_index=0).to_numpy()
    reject = res.data["reject"].sel(kind="plug-in", value=30).isel(llm_index=0)
    c, t = np.meshgrid(design.context, design.tom, indexing="ij")
    agree = total = 0
    for r in range(succ.shape[0]):
        k = succ[r]
        rows = pd.DataFrame({
            "c": np.repeat(c.ravel(), 30), "t": np.repeat(t.ravel(), 30),
            "y": np.concatenate([np.r_[np.ones(int(kk)), np.zeros(30 - int(kk))]
                                 for kk in k.ravel()])})
        tab = anova_lm(smf.ols("y ~ C(c) * C(t)", rows).fit(), typ=2)
        x = np.column_stack([np.ones(len(rows)), rows.c * np.log1p(rows.c / 500), rows.t,
                             rows.c * rows.t])
        full = sm.Logit(rows.y, x).fit(disp=0, tol=1e-10)
        red = sm.Logit(rows.y, x[:, [0, 1, 2]]).fit(disp=0, tol=1e-10)
        ref = {
            "anova:interaction": tab.loc["C(c):C(t)", "PR(>F)"] < 0.05,
            "anova:context_length": tab.loc["C(c)", "PR(>F)"] < 0.05,
            "glm-lrt:delta": scipy.stats.chi2.sf(2 * (full.llf - red.llf), 1) < 0.05,
            "glm-wald:gamma": full.pvalues.iloc[2] < 0.05,
        }
        for test, want in ref.items():
            got = bool(reject.sel(test=test).to_numpy()[r])
            agree += got == bool(want)
            total += 1
    assert agree / total >= 0.999, (agree, total)


def test_same_seed_same_curve_and_power_grows_with_n():
    kw = dict(along={"questions_per_cell": [10, 30, 90, 270]},
              tests=["anova:interaction", "glm-lrt:delta"], replicates=400, progress=False)
    a = tomstats.power(StudyConfig(design=DESIGN1), seed=7, **kw)
    b = tomstats.power(StudyConfig(design=DESIGN1), seed=7, **kw)
    c = tomstats.power(StudyConfig(design=DESIGN1), seed=8, **kw)
    pd.testing.assert_frame_equal(a.frame(), b.frame())
    assert not a.frame()["power"].equals(c.frame()["power"])
    for test in ("anova:interaction", "glm-lrt:delta"):
        p = a.data["power"].sel(kind="plug-in", test=test).to_numpy()
        se = np.sqrt(p * (1 - p) / 400 * 2) + 1e-9
        assert np.all(np.diff(p) >= -3 * se[1:]), (test, p)
        assert p[-1] > p[0] + 0.3


def test_targets_and_frame():
    res = tomstats.power(StudyConfig(design=DESIGN1), along={"questions_per_cell": [10, 50, 400]},
                         tests=["anova:tom_order", "anova:interaction"], replicates=300,
                         seed=1, progress=False)
    df = res.frame()
    assert list(df.columns) == ["kind", "along", "value", "test", "power", "ci_low", "ci_high",
                                "estimate", "n_fits", "n_failed", "n_rejected"]
    assert (df["ci_low"] <= df["power"]).all() and (df["power"] <= df["ci_high"]).all()
    t = {d["test"]: d for d in res.target_records(0.8)}
    assert t["anova:tom_order"]["value"] == 10
    inter = df[df.test == "anova:interaction"].set_index("value")["power"]
    first = next((v for v in (10, 50, 400) if inter[v] >= 0.8), None)
    assert t["anova:interaction"]["value"] == first


def test_stories_and_llms_change_the_data_as_documented():
    # few stories per cell: answers within a story are correlated, so the ANOVA's null
    # rejection rate rises above alpha (the documented price of ignoring clustering)
    res = tomstats.power(StudyConfig(design=DESIGN1, params=NULL.replace(sigma=1.5)),
                         along={"items_per_cell": [5, 500]}, tests=["anova:tom_order"],
                         replicates=600, seed=2, progress=False)
    p = res.data["power"].sel(kind="plug-in", test="anova:tom_order").to_numpy()
    assert p[0] > 0.15 and p[1] < 0.09
    res = tomstats.power(StudyConfig(design=DESIGN1), along={"n_llms": [2, 4]},
                         tests=["anova:interaction"], replicates=50, progress=False)
    assert res.data["n_fits"].sel(kind="plug-in").to_numpy().ravel().tolist() == [100, 200]


def test_failures_are_counted_not_rejected_and_stop_the_run():
    design = paper_design().with_(capability=(2.5,))  # accuracy ~ 99 %: all-correct cells
    cfg = StudyConfig(design=design)
    with pytest.raises(PowerFailureError, match="failed"):
        tomstats.power(cfg, along={"questions_per_cell": [3]}, tests=["glm-lrt:interaction"],
                       replicates=100, progress=False)
    res = tomstats.power(cfg, along={"questions_per_cell": [3]}, tests=["glm-lrt:interaction"],
                         replicates=100, allow_failures=True, progress=False)
    row = res.frame().iloc[0]
    assert row.n_failed > 1
    assert row.n_rejected <= row.n_fits - row.n_failed


def test_assurance_from_a_structural_posterior(tmp_path):
    from simulation.test_posterior_sweep import _idata

    f = tmp_path / "fit.nc"
    _idata(sd=0.3, gamma_sd=0.5, draws=50).to_netcdf(str(f))
    res = tomstats.power(StudyConfig(design=DESIGN1), along={"questions_per_cell": [20, 200]},
                         tests=["anova:interaction"], replicates=300, posterior=f,
                         progress=False)
    assert list(res.data["kind"].to_numpy()) == ["plug-in", "assurance"]
    assert list(res.data["llm"].to_numpy()) == ["weak", "strong"]
    pw = res.data["power"].sel(test="anova:interaction")
    assert np.all(np.isfinite(pw.to_numpy()))
    # a wide posterior spreads the power: at the large n assurance is below plug-in power
    assert float(pw.sel(kind="assurance", value=200)) < float(pw.sel(kind="plug-in", value=200))


def test_float32_posterior_is_simulated_and_fitted_in_float64(tmp_path):
    """Draws stored as float32 (as samplers write them) must not lower the fits' precision:
    a float32 logistic fit at 1,000 questions per cell fails to converge now and then."""
    from simulation.test_posterior_sweep import _idata

    idata = _idata(sd=0.1, gamma_sd=0.1, draws=20)
    idata.posterior = idata.posterior.astype("float32")
    f = tmp_path / "fit32.nc"
    idata.to_netcdf(str(f))
    res = tomstats.power(StudyConfig(design=DESIGN1), along={"questions_per_cell": [1000]},
                         tests=["glm-wald:gamma"], replicates=100, posterior=f,
                         keep_data=True, progress=False)
    assert res.data["successes"].dtype == np.float64
    assert int(res.data["n_failed"].sum()) == 0


@pytest.mark.parametrize("kwargs,match", [
    ({"along": {"questions_per_cell": [0, 10]}}, "whole numbers >= 1"),
    ({"along": {"questions_per_cell": [-5]}}, "whole numbers >= 1"),
    ({"along": {"questions_per_cel": [5]}}, "did you mean 'questions_per_cell'"),
    ({"tests": ["anova:tom_ordr"]}, "did you mean 'anova:tom_order'"),
    ({"tests": ["glm-wald:interaction"]}, "unknown test"),
    ({"alpha": 1.5}, "alpha must be in"),
    ({"alpha": 0.0}, "alpha must be in"),
    ({"replicates": 0}, "replicates must be"),
    ({"items_per_cell": 800}, "must not exceed"),
    ({"tests": ["glmm-wald:delta"], "n_llms": 1}, "at least 2 LLMs"),
])
def test_bad_input_is_refused_before_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tomstats.power(StudyConfig(design=DESIGN1), **kwargs)


def test_bad_design_and_posterior(tmp_path):
    one_order = Design((Factor(CONTEXT, (200, 1000)), Factor(TOM, (1,))), 20, (1.0,))
    with pytest.raises(ValueError, match="2 context lengths and 2 ToM orders"):
        tomstats.power(one_order, tests=["anova:tom_order"])
    with pytest.raises(TypeError, match="study must be"):
        tomstats.power(42)
    from simulation.test_posterior_sweep import _idata

    f = tmp_path / "formula.nc"
    _idata(formula=True).to_netcdf(str(f))
    with pytest.raises(ValueError, match="structural fit"):
        tomstats.power(StudyConfig(design=DESIGN1), posterior=f, replicates=10)
    with pytest.raises(FileNotFoundError):
        tomstats.power(StudyConfig(design=DESIGN1), posterior=tmp_path / "none.nc")


def test_power_table_in_toml(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[power]\nalong = { delta = [0.0, 4e-4] }\ntests = ["glm-lrt:delta"]\n'
                 'replicates = 20\nseed = 4\n')
    cfg = tomstats.load_study(f)
    assert cfg.power == PowerSpec(along="delta", values=(0.0, 4e-4), tests=("glm-lrt:delta",),
                                  replicates=20, seed=4)
    f.write_text('[power]\nalong = { questions_per_cell = [10] }\ntets = ["x"]\n')
    with pytest.raises(ValueError, match="did you mean 'tests'"):
        tomstats.load_study(f)


def test_cli_writes_csv_figure_summary(tmp_path, repo_root, capsys):
    from tomstats.cli import main

    out = tmp_path / "pw"
    rc = main(["power", str(repo_root / "simulations" / "paper.toml"), "--along",
               "questions_per_cell=10,40,160", "--test", "anova:interaction", "--test",
               "glm-lrt:delta", "--replicates", "60", "--out", str(out)])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["power.csv", "power.nc", "power.png",
                                                     "summary.json"]
    s = json.loads((out / "summary.json").read_text())
    assert {t["test"] for t in s["targets"]} == {"anova:interaction", "glm-lrt:delta"}
    assert s["settings"]["replicates"] == 60
    df = pd.read_csv(out / "power.csv")
    assert len(df) == 6
    printed = capsys.readouterr().out
    assert "anova:interaction" in printed and "wrote 4 files" in printed
    bad = tmp_path / "bad"
    rc = main(["power", str(repo_root / "simulations" / "paper.toml"), "--along",
               "questions_per_cell=0,10", "--out", str(bad)])
    assert rc == 2
    assert not bad.exists() or not any(bad.iterdir())
    assert "whole numbers >= 1" in capsys.readouterr().err


# --------------------------------------------------------------------------- a second dimension


def test_by_repeats_the_curve_and_each_curve_equals_its_own_run():
    kw = dict(along={"questions_per_cell": [10, 30]}, tests=["anova:interaction",
              "rm-anova:tom_order", "glm-lrt:delta"], replicates=80, seed=6, progress=False)
    cfg = StudyConfig(design=paper_design())
    res = tomstats.power(cfg, by={"n_llms": [3, 5]}, **kw)
    assert res.by == "n_llms" and res.data["power"].dims == ("by_value", "kind", "value", "test")
    df = res.frame()
    assert list(df.columns[:5]) == ["kind", "by", "by_value", "along", "value"]
    for n_llms in (3, 5):
        one = tomstats.power(cfg, n_llms=n_llms, **kw).frame()
        got = df[df["by_value"] == n_llms].drop(columns=["by", "by_value"])
        pd.testing.assert_frame_equal(got.reset_index(drop=True), one)
    targets = res.target_records(0.5)
    assert {(t["by_value"], t["test"]) for t in targets} == {
        (b, t) for b in (3, 5) for t in kw["tests"]}
    # a parameter as the second dimension; power grows with delta
    pw = tomstats.power(StudyConfig(design=DESIGN1), along={"questions_per_cell": [60]},
                        by={"delta": [0.0, 4e-4]}, tests=["glm-lrt:delta"], replicates=300,
                        seed=1, progress=False).data["power"].squeeze().to_numpy()
    assert pw[0] < 0.1 < 0.5 < pw[1]


def test_by_with_a_posterior_fixes_that_parameter(tmp_path):
    from simulation.test_posterior_sweep import _idata

    f = tmp_path / "fit.nc"
    _idata().to_netcdf(str(f))
    # delta fixed at 0 by `along` and gamma by `by`: with both 0 the order effect is null in
    # every posterior draw, so the assurance is the test's level
    res = tomstats.power(StudyConfig(design=DESIGN1), along={"delta": [0.0]},
                         by={"gamma": [0.0, 2.0]}, tests=["anova:tom_order"], replicates=200,
                         posterior=f, seed=0, progress=False)
    pw = res.data["power"].sel(kind="assurance", test="anova:tom_order").squeeze()
    assert float(pw.sel(by_value=0.0)) < 0.15 and float(pw.sel(by_value=2.0)) > 0.9


@pytest.mark.parametrize("kwargs,match", [
    ({"by": {"questions_per_cell": [5]}}, "already the dimension `along` varies"),
    ({"by": {"n_lms": [3]}}, "did you mean 'n_llms'"),
    ({"by": {"n_llms": [0, 3]}}, "by n_llms: values must be whole numbers >= 1"),
    ({"by": {"n_llms": [3, 3]}}, "values must be distinct"),
    ({"by": {"n_llms": [3], "delta": [0]}}, "exactly one dimension"),
    ({"by": {"n_llms": [3, 5]}, "keep_data": True}, "keep_data=True needs the same number"),
    ({"by": {"items_per_cell": [5, 800]}}, "must not exceed"),
    ({"by": {"questions_per_cell": [5]}, "along": {"n_llms": [3]},
      "questions_per_cell": 5}, "a dimension `along` or `by` varies"),
])
def test_bad_second_dimension_is_refused_before_work(kwargs, match):
    kw = {"along": {"questions_per_cell": [10, 20]}, "tests": ["anova:tom_order"],
          "replicates": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        tomstats.power(StudyConfig(design=DESIGN1), **kw)


def test_by_in_toml_and_cli(tmp_path, repo_root, capsys):
    from tomstats.cli import main

    f = tmp_path / "s.toml"
    f.write_text('[power]\nalong = { questions_per_cell = [10, 20] }\nby = { n_llms = [3, 4] }'
                 '\ntests = ["rm-anova:tom_order"]\nreplicates = 20\n')
    spec = tomstats.load_study(f).power
    assert (spec.by, spec.by_values) == ("n_llms", (3.0, 4.0))
    assert spec.to_dict()["by"] == {"n_llms": [3, 4]}
    out = tmp_path / "pw"
    rc = main(["power", str(repo_root / "simulations" / "paper.toml"), "--along",
               "questions_per_cell=10,20", "--by", "n_llms=3,4", "--test",
               "rm-anova:interaction", "--replicates", "30", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "plug-in power at n_llms = 3" in printed and "plug-in power at n_llms = 4" in printed
    df = pd.read_csv(out / "power.csv")
    assert len(df) == 4 and set(df["by_value"]) == {3, 4} and set(df["by"]) == {"n_llms"}
    s = json.loads((out / "summary.json").read_text())
    assert s["settings"]["by"] == "n_llms" and s["settings"]["by_values"] == [3, 4]
    assert s["settings"]["n_llms"] is None  # not the first curve's 3
    assert {t["by_value"] for t in s["targets"]} == {3, 4}
    rc = main(["power", str(repo_root / "simulations" / "paper.toml"), "--by", "nllms=3",
               "--out", str(tmp_path / "bad")])
    assert rc == 2 and "did you mean 'n_llms'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
