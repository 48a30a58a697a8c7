"""Tests of tomstats.glmm: specs, bad input, exact log densities of both backends, a NumPyro
structural fit (save/load, predict, PPC, calibration), diagnostics, CLI, recovery."""

from __future__ import annotations

import json
import tomllib
import warnings

import numpy as np
import pandas as pd
import pytest

import tomstats.glmm as glmm
from tomstats.glmm.data import build_design, prepare_data
from tomstats.model import Params, linear_predictor

TRUE = Params(alpha=1e-4, gamma=0.8, delta=2e-5, sigma=0.5)
CAPS = {"A": 1.2, "B": 0.8, "C": 1.0}
FORMULA = "correct ~ tom_order + log_context + (1 + tom_order | model) + (1 | item)"


def crossed_data(seed: int = 1, n_items: int = 40) -> pd.DataFrame:
    """3 LLMs × n_items items × 3 context lengths, ToM order random; item effects shared."""
    rng = np.random.default_rng(seed)
    items = rng.normal(0, TRUE.sigma, n_items)
    rows = []
    for m, cap in CAPS.items():
        for k, u in enumerate(items):
            for c in (200, 1000, 5000):
                t = int(rng.integers(0, 3))
                eta = float(linear_predictor(TRUE, c, t, cap, u))
                rows.append({"model": m, "item": f"i{k}", "context_words": c, "tom_order": t,
                             "correct": int(rng.random() < 1 / (1 + np.exp(-eta)))})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return crossed_data()


@pytest.fixture(scope="module")
def structural_fit(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glmm.DiagnosticsWarning)
        return glmm.fit(data, "structural", chains=2, draws=300, tune=300, seed=3,
                        progress=False, hierarchical=True)


# --------------------------------------------------------------------------- specs


def test_parse_formula():
    r, n, fixed, rand = glmm.parse_formula(
        "correct ~ tom_order * log_context + (1 | model) + (1 + tom_order | model) "
        "+ (0 + x || item) + (1 | a/b)")
    assert (r, n, fixed) == ("correct", None, "tom_order * log_context")
    assert [(t.expr, t.group, t.correlated, t.key) for t in rand] == [
        ("1", "model", True, "model"), ("1 + tom_order", "model", True, "model_2"),
        ("0 + x", "item", False, "item"), ("1", "a", True, "a"), ("1", "a:b", True, "a__b")]
    r, n, fixed, rand = glmm.parse_formula("k | trials(n) ~ (1 | g)")
    assert (r, n, fixed, len(rand)) == ("k", "n", "1", 1)
    for bad in ("correct", "a + b ~ x", "y ~ (1 | )", "y ~ x + (1 | g", "y ~ x +"):
        with pytest.raises(ValueError):
            glmm.parse_formula(bad)


def test_spec_json_roundtrip(data):
    from tomstats.glmm.spec import spec_from_json

    for model, opts in (("structural", {"random_slopes": ("tom_order",),
                                        "fixed": {"delta": 0.0},
                                        "priors": {"gamma": glmm.normal(1, 0.5)}}),
                        ("correct ~ tom_order + (1 + tom_order | model) + (1 | item)", {})):
        spec, _ = build_design(model, prepare_data(data), **opts)
        again = spec_from_json(json.dumps(spec.to_dict()))
        assert again == spec
    spec, _ = build_design("structural", prepare_data(data), noncentered=["item"])
    assert spec.noncentered == ("item",) and spec_from_json(spec.to_dict()) == spec
    spec, _ = build_design(FORMULA, prepare_data(data), noncentered=False)
    assert spec.noncentered == ()
    with pytest.raises(ValueError, match="noncentered"):
        build_design("structural", prepare_data(data), noncentered=["capabilities"])
    with pytest.raises(ValueError, match="noncentered"):
        build_design(FORMULA, prepare_data(data), noncentered=["llm"])
    spec, _ = build_design("structural", prepare_data(data),
                           priors={"gamma": glmm.normal(1, 0.5)})
    assert spec.prior("gamma") == glmm.normal(1, 0.5)
    assert spec.prior("sigma_item") == glmm.half_normal(1.0)


