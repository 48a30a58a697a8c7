"""The row layout of :func:`tomstats.glmm.lme_fit.lme_fit_arrays` is invisible in its results.

Rows are reordered level by level of the term with the most random effects and padded (rows
of no trials) to the same count per level, so that the sums over a level's rows are
reshapes (a term fully crossed with it, every pair of levels once, has reshape sums too);
with ``bucket=True`` levels and rows are padded to the sizes of the bucket ladder. The fit
must not depend on it: the same estimates as the segment-sum layout, for rows in any order,
with unequal level sizes, a second crossed term, a full grid, binomial trials, padded
buckets, and under ``jax.jit`` (traced codes: no reordering).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tomstats.glmm import lme_fit
from tomstats.glmm.lme_fit import TermShape, lme_fit_arrays


def _design(seed: int, sizes: list[int], crossed: bool = False, binomial: bool = False,
            grid: int = 0):
    """Rows of len(sizes) groups (sizes[j] rows each), a slope x, optionally a crossed item
    factor of 7 levels (or, with ``grid``, of ``grid`` levels each group holds once: a full
    grid) and trials of 1 to 4, shuffled."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(len(sizes)), sizes)
    n_obs = g.size
    x = rng.normal(size=n_obs)
    X = np.c_[np.ones(n_obs), x]
    b = rng.normal(0.0, [0.8, 0.4], size=(len(sizes), 2))
    eta = -0.3 + 0.6 * x + b[g, 0] + b[g, 1] * x
    Zs, gs = [X], [g]
    shapes = [TermShape(2, len(sizes), True)]
    if crossed or grid:
        n_items = grid or 7
        item = (np.tile(np.arange(grid), len(sizes)) if grid else
                rng.integers(0, 7, n_obs))
        eta = eta + rng.normal(0.0, 0.5, n_items)[item]
        Zs.append(np.ones((n_obs, 1)))
        gs.append(item)
        shapes.append(TermShape(1, n_items, True))
    trials = rng.integers(1, 5, n_obs).astype(float) if binomial else None
    p = 1.0 / (1.0 + np.exp(-eta))
    y = rng.binomial(np.ones(n_obs, int) if trials is None else trials.astype(int), p)
    order = rng.permutation(n_obs)
    return (X[order], y[order].astype(float), None if trials is None else trials[order],
            tuple(z[order] for z in Zs), tuple(gg[order] for gg in gs), tuple(shapes))


CASES = {
    "balanced, shuffled": dict(seed=1, sizes=[30] * 12),
    "unequal levels (padded)": dict(seed=2, sizes=[28, 30, 25, 30, 27, 30, 29, 24]),
    "crossed second term": dict(seed=3, sizes=[40] * 10, crossed=True),
    "binomial, unequal": dict(seed=4, sizes=[20, 18, 20, 17, 20, 19], binomial=True),
    "full grid": dict(seed=7, sizes=[9] * 30, grid=9),
}


def _n(y, trials):
    return np.ones_like(y) if trials is None else trials


def _same(a, b, scale: float = 1.0) -> None:
    """Equal fits; ``scale`` widens the tolerances for fits from different starts (each
    stops at a Newton decrement below 1e-10, not at the same point)."""
    np.testing.assert_allclose(a.beta, b.beta, rtol=1e-7 * scale, atol=1e-9 * scale)
    np.testing.assert_allclose(a.se, b.se, rtol=1e-6 * scale, atol=1e-9 * scale)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6 * scale, atol=1e-8 * scale)
    np.testing.assert_allclose(a.loglik, b.loglik, rtol=0, atol=1e-7 * scale)
    np.testing.assert_allclose(a.b, b.b, rtol=1e-6 * scale, atol=1e-8 * scale)
    np.testing.assert_allclose(a.b_var, b.b_var, rtol=1e-6 * scale, atol=1e-9 * scale)
    assert bool(np.all(a.converged)) and bool(np.all(b.converged))


