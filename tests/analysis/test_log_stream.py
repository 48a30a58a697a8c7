"""The analysis commands' streaming log reader gives the runner's reader's frame and refusals.

:func:`tomstats.analysis.log_stream.read_log_stream` must equal
:func:`tomstats.evaluate.log.read_log` (``errors="keep"``) on every log: the shipped SmolLM2
log, a generated log with error records and retried keys, and a table of malformed logs
(the same message, word for word), a record with a duplicated key included.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tomstats.analysis.log_stream import read_log_stream
from tomstats.evaluate.log import duplicated_key, read_log

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "smollm2_storysim_log.jsonl"


def _runner(p: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(p, errors="keep")


def _same(p: Path) -> pd.DataFrame:
    a, b = read_log_stream(p), _runner(p)
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs == b.attrs
    return a


def _template() -> dict:
    return json.loads(SHIPPED.read_text(encoding="utf-8").splitlines()[0])


def _records(n_models: int = 3, n_items: int = 40) -> list[dict]:
    """Answered records, error records, retried keys (an error, then an answer) and a key that
    stays an error, over several models, contexts and orders, in a shuffled line order."""
    t = _template()
    out, retried = [], []
    for m in range(n_models):
        for i in range(n_items):
            r = {**t, "model": f"llm-{m}", "config_hash": f"{m:064x}",
                 "item_id": f"it-{i:03d}", "story_id": f"st-{i // 3}",
                 "tom_order": i % 3, "context_words": (200, 1000, 5000)[i // 3 % 3],
                 "n_words": 100 + i, "agents": ["A", "B"][: i % 3], "correct": (i + m) % 2,
                 "sample": i % 2}
            if i % 11 == 5:  # an error only
                r = {**r, "status": "error", "correct": None, "error": "HTTP 500 \"oops\"",
                     "error_category": "request_failed", "parsed_answer": None}
            if i % 7 == 0:  # an error, then answered on a later line
                out.append({**r, "status": "error", "correct": None, "error": "timeout",
                            "error_category": "request_failed", "parsed_answer": None})
                retried.append(r)
            else:
                out.append(r)
    return out[::3] + out[1::3] + out[2::3] + retried[::-1]


def _write(p: Path, recs: list, raw_lines: tuple[str, ...] = (), end: str = "\n") -> Path:
    lines = [json.dumps(r) if not isinstance(r, str) else r for r in recs] + list(raw_lines)
    p.write_text("\n".join(lines) + end, encoding="utf-8")
    return p


def test_shipped_log_is_read_the_same() -> None:
    df = _same(SHIPPED)
    assert len(df) == 300


def test_generated_log_with_errors_is_read_the_same(tmp_path: Path) -> None:
    df = _same(_write(tmp_path / "run.jsonl", _records()))
    assert (df["status"] == "error").sum() > 0 and df["correct"].isna().sum() > 0
    assert len(df) == 3 * 40


# each case: a change of the generated records that both readers must refuse alike
MALFORMED = {
    "torn-last-line": lambda r: (r, ('{"format": "tomstats.evallog/1", "mod',), ""),
    "not-json": lambda r: (r[:2] + ["{nope"] + r[2:], (), "\n"),
    "not-an-object": lambda r: (r[:2] + ["[1, 2]"] + r[2:], (), "\n"),
    "missing-field": lambda r: (r[:3] + [{k: v for k, v in r[3].items() if k != "setting"}]
                                + r[4:], (), "\n"),
    "bad-status": lambda r: (r[:1] + [{**r[1], "status": "maybe"}] + r[2:], (), "\n"),
    "correct-2": lambda r: (r[:1] + [{**r[1], "status": "ok", "correct": 2}] + r[2:], (),
                            "\n"),
    "negative-context": lambda r: ([{**r[0], "context_words": -1}] + r[1:], (), "\n"),
    "mixed-formats": lambda r: (r[:4] + [{**r[4], "format": "tomstats.evallog/0"}] + r[5:], (),
                                "\n"),
    "unsupported-format": lambda r: ([{**r[0], "format": "x/9"}] + r[1:], (), "\n"),
    "answered-twice": lambda r: (r + [{**next(x for x in r if x["status"] == "ok")}], (), "\n"),
    "two-config-hashes": lambda r: (r + [{**r[0], "item_id": "new", "config_hash": "f" * 64}],
                                    (), "\n"),
    "empty": lambda r: ([], ("", "  "), "\n"),
    "repeated-key": lambda r: (r[:5] + [json.dumps(r[5])[:-1] + ', "setting": "x"}'] + r[6:],
                               (), "\n"),
    # counts are never truncated or parsed from text
    "float-n-words": lambda r: (r[:6] + [{**r[6], "n_words": 1.5}] + r[7:], (), "\n"),
    "string-n-characters": lambda r: (r[:3] + [{**r[3], "n_characters": "3"}] + r[4:], (),
                                      "\n"),
    "float-prompt-id": lambda r: (r[:1] + [{**r[1], "prompt_id": 1.0}] + r[2:], (), "\n"),
    "bool-mislead-distance": lambda r: (r[:7] + [{**r[7], "mislead_distance": True}] + r[8:],
                                        (), "\n"),
    "negative-n-words": lambda r: ([{**r[0], "n_words": -3}] + r[1:], (), "\n"),
}


@pytest.mark.parametrize("block", [None, 4000])  # 4000 bytes: faults in a later block
@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_logs_are_refused_alike(name: str, block: int | None, tmp_path: Path,
                                          monkeypatch) -> None:
    import tomstats.analysis.log_stream as log_stream

    if block is not None:
        monkeypatch.setattr(log_stream, "_BLOCK_BYTES", block)
    recs, raw, end = MALFORMED[name](_records(2, 12))
    p = _write(tmp_path / "run.jsonl", recs, raw, end)
    with pytest.raises(ValueError) as runner:
        _runner(p)
    with pytest.raises(ValueError) as stream:
        read_log_stream(p)
    assert str(stream.value) == str(runner.value)


def test_not_utf8_is_refused_alike(tmp_path: Path) -> None:
    p = _write(tmp_path / "run.jsonl", _records(1, 4))
    p.write_bytes(p.read_bytes().replace(b'"timestamp": "', b'"timestamp": "\xff', 1))
    with pytest.raises(ValueError, match=r"line 1, column \d+: not valid UTF-8"):
        read_log_stream(p)


@pytest.mark.parametrize("dup", [
    '"correct": 0',            # plain
    '"correct" :0',            # blanks before the colon
    '"\\u0063orrect": 0',      # an escaped spelling of the same key
])
def test_duplicated_key_is_refused_with_file_line_and_key(dup: str, tmp_path: Path) -> None:
    recs = _records(1, 4)
    line = json.dumps({**recs[2], "status": "ok", "correct": 1})
    recs[2] = line[:-1] + ", " + dup + "}"
    p = _write(tmp_path / "run.jsonl", recs)
    with pytest.raises(ValueError, match=r"run\.jsonl:3: the key 'correct' appears twice"):
        read_log_stream(p)


@pytest.mark.parametrize("text,key", [
    ('{"a": 1, "b": {"c": 2, "c": 3}}', "c"),
    ('{"a": "x\\": 1", "a": 2}', "a"),
    ('{"a": "x\\": 1", "b": 2}', None),
    ('{"a": [{"b": 1}, {"b": 2}]}', None),
    ('{"a": "\\"b\\": 1, \\"b\\": 2"}', None),
])
def test_duplicated_key_detector(text: str, key: str | None) -> None:
    assert duplicated_key(text, json.loads(text)) == key


def test_parquet_without_pyarrow_is_bad_input(tmp_path: Path, monkeypatch, capsys) -> None:
    """Parquet needs the optional extra; without it: one line, exit 2 (it was exit 3)."""
    import sys

    from tomstats.cli import main

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    (tmp_path / "t.parquet").write_bytes(b"PAR1 not really PAR1")
    assert main(["summarize", str(tmp_path / "t.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert "t.parquet: reading .parquet needs pyarrow" in err and "tomstats[parquet]" in err


# --------------------------------------------------------------------------- blocks, columns


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few records, so that retried keys and faults fall across blocks."""
    import tomstats.analysis.log_stream as log_stream

    monkeypatch.setattr(log_stream, "_BLOCK_BYTES", 4000)


