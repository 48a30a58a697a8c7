"""The runner's log read as a stream, for the analysis commands.

:func:`tomstats.evaluate.log.read_log` reads the whole file into one string, splits it,
keeps every record as a dict and builds the frame from them: a 1.1 GB log of 1,000,000
records took 49 s and 7.3 GB. :func:`read_log_stream` gives the same frame
(``errors="keep"``) and refuses the same logs, reading a block of lines at a time.

A block is read by msgspec, each record decoded into a struct of only the fields the frame
and the runner's checks use (the checked ones typed as
:func:`tomstats.evaluate.log.check_record` wants them; msgspec skips the others in C), when a
scan of the block's bytes shows that every record is a flat object with the keys of the first,
none twice (:func:`_flat_keys`). Otherwise the block's records are parsed whole (orjson) and
checked together, their keys counted against the keys written; a block that fails a check is
read again record by record with the runner's own checks, which name the first record at
fault. Only the columns asked for are kept, with repeated strings shared: memory grows with
those columns, not with the records' text (prompts, responses, hashes).

A record with a duplicated key (``{"correct": 1, ..., "correct": 0}``) is refused, as the
runner's reader refuses it (:func:`tomstats.evaluate.log.check_unique_keys`), naming the
file, line and key.
"""

from __future__ import annotations

import gc
import json
import operator
import os
from array import array
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import orjson
import pandas as pd

from tomstats._validate import (
    check_input_size,
    check_no_nul,
    open_regular,
    read_text,
    table_header_hint,
)

__all__ = ["read_log_stream"]

#: Columns with few distinct strings (one object each is kept, not one per record).
_SHARED = ("model", "question_type", "agents", "target", "setting", "generator",
           "belief_status", "same_as", "pair_id", "answer", "last_location",
           "previous_location", "parsed_answer", "error_category", "status", "error",
           "config_hash")


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
        if lineno == 1:
            note += table_header_hint(text)
        raise ValueError(f"{p}:{lineno}: not a JSON record{note}: {exc.msg}") from exc


#: Bytes of log read per block (about 900 records of the runner's size: the block's passes
#: over its bytes stay in the processor's cache; 16 MiB blocks took a third longer).
_BLOCK_BYTES = 1 << 20
#: The columns the frame is sorted by (the runner's order).
_SORT = ("model", "context_words", "tom_order", "item_id", "sample")
#: Integer columns of the frame and the nullable ones.
_INT64 = ("sample", "tom_order", "context_words", "n_words", "n_characters", "prompt_id")
_NULLABLE = ("correct", "mislead_distance", "n_candidates")
#: The outcome pairs an answered or an error record may hold, with their types.
_OUTCOMES = frozenset({("ok", int, 0), ("ok", int, 1), ("error", type(None), None)})


#: The fields checked a block at a time.
_CHECKED = ("format", "status", "correct", "sample", "tom_order", "context_words", "model",
            "item_id")
_STR_OR_NONE = frozenset({str, type(None)})
#: The checked fields as msgspec reads them: what :func:`tomstats.evaluate.log.check_record`
#: accepts (``correct`` with its status: :data:`_TYPED_OUTCOMES`; the format: the one read).
_TYPED: dict[str, Any] = {
    "status": Literal["ok", "error"],
    "correct": Literal[0, 1] | None, "model": Annotated[str, msgspec.Meta(min_length=1)],
    "item_id": Annotated[str, msgspec.Meta(min_length=1)],
    **dict.fromkeys(("sample", "tom_order", "context_words"),
                    Annotated[int, msgspec.Meta(ge=0)]),
}
#: An optional count field as msgspec reads it (what ``check_record`` accepts).
_COUNT = Annotated[int, msgspec.Meta(ge=0)] | None
#: An optional text field as msgspec reads it (``check_record``: a string or null).
_TEXT = str | None
_TYPED_OUTCOMES = frozenset({("ok", 0), ("ok", 1), ("error", None)})
#: The fields :func:`tomstats.evaluate.log.belief_status` reads.
_BELIEF = ("belief_status", "question_type", "tom_order", "last_location", "answer",
           "generator")
