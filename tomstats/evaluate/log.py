"""The evaluation log: append-only JSON Lines, one record per (model, item, sample).

Every record carries :data:`LOG_FORMAT`. A record is either answered (``status = "ok"``,
``correct`` 0 or 1, ``error_category`` the taxonomy category of the answer) or an error
(``status = "error"``, ``correct`` null, ``error`` says why, after the retry budget;
``error_category`` is ``"context_overflow"`` when the prompt did not fit the model's
context window, else ``"request_failed"``).

Fields beyond :data:`REQUIRED_FIELDS` are optional and read with a default, so that logs of
earlier versions still load: ``belief_status`` (derived when absent, :func:`belief_status`),
``same_as`` (``""``), ``pair_id`` (``""``: unpaired; items that share a ``pair_id`` are the
true- and false-belief versions of one story's question, scored together by the paired
analyses), ``last_location``, ``previous_location`` and ``n_candidates`` (missing: the
baselines of :mod:`tomstats.evaluate.baselines` and the chance level are then unknown).

Re-running a run appends only what is missing: keys with an answered record or a context
overflow (which would fail again) are skipped, keys whose last record is another error are
tried again. So a key may hold error records followed by at most one answered record;
:func:`read_log` keeps the last record of each key and refuses two answered records for
one key.
A record that holds one key twice (``{"correct": 1, ..., "correct": 0}``: which value
counts?) is refused, naming the line and the key (:func:`check_unique_keys`).

Records are written with one ``write`` call each on a file opened for appending and are
visible to readers as soon as they are complete. A run killed mid-write can leave a torn last
line; the next run truncates it (:func:`repair_tail`) before appending.

One writer at a time: a run holds an exclusive lock (:class:`LogLock`, ``fcntl.flock`` on the
sidecar file ``<log>.lock``, which records the holder's pid, host and start time) from before
it reads the log until its last record is written. A second run on the same log refuses at
once, naming the holder, or waits for it. The kernel releases a ``flock`` when its process
dies, so the lock of a killed run is never stale: the next run takes it over. Logs written by
older versions without the lock may hold a key answered twice; :func:`repair_log` keeps the
first answer of every key.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import math
import os
import re
import socket
import stat
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tomstats._io import atomic_write_text
from tomstats._validate import DuplicateKeyError, loads_unique, read_text, table_header_hint

__all__ = ["LOG_FORMAT", "REQUIRED_FIELDS", "LogLock", "LogLocked", "LogWriter", "RepairResult",
           "belief_status", "check_not_link", "check_record", "check_unique_keys",
           "duplicated_key", "key_count", "open_nofollow", "parsed_key_count", "read_log",
           "read_records", "repair_log", "repair_tail"]

#: Version tag of every log record.
LOG_FORMAT = "tomstats.evallog/1"

#: Fields every record must carry (more are allowed).
REQUIRED_FIELDS = (
    "format", "model", "config_hash", "backend", "item_id", "story_id", "sample", "status",
    "correct", "tom_order", "context_words", "n_words", "question_type", "agents", "target",
    "mislead_distance", "n_characters", "setting", "generator", "item_seed", "answer",
    "prompt_id", "prompt_hash", "request_hash", "response", "answer_text", "parsed_answer",
    "error_category", "error", "attempts", "latency_s", "prompt_tokens", "completion_tokens",
    "cached", "timestamp",
)

#: Columns of :func:`read_log`'s frame, in order.
COLUMNS = (
    "model", "item_id", "sample", "correct", "tom_order", "context_words", "question_type",
    "story_id", "n_words", "agents", "target", "mislead_distance", "n_characters",
    "setting", "generator", "item_seed", "critical_position", "belief_status", "same_as",
    "pair_id", "answer", "last_location", "previous_location", "n_candidates", "parsed_answer",
    "error_category", "status", "error", "config_hash", "prompt_id", "prompt_hash",
    "latency_s", "prompt_tokens", "completion_tokens", "cached", "timestamp",
)

Key = tuple[str, str, int]


# --------------------------------------------------------------------------- repeated keys

#: The end of a key in raw JSON: a closing quote, blanks, a colon.
_KEY_END = re.compile(rb'"\s*:')
#: A closing quote followed by a blank (one search instead of a count per blank).
_QUOTE_BLANK = re.compile(rb'"\s')


def parsed_key_count(v: Any) -> int:
    """Keys of every object in the parsed JSON value ``v`` (those within included)."""
    if isinstance(v, dict):
        return len(v) + sum(parsed_key_count(x) for x in v.values() if isinstance(x, (dict, list)))
    if isinstance(v, list):
        return sum(parsed_key_count(x) for x in v if isinstance(x, (dict, list)))
    return 0


def key_count(raw: bytes) -> int:
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

    ``parsed`` is ``line`` already parsed (by any JSON reader: each keeps one value of a
    repeated key). Fast path: the keys written in the line (:func:`key_count`) number the keys
    of the parsed objects exactly when no key repeats; otherwise the line is parsed again,
    pairs kept, to name it.
    """
    raw = line.encode("utf-8") if isinstance(line, str) else line
    flat = raw.count(b"{") == 1 and isinstance(parsed, dict)
    n = len(parsed) if flat else parsed_key_count(parsed)
    if key_count(raw) == n:
        return None
    try:
        loads_unique(raw)
    except DuplicateKeyError as dup:
        return dup.key
    return None


