"""Equation (1), its expectation over the noise, and the parameter pytree."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from tomstats.model import (
    BETA0,
    Params,
    cell_probabilities,
    context_load,
    expected_accuracy,
    gauss_hermite,
    linear_predictor,
)


def test_beta0_is_85_percent():
    assert BETA0 == pytest.approx(math.log(0.85 / 0.15))
    assert special.expit(BETA0) == pytest.approx(0.85)


@pytest.mark.parametrize("c,t,m", [(200, 0, 1.0), (5000, 2, 0.7), (1000, 1, 1.3), (500, 3, 0.85)])
def test_linear_predictor_matches_written_formula(c, t, m):
    p = Params(alpha=1.3e-4, gamma=0.9, delta=2e-4, sigma=0.5)
    by_hand = BETA0 * m - 1.3e-4 * c * math.log(1 + c / 500) - 0.9 * t - 2e-4 * c * t + 0.25
    got = float(linear_predictor(p, np.float64(c), np.float64(t), m, 0.25))
    assert got == pytest.approx(by_hand, rel=1e-6)
    assert float(context_load(np.float64(c))) == pytest.approx(c * math.log1p(c / 500), rel=1e-6)


def test_linear_predictor_broadcasts_to_table():
    p = Params(1e-4, 1.0, 1e-4, 0.5)
    c = jnp.array([200.0, 500.0, 5000.0])[:, None]
    t = jnp.array([0.0, 1.0, 2.0])[None, :]
    assert linear_predictor(p, c, t).shape == (3, 3)


def test_gauss_hermite_integrates_normal_moments():
    z, w = gauss_hermite(48)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert (w * z**2).sum() == pytest.approx(1.0, abs=1e-10)
    assert (w * z**4).sum() == pytest.approx(3.0, abs=1e-9)


@pytest.mark.parametrize("mu", [-4.0, -1.0, 0.0, 0.7, 2.5])
@pytest.mark.parametrize("sigma", [0.0, 0.3, 1.0, 2.5])
def test_expected_accuracy_matches_numerical_integral(mu, sigma):
    ref = integrate.quad(lambda z: special.expit(mu + sigma * z) * stats.norm.pdf(z),
                         -12, 12, epsabs=1e-13)[0]
    assert float(expected_accuracy(mu, sigma)) == pytest.approx(ref, abs=2e-6)


def test_expected_accuracy_logistic_normal_is_shrunk_toward_half():
    # E[expit(mu + eps)] lies between 1/2 and expit(mu) for mu > 0 (Jensen on the concave part)
    assert 0.5 < float(expected_accuracy(1.5, 1.0)) < special.expit(1.5)


def test_cell_probabilities_decrease_with_order_and_context():
    p = np.asarray(cell_probabilities(Params(7e-5, 1.2, 2e-4, 0.6),
                                      jnp.array([200.0, 1000.0, 5000.0])[:, None],
                                      jnp.array([0.0, 1.0, 2.0])[None, :]))
    assert np.all(np.diff(p, axis=0) < 0) and np.all(np.diff(p, axis=1) < 0)


def test_params_is_a_pytree_that_jits():
    f = jax.jit(lambda prm: linear_predictor(prm, 1000.0, 1.0))
    assert float(f(Params(1e-4, 1.0, 1e-4, 0.5))) == pytest.approx(
        BETA0 - 1e-4 * 1000 * math.log(3) - 1.0 - 0.1, rel=1e-5)
    leaves = jax.tree_util.tree_leaves(Params(1, 2, 3, 4))
    assert leaves == [1, 2, 3, 4]


@pytest.mark.parametrize("field,value", [("alpha", float("nan")), ("gamma", float("inf")),
                                         ("sigma", -0.1), ("delta", [0.0, float("nan")])])
def test_params_validate_names_field(field, value):
    kw = {"alpha": 1e-4, "gamma": 1.0, "delta": 1e-4, "sigma": 0.5, field: value}
    with pytest.raises(ValueError, match=field):
        Params(**kw).validate()


def test_linear_predictor_works_on_pytensor_tensors():
    pt = pytest.importorskip("pytensor.tensor")
    import pytensor

    c = pt.dvector("c")
    t = pt.dvector("t")
    f = pytensor.function([c, t], linear_predictor(Params(1e-4, 1.0, 2e-4, 0.0), c, t, 1.1))
    cc, tt = np.array([200.0, 5000.0]), np.array([0.0, 2.0])
    expect = np.asarray(linear_predictor(Params(1e-4, 1.0, 2e-4, 0.0), cc, tt, 1.1))
    np.testing.assert_allclose(f(cc, tt), expect, rtol=1e-6)
