"""Fast parameter recovery of the structural GLMM (the full study: benchmarks/glmm_recovery.py).

Three small crossed model × item datasets simulated from equation (1) with known
parameters; the structural model's 95 % intervals must cover the truth for almost all of
α, γ, δ, σ and the three capabilities (expected 95 %: at least 18 of 21 here), the 50 %
intervals must be neither always nor never right, and the posterior means must sit near the
truth on average.
"""

from __future__ import annotations

import importlib.util
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
    assert set(truth) == {"alpha", "gamma", "delta", "sigma", "capability[m0.80]",
                          "capability[m1.00]", "capability[m1.20]"}
    df2, _ = recovery.simulate_dataset(0, n_per_cell=4)
    assert df.equals(df2)                            # seeded


def test_structural_recovery_small(recovery):
    rows = []
    for i in range(3):
        df, truth = recovery.simulate_dataset(i, n_per_cell=4, seed=777)
        res = recovery.fit_dataset(df, truth, chains=2, draws=200, tune=200, seed=i)
        assert res["max_rhat"] < 1.1
        rows += res["params"]
    assert len(rows) == 21
    cover95 = sum(r["cover95"] for r in rows)
    cover50 = sum(r["cover50"] for r in rows)
    assert cover95 >= 18, rows
    assert 3 <= cover50 <= 20, rows
    gam = [r for r in rows if r["param"] == "gamma"]
    assert abs(np.mean([r["mean"] for r in gam]) - gam[0]["truth"]) < 0.6
    # intervals are proper and ordered
    for r in rows:
        assert r["q025"] <= r["q25"] <= r["q75"] <= r["q975"]
