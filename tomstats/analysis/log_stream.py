"""The runner's log read as a stream, for the analysis commands.

:func:`tomstats.evaluate.log.read_log` reads the whole file into one string, splits it,
keeps every record as a dict and builds the frame from them: a 1.1 GB log of 1,000,000
records took 49 s and 7.3 GB. :func:`read_log_stream` gives the same frame
(``errors="keep"``) and refuses the same logs, reading line by line: each record is parsed
(orjson), checked with the runner's own record check, and only the frame's columns are kept,
column by column, with repeated strings shared. Memory grows with the columns kept, not with
the records' text (prompts, responses, hashes).

It also refuses what the runner's reader lets through: a record with a duplicated key
(``{"correct": 1, ..., "correct": 0}``: the last one used to win silently), naming the file,
line and key.
"""

from __future__ import annotations

import json
import operator
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from tomstats._validate import read_text

__all__ = ["duplicated_key", "read_log_stream"]

#: Columns with few distinct strings (one object each is kept, not one per record).
_SHARED = ("model", "question_type", "agents", "target", "setting", "generator",
           "belief_status", "same_as", "answer", "parsed_answer", "error_category", "status",
           "error", "config_hash")
#: The end of a key in raw JSON: a closing quote, blanks, a colon.
_KEY_END = re.compile(rb'"\s*:')


def _n_keys(v: Any) -> int:
    """Keys of every object in a parsed JSON value."""
    if isinstance(v, dict):
        return len(v) + sum(_n_keys(x) for x in v.values() if isinstance(x, (dict, list)))
    if isinstance(v, list):
        return sum(_n_keys(x) for x in v if isinstance(x, (dict, list)))
    return 0