def check_unique_keys(p: Path, lineno: int, line: bytes | str, rec: Any) -> None:
    """Refuse a record (``line``, parsed: ``rec``) in which one object holds a key twice.

    JSON readers keep one of the values without a word (the last, for Python's): a record
    ``{"correct": 1, ..., "correct": 0}`` is ambiguous, so the log is refused, naming the file,
    the line and the key.
    """
    dup = duplicated_key(line, rec)
    if dup is not None:
        raise ValueError(f"{p}:{lineno}: the key {dup!r} appears twice in one record; "
                         "a record with a repeated key is ambiguous (which value counts?)")


def record_key(rec: Mapping[str, Any]) -> Key:
    """The (model, item_id, sample) key of a record."""
    return (rec["model"], rec["item_id"], rec["sample"])


def repair_tail(path: str | os.PathLike[str]) -> int:
    """Mend the end of a log left by a killed run.

    A last line without its final newline is truncated when it is not a complete JSON
    record (a torn write) and given its newline when it is. Returns the number of bytes
    removed (0 when nothing was removed or the file does not exist).
    """
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return 0
    with os.fdopen(open_nofollow(p, os.O_RDWR, what="evaluation log"), "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return 0
        start = data.rfind(b"\n") + 1
        try:
            complete = isinstance(json.loads(data[start:]), dict)
        except ValueError:
            complete = False
        if complete:
            fh.write(b"\n")
            removed = 0
        else:
            fh.truncate(start)
            removed = len(data) - start
        fh.flush()
        os.fsync(fh.fileno())
    return removed


def read_records(path: str | os.PathLike[str], *,
                 allow_torn_tail: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for every non-empty line; malformed JSON raises.

    With ``allow_torn_tail`` a last line without a final newline that is not valid JSON
    (a write cut short by a killed run) is skipped instead.

    Raises
    ------
    ValueError
        ``path:line: ...`` for a line that is not a JSON object (a torn last line says so).
    """
    p = Path(path)
    lines = read_text(p).split("\n")
    last = len(lines)
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == last and allow_torn_tail:
                return
            torn = " (a torn last line: re-run the evaluation to repair it)" if (
                lineno == last) else ""
            if lineno == 1:
                torn += table_header_hint(line)
            raise ValueError(f"{p}:{lineno}: not a JSON record{torn}: {exc.msg}") from exc
        if not isinstance(rec, dict):
            raise ValueError(f"{p}:{lineno}: a record must be a JSON object, "
                             f"got {type(rec).__name__}")
        check_unique_keys(p, lineno, line, rec)
        yield lineno, rec


#: Optional count fields of a record: a non-negative integer when present and not null
#: (a float or a string there is refused, never truncated or parsed).
COUNT_FIELDS = ("n_words", "n_characters", "prompt_id", "mislead_distance", "n_candidates")
#: Optional text fields of a record: a string when present and not null (``pair_id`` groups
#: the true- and false-belief versions of one story's question; the places are the answers
#: of the reality-tracker and previous-place baselines).
TEXT_FIELDS = ("pair_id", "last_location", "previous_location")


def check_record(p: Path, lineno: int, rec: Mapping[str, Any]) -> None:
    """Refuse a record that lacks a required field or holds an invalid status, outcome,
    count or key (``ValueError`` naming ``p:lineno``, the field and the value)."""
    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    if missing:
        raise ValueError(f"{p}:{lineno}: record is missing fields {missing}")
    if rec["status"] not in ("ok", "error"):
        raise ValueError(f"{p}:{lineno}: field 'status' must be 'ok' or 'error', "
                         f"got {rec['status']!r}")
    c = rec["correct"]
    if rec["status"] == "ok" and (isinstance(c, bool) or c not in (0, 1)):
        raise ValueError(f"{p}:{lineno}: field 'correct' must be 0 or 1, got {c!r} "
                         "(the outcome must be binary)")
    if rec["status"] == "error" and c is not None:
        raise ValueError(f"{p}:{lineno}: an error record must have correct = null, got {c!r}")
    for k in ("sample", "tom_order", "context_words"):
        v = rec[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{p}:{lineno}: field {k!r} must be a non-negative integer, "
                             f"got {v!r}")
    for k in COUNT_FIELDS:  # optional, but never a float or a string read as a count
        v = rec.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{p}:{lineno}: field {k!r} must be a non-negative integer, "
                             f"got {v!r}")
    for k in TEXT_FIELDS:
        v = rec.get(k)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{p}:{lineno}: field {k!r} must be a string, got {v!r}")
    for k in ("model", "item_id"):
        if not isinstance(rec[k], str) or not rec[k]:
            raise ValueError(f"{p}:{lineno}: field {k!r} must be a non-empty string, "
                             f"got {rec[k]!r}")


def checked_records(p: Path, *, allow_torn_tail: bool = False
                    ) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a log with their line numbers, each validated (:func:`read_records`),
    all of the one supported format version.

    Raises
    ------
    ValueError
        On a malformed record, an unsupported format, or mixed format versions (naming the
        line of each).
    """
    first_format: tuple[int, Any] | None = None
    for lineno, rec in read_records(p, allow_torn_tail=allow_torn_tail):
        fmt = rec.get("format")
        if first_format is None:
            first_format = (lineno, fmt)
            if fmt != LOG_FORMAT:
                raise ValueError(f"{p}:{lineno}: log format {fmt!r} is not supported "
                                 f"(expected {LOG_FORMAT!r})")
        elif fmt != first_format[1]:
            raise ValueError(f"{p}:{lineno}: mixed log format versions: {fmt!r} here, "
                             f"{first_format[1]!r} on line {first_format[0]}")
        check_record(p, lineno, rec)
        yield lineno, rec


def load_records(path: str | os.PathLike[str], *,
                 allow_torn_tail: bool = False) -> dict[Key, tuple[int, dict[str, Any]]]:
    """Validate a log and return the effective record of every key, with its line number.

    ``allow_torn_tail`` skips a torn last line (see :func:`read_records`).

    Raises
    ------
    ValueError
        On a malformed line, a missing field, a non-binary outcome, mixed format versions,
        two answered records for one key, or an answered record followed by another record
        of the same key.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation log {str(p)!r} does not exist")
    out: dict[Key, tuple[int, dict[str, Any]]] = {}
    for lineno, rec in checked_records(p, allow_torn_tail=allow_torn_tail):
        key = record_key(rec)
        prev = out.get(key)
        if prev is not None and prev[1]["status"] == "ok":
            raise ValueError(f"{p}:{lineno}: duplicated key (model={key[0]!r}, "
                             f"item_id={key[1]!r}, sample={key[2]}): already answered on "
                             f"line {prev[0]}")
        out[key] = (lineno, rec)
    return out


def belief_status(rec: Mapping[str, Any]) -> str:
    """``"true"``, ``"false"`` or ``"none"``: whether a record's question asks about a true
    or a false belief (the item's ``belief_status``, copied into every record since it
    exists).

    Records of older logs lack it and get it derived: AnaToM types say it in their name; a
    ToM question of order 1 or more is a true belief when its answer is reality (its
    ``last_location``), and — without ``last_location`` in the record — a false belief for
    the StorySim generator, which made false-belief questions only before true-belief
    controls existed; everything else is ``"none"``.
    """
    given = rec.get("belief_status")
    if given in ("true", "false", "none"):
        return str(given)
    qtype = str(rec.get("question_type", ""))
    if qtype.endswith("_true_belief"):
        return "true"
    if qtype.endswith("_false_belief"):
        return "false"
    if qtype == "tom" and isinstance(rec.get("tom_order"), int) and rec["tom_order"] >= 1:
        if rec.get("last_location") is not None:
            return "true" if rec.get("answer") == rec["last_location"] else "false"
        if rec.get("generator") == "storysim":
            return "false"
    return "none"


def read_log(path: str | os.PathLike[str], *, errors: str = "drop") -> pd.DataFrame:
    """Read an evaluation log into a validated long DataFrame, one row per question.

    Parameters
    ----------
    path : path-like
        A JSON Lines log written by :func:`tomstats.evaluate.evaluate`.
    errors : {"drop", "keep", "raise"}
        What to do with keys whose last record is an error (no answer after the retry
        budget): drop them with a warning that counts them, keep them (``correct`` is
        ``<NA>``), or refuse the log.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, item_id, sample, correct, tom_order, context_words,
        question_type, story_id, n_words, agents, target, mislead_distance, n_characters,
        setting, generator, item_seed, critical_position, belief_status, same_as, answer,
        parsed_answer, error_category,
        status, error, config_hash, prompt_id, prompt_hash, latency_s, prompt_tokens,
        completion_tokens, cached, timestamp``, sorted by model, context, ToM order, item
        and sample. ``correct`` is ``int64`` (nullable ``Int64`` with ``errors="keep"``);
        ``agents`` is the question's agent chain joined with ``">"``. ``attrs`` holds the
        log format and the models' configuration hashes.

    Raises
    ------
    ValueError
        For a malformed log (see :func:`load_records`), an unknown ``errors`` value, errors
        with ``errors="raise"``, a model logged under two configuration hashes, or a log
        without answered records.
    """
    if errors not in ("drop", "keep", "raise"):
        raise ValueError(f"errors must be 'drop', 'keep' or 'raise', got {errors!r}")
    p = Path(path)
    recs = load_records(p)
    if not recs:
        raise ValueError(f"evaluation log {str(p)!r} holds no records")
    hashes: dict[str, tuple[str, int]] = {}
    for (model, _, _), (lineno, rec) in recs.items():
        h = hashes.setdefault(model, (rec["config_hash"], lineno))
        if h[0] != rec["config_hash"]:
            raise ValueError(f"{p}:{lineno}: model {model!r} logged under two configuration "
                             f"hashes ({h[0][:12]}… on line {h[1]}, {rec['config_hash'][:12]}…)")
    rows = [r for _, r in sorted(recs.values(), key=lambda t: t[0])]
    n_err = sum(r["status"] == "error" for r in rows)
    if n_err and errors == "raise":
        raise ValueError(f"{p}: {n_err} question(s) ended in an error (no answer)")
    if n_err and errors == "drop":
        warnings.warn(f"{p}: dropped {n_err} question(s) that ended in an error (no answer); "
                      "pass errors='keep' to keep them", stacklevel=2)
        rows = [r for r in rows if r["status"] == "ok"]
    if not rows:
        raise ValueError(f"evaluation log {str(p)!r} holds no answered records")
    df = pd.DataFrame([{**{c: r.get(c) for c in COLUMNS}, "belief_status": belief_status(r),
                        "same_as": r.get("same_as") or "", "pair_id": r.get("pair_id") or ""}
                       for r in rows], columns=list(COLUMNS))
    df["agents"] = [">".join(a) if isinstance(a, list) else str(a or "") for a in df["agents"]]
    df["correct"] = df["correct"].astype("Int64" if errors == "keep" else "int64")
    for c in ("sample", "tom_order", "context_words", "n_words", "n_characters", "prompt_id"):
        df[c] = df[c].astype("int64")
    for c in ("mislead_distance", "n_candidates"):
        df[c] = df[c].astype("Int64")
    df = df.sort_values(["model", "context_words", "tom_order", "item_id", "sample"],
                        kind="stable").reset_index(drop=True)
    df.attrs["log_format"] = LOG_FORMAT
    df.attrs["config_hashes"] = {m: h for m, (h, _) in sorted(hashes.items())}
    return df


def check_not_link(path: str | os.PathLike[str], field: str = "--out") -> Path:
    """``path`` as a :class:`~pathlib.Path`; ``ValueError`` when it is a symbolic link (or
    an existing file with several hard links).

    A log is only ever written through its own path: a link planted at ``--out`` (or at its
    lock file) could point anywhere, and following it would append to, overwrite or (on
    repair) replace a file nobody named. Pass the real path instead.
    """
    p = Path(path)
    if p.is_symlink():
        raise ValueError(f"{field} {str(p)!r} is a symbolic link (to "
                         f"{os.readlink(p)!r}); tomstats does not write through links: "
                         "pass the real path of the log")
    if p.is_file() and p.stat().st_nlink > 1:
        raise ValueError(f"{field} {str(p)!r} has {p.stat().st_nlink} hard links (another "
                         "name could be any file); refusing to write it")
    return p


def open_nofollow(path: str | os.PathLike[str], flags: int, *, what: str,
                  of: str = "") -> int:
    """``os.open`` with ``O_NOFOLLOW``; the file must be a regular file with one link.

    Raises ``ValueError`` (bad input, naming ``what``) for a symbolic link, another kind of
    file, or a file with several hard links (whose other name could be anyone's file), and
    ``OSError`` naming the path for anything else.
    """
    p = Path(path)
    try:
        fd = os.open(p, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{what} {str(p)!r}{of} is a symbolic link; refusing to follow "
                             "it (remove it if you did not make it)") from None
        raise OSError(exc.errno, f"cannot open the {what} {str(p)!r}{of}: "
                                 f"{exc.strerror or exc}") from None
    st = os.fstat(fd)
    problem = ("is not a regular file" if not stat.S_ISREG(st.st_mode) else
               f"has {st.st_nlink} hard links (another name could be any file)"
               if st.st_nlink > 1 else "")
    if problem:
        os.close(fd)
        raise ValueError(f"{what} {str(p)!r}{of} {problem}; refusing to write it")
    return fd


class LogWriter:
    """Append records to a log, one ``os.write`` per record (flushed as it completes).

    Use as a context manager. A torn last line from a killed run is truncated on open.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def __enter__(self) -> LogWriter:
        try:
            repair_tail(self.path)
            self._fd = open_nofollow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                     what="evaluation log (--out)")
        except OSError as exc:
            raise _write_error(self.path, exc) from None
        return self

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line (``OSError`` naming the log when that fails)."""
        if self._fd is None:
            raise RuntimeError("LogWriter is not open")
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as err:
                if not exc[0]:
                    raise _write_error(self.path, err) from None
            finally:
                os.close(self._fd)
                self._fd = None


def _write_error(path: Path, exc: OSError) -> OSError:
    return OSError(f"cannot write evaluation log (--out) {str(path)!r}: "
                   f"{exc.strerror or exc}")


# --------------------------------------------------------------------------- lock


class LogLocked(ValueError):
    """Another process holds the lock of an evaluation log."""


def _describe(info: Mapping[str, Any] | None) -> str:
    if not info:
        return "another process (it has not written its details yet)"
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')} "
            f"(since {info.get('since', '?')})")


class LogLock:
    """An exclusive lock on an evaluation log: ``fcntl.flock`` on ``<log>.lock``.

    The sidecar file beside the log holds the holder's pid, host and start time as JSON. It
    is removed on release; a sidecar left by a killed process is not locked (the kernel
    drops a ``flock`` with its process) and is simply taken over, with a note. It is opened
    with ``O_NOFOLLOW`` and must be a regular file with one link: a symbolic or hard link
    planted there is refused (``ValueError``), never followed and overwritten. Use
    :meth:`try_acquire` / :meth:`release`, or ``with LogLock(path).held(wait):``.
    """

    def __init__(self, log: str | os.PathLike[str]) -> None:
        self.log = Path(log)
        self.path = self.log.with_name(self.log.name + ".lock")
        self._fd: int | None = None
        self.taken_over: dict[str, Any] | None = None

    def holder(self) -> dict[str, Any] | None:
        """The details written by the current (or last) holder, or ``None``."""
        try:  # never through a link planted at the lock's path
            fd = open_nofollow(self.path, os.O_RDONLY, what="lock file")
            with os.fdopen(fd, "rb") as fh:
                d = json.loads(fh.read(65536).decode("utf-8") or "null")
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    def try_acquire(self) -> bool:
        """Take the lock without waiting; ``False`` when another process holds it."""
        if self._fd is not None:
            return True
        while True:
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, what="lock file",
                               of=f" of --out {str(self.log)!r}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:  # the holder we waited for may have removed the file: lock the current one
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            old = os.read(fd, 4096)
            with contextlib.suppress(ValueError):
                prev = json.loads(old) if old.strip() else None
                self.taken_over = prev if isinstance(prev, dict) else None
            info = {"pid": os.getpid(), "host": socket.gethostname(),
                    "since": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    "log": str(self.log)}
            data = json.dumps(info).encode()
            os.pwrite(fd, data, 0)  # then cut what a killed holder left beyond it
            os.ftruncate(fd, len(data))
            self._fd = fd
            return True

    def holder_soon(self, patience: float = 2.0) -> dict[str, Any] | None:
        """:meth:`holder`, waiting up to ``patience`` seconds for a holder that has taken the
        lock but not yet written its details (the two are not one step)."""
        deadline = time.monotonic() + patience
        while (info := self.holder()) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return info

    def refusal(self) -> LogLocked:
        """The error for a lock held by another process (naming it)."""
        return LogLocked(f"--out {str(self.log)!r} is in use by another tomstats evaluate: "
                         f"{_describe(self.holder_soon())}; wait for it to finish, or pass "
                         f"--wait to queue behind it (lock file {str(self.path)!r})")

    def release(self) -> None:
        """Remove the sidecar and drop the lock (removed first, so no one locks a ghost)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def note_takeover(self) -> None:
        """Say on stderr when the lock of a killed run was taken over."""
        if self.taken_over is not None:
            print(f"tomstats evaluate: took over the lock of {str(self.log)!r} left by "
                  f"{_describe(self.taken_over)}, which is no longer running",
                  file=sys.stderr)

    def pauses(self, wait: float) -> Iterator[float]:
        """Try to take the lock until ``wait`` seconds have passed, yielding the seconds to
        sleep before each next try (the caller sleeps, blocking or awaiting); says once on
        stderr whom it waits for, and raises :meth:`refusal` at the deadline."""
        deadline = time.monotonic() + wait
        said = False
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise self.refusal()
            if not said:
                print(f"tomstats evaluate: waiting for {_describe(self.holder_soon())} to "
                      f"release {str(self.log)!r}", file=sys.stderr)
                said = True
            yield max(0.01, min(0.1, deadline - time.monotonic()))

    @contextlib.contextmanager
    def held(self, wait: float = 0.0) -> Iterator[LogLock]:
        """Hold the lock for a block; wait up to ``wait`` seconds (``math.inf``: forever)."""
        for pause in self.pauses(wait):
            time.sleep(pause)
        try:
            self.note_takeover()
            yield self
        finally:
            self.release()


def check_wait(wait: float) -> float:
    """Validate a ``wait`` argument (seconds, ``math.inf`` allowed)."""
    if isinstance(wait, bool) or not isinstance(wait, int | float) or math.isnan(wait) \
            or wait < 0:
        raise ValueError(f"--wait must be a number of seconds >= 0, got {wait!r}")
    return float(wait)


# --------------------------------------------------------------------------- repair


@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_log` did: records kept and duplicates removed (``torn_bytes``:
    bytes of a torn last line cut off)."""

    path: Path
    n_kept: int
    n_removed: int
    torn_bytes: int


def repair_log(path: str | os.PathLike[str], *, wait: float = 0.0) -> RepairResult:
    """Remove duplicated records from a log written by a version without the log lock.

    For every (model, item, sample) the records up to and including its first answered
    record are kept; any record of that key after it (a second answer from a concurrent
    runner, or a later error) is removed. The log is rewritten atomically (temporary file,
    then rename) under the log lock, and only when something was removed; a torn last line
    is cut off first. The result is accepted by :func:`read_log` unless the log has other
    faults (which are reported, naming the line, and nothing is changed).

    A log that is a symbolic link is refused, not repaired: the rename would replace the
    link and leave its target unrepaired, and following it could rewrite a file the user
    did not name; repair the target by its own path.

    Raises
    ------
    ValueError
        The log is in use (:class:`LogLocked`), malformed, a symbolic link, or does not
        exist.
    """
    p = check_not_link(path, "--repair")
    if not p.is_file():
        raise FileNotFoundError(f"evaluation log {str(p)!r} does not exist")
    check_wait(wait)
    with LogLock(p).held(wait):
        lines = read_text(p).split("\n")
        keep: list[int] = []
        answered: set[Key] = set()
        torn = 0
        for lineno, rec in checked_records(p, allow_torn_tail=True):
            key = record_key(rec)
            if key in answered:
                continue
            if rec["status"] == "ok":
                answered.add(key)
            keep.append(lineno)
        n_records = sum(1 for line in lines if line.strip())
        if lines and lines[-1].strip() and not _is_json(lines[-1]):
            torn = len(lines[-1].encode("utf-8"))
            n_records -= 1
        removed = n_records - len(keep)
        if removed or torn:
            atomic_write_text(p, "".join(lines[i - 1] + "\n" for i in keep))
    return RepairResult(path=p, n_kept=len(keep), n_removed=removed, torn_bytes=torn)


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