def test_spec_json_back_compat():
    """Specs saved by earlier versions (boolean ``noncentered``, no ``hierarchical``)."""
    from tomstats.glmm.spec import StructuralSpec, spec_from_json

    old = StructuralSpec().to_dict()
    del old["hierarchical"]
    for flag, parts in ((True, ("capability", "item", "slopes")), (False, ())):
        spec = spec_from_json(json.dumps({**old, "noncentered": flag}))
        assert spec.noncentered == parts and spec.hierarchical
    formula = {"kind": "formula", "formula": "y ~ x + (1 | g)", "response": "y",
               "trials": None, "family": "bernoulli", "fixed": "x", "priors": {},
               "random": [{"expr": "1", "group": "g", "correlated": True, "key": "g"}],
               "noncentered": True, "center": True, "aggregate": False}
    assert spec_from_json(formula).noncentered == ("g",)
    assert spec_from_json({**formula, "noncentered": False}).noncentered == ()
    with pytest.raises(ValueError, match="lacks the field 'family'"):
        spec_from_json({k: v for k, v in old.items() if k != "family"})
    with pytest.raises(ValueError, match="noncentered"):
        spec_from_json({**old, "noncentered": 3})
    with pytest.raises(ValueError, match="unknown model kind"):
        spec_from_json({"kind": "other"})


def test_default_structural_priors_leave_paper_values_inside():
    """The default priors put the paper's α, γ, δ (and 10× α, δ) within 1.6 prior sd."""
    from tomstats.glmm.spec import StructuralSpec
    from tomstats.simulation.paper import PAPER_PARAMS

    spec = StructuralSpec()
    for name, value, scale in (("alpha_scaled", PAPER_PARAMS.alpha, spec.alpha_scale),
                               ("gamma", PAPER_PARAMS.gamma, 1.0),
                               ("delta_scaled", PAPER_PARAMS.delta, spec.delta_scale)):
        prior = spec.prior(name)
        assert prior.dist == "normal" and prior["loc"] == 0.0
        z = value / scale / prior["scale"]
        assert 0 < z < 0.6, (name, z)
        if name != "gamma":
            assert 10 * z < 1.6, (name, 10 * z)


def test_aggregation_keeps_counts(data):
    df = prepare_data(data)
    spec, md = build_design("structural", df, item_effects=False)
    assert spec.aggregate and md.trials is not None
    assert md.n_obs == 3 * 3 * 3
    assert md.y.sum() == df["correct"].sum() and md.trials.sum() == len(df)
    # each row's cell has the row's covariates
    assert np.array_equal(md.arrays["context"][md.row_obs], df["context_words"].to_numpy())
    spec, md = build_design("structural", df)  # items repeat → item effects, no aggregation
    assert spec.item_effects and not spec.aggregate and md.trials is None


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("model", "change", "match"),
    [
        ("correct ~ tom_order + nope + (1 | model)", None, r"column\(s\) 'nope' that"),
        ("structural", lambda d: d.assign(correct=d["correct"] * 2), "must be 0/1"),
        ("correct ~ 1 + (1 | model)", lambda d: d.assign(model="only"), "single level"),
        ("structural", lambda d: d.assign(tom_order=d["tom_order"].where(d.index != 5)),
         "tom_order.*missing"),
        ("structural", lambda d: d.assign(tom_order=1), "several ToM orders"),
        ("structural", lambda d: d.assign(context_words=300), "several context lengths"),
        ("structural", lambda d: d.assign(context_words=182 + d.index % 10),
         r"from 182 to 191 only \(max/min = 1.05 < 1.5\).*fixed="),
        ("structural", lambda d: d.assign(context_words=-d["context_words"]), "> 0 words"),
        ("structural", lambda d: d.drop(columns="correct"), "no outcome"),
        ("structural", None, "unknown key 'nonsense'"),
        ("structural", lambda d: d.assign(correct=1), "no variance: column 'correct' is 1"),
        ("correct ~ C(tom_order) + (1 | model)", lambda d: d.assign(tom_order=2),
         r"C\(tom_order\) has a single level.*is 2 in all"),
    ],
)
def test_bad_input(data, model, change, match):
    df = data if change is None else change(data.copy())
    opts = {"nonsense": 1} if "nonsense" in match else {}
    with pytest.raises(ValueError, match=match):
        glmm.fit(df, model, **opts)


