"""``tomstats.analysis.summary``: counts against an independent reading of the log, Wilson intervals
against statsmodels, the error taxonomy, tables with other column names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shipped import log_with_overflow_errors
from statsmodels.stats.proportion import proportion_confint

from tomstats.analysis.intervals import wilson_interval
from tomstats.analysis.summary import ERROR_COLUMNS, SUMMARY_COLUMNS, TAXONOMY, summarize
from tomstats.stories.taxonomy import ERROR_CATEGORIES


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped SmolLM2 log with its 5,000-word records as context-overflow errors."""
    return log_with_overflow_errors(tmp_path_factory.mktemp("log") / "smollm2.jsonl")


def _raw_log(log: Path) -> pd.DataFrame:
    """The log read with json + pandas only (not tomstats' reader)."""
    with open(log, encoding="utf-8") as fh:
        return pd.DataFrame([json.loads(line) for line in fh if line.strip()])


@pytest.fixture(scope="module")
def cells(log: Path) -> pd.DataFrame:
    return summarize(log)


def test_columns_and_cells(cells: pd.DataFrame) -> None:
    assert list(cells.columns) == ["model", "context_words", "tom_order", *SUMMARY_COLUMNS]
    assert len(cells) == 15  # 5 context lengths × 3 orders, one LLM
    assert cells[["context_words", "tom_order"]].apply(tuple, axis=1).is_monotonic_increasing


def test_counts_equal_an_independent_groupby(cells: pd.DataFrame, log: Path) -> None:
    raw = _raw_log(log)
    keys = ["model", "context_words", "tom_order"]
    ok = raw["status"] == "ok"
    ref = raw.assign(
        n=1, n_answered=ok.astype(int), n_correct=(ok & (raw["correct"] == 1)).astype(int),
        n_errors=(~ok).astype(int),
        first_common_location=(ok & (raw["error_category"] == "first_common_location")),
        recency=(ok & (raw["error_category"] == "last_location")),
        refusal_unparseable=(ok & raw["error_category"].isin(["refusal", "unparseable"])),
        other=(ok & (raw["error_category"] == "other_location")),
    ).groupby(keys)[["n", "n_answered", "n_correct", "n_errors", *ERROR_COLUMNS]].sum()
    got = cells.set_index(keys)[ref.columns]
    pd.testing.assert_frame_equal(got.astype("int64"), ref.astype("int64"), check_names=False)
    assert int(cells["n"].sum()) == 300
    assert int(cells["n_correct"].sum()) == int((raw["correct"] == 1).sum())
    assert cells.attrs["errors_by_reason"] == {"context_overflow": 60}


def test_accuracy_is_correct_over_answered_and_error_cells_have_none(
        cells: pd.DataFrame, log: Path) -> None:
    raw = _raw_log(log)
    ok = raw[raw["status"] == "ok"]
    ref = ok.groupby(["context_words", "tom_order"])["correct"].mean()
    got = cells.set_index(["context_words", "tom_order"])["accuracy"].dropna()
    pd.testing.assert_series_equal(got, ref, check_names=False, rtol=0, atol=1e-12)
    overflow = cells[cells["context_words"] == 5000]
    assert (overflow["n_answered"] == 0).all() and (overflow["n_errors"] == 20).all()
    assert overflow["accuracy"].isna().all() and overflow["ci_low"].isna().all()


def test_wilson_intervals_equal_statsmodels(cells: pd.DataFrame) -> None:
    ans = cells[cells["n_answered"] > 0]
    lo, hi = proportion_confint(ans["n_correct"], ans["n_answered"], alpha=0.05,
                                method="wilson")
    np.testing.assert_allclose(ans["ci_low"], lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ans["ci_high"], hi, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["wilson", "beta"])
@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_interval_functions_equal_statsmodels_on_random_counts(level: float,
                                                               method: str) -> None:
    """Wilson's interval, and the Clopper–Pearson interval simr reports (statsmodels'
    ``method="beta"``), on random counts and at the edges."""
    from tomstats.analysis.intervals import clopper_pearson_interval

    rng = np.random.default_rng(int(level * 100))
    n = rng.integers(1, 400, size=200)
    k = rng.binomial(n, rng.uniform(0, 1, size=200))
    k[:5], k[5:10] = 0, n[5:10]  # the edges
    f = wilson_interval if method == "wilson" else clopper_pearson_interval
    lo, hi = f(k, n, level)
    ref_lo, ref_hi = proportion_confint(k, n, alpha=1 - level, method=method)
    np.testing.assert_allclose(lo, ref_lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, rtol=0, atol=1e-12)