@pytest.mark.parametrize("change", [
    lambda r: {**r, "correct": True},            # a bool is not 0/1 to the runner
    lambda r: {**r, "correct": 1.0},             # a float 1.0 is
    lambda r: {**r, "sample": 1.5},
    lambda r: {**r, "model": ""},
    lambda r: {**r, "config_hash": ["x"]},       # not a string: one hash all the same
    lambda r: {**r, "status": ["ok"]},
])
def test_odd_values_in_a_late_block_alike(change, tmp_path: Path, small_blocks) -> None:
    recs = _records(2, 12)
    i = next(i for i, r in enumerate(recs) if i > 15 and r["status"] == "ok")
    recs[i] = change(recs[i])
    p = _write(tmp_path / "run.jsonl", recs)
    try:
        want = _runner(p)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)) as stream:
            read_log_stream(p)
        assert str(stream.value) == str(exc)
    else:
        got = read_log_stream(p)
        pd.testing.assert_frame_equal(got, want)
        assert got.attrs == want.attrs


def test_repeated_key_in_a_later_block_names_its_line(tmp_path: Path, small_blocks) -> None:
    recs = _records(1, 30)
    line = json.dumps({**recs[-3], "status": "ok", "correct": 1})
    recs[-3] = line[:-1] + ', "correct":0}'
    p = _write(tmp_path / "run.jsonl", recs)
    with pytest.raises(ValueError, match=rf"run\.jsonl:{len(recs) - 2}: the key 'correct'"):
        read_log_stream(p)


