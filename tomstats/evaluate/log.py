"""The evaluation log: append-only JSON Lines, one record per (model, item, sample).

Every record carries :data:`LOG_FORMAT`. A record is either answered (``status = "ok"``,
``correct`` 0 or 1, ``error_category`` the taxonomy category of the answer) or an error
(``status = "error"``, ``correct`` null, ``error`` says why, after the retry budget;
``error_category`` is ``"context_overflow"`` when the prompt did not fit the model's
context window, else ``"request_failed"``).

Re-running a run appends only what is missing: keys with an answered record or a context
overflow (which would fail again) are skipped, keys whose last record is another error are
tried again. So a key may hold error records followed by at most one answered record;
:func:`read_log` keeps the last record of each key and refuses two answered records for
one key.

Records are written with one ``write`` call each on a file opened for appending and are
visible to readers as soon as they are complete. A run killed mid-write can leave a torn last
line; the next run truncates it (:func:`repair_tail`) before appending.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["LOG_FORMAT", "REQUIRED_FIELDS", "LogWriter", "read_log", "read_records",
           "repair_tail"]

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
    "setting", "generator", "item_seed", "critical_position", "answer", "parsed_answer",
    "error_category", "status", "error", "config_hash", "prompt_id", "prompt_hash",
    "latency_s", "prompt_tokens", "completion_tokens", "cached", "timestamp",
)

Key = tuple[str, str, int]


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
    with open(p, "rb+") as fh:
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
    with open(p, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
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
            raise ValueError(f"{p}:{lineno}: not a JSON record{torn}: {exc.msg}") from exc
        if not isinstance(rec, dict):
            raise ValueError(f"{p}:{lineno}: a record must be a JSON object, "
                             f"got {type(rec).__name__}")
        yield lineno, rec


def _check_record(p: Path, lineno: int, rec: Mapping[str, Any]) -> None:
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
    for k in ("model", "item_id"):
        if not isinstance(rec[k], str) or not rec[k]:
            raise ValueError(f"{p}:{lineno}: field {k!r} must be a non-empty string, "
                             f"got {rec[k]!r}")


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
        _check_record(p, lineno, rec)
        key = record_key(rec)
        prev = out.get(key)
        if prev is not None and prev[1]["status"] == "ok":
            raise ValueError(f"{p}:{lineno}: duplicated key (model={key[0]!r}, "
                             f"item_id={key[1]!r}, sample={key[2]}): already answered on "
                             f"line {prev[0]}")
        out[key] = (lineno, rec)
    return out


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
        setting, generator, item_seed, critical_position, answer, parsed_answer, error_category,
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
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    df["agents"] = [">".join(a) if isinstance(a, list) else str(a or "") for a in df["agents"]]
    df["correct"] = df["correct"].astype("Int64" if errors == "keep" else "int64")
    for c in ("sample", "tom_order", "context_words", "n_words", "n_characters", "prompt_id"):
        df[c] = df[c].astype("int64")
    df["mislead_distance"] = df["mislead_distance"].astype("Int64")
    df = df.sort_values(["model", "context_words", "tom_order", "item_id", "sample"],
                        kind="stable").reset_index(drop=True)
    df.attrs["log_format"] = LOG_FORMAT
    df.attrs["config_hashes"] = {m: h for m, (h, _) in sorted(hashes.items())}
    return df


class LogWriter:
    """Append records to a log, one ``os.write`` per record (flushed as it completes).

    Use as a context manager. A torn last line from a killed run is truncated on open.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def __enter__(self) -> LogWriter:
        repair_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line."""
        if self._fd is None:
            raise RuntimeError("LogWriter is not open")
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None
