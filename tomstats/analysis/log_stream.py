"""The runner's log read as a stream, for the analysis commands.

:func:`tomstats.evaluate.log.read_log` reads the whole file into one string, splits it,
keeps every record as a dict and builds the frame from them: a 1.1 GB log of 1,000,000
records took 49 s and 7.3 GB. :func:`read_log_stream` gives the same frame
(``errors="keep"``) and refuses the same logs, reading a block of lines at a time: the
block's records are parsed (orjson) and checked together, a column at a time (the runner's
rules: :func:`tomstats.evaluate.log.check_record`); a block that fails a check is read again
record by record with the runner's own checks, which name the first record at fault. Only
the columns asked for are kept, with repeated strings shared: memory grows with those
columns, not with the records' text (prompts, responses, hashes).

It also refuses what the runner's reader lets through: a record with a duplicated key
(``{"correct": 1, ..., "correct": 0}``: the last one used to win silently), naming the file,
line and key.
"""

from __future__ import annotations

import gc
import json
import operator
import os
import re
from array import array
from collections.abc import Collection, Sequence
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
#: A closing quote followed by a blank (one search instead of a count per blank).
_QUOTE_BLANK = re.compile(rb'"\s')


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


def _key_count(raw: bytes) -> int:
    """Keys written in the valid JSON text ``raw`` (each occurrence; one line or many).

    Escaped backslashes (``\\\\``) and then escaped quotes (``\\"``) are removed first
    (left to right, as JSON reads them), so that every quote left delimits a string; a string
    followed by blanks and a colon is a key, and nothing else is.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if _QUOTE_BLANK.search(raw):
        return len(_KEY_END.findall(raw))
    return raw.count(b'":')


def duplicated_key(line: bytes | str, parsed: Any) -> str | None:
    """The first key that appears twice in one object of the JSON text ``line``, or ``None``.

    ``parsed`` is ``line`` already parsed. Fast path: the keys written in the line
    (:func:`_key_count`) number the keys of the parsed objects exactly when no key repeats
    (a repeated key is kept once); otherwise the line is parsed again, pairs kept, to name it.
    """
    raw = line.encode("utf-8") if isinstance(line, str) else line
    n = len(parsed) if raw.count(b"{") == 1 and isinstance(parsed, dict) else _n_keys(parsed)
    if _key_count(raw) == n:
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


#: Bytes of log read per block (about 10,000 records of the runner's size).
_BLOCK_BYTES = 1 << 24
#: The columns the frame is sorted by (the runner's order).
_SORT = ("model", "context_words", "tom_order", "item_id", "sample")
#: Integer columns of the frame and the nullable ones.
_INT64 = ("sample", "tom_order", "context_words", "n_words", "n_characters", "prompt_id")
_NULLABLE = ("correct", "mislead_distance")
#: The outcome pairs an answered or an error record may hold, with their types.
_OUTCOMES = frozenset({("ok", int, 0), ("ok", int, 1), ("error", type(None), None)})


#: The fields checked a block at a time, and their getter.
_CHECKED = ("format", "status", "correct", "sample", "tom_order", "context_words", "model",
            "item_id")
_GET_CHECKED = operator.itemgetter(*_CHECKED)
_STR_OR_NONE = frozenset({str, type(None)})


class _Fallback(Exception):
    """A block the vectorised checks do not pass: it is read again record by record."""


class _Reader:
    """The frame's columns collected block by block, and what the checks need across blocks."""

    def __init__(self, p: Path, columns: list[str]) -> None:
        from tomstats.evaluate.log import REQUIRED_FIELDS

        self.p = p
        self.out = columns
        # kept for the checks and the sort even when the frame does not show them
        self.names = list(dict.fromkeys([*columns, *_SORT, "status", "config_hash"]))
        self.cols: dict[str, list[Any]] = {c: [] for c in self.names}
        self.required = frozenset(REQUIRED_FIELDS)
        self.shared: dict[str, str] = {}  # one object per distinct string of _SHARED columns
        self.row_of: dict[tuple[Any, Any, Any], int] = {}
        self.line_of = array("q")
        self.first_format: tuple[int, Any] | None = None

    # ------------------------------------------------------------------ the fast path
    def block(self, blob: bytes, first: int, *, last: bool = False) -> int:
        """Read the lines of ``blob``, which ends with a newline unless it is the file's
        ``last`` piece (``first``: the first line's number); returns the lines read."""
        lines = blob.split(b"\n")
        if not last:
            lines.pop()  # the empty piece after the final newline
        linenos: Sequence[int] = range(first, first + len(lines))
        raws: Sequence[bytes] = lines
        if b"" in lines or any(map(bytes.isspace, lines)):  # blank lines: skipped
            numbered = [(i, raw) for i, raw in zip(linenos, lines, strict=True)
                        if raw and not raw.isspace()]
            linenos, raws = zip(*numbered, strict=True) if numbered else ((), ())
        if raws:
            try:
                recs, got = self._checked(raws, blob)
            except _Fallback:
                for i, (lineno, raw) in enumerate(zip(linenos, raws, strict=True)):
                    self.one(raw, lineno, torn=last and i == len(raws) - 1)
            else:
                self._commit(recs, linenos, got)
        return len(lines)

    def _checked(self, raws: Sequence[bytes], blob: bytes
                 ) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
        """The block's records and the checked columns when every check passes at once; else
        :class:`_Fallback` (the record-by-record path then raises the runner's message for the
        first record at fault)."""
        from tomstats.evaluate.log import LOG_FORMAT

        try:
            recs = list(map(orjson.loads, raws))
            if set(map(type, recs)) != {dict}:
                raise _Fallback
            # no key repeats in any record: the keys written number the keys parsed (each
            # written key is counted, a repeated one is parsed once; see duplicated_key)
            # (the top-level keys first: equal, there are no nested objects either)
            written = _key_count(blob)
            if written != sum(map(len, recs)) and written != sum(map(_n_keys, recs)):
                raise _Fallback
            # a field missing: the records of one writer share one order of keys
            if not all(map(self.required.issubset, set(map(tuple, recs)))):
                raise _Fallback
            got = dict(zip(_CHECKED, zip(*map(_GET_CHECKED, recs), strict=True),
                           strict=True))
            fmt = self.first_format[1] if self.first_format else LOG_FORMAT
            if set(got["format"]) != {fmt}:
                raise _Fallback
            if not set(zip(got["status"], map(type, got["correct"]), got["correct"],
                           strict=True)) <= _OUTCOMES:
                raise _Fallback
            for c in ("sample", "tom_order", "context_words"):
                if set(map(type, got[c])) != {int} or min(got[c]) < 0:
                    raise _Fallback
            for c in ("model", "item_id"):
                if set(map(type, got[c])) != {str} or not all(got[c]):
                    raise _Fallback
        except (orjson.JSONDecodeError, TypeError):  # TypeError: an unhashable value
            raise _Fallback from None
        if self.first_format is None:
            self.first_format = (-1, fmt)  # the line is set when the block is added
        return recs, got

    # ------------------------------------------------------------------ the exact path
    def one(self, raw: bytes, lineno: int, *, torn: bool = False) -> None:
        """One line, checked as :func:`tomstats.evaluate.log.checked_records` checks it."""
        from tomstats.evaluate.log import LOG_FORMAT, check_record

        p = self.p
        rec = _loads(raw, p, lineno, torn)
        if rec is None:
            return
        if not isinstance(rec, dict):
            raise ValueError(f"{p}:{lineno}: a record must be a JSON object, "
                             f"got {type(rec).__name__}")
        dup = duplicated_key(raw, rec)
        if dup is not None:
            raise ValueError(f"{p}:{lineno}: the key {dup!r} appears twice in one record; "
                             "a record with a repeated key is ambiguous (which value "
                             "counts?)")
        fmt = rec.get("format")
        if self.first_format is None:
            self.first_format = (lineno, fmt)
            if fmt != LOG_FORMAT:
                raise ValueError(f"{p}:{lineno}: log format {fmt!r} is not supported "
                                 f"(expected {LOG_FORMAT!r})")
        elif fmt != self.first_format[1]:
            raise ValueError(f"{p}:{lineno}: mixed log format versions: {fmt!r} here, "
                             f"{self.first_format[1]!r} on line {self.first_format[0]}")
        check_record(p, lineno, rec)
        self._commit([rec], (lineno,))

    # ------------------------------------------------------------------ both
    def _commit(self, recs: list[dict[str, Any]], linenos: Sequence[int],
                got: dict[str, list[Any]] | None = None) -> None:
        """Add checked records (``got``: columns already taken from them): new keys as rows,
        a later record of a key in its row."""
        from tomstats.evaluate.log import belief_status

        if self.first_format is not None and self.first_format[0] == -1:
            self.first_format = (linenos[0], self.first_format[1])
        new: dict[str, list[Any]] = {}
        for c in self.names:
            if c == "agents":
                col = [">".join(a) if isinstance(a, list) else str(a or "")
                       for a in map(operator.itemgetter(c), recs)]
            elif c == "belief_status":
                col = list(map(belief_status, recs))
            elif c == "same_as":
                col = [r.get(c) or "" for r in recs]
            elif got is not None and c in got:
                col = got[c]
            elif c in self.required:
                col = list(map(operator.itemgetter(c), recs))
            else:
                col = [r.get(c) for r in recs]
            if c in _SHARED:
                sh = self.shared
                if set(map(type, col)) <= _STR_OR_NONE:  # (not 1 for True, as a dict would)
                    col = list(map(sh.setdefault, col, col))
                else:
                    col = [sh.setdefault(v, v) if type(v) is str else v for v in col]
            new[c] = col
        keys = list(zip(new["model"], new["item_id"], new["sample"], strict=True))
        n0 = len(self.line_of)
        if len(set(keys)) == len(keys) and self.row_of.keys().isdisjoint(keys):
            self.row_of.update(zip(keys, range(n0, n0 + len(keys)), strict=True))
            self.line_of.extend(linenos)
            for c, col in new.items():
                self.cols[c].extend(col)
            return
        status = self.cols["status"]
        for j, key in enumerate(keys):  # retried keys (an error, then a later record)
            i = self.row_of.get(key)
            if i is not None and status[i] == "ok":
                raise ValueError(f"{self.p}:{linenos[j]}: duplicated key (model={key[0]!r}, "
                                 f"item_id={key[1]!r}, sample={key[2]}): already answered on "
                                 f"line {self.line_of[i]}")
            if i is None:
                self.row_of[key] = len(self.line_of)
                self.line_of.append(linenos[j])
                for c, col in new.items():
                    self.cols[c].append(col[j])
            else:
                self.line_of[i] = linenos[j]
                for c, col in new.items():
                    self.cols[c][i] = col[j]

    def check_hashes(self) -> dict[str, str]:
        """Each model's one configuration hash (two for one model: the runner's message)."""
        models, hashes = self.cols["model"], self.cols["config_hash"]
        try:
            pairs = dict.fromkeys(zip(models, hashes, strict=True))
        except TypeError:  # a hash that is not a string: the loop below says so
            pairs = {}
        if pairs and len({m for m, _ in pairs}) == len(pairs):
            return dict(sorted(pairs))
        first: dict[str, tuple[str, int]] = {}
        for model, h, lineno in zip(models, hashes, self.line_of, strict=True):
            seen = first.setdefault(model, (h, lineno))
            if seen[0] != h:
                raise ValueError(f"{self.p}:{lineno}: model {model!r} logged under two "
                                 f"configuration hashes ({seen[0][:12]}… on line {seen[1]}, "
                                 f"{h[:12]}…)")
        return {m: h for m, (h, _) in sorted(first.items())}