def _first_duplicate(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for k, _ in pairs:
        if k in seen:
            raise _Duplicate(k)
        seen.add(k)
    return dict(pairs)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def duplicated_key(line: bytes | str, parsed: Any) -> str | None:
    """The first key that appears twice in one object of the JSON text ``line``, or ``None``.

    ``parsed`` is ``line`` already parsed. Fast path: without an escaped quote (``\\"``) in
    the line every ``"…":`` in it ends a key, so their number equals the keys of the parsed
    objects exactly when no key repeats; otherwise the line is parsed again, pairs kept.
    """
    raw = line.encode("utf-8") if isinstance(line, str) else line
    if b'\\"' not in raw:
        # no quote inside a string: every '"' delimits one, so '":' ends a key (a key
        # written with blanks before its colon takes the counting path below)
        n = len(parsed) if raw.count(b"{") == 1 and isinstance(parsed, dict) else _n_keys(parsed)
        if b'" ' not in raw and b'"\t' not in raw and b'"\r' not in raw:
            if raw.count(b'":') == n:
                return None
        elif len(_KEY_END.findall(raw)) == n:
            return None
    try:
        json.loads(raw, object_pairs_hook=_first_duplicate)
    except _Duplicate as dup:
        return dup.key
    return None


def _loads(raw: bytes, p: Path, lineno: int, torn: bool) -> Any:
    """One line parsed; errors worded as :func:`tomstats.evaluate.log.read_records` words them."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        read_text(p)  # raises the error with file, line and column
        raise
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        note = " (a torn last line: re-run the evaluation to repair it)" if torn else ""
        raise ValueError(f"{p}:{lineno}: not a JSON record{note}: {exc.msg}") from exc


def read_log_stream(path: str | os.PathLike[str]) -> pd.DataFrame:
    """:func:`tomstats.evaluate.log.read_log` with ``errors="keep"``, read as a stream.

    The same frame (columns, dtypes, order, ``attrs``) and the same refusals (a malformed
    record, mixed formats, two answers for one key, two configuration hashes for a model, an
    empty log), plus one more: a record with a duplicated key.

    Raises
    ------
    ValueError
        ``path:line: ...`` naming the record at fault.
    """
    from tomstats.evaluate.log import COLUMNS, LOG_FORMAT, _check_record, belief_status

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation log {str(p)!r} does not exist")
    names = list(COLUMNS)
    cols: dict[str, list[Any]] = {c: [] for c in names}
    appends = [cols[c].append for c in names]
    getter = operator.itemgetter(*names)
    i_agents, i_belief, i_same = (names.index(c) for c in ("agents", "belief_status", "same_as"))
    shared_cols = [names.index(c) for c in _SHARED if c in names]
    shared: dict[Any, Any] = {}  # one object per distinct string of the repetitive columns
    absent: list[str] = []
    row_of: dict[tuple[Any, Any, Any], int] = {}
    line_of: list[int] = []
    hash_of: list[str] = []
    first_format: tuple[int, Any] | None = None
    with open(p, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            torn = not raw.endswith(b"\n")
            rec = _loads(raw, p, lineno, torn)
            if rec is None:
                continue
            if not isinstance(rec, dict):
                raise ValueError(f"{p}:{lineno}: a record must be a JSON object, "
                                 f"got {type(rec).__name__}")
            dup = duplicated_key(raw, rec)
            if dup is not None:
                raise ValueError(f"{p}:{lineno}: the key {dup!r} appears twice in one record; "
                                 "a record with a repeated key is ambiguous (which value "
                                 "counts?)")
            fmt = rec.get("format")
            if first_format is None:
                first_format = (lineno, fmt)
                if fmt != LOG_FORMAT:
                    raise ValueError(f"{p}:{lineno}: log format {fmt!r} is not supported "
                                     f"(expected {LOG_FORMAT!r})")
            elif fmt != first_format[1]:
                raise ValueError(f"{p}:{lineno}: mixed log format versions: {fmt!r} here, "
                                 f"{first_format[1]!r} on line {first_format[0]}")
            _check_record(p, lineno, rec)
            key = (rec["model"], rec["item_id"], rec["sample"])
            i = row_of.get(key)
            if i is not None and cols["status"][i] == "ok":
                raise ValueError(f"{p}:{lineno}: duplicated key (model={key[0]!r}, "
                                 f"item_id={key[1]!r}, sample={key[2]}): already answered on "
                                 f"line {line_of[i]}")
            for c in absent:  # optional fields this log's records lack
                if c not in rec:
                    rec[c] = None
            try:
                row = list(getter(rec))
            except KeyError:
                absent = [c for c in names if c not in rec]
                row = [rec.get(c) for c in names]
            agents = row[i_agents]
            row[i_agents] = ">".join(agents) if isinstance(agents, list) else str(agents or "")
            row[i_belief] = belief_status(rec)
            row[i_same] = row[i_same] or ""
            for j in shared_cols:
                v = row[j]
                if type(v) is str:
                    row[j] = shared.setdefault(v, v)
            if i is None:
                row_of[key] = len(line_of)
                line_of.append(lineno)
                hash_of.append(rec["config_hash"])
                for app, v in zip(appends, row, strict=True):
                    app(v)
            else:  # a later record of the key (after errors) replaces it
                line_of[i], hash_of[i] = lineno, rec["config_hash"]
                for c, v in zip(names, row, strict=True):
                    cols[c][i] = v
    if not line_of:
        raise ValueError(f"evaluation log {str(p)!r} holds no records")
    hashes: dict[str, tuple[str, int]] = {}
    for model, h, lineno in zip(cols["model"], hash_of, line_of, strict=True):
        first = hashes.setdefault(model, (h, lineno))
        if first[0] != h:
            raise ValueError(f"{p}:{lineno}: model {model!r} logged under two configuration "
                             f"hashes ({first[0][:12]}… on line {first[1]}, {h[:12]}…)")
    del row_of, shared
    df = pd.DataFrame(cols, columns=names)
    del cols
    df["correct"] = df["correct"].astype("Int64")
    for c in ("sample", "tom_order", "context_words", "n_words", "n_characters", "prompt_id"):
        df[c] = df[c].astype("int64")
    df["mislead_distance"] = df["mislead_distance"].astype("Int64")
    df = df.sort_values(["model", "context_words", "tom_order", "item_id", "sample"],
                        kind="stable").reset_index(drop=True)
    df.attrs["log_format"] = LOG_FORMAT
    df.attrs["config_hashes"] = {m: h for m, (h, _) in sorted(hashes.items())}
    return df
