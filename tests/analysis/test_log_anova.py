"""``tomstats summarize`` and ``tomstats anova`` on evaluation logs: the tables equal the
library functions called directly, ``--by model``, and bad input (exit 2, one line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shipped import SHIPPED_LOG, log_with_overflow_errors

from tomstats.analysis.log_anova import table_for_csv
from tomstats.analysis.row_anova import anova
from tomstats.analysis.summary import summarize
from tomstats.cli import main
from tomstats.evaluate import read_log


@pytest.fixture(scope="module")
def err_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped SmolLM2 log with its 5,000-word records as context-overflow errors."""
    return log_with_overflow_errors(tmp_path_factory.mktemp("log") / "smollm2.jsonl")


def _answered_log(log: Path) -> pd.DataFrame:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 60 context-overflow records are dropped
        return read_log(log)


def _assert_same(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Equal tables: text columns exactly, numbers to 1e-12 (CSV round trip); the CSV is the
    table as ``tomstats anova --out`` writes it (whole-number DF, no empty note column)."""
    ref = table_for_csv(ref)
    assert list(got.columns) == list(ref.columns)
    for c in ref.columns:
        if pd.api.types.is_numeric_dtype(ref[c]):
            np.testing.assert_allclose(got[c].to_numpy(dtype=float, na_value=np.nan),
                                       ref[c].to_numpy(dtype=float, na_value=np.nan),
                                       rtol=1e-12, atol=1e-14, err_msg=c)
        else:
            # an empty note ("") reads back from CSV as a missing value
            assert got[c].fillna("").astype(str).tolist() == \
                ref[c].fillna("").astype(str).tolist(), c


def _table(seed: int = 0, models: tuple[str, ...] = ("a", "b"), n: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for m in models:
        for c in (200, 500, 1000):
            for t in (0, 1, 2):
                p = 0.8 - 0.2 * t - 0.0001 * c
                for i in range(n):
                    rows.append({"model": m, "context_words": c, "tom_order": t,
                                 "story_id": f"s{c}-{i}", "correct": int(rng.random() < p)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- summarize


def test_summarize_cli_writes_the_library_table(tmp_path: Path, err_log: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cells.csv"
    assert main(["summarize", str(err_log), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    ref = summarize(err_log)
    k = int(ref["n_correct"].sum())
    assert f"300 questions, 240 answered, {k} correct, 60 without an answer " \
           "(context_overflow: 60)" in text
    c = ref[(ref["context_words"] == 200) & (ref["tom_order"] == 0)].iloc[0]
    assert f"{c['accuracy']:.3f}  {c['ci_low']:.3f}   {c['ci_high']:.3f}" in text
    _assert_same(pd.read_csv(out), ref)


def test_summarize_cli_pooled_and_by(tmp_path: Path) -> None:
    df = _table(models=("a", "b", "c"))
    df.to_csv(tmp_path / "t.csv", index=False)
    assert main(["summarize", str(tmp_path / "t.csv"), "--by", "none",
                 "--out", str(tmp_path / "p.csv")]) == 0
    pooled = pd.read_csv(tmp_path / "p.csv")
    ref = df.groupby(["context_words", "tom_order"])["correct"].agg(["size", "sum"])
    np.testing.assert_array_equal(pooled["n"], ref["size"])
    np.testing.assert_array_equal(pooled["n_correct"], ref["sum"])
    assert main(["summarize", str(tmp_path / "t.csv"), "--out", str(tmp_path / "m.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "m.csv")) == 27  # 3 LLMs × 3 × 3


def test_summarize_cli_map_like_fit(tmp_path: Path) -> None:
    """``--map STD=COL`` (comma-separated or repeated, as in ``tomstats fit``)."""
    df = _table(seed=2).rename(columns={"correct": "ok", "model": "llm", "tom_order": "order"})
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "cells.csv"
    assert main(["summarize", str(tmp_path / "t.csv"), "--map", "correct=ok,model=llm",
                 "--map", "tom_order=order", "--out", str(out)]) == 0
    ref = summarize(df, columns={"correct": "ok", "model": "llm", "tom_order": "order"})
    _assert_same(pd.read_csv(out), ref)
    assert list(pd.read_csv(out).columns[:3]) == ["model", "context_words", "tom_order"]


# --------------------------------------------------------------------------- anova


def test_anova_cli_equals_tomstats_anova(tmp_path: Path, err_log: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "table.csv"
    assert main(["anova", str(err_log), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "240 questions (60 error record(s) without an answer left out)" in text
    answered = _answered_log(err_log)
    ref = anova(answered, "correct", ["context_words", "tom_order"], ss_type=2, binary=True)
    _assert_same(pd.read_csv(out), ref)
    # against statsmodels' type-2 table of the same linear model
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    ols = smf.ols("correct ~ C(context_words) * C(tom_order)", answered).fit()
    sm_table = sm.stats.anova_lm(ols, typ=2)
    row = ref.set_index("source").loc["tom_order"]
    assert row["DF"] == 2
    assert row["F"] == pytest.approx(sm_table.loc["C(tom_order)", "F"], rel=1e-9)
    assert row["p"] == pytest.approx(sm_table.loc["C(tom_order)", "PR(>F)"], rel=1e-9)


@pytest.mark.parametrize("ss_type", [1, 3])
def test_anova_cli_by_model_and_pooled(tmp_path: Path, ss_type: int) -> None:
    df = _table(seed=ss_type, models=("m1", "m2", "m3"))
    df = df.drop(index=df.index[::7]).reset_index(drop=True)  # unbalanced
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "table.csv"
    assert main(["anova", str(tmp_path / "t.csv"), "--by", "model", "--ss-type", str(ss_type),
                 "--between", "tom_order", "context_words", "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert got["model"].unique().tolist() == ["m1", "m2", "m3", "(pooled)"]
    for m in ("m1", "m2", "m3"):
        ref = anova(df[df["model"] == m].reset_index(drop=True), "correct",
                    ["tom_order", "context_words"], ss_type=ss_type, binary=True)
        _assert_same(got[got["model"] == m].drop(columns="model").reset_index(drop=True), ref)
    ref = anova(df, "correct", ["tom_order", "context_words"], ss_type=ss_type, binary=True)
    _assert_same(got[got["model"] == "(pooled)"].drop(columns="model").reset_index(drop=True),
                 ref)


def test_anova_cli_map_and_query_like_fit(tmp_path: Path) -> None:
    df = _table(seed=4).rename(columns={"correct": "is_correct", "context_words": "words",
                                        "model": "run"})
    df["experiment"] = np.where(df.index % 2 == 0, "x", "y")
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "table.csv"
    assert main(["anova", str(tmp_path / "t.csv"), "--map", "correct=is_correct,model=run",
                 "--map", "context_words=words", "--query", "experiment == 'x'", "--by", "model",
                 "--out", str(out)]) == 0
    sub = df[df["experiment"] == "x"].rename(columns={"is_correct": "correct",
                                                      "words": "context_words"})
    ref = anova(sub.reset_index(drop=True), "correct", ["context_words", "tom_order"],
                binary=True)
    got = pd.read_csv(out)
    _assert_same(got[got["model"] == "(pooled)"].drop(columns="model").reset_index(drop=True),
                 ref)


def test_anova_cli_continuous_dv(tmp_path: Path) -> None:
    df = _table(seed=5)
    df["latency"] = np.random.default_rng(0).gamma(2.0, 1.0, len(df))
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "table.csv"
    assert main(["anova", str(tmp_path / "t.csv"), "--dv", "latency", "--out", str(out)]) == 0
    _assert_same(pd.read_csv(out), anova(df, "latency", ["context_words", "tom_order"]))


def test_anova_cli_bootstrap_intervals(tmp_path: Path) -> None:
    df = _table(seed=6, n=10)
    df.to_csv(tmp_path / "t.csv", index=False)
    a, b, c = (tmp_path / f"{x}.csv" for x in "abc")
    base = ["anova", str(tmp_path / "t.csv"), "--ci", "0.9", "--n-boot", "300"]
    assert main([*base, "--seed", "1", "--out", str(a)]) == 0
    assert main([*base, "--seed", "1", "--out", str(b)]) == 0
    assert main([*base, "--seed", "2", "--out", str(c)]) == 0
    ta, tb, tc = (pd.read_csv(p) for p in (a, b, c))
    pd.testing.assert_frame_equal(ta, tb)  # same seed, same intervals
    assert not ta["eta2_low"].equals(tc["eta2_low"])
    ref = anova(df, "correct", ["context_words", "tom_order"], binary=True, ci=0.9, n_boot=300,
                cluster="story_id", seed=1)
    _assert_same(ta, ref)
    eff = ta[ta["source"] != "Residual"]
    assert (eff["eta2_low"] <= eff["eta2_high"]).all()


def test_anova_cli_repeated_measures(tmp_path: Path) -> None:
    df = _table(seed=7, models=("m1", "m2", "m3", "m4", "m5"), n=4)
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "rm.csv"
    assert main(["anova", str(tmp_path / "t.csv"), "--within", "context_words", "tom_order",
                 "--out", str(out)]) == 0  # --subject defaults to model
    ref = anova(df, "correct", within=["context_words", "tom_order"], subject="model",
                binary=True)
    got = pd.read_csv(out)
    corrected = ["DF_corrected", "DF_error_corrected", "MSE", "p_corrected"]
    assert list(got.columns[-4:]) == corrected  # afex's columns after the engine's
    _assert_same(got.drop(columns=corrected), ref)
    # Greenhouse-Geisser by default: df times eps, MSE of the corrected error df
    eps = ref["eps_gg"].fillna(1.0).to_numpy()
    np.testing.assert_allclose(got["DF_corrected"], ref["DF"] * eps, rtol=1e-12)
    np.testing.assert_allclose(got["MSE"], ref["SS_error"] / (ref["DF_error"] * eps),
                               rtol=1e-12)
    np.testing.assert_allclose(got["p_corrected"], ref["p_gg"].fillna(ref["p"]), rtol=1e-12)


def test_anova_cli_subject_without_within_uses_subject_means(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    """``--subject`` alone is not ignored: the between factors are compared on the subjects'
    means (one row per LLM), as ``tomstats.anova(..., subject=...)`` does."""
    df = _table(seed=8, models=tuple(f"m{i}" for i in range(8)), n=3)
    df["family"] = np.where(df["model"].isin(["m0", "m1", "m2", "m3"]), "big", "small")
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "s.csv"
    assert main(["anova", str(tmp_path / "t.csv"), "--between", "family", "--subject", "model",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ANOVA of correct on family (type 2 sums of squares, on the mean per model)" in text
    assert "eps_gg" not in text  # no within effect: no sphericity columns printed
    means = df.groupby(["model", "family"], as_index=False)["correct"].mean()
    ref = anova(means, "correct", ["family"])
    got = pd.read_csv(out)
    assert got["DF_error"].iloc[0] == 6  # 8 LLMs − 2 families, not 160 questions − 2
    for c in ("SS", "DF", "F", "p", "partial_eta2"):
        assert got[c].iloc[0] == pytest.approx(ref[c].iloc[0], rel=1e-12), c
    # a between factor that varies within an LLM is refused, naming both values
    assert main(["anova", str(tmp_path / "t.csv"), "--between", "tom_order", "--subject",
                 "model"]) == 2
    assert "between factor 'tom_order' varies within subject 'm0'" in capsys.readouterr().err


def test_effect_size_columns_are_the_engines() -> None:
    from tomstats.analysis import log_anova, row_anova

    assert log_anova.EFFECT_SIZES is row_anova.EFFECT_SIZES  # one owner, no copy


# --------------------------------------------------------------------------- bad input


def _good(tmp: Path) -> Path:
    p = tmp / "log.csv"
    _table(seed=9).to_csv(p, index=False)
    return p


def _variant(tmp: Path, case: str) -> list[str]:
    """Arguments after ``anova`` for one bad-input case (writes its input file)."""
    df = _table(seed=9)
    p = tmp / "log.csv"
    if case == "one_level":
        df = df[df["context_words"] == 500]
    elif case == "empty_cell":
        df = df[~((df["context_words"] == 1000) & (df["tom_order"] == 2))]
    elif case == "one_level_in_group":
        df = df[~((df["model"] == "b") & (df["tom_order"] > 0))]
    elif case == "missing_within":
        df = df[~((df["model"] == "b") & (df["context_words"] == 1000) & (df["tom_order"] == 2))]
    elif case == "missing_within_cells":
        df = df[~((df["model"] == "b") & (df["tom_order"] > 0))]
    elif case == "nan_outcome":
        df = df.astype({"correct": float})
        df.loc[3, "correct"] = np.nan
    elif case == "non_numeric":
        df = df.astype({"correct": object})
        df.loc[2, "correct"] = "yes"
    elif case == "not_binary":
        df.loc[4, "correct"] = 2
    if case == "non_utf8":
        text = df.to_csv(index=False).encode("utf-8").split(b"\n")
        text[2] = text[2].replace(b"s", b"\xe9", 1)
        p.write_bytes(b"\n".join(text))
    else:
        df.to_csv(p, index=False)
    extra = {
        "unknown_column": ["--between", "context_words", "tom_ordr"],
        "twice": ["--between", "tom_order", "tom_order"],
        "twice_within": ["--between", "tom_order", "--within", "tom_order"],
        "by_is_factor": ["--between", "model", "tom_order", "--by", "model"],
        "unknown_map": ["--map", "context_words=wrods"],
        "empty_query": ["--query", "model == 'zzz'"],
        "one_level_in_group": ["--by", "model"],
        "missing_within": ["--within", "context_words", "tom_order", "--subject", "model"],
        "missing_within_cells": ["--within", "context_words", "tom_order"],
        "default_subject_is_factor": ["--between", "model", "--within", "tom_order"],
    }.get(case, [])
    return [str(p), *extra]


BAD = [
    ("unknown_column", "factor: no column 'tom_ordr' in the data (did you mean 'tom_order'?)"),
    ("one_level", "factor 'context_words' has a single level 500; an ANOVA factor needs at "
                  "least 2"),
    ("empty_cell", "empty cell: no rows with context_words=1000, tom_order=2"),
    ("one_level_in_group", "factor 'tom_order' has a single level 0 (in model='b')"),
    ("missing_within", "subject model='b' has no rows with context_words=1000, tom_order=2; "
                       "a repeated-measures ANOVA needs every subject in every within cell"),
    ("missing_within_cells", "subject model='b' has no rows with context_words=200, "
                             "tom_order=1 (and 5 more of the 9 within cells)"),
    ("default_subject_is_factor", "--subject 'model' (the default with --within) is also a "
                                  "factor; name the subject column with --subject COL"),
    ("nan_outcome", "column 'correct' has 1 missing value(s) (NaN), e.g. in row 3"),
    ("non_numeric", "column 'correct' must be numeric, found 'yes' in row 2"),
    ("not_binary", "column 'correct' must be 0/1 (correct or not), found 2 in row 4"),
    ("twice", "factor 'tom_order' is named twice (--between)"),
    ("twice_within", "factor 'tom_order' is named twice (--between and --within)"),
    ("by_is_factor", "--by 'model' is also a factor"),
    ("unknown_map", "--map context_words=wrods: no column 'wrods' in the data (did you mean "
                    "'words'?)"),
    ("empty_query", "--query \"model == 'zzz'\" keeps no rows"),
    ("non_utf8", "log.csv: line 3, column "),
]


@pytest.mark.parametrize(("case", "message"), BAD, ids=[c for c, _ in BAD])
def test_anova_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture, case: str,
                         message: str) -> None:
    args = _variant(tmp_path, case)
    if case == "unknown_map":
        pd.read_csv(args[0]).rename(columns={"context_words": "words"}).to_csv(args[0],
                                                                               index=False)
    out = tmp_path / "table.csv"
    assert main(["anova", *args, "--out", str(out)]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("tomstats anova: error: ")
    assert message in lines[0], lines[0]
    assert "Traceback" not in cap.err and cap.out == ""
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("command", ["anova", "summarize"])
def test_existing_out_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture,
                                  command: str) -> None:
    log = _good(tmp_path)
    out = tmp_path / "t.csv"
    out.write_text("keep me\n")
    assert main([command, str(log), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"tomstats {command}: error: --out: {str(out)!r} already exists; "
                           "pass --force to replace it")
    assert out.read_text() == "keep me\n"
    assert main([command, str(log), "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("model,") if command == "summarize" else \
        out.read_text().startswith("source,")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--by", "modl"], "by: no column 'modl' in the data (did you mean 'model'?)"),
        (["--by", "tom_order"], "by: 'tom_order' is already a cell factor"),
        (["--level", "0"], "level must be a number in (0, 1), got 0.0"),
    ],
)
def test_summarize_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str],
                             message: str) -> None:
    out = tmp_path / "cells.csv"
    assert main(["summarize", str(_good(tmp_path)), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tomstats summarize: error: ")
    assert message in err[0]
    assert not out.exists()


def test_real_subprocess(tmp_path: Path) -> None:
    LOG = SHIPPED_LOG
    """The installed entry point, in its own process: output, CSV, and a clean error."""
    out = tmp_path / "table.csv"
    res = subprocess.run([sys.executable, "-m", "tomstats.cli", "anova", str(LOG), "--by",
                          "model", "--out", str(out)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert "model = smollm2-local" in res.stdout and "model = (pooled)" in res.stdout
    assert set(pd.read_csv(out)["model"]) == {"smollm2-local", "(pooled)"}
    bad = subprocess.run([sys.executable, "-m", "tomstats.cli", "anova", str(LOG), "--dv",
                          "corect"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2
    # 'corect' is no standard name: --map could not give it a column
    assert bad.stderr.strip() == ("tomstats anova: error: --dv: no column 'corect' in the data "
                                  "(did you mean 'correct'?)")