@pytest.mark.parametrize("columns", [["correct", "model"], ["agents", "belief_status",
                                                            "same_as", "critical_position"],
                                     ["timestamp"]])
def test_only_some_columns(columns: list[str], tmp_path: Path, small_blocks) -> None:
    p = _write(tmp_path / "run.jsonl", _records())
    got, want = read_log_stream(p, columns), _runner(p)
    order = [c for c in want.columns if c in columns]
    pd.testing.assert_frame_equal(got, want[order])
    assert got.attrs == want.attrs


def test_unknown_column_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "run.jsonl", _records(1, 3))
    with pytest.raises(ValueError, match="'nope'"):
        read_log_stream(p, ["correct", "nope"])


def test_clean_blocks_take_the_block_path(tmp_path: Path, small_blocks, monkeypatch) -> None:
    """A clean log (nested values, escaped quotes and backslashes, blank lines included) is
    never read record by record; a block with a fault is."""
    import tomstats.analysis.log_stream as log_stream

    calls: list[int] = []
    one = log_stream._Reader.one
    monkeypatch.setattr(log_stream._Reader, "one",
                        lambda self, raw, lineno, **kw: (calls.append(lineno),
                                                         one(self, raw, lineno, **kw)))
    recs = _records()
    recs[7] = {**recs[7], "response": 'he said "go, \\\\ " and left {x}', "extra": {"a": [1]}}
    p = _write(tmp_path / "run.jsonl", recs, ("", "   "), "\n")
    _same(p)
    assert calls == []
    recs[9] = {**recs[9], "correct": 1.0, "status": "ok"}  # valid, but only record by record
    _same(_write(p, recs))
    assert 10 in calls


# --------------------------------------------------------------------------- the msgspec path