@pytest.mark.parametrize("name", list(CASES))
def test_layout_does_not_change_the_fit(name, monkeypatch):
    X, y, trials, Zs, gs, shapes = _design(**CASES[name])
    lay = lme_fit._plan(gs, shapes, bucket=False)
    assert lay.blocked and (lay.crossed == 1) == (name == "full grid")
    with jax.enable_x64(True):
        laid_out = lme_fit_arrays(X, y, trials, Zs, gs, shapes)
        monkeypatch.setattr(lme_fit, "_BLOCK_PAD", -1.0)  # never laid out: segment sums
        assert not lme_fit._plan(gs, shapes, bucket=False).blocked
        plain = lme_fit_arrays(X, y, trials, Zs, gs, shapes)
    _same(laid_out, plain)


def test_bucket_padding_changes_no_estimate():
    """Levels and rows padded to the bucket ladder (30 groups -> 32, 9 items -> 10, the
    rows with them): every result as without padding, the padded levels left out."""
    X, y, trials, Zs, gs, shapes = _design(**CASES["full grid"])
    lay = lme_fit._plan(gs, shapes, bucket=True)
    assert lay.shapes != shapes and lay.rows > len(y)
    assert [s.q for s in lay.shapes] == [lme_fit.bucket_size(s.q) for s in shapes]
    with jax.enable_x64(True):
        plain = lme_fit_arrays(X, y, trials, Zs, gs, shapes)
        padded = lme_fit_arrays(X, y, trials, Zs, gs, shapes, bucket=True)
    assert padded.b.shape == plain.b.shape and padded.b_var.shape == plain.b_var.shape
    assert int(padded.iterations) == int(plain.iterations)
    _same(padded, plain)


def test_sequential_refits_with_start_and_traced_codes():
    """Refits one after another from a start (what a power run does) equal the vmapped
    ones; under jax.jit the codes are traced, nothing is reordered, and the fit is the
    same."""
    X, y, trials, Zs, gs, shapes = _design(**CASES["unequal levels (padded)"])
    rng = np.random.default_rng(5)
    flip = lambda: np.where(rng.random(y.size) < 0.05, 1.0 - y, y)  # noqa: E731
    ys = np.stack([y, flip(), flip()])
    with jax.enable_x64(True):
        vm = lme_fit_arrays(X, ys, trials, Zs, gs, shapes)
        seq = lme_fit_arrays(X, ys, trials, Zs, gs, shapes, sequential=True,
                             start=(np.asarray(vm.theta[0]), np.asarray(vm.beta[0])))
        jitted = jax.jit(lambda g0: lme_fit_arrays(X, ys, trials, Zs, (g0,), shapes))(gs[0])
    _same(vm, seq, scale=100.0)
    _same(vm, jitted)


def test_padding_rows_carry_no_trials():
    X, y, trials, Zs, gs, shapes = _design(**CASES["binomial, unequal"])
    lay = lme_fit._plan(gs, shapes, bucket=False)
    assert lay.blocked and lay.crossed == -1
    Xp, yp, n_p = (lme_fit._place(lay, a) for a in (X, y, trials))
    gp = lay.gs
    q, r = shapes[0].q, max(np.bincount(gs[0]))
    assert Xp.shape == (q * r, 2) and lay.rows == q * r
    np.testing.assert_array_equal(np.asarray(gp[0]), np.repeat(np.arange(q), r))
    pad = np.asarray(n_p) == 0
    assert pad.sum() == q * r - len(y)
    assert np.all(np.asarray(yp)[pad] == 0) and np.all(np.asarray(Xp)[pad] == 0)
    # every real row is there once, in its level's block
    assert sorted(np.asarray(yp)[~pad].tolist()) == sorted(y.tolist())
    assert np.asarray(n_p)[~pad].sum() == trials.sum()


def test_too_much_padding_keeps_the_segment_sums():
    X, y, trials, Zs, gs, shapes = _design(seed=6, sizes=[60, 5, 5, 5, 5, 5])
    lay = lme_fit._plan(gs, shapes, bucket=False)
    assert not lay.blocked and lay.identity
    with jax.enable_x64(True):
        assert bool(lme_fit_arrays(X, y, trials, Zs, gs, shapes).converged)


def test_codes_outside_the_levels_are_refused():
    X, y, trials, Zs, gs, shapes = _design(**CASES["balanced, shuffled"])
    bad = (np.where(gs[0] == 0, shapes[0].q, gs[0]),)
    with pytest.raises(ValueError, match=r"codes of term 0 must lie in 0\.\.11.*got 1\.\.12"):
        lme_fit_arrays(X, y, trials, Zs, bad, shapes)