def test_bad_binomial_counts(data):
    df = data.assign(successes=data["correct"] + 2, trials=2).drop(columns="correct")
    with pytest.raises(ValueError, match="successes > trials"):
        glmm.fit(df, "structural")
    with pytest.raises(ValueError, match="successes > trials"):
        glmm.fit(df, "successes | trials(trials) ~ tom_order + (1 | model)")
    with pytest.raises(ValueError, match="non-negative integers"):
        glmm.fit(df.assign(successes=0.5), "structural")


def test_bad_sampler_arguments(data):
    with pytest.raises(ValueError, match="backend"):
        glmm.fit(data, backend="stan")
    with pytest.raises(ValueError, match="target_accept"):
        glmm.fit(data, target_accept=1.5)
    with pytest.raises(ValueError, match="chains"):
        glmm.fit(data, chains=0)
    with pytest.raises(ValueError, match="column mapping"):
        glmm.fit(data, columns={"correct": "is_correct"})


def test_one_context_with_fixed_alpha_delta(data):
    spec, _ = build_design("structural", prepare_data(data.assign(context_words=300)),
                           fixed={"alpha": 0.0, "delta": 0.0})
    assert dict(spec.fixed) == {"alpha": 0.0, "delta": 0.0}
    narrow = data.assign(context_words=182 + data.index % 10)  # StorySim triplets' spread
    spec, _ = build_design("structural", prepare_data(narrow), fixed={"alpha": 0, "delta": 0})
    assert dict(spec.fixed) == {"alpha": 0.0, "delta": 0.0}
    with pytest.raises(ValueError, match="max/min"):  # fixing alpha alone is not enough
        build_design("structural", prepare_data(narrow), fixed={"alpha": 0})
    # a range of 1.5x is enough
    spec, _ = build_design("structural", prepare_data(data.assign(
        context_words=np.where(data.index % 2 == 0, 1000, 1500))))
    assert spec.fixed == ()


def test_load_fit_refuses_foreign(tmp_path):
    import arviz as az
    import xarray as xr

    with pytest.raises(FileNotFoundError):
        glmm.load_fit(tmp_path / "missing.nc")
    junk = tmp_path / "junk.nc"
    junk.write_text("not a netCDF file")
    with pytest.raises(ValueError, match="not a readable netCDF"):
        glmm.load_fit(junk)
    foreign = tmp_path / "foreign.nc"
    az.from_dict(posterior={"mu": np.zeros((2, 10))}).to_netcdf(str(foreign),
                                                                engine="netcdf4")
    with pytest.raises(ValueError, match="not a tomstats GLMM fit"):
        glmm.load_fit(foreign)
    plain = tmp_path / "plain.nc"
    xr.Dataset({"x": ("a", np.arange(3))}).to_netcdf(plain, engine="netcdf4")
    with pytest.raises(ValueError, match="no posterior group|not a tomstats"):
        glmm.load_fit(plain)


# --------------------------------------------------------------------------- backends agree


