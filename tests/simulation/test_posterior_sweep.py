"""Calibrated sweeps (tomstats.simulation.posterior_sweep): a hand-built structural fit with a tight
posterior around known parameters must reproduce the plain simulator's η² and ToM shares at
those parameters; bad fits and arguments are refused with clear messages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tomstats.design import paper_design
from tomstats.model import Params
from tomstats.simulation.posterior_sweep import posterior_draws, run_posterior_study, thin_index
from tomstats.simulation.reproduce import StudyConfig
from tomstats.simulation.sensitivity_grid import sensitivity
from tomstats.simulation.simulator import simulate

TRUE = Params(alpha=8e-5, gamma=1.2, delta=2e-4, sigma=0.6)
CAPS = {"weak": 0.8, "strong": 1.25}
GAMMA = (0.3, 1.2, 2.4)
ALPHA = (2e-5, 1e-4, 2e-4)


def _idata(*, chains: int = 2, draws: int = 40, sd: float = 1e-3, formula: bool = False,
           gamma_llm: dict[str, float] | None = None, seed: int = 0, gamma_sd: float | None = None):
    """An InferenceData laid out like tomstats.glmm.fit's structural output."""
    import arviz as az

    from tomstats.glmm.spec import StructuralSpec

    rng = np.random.default_rng(seed)
    llm = list(CAPS)

    def draw(v: float, rel: float = sd) -> np.ndarray:
        return v * (1 + rel * rng.standard_normal((chains, draws)))

    gsd = sd if gamma_sd is None else gamma_sd
    post = {"alpha": draw(TRUE.alpha), "gamma": draw(TRUE.gamma, gsd), "delta": draw(TRUE.delta),
            "sigma_item": draw(TRUE.sigma),
            "capability": np.stack([draw(CAPS[k]) for k in llm], axis=-1)}
    dims = {"capability": ["llm"]}
    if gamma_llm is not None:
        post["gamma_llm"] = np.stack([draw(gamma_llm[k]) for k in llm], axis=-1)
        dims["gamma_llm"] = ["llm"]
    spec = StructuralSpec(random_slopes=("tom_order",) if gamma_llm else ()).to_dict()
    if formula:
        spec = {"kind": "formula", "formula": "correct ~ tom_order + (1 | model)",
                "response": "correct", "trials": None, "family": "bernoulli",
                "fixed": "tom_order", "random": [{"expr": "1", "group": "model",
                                                  "correlated": True, "key": "model"}],
                "priors": {}, "noncentered": True, "center": True, "aggregate": False}
        post["beta"] = np.stack([draw(1.0), draw(-0.5)], axis=-1)  # a formula fit's effects
        dims["beta"] = ["coef"]
    attrs = {"tomstats_glmm_format": "1", "model": spec.get("formula", "structural"),
             "spec": json.dumps(spec), "data_hash": "x" * 64, "backend": "numpyro",
             "seed": 0, "created_at": "2025-01-01T00:00:00+00:00", "n_rows": 10}
    idata = az.from_dict(
        posterior=post, coords={"llm": llm, "coef": ["Intercept", "tom_order"]}, dims=dims,
        sample_stats={"diverging": np.zeros((chains, draws), dtype=bool)},
        constant_data={"obs_trials": np.ones(3, dtype=np.int64)})
    idata.posterior.attrs.update(attrs)
    return idata


def _save(idata, path: Path) -> Path:
    idata.to_netcdf(str(path))
    return path


def _config(**kw) -> StudyConfig:
    base = dict(design=paper_design(), replicates=60, sensitivity_replicates=60, seed=3,
                gamma=GAMMA, alpha=ALPHA)
    base.update(kw)
    return StudyConfig(**base)


def test_thin_index_even_and_capped():
    assert thin_index(100, 5).tolist() == [0, 25, 50, 74, 99]
    assert thin_index(3, 10).tolist() == [0, 1, 2]


