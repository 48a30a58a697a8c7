"""Logistic regression by Newton's method (tomstats.glmm.glm) against statsmodels."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import statsmodels.api as sm

from tomstats.glmm.glm import logistic_fit, saturated_loglik


def _bernoulli_case(seed: int, n: int = 300, p: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, p - 1)) * rng.uniform(0.2, 3, p - 1)])
    beta = rng.normal(scale=0.7, size=p)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    return X, y


@pytest.mark.parametrize("seed", range(8))
def test_bernoulli_matches_statsmodels_logit(seed: int) -> None:
    X, y = _bernoulli_case(seed, p=2 + seed % 4)
    ref = sm.Logit(y, X).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
    with jax.enable_x64(True):
        f = logistic_fit(X, y)
    assert bool(f.converged)
    np.testing.assert_allclose(np.asarray(f.beta), ref.params, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f.se), ref.bse, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f.cov), ref.cov_params(), rtol=0, atol=1e-6)
    assert float(f.loglik) == pytest.approx(ref.llf, abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_binomial_counts_match_statsmodels_glm(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    rows = 15 + 10 * seed
    X = np.column_stack([np.ones(rows), rng.normal(size=rows), rng.integers(0, 3, rows)])
    trials = rng.integers(1, 60, rows).astype(float)
    y = rng.binomial(trials.astype(int), 1 / (1 + np.exp(-(X @ [0.5, -0.8, 0.4])))) * 1.0
    ref = sm.GLM(np.column_stack([y, trials - y]), X, family=sm.families.Binomial()).fit(
        tol=1e-13)
    with jax.enable_x64(True):
        f = logistic_fit(X, y, trials)
        sat = float(saturated_loglik(y, trials))
    assert bool(f.converged)
    np.testing.assert_allclose(np.asarray(f.beta), ref.params, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f.se), ref.bse, atol=1e-6)
    assert float(f.loglik) == pytest.approx(ref.llf, abs=1e-6)
    # the saturated model's log-likelihood gives statsmodels' deviance
    assert 2 * (sat - float(f.loglik)) == pytest.approx(ref.deviance, abs=1e-6)


def test_counts_equal_rows() -> None:
    """A fit on cell counts equals the fit on one row per question."""
    rng = np.random.default_rng(7)
    Xc = np.column_stack([np.ones(6), np.arange(6.0), np.arange(6.0) ** 2 / 10])
    n = 40
    k = rng.binomial(n, [0.9, 0.8, 0.7, 0.6, 0.5, 0.3]).astype(float)
    Xr = np.repeat(Xc, n, axis=0)
    yr = np.concatenate([np.r_[np.ones(int(kk)), np.zeros(n - int(kk))] for kk in k])
    with jax.enable_x64(True):
        fc, fr = logistic_fit(Xc, k, float(n)), logistic_fit(Xr, yr)
    np.testing.assert_allclose(np.asarray(fc.beta), np.asarray(fr.beta), atol=1e-9)
    np.testing.assert_allclose(np.asarray(fc.se), np.asarray(fr.se), atol=1e-9)


def test_vmap_equals_one_by_one() -> None:
    X, _ = _bernoulli_case(3, n=120)
    rng = np.random.default_rng(3)
    ys = (rng.random((6, 120)) < 0.4).astype(float)
    with jax.enable_x64(True):
        batch = jax.jit(jax.vmap(lambda y: logistic_fit(X, y)))(ys)
        for r in range(ys.shape[0]):
            one = logistic_fit(X, ys[r])
            np.testing.assert_allclose(np.asarray(batch.beta[r]), np.asarray(one.beta),
                                       atol=1e-10)
            assert float(batch.loglik[r]) == pytest.approx(float(one.loglik), abs=1e-10)


def test_separation_is_not_converged() -> None:
    X = np.column_stack([np.ones(12), np.arange(12.0)])
    y = (np.arange(12) > 5).astype(float)
    with jax.enable_x64(True):
        f = logistic_fit(X, y)
    assert not bool(f.converged)
    # a cell observed at 0 % among others does not separate the additive model
    Xc = np.column_stack([np.ones(4), [0.0, 1, 0, 1], [0.0, 0, 1, 1]])
    with jax.enable_x64(True):
        g = logistic_fit(Xc, np.array([0.0, 3, 4, 9]), 10.0)
    assert bool(g.converged)


def test_float32_close_to_statsmodels() -> None:
    X, y = _bernoulli_case(11)
    ref = sm.Logit(y, X).fit(disp=0)
    f = logistic_fit(X.astype(np.float32), y.astype(np.float32))
    assert f.beta.dtype == np.float32 and bool(f.converged)
    np.testing.assert_allclose(np.asarray(f.beta), ref.params, atol=1e-3)


@pytest.mark.parametrize(("args", "match"), [
    ((np.ones(5), np.ones(5)), "X must be a 2-d"),
    ((np.ones((5, 2)), np.ones(4)), r"successes must have shape \(5,\)"),
    ((np.ones((5, 2)), np.ones(5), np.ones(3)), "trials must be a scalar or have shape"),
])
def test_bad_shapes(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        logistic_fit(*args)