#: Bytes of JSON's structure that :func:`_flat_keys` looks for.
_QUOTE, _COLON, _BRACE, _NEWLINE, _BACKSLASH = b'":{\n\\'
#: The last 0 to 8 bytes of a little-endian 64-bit word.
_HIGH = np.array([~((1 << (8 * (8 - i))) - 1) & (2**64 - 1) for i in range(9)],
                 dtype=np.uint64)


def _flat_keys(blob: bytes, n: int, keys: Sequence[str]) -> bool:
    """Whether ``blob`` (``n`` valid JSON objects, each line ending with a newline) holds one
    object a line, each a flat object whose keys are ``keys`` (the first line's, none twice),
    in that order, each written as itself; ``False`` when that cannot be shown (the caller then
    reads the block another way).

    A few NumPy passes over the block's bytes. Escaped backslashes and then escaped quotes are
    removed (as :func:`tomstats.evaluate.log.key_count` does), so that every quote left
    delimits a string, and a byte after an even number of quotes lies outside strings (looked
    at only when a brace or a colon may lie within one). One brace outside strings a line: no
    object within. A colon outside strings preceded by a blank: unsure. Every other key ends
    with a quote followed by a colon; a line must hold ``len(keys)`` of these, the ``j``-th
    preceded by ``"`` and ``keys[j]`` (compared eight bytes at a time). Such bytes are a key:
    were that quote not a key's opening one, the key's first character would follow a string
    outside strings, where only ``,:}]`` and blanks may stand (keys starting with one of
    these, or holding a quote or a backslash: unsure).
    """
    k = len(keys)
    spelt = [b'"' + key.encode("utf-8") for key in keys]
    if not k or any(s[1:2] in b",:}] \t\r\n" or b"\\" in s or b'"' in s[1:] for s in spelt):
        return False
    if _BACKSLASH in blob:
        blob = blob.replace(b"\\\\", b"").replace(b'\\"', b"")
    a = np.frombuffer(blob, dtype=np.uint8)
    colons = np.flatnonzero(a == _COLON)
    before = a[colons - 1]  # (no line starts with a colon)
    close = colons[before == _QUOTE] - 1
    if (np.count_nonzero(a == _BRACE) != n or len(close) != n * k
            or (before <= ord(" ")).any()):
        # braces or colons within strings, or a key, blanks and its colon: the quotes tell
        # (an even number of them before a byte: it lies outside strings)
        quotes = np.flatnonzero(a == _QUOTE)
        braces = np.flatnonzero(a == _BRACE)
        if np.count_nonzero(np.searchsorted(quotes, braces) % 2 == 0) != n:
            return False  # an object within a record
        outside = np.searchsorted(quotes, colons) % 2 == 0
        if (outside & (before <= ord(" "))).any():
            return False  # maybe a key, blanks, then its colon
        close = colons[outside & (before == _QUOTE)] - 1
    size = np.array(list(map(len, spelt)))
    longest = int(size.max())
    if len(close) != n * k:
        return False
    ends = np.flatnonzero(a == _NEWLINE)
    rows = close.reshape(n, k)
    if len(ends) != n or (rows[1:, 0] <= ends[:-1]).any() or (rows[:, -1] >= ends).any():
        return False  # not k of them on every line
    if any(blob[j - len(s):j] != s for s, j in zip(spelt, rows[0].tolist(), strict=True)):
        return False  # the first line, in Python; the others eight bytes at a time:
    if n == 1:
        return True
    rows = rows[1:]
    if rows[0, 0] < longest + 8:
        return False
    words = np.ndarray((len(a) - 7,), dtype="<u8", buffer=a, strides=(1,))
    for w in range(0, longest, 8):  # the bytes ending w bytes before each closing quote
        j = np.flatnonzero(size > w)  # the keys that long
        mask = _HIGH[np.minimum(size[j] - w, 8)]
        want = np.array([int.from_bytes((bytes(w + 8) + s)[len(s):len(s) + 8], "little")
                         for s in spelt], dtype=np.uint64)[j] & mask
        at = rows if len(j) == k else rows[:, j]
        if not ((words[at - (w + 8)] & mask) == want).all():
            return False
    return True


class _Fallback(Exception):
    """A block the vectorised checks do not pass: it is read again record by record."""