def _log_densities(model: str, df: pd.DataFrame, **opts) -> tuple[float, float]:
    """Log joint density of the NumPyro and the PyMC model at one random point."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import pytensor.tensor as pt
    from numpyro.infer.util import log_density

    from tomstats.glmm import numpyro_backend as nb
    from tomstats.glmm import pymc_backend as pb

    spec, md = build_design(model, prepare_data(df), **opts)
    fn = nb.model_function(spec)
    tr = numpyro.handlers.trace(numpyro.handlers.seed(fn, 3)).get_trace(
        spec, nb.to_jax(spec, md), y=None)
    params = {k: np.asarray(v["value"], dtype=float) for k, v in tr.items()
              if v["type"] == "sample" and not v["is_observed"] and k != "y"}
    with jax.enable_x64(True):
        ld, _ = log_density(fn, (spec, nb.to_jax(spec, md)), {"y": jnp.asarray(md.y)},
                            {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()})
        ld = float(ld)
    m = pb.build_model(spec, md)
    point = {}
    for rv in m.free_RVs:
        x, t = params[rv.name], m.rvs_to_transforms.get(rv)
        point[m.rvs_to_values[rv].name] = (
            t.forward(pt.as_tensor(x), *rv.owner.inputs).eval() if t is not None else x)
    return ld, float(m.compile_logp(jacobian=False)(point))


@pytest.mark.parametrize(
    ("model", "opts"),
    [
        ("structural", {"random_slopes": ("tom_order", "context")}),
        ("structural", {"noncentered": False, "random_slopes": ("tom_order",)}),
        ("correct ~ tom_order * log_context + (1 | model) + (0 + tom_order | model) "
         "+ (1 | item)", {}),
        ("correct ~ tom_order + (1 + tom_order || model) + (1 | item)", {"noncentered": False}),
    ],
)
def test_backends_same_log_density(data, model, opts):
    """Same spec → the same joint density in NumPyro and PyMC (priors + likelihood)."""
    ld_numpyro, ld_pymc = _log_densities(model, data, **opts)
    assert np.isfinite(ld_numpyro)
    assert ld_numpyro == pytest.approx(ld_pymc, abs=1e-6)


# --------------------------------------------------------------------------- one fit


def test_fit_layout_and_provenance(structural_fit, data):
    idata = structural_fit
    assert set(idata.groups()) >= {"posterior", "posterior_predictive", "log_likelihood",
                                   "sample_stats", "observed_data", "constant_data"}
    post = idata.posterior
    for v in ("alpha", "gamma", "delta", "sigma_item", "capability"):
        assert v in post
    assert list(post["capability"].coords["llm"].values) == ["A", "B", "C"]
    assert post["alpha"].shape == (2, 300)
    # alpha on the natural scale = 1e-4 × the sampled scaled parameter
    np.testing.assert_allclose(post["alpha"], 1e-4 * post["alpha_scaled"], rtol=1e-5)
    attrs = idata.attrs
    assert attrs["tomstats_glmm_format"] == "1" and attrs["backend"] == "numpyro"
    assert json.loads(attrs["spec"])["kind"] == "structural"
    assert "numpyro" in json.loads(attrs["versions"]) and attrs["seed"] == 3
    assert len(attrs["data_hash"]) == 64
    assert idata.log_likelihood["y"].shape == (2, 300, len(data))
    assert set(np.unique(idata.posterior_predictive["y"])) <= {0, 1}
    for k in ("diverging", "energy", "tree_depth", "reached_max_treedepth"):
        assert k in idata.sample_stats
    # the posterior recovers the simulation's gamma and capabilities (loosely)
    g = post["gamma"]
    assert abs(float(g.mean()) - TRUE.gamma) < 4 * float(g.std())


def test_save_load_roundtrip(structural_fit, tmp_path):
    path = glmm.save_fit(structural_fit, tmp_path / "fit.nc")
    assert not list(tmp_path.glob(".*tmp"))
    back = glmm.load_fit(path)
    for v in structural_fit.posterior.data_vars:
        np.testing.assert_array_equal(back.posterior[v], structural_fit.posterior[v])
    assert back.attrs["spec"] == structural_fit.attrs["spec"]
    assert back.posterior.attrs["data_hash"] == structural_fit.attrs["data_hash"]
    pd.testing.assert_frame_equal(glmm.training_data(back),
                                  glmm.training_data(structural_fit))
    np.testing.assert_allclose(glmm.predict(back, max_draws=50),
                               glmm.predict(structural_fit, max_draws=50))


def test_predict_matches_log_likelihood(structural_fit):
    """predict() on the training rows reproduces the sampler's pointwise log-likelihood."""
    p = glmm.predict(structural_fit).to_numpy()
    y = structural_fit.observed_data["y"].to_numpy()
    ll = structural_fit.log_likelihood["y"].to_numpy().reshape(p.shape)
    np.testing.assert_allclose(np.where(y == 1, np.log(p), np.log1p(-p)), ll,
                               atol=2e-4, rtol=1e-4)


