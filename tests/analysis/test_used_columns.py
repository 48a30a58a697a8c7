"""The analysis commands read only the columns they use, and get the same frame and refusals.

:func:`tomstats.analysis.table.load_table` with ``needed``/``optional`` must give the columns
of a whole read (after ``--query`` and ``--map``), for a runner log and a CSV; a file that
lacks a needed column is read whole (the message names the closest column); a CSV row longer
than the header is refused as the whole read refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tomstats.analysis.table import _rows_fit_header, load_table, read_evaluation

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "smollm2_storysim_log.jsonl"


@pytest.fixture
def tables(tmp_path: Path) -> dict[str, Path]:
    csv = tmp_path / "t.csv"
    df = read_evaluation(SHIPPED)
    df.rename(columns={"correct": "ok"}).to_csv(csv, index=False)
    return {"log": SHIPPED, "csv": csv}


@pytest.mark.parametrize("kind", ["log", "csv"])
@pytest.mark.parametrize("needed,optional,query", [
    (["correct", "context_words", "tom_order"], ["status", "model"], None),
    (["correct", "tom_order", "setting"], [], "context_words >= 500 and model != 'x'"),
    (["correct", "item_id"], ["story_id", "nope"], None),
])
def test_same_columns_as_a_whole_read(kind, needed, optional, query, tables) -> None:
    mapping = {"correct": "ok"} if kind == "csv" else {}
    whole = load_table(tables[kind], mapping, query)
    part = load_table(tables[kind], mapping, query, needed=needed, optional=optional)
    assert set(needed) <= set(part.columns) < set(whole.columns)
    pd.testing.assert_frame_equal(part, whole[list(part.columns)])
    assert part.attrs == whole.attrs


def test_a_missing_column_reads_the_whole_file(tables) -> None:
    part = load_table(tables["csv"], None, None, needed=["correct"])  # the file calls it 'ok'
    assert list(part.columns) == list(load_table(tables["csv"]).columns)


def test_a_long_row_is_refused_with_few_columns(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("correct,tom_order,context_words,x\n1,0,200,a\n0,1,200,b,extra\n",
                 encoding="utf-8")
    for kw in ({}, {"needed": ["correct", "tom_order"]}):
        with pytest.raises(ValueError, match="Expected 4 fields in line 3, saw 5"):
            load_table(p, **kw)


@pytest.mark.parametrize("text,sep,fits", [
    (b"a,b\n1,2\n3,4\n", ",", True),
    (b"a,b\n1,2\n3,4", ",", True),
    (b"a,b\n1,2,3\n3,4\n", ",", False),
    (b"a,b\n1,2\n3,4,5", ",", False),
    (b"a,b\n1,\"2\"\n", ",", False),           # quotes: not counted, read whole
    (b"a\tb\n1\t2\n", "\t", True),
    (b"a,b\n" + b"1,2\n" * 50 + b"1,2,3\n", ",", False),
])
def test_rows_fit_header(text: bytes, sep: str, fits: bool) -> None:
    assert _rows_fit_header(text, sep) is fits
    assert _rows_fit_header(text, sep, block=7) is fits  # lines spread over blocks


def test_cli_outputs_are_unchanged(tables, capsys) -> None:
    """summarize and anova print the same with and without the column selection."""
    from unittest import mock

    import tomstats.analysis.cli as cli
    from tomstats.analysis import table
    from tomstats.cli import main

    runs = [["summarize", str(tables["csv"]), "--map", "correct=ok"],
            ["summarize", str(tables["log"]), "--by", "setting", "--query", "tom_order >= 1"],
            ["anova", str(tables["log"]), "--by", "model"],
            ["anova", str(tables["csv"]), "--map", "correct=ok", "--ci", "0.9", "--n-boot",
             "20"]]
    whole = lambda path, columns=None, query=None, **_: table.load_table(path, columns, query)  # noqa: E731
    for args in runs:
        assert main(args) == 0
        part = capsys.readouterr().out
        with mock.patch.object(cli, "load_table", whole):
            assert main(args) == 0
        assert capsys.readouterr().out == part, args
    json.dumps(runs)  # the runs are plain data


def test_no_wanted_column_in_the_file_reads_it_whole(tmp_path: Path, capsys) -> None:
    """A table with none of the wanted columns (every one mapped under another name, one of
    them mistyped) is read whole and the message names the missing column, not "no rows"."""
    from tomstats.cli import main
    from tomstats.glmm.data import _read_table

    p = tmp_path / "t.csv"
    p.write_text("run_dir,words,order,n_correct,n_tries\nm1,200,0,3,5\nm2,500,1,2,5\n")
    df = read_evaluation(p, {"nope", "tom_order"}, {"correct"})
    assert list(df.columns) == ["run_dir", "words", "order", "n_correct", "n_tries"]
    assert len(_read_table(p, model="structural", columns={"model": "nope"})) == 2
    out = tmp_path / "f.nc"
    assert main(["fit", str(p), "--map", "model=nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "no rows" not in err and not out.exists()