class _Reader:
    """The frame's columns collected block by block, and what the checks need across blocks.

    Each block is read by the first of three paths that succeeds: msgspec, decoding only the
    fields the frame and the checks use, when every record of the block is a flat object with
    the keys of its first record (:func:`_flat_keys`; the runner writes every record with
    the same keys); orjson, every record whole, its keys counted against the keys written
    (:func:`tomstats.evaluate.log.key_count`); record by record, with the runner's checks and
    messages.
    """

    def __init__(self, p: Path, columns: list[str]) -> None:
        from tomstats.evaluate.log import COUNT_FIELDS, LOG_FORMAT, REQUIRED_FIELDS, TEXT_FIELDS

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
        fields = list(dict.fromkeys([*_CHECKED, *self.names,
                                     *(_BELIEF if "belief_status" in self.names else ())]))
        # the checked fields typed as the runner's checks want them (msgspec refuses a bool
        # or a float for an int), the others any JSON value; a field that may be absent: None
        typed = {**_TYPED, **dict.fromkeys(COUNT_FIELDS, _COUNT),
                 **dict.fromkeys(TEXT_FIELDS, _TEXT),
                 "format": Literal[LOG_FORMAT]}  # the one format read
        record = msgspec.defstruct(
            "_Record", [(f, typed.get(f, Any)) if f in self.required
                        else (f, typed.get(f, Any), None)
                        for f in fields], kw_only=True, gc=False)
        self.decode_lines = msgspec.json.Decoder(record).decode_lines

    # ------------------------------------------------------------------ the fast paths
    def block(self, blob: bytes, first: int, *, last: bool = False) -> int:
        """Read the lines of ``blob``, which ends with a newline unless it is the file's
        ``last`` piece (``first``: the first line's number); returns the lines read."""
        if not last:
            try:
                field, n = self._decoded(blob)
            except _Fallback:
                pass
            else:
                self._commit(field, range(first, first + n), n)
                return n
        lines = blob.split(b"\n")
        if not last:
            lines.pop()  # the empty piece after the final newline
        linenos: Sequence[int] = range(first, first + len(lines))
        raws: Sequence[bytes] = lines
        if b"" in lines or any(map(bytes.isspace, lines)):  # blank lines: skipped
            numbered = [(i, raw) for i, raw in zip(linenos, lines, strict=True)
                        if raw and not raw.isspace()]
            linenos, raws = zip(*numbered, strict=True) if numbered else ((), ())
        if not raws:
            return len(lines)
        try:
            field, recs = self._parsed(raws, blob)
        except _Fallback:
            for i, (lineno, raw) in enumerate(zip(linenos, raws, strict=True)):
                self.one(raw, lineno, torn=last and i == len(raws) - 1)
            return len(lines)
        self._commit(field, linenos, len(raws))
        return len(lines)

    def _decoded(self, blob: bytes) -> tuple[Any, int]:
        """The block (whole lines) read by msgspec, only the fields used, and its number of
        records, when every line is one flat record with the first record's keys, all the
        required ones, and passes the runner's checks; else :class:`_Fallback`."""
        from tomstats.evaluate.log import LOG_FORMAT

        if not blob.isascii():
            try:  # msgspec does not check the strings it skips
                blob.decode("utf-8")
            except UnicodeDecodeError:
                raise _Fallback from None
        try:  # (a stream of JSON values: one a line is checked by _flat_keys)
            recs = self.decode_lines(blob)
            keys = tuple(orjson.loads(blob[:blob.index(b"\n")]))  # (one of each)
        except (ValueError, RecursionError):  # msgspec's and orjson's errors are ValueErrors
            raise _Fallback from None
        if not (recs and self.required.issubset(keys) and _flat_keys(blob, len(recs), keys)):
            raise _Fallback

        def field(c: str) -> list[Any]:
            return list(map(operator.attrgetter(c), recs))

        if not set(zip(field("status"), field("correct"), strict=True)) <= _TYPED_OUTCOMES:
            raise _Fallback  # the types are msgspec's; the pairs are not
        if self.first_format is None:
            self.first_format = (-1, LOG_FORMAT)  # the line is set when the block is added
        return field, len(recs)

    def _parsed(self, raws: Sequence[bytes], blob: bytes) -> tuple[Any, list[Any]]:
        """The block read by orjson, every record whole, when every check passes at once;
        else :class:`_Fallback` (the record-by-record path then raises the runner's message
        for the first record at fault)."""
        from tomstats.evaluate.log import key_count, parsed_key_count

        try:
            recs = list(map(orjson.loads, raws))
            if set(map(type, recs)) != {dict}:
                raise _Fallback
            # no key repeats in any record: the keys written number the keys parsed (each
            # written key is counted, a repeated one is parsed once; see duplicated_key)
            # (the top-level keys first: equal, there are no nested objects either)
            written = key_count(blob)
            if (written != sum(map(len, recs))
                    and written != sum(map(parsed_key_count, recs))):
                raise _Fallback
            # a field missing: the records of one writer share one order of keys
            if not all(map(self.required.issubset, set(map(tuple, recs)))):
                raise _Fallback
        except (orjson.JSONDecodeError, TypeError):  # TypeError: an unhashable value
            raise _Fallback from None
        required = self.required

        def field(c: str) -> list[Any]:
            if c in required:
                return list(map(operator.itemgetter(c), recs))
            return [r.get(c) for r in recs]

        self._check_block(field)
        return field, recs

    def _check_block(self, field: Any) -> None:
        """The runner's checks of a block's records, a column at a time (``field(name)``: the
        column); :class:`_Fallback` when one fails."""
        from tomstats.evaluate.log import COUNT_FIELDS, LOG_FORMAT, TEXT_FIELDS

        try:
            fmt = self.first_format[1] if self.first_format else LOG_FORMAT
            if set(field("format")) != {fmt}:
                raise _Fallback
            correct = field("correct")
            if not set(zip(field("status"), map(type, correct), correct,
                           strict=True)) <= _OUTCOMES:
                raise _Fallback
            for c in ("sample", "tom_order", "context_words"):
                col = field(c)
                if set(map(type, col)) != {int} or min(col) < 0:
                    raise _Fallback
            for c in ("model", "item_id"):
                col = field(c)
                if set(map(type, col)) != {str} or not all(col):
                    raise _Fallback
            for c in COUNT_FIELDS:
                if c in self.names:
                    col = [v for v in field(c) if v is not None]
                    if col and (set(map(type, col)) != {int} or min(col) < 0):
                        raise _Fallback
            for c in TEXT_FIELDS:
                if c in self.names and not set(map(type, field(c))) <= _STR_OR_NONE:
                    raise _Fallback
        except TypeError:  # an unhashable value
            raise _Fallback from None
        if self.first_format is None:
            self.first_format = (-1, fmt)  # the line is set when the block is added

    # ------------------------------------------------------------------ the exact path
    def one(self, raw: bytes, lineno: int, *, torn: bool = False) -> None:
        """One line, checked as :func:`tomstats.evaluate.log.checked_records` checks it."""
        from tomstats.evaluate.log import LOG_FORMAT, check_record, check_unique_keys

        p = self.p
        rec = _loads(raw, p, lineno, torn)
        if rec is None:
            return
        if not isinstance(rec, dict):
            raise ValueError(f"{p}:{lineno}: a record must be a JSON object, "
                             f"got {type(rec).__name__}")
        check_unique_keys(p, lineno, raw, rec)
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
        self._commit(lambda c: [rec.get(c)], (lineno,), 1)

    # ------------------------------------------------------------------ all
    def _column(self, c: str, field: Any, n: int) -> list[Any]:
        """The frame's column ``c`` of ``n`` records (``field(name)``: a field of each)."""
        from tomstats.evaluate.log import belief_status

        if c == "agents":
            return [">".join(a) if isinstance(a, list) else str(a or "") for a in field(c)]
        if c == "belief_status":
            fields = [field(f) for f in _BELIEF]
            return [belief_status(dict(zip(_BELIEF, v, strict=True)))
                    for v in zip(*fields, strict=True)] if n else []
        if c in ("same_as", "pair_id"):
            return [v or "" for v in field(c)]
        return field(c)

    def _commit(self, field: Any, linenos: Sequence[int], n: int) -> None:
        """Add ``n`` checked records (``field(name)``: that field of each): new keys as rows,
        a later record of a key in its row."""
        if self.first_format is not None and self.first_format[0] == -1:
            self.first_format = (linenos[0], self.first_format[1])
        new: dict[str, list[Any]] = {}
        for c in self.names:
            col = self._column(c, field, n)
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