def test_predict_new_levels(structural_fit):
    new = pd.DataFrame({"model": ["A", "Z", "A"], "item": ["i0", "i0", "new"],
                        "context_words": [500, 500, 500], "tom_order": [1, 1, 1]})
    p0 = glmm.predict(structural_fit, new, new_levels="zero").to_numpy()
    ps = glmm.predict(structural_fit, new, new_levels="sample", seed=1).to_numpy()
    post = structural_fit.posterior
    flat = {k: post[k].to_numpy().reshape(-1, *post[k].shape[2:]) for k in post.data_vars}
    # known LLM + known item: identical in both modes; new item with 'zero': u = 0
    np.testing.assert_allclose(p0[:, 0], ps[:, 0])
    eta_new_item = linear_predictor(Params(flat["alpha"], flat["gamma"], flat["delta"], 0.0),
                                    500.0, 1.0, flat["capability"][:, 0], 0.0)
    np.testing.assert_allclose(p0[:, 2], 1 / (1 + np.exp(-np.asarray(eta_new_item))),
                               rtol=1e-5)
    # a new LLM with 'zero' uses capability_mu; with 'sample' it is more spread out
    eta_mu = linear_predictor(Params(flat["alpha"], flat["gamma"], flat["delta"], 0.0), 500.0,
                              1.0, flat["capability_mu"], flat["item_effect"][:, 0])
    np.testing.assert_allclose(p0[:, 1], 1 / (1 + np.exp(-np.asarray(eta_mu))), rtol=1e-5)
    assert ps[:, 1].std() > p0[:, 1].std()
    with pytest.raises(ValueError, match="new_levels"):
        glmm.predict(structural_fit, new, new_levels="mean")


def test_ppc_tables(structural_fit, data):
    cal = glmm.calibration_curve(structural_fit, bins=5)
    assert cal["trials"].sum() == len(data)
    assert ((cal["predicted"] >= cal["bin_lower"]) & (cal["predicted"] <= cal["bin_upper"])).all()
    sep = glmm.separation_data(structural_fit)
    assert len(sep) == len(data) and sep["p_mean"].is_monotonic_increasing
    assert sep["observed_total"].iloc[-1] == data["correct"].sum()
    cells = glmm.accuracy_by_cell(structural_fit)
    assert list(cells.columns[:3]) == ["model", "context_words", "tom_order"]
    assert cells["trials"].sum() == len(data)
    obs = data.groupby(["model", "context_words", "tom_order"])["correct"].mean().to_numpy()
    np.testing.assert_allclose(cells["observed"], obs)
    # a well-specified model covers most cells' observed accuracy
    inside = (cells["observed"] >= cells["predicted_lower"]) & (
        cells["observed"] <= cells["predicted_upper"])
    assert inside.mean() >= 0.8
    by_tom = glmm.accuracy_by_cell(structural_fit, by=["tom_order"])
    assert len(by_tom) == 3


def test_compare_fits_refuses_different_observations(structural_fit, data):
    with pytest.raises(ValueError, match="at least two"):
        glmm.compare_fits({"a": structural_fit})
    table = glmm.compare_fits({"a": structural_fit, "b": structural_fit}, ic="waic")
    assert set(table.index) == {"a", "b"}


