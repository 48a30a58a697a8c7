"""The JAX simulator: the two paths agree in distribution with each other and with the
definition (explicit per-question noise), results are reproducible, and the per-study ANOVA
equals the row-level ANOVA."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import tomstats
from tomstats.analysis.row_anova import anova
from tomstats.design import Design, Factor
from tomstats.model import Params
from tomstats.simulation.simulator import expected_cells, simulate, simulate_questions

PARAMS = Params(alpha=1.0e-4, gamma=0.9, delta=1.5e-4, sigma=0.8)
SMALL = Design(
    factors=(Factor("context_length", (200, 2000)), Factor("tom_order", (0, 1, 2))),
    n_per_cell=40,
    capability=(0.8, 1.2),
)


def _check_binomial(counts: np.ndarray, n: np.ndarray, p: np.ndarray) -> None:
    """Mean and variance of counts over replicates (axis 0) match Binomial(n, p)."""
    R = counts.shape[0]
    mean, var = counts.mean(0), counts.var(0, ddof=1)
    ev, vv = n * p, n * p * (1 - p)
    z_mean = (mean - ev) / np.sqrt(vv / R)
    assert np.all(np.abs(z_mean) < 4.5), z_mean
    # var of the sample variance ≈ 2 v² / (R-1) (normal approximation is fine at n = 40)
    z_var = (var - vv) / np.sqrt(2 * vv**2 / (R - 1))
    assert np.all(np.abs(z_var) < 4.5), z_var


@pytest.mark.parametrize("path", ["exact", "bernoulli"])
def test_paths_match_binomial_of_gauss_hermite_expectation(path):
    ds = simulate(SMALL, PARAMS, replicates=3000, seed=11, path=path, progress=False)
    p = ds["p_expected"].values
    _check_binomial(ds["successes"].values, ds["trials"].values, p)


def test_exact_and_bernoulli_paths_have_the_same_count_distribution():
    a = simulate(SMALL, PARAMS, replicates=3000, seed=1, path="exact", progress=False)
    b = simulate(SMALL, PARAMS, replicates=3000, seed=2, path="bernoulli", progress=False)
    ka, kb = a["successes"].values, b["successes"].values
    pvals = []
    for idx in np.ndindex(ka.shape[1:]):
        x, y = ka[(slice(None),) + idx], kb[(slice(None),) + idx]
        bins = np.arange(min(x.min(), y.min()), max(x.max(), y.max()) + 2)
        table = np.array([np.histogram(x, bins)[0], np.histogram(y, bins)[0]])
        table = table[:, table.sum(0) >= 10]
        pvals.append(stats.chi2_contingency(table)[1])
    # 12 cells; with a Bonferroni bound no cell may look different at the 0.1 % level
    assert min(pvals) > 1e-3 / len(pvals), pvals


def test_explicit_noise_definition_matches_expected_accuracy():
    """y ~ Bernoulli(expit(eta + eps)), eps ~ N(0, sigma²) drawn per question — the
    definition — has cell means E[expit(eta + eps)] computed by Gauss–Hermite."""
    df = simulate_questions(SMALL.with_(n_per_cell=400), PARAMS, seed=5, replicates=20,
                            latent=True)
    assert df["eps"].std() == pytest.approx(PARAMS.sigma, rel=0.02)
    got = df.groupby(["capability", "context_length", "tom_order"])["correct"].agg(["mean",
                                                                                  "size"])
    p = expected_cells(SMALL, PARAMS).to_series()
    p.index = p.index.set_names(["capability", "context_length", "tom_order"])
    z = (got["mean"] - p) / np.sqrt(p * (1 - p) / got["size"])
    assert np.all(np.abs(z) < 4.5), z


def test_shared_items_share_noise_across_capabilities():
    df = simulate_questions(SMALL, PARAMS, seed=3, latent=True, shared_items=True)
    wide = df.pivot_table(index="item", columns="capability", values="eps")
    np.testing.assert_array_equal(wide[0.8].values, wide[1.2].values)
    assert df.groupby("capability")["item"].nunique().tolist() == [240, 240]
    with pytest.raises(ValueError, match="latent"):
        simulate_questions(SMALL, PARAMS, shared_items=True)


def test_per_question_rows_sum_to_bernoulli_path_counts():
    R = 3
    df = simulate_questions(SMALL, PARAMS, seed=9, replicates=R)
    ds = simulate(SMALL, PARAMS, replicates=R, seed=9, path="bernoulli", progress=False)
    counts = df.groupby(["replicate", "capability", "context_length", "tom_order"])[
        "correct"].sum().to_numpy().reshape(ds["successes"].shape)
    np.testing.assert_array_equal(counts, ds["successes"].values)


def test_study_anova_equals_row_level_anova():
    n = np.array([[30, 41, 25], [38, 22, 35]])
    design = SMALL.with_(n_per_cell=n, capability=(1.0,))
    df = simulate_questions(design, PARAMS, seed=4)
    ds = simulate(design, PARAMS, replicates=1, seed=4, path="bernoulli", progress=False)
    ref = anova(df, dv="correct", between=["context_length", "tom_order"], ss_type=2)
    ref = ref.set_index("source")
    got = ds.isel(replicate=0, capability=0)
    mapping = {"context_length": "context_length", "tom_order": "tom_order",
               "interaction": "context_length:tom_order", "residual": "Residual"}
    for src, row in mapping.items():
        assert float(got["SS"].sel(source=src)) == pytest.approx(ref.loc[row, "SS"], rel=2e-4)
        if src != "residual":
            assert float(got["F"].sel(source=src)) == pytest.approx(ref.loc[row, "F"], rel=2e-4)
            assert float(got["p_value"].sel(source=src)) == pytest.approx(
                ref.loc[row, "p"], rel=2e-3, abs=1e-12)


def test_same_seed_same_result_and_chunking_does_not_matter():
    a = simulate(SMALL, PARAMS, replicates=50, seed=7, progress=False)
    b = simulate(SMALL, PARAMS, replicates=50, seed=7, progress=False, chunk=7)
    c = simulate(SMALL, PARAMS, replicates=50, seed=8, progress=False)
    np.testing.assert_array_equal(a["successes"].values, b["successes"].values)
    assert not np.array_equal(a["successes"].values, c["successes"].values)
    first = simulate(SMALL, PARAMS, replicates=10, seed=7, progress=False)
    np.testing.assert_array_equal(first["successes"].values, a["successes"].values[:10])


def test_grid_and_batched_parameters_give_named_dimensions(tmp_path):
    draws = Params(alpha=np.array([1e-4, 2e-4, 5e-5]), gamma=np.array([0.5, 1.0, 1.5]),
                   delta=1e-4, sigma=0.5)
    ds = simulate(SMALL, draws, replicates=4, seed=0, param_dims=("draw",),
                  grid={"delta": [0.0, 1e-4]}, progress=False)
    assert ds["eta2"].dims == ("replicate", "draw", "delta", "capability", "source")
    assert ds["successes"].shape == (4, 3, 2, 2, 2, 3)
    # expected probabilities per draw equal those of a scalar run with that draw
    one = expected_cells(SMALL, Params(2e-4, 1.0, 1e-4, 0.5))
    np.testing.assert_allclose(ds["p_expected"].sel(draw=1, delta=1e-4).values, one.values,
                               rtol=1e-6)
    path = tmp_path / "sim.nc"
    ds.to_netcdf(path)
    import xarray as xr

    back = xr.load_dataset(path)
    np.testing.assert_array_equal(back["successes"].values, ds["successes"].values)


def test_per_draw_capabilities():
    draws = Params(alpha=np.array([1e-4, 2e-4]), gamma=1.0, delta=1e-4, sigma=0.5)
    cap = np.array([[0.8, 1.0, 1.2], [0.9, 1.1, 1.3]])
    ds = simulate(SMALL, draws, replicates=2, seed=0, param_dims=("draw",), capability=cap,
                  progress=False)
    assert ds.sizes["capability"] == 3
    np.testing.assert_allclose(ds["capability_value"].values, cap)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"replicates": 0}, "replicates"),
        ({"replicates": 2.5}, "replicates"),
        ({"path": "fast"}, "path"),
        ({"seed": -1}, "seed"),
        ({"ss_type": 4}, "ss_type"),
        ({"grid": {"gamma": [[0.1, 0.2]]}}, "'gamma' must be a non-empty 1-D"),
        ({"grid": {"beta": [0.1]}}, "unknown parameter 'beta'"),
        ({"grid": {"gamma": [0.1, float("nan")]}}, "non-finite"),
        ({"param_dims": ("draw",)}, "param_dims"),
    ],
)
def test_bad_simulation_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(SMALL, PARAMS, progress=False, **{"replicates": 2, **kwargs})


def test_nan_and_mismatched_parameters():
    with pytest.raises(ValueError, match="'gamma'"):
        simulate(SMALL, PARAMS.replace(gamma=float("nan")), replicates=2, progress=False)
    bad = Params(alpha=np.zeros(3), gamma=np.zeros(2), delta=0.0, sigma=0.5)
    with pytest.raises(ValueError):
        simulate(SMALL, bad, replicates=2, param_dims=("draw",), progress=False)


@pytest.mark.parametrize("trials", [[1] * 30, [4] * 30, [16] * 10 + [15] * 10, [17] * 20,
                                    [40] * 5])
def test_item_counts_are_binomial_given_the_item_effect(trials):
    """Both samplers of item_counts (sums of Bernoulli draws for up to 16 questions per item,
    the binomial sampler above) give Binomial(n_i, p) counts: with sigma = 0 the counts of
    one cell and LLM pass a chi-square test against scipy's pmf, and items share nothing."""
    import jax

    from tomstats.simulation.simulator import item_counts

    trials = np.asarray(trials)
    params = Params(alpha=7e-5, gamma=1.0, delta=2e-4, sigma=0.0)
    ctx, tom, cap = np.array([200.0, 2000.0]), np.array([0.0, 2.0]), np.array([1.0, 0.8])
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(7), 3000)
        k = np.asarray(jax.vmap(lambda key: item_counts(key, params, ctx, tom, cap, trials))(
            keys))
        p = np.asarray(jax.nn.sigmoid(
            tomstats.linear_predictor(params, ctx[:, None], tom[None, :],
                                      cap[:, None, None])))
    assert k.shape == (3000, 2, 2, 2, trials.size)
    for (j, c, t), n in itertools.product([(0, 0, 0), (1, 1, 1), (0, 1, 0)],
                                          np.unique(trials).tolist()):
        x = k[:, j, c, t, trials == n].ravel()
        observed = np.bincount(x.astype(int), minlength=n + 1)
        expected = stats.binom.pmf(np.arange(n + 1), n, p[j, c, t]) * x.size
        keep = expected >= 5  # pool the sparse tails
        obs = np.r_[observed[keep], observed[~keep].sum()]
        exp = np.r_[expected[keep], expected[~keep].sum()]
        obs, exp = obs[exp > 0], exp[exp > 0]
        chi2 = float(((obs - exp) ** 2 / exp).sum())
        assert stats.chi2.sf(chi2, len(obs) - 1) > 1e-4, (n, j, c, t, chi2)
    # independent items: no correlation between two items of one cell
    r = np.corrcoef(k[:, 0, 0, 0, 0], k[:, 0, 0, 0, 1])[0, 1]
    assert abs(r) < 4 / np.sqrt(3000)
