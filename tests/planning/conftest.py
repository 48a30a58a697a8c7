"""Fixtures of the planning tests: a small structural fit whose posterior is known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

#: The fit's posterior centres: γ far from the paper's 1.175, so a run that used the paper's
#: parameters instead of the fit's shows.
FIT_CENTRE = {"alpha": 9e-5, "gamma": 0.6, "delta": 1.5e-4, "sigma_item": 0.5}
FIT_LLMS = {"weak": 0.8, "strong": 1.25}


@pytest.fixture
def structural_fit(tmp_path: Path) -> Path:
    """A netCDF laid out like ``tomstats.glmm.fit``'s structural output (2 chains × 40 draws,
    each parameter within 5 % of :data:`FIT_CENTRE`)."""
    import arviz as az

    from tomstats.glmm.spec import StructuralSpec

    rng = np.random.default_rng(7)

    def draw(v: float) -> np.ndarray:
        return v * (1 + 0.05 * rng.standard_normal((2, 40)))

    post = {k: draw(v) for k, v in FIT_CENTRE.items()}
    post["capability"] = np.stack([draw(c) for c in FIT_LLMS.values()], axis=-1)
    idata = az.from_dict(posterior=post, coords={"llm": list(FIT_LLMS)},
                         dims={"capability": ["llm"]},
                         sample_stats={"diverging": np.zeros((2, 40), dtype=bool)},
                         constant_data={"obs_trials": np.ones(3, dtype=np.int64)})
    idata.posterior.attrs.update({
        "tomstats_glmm_format": "1", "model": "structural",
        "spec": json.dumps(StructuralSpec().to_dict()), "data_hash": "ab" * 32,
        "backend": "numpyro", "seed": 0, "created_at": "2025-01-01T00:00:00+00:00",
        "n_rows": 10})
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    return path
