"""Paired scoring: a (model, pair_id, order) unit is right only when every version is.

References: a reality tracker (right on true beliefs, wrong on false ones) scores 0 and a
perfect responder 1, on constructed data and on items of the current generator run through
the runner; the paired accuracy equals a separate pandas computation; incomplete units are
dropped and counted (or refused); older logs still load, unpaired.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shipped import REPO, SHIPPED_LOG, log_without_pairs

from tomstats.analysis.log_anova import log_anova
from tomstats.analysis.paired import paired_summary, paired_units
from tomstats.analysis.row_anova import anova
from tomstats.analysis.summary import summarize
from tomstats.cli import main
from tomstats.evaluate import evaluate, read_log
from tomstats.evaluate.baselines import previous_location
from tomstats.glmm.data import paired_table, read_table
from tomstats.stories import build_design_items, write_items


def _frame(rule, n_pairs: int = 6, models: tuple[str, ...] = ("m",)) -> pd.DataFrame:
    """Two versions (true, false belief) per pair; ``rule(model, status)`` -> correct."""
    rows = []
    for m in models:
        for p in range(n_pairs):
            for order in (1, 2):
                for status in ("true", "false"):
                    rows.append({"model": m, "pair_id": f"p{p}", "tom_order": order,
                                 "context_words": (200, 1000)[p % 2], "sample": 0,
                                 "belief_status": status, "item_id": f"p{p}-o{order}-{status}",
                                 "n_candidates": 6, "status": "ok",
                                 "correct": int(rule(m, status))})
    return pd.DataFrame(rows)


def test_reality_tracker_scores_0_and_a_perfect_model_1() -> None:
    df = _frame(lambda m, s: s == "true" if m == "reality" else True,
                models=("reality", "perfect"))
    # per question the reality tracker is at 0.5: right on every true belief
    plain = summarize(df)
    assert plain.groupby("model")["accuracy"].mean().to_dict() == {"perfect": 1.0,
                                                                   "reality": 0.5}
    table = paired_summary(df)
    acc = table.groupby("model")["accuracy"].agg(["min", "max"])
    assert acc.loc["reality"].tolist() == [0.0, 0.0]
    assert acc.loc["perfect"].tolist() == [1.0, 1.0]
    assert table["chance"].tolist() == pytest.approx([1 / 36] * len(table))  # (1/6)(1/6)
    assert summarize(df, paired=True).equals(table)


@pytest.fixture(scope="module")
def generated_log(tmp_path_factory) -> tuple[Path, list]:
    """Items of the current generator, paired here (it does not pair its stories itself):
    the same seed told with true beliefs only and with false beliefs only gives, story by
    story, one item id, length and order in both belief statuses (the plots differ; what is
    tested is the scoring, not the stories); the runner's heuristic baselines answer them."""
    tmp = tmp_path_factory.mktemp("paired")
    kw = {"contexts": (200, 500), "orders": (1, 2), "question_types": ("tom",)}
    tb = build_design_items(4, seed=5, true_belief_share=1, **kw)
    fb = build_design_items(4, seed=5, true_belief_share=0, **kw)
    items = []
    for t, f in zip(tb, fb, strict=True):
        assert (t.item_id, t.tom_order, t.context_words) == (f.item_id, f.tom_order,
                                                              f.context_words)
        assert (t.belief_status, f.belief_status) == ("true", "false")
        items += [dataclasses.replace(t, item_id=t.item_id + "-t", pair_id=t.item_id),
                  dataclasses.replace(f, item_id=f.item_id + "-f", pair_id=t.item_id)]
    write_items(tmp / "items.jsonl", items)
    log = tmp / "log.jsonl"
    for name in ("oracle", "recency"):
        evaluate(items, REPO / "models" / f"heuristic-{name}.toml", log, progress=False,
                 cache_dir=None)
    return log, items


def test_generated_items_reality_tracker_0_oracle_1(generated_log) -> None:
    log, items = generated_log
    df = read_log(log)
    assert set(df["pair_id"]) == {it.pair_id for it in items}
    table = paired_summary(log)
    by_model = table.groupby("model")["accuracy"].agg(["min", "max"])
    assert by_model.loc["heuristic-recency"].tolist() == [0.0, 0.0]
    assert by_model.loc["heuristic-oracle"].tolist() == [1.0, 1.0]
    assert table["n_units"].sum() == 2 * len(items) // 2
    assert table.attrs["n_incomplete"] == 0 and table.attrs["n_unpaired_rows"] == 0


