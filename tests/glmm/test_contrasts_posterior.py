"""Posterior contrasts of a Bayesian formula fit (tomstats.glmm.contrasts.posterior_contrasts)
on made-up draws of the fixed effects: per draw they are the frequentist core's estimates for
that draw's coefficients, summarised by median, HDI (ArviZ's) and probability of direction.
No sampler runs here: the draws are an InferenceData built from numbers."""

from __future__ import annotations

import json
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest

from tomstats.analysis.marginal import RefGrid, contrasts, emmeans
from tomstats.glmm.contrasts import design_grid, posterior_contrasts

DATA = Path(__file__).resolve().parents[1] / "reference" / "emmeans_glmm.json"
FORMULA = "correct ~ C(tom_order) * C(context_words) + x + (1 | model)"
FIXED = "C(tom_order) * C(context_words) + x"


@pytest.fixture(scope="module")
def draws() -> tuple[az.InferenceData, pd.DataFrame, np.ndarray, list[str]]:
    case = json.loads(DATA.read_text())["cases"][0]
    data = pd.DataFrame(case["data"])
    import formulaic

    names = list(formulaic.model_matrix(FIXED, data).columns)
    rng = np.random.default_rng(7)
    beta = rng.normal(0.0, 0.4, size=(2, 60, len(names))) + np.linspace(1, -1, len(names))
    idata = az.from_dict(posterior={"beta": beta}, coords={"coef": names},
                         dims={"beta": ["coef"]})
    idata.attrs["model"] = FORMULA
    return idata, data, beta.reshape(-1, len(names)), names


def _per_draw(data: pd.DataFrame, beta: np.ndarray, names: list[str], scale: str,
              **kw) -> np.ndarray:
    """The contrasts of every draw, each by the frequentist core on that draw's grid."""
    X, factors, levels, _ = design_grid(FIXED, data, names)
    out = []
    for b in beta:
        grid = RefGrid(tuple(factors), tuple(levels), X @ b, np.eye(len(X)), float("inf"),
                       link="logit")
        out.append(contrasts(grid, "tom_order", adjust="none", scale=scale, **kw)["estimate"])
    return np.array(out)


@pytest.mark.parametrize("scale", ["link", "response"])
def test_posterior_contrasts_are_the_draws_contrasts(draws, scale) -> None:
    idata, data, beta, names = draws
    table = posterior_contrasts(idata, data, "tom_order", scale=scale, hdi_prob=0.9)
    theta = _per_draw(data, beta, names, scale)
    np.testing.assert_allclose(table["median"], np.median(theta, axis=0), rtol=1e-12)
    np.testing.assert_allclose(table["sd"], theta.std(axis=0, ddof=1), rtol=1e-10)
    hdi = np.array([az.hdi(theta[:, j], hdi_prob=0.9) for j in range(theta.shape[1])])
    np.testing.assert_allclose(table[["hdi_lower", "hdi_upper"]], hdi, rtol=1e-12)
    pd_ = np.maximum((theta > 0).mean(axis=0), (theta < 0).mean(axis=0))
    np.testing.assert_allclose(table["pd"], pd_)
    assert table["contrast"].tolist() == ["tom_order0 - tom_order1", "tom_order0 - tom_order2",
                                          "tom_order1 - tom_order2"]


def test_posterior_means_by(draws) -> None:
    idata, data, beta, names = draws
    table = posterior_contrasts(idata, data, "tom_order", "context_words", means=True,
                                scale="response")
    X, factors, levels, _ = design_grid(FIXED, data, names)
    first = RefGrid(tuple(factors), tuple(levels), X @ beta[0], np.eye(len(X)), float("inf"),
                    link="logit")
    ref = emmeans(first, "tom_order", "context_words", scale="response")
    assert table[["context_words", "tom_order"]].equals(ref[["context_words", "tom_order"]])
    assert "pd" not in table.columns and len(table) == 9


def test_posterior_needs_a_formula_fit(draws) -> None:
    idata, data, _, _ = draws
    bare = az.from_dict(posterior={"alpha": np.zeros((1, 5))})
    with pytest.raises(ValueError, match="'beta' draws"):
        posterior_contrasts(bare, data, "tom_order")


def test_command_line_reads_a_sampler_fit(tmp_path, capsys) -> None:
    """``tomstats contrasts LOG --fit FIT.nc``: posterior contrasts of a formula fit (made-up
    draws around known coefficients, in the samplers' layout), numeric variables put on the
    grid with --at; the CSV is the Python function's table."""
    from _report_data import formula_log, make_formula_fit, save_fit

    from tomstats.cli import main

    save_fit(make_formula_fit(), tmp_path / "fit.nc")
    df, truth = formula_log(0)
    df.to_csv(tmp_path / "log.csv", index=False)
    out = tmp_path / "c.csv"
    assert main(["contrasts", str(tmp_path / "log.csv"), "--fit", str(tmp_path / "fit.nc"),
                 "--specs", "fb", "--by", "implicit", "--at", "fb=0,1", "--at", "implicit=0,1",
                 "--scale", "link", "--level", "0.9", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "highest-density intervals" in printed and "pd" in printed
    got = pd.read_csv(out)
    idata = az.from_netcdf(tmp_path / "fit.nc")
    want = posterior_contrasts(idata, df, "fb", "implicit", at={"fb": [0, 1],
                                                                "implicit": [0, 1]},
                               hdi_prob=0.9)
    assert got["contrast"].tolist() == ["fb0 - fb1"] * 2
    np.testing.assert_allclose(got[["median", "hdi_lower", "hdi_upper", "pd"]],
                               want[["median", "hdi_lower", "hdi_upper", "pd"]], rtol=1e-12)
    # the draws scatter (sd 0.08) around the truth: fb0 - fb1 is -beta_fb (- beta_fb:implicit)
    np.testing.assert_allclose(got["median"], [-truth["fb"], -truth["fb"] - truth["fb:implicit"]],
                               atol=0.05)
    assert (got["pd"] == 1.0).all() and (got["hdi_lower"] > 0).all()
