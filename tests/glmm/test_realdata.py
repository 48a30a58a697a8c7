"""Real LLM outcomes (shared data) through the GLMMs, checked against frequentist GLMs.

The Bayesian GLMMs here use random model intercepts; the reference is a statsmodels
binomial GLM with fixed model effects on the same rows. With balanced designs and
hundreds of questions per model, the fixed-effect estimates of interest must agree within
a fraction of their standard error, and the 95 % intervals must agree in sign/coverage.
Fits use few draws; the full-draw runs are in docs/glmm-real-data.md. Slow checks run with
``-m slow`` only.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tomstats.glmm.realdata import (
    load_chartom,
    load_evaluation_log,
    load_storysim,
    load_storysim_mislead,
    load_storysim_triplets,
    load_tombench,
)

sm = pytest.importorskip("statsmodels.api")
smf = pytest.importorskip("statsmodels.formula.api")

FAST = dict(chains=2, draws=250, tune=250, seed=1, progress=False, log_likelihood=False,
            posterior_predictive=False)


@pytest.fixture
def only_with_slow(request):
    """Skip unless the run selected slow tests (``-m slow``)."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow real-data fit: run with -m slow")


def _fit(df, model, **kw):
    from tomstats.glmm import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(df, model, **{**FAST, **kw})


def _coef(idata, name):
    return idata.posterior["beta"].sel(coef=name).to_numpy().ravel()


def _glm(formula, df, binomial=False):
    return smf.glm(formula, df, family=sm.families.Binomial()).fit()


# --------------------------------------------------------------------------- loaders