def test_posterior_params(structural_fit):
    params, cap = glmm.posterior_params(structural_fit)
    assert np.shape(params.alpha) == (600,) and cap.dims == ("draw", "llm")
    np.testing.assert_allclose(params.sigma,
                               structural_fit.posterior["sigma_item"].to_numpy().ravel())
    summ = glmm.posterior_summary(structural_fit)
    assert summ.loc["gamma", "lower"] < summ.loc["gamma", "upper"]
    assert set(summ.loc[summ["kind"] == "capability", "llm"]) == {"A", "B", "C"}
    assert summ.loc["gamma", "mean"] == pytest.approx(float(params.gamma.mean()))
    assert summ.attrs["interval"] == 0.95


@pytest.fixture(scope="module")
def formula_fit(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glmm.DiagnosticsWarning)
        return glmm.fit(data, FORMULA, chains=2, draws=250, tune=250, seed=5, progress=False,
                        posterior_predictive=False)  # predict() and LOO need only the ll


def test_formula_fit_predict_and_compare(formula_fit, structural_fit, data):
    idata = formula_fit
    post = idata.posterior
    assert list(post["beta"].coords["coef"].values) == ["Intercept", "tom_order", "log_context"]
    assert post["re_model"].dims[2:] == ("model", "model_effect")
    assert post["corr_model"].shape[2:] == (2, 2)
    np.testing.assert_allclose(post["corr_model"].sel(model_effect="Intercept",
                                                      model_effect2="Intercept"), 1.0,
                               rtol=1e-5)
    # predict() reproduces the sampler's pointwise log-likelihood
    p = glmm.predict(idata).to_numpy()
    y = idata.observed_data["y"].to_numpy()
    ll = idata.log_likelihood["y"].to_numpy().reshape(p.shape)
    np.testing.assert_allclose(np.where(y == 1, np.log(p), np.log1p(-p)), ll,
                               atol=2e-4, rtol=1e-4)
    # a new LLM and a new item: 'zero' = fixed part only; 'sample' spreads more
    new = pd.DataFrame({"model": ["new"], "item": ["new"], "tom_order": [2],
                        "context_words": [1000]})
    p0 = glmm.predict(idata, new, new_levels="zero").to_numpy()[:, 0]
    beta = post["beta"].to_numpy().reshape(-1, 3)
    eta = beta @ np.array([1.0, 2.0, np.log(1000.0)])
    np.testing.assert_allclose(p0, 1 / (1 + np.exp(-eta)), rtol=1e-6)
    ps = glmm.predict(idata, new, new_levels="sample", seed=2).to_numpy()[:, 0]
    assert np.log(ps / (1 - ps)).std() > np.log(p0 / (1 - p0)).std()
    with pytest.raises(ValueError, match="grouping column"):
        glmm.predict(idata, new.drop(columns="item"))
    # LOO comparison of the structural and the formula model on the same rows
    table = glmm.compare_fits({"structural": structural_fit, "formula": idata})
    assert set(table.index) == {"structural", "formula"} and "elpd_loo" in table
    with pytest.raises(ValueError, match="different data: 360 vs 100 observations"):
        glmm.compare_fits({"rows": structural_fit,
                           "fewer": structural_fit.isel(obs=slice(0, 100))})


# --------------------------------------------------------------------------- diagnostics


def _fake_idata(shift: float = 0.0, divergent: int = 0):
    import arviz as az

    rng = np.random.default_rng(0)
    mu = rng.normal(size=(4, 500))
    mu[0] += shift
    div = np.zeros((4, 500), dtype=bool)
    div[1, :divergent] = True
    energy = rng.normal(size=(4, 500)).cumsum(axis=1) if shift else rng.normal(size=(4, 500))
    return az.from_dict(posterior={"mu": mu, "tau": rng.normal(size=(4, 500))},
                        sample_stats={"diverging": div, "energy": energy,
                                      "reached_max_treedepth": np.zeros((4, 500), bool)})