def test_level_changes_the_interval_only(cells: pd.DataFrame, log: Path) -> None:
    narrow = summarize(log, level=0.5)
    pd.testing.assert_series_equal(narrow["accuracy"], cells["accuracy"])
    ans = cells["n_answered"] > 0
    assert (narrow.loc[ans, "ci_high"] - narrow.loc[ans, "ci_low"]
            < cells.loc[ans, "ci_high"] - cells.loc[ans, "ci_low"]).all()


def test_taxonomy_accounts_for_every_answer(cells: pd.DataFrame) -> None:
    total = cells["n_correct"] + cells[list(ERROR_COLUMNS)].sum(axis=1)
    assert (total == cells["n_answered"]).all()
    assert (cells["n_answered"] + cells["n_errors"] == cells["n"]).all()
    # every wrong-answer category of the story generator's taxonomy has a column
    assert set(TAXONOMY) == set(ERROR_CATEGORIES) - {"correct"}
    assert set(TAXONOMY.values()) == set(ERROR_COLUMNS)


def _table(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for m in ("a", "b"):
        for c in (100, 300):
            for t in (0, 1, 2):
                for i in range(7):
                    rows.append({"llm": m, "words": c, "order": t, "ok": int(rng.random() < 0.6),
                                 "item": f"{c}-{t}-{i}"})
    return pd.DataFrame(rows)


def test_table_with_mapped_columns_and_pooling(tmp_path: Path) -> None:
    df = _table(np.random.default_rng(3))
    df.loc[[0, 5], "ok"] = np.nan  # unanswered questions in a table
    df.to_csv(tmp_path / "t.csv", index=False)
    mapping = {"correct": "ok", "model": "llm", "context_words": "words", "tom_order": "order"}
    got = summarize(tmp_path / "t.csv", columns=mapping)
    ref = df.groupby(["llm", "words", "order"])["ok"].agg(["size", "count", "sum"])
    np.testing.assert_array_equal(got["n"], ref["size"])
    np.testing.assert_array_equal(got["n_answered"], ref["count"])
    np.testing.assert_array_equal(got["n_correct"], ref["sum"])
    assert int(got["n_errors"].sum()) == 2
    assert got.attrs["errors_by_reason"] == {"missing correct": 2}
    assert got[list(ERROR_COLUMNS)].isna().all().all()  # no error_category column
    pooled = summarize(df, columns=mapping, by=[])
    assert list(pooled.columns[:2]) == ["context_words", "tom_order"] and len(pooled) == 6
    np.testing.assert_array_equal(pooled["n"], df.groupby(["words", "order"]).size())


@pytest.mark.parametrize(
    ("frame", "kwargs", "message"),
    [
        ({"correct": [1, 0], "context_words": [1, 1], "tom_ordr": [0, 1]}, {},
         "no column 'tom_order' in the data (did you mean 'tom_ordr'?)"),
        ({"correct": ["yes", "no"], "context_words": [1, 1], "tom_order": [0, 1]}, {},
         "column 'correct' must be numeric, found 'yes' in row 0"),
        ({"correct": [1, 2], "context_words": [1, 1], "tom_order": [0, 1]}, {},
         "column 'correct' must be 0/1 (correct or not), found 2 in row 1"),
        ({"correct": [1, 0], "context_words": [1, 1], "tom_order": [0, 1]}, {"by": "modle"},
         "by: no column 'modle'"),
        ({"correct": [1, 0], "context_words": [1, 1], "tom_order": [0, 1]}, {"level": 1.5},
         "level must be a number in (0, 1), got 1.5"),
        ({"correct": [1, 0], "context_words": [1, 1], "tom_order": [0, 1]},
         {"columns": {"correct": "is_correct"}}, "--map correct=is_correct: no column"),
    ],
)
def test_bad_input(frame: dict, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        summarize(pd.DataFrame(frame), **kwargs)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_non_utf8_table_names_file_and_line(tmp_path: Path, log: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes(b"correct,context_words,tom_order\n1,200,0\n0,200,\xff1\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 3, column 7: not valid UTF-8 "
                                         r"\(byte 0xff\)"):
        summarize(p)
    j = tmp_path / "bad.jsonl"
    j.write_bytes(log.read_bytes()[:2000].rsplit(b"\n", 1)[0] + b"\n{\"x\": \"\xfe\"}\n")
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2, column 8: not valid UTF-8"):
        summarize(j)