def test_previous_location_is_the_place_left_on_the_last_move(generated_log) -> None:
    log, items = generated_log
    df = read_log(log).drop_duplicates("item_id").set_index("item_id")
    for it in items:
        pos = dict.fromkeys(it.metadata["storyboard"]["characters"],
                            it.metadata["storyboard"]["start"])
        before = None
        for _t, actor, place, _src in it.metadata["events"]:  # replayed, not read off
            if actor == it.target:
                before = pos[actor]
            pos[actor] = place
        assert previous_location(it) == before
        assert df.loc[it.item_id, "previous_location"] == before
        assert df.loc[it.item_id, "n_candidates"] == len(it.candidates)
    # the previous place is often a false belief's answer: paired, it cannot score
    fb = [it for it in items if it.belief_status == "false"]
    assert sum(previous_location(it) == it.answer for it in fb) > 0


def test_paired_accuracy_equals_a_pandas_groupby() -> None:
    rng = np.random.default_rng(7)
    rows = []
    for m in ("a", "b", "c"):
        for p in range(40):
            ctx = (200, 500, 2000)[p % 3]
            n_cand = int(rng.integers(3, 8))
            for order in (1, 2):
                for s in (0, 1):
                    for status in ("true", "false"):
                        answered = rng.random() > 0.05
                        rows.append({"model": m, "pair_id": f"s{p}", "tom_order": order,
                                     "context_words": ctx, "sample": s,
                                     "belief_status": status, "n_candidates": n_cand,
                                     "item_id": f"s{p}-{order}-{status}",
                                     "status": "ok" if answered else "error",
                                     "correct": (int(rng.random() < 0.6) if answered
                                                 else None)})
    df = pd.DataFrame(rows)
    got = paired_summary(df, by=["model"])
    # separately: units complete when both versions were answered; right when both are
    g = df.assign(ok=df["status"].eq("ok"), right=df["correct"].eq(1)).groupby(
        ["model", "pair_id", "tom_order", "sample"])
    u = g.agg(ctx=("context_words", "first"), ok=("ok", "all"), right=("right", "all"),
              m=("n_candidates", "first")).reset_index()
    done = u[u["ok"]]
    want = done.groupby(["model", "ctx", "tom_order"]).agg(
        n=("right", "size"), k=("right", "sum"),
        chance=("m", lambda m: float(np.mean(1.0 / m.to_numpy() ** 2)))).reset_index()
    bad = u[~u["ok"]].groupby(["model", "ctx", "tom_order"]).size()
    assert len(got) == len(want)
    for (_, r), (_, w) in zip(got.iterrows(), want.iterrows(), strict=True):
        assert (r["model"], r["context_words"], r["tom_order"]) == (w["model"], w["ctx"],
                                                                     w["tom_order"])
        assert (r["n_units"], r["n_correct"]) == (w["n"], w["k"])
        assert r["accuracy"] == pytest.approx(w["k"] / w["n"])
        assert r["chance"] == pytest.approx(w["chance"])
        assert r["n_incomplete"] == bad.get((w["model"], w["ctx"], w["tom_order"]), 0)
    assert got.attrs["n_incomplete"] == int((~u["ok"]).sum()) > 0
    # the ANOVA on paired units: the row ANOVA of the units computed here
    units = done.rename(columns={"ctx": "context_words"}).assign(
        correct=done["right"].astype(int))
    a = log_anova(df, paired=True).set_index("source")
    b = anova(units, "correct", ["context_words", "tom_order"]).set_index("source")
    assert a.attrs["n_rows"] == len(units) and a.attrs["n_incomplete"] == got.attrs[
        "n_incomplete"]
    np.testing.assert_allclose(a["F"].dropna(), b["F"].dropna(), rtol=1e-10)
    # the GLMM's rows: one per complete unit, item = the pair
    rows_ = paired_table(df)
    assert len(rows_) == len(units) and set(rows_["item"]) <= set(df["pair_id"])
    assert rows_["correct"].sum() == units["correct"].sum()