def test_check_diagnostics_closed_cases():
    ok = glmm.check_diagnostics(_fake_idata())
    assert ok.passed and "passed" in ok.message()
    bad = glmm.check_diagnostics(_fake_idata(shift=3.0, divergent=7))
    failed = {c.name for c in bad.failed}
    assert {"divergences", "rhat", "ebfmi"} <= failed
    assert bad["divergences"].value == 7
    assert bad["rhat"].offending == ("mu",)
    msg = bad.message()
    for name in failed:
        assert f"- {name}:" in msg
    assert "target_accept" in msg and "non-centred" in msg
    assert set(bad.to_frame()["check"]) >= failed


def test_pathological_model_warns():
    """A centred funnel with almost no tuning must trigger a warning naming the checks."""
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(8), 3)
    y = (rng.random(g.size) < 0.5).astype(int)
    df = pd.DataFrame({"correct": y, "g": g.astype(str)})
    with pytest.warns(glmm.DiagnosticsWarning) as rec:
        idata = glmm.fit(df, "correct ~ 1 + (1 | g)", chains=2, draws=60, tune=15, seed=1,
                         noncentered=False, aggregate=False, progress=False,
                         priors={"sd_g": glmm.half_normal(3.0)}, log_likelihood=False,
                         posterior_predictive=False)
    report = glmm.check_diagnostics(idata)
    assert not report.passed
    msg = str(rec[0].message)
    for check in report.failed:
        assert f"- {check.name}:" in msg
    assert "try:" in msg


# --------------------------------------------------------------------------- CLI


def test_cli_fit_and_calibrate(tmp_path, capsys):
    from tomstats.cli import main

    rng = np.random.default_rng(5)
    rows = []
    for run, cap in (("m1", 1.3), ("m2", 0.9), ("m3", 1.1)):
        for c in (200, 1000, 5000):
            for t in (0, 1, 2):
                p = 1 / (1 + np.exp(-float(linear_predictor(TRUE, c, t, cap))))
                rows.append({"run_dir": run, "words": c, "order": t, "n_tries": 20,
                             "n_correct": int(rng.binomial(20, p))})
    csv = tmp_path / "log.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / "fit.nc"
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        rc = main(["fit", str(csv), "--model", "structural", "--chains", "2", "--draws", "200",
                   "--tune", "200", "--seed", "2", "--no-progress", "--out", str(out),
                   "--cores", "1",
                   "--map", "model=run_dir,context_words=words", "--map", "tom_order=order",
                   "--successes", "n_correct", "--trials", "n_tries",
                   "--option", 'fixed={"delta": 0}'])
    assert rc == 0 and out.is_file()
    idata = glmm.load_fit(out)
    assert idata.attrs["family"] == "binomial" and idata.attrs["n_rows"] == 27
    assert json.loads(idata.attrs["column_mapping"])["model"] == "run_dir"
    assert json.loads(idata.attrs["sampler"])["cores"] == 1
    printed = capsys.readouterr().out
    assert "gamma" in printed
    # a fixed parameter is a constant, not a posterior variable: no NaN R-hat anywhere
    assert "delta" not in idata.posterior and "delta_scaled" not in idata.posterior
    # ... and is named once, in the header's "held fixed" note, never as an estimate
    assert [ln for ln in printed.splitlines() if "delta" in ln] == \
        [ln for ln in printed.splitlines() if "held fixed: delta = 0" in ln]
    assert printed.count("delta") == 1 and "nan" not in printed.lower()
    assert not [w for w in rec if "invalid value" in str(w.message)]
    report = glmm.check_diagnostics(idata)
    assert all(np.isfinite(c.value) for c in report.checks)
    # predict() uses the fixed value: it reproduces the binomial pointwise log-likelihood
    from scipy.stats import binom

    p = glmm.predict(idata).to_numpy()
    row_obs = idata.constant_data["row_obs"].to_numpy()
    assert np.array_equal(row_obs, np.arange(27))
    ll = binom.logpmf(idata.observed_data["y"].to_numpy(),
                      idata.constant_data["obs_trials"].to_numpy(), p)
    np.testing.assert_allclose(ll, idata.log_likelihood["y"].to_numpy().reshape(p.shape),
                               atol=2e-4, rtol=1e-4)
    params = tmp_path / "params.toml"
    assert main(["calibrate", str(out), "--out", str(params)]) == 0
    full = tomllib.loads(params.read_text())
    doc = full["meta"]["calibration"]
    assert full["parameters"]["gamma"] == doc["params"]["gamma"]["mean"]  # simulation-ready
    assert set(doc["params"]) == {"alpha", "gamma", "delta", "sigma"}
    assert doc["params"]["sigma"]["mean"] == 0.0  # no item effects: sigma = 0
    assert doc["params"]["delta"] == {"mean": 0.0, "sd": 0.0, "median": 0.0, "lower": 0.0,
                                      "upper": 0.0}  # fixed
    assert doc["params"]["alpha"]["sd"] > 0
    assert set(doc["capability"]) == {"m1", "m2", "m3"}
    # bad input: error message and exit code 2, nothing written
    bad = tmp_path / "bad.nc"
    rc = main(["fit", str(csv), "--out", str(bad), "--map", "model=nope"])
    assert rc == 2 and not bad.exists()
    assert "nope" in capsys.readouterr().err
    foreign = tmp_path / "foreign.nc"
    foreign.write_bytes(b"\x89HDF\r\n junk")
    assert main(["calibrate", str(foreign), "--out", str(tmp_path / "p.json")]) == 2