def test_clean_blocks_take_the_msgspec_path(tmp_path: Path, small_blocks, monkeypatch) -> None:
    """A clean log is decoded by msgspec, only the fields used; a block with an object
    within a record, a key written twice or keys in another order is read by orjson."""
    import tomstats.analysis.log_stream as log_stream

    calls: list[int] = []
    parsed = log_stream._Reader._parsed
    monkeypatch.setattr(log_stream._Reader, "_parsed",
                        lambda self, raws, blob: (calls.append(len(raws)),
                                                  parsed(self, raws, blob))[1])
    recs = _records()
    p = _write(tmp_path / "run.jsonl", recs)
    _same(p)
    assert calls == []
    recs[7] = {**recs[7], "extra": {"a": 1}}
    _same(_write(p, recs))
    assert len(calls) == 1
    calls.clear()
    recs[7] = dict(reversed(list(recs[7].items())))  # the same keys, another order
    _same(_write(p, recs))
    assert len(calls) == 1
    calls.clear()
    recs = _records()  # braces, colons and quoted keys within answers: still msgspec's
    recs[7] = {**recs[7], "response": '{"correct": 0} a : b ":x'}
    _same(_write(p, recs))
    assert calls == []


_MUTATIONS = [
    lambda s, r: s.replace('"seed": ', '"sEed": ', 1),              # a key renamed
    lambda s, r: s.replace('"seed": ', '"seeds": ', 1),             # a key longer
    lambda s, r: s.replace('"completion_tokens": ', '"completion_tokenz": ', 1),
    lambda s, r: s.replace('"target": ', '"target" : ', 1),         # a blank, then the colon
    lambda s, r: s[:-1] + ', "seed": 1}',                           # a key twice
    lambda s, r: s.replace('"seed": 0, ', "", 1)[:-1] + ', "seed": 0}',  # moved to the end
    lambda s, r: s.replace('"seed": 0, ', "", 1).replace('"answer"', '"seed": 0, "answer"', 1),
    lambda s, r: s.replace('"response": ', '"response": ":) ", "x": ', 1),  # a colon value
    lambda s, r: s.replace('"seed": 0', '"seed": {"seed": 0}', 1),  # an object within
    lambda s, r: s.replace('"seed": ', '"\\u0073eed": ', 1),        # an escaped spelling
    lambda s, r: s.replace('"seed": 0', '"seed": "a\\\\\\"b\\": 1"', 1),  # escapes in a value
    lambda s, r: s.replace(', "seed": 0', "", 1),                   # a key left out
    lambda s, r: s.replace('"answer": ', '"answer":', 1),           # other blanks: fine
    lambda s, r: s.replace('"response": "', '"response": "{x} a : b \\": {', 1),  # in text
    lambda s, r: s.replace('"response": "', '"response": ":{\\"seed\\": 1}', 1),
    lambda s, r: s,
]


def _split_line(lines: list[str], rng) -> list[str]:
    """One record written over two lines, two records on one line (msgspec reads both
    blocks as records: the lines must show them apart)."""
    i = rng.randrange(len(lines) - 1)
    cut = lines[i].index(", ") + 1
    j = rng.choice([k for k in range(len(lines) - 1) if k not in (i - 1, i)])
    out = list(lines)
    out[i: i + 1] = [lines[i][:cut], lines[i][cut:]]
    j += j > i
    out[j: j + 2] = [out[j] + " " + out[j + 1]]
    return out


def _pairs(line: str) -> list[str] | None:
    """The keys of a line that is one JSON object, every pair kept (else ``None``)."""
    try:
        return json.loads(line, object_pairs_hook=lambda kv: [k for k, _ in kv])
    except json.JSONDecodeError:
        return None