def test_incomplete_units_are_dropped_and_counted(tmp_path) -> None:
    df = _frame(lambda m, s: True)
    lost = df.index[(df["pair_id"] == "p0") & (df["tom_order"] == 1)
                    & (df["belief_status"] == "false")]
    df.loc[lost, ["status", "correct"]] = ["error", None]  # a version without an answer
    df = df.drop(df.index[(df["pair_id"] == "p1") & (df["tom_order"] == 2)
                          & (df["belief_status"] == "true")])  # a version missing
    units = paired_units(df)
    assert len(units) == 2 * 6 - 2
    assert units.attrs["n_incomplete"] == 2
    assert units.attrs["incomplete_by_reason"] == {"a version without an answer": 1,
                                                   "one version only": 1}
    table = paired_summary(df)
    cell = table.set_index(["context_words", "tom_order"])
    assert cell.loc[(200, 1), "n_incomplete"] == 1 and cell.loc[(200, 1), "n_units"] == 2
    assert cell.loc[(1000, 2), "n_incomplete"] == 1
    with pytest.raises(ValueError, match=r"2 of 12 units are incomplete, e\.g\. pair_id="):
        paired_units(df, incomplete="raise")
    # CLI: the count is printed
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    assert main(["summarize", str(path), "--paired"]) == 0


def test_incomplete_count_printed(tmp_path, capsys) -> None:
    df = _frame(lambda m, s: s == "true")
    df = df.iloc[1:]
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    assert main(["summarize", str(path), "--paired"]) == 0
    out = capsys.readouterr().out
    assert "11 paired units; 1 incomplete unit(s) left out (1 with one version only)" in out
    assert main(["anova", str(path), "--paired"]) == 0
    assert "11 paired units; 1 incomplete unit(s) left out" in capsys.readouterr().out


def test_questions_that_ask_no_belief_are_not_units() -> None:
    df = _frame(lambda m, s: True)
    reality = df[df["tom_order"] == 1].assign(tom_order=0, belief_status="none",
                                              item_id=lambda d: d["item_id"] + "-r")
    units = paired_units(pd.concat([df, reality], ignore_index=True))
    assert len(units) == len(paired_units(df)) and units.attrs["n_incomplete"] == 0
    assert units.attrs["n_unpaired_rows"] == len(reality)
    with pytest.raises(ValueError, match="no belief question has a pair_id"):
        paired_units(reality)


def test_versions_must_share_their_cell_and_not_repeat() -> None:
    df = _frame(lambda m, s: True)
    bad = df.copy()
    bad.loc[0, "context_words"] = 500
    with pytest.raises(ValueError, match=r"pair_id='p0', tom_order=1 differ in "
                                         r"'context_words' \(the versions of a pair"):
        paired_units(bad)
    dup = pd.concat([df, df.iloc[:1]], ignore_index=True)
    with pytest.raises(ValueError, match=r"item_id 'p0-o1-true' appears twice"):
        paired_units(dup)


def test_old_logs_load_unpaired_and_paired_scores_say_why(tmp_path, capsys) -> None:
    old = log_without_pairs(tmp_path / "old.jsonl")
    df = read_log(old)
    assert (df["pair_id"] == "").all() and df["previous_location"].isna().all()
    assert df["last_location"].notna().any()
    with pytest.raises(ValueError, match="no belief question has a pair_id"):
        paired_summary(old)
    assert main(["summarize", str(old), "--paired"]) == 2
    assert "no belief question has a pair_id" in capsys.readouterr().err


def test_the_shipped_log_is_scored_in_pairs() -> None:
    """The shipped SmolLM2 log's 100 pairs: a pair counts right only when both versions are,
    so its paired accuracy per (order, length) is the share of pairs with both right, counted
    here by hand; the reality tracker scores 0 on every pair."""
    df = read_log(SHIPPED_LOG)
    tom = df[df["pair_id"] != ""]
    both = tom.groupby(["tom_order", "context_words", "pair_id"])["correct"].min()
    want = both.groupby(["tom_order", "context_words"]).agg(["mean", "size"])
    got = paired_summary(SHIPPED_LOG).set_index(["tom_order", "context_words"])
    assert (want["size"] == 10).all() and len(want) == 10
    np.testing.assert_allclose(got.loc[want.index, "accuracy"], want["mean"])
    reality = paired_summary(tom.assign(correct=(tom["last_location"] == tom["answer"])
                                        .astype(int)))
    assert (reality["accuracy"] == 0).all()


