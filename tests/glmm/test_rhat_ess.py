"""Vectorised R-hat / ESS (tomstats.glmm.rhat_ess) against ArviZ's own estimators."""

from __future__ import annotations

import logging
import warnings

import arviz as az
import numpy as np
import pytest

from tomstats.glmm.rhat_ess import (
    convergence,
    dataset_convergence,
    ess_bulk,
    ess_tail,
    rhat_rank,
)


def _arviz(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ds = az.convert_to_dataset({"a": x})
    logging.getLogger("arviz").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (az.rhat(ds, method="rank")["a"].to_numpy(),
                az.ess(ds, method="bulk")["a"].to_numpy(),
                az.ess(ds, method="tail")["a"].to_numpy())


def _draws(kind: str, chains: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    shape = (chains, draws, 12)
    if kind == "iid":
        return rng.normal(size=shape)
    if kind == "random_walk":  # ESS of a few: the long Geyer sequences, the monotone fix
        return np.cumsum(rng.normal(size=shape), axis=1)
    if kind == "ar1":
        x = rng.normal(size=shape)
        for t in range(1, draws):
            x[:, t] = 0.9 * x[:, t - 1] + x[:, t]
        return x
    if kind == "ties":
        return np.round(rng.normal(size=shape))
    if kind == "binary":
        return (rng.random(size=shape) < 0.3).astype(float)
    if kind == "anticorrelated":  # negative lag-1 autocorrelation: ESS above the draws
        x = rng.normal(size=shape)
        return x - 0.8 * np.roll(x, 1, axis=1)
    raise ValueError(kind)


KINDS = ("iid", "random_walk", "ar1", "ties", "binary", "anticorrelated")


# 275 draws split into halves of 137: an odd FFT length (next_fast_len(274) = 275)
SHAPES = [(1, 50), (2, 4), (2, 5), (3, 137), (2, 275), (4, 300)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("chains", "draws"), SHAPES)
def test_matches_arviz(kind: str, chains: int, draws: int) -> None:
    rng = np.random.default_rng([KINDS.index(kind), chains, draws])
    x = _draws(kind, chains, draws, rng)
    x[..., 0] = 2.5  # a constant entry
    ours = (rhat_rank(x), ess_bulk(x), ess_tail(x))
    for name, mine, ref in zip(("rhat", "ess_bulk", "ess_tail"), ours, _arviz(x), strict=True):
        assert mine.shape == ref.shape == (12,)
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(ref), err_msg=name)
        np.testing.assert_allclose(mine, ref, rtol=1e-9, atol=1e-12, err_msg=name)


def test_combined_equals_separate_and_handles_nan_and_shapes() -> None:
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.normal(size=(3, 101, 4, 5)), axis=1)
    x[1, 7, 2, 3] = np.nan
    r, b, t = convergence(x)
    assert r.shape == b.shape == t.shape == (4, 5)
    for mine, ref in zip((r, b, t), (rhat_rank(x), ess_bulk(x), ess_tail(x)), strict=True):
        np.testing.assert_array_equal(mine, ref)
    assert np.isnan(r[2, 3]) and np.isnan(b[2, 3]) and np.isnan(t[2, 3])
    assert np.isfinite(np.delete(r.ravel(), 13)).all()
    one = convergence(x[:1])
    assert np.isnan(one[0]).all() and np.isfinite(one[1][0]).all()
    with pytest.raises(ValueError, match=r"\(chain, draw"):
        rhat_rank(np.zeros(10))


def test_dataset_convergence_matches_arviz_layout() -> None:
    rng = np.random.default_rng(4)
    ds = az.convert_to_dataset({"mu": rng.normal(size=(2, 80)),
                                "b": rng.normal(size=(2, 80, 3))},
                               coords={"level": ["x", "y", "z"]}, dims={"b": ["level"]})
    ours = dataset_convergence(ds)
    refs = {"rhat": az.rhat(ds, method="rank"), "ess_bulk": az.ess(ds, method="bulk"),
            "ess_tail": az.ess(ds, method="tail")}
    assert set(ours) == set(refs)
    for stat, ref in refs.items():
        assert set(ours[stat].data_vars) == {"mu", "b"}
        assert list(ours[stat]["b"].coords["level"].values) == ["x", "y", "z"]
        np.testing.assert_allclose(ours[stat]["b"].to_numpy(), ref["b"].to_numpy(), rtol=1e-9)
        np.testing.assert_allclose(float(ours[stat]["mu"]), float(ref["mu"]), rtol=1e-9)
    assert set(dataset_convergence(ds, ("ess_bulk",))) == {"ess_bulk"}
    with pytest.raises(ValueError, match="stats must be among"):
        dataset_convergence(ds, ("mcse",))