@pytest.mark.parametrize("seed", range(6))
def test_flat_keys_never_vouches_for_a_wrong_block(seed: int) -> None:
    """:func:`_flat_keys` says yes only when every line is one object whose keys, read by
    ``json`` with every pair kept (the reference), are the first line's, once each, in order;
    a clean block gets a yes."""
    import random

    import msgspec
    import orjson

    from tomstats.analysis.log_stream import _flat_keys

    rng = random.Random(seed)
    base = [json.dumps({**r, "seed": 0}) for r in _records(2, 10)]
    keys = tuple(json.loads(base[0]))
    assert _flat_keys(("\n".join(base) + "\n").encode(), len(base), keys)
    for _ in range(40):
        lines = list(base)
        for i in rng.sample(range(len(lines)), rng.choice([1, 2])):
            lines[i] = rng.choice(_MUTATIONS)(lines[i], rng)
        if rng.random() < 0.3:
            lines = _split_line(lines, rng)
        blob = ("\n".join(lines) + "\n").encode()
        try:
            n = len(msgspec.json.Decoder().decode_lines(blob))
            first_keys = tuple(orjson.loads(lines[0]))
        except ValueError:
            continue  # not JSON values: the block never reaches the scan
        got = _flat_keys(blob, n, first_keys)
        first = _pairs(lines[0])
        want = (first is not None and len(set(first)) == len(first)
                and all(_pairs(x) == first for x in lines))
        assert not got or want, lines


@pytest.mark.parametrize("items", [
    ["b", "a", "ab", "a b", "A", "é", "e\u0301", "\U0001F600", "a\x00b", "", "aa", "a"],
    ["x\x00", "x", "x\x00", "x"],  # a trailing NUL: NumPy's strings would drop it
])
def test_sort_order_is_pythons(items: list[str]) -> None:
    """The frame's rows are sorted as pandas (Python's string order) sorts them, ties kept
    in file order."""
    from tomstats.analysis.log_stream import _SORT, _sort_order

    n = 3 * len(items)
    df = pd.DataFrame({"model": (["m2", "m1", "m10"] * len(items))[:n],
                       "item_id": items * 3, "sample": [0, 1] * (n // 2) + [0] * (n % 2),
                       "tom_order": [i % 2 for i in range(n)],
                       "context_words": [200] * n, "row": range(n)})
    want = df.sort_values(list(_SORT), kind="stable")["row"].tolist()
    order = _sort_order(df)
    assert (order is None) == any(s.endswith("\x00") for s in items)
    if order is not None:
        assert df["row"].to_numpy()[order].tolist() == want


@pytest.mark.parametrize("field,value", [
    ("mislead_distance", None), ("mislead_distance", 2.0), ("n_words", 1.5),
    ("n_words", 2**70), ("mislead_distance", 2**70), ("correct", None),
])
def test_integer_columns_are_typed_alike(field: str, value, tmp_path: Path) -> None:
    """The integer columns are made as the runner's reader makes them (or refused alike)."""
    recs = _records(1, 6)
    recs[2] = {**recs[2], field: value, **({"status": "error"} if field == "correct" else {})}
    p = _write(tmp_path / "run.jsonl", recs)
    try:
        want = _runner(p)
    except (ValueError, TypeError, OverflowError) as exc:
        with pytest.raises(type(exc)) as stream:
            read_log_stream(p)
        assert str(stream.value) == str(exc)
    else:
        _same(p)
        assert want[field].dtype == read_log_stream(p)[field].dtype


@pytest.mark.parametrize("field,value", [("n_words", 1.5), ("n_characters", "3"),
                                         ("prompt_id", 1.0), ("mislead_distance", True)])
def test_count_fields_are_checked_not_truncated(field: str, value: Any, tmp_path: Path) -> None:
    recs = _records(2, 12)
    recs[5] = {**recs[5], field: value}
    p = _write(tmp_path / "run.jsonl", recs, (), "\n")
    needle = f":6: field {field!r} must be a non-negative integer, got {value!r}"
    for read in (_runner, read_log_stream):
        with pytest.raises(ValueError, match=re.escape(needle)):
            read(p)
