"""An assurance run records the parameters it really used (issue: summary.json used to list
the paper's α, γ, δ, σ although the curve came from the posterior) and names its fit."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import xarray as xr

import tomstats
from tomstats.design import paper_design
from tomstats.planning.result import write_power
from tomstats.simulation.paper import PAPER_PARAMS
from tomstats.simulation.study import StudyConfig

from .conftest import FIT_CENTRE


def _run(fit):
    return tomstats.power(StudyConfig(design=paper_design().with_(capability=(1.0,))),
                          along={"questions_per_cell": [20]}, tests=["anova:tom_order"],
                          replicates=20, posterior=fit, seed=1, progress=False)


def test_assurance_run_records_the_posterior_parameters(structural_fit, tmp_path):
    res = _run(structural_fit)
    write_power(res, tmp_path / "out", figure=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    s = summary["settings"]
    # the plug-in parameters are the posterior means, not the paper's
    assert abs(s["params"]["gamma"] - FIT_CENTRE["gamma"]) < 0.03
    assert abs(s["params"]["gamma"] - PAPER_PARAMS.gamma) > 0.5
    assert s["params_source"].startswith("posterior")
    post = s["posterior_params"]
    for f, centre in (("alpha", FIT_CENTRE["alpha"]), ("gamma", FIT_CENTRE["gamma"]),
                      ("delta", FIT_CENTRE["delta"]), ("sigma", FIT_CENTRE["sigma_item"])):
        row = post[f]
        assert row["q2.5"] < row["mean"] < row["q97.5"], f
        assert abs(row["mean"] / centre - 1) < 0.03, f
        assert 0 < row["sd"] < 0.1 * centre, f
    assert set(post["capability"]["per_llm"]) == {"weak", "strong"}
    # the fit is named, with its data hash and the file's own hash
    assert s["posterior"]["file"] == str(structural_fit)
    assert s["posterior"]["data_hash"] == "ab" * 32
    assert s["posterior"]["file_sha256"] == hashlib.sha256(
        structural_fit.read_bytes()).hexdigest()
    # the netCDF carries the same
    with xr.open_dataset(tmp_path / "out" / "power.nc", engine="h5netcdf") as ds:
        assert json.loads(ds.attrs["params"]) == s["params"]
        assert json.loads(ds.attrs["posterior_params"])["gamma"]["mean"] == post["gamma"]["mean"]


def test_a_run_without_posterior_records_the_study_parameters(tmp_path):
    res = tomstats.power(StudyConfig(design=paper_design().with_(capability=(1.0,))),
                         along={"questions_per_cell": [20]}, tests=["anova:tom_order"],
                         replicates=10, progress=False)
    attrs = res.data.attrs
    assert json.loads(attrs["params"]) == PAPER_PARAMS.to_dict()
    assert attrs["params_source"] == "study"
    assert json.loads(attrs["posterior_params"]) is None


def test_by_runs_record_the_posterior_parameters_too(structural_fit):
    res = tomstats.power(StudyConfig(design=paper_design().with_(capability=(1.0,))),
                         along={"questions_per_cell": [20]}, by={"n_llms": [2, 3]},
                         tests=["anova:tom_order"], replicates=10, posterior=structural_fit,
                         progress=False)
    assert np.isclose(json.loads(res.data.attrs["params"])["gamma"], FIT_CENTRE["gamma"],
                      rtol=0.05)
