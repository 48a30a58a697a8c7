"""The runner's log reader refuses a record that holds a key twice, as the analysis reader
does (one check, :func:`tomstats.evaluate.log.check_unique_keys`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tomstats.evaluate.log import LogWriter, load_records, read_log, repair_log

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "smollm2_storysim_log.jsonl"


def _log(tmp_path: Path, extra: str | None) -> Path:
    """Three records of the shipped log; the second ends with ``extra`` (a repeated key)."""
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()[:3]
    if extra is not None:
        rec = json.loads(lines[1])
        rec.update(status="ok", correct=1)
        lines[1] = json.dumps(rec)[:-1] + ", " + extra + "}"
    p = tmp_path / "run.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("extra,key", [
    ('"correct": 0', "correct"),           # the outcome flips: the last one used to win
    ('"correct" : 0', "correct"),          # blanks before the colon
    ('"\\u0063orrect": 0', "correct"),     # an escaped spelling
    ('"response": "x"', "response"),       # any key, not only the scored ones
])
@pytest.mark.parametrize("reader", [
    lambda p: read_log(p, errors="keep"),
    load_records,                                # what a resumed run reads
    repair_log,
])
def test_runner_refuses_a_repeated_key(extra: str, key: str, reader, tmp_path: Path) -> None:
    p = _log(tmp_path, extra)
    before = p.read_bytes()
    with pytest.raises(ValueError, match=rf"run\.jsonl:2: the key '{key}' appears twice in "
                                         r"one record; a record with a repeated key is "
                                         r"ambiguous"):
        reader(p)
    assert p.read_bytes() == before


def test_the_same_log_without_the_repeat_is_read(tmp_path: Path) -> None:
    df = read_log(_log(tmp_path, None), errors="keep")
    assert len(df) == 3


def test_keys_repeated_in_different_objects_are_fine(tmp_path: Path) -> None:
    """A key may appear in a record and in an object within it (and inside strings)."""
    p = _log(tmp_path, '"extra": {"correct": 5, "note": "\\"correct\\": 1"}')
    assert len(read_log(p, errors="keep")) == 3


def test_the_writer_never_writes_a_repeated_key(tmp_path: Path) -> None:
    rec = json.loads(SHIPPED.read_text(encoding="utf-8").splitlines()[0])
    p = tmp_path / "w.jsonl"
    with LogWriter(p) as w:
        w.write(rec)
    assert read_log(p, errors="keep")["item_id"].tolist() == [rec["item_id"]]
