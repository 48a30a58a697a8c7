"""A PowerResult prints (``print``/``str``) as a compact table (power in % with its 95 % Monte
Carlo interval, as simr prints "80.2 % (77.6, 82.6)"), its ``repr`` is one line, and its
targets are a DataFrame."""

from __future__ import annotations

import re

import pandas as pd

import tomstats
from tomstats.analysis.intervals import wilson_interval


def test_power_result_prints_as_a_table_and_targets_are_a_frame():
    res = tomstats.power(along={"questions_per_cell": [10, 40]},
                         tests=["anova:tom_order", "anova:interaction"], replicates=40,
                         seed=0, progress=False)
    assert "\n" not in repr(res) and repr(res).startswith("<PowerResult: questions_per_cell")
    text = str(res)  # print(res): the table
    assert len(text.splitlines()) <= 8 and "xarray" not in text
    assert text.startswith("PowerResult: 40 simulated studies per value, level 0.05, seed 0")
    row = res.frame().query("test == 'anova:interaction' and value == 40").iloc[0]
    lo, hi = wilson_interval(row.n_rejected, row.n_fits - row.n_failed)
    assert f"{100 * row.power:.1f} % ({100 * lo:.1f}, {100 * hi:.1f})" in text
    assert re.search(r"anova:tom_order reaches 80% power at questions_per_cell = 10 or fewer",
                     text)
    t = res.targets()
    assert isinstance(t, pd.DataFrame)
    assert list(t.columns) == ["kind", "test", "target", "reached", "value", "value_optimistic",
                               "value_sure", "interpolated", "power_at_value"]
    assert t.set_index("test").loc["anova:tom_order", "value"] == 10
    assert t["target"].dtype == float and t["reached"].dtype == bool
    assert t.to_dict(orient="records") == res.target_records()


def test_posterior_summary_is_a_frame(structural_fit):
    """tomstats.glmm.posterior_summary: one row per parameter and per LLM's capability."""
    import numpy as np

    from tomstats.glmm import load_fit, posterior_params, posterior_summary
    from tomstats.glmm.calibrate import posterior_summary_dict

    idata = load_fit(structural_fit)
    s = posterior_summary(idata, 0.9)
    assert isinstance(s, pd.DataFrame)
    assert list(s.index) == ["alpha", "gamma", "delta", "sigma", "capability[weak]",
                             "capability[strong]"]
    assert list(s.columns) == ["kind", "llm", "mean", "sd", "median", "lower", "upper"]
    params, _cap = posterior_params(idata)
    g = np.asarray(params.gamma)
    assert s.loc["gamma", "mean"] == np.mean(g)
    assert s.loc["gamma", "lower"] == np.quantile(g, 0.05)
    assert s.attrs["interval"] == 0.9 and s.attrs["source"]["data_hash"] == "ab" * 32
    d = posterior_summary_dict(idata, 0.9)
    assert d["capability"]["weak"]["upper"] == s.loc["capability[weak]", "upper"]