def test_storysim_loaders(shared_data):
    allrows = load_storysim(shared_data, drop_failed=False)
    assert len(allrows) == 12_000
    trip = load_storysim_triplets(shared_data)
    assert len(trip) == 5_400  # 5,700 triplet rows less the 300 of the failed run
    assert set(trip["tom_order"]) == {0, 2} and trip["model"].nunique() == 8
    assert trip["item"].nunique() == 100
    assert not (trip["quality_flag"] == "failed_run").any()
    assert set(trip["correct"]) <= {0, 1}
    # model × item crossed: every model answered most stories
    assert (trip.groupby("model")["item"].nunique() == 100).all()
    assert np.array_equal(trip["tom2"], trip["tom_order"] // 2)
    orig = load_storysim_triplets(shared_data, prompt_variants=["original"])
    assert len(orig) == 8 * 300
    with pytest.raises(ValueError, match="prompt_variants: unknown"):
        load_storysim_triplets(shared_data, prompt_variants=["nope"])
    mis = load_storysim_mislead(shared_data)
    assert len(mis) == 1900 + 1800 + 900
    assert mis["mislead_distance"].between(3, 80).all()
    assert set(mis["model"]) == {"gpt-4", "DeepSeek-R1"}
    with pytest.raises(ValueError, match="experiments: unknown"):
        load_storysim_mislead(shared_data, experiments=["triplets"])


def test_tombench_and_chartom_loaders(shared_data, tmp_path):
    tb = load_tombench(shared_data)
    assert len(tb) == 13_189
    assert (tb["successes"] <= tb["trials"]).all() and (tb["trials"] >= 1).all()
    assert (tb["trials"] == 5).mean() > 0.9
    assert tb["context_words"].between(8, 164).all()
    assert "tom_order" not in tb.columns
    # items are shared by runs (crossed)
    runs_per_item = tb.groupby("item")["model"].nunique()
    assert runs_per_item.median() >= 5 and (runs_per_item >= 2).mean() > 0.7
    ch = load_chartom(shared_data)
    assert len(ch) == 144 and set(ch["context_tokens"]) == {0, 1000, 2000}
    assert len(load_chartom(shared_data, consistent_only=True)) == 140
    # implied counts reproduce the printed accuracy to the printed precision (mostly)
    err = np.abs(100 * ch["successes"] / ch["trials"] - ch["accuracy_pct"])
    assert (err <= 0.05 + 1e-9).mean() > 0.95
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_chartom(tmp_path)
    (tmp_path / "chartom_mcqa_accuracy.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="CharToM-QA table: column"):
        load_chartom(tmp_path)


def test_evaluation_log_loader(repo_root, tmp_path):
    p = repo_root / "data" / "smollm2_storysim_log.jsonl"
    if not p.is_file():
        pytest.skip("the project's SmolLM2 log is not present")
    df = load_evaluation_log(p)
    assert len(df) > 50 and set(df["tom_order"]) == {0, 1, 2}
    assert df["context_words"].nunique() >= 3
    # several questions per story → item effects are estimable
    assert df["item"].duplicated().any()
    bad = tmp_path / "log.jsonl"
    bad.write_text('{"model": "x"}\n')
    with pytest.raises(ValueError, match="evaluation log: column"):
        load_evaluation_log(bad)


# --------------------------------------------------------------------------- fits


def test_triplets_tom_effect_matches_glm(shared_data):
    """ToM order 2 vs world-model controls: logit difference, Bayes vs GLM."""
    df = load_storysim_triplets(shared_data)
    ref = _glm("correct ~ tom2 + C(model)", df)
    b_ref, se_ref = ref.params["tom2"], ref.bse["tom2"]
    idata = _fit(df, "correct ~ tom2 + (1 | model)")
    b = _coef(idata, "tom2")
    lo, hi = np.quantile(b, [0.025, 0.975])
    assert abs(b.mean() - b_ref) < 0.3 * se_ref
    assert b.std() == pytest.approx(se_ref, rel=0.25)
    ci_ref = (b_ref - 1.96 * se_ref, b_ref + 1.96 * se_ref)
    assert abs(lo - ci_ref[0]) < 0.4 * se_ref and abs(hi - ci_ref[1]) < 0.4 * se_ref
    # what the data say: second-order questions are answered less often than the controls
    assert hi < 0 and ci_ref[1] < 0


def test_triplets_structural_gamma(shared_data):
    """Structural model with one context length: α = δ = 0 fixed, γ per ToM order.

    Equation (1) gives logit difference −2γ between order 2 and order 0, so γ ≈ −b/2 with b
    the GLM's ``tom2`` coefficient (model fixed effects ≈ per-LLM capabilities).
    """
    df = load_storysim_triplets(shared_data)
    ref = _glm("correct ~ tom2 + C(model)", df)
    idata = _fit(df, "structural", item_effects=False, fixed={"alpha": 0.0, "delta": 0.0})
    g = idata.posterior["gamma"].to_numpy().ravel()
    assert abs(g.mean() + ref.params["tom2"] / 2) < 0.3 * ref.bse["tom2"] / 2
    assert g.std() == pytest.approx(ref.bse["tom2"] / 2, rel=0.3)


def test_chartom_context_effect_matches_glm(shared_data):
    """CharToM-QA: effect of the plot window (per 1000 tokens) on the logit scale."""
    df = load_chartom(shared_data)
    ref = _glm("successes + I(trials - successes) ~ context_k + language + tom_dimension"
               " + C(model)", df)
    idata = _fit(df, "successes | trials(trials) ~ context_k + language + tom_dimension"
                     " + (1 | model)")
    b = _coef(idata, "context_k")
    b_ref, se_ref = ref.params["context_k"], ref.bse["context_k"]
    assert abs(b.mean() - b_ref) < 0.3 * se_ref
    assert b.std() == pytest.approx(se_ref, rel=0.25)
    # small: |effect| under 0.1 logit per 1000 tokens at the 95 % level
    lo, hi = np.quantile(b, [0.025, 0.975])
    assert -0.1 < lo < hi < 0.1
    zh = _coef(idata, "language[T.zh]")
    assert abs(zh.mean() - ref.params["language[T.zh]"]) < 0.3 * ref.bse["language[T.zh]"]


@pytest.mark.slow
def test_mislead_distance_matches_glm(shared_data, only_with_slow):
    df = load_storysim_mislead(shared_data)
    ref = _glm("correct ~ mislead_10 + tom_order + C(model)", df)
    idata = _fit(df, "correct ~ mislead_10 + tom_order + (1 | model)")
    b = _coef(idata, "mislead_10")
    assert abs(b.mean() - ref.params["mislead_10"]) < 0.3 * ref.bse["mislead_10"]


@pytest.mark.slow
def test_tombench_story_length_matches_glm(shared_data, only_with_slow):
    df = load_tombench(shared_data)
    ref = smf.glm("successes + I(trials - successes) ~ story_100 + ability + C(model)", df,
                  family=sm.families.Binomial()).fit()
    idata = _fit(df, "successes | trials(trials) ~ story_100 + ability + (1 | model)")
    b = _coef(idata, "story_100")
    assert abs(b.mean() - ref.params["story_100"]) < 0.3 * ref.bse["story_100"]


@pytest.mark.slow
def test_smollm2_structural_fit(repo_root, only_with_slow):
    p = repo_root / "data" / "smollm2_storysim_log.jsonl"
    if not p.is_file():
        pytest.skip("the project's SmolLM2 log is not present")
    df = load_evaluation_log(p)
    idata = _fit(df, "structural", draws=500, tune=500)
    for v in ("alpha", "gamma", "delta", "sigma_item", "capability"):
        assert v in idata.posterior
    assert np.isfinite(idata.posterior["gamma"].to_numpy()).all()