def _rest_of_line(fh: Any, p: Path, offset: int) -> bytes:
    """The rest of the line a block ends in, read in pieces: each refused if it holds a NUL
    byte, the line refused when it outgrows the memory budget (a file of one endless line)."""
    pieces: list[bytes] = []
    size = 0
    while piece := fh.readline(_BLOCK_BYTES):
        check_no_nul(piece, offset + size, p)
        pieces.append(piece)
        size += len(piece)
        if piece.endswith(b"\n"):
            break
        check_input_size(p, size)
    return b"".join(pieces)


def _read_blocks(p: Path, names: list[str]) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The columns (``names`` and those the checks use) and each model's hash of the log."""
    reader = _Reader(p, names)
    lineno = 1
    offset = 0
    with open_regular(p) as fh:
        while chunk := fh.read(_BLOCK_BYTES):
            check_no_nul(chunk, offset, p)
            if not chunk.endswith(b"\n"):
                chunk += _rest_of_line(fh, p, offset + len(chunk))
            offset += len(chunk)
            if chunk.endswith(b"\n"):
                lineno += reader.block(chunk, lineno)
                continue
            cut = chunk.rfind(b"\n") + 1  # the file's end: a last line without its newline
            if cut:
                lineno += reader.block(chunk[:cut], lineno)
            reader.block(chunk[cut:], lineno, last=True)
    if not reader.line_of:
        raise ValueError(f"evaluation log {str(p)!r} holds no records")
    return reader.cols, reader.check_hashes()