def _read_blocks(p: Path, names: list[str]) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The columns (``names`` and those the checks use) and each model's hash of the log."""
    reader = _Reader(p, names)
    lineno = 1
    with open(p, "rb") as fh:
        pieces: list[bytes] = []  # of a line not ended yet
        while chunk := fh.read(_BLOCK_BYTES):
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                pieces.append(chunk)
                continue
            lineno += reader.block(b"".join([*pieces, chunk[:cut]]), lineno)
            pieces = [chunk[cut:]]
        tail = b"".join(pieces)
        if tail:  # a last line without its newline
            reader.block(tail, lineno, last=True)
    if not reader.line_of:
        raise ValueError(f"evaluation log {str(p)!r} holds no records")
    return reader.cols, reader.check_hashes()


def read_log_stream(path: str | os.PathLike[str],
                    columns: Collection[str] | None = None) -> pd.DataFrame:
    """:func:`tomstats.evaluate.log.read_log` with ``errors="keep"``, read as a stream.

    The same frame (columns, dtypes, order, ``attrs``) and the same refusals (a malformed
    record, mixed formats, two answers for one key, two configuration hashes for a model, an
    empty log), plus one more: a record with a duplicated key.

    The log is read in blocks of about :data:`_BLOCK_BYTES`: each block's lines are parsed
    (orjson) and checked at once, column by column; a block that fails any check is read
    again line by line with the runner's own checks, which name the first record at fault.

    Parameters
    ----------
    path : path-like
        The runner's JSON Lines log.
    columns : collection of str, optional
        Only these of :data:`tomstats.evaluate.log.COLUMNS` (in that order); all by default.
        Every record is checked all the same; memory grows with the columns kept.

    Raises
    ------
    ValueError
        ``path:line: ...`` naming the record at fault, or a column that is not one of
        the frame's.
    """
    from tomstats.evaluate.log import COLUMNS, LOG_FORMAT

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation log {str(p)!r} does not exist")
    if columns is None:
        names = list(COLUMNS)
    else:
        unknown = sorted(set(columns) - set(COLUMNS))
        if unknown:
            raise ValueError(f"columns {unknown} are not columns of a runner log's frame")
        names = [c for c in COLUMNS if c in set(columns)]
    # the records are dicts made and freed by the million, and the rows' keys stay until the
    # frame is made: with the cyclic collector on, its passes walk every key kept so far
    # (the data hold no cycles)
    collecting = gc.isenabled()
    gc.disable()
    try:
        cols, hashes = _read_blocks(p, names)
        df = pd.DataFrame(cols, columns=list(cols))
        del cols
    finally:
        if collecting:
            gc.enable()
    for c in _NULLABLE:
        if c in df.columns:
            df[c] = df[c].astype("Int64")
    for c in _INT64:
        if c in df.columns:
            df[c] = df[c].astype("int64")
    df = df.sort_values(list(_SORT), kind="stable").reset_index(drop=True)
    df = df[names]
    df.attrs["log_format"] = LOG_FORMAT
    df.attrs["config_hashes"] = hashes
    return df
