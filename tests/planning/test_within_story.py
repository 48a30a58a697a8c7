"""Within-story (length-ladder) designs in the simulator and in power: a story told at every
context length keeps its item effect there, and a GLMM with ``(1 | item)`` then estimates the
context effect within stories."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.stats

import tomstats
from tomstats.design import CONTEXT, TOM, Design, Factor, paper_design
from tomstats.model import Params
from tomstats.planning.analyses import COEF, SCALE, parse_test
from tomstats.planning.studies import StudySize, study_program
from tomstats.simulation.paper import PAPER_PARAMS
from tomstats.simulation.simulator import item_counts, simulate_questions
from tomstats.simulation.study import PowerSpec

CTX = (200.0, 1000.0, 5000.0)
TOMS = (0.0, 1.0)


def _logit_rates(k: np.ndarray, n: int) -> np.ndarray:
    p = (k + 0.5) / (n + 1.0)
    return np.log(p / (1 - p))


@pytest.mark.parametrize("within", [False, True])
def test_item_effects_are_shared_across_lengths_only_within_stories(within):
    """With no fixed effects and 400 questions per story, a story's logit accuracy is its
    effect plus little noise: across lengths the stories' rates correlate near 1 within
    stories and near 0 between (a check that can fail either way)."""
    params = Params(alpha=0.0, gamma=0.0, delta=0.0, sigma=1.0)
    k = np.asarray(item_counts(jax.random.key(3), params, np.asarray(CTX), np.asarray(TOMS),
                               np.asarray([0.0]), np.full(60, 400), within_story=within))
    assert k.shape == (1, 3, 2, 60)
    rates = _logit_rates(k[0], 400)  # (C, T, I)
    r = np.corrcoef(rates[0].ravel(), rates[2].ravel())[0, 1]
    if within:
        assert r > 0.9
    else:
        assert abs(r) < 0.3


def test_simulate_questions_names_one_story_for_all_lengths():
    d = Design((Factor(CONTEXT, CTX), Factor(TOM, TOMS)), 6, (1.0,))
    df = simulate_questions(d, Params(7e-5, 1.0, 2e-4, 1.0), seed=1, latent=True,
                            shared_items=True, items_per_cell=3, within_story=True)
    # 3 stories per order, each at every length, with one effect
    assert df.groupby(TOM)["item"].nunique().tolist() == [3, 3]
    per_story = df.groupby("item").agg(lengths=(CONTEXT, "nunique"), eps=("eps", "nunique"))
    assert (per_story["lengths"] == 3).all() and (per_story["eps"] == 1).all()
    between = simulate_questions(d, Params(7e-5, 1.0, 2e-4, 1.0), seed=1, latent=True,
                                 shared_items=True, items_per_cell=3)
    assert between.groupby("item")[CONTEXT].nunique().max() == 1
    with pytest.raises(ValueError, match="within_story=True needs latent=True and shared_items"):
        simulate_questions(d, Params(7e-5, 1.0, 2e-4, 1.0), latent=True, within_story=True)


def test_story_design_is_checked_and_named():
    with pytest.raises(ValueError, match="story_design must be 'between' or 'within', got "
                                         "'withn'.*within"):
        PowerSpec(story_design="withn")
    assert PowerSpec(story_design="within").to_dict()["story_design"] == "within"
    assert PowerSpec.from_dict({"story_design": "within"}).story_design == "within"


def _glmm_studies(within: bool, alpha: float, replicates: int) -> dict[str, np.ndarray]:
    """``replicates`` studies of the paper's 5 lengths × 3 orders, 5 LLMs and 5 stories of 2
    questions per cell, σ = 1 (the story variance on the logit scale), each fitted with
    (1 | llm) + (1 | item) inside the compiled program."""
    d = paper_design().with_(n_per_cell=10, capability=(0.6, 0.8, 1.0, 1.2, 1.4))
    size = StudySize(n=10, items=5, n_llms=5, within_story=within)
    run = study_program(d, size, (parse_test("glmm-wald:alpha"),), "exact")
    R, L = replicates, 5
    theta = {"alpha": np.full((R, L), alpha), "gamma": np.full((R, L), PAPER_PARAMS.gamma),
             "delta": np.zeros((R, L)), "sigma": np.full((R, L), 1.0),
             "capability": np.broadcast_to(np.asarray(d.capability), (R, L)).copy()}
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(11 + within + (alpha == 0)), R)
        out = jax.device_get(run(keys, {k: jax.numpy.asarray(v) for k, v in theta.items()},
                                 jax.numpy.asarray(10.0)))
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.slow
def test_within_story_glmm_narrows_the_context_interval():
    """Monte Carlo, story variance 1 on the logit scale, 100 studies each: the within-story
    design's Wald interval for the context effect α is narrower than the between-story
    design's (mean standard error, and the spread of the estimates), and its estimate is
    unbiased (−β₁ scaled back is α)."""
    i = COEF["alpha"]
    alpha = PAPER_PARAMS.alpha
    between = _glmm_studies(False, alpha, 100)
    within = _glmm_studies(True, alpha, 100)
    ok_b, ok_w = between["glmm_ok"], within["glmm_ok"]
    assert ok_b.mean() > 0.98 and ok_w.mean() > 0.98
    se_b = np.mean(between["glmm_se"][ok_b, i])
    se_w = np.mean(within["glmm_se"][ok_w, i])
    sd_b = np.std(between["glmm_beta"][ok_b, i])
    sd_w = np.std(within["glmm_beta"][ok_w, i])
    assert se_w < 0.8 * se_b and sd_w < 0.8 * sd_b, (se_w, se_b, sd_w, sd_b)
    est = -within["glmm_beta"][ok_w, i] * SCALE[i]
    assert abs(est.mean() - alpha) < 3 * est.std() / np.sqrt(est.size)


@pytest.mark.slow
def test_within_story_glmm_keeps_its_level():
    """At α = 0 the within-story design's Wald test of α rejects 5 % ± 2 Monte Carlo
    standard errors of 1,000 studies (story variance 1)."""
    i = COEF["alpha"]
    null = _glmm_studies(True, 0.0, 1000)
    ok = null["glmm_ok"]
    z = null["glmm_beta"][ok, i] / null["glmm_se"][ok, i]
    rate = np.mean(np.abs(z) > scipy.stats.norm.isf(0.025))
    mc_se = np.sqrt(0.05 * 0.95 / ok.sum())
    assert abs(rate - 0.05) < 2 * mc_se, (rate, mc_se)


def test_power_takes_the_story_design_and_records_it():
    small = Design((Factor(CONTEXT, CTX), Factor(TOM, TOMS)), 4, (0.8, 1.0, 1.2))
    res = tomstats.power(small, along={"items_per_cell": [2]}, tests=["rm-anova:context_length"],
                         replicates=20, story_design="within", progress=False)
    assert res.data.attrs["story_design"] == "within"
    assert res.frame()["n_fits"].tolist() == [20]
