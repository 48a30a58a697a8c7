"""Fast parameter recovery of the structural GLMM (the full study: benchmarks/glmm_recovery.py).

The benchmark's simulator must generate data from exactly the fitted model (equation (1),
one intercept per item shared by the LLMs, truths drawn from the fitted priors); its
compiled sampler must agree with the prior draws it is given. Then three small crossed
model × item datasets with true parameters drawn from the priors are fitted: the 95 %
intervals must cover the truth for almost all of α, γ, δ, σ and the three capabilities
(expected 95 %: at least 18 of 21 here), and the 50 % intervals must be neither always nor
never right.
"""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest


@pytest.fixture(scope="module")
def recovery(repo_root):
    path = repo_root / "benchmarks" / "glmm_recovery.py"
    spec = importlib.util.spec_from_file_location("glmm_recovery_bench", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_simulated_dataset_layout(recovery):
    df, truth = recovery.simulate_dataset(0, n_per_cell=4)
    assert len(df) == 3 * 15 * 4
    assert df["item"].nunique() == 15 * 4            # items shared by the three LLMs
    assert (df.groupby("item")["model"].nunique() == 3).all()
    assert set(truth) == {"alpha", "gamma", "delta", "sigma", "capability[m0]",
                          "capability[m1]", "capability[m2]"}
    df2, truth2 = recovery.simulate_dataset(0, n_per_cell=4)
    assert df.equals(df2) and truth == truth2        # seeded
    assert not recovery.simulate_dataset(1, n_per_cell=4)[0].equals(df)


def test_simulation_is_the_fitted_model(recovery):
    """eta = equation (1) written out here, plus one N(0, sigma) intercept per item that
    every LLM shares (the structural model's u_k)."""
    from tomstats.simulation.paper import PAPER_PARAMS

    df, truth = recovery.simulate_dataset(3, truth="paper", n_per_cell=40)
    assert truth["gamma"] == PAPER_PARAMS.gamma and truth["capability[m2]"] == 1.2
    c, t = df["context_words"].to_numpy(), df["tom_order"].to_numpy()
    m = df["model"].map(lambda k: truth[f"capability[{k}]"]).to_numpy()
    fixed_part = (math.log(0.85 / 0.15) * m - truth["alpha"] * c * np.log(1 + c / 500)
                  - truth["gamma"] * t - truth["delta"] * c * t)
    u = (df["eta"] - fixed_part).groupby(df["item"])
    assert u.std().max() < 1e-5                      # one intercept per item (float32)
    u = u.first().to_numpy()
    assert u.size == 600 and abs(u.std() - truth["sigma"]) < 0.1 * truth["sigma"]
    assert abs(u.mean()) < 4 * truth["sigma"] / np.sqrt(u.size)
    # the answers follow the logits: mean accuracy ≈ mean expit(eta)
    p = 1 / (1 + np.exp(-df["eta"].to_numpy()))
    assert abs(df["correct"].mean() - p.mean()) < 4 * np.sqrt(p.mean() / len(df))


def test_truth_from_the_fitted_priors(recovery):
    """--truth prior draws from the fit's own priors (N(0, 5) α̃, N(0, 2) γ, N(0, 15) δ̃,
    N+(1) σ, independent N(1, 1) capabilities below 5 LLMs)."""
    from tomstats.glmm import StructuralSpec

    spec = StructuralSpec()
    rng = np.random.default_rng(0)
    draws = [recovery.draw_truth("prior", rng) for _ in range(4000)]
    se = 1 / np.sqrt(len(draws))
    for key, prior, scale in (("alpha", "alpha_scaled", spec.alpha_scale),
                              ("gamma", "gamma", 1.0),
                              ("delta", "delta_scaled", spec.delta_scale)):
        v = np.array([d[key] for d in draws]) / scale / spec.prior(prior)["scale"]
        assert abs(v.mean()) < 4 * se and abs(v.std() - 1) < 0.05, key
    s = np.array([d["sigma"] for d in draws])
    assert (s > 0).all() and abs(s.mean() - np.sqrt(2 / np.pi)) < 4 * 0.6 * se
    cap = np.stack([d["capability"] for d in draws])
    assert cap.shape == (4000, 3) and abs(cap.mean() - 1) < 0.05
    assert abs(np.corrcoef(cap.T)[0, 1]) < 0.06      # independent, not pooled
    lo, hi = recovery.PAPER_RANGES["gamma"]
    g = [recovery.draw_truth("paper-range", rng)["gamma"] for _ in range(200)]
    assert lo <= min(g) and max(g) <= hi
    with pytest.raises(ValueError, match="truth"):
        recovery.draw_truth("flat", rng)


def test_structural_recovery_small(recovery):
    rows = []
    for i in range(3):
        df, truth = recovery.simulate_dataset(i, truth="prior", n_per_cell=4, seed=777)
        res = recovery.fit_dataset(df, truth, chains=2, draws=200, tune=200, seed=i)
        assert res["max_rhat"] < 1.1 and res["divergences"] == 0
        rows += res["params"]
    assert len(rows) == 21
    cover95 = sum(r["cover95"] for r in rows)
    cover50 = sum(r["cover50"] for r in rows)
    assert cover95 >= 18, rows
    assert 3 <= cover50 <= 18, rows
    # posterior means sit near the truth relative to the posterior sd
    z = [abs(r["mean"] - r["truth"]) / r["sd"] for r in rows]
    assert np.mean(z) < 1.5, z
    # intervals are proper and ordered
    for r in rows:
        assert r["q025"] <= r["q25"] <= r["q75"] <= r["q975"]
