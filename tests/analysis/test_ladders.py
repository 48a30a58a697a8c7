"""Length ladders (one story told at every context length): the ANOVA with the story as its
unit against statsmodels ``AnovaRM`` and pingouin's ``rm_anova``/``mixed_anova``, the
within-story length effect against SciPy's paired t test, the ToM effect adjusted for length
against statsmodels' cluster-robust least squares and its closed form, and the refusals of a
log that has no ladders or an incomplete one."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import scipy.stats
import statsmodels.formula.api as smf
from _ladders import ladder_log
from _shipped import SHIPPED_LOG
from statsmodels.stats.anova import AnovaRM

from tomstats.analysis.ladders import (
    adjusted_tom_effect,
    check_ladders,
    length_effects,
    story_layout,
    story_unit_factors,
)
from tomstats.analysis.log_anova import log_anova
from tomstats.analysis.table import read_evaluation
from tomstats.cli import main

RTOL = 1e-9


@pytest.fixture(scope="module")
def crossed() -> pd.DataFrame:
    """12 stories × 3 lengths × 3 orders × 3 LLMs × 2 questions: order within story."""
    return ladder_log(12, seed=1)


@pytest.fixture(scope="module")
def nested() -> pd.DataFrame:
    """18 stories, each at one ToM order and every length (the simulator's ladder design)."""
    return ladder_log(18, order_design="between", seed=2)


def _story_means(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby(["story_id", "context_words", "tom_order"], as_index=False)[
        "correct"].mean()


def _pg_names(table: pd.DataFrame) -> pd.DataFrame:
    """pingouin's columns under one spelling across its versions (``p-unc``/``p_unc``,
    ``p-GG-corr``/``p_GG_corr``)."""
    return table.rename(columns=lambda c: {"p-unc": "p_unc", "p-GG-corr": "p_gg",
                                           "p_GG_corr": "p_gg"}.get(c, c))


# --------------------------------------------------------------------------- layout, factors


def test_layout_tells_crossed_nested_and_between_story_logs(crossed, nested):
    c, n = story_layout(crossed), story_layout(nested)
    assert (c.n_stories, c.n_ladders, c.n_complete, c.order_design) == (12, 12, 12, "within")
    assert c.lengths == (200, 1000, 5000) and c.orders == (0, 1, 2)
    assert (n.n_stories, n.n_ladders, n.order_design) == (18, 18, "between")
    assert story_unit_factors(crossed) == ([], ["context_words", "tom_order"])
    assert story_unit_factors(nested) == (["tom_order"], ["context_words"])
    shipped = story_layout(read_evaluation(SHIPPED_LOG))  # 100 stories, each at one length
    assert (shipped.n_stories, shipped.n_ladders, shipped.has_ladders) == (100, 0, False)


# --------------------------------------------------------------------------- ANOVA, story unit


def test_story_unit_anova_equals_anova_rm_and_pingouin(crossed):
    tab = log_anova(crossed, unit="story").set_index("source")
    ref = AnovaRM(crossed, "correct", "story_id", within=["context_words", "tom_order"],
                  aggregate_func="mean").fit().anova_table
    for src in ("context_words", "tom_order", "context_words:tom_order"):
        np.testing.assert_allclose(tab.loc[src, "F"], ref.loc[src, "F Value"], rtol=RTOL)
        np.testing.assert_allclose(tab.loc[src, "DF_error"], ref.loc[src, "Den DF"])
        np.testing.assert_allclose(tab.loc[src, "p"], ref.loc[src, "Pr > F"], rtol=1e-7)
    # pingouin: Greenhouse–Geisser ε, the corrected p the table leads with, generalized η²
    pgt = _pg_names(pg.rm_anova(_story_means(crossed), dv="correct",
                                within=["context_words", "tom_order"], subject="story_id",
                                correction=True).set_index("Source"))
    names = {"context_words": "context_words", "tom_order": "tom_order",
             "context_words:tom_order": "context_words * tom_order"}
    for src, pg_src in names.items():
        np.testing.assert_allclose(tab.loc[src, "generalized_eta2"], pgt.loc[pg_src, "ng2"],
                                   rtol=1e-7)
        np.testing.assert_allclose(tab.loc[src, "eps_gg"], pgt.loc[pg_src, "eps"], rtol=1e-7)
        np.testing.assert_allclose(tab.loc[src, "p_corrected"], pgt.loc[pg_src, "p_gg"],
                                   rtol=1e-6)
    assert tab.attrs["subject"] == "story_id" and tab.attrs["n_subjects"] == 12
    assert tab.attrs["within"] == ["context_words", "tom_order"]


def test_story_unit_with_order_between_stories_equals_mixed_anova(nested):
    tab = log_anova(nested, unit="story").set_index("source")
    ref = _pg_names(pg.mixed_anova(_story_means(nested), dv="correct", within="context_words",
                                   between="tom_order", subject="story_id").set_index("Source"))
    for src, pg_src in (("tom_order", "tom_order"), ("context_words", "context_words"),
                        ("tom_order:context_words", "Interaction")):
        for ours, theirs in (("F", "F"), ("p", "p_unc"), ("SS", "SS"), ("DF", "DF1"),
                             ("DF_error", "DF2"), ("partial_eta2", "np2")):
            np.testing.assert_allclose(tab.loc[src, ours], ref.loc[pg_src, theirs],
                                       rtol=1e-7, err_msg=f"{src} {ours}")


def test_by_model_tables_are_each_models_story_means(crossed):
    tab = log_anova(crossed, unit="story", by="model")
    one = crossed[crossed["model"] == "llm-b"]
    ref = AnovaRM(one, "correct", "story_id", within=["context_words", "tom_order"],
                  aggregate_func="mean").fit().anova_table
    got = tab[tab["model"] == "llm-b"].set_index("source")
    np.testing.assert_allclose(got.loc["tom_order", "F"], ref.loc["tom_order", "F Value"],
                               rtol=RTOL)
    assert list(pd.unique(tab["model"])) == ["llm-a", "llm-b", "llm-c", "(pooled)"]


def test_between_story_log_is_refused():
    """The shipped log tells each story at one length: no ladder to analyse within."""
    with pytest.raises(ValueError, match=r"--unit story: no length ladders in the data: each "
                       r"of the 100 stories \(story_id\) is told at one context length \(e\.g\. "
                       r"story_id='[^']+' only at context_words=\d+\).*leave out --unit story"):
        log_anova(SHIPPED_LOG, unit="story")


def test_incomplete_ladders_and_partial_orders_are_named(crossed):
    gap = crossed[~((crossed["story_id"] == "s03") & (crossed["context_words"] == 5000)
                    & (crossed["tom_order"] == 2))]
    with pytest.raises(ValueError, match=r"story_id='s03' is not observed at "
                       r"context_words=5000, tom_order=2; .* every story in every "
                       r"context_words × tom_order cell .* 11 of 12 stories are complete"):
        log_anova(gap, unit="story")
    one_llm = crossed[~((crossed["story_id"] == "s05") & (crossed["model"] == "llm-c")
                        & (crossed["context_words"] == 200))]
    log_anova(one_llm, unit="story")  # pooled over the LLMs every cell is still there
    with pytest.raises(ValueError, match=r"story_id='s05' is not observed at "
                       r"context_words=200, tom_order=0 \(and 2 more of the 9 cells\) "
                       r"\(in model='llm-c'\)"):
        log_anova(one_llm, unit="story", by="model")
    partial = crossed[~((crossed["story_id"] == "s07") & (crossed["tom_order"] == 1))]
    with pytest.raises(ValueError, match=r"story_id='s07' is asked at tom_order 0, 2 but not "
                       r"1: ToM order is neither within every story"):
        log_anova(partial, unit="story")
    # runner errors leave a cell without an answer: refused as a gap
    errs = crossed.assign(status=np.where((crossed["story_id"] == "s01")
                                          & (crossed["context_words"] == 1000), "error", "ok"))
    with pytest.raises(ValueError, match=r"story_id='s01' is not observed at "
                       r"context_words=1000"):
        log_anova(errs, unit="story")
    with pytest.raises(ValueError, match="not observed"):
        check_ladders(gap, ["context_words", "tom_order"])


@pytest.mark.parametrize("kwargs,message", [
    ({"unit": "stories"}, "--unit must be one of question, model, story, got 'stories'"),
    ({"unit": "story", "subject": "model"}, "--unit story and --subject 'model' both name"),
    ({"unit": "question", "within": ["tom_order"]}, "--unit question takes no --within"),
    ({"unit": "story", "paired": True}, "--unit story with --paired"),
])
def test_bad_unit_options_are_refused(crossed, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        log_anova(crossed, **kwargs)


def test_unit_story_needs_a_story_column(crossed):
    with pytest.raises(ValueError, match=r"--unit story: no column 'story_id' in the data "
                       r"\(did you mean 'story'\?\); map yours to it with --map "
                       r"story_id=story"):
        log_anova(crossed.rename(columns={"story_id": "story"}), unit="story")
    mapped = log_anova(crossed.rename(columns={"story_id": "story"}), unit="story",
                       columns={"story_id": "story"})
    pd.testing.assert_frame_equal(mapped, log_anova(crossed, unit="story"))


def test_unit_model_is_the_llms_as_subjects(crossed):
    a = log_anova(crossed, unit="model")
    b = log_anova(crossed, within=["context_words", "tom_order"], subject="model")
    pd.testing.assert_frame_equal(a.drop(columns="note"), b.drop(columns="note"))


# --------------------------------------------------------------------------- length effect


def test_length_effect_is_the_paired_t_of_each_storys_ends(crossed):
    eff = length_effects(crossed, by=[], level=0.9)
    means = crossed.groupby(["tom_order", "story_id", "context_words"])["correct"].mean()
    for _, row in eff.iterrows():
        k = row["tom_order"]
        short, long = means.loc[(k, slice(None), 200)], means.loc[(k, slice(None), 5000)]
        t = scipy.stats.ttest_rel(long.to_numpy(), short.to_numpy())
        ci = t.confidence_interval(0.9)
        assert row["n_stories"] == 12
        np.testing.assert_allclose(row["difference"], (long.to_numpy() - short.to_numpy())
                                   .mean(), rtol=RTOL)
        np.testing.assert_allclose([row["ci_low"], row["ci_high"], row["p"]],
                                   [ci.low, ci.high, t.pvalue], rtol=1e-9)
        np.testing.assert_allclose(row["acc_longest"] - row["acc_shortest"],
                                   row["difference"], atol=1e-15)
    per = length_effects(crossed)  # default: per LLM
    assert per["model"].tolist() == ["llm-a"] * 3 + ["llm-b"] * 3 + ["llm-c"] * 3


def test_length_effect_uses_stories_told_at_both_ends(crossed):
    drop = crossed[~((crossed["story_id"].isin(["s00", "s01"]))
                     & (crossed["context_words"] == 5000) & (crossed["tom_order"] == 0))]
    eff = length_effects(drop, by=[]).set_index("tom_order")
    assert eff["n_stories"].tolist() == [10, 12, 12]
    lone = drop[drop["story_id"].isin(["s00", "s02"]) & (drop["tom_order"] == 0)]
    one = length_effects(lone, by=[]).set_index("tom_order")
    assert one.loc[0, "n_stories"] == 1 and np.isnan(one.loc[0, "ci_low"])
    with pytest.raises(ValueError, match="no length ladders"):
        length_effects(SHIPPED_LOG)


# --------------------------------------------------------------------------- adjusted effect


def _statsmodels_cluster(df: pd.DataFrame, formula: str, level: float = 0.95):
    groups = pd.factorize(df["story_id"])[0]
    return smf.ols(formula, df).fit(cov_type="cluster", cov_kwds={"groups": groups},
                                    use_t=True), level


@pytest.mark.parametrize("drop", [0.0, 0.15])
def test_adjusted_effect_equals_statsmodels_cluster_ols(crossed, drop):
    """Balanced and with 15 % of the rows left out at random (an unbalanced log)."""
    rng = np.random.default_rng(5)
    df = crossed[rng.random(len(crossed)) >= drop].reset_index(drop=True)
    adj = adjusted_tom_effect(df, level=0.9).set_index("tom_order")
    fit = smf.ols("correct ~ C(tom_order) + C(context_words) + C(model)", df).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(df["story_id"])[0]}, use_t=True)
    ci = fit.conf_int(alpha=0.1)
    for k in (1, 2):
        name = f"C(tom_order)[T.{k}]"
        np.testing.assert_allclose(adj.loc[k, "estimate"], fit.params[name], rtol=1e-9)
        np.testing.assert_allclose(adj.loc[k, "se"], fit.bse[name], rtol=1e-9)
        np.testing.assert_allclose([adj.loc[k, "ci_low"], adj.loc[k, "ci_high"]],
                                   ci.loc[name].to_numpy(), rtol=1e-9)
        np.testing.assert_allclose(adj.loc[k, "p"], fit.pvalues[name], rtol=1e-7)
        means = df.groupby("tom_order")["correct"].mean()
        np.testing.assert_allclose(adj.loc[k, "unadjusted"], means[k] - means[0], rtol=1e-12)
    assert adj["n_clusters"].tolist() == [12, 12] and adj.attrs["cluster"] == "story_id"


def test_adjusted_effect_in_a_full_ladder_is_the_within_story_contrast(crossed):
    """Closed form: the mean over stories of d_s = mean over lengths of the story's order
    contrast, with the paired t interval of the d_s scaled by sqrt((N-1)/(N-K))."""
    adj = adjusted_tom_effect(crossed).set_index("tom_order")
    cells = crossed.groupby(["story_id", "context_words", "tom_order"])["correct"].mean()
    wide = cells.unstack("tom_order")
    n, k_cols = len(crossed), 1 + 2 + 2 + 2
    for k in (1, 2):
        d = (wide[k] - wide[0]).groupby(level="story_id").mean().to_numpy()
        se = d.std(ddof=1) / np.sqrt(d.size) * np.sqrt((n - 1) / (n - k_cols))
        q = scipy.stats.t.ppf(0.975, d.size - 1)
        np.testing.assert_allclose(adj.loc[k, "estimate"], d.mean(), rtol=1e-12)
        np.testing.assert_allclose([adj.loc[k, "ci_low"], adj.loc[k, "ci_high"]],
                                   [d.mean() - q * se, d.mean() + q * se], rtol=1e-9)


def test_adjusted_effect_removes_a_length_confound():
    """Higher orders asked mostly at long lengths: the plain difference of the orders
    mixes in the length effect, the adjusted one recovers the order effect of the model
    the data were drawn from (statsmodels' fit of the same formula agrees)."""
    rng = np.random.default_rng(7)
    rows = []
    for s in range(300):
        u = rng.normal(0, 0.05)
        for c, w in ((200, 0.0), (5000, -0.3)):
            for t in (0, 1):
                reps = 8 if (t == 1) == (c == 5000) else 2  # order 1 mostly at 5000 words
                p = 0.8 - 0.1 * t + w + u
                rows += [(f"s{s}", c, t, int(rng.random() < p)) for _ in range(reps)]
    df = pd.DataFrame(rows, columns=["story_id", "context_words", "tom_order", "correct"])
    adj = adjusted_tom_effect(df).set_index("tom_order").loc[1]
    assert adj["unadjusted"] < -0.25  # the confound: order 1 looks 0.28 worse
    assert adj["ci_low"] < -0.1 < adj["ci_high"] and abs(adj["estimate"] + 0.1) < 0.03
    fit = smf.ols("correct ~ C(tom_order) + C(context_words)", df).fit()
    np.testing.assert_allclose(adj["estimate"], fit.params["C(tom_order)[T.1]"], rtol=1e-9)


def test_adjusted_effect_per_model_and_without_clusters(crossed):
    adj = adjusted_tom_effect(crossed, by="model")
    assert adj["model"].tolist() == ["llm-a", "llm-a", "llm-b", "llm-b", "llm-c", "llm-c",
                                     "(pooled)", "(pooled)"]
    pooled = adjusted_tom_effect(crossed)
    np.testing.assert_allclose(adj[adj["model"] == "(pooled)"]["estimate"],
                               pooled["estimate"], rtol=1e-12)
    one = crossed[crossed["model"] == "llm-a"]
    fit = smf.ols("correct ~ C(tom_order) + C(context_words)", one).fit(cov_type="HC1")
    rows = adjusted_tom_effect(one.drop(columns=["story_id", "item_id"])).set_index(
        "tom_order")
    assert rows.attrs["cluster"] is None and rows["n_clusters"].tolist() == [len(one)] * 2
    np.testing.assert_allclose(rows.loc[2, "se"], fit.bse["C(tom_order)[T.2]"], rtol=1e-9)


def test_adjusted_effect_refuses_a_confounded_or_one_order_log():
    df = pd.DataFrame({"story_id": ["a", "b", "c", "d"] * 2, "context_words": [200] * 4
                       + [5000] * 4, "tom_order": [0] * 4 + [1] * 4,
                       "correct": [1, 0, 1, 1, 0, 0, 1, 0]})
    with pytest.raises(ValueError, match="ToM order and context length are confounded"):
        adjusted_tom_effect(df)
    with pytest.raises(ValueError, match="tom_order has the single value 0"):
        adjusted_tom_effect(df[df["tom_order"] == 0])


# --------------------------------------------------------------------------- command line


def test_cli_anova_unit_story_and_summarize_ladders(crossed, tmp_path, capsys):
    path = tmp_path / "ladder.csv"
    crossed.to_csv(path, index=False)
    assert main(["anova", str(path), "--unit", "story", "--out", str(tmp_path / "a.csv")]) == 0
    out = capsys.readouterr().out
    assert "repeated measures within story_id" in out
    assert ("12 stories (story_id) as the unit, each observed in every cell (context_words "
            "within, tom_order within)") in out
    written = pd.read_csv(tmp_path / "a.csv").set_index("source")
    want = log_anova(crossed, unit="story").set_index("source")
    np.testing.assert_allclose(written["F"], want["F"], rtol=1e-12)
    assert main(["summarize", str(path), "--by", "none"]) == 0
    out = capsys.readouterr().out
    assert "Within-story length effect: accuracy at 5000 minus at 200 words" in out
    eff = length_effects(crossed, by=[]).set_index("tom_order")
    assert f"{eff.loc[1, 'difference']:+.3f}" in out
    assert main(["summarize", str(SHIPPED_LOG)]) == 0  # no ladders: no such table
    assert "Within-story" not in capsys.readouterr().out
    assert main(["anova", str(SHIPPED_LOG), "--unit", "story"]) == 2
    err = capsys.readouterr().err
    assert "no length ladders" in err and err.count("\n") == 1


@pytest.mark.slow
def test_simulators_ladder_log_is_analysed_with_story_as_unit():
    """The simulator's within-story design (a story at one order, told at every length with
    one effect) read as a log: ToM order between stories, length within them, as pingouin's
    mixed ANOVA of the story means."""
    from tomstats.design import CONTEXT, TOM, Design, Factor
    from tomstats.model import Params
    from tomstats.simulation.simulator import simulate_questions

    d = Design((Factor(CONTEXT, (200.0, 1000.0, 5000.0)), Factor(TOM, (0.0, 1.0, 2.0))), 8,
               (0.8, 1.0, 1.2))
    sim = simulate_questions(d, Params(7e-5, 1.0, 2e-4, 1.0), seed=1, latent=True,
                             shared_items=True, items_per_cell=4, within_story=True)
    log = sim.rename(columns={"item": "story_id", CONTEXT: "context_words",
                              "capability": "model"})
    assert story_unit_factors(log) == (["tom_order"], ["context_words"])
    tab = log_anova(log, unit="story").set_index("source")
    ref = _pg_names(pg.mixed_anova(_story_means(log), dv="correct", within="context_words",
                                   between="tom_order", subject="story_id").set_index("Source"))
    np.testing.assert_allclose(tab.loc["context_words", "F"], ref.loc["context_words", "F"],
                               rtol=1e-7)
    np.testing.assert_allclose(tab.loc["tom_order", "p"], ref.loc["tom_order", "p_unc"],
                               rtol=1e-7)
