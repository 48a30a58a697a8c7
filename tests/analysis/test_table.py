"""The one reader of evaluation tables: every suffix of ``TABLE_FORMATS`` reads the same rows
(gzip included) in ``summarize``, ``fit``'s reader and ``report``, and a bad file is one line
naming it."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tomstats.analysis.table import TABLE_FORMATS, read_evaluation, table_suffix
from tomstats.glmm.data import read_table
from tomstats.report.log import is_log

LOG = Path(__file__).resolve().parents[2] / "data" / "smollm2_storysim_log.jsonl"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "a", "b", "b"], "correct": [1, 0, 1, 1],
                         "tom_order": [0, 1, 0, 1], "context_words": [200, 200, 500, 500],
                         "item": ["i0", "i1", "i0", "i1"]})


def _write(df: pd.DataFrame, path: Path) -> Path:
    plain = path.with_suffix("") if path.suffix == ".gz" else path
    kind = TABLE_FORMATS[table_suffix(path)]
    if kind == "parquet":
        df.to_parquet(plain, index=False)
    elif kind in ("csv", "tsv"):
        df.to_csv(plain, index=False, sep="," if kind == "csv" else "\t")
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    return path


@pytest.mark.parametrize("suffix", [s for s, k in TABLE_FORMATS.items() if k != "jsonl"])
def test_every_table_suffix_reads_the_same_rows(tmp_path: Path, suffix: str) -> None:
    if TABLE_FORMATS[suffix] == "parquet":
        pytest.importorskip("pyarrow", reason="parquet needs pyarrow, not installed here")
    df = _frame()
    path = _write(df, tmp_path / f"t{suffix}")
    pd.testing.assert_frame_equal(read_evaluation(path), df)
    pd.testing.assert_frame_equal(read_table(path), df)  # the GLMM reader: the same rows
    assert is_log(path)


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson", ".json", ".jsonl.gz"])
def test_the_runner_log_reads_the_same_under_every_log_suffix(tmp_path: Path,
                                                              suffix: str) -> None:
    if not LOG.is_file():
        pytest.skip(f"the shipped log {LOG.name} is not in this checkout")
    path = tmp_path / f"log{suffix}"
    if suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(LOG.read_bytes()))
    else:
        shutil.copy(LOG, path)
    ref = read_evaluation(LOG)
    pd.testing.assert_frame_equal(read_evaluation(path), ref)
    assert len(ref) > 0 and "correct" in ref


def test_report_reads_json_as_a_fit_not_a_log(tmp_path: Path) -> None:
    assert not is_log(tmp_path / "fit.json") and not is_log(tmp_path / "fit.nc")


@pytest.mark.parametrize(("name", "content", "message"), [
    ("t.xlsx", b"x", "unknown format '.xlsx'"),
    ("t.csv.gz", b"not gzip", "not a readable gzip file"),
    # mtime=0: the same bytes, hence the same test ids, in every process (pytest-xdist)
    ("t.csv.gz", gzip.compress(b"a,b\n1,caf\xe9\n", mtime=0),
     "line 2, column 6: not valid UTF-8"),
    ("t.jsonl.gz", gzip.compress(b'{"a": 1}\nnot json\n', mtime=0), "t.jsonl.gz"),
], ids=["xlsx", "not-gzip", "gzip-not-utf8", "gzip-not-json"])
def test_bad_files_are_one_line_naming_the_file(tmp_path: Path, name: str, content: bytes,
                                                message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as err:
        read_evaluation(path)
    assert name in str(err.value) and "\n" not in str(err.value)
    assert str(tmp_path / "log") not in str(err.value)