@pytest.mark.parametrize("reader", ["read_log", "stream"])
def test_a_pair_id_that_is_not_a_string_is_refused(tmp_path, generated_log, reader) -> None:
    log, _ = generated_log
    lines = log.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["pair_id"] = 12
    lines[3] = json.dumps(rec)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    from tomstats.analysis.log_stream import read_log_stream

    read = read_log if reader == "read_log" else read_log_stream
    with pytest.raises(ValueError, match=r"bad.jsonl:4: field 'pair_id' must be a string, "
                                         r"got 12"):
        read(bad)


def test_glmm_rows_from_a_log(generated_log) -> None:
    log, items = generated_log
    rows = read_table(log, paired=True)
    assert len(rows) == len(items)  # two models × (items / 2) pairs
    assert set(rows.columns) >= {"correct", "model", "item", "tom_order", "context_words"}
    assert rows.groupby("model")["correct"].mean().to_dict() == {"heuristic-oracle": 1.0,
                                                                "heuristic-recency": 0.0}
    assert rows.attrs["paired"]["n_units"] == len(items)


def test_report_shows_paired_scores_and_baselines(generated_log, tmp_path) -> None:
    from tomstats.report.log import SECTIONS, write_log_report

    log, _ = generated_log
    text = write_log_report(log, tmp_path / "md", "md").read_text(encoding="utf-8")
    i = text.index(f"## {SECTIONS[2]}")
    section = text[i:text.index("## ", i + 3)]
    one = read_log(log).query("model == 'heuristic-oracle'")
    cells = paired_summary(one.assign(
        correct=(one["last_location"] == one["answer"]).astype(int)))
    assert (cells["accuracy"] == 0).all()  # the reality tracker, by hand: 0 paired
    for model in ("heuristic-oracle", "heuristic-recency"):
        for base in ("reality tracker", "previous place"):
            rows = re.findall(rf"^\| {model} · {base} \| (\d) \| (.*) \|$", section, re.M)
            assert len(rows) == 4  # orders 1, 2 in the per-question and the paired table
        paired_rows = re.findall(rf"^\| {model} · reality tracker \| \d \| (.*) \|$",
                                 section, re.M)[2:]
        assert all(c.startswith("0.000 [") for r in paired_rows for c in r.split(" | "))
    oracle = re.findall(r"^\| heuristic-oracle \| \d \| (.*) \|$", section, re.M)[-2:]
    assert all(c.startswith("1.000 [") for r in oracle for c in r.split(" | "))
    assert "chance of a paired unit" in section


def test_report_of_an_old_log_names_what_is_missing(tmp_path) -> None:
    from tomstats.report.log import write_log_report

    old = log_without_pairs(tmp_path / "old.jsonl")
    text = write_log_report(old, tmp_path / "md", "md", n_boot=0).read_text("utf-8")
    assert "No previous place baseline: the log does not record previous_location" in text
    assert "No paired scores: no question of this log carries a pair_id" in text
    assert "| smollm2-local · reality tracker | 1 |" in text


def test_fit_paired_on_units(tmp_path, capsys) -> None:
    """``tomstats fit --paired``: the GLMM sees one row per unit (item = the pair)."""
    rng = np.random.default_rng(3)
    rows = []
    for p in range(60):
        for order in (1, 2):
            for status in ("true", "false"):
                rows.append({"model": "m", "pair_id": f"s{p}", "tom_order": order,
                             "context_words": (200, 1000, 5000)[p % 3],
                             "belief_status": status, "item_id": f"s{p}-{order}-{status}",
                             "correct": int(rng.random() < (0.8 if order == 1 else 0.6))})
    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    out = tmp_path / "fit.json"
    assert main(["fit", str(path), "--paired", "--backend", "laplace", "--model",
                 "correct ~ tom_order + (1 | item)", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "120 paired units" in err
    from tomstats.glmm import LaplaceFit

    fit = LaplaceFit.from_json(out)
    assert fit.n_obs == 120 and fit.groups == ("item",) and fit.n_levels == (60,)
    # the units by pandas; with the story variance at its boundary (0 here) the ML fixed
    # effects are the logistic regression's (statsmodels)
    import statsmodels.api as sm

    df = pd.DataFrame(rows)
    units = df.groupby(["pair_id", "tom_order"])["correct"].min().reset_index()
    ref = sm.Logit(units["correct"], sm.add_constant(units["tom_order"])).fit(disp=0)
    assert np.max(fit.sd) < 1e-3
    np.testing.assert_allclose(fit.fixef().to_numpy(), ref.params.to_numpy(), rtol=1e-3)