def test_posterior_study_matches_simulator_at_truth(tmp_path):
    fit = _save(_idata(), tmp_path / "fit.nc")
    # the synthetic draws are not a sampler's: its R-hat check is not the point here
    text = run_posterior_study(_config(), fit, draws=30, out=tmp_path / "o", progress=False,
                               allow_warnings=True)
    assert "ToM-dominant grid cells" in text
    dec = pd.read_csv(tmp_path / "o" / "decomposition_posterior.csv")
    dom = pd.read_csv(tmp_path / "o" / "dominance_posterior.csv")
    summ = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert dec.shape[0] == 2 * 4 and set(dec["llm"]) == set(CAPS)
    assert dom.shape[0] == len(GAMMA) * len(ALPHA)
    assert summ["draws_used"] == 30 and summ["draws_available"] == 80
    assert summ["replicates_per_draw"] == 2  # ceil(60 / 30)
    # reference: the plain simulator at the true parameters, many replicates
    ref = simulate(paper_design().with_(capability=tuple(CAPS.values())), TRUE,
                   replicates=200, seed=11)
    for j, (llm, cap) in enumerate(CAPS.items()):
        sub = dec[dec["llm"] == llm].set_index("source")
        assert sub.loc["tom_order", "capability_mean"] == pytest.approx(cap, rel=1e-2)
        for src in ("tom_order", "context_length", "interaction"):
            e = ref["eta2"].isel(capability=j).sel(source=src)
            truth, mcsd = float(e.mean()), float(e.std())
            r = sub.loc[src]
            assert r["eta2_low"] <= r["eta2_mean"] <= r["eta2_high"]
            assert r["eta2_pred_low"] <= truth <= r["eta2_pred_high"], (llm, src)
            # 60 simulated studies: the mean is within ~4 MC standard errors of the truth
            assert abs(r["eta2_mean"] - truth) < 4 * mcsd / np.sqrt(60) + 1e-3, (llm, src)
        shares = sub.loc[["tom_order", "context_length", "interaction"], "share_mean"]
        assert shares.sum() == pytest.approx(1.0, abs=1e-6)
    # the map at the true δ, σ
    sens = sensitivity(TRUE, gamma=GAMMA, alpha=ALPHA, replicates=100, seed=5)
    ref_share = sens["tom_share_mean"].to_numpy().ravel()
    assert np.allclose(dom["tom_share_mean"], ref_share, atol=0.03)
    assert dom["p_dominant"].between(0, 1).all()
    # far from 0.5 the verdict is certain and agrees with the reference
    clear = np.abs(ref_share - 0.5) > 0.1
    assert clear.any()
    assert np.array_equal(dom["p_dominant"].to_numpy()[clear], (ref_share[clear] > 0.5) * 1.0)
    assert summ["dominance"]["n_cells"] == 9
    assert 0 <= summ["dominance"]["n_dominant"]["low"] <= summ["dominance"]["n_dominant"]["high"]


def test_posterior_uncertainty_widens_intervals():
    """A wide posterior on γ gives a wider η²_ToM interval than a tight one."""
    cfg = _config(replicates=40, sensitivity_replicates=20, gamma=(1.2,), alpha=(1e-4,),
                  design=paper_design().with_(n_per_cell=200))
    from tomstats.simulation.posterior_sweep import posterior_study

    widths = []
    for gsd in (1e-3, 0.3):
        pdr = posterior_draws(_idata(gamma_sd=gsd), draws=30)
        dec, _, _ = posterior_study(cfg, pdr, replicates=1, sensitivity_replicates=1,
                                    progress=False)
        r = dec[(dec["llm"] == "strong") & (dec["source"] == "tom_order")].iloc[0]
        widths.append(r["eta2_high"] - r["eta2_low"])
    assert widths[1] > 3 * widths[0]


def test_random_slopes_used_per_llm():
    pdr = posterior_draws(_idata(gamma_llm={"weak": 0.5, "strong": 2.0}), draws=10)
    g = np.asarray(pdr.params.gamma)
    assert g.shape == (10, 2)
    assert dict(zip(pdr.llm, g.mean(0), strict=True)) == pytest.approx(
        {"weak": 0.5, "strong": 2.0}, rel=0.01)


def test_refuses_formula_fit(tmp_path):
    fit = _save(_idata(formula=True), tmp_path / "formula.nc")
    with pytest.raises(ValueError, match="structural fit.*formula model"):
        run_posterior_study(_config(), fit, draws=5, out=tmp_path / "o")
    assert not (tmp_path / "o" / "summary.json").exists()


def test_refuses_foreign_and_missing_netcdf(tmp_path):
    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"x": ("a", np.arange(3.0))}).to_netcdf(foreign)
    with pytest.raises(ValueError, match="foreign|not a tomstats|no posterior"):
        run_posterior_study(_config(), foreign, draws=5, out=tmp_path / "o")
    junk = tmp_path / "junk.nc"
    junk.write_text("not netcdf")
    with pytest.raises(ValueError, match="not a readable"):
        run_posterior_study(_config(), junk, draws=5, out=tmp_path / "o")
    with pytest.raises(FileNotFoundError):
        run_posterior_study(_config(), tmp_path / "nope.nc", draws=5, out=tmp_path / "o")


@pytest.mark.parametrize("draws", [0, -3, 2.5, True])
def test_bad_draws(tmp_path, draws):
    fit = _save(_idata(), tmp_path / "fit.nc")
    with pytest.raises(ValueError, match="draws must be a positive integer"):
        run_posterior_study(_config(), fit, draws=draws, out=tmp_path / "o")


def test_bad_out(tmp_path):
    fit = _save(_idata(), tmp_path / "fit.nc")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="not a directory"):
        run_posterior_study(_config(), fit, draws=5, out=tmp_path / "file")
