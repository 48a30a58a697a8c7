"""Input validation shared by every stage: unknown keys, argument types, text decoding.

One definition of each check, so a typo in a storyboard, a simulation or a model TOML gets the
same "did you mean" message, and a wrong type anywhere in the Python API is a ``TypeError``
that names the argument.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["INPUT_MEMORY_FACTOR", "READ_CHUNK", "DuplicateKeyError", "check_input_size",
           "check_keys", "check_no_nul", "check_probabilities", "check_type", "closest_hint",
           "closest_name", "table_header_hint",
           "decode_text", "loads_unique", "open_regular", "read_input_bytes", "read_text",
           "show_value", "unique_pairs"]


def show_value(value: Any) -> str:
    """``repr`` of a value for an error message, NumPy scalars shown as plain Python values
    (``np.int64(3)`` as ``3``), so messages read the same whatever the column's dtype."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def closest_hint(name: str, known: Iterable[str]) -> str:
    """A suffix for an error message: ``" (did you mean 'x'?)"`` or the list of known names.

    The suggestion is a known name differing only in case, else the closest known name by
    :func:`difflib.get_close_matches` (ratio :math:`\\geq 0.6`); without one, the known names
    are listed so the user can pick.
    """
    known = [str(k) for k in known]
    near = closest_name(name, known)
    if near is not None:
        return f" (did you mean {near!r}?)"
    return f" (known: {', '.join(known)})" if known else ""


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name :func:`closest_hint` suggests for ``name`` (``None`` when none is
    close): one differing only in case, else the closest by :func:`difflib.get_close_matches`
    (ratio :math:`\\geq 0.6`)."""
    known = [str(k) for k in known]
    same_but_case = [k for k in known if k.lower() == str(name).lower()]
    near = same_but_case or difflib.get_close_matches(str(name), known, n=1)
    return near[0] if near else None


def check_keys(given: Mapping[str, Any] | Iterable[str], known: Iterable[str], where: str) -> None:
    """Raise ``ValueError`` naming the first key of ``given`` that is not in ``known``.

    Parameters
    ----------
    given
        A mapping (its keys are checked) or an iterable of key names, in file order.
    known
        The accepted keys.
    where
        Where the keys come from, e.g. ``"storyboard.toml [world]"``; it starts the message:
        ``"<where>: unknown key 'seting' (did you mean 'setting'?)"``.
    """
    known = list(known)
    allowed = set(known)
    for key in given:
        if key not in allowed:
            raise ValueError(f"{where}: unknown key {key!r}{closest_hint(key, known)}")


def _type_names(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = [t.__name__ for t in types]
    return names[0] if len(names) == 1 else " or ".join(names)


def check_type(
    value: Any, expected: type | tuple[type, ...], name: str, what: str | None = None
) -> None:
    """Raise ``TypeError`` naming argument ``name`` unless ``isinstance(value, expected)``.

    ``what`` describes the expected value in words (default: the type names), e.g.
    ``check_type(design, Design, "design", "a tomstats.Design (see tomstats.paper_design())")``.
    """
    if not isinstance(value, expected):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise TypeError(
            f"{name} must be {what or _type_names(expected)}, "
            f"got {type(value).__name__} {shown}"
        )


#: Bytes read at a time from an input file, each piece checked before the next is read.
READ_CHUNK = 1 << 20
#: Bytes of memory a text input read whole takes per byte of it: the bytes, their decoded
#: text and what is parsed from them (a table, a TOML document).
INPUT_MEMORY_FACTOR = 4


def _prefix(field: str | None) -> str:
    return f"{field}: " if field else ""


def check_input_size(path: str | os.PathLike[str], size: int, field: str | None = None,
                     factor: float = INPUT_MEMORY_FACTOR) -> None:
    """Refuse an input of ``size`` bytes (read whole) that would need more memory than the
    size guard allows: ``factor`` × ``size`` against
    :func:`tomstats._guards.check_footprint`'s share of the available memory.

    Raises
    ------
    ValueError
        Naming the file, its size and the memory available.
    """
    from tomstats._guards import Footprint, check_footprint, format_bytes

    check_footprint(Footprint(f"{_prefix(field)}{str(path)!r}", float(factor) * size, 0.0,
                              f"{format_bytes(size)} read whole, about {factor:g} bytes of "
                              f"memory per byte"), flag=None)


def check_no_nul(chunk: bytes, offset: int, path: str | os.PathLike[str],
                 field: str | None = None) -> None:
    """Refuse a piece of a text input holding a NUL byte (no UTF-8 text, table, log or TOML
    holds one; a sparse or binary file does), naming its offset in the file."""
    at = chunk.find(b"\0")
    if at >= 0:
        raise ValueError(f"{_prefix(field)}{str(path)}: a NUL byte at byte {offset + at + 1}; "
                         f"this is not a text file (a binary, sparse or UTF-16 file?); save "
                         f"it as UTF-8 text")


def open_regular(path: str | os.PathLike[str], field: str | None = None) -> Any:
    """Open ``path`` for reading bytes, refusing anything but a regular file (a FIFO, a
    device such as ``/dev/zero``, a folder) without blocking on it."""
    import stat

    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise ValueError(f"{_prefix(field)}{str(p)!r} is a folder, not a file") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ValueError(f"{_prefix(field)}{str(p)!r} is not a regular file (a device, pipe "
                         f"or socket)")
    return os.fdopen(fd, "rb")


def read_input_bytes(path: str | os.PathLike[str], field: str | None = None, *,
                     gzip: bool = False, factor: float = INPUT_MEMORY_FACTOR) -> bytes:
    """The bytes of a text input read whole, checked before and while it is read.

    Before: a regular file (:func:`open_regular`) whose size passes
    :func:`check_input_size`. While: pieces of :data:`READ_CHUNK` bytes, each refused if it
    holds a NUL byte (:func:`check_no_nul`); with ``gzip`` the file is decompressed as a
    stream and the bytes it expands to are checked against the budget as they come, so a
    gzip bomb stops at the budget.

    Raises
    ------
    ValueError
        A file that is not regular, too large for memory, holds a NUL byte, or (``gzip``) is
        not a readable gzip file; one line naming the file.
    """
    import gzip as gz
    import zlib

    p = Path(path)
    with open_regular(p, field) as raw:
        check_input_size(p, os.fstat(raw.fileno()).st_size, field, factor)
        pieces: list[bytes] = []
        total = 0
        try:
            fh = gz.GzipFile(fileobj=raw, mode="rb") if gzip else raw
            while chunk := fh.read(READ_CHUNK):
                check_no_nul(chunk, total, p, field)
                total += len(chunk)
                pieces.append(chunk)
                if gzip:
                    check_input_size(p, total, field, factor)
        except (OSError, EOFError, zlib.error) as exc:
            if not gzip:
                raise
            raise ValueError(f"{p}: not a readable gzip file ({exc})") from None
    return b"".join(pieces)


def read_text(path: str | os.PathLike[str], field: str | None = None) -> str:
    """Read a UTF-8 text file; a decoding error names the file, line and column.

    The file is read by :func:`read_input_bytes` (a regular file within the memory budget,
    no NUL byte). Raises ``ValueError`` (not ``UnicodeDecodeError``) such as
    ``"data.jsonl: line 12, column 5: not valid UTF-8 (byte 0xff); save the file as UTF-8"``;
    ``field`` (e.g. ``"--items"``) prefixes the message when given.
    """
    p = Path(path)
    return decode_text(read_input_bytes(p, field), p, field)


def decode_text(raw: bytes, name: str | os.PathLike[str], field: str | None = None) -> str:
    """Decode the bytes of the file ``name`` as UTF-8, with :func:`read_text`'s message."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = raw[: exc.start]
        line = head.count(b"\n") + 1
        column = exc.start - (head.rfind(b"\n") + 1) + 1
        prefix = f"{field}: " if field else ""
        raise ValueError(
            f"{prefix}{name}: line {line}, column {column}: not valid UTF-8 "
            f"(byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        ) from None


class DuplicateKeyError(ValueError):
    """A JSON object holds one key twice (:func:`loads_unique`); :attr:`key` names it."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one JSON object")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`json.loads` that refuses a key given twice
    (:class:`DuplicateKeyError`): JSON readers keep the last value without a word, so
    ``{"formula": "a", "formula": "b"}`` would be read differently by different readers."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(k)
        out[k] = v
    return out


def loads_unique(text: str | bytes) -> Any:
    """:func:`json.loads` that refuses a key given twice in any object
    (:class:`DuplicateKeyError`, a ``ValueError``)."""
    return json.loads(text, object_pairs_hook=unique_pairs)


def check_probabilities(p: Any, what: str) -> np.ndarray:
    """``p`` as a float array, or ``ValueError`` naming ``what`` when a value is not a
    probability in [0, 1] (NaN included): checked before NumPy's binomial draw, whose own
    message ("p < 0, p > 1 or p contains NaNs") names neither the input nor the cause."""
    arr = np.asarray(p, dtype=float)
    bad = ~((arr >= 0.0) & (arr <= 1.0))
    if bad.any():
        raise ValueError(f"{what}: a success probability is {float(arr[bad].ravel()[0])!r}, not in "
                         f"[0, 1]; the fit's or the parameters' values are not finite")
    return arr


def table_header_hint(first_line: str) -> str:
    """A suffix for the message of a log whose first line is not JSON: when the line reads
    like the header of a CSV (or TSV) table — not a JSON value, with commas (tabs) between
    names — the hint to name the file ``.csv`` (``.tsv``); else empty."""
    line = first_line.lstrip("\ufeff").strip()
    if not line or line[0] in "{[\"":
        return ""
    for sep, suffix, what in (("\t", ".tsv", "tab"), (",", ".csv", "comma")):
        if sep in line:
            return (f" (it reads like the header of a {what}-separated table, not a JSON "
                    f"record: a table named as a log? name the file {suffix})")
    return ""