def _array(name: str, col: list[Any]) -> Any:
    """An integer column (:data:`_INT64`, :data:`_NULLABLE`) of Python ints (and ``None``) as
    the array pandas makes of it with ``astype``, several times faster; anything else as it
    is (pandas infers its type, as from the runner's records)."""
    types = set(map(type, col))
    try:
        if name in _INT64 and types == {int}:
            return np.array(col, dtype=np.int64)
        if name in _NULLABLE and types <= {int, type(None)}:
            values = np.array(col, dtype=object)
            missing = values == None  # noqa: E711 - elementwise
            return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64),
                                          missing)
    except OverflowError:  # beyond 64 bits: pandas says so, as for the runner's frame
        pass
    return col


def _sort_order(df: pd.DataFrame) -> np.ndarray | None:
    """The rows in the runner's order (a stable sort by :data:`_SORT`), by NumPy's lexsort
    with the strings as fixed-width arrays (several times faster than pandas' sort of Python
    strings); ``None`` where that could differ (a string ending in a NUL, which such an array
    drops) or the arrays would take more than 128 MiB."""
    keys = []
    for c in reversed(_SORT):
        col = df[c].to_numpy()
        if col.dtype == object:
            width = max(map(len, col), default=1)
            if 4 * width * len(col) > 1 << 27 or (
                    "\x00" in "".join(col) and any(v.endswith("\x00") for v in col)):
                return None
            col = col.astype(f"<U{max(width, 1)}")
        keys.append(col)
    return np.lexsort(keys)


def read_log_stream(path: str | os.PathLike[str],
                    columns: Collection[str] | None = None) -> pd.DataFrame:
    """:func:`tomstats.evaluate.log.read_log` with ``errors="keep"``, read as a stream.

    The same frame (columns, dtypes, order, ``attrs``) and the same refusals (a malformed
    record, a record with a duplicated key, mixed formats, two answers for one key, two
    configuration hashes for a model, an empty log).

    The log is read in blocks of about :data:`_BLOCK_BYTES`, each decoded (msgspec, only the
    fields used, or orjson) and checked at once, column by column; a block that fails any
    check is read again line by line with the runner's own checks, which name the first
    record at fault (see the module's docstring).

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
        df = pd.DataFrame({c: _array(c, col) for c, col in cols.items()}, columns=list(cols))
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
    order = _sort_order(df)
    df = (df.sort_values(list(_SORT), kind="stable") if order is None else df.take(order))
    df = df.reset_index(drop=True)[names]
    df.attrs["log_format"] = LOG_FORMAT
    df.attrs["config_hashes"] = hashes
    return df
