"""Tests of the NumPyro sampler machinery: the compiled NUTS programs (memory and disk
caches, chunking, progress), the dense mass-matrix block and the compilation-cache setting.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tomstats.glmm as glmm
from tomstats import _compile_cache
from tomstats.glmm import _nuts
from tomstats.glmm.data import build_design, prepare_data
from tomstats.glmm.numpyro_backend import dense_block, latent_sites, to_jax
from tomstats.model import Params, linear_predictor

TRUE = Params(alpha=1e-4, gamma=0.8, delta=2e-5, sigma=0.5)


def rows(n_llm: int, n_items: int = 12, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    out = []
    for j in range(n_llm):
        for k in range(n_items):
            for c in (200, 1000, 5000):
                t = int(rng.integers(0, 3))
                eta = float(linear_predictor(TRUE, c, t, 0.8 + 0.1 * j, 0.0))
                out.append({"model": f"m{j}", "item": f"i{k}", "context_words": c,
                            "tom_order": t, "correct": int(rng.random() < 1 / (1 + np.exp(-eta)))})
    return pd.DataFrame(out)


def _fit(df, **kw):
    opts = {"chains": 2, "draws": 150, "tune": 250, "seed": 5, "progress": False,
            "log_likelihood": False, "posterior_predictive": False, "item_effects": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glmm.DiagnosticsWarning)
        return glmm.fit(df, "structural", **{**opts, **kw})


def _design(df, model="structural", **opts):
    spec, md = build_design(model, prepare_data(df).reset_index(drop=True), **opts)
    return spec, to_jax(spec, md)


# --------------------------------------------------------------------------- dense block


def test_dense_block_structural_one_llm():
    spec, data = _design(rows(1), item_effects=True)
    sites = latent_sites(spec, data)
    assert sites["item_z"] == (12, True)
    assert sites["sigma_item"] == (1, False)  # a scale: positive support
    assert set(dense_block(spec, data)) == {"capability", "alpha_scaled", "gamma",
                                            "delta_scaled"}


def test_dense_block_leaves_out_pooled_capabilities_and_scales():
    spec, data = _design(rows(5), item_effects=True, hierarchical=True)
    block = dense_block(spec, data)
    assert set(block) == {"capability_mu", "alpha_scaled", "gamma", "delta_scaled"}
    # centred pooling: the capabilities themselves are random effects
    spec, data = _design(rows(5), hierarchical=True, noncentered=("item",))
    assert "capability" not in dense_block(spec, data)


def test_dense_block_formula_and_limits(monkeypatch):
    import tomstats.glmm.numpyro_backend as nb

    spec, data = _design(rows(3), "correct ~ tom_order * log_context + (1 | model)")
    assert dense_block(spec, data) == ("beta_c",)  # 4 fixed effects, one site
    monkeypatch.setattr(nb, "DENSE_BLOCK_MAX", 3)
    assert dense_block(spec, data) == ()


def test_dense_and_diagonal_agree():
    df = rows(2, n_items=30)
    a = _fit(df, dense_mass="auto", draws=600, tune=400, chains=2)
    b = _fit(df, dense_mass=False, draws=600, tune=400, chains=2)
    for v in ("alpha", "gamma", "delta", "capability"):
        x, y = a.posterior[v].to_numpy(), b.posterior[v].to_numpy()
        sd = np.sqrt(0.5 * (x.reshape(-1, *x.shape[2:]).var(0) + y.reshape(-1, *y.shape[2:])
                            .var(0)))
        diff = np.abs(x.mean((0, 1)) - y.mean((0, 1))) / sd
        assert np.all(diff < 0.25), (v, diff)
    assert '"dense_mass": "auto"' in a.posterior.attrs["sampler"]


def test_bad_dense_mass():
    with pytest.raises(ValueError, match="dense_mass"):
        glmm.fit(rows(1), dense_mass="full")


# --------------------------------------------------------------------------- compiled runner


@pytest.fixture
def cache_on(tmp_path):
    """JAX's persistent compilation cache in a folder of this test's own (the suite runs with
    it off, see conftest.py), switched off again afterwards."""
    import jax
    from jax._src import compilation_cache

    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))
    try:
        yield tmp_path / "jax"
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
        compilation_cache.reset_cache()


def test_same_draws_from_memory_disk_and_any_chunking(monkeypatch, cache_on):
    df = rows(2)
    first = _fit(df)
    assert _nuts._export_dir() is not None
    again = _fit(df)  # the programs from memory
    _nuts._MEMORY.clear()
    disk = _fit(df)  # the programs deserialised from the cache directory
    for other in (again, disk):
        for v in first.posterior.data_vars:
            np.testing.assert_array_equal(first.posterior[v], other.posterior[v])
    monkeypatch.setattr(_nuts, "CHUNK", 7)  # another program, other chunk boundaries
    _nuts._MEMORY.clear()
    chunked = _fit(df, progress=True)
    for v in first.posterior.data_vars:
        np.testing.assert_allclose(first.posterior[v], chunked.posterior[v], rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_array_equal(first.sample_stats["n_steps"], chunked.sample_stats["n_steps"])


def test_seed_changes_draws_and_stats_are_complete():
    df = rows(1)
    a, b = _fit(df, seed=1), _fit(df, seed=2)
    assert not np.allclose(a.posterior["gamma"], b.posterior["gamma"])
    ss = a.sample_stats
    for name in ("diverging", "energy", "lp", "n_steps", "tree_depth", "acceptance_rate",
                 "step_size", "reached_max_treedepth"):
        assert ss[name].shape == (2, 150), name
    assert np.all(ss["step_size"] > 0) and np.all(ss["n_steps"] >= 1)
    # step size is fixed after the warm-up
    assert np.ptp(ss["step_size"].to_numpy(), axis=1).max() == 0


def test_other_chain_methods_use_numpyro_mcmc():
    df = rows(1)
    a = _fit(df, chain_method="sequential", chains=2)
    assert a.posterior["gamma"].shape == (2, 150)
    assert a.sample_stats["diverging"].dtype == bool


def test_unwritable_cache_directory_still_fits(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setattr(_nuts, "_export_dir", lambda: blocker / "tomstats-programs")
    _nuts._MEMORY.clear()
    idata = _fit(rows(1), seed=11)
    assert idata.posterior["gamma"].shape == (2, 150)


# --------------------------------------------------------------------------- cache setting


@pytest.mark.parametrize(("value", "expected"), [("off", None), ("0", None), ("", None),
                                                 ("FALSE", None)])
def test_cache_switched_off(monkeypatch, value, expected):
    monkeypatch.setenv("TOMSTATS_JAX_CACHE", value)
    assert _compile_cache.default_cache_dir() is expected


def test_cache_directory_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TOMSTATS_JAX_CACHE", str(tmp_path / "c"))
    assert _compile_cache.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("TOMSTATS_JAX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _compile_cache.default_cache_dir() == tmp_path / "xdg" / "tomstats" / "jax"


def test_existing_jax_cache_directory_is_kept(monkeypatch, tmp_path):
    import jax

    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        monkeypatch.setenv("TOMSTATS_JAX_CACHE", str(tmp_path / "other"))
        assert _compile_cache.enable_compilation_cache() == tmp_path
        assert not (tmp_path / "other").exists()
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


# --------------------------------------------------------------------------- warm-up depth


def _warmup_steps(df, monkeypatch, depth: int) -> np.ndarray:
    """Leapfrog steps of each of the first 100 warm-up iterations (chain, iteration)."""
    import jax
    import jax.numpy as jnp

    from tomstats.glmm.numpyro_backend import model_function

    monkeypatch.setattr(_nuts, "WARMUP_TREE_DEPTH", depth)
    spec, data = _design(df)
    md_y = jnp.asarray(build_design("structural", prepare_data(df).reset_index(drop=True))[1].y)
    run = _nuts.runner(model_function(spec), spec, data, md_y, chains=2, tune=200, draws=100,
                       target_accept=0.8, max_tree_depth=10, dense=False)
    arrays = {k: v for k, v in data.items() if hasattr(v, "shape")}
    state, finite = run.init(jax.random.split(jax.random.PRNGKey(0), 2), arrays, md_y)
    assert np.asarray(finite).all()
    _, buf = run.advance(state, arrays, md_y, np.int32(100), np.bool_(True))
    return np.asarray(buf["stat/num_steps"])


def test_warmup_trees_are_capped(monkeypatch):
    from tomstats.design import paper_design
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.simulator import simulate_questions

    # four LLMs sharing 600 items: capabilities informed by 600 answers each, item
    # effects by four, so the unit metric of the first window needs long trajectories
    d = paper_design().with_(n_per_cell=40, capability=(0.8, 0.95, 1.1, 1.25))
    df = simulate_questions(d, PAPER_PARAMS, seed=1, latent=True, shared_items=True)
    df = df.rename(columns={"capability": "model", "context_length": "context_words"})
    df["model"] = [f"m{c:.2f}" for c in df["model"]]
    uncapped = _warmup_steps(df, monkeypatch, 10)
    assert uncapped.max() > 63  # the cap would bind on this log
    capped = _warmup_steps(df, monkeypatch, 6)
    assert capped.max() <= 63
    assert capped.sum() < uncapped.sum()
    assert _nuts.tree_depths(10) == (6, 10) and _nuts.tree_depths(4) == (4, 4)


def test_sampler_attribute_records_the_warmup_depth():
    import json

    a = _fit(rows(1), max_tree_depth=8)
    sampler = json.loads(a.attrs["sampler"])
    assert sampler["max_tree_depth"] == 8 and sampler["warmup_max_tree_depth"] == 6


# --------------------------------------------------------------------------- chain groups


def test_every_chain_is_its_own_program_on_a_cpu():
    import jax

    if jax.default_backend() != "cpu":
        pytest.skip("chains run as one vectorised group on an accelerator")
    assert [_nuts.chain_groups(c) for c in (1, 2, 3, 4)] == [1, 2, 3, 4]


def test_cores_never_change_the_draws():
    import json

    df = rows(2)
    one = _fit(df, chains=4, cores=1, draws=60, tune=60)
    two = _fit(df, chains=4, cores=2, draws=60, tune=60)
    for v in one.posterior.data_vars:
        np.testing.assert_array_equal(one.posterior[v], two.posterior[v])
    np.testing.assert_array_equal(one.sample_stats["n_steps"], two.sample_stats["n_steps"])
    assert one.posterior.sizes["chain"] == 4
    assert json.loads(two.attrs["sampler"])["chain_groups"] == _nuts.chain_groups(4)
    # the chains differ from each other (each got its own key)
    g = one.posterior["gamma"].to_numpy()
    assert len({tuple(row) for row in g}) == 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_bad_cores(bad):
    with pytest.raises(ValueError, match="cores"):
        _fit(rows(1), cores=bad)


def test_a_start_without_finite_density_is_an_error_before_sampling(monkeypatch):
    import jax
    import jax.numpy as jnp
    import numpyro

    from tomstats.glmm.numpyro_backend import model_function

    # programs are keyed by the spec, not the model function: keep this one's to itself
    monkeypatch.setattr(_nuts, "_MEMORY", {})
    monkeypatch.setattr(_nuts, "_export_dir", lambda: None)
    df = rows(1)
    spec, data = _design(df)
    y = jnp.asarray(build_design("structural", prepare_data(df).reset_index(drop=True))[1].y)
    good = model_function(spec)

    def nowhere_finite(spec_, data_, y_):
        good(spec_, data_, y_)
        numpyro.factor("broken", jnp.nan)

    run = _nuts.runner(nowhere_finite, spec, data, y, chains=1, tune=10, draws=10,
                       target_accept=0.8, max_tree_depth=5, dense=False)
    arrays = {k: v for k, v in data.items() if hasattr(v, "shape")}
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    with pytest.raises(RuntimeError, match=r"finite log density for chain\(s\) \[0\] "):
        _nuts.run_chains(run, keys, arrays, y, tune=10, draws=10, progress=False, groups=3,
                         cores=1)
    # the working model, same settings, starts and samples
    _nuts._MEMORY.clear()
    ok = _nuts.runner(good, spec, data, y, chains=1, tune=10, draws=10, target_accept=0.8,
                      max_tree_depth=5, dense=False)
    post, stats = _nuts.run_chains(ok, keys, arrays, y, tune=10, draws=10, progress=False,
                                   groups=3, cores=1)
    assert np.isfinite(stats["potential_energy"]).all() and post["gamma"].shape[:2] == (3, 10)