# --------------------------------------------------------------------------- recovery


def simulate_rows(truth: Params, contexts, toms, caps, n_per_cell: int, seed: int):
    """Per-question rows of equation (1) with independent per-question noise (marginally
    Bernoulli with the Gauss-Hermite expected accuracy, as the simulator draws them)."""
    from tomstats.model import cell_probabilities

    rng = np.random.default_rng(seed)
    rows = []
    for cap in caps:
        p = np.asarray(cell_probabilities(truth, np.asarray(contexts, float)[:, None],
                                          np.asarray(toms, float)[None, :], cap))
        for i, c in enumerate(contexts):
            for j, t in enumerate(toms):
                y = rng.random(n_per_cell) < p[i, j]
                rows += [{"model": f"m{cap:g}", "context_length": c, "tom_order": t,
                          "correct": int(v)} for v in y]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.slow),
                                  pytest.param(13, marks=pytest.mark.slow)])
def test_structural_recovery(seed):
    """Simulate from known parameters, fit, and find the truth inside the posterior."""
    truth = Params(alpha=1.2e-4, gamma=0.9, delta=3e-5, sigma=0.0)
    caps = (0.8, 1.0, 1.2)
    df = simulate_rows(truth, (200, 500, 1000, 2000, 5000), (0, 1, 2), caps, 80, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glmm.DiagnosticsWarning)
        idata = glmm.fit(df, "structural", chains=2, draws=400, tune=400, seed=seed,
                         progress=False, columns={"context_words": "context_length"},
                         item_effects=False, log_likelihood=False, posterior_predictive=False)
    assert idata.attrs["aggregated"] == 1 and idata.attrs["n_obs"] == 45
    post = idata.posterior
    assert "capability_mu" not in post  # 3 LLMs: hierarchical="auto" does not pool
    new = pd.DataFrame({"model": ["other"], "context_words": [500], "tom_order": [1]})
    with pytest.raises(ValueError, match="no population of LLMs"):
        glmm.predict(idata, new)
    for name in ("alpha", "gamma", "delta"):
        v = post[name].to_numpy()
        z = (v.mean() - getattr(truth, name)) / v.std()
        assert abs(z) < 3.5, (name, v.mean(), v.std())
    cap = post["capability"].to_numpy().reshape(-1, 3)
    z = (cap.mean(0) - np.array(caps)) / cap.std(0)
    assert np.all(np.abs(z) < 3.5), z
