"""GLMMs of a length-ladder log: the ``story`` grouping (from the log's ``story_id``) crossed
with context length, ToM order and the LLMs, fitted by Laplace against lme4's ``glmer``.

The reference is ``tests/reference/lme4_ladder.json``, written by
``tests/reference/lme4_ladder.R`` (run afresh when R with lme4 is here; see
``tests/glmm/conftest.py``): 4 LLMs × 16 stories, each story told at 200, 1000 and 5000 words
and asked at orders 0–2, the story's effect shared by all its tellings. The data frame
fitted here has the log's ``story_id`` only: ``story`` and ``log_context`` are the columns
:func:`tomstats.glmm.prepare_data` makes. Tolerances as in ``tests/glmm/test_laplace.py``:
fixed effects and SEs within 1e-3, SDs within 1e-2 relative, log-likelihood within 1e-3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tomstats import glmm
from tomstats.glmm.data import _read_table, fit_columns, prepare_data

FORMULA = "correct ~ tom_order + log_context + (1 | model) + (1 | story)"


@pytest.fixture(scope="module")
def reference(lme4_ladder_reference) -> dict:
    return lme4_ladder_reference


@pytest.fixture(scope="module")
def ladder(reference) -> pd.DataFrame:
    """The log lme4 fitted: model, story_id, context_words, tom_order, correct."""
    return pd.DataFrame(reference["ladder_intercepts"]["data"])


@pytest.fixture(scope="module")
def fitted(ladder):
    return glmm.fit(ladder, FORMULA, backend="laplace")


def _varcorr(case: dict) -> dict[str, float]:
    vc = case["varcorr"]
    return {("model" if g == "model_f" else g, a, b): v for g, a, b, v in
            zip(vc["grp"], vc["var1"], vc["var2"], vc["sdcor"], strict=True)}


def test_story_is_made_from_story_id(ladder):
    df = prepare_data(ladder)
    assert (df["story"] == ladder["story_id"]).all()
    assert df.attrs["derived"]["story"] == "copied from 'story_id'"
    assert df.attrs["source_columns"] == list(ladder.columns)
    own = prepare_data(ladder.assign(story="x"))  # a column of the data's own is kept
    assert (own["story"] == "x").all() and "story" not in own.attrs["derived"]
    assert "story" in glmm.STANDARD_COLUMNS
    needed, optional = fit_columns(FORMULA)
    assert "story" not in needed and "story" in optional


def test_story_crossed_with_length_order_and_llms_matches_lme4(reference, fitted, ladder):
    case = reference["ladder_intercepts"]
    assert case["formula"] == FORMULA and fitted.converged
    assert fitted.groups == ("model", "story") and fitted.n_levels == (4, 16)
    assert fitted.coef_names == ("(Intercept)", "tom_order", "log_context")
    np.testing.assert_allclose(fitted.beta, case["beta"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(fitted.se, case["se"], atol=1e-3, rtol=0)
    ref = _varcorr(case)
    np.testing.assert_allclose(fitted.sd, [ref[("model", "(Intercept)", "")],
                                           ref[("story", "(Intercept)", "")]], rtol=1e-2)
    assert abs(fitted.loglik - case["loglik"]) < 1e-3
    assert fitted.n_rows == len(ladder) == case["n_obs"]


def test_cli_fit_reads_story_id_for_story(reference, fitted, ladder, tmp_path, capsys):
    from tomstats.cli import main

    log = tmp_path / "ladder.csv"
    ladder.assign(unused="x").to_csv(log, index=False)
    read = _read_table(log, model=FORMULA)  # the columns the fit reads: story_id, not unused
    assert "story_id" in read.columns and "unused" not in read.columns
    out = tmp_path / "fit.json"
    assert main(["fit", str(log), "--model", FORMULA, "--backend", "laplace", "--out",
                 str(out)]) == 0
    text = capsys.readouterr().out
    # lme4's line: the groups by number of levels, most first
    assert "Number of obs: 1152, groups:  story, 16; model, 4" in text, text
    back = glmm.LaplaceFit.from_json(out)
    np.testing.assert_allclose(back.beta, fitted.beta, rtol=1e-8)
    renamed = tmp_path / "renamed.csv"
    ladder.rename(columns={"story_id": "passage"}).to_csv(renamed, index=False)
    assert main(["fit", str(renamed), "--model", FORMULA, "--backend", "laplace", "--map",
                 "story=passage", "--out", str(tmp_path / "f2.json")]) == 0
    capsys.readouterr()
    np.testing.assert_allclose(glmm.LaplaceFit.from_json(tmp_path / "f2.json").beta,
                               fitted.beta, rtol=1e-8)


@pytest.mark.slow
def test_llm_slopes_beside_story_intercepts_match_lme4(reference, ladder):
    """An LLM slope of log context with the story intercepts (lme4's random-slope fit)."""
    case = reference["ladder_llm_slopes"]
    fit = glmm.fit(ladder, case["formula"], backend="laplace")
    np.testing.assert_allclose(fit.beta, case["beta"], atol=1e-3, rtol=0)
    np.testing.assert_allclose(fit.se, case["se"], atol=1e-3, rtol=0)
    assert abs(fit.loglik - case["loglik"]) < 1e-3
    vc = fit.varcorr()
    ours = {(g, a, b or ""): v for g, a, b, v in
            zip(vc.group, vc.var1, vc.var2, vc.sdcor, strict=True)}
    for key, v in _varcorr(case).items():
        assert ours[key] == pytest.approx(v, rel=1e-2, abs=1e-3), key
