"""Small I/O helpers shared by every stage: atomic writes and output-path checks."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["add_out_arguments", "atomic_path", "atomic_write_text", "ensure_writable_dir",
           "ensure_writable_file", "json_dumps", "prepare_out_dir", "prepare_out_file",
           "replaced_dir", "sha256_text", "staged_files"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: os.umask is process-wide, so never toggle it later


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    Nothing is left behind on failure, and readers never see a half-written file.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _write_error(path, exc) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():
            os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, _WriteError):
            raise _write_error(path, exc) from None
        raise


class _WriteError(OSError):
    """An ``OSError`` whose message names the destination, never the temporary file."""


def _write_error(path: Path, exc: OSError) -> _WriteError:
    reason = exc.strerror or str(exc)
    return _WriteError(exc.errno, f"cannot write {str(path)!r}: {reason}")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kw: Any) -> Iterator[IO[Any]]:
    """Open a temporary file for writing; it replaces ``path`` when the block succeeds."""
    with atomic_path(path) as tmp, open(tmp, mode, **kw) as fh:
        yield fh


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename)."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def ensure_writable_dir(path: str | os.PathLike[str], field: str = "--out") -> Path:
    """Create ``path`` if needed and check it is a writable directory, else ``ValueError``."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{field}: {str(p)!r} exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{field}: cannot create directory {str(p)!r}: {exc.strerror}") from exc
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"{field}: directory {str(p)!r} is not writable")
    return p


def ensure_writable_file(path: str | os.PathLike[str], field: str = "--out") -> Path:
    """Check that ``path`` can be created or replaced (its folder exists and is writable)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{field}: {str(p)!r} is a directory, expected a file path")
    if p.exists() and not p.is_file():
        raise ValueError(f"{field}: {str(p)!r} is not a regular file (a device, pipe or socket)")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{field}: folder {str(parent)!r} of {str(p)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{field}: folder {str(parent)!r} is not writable")
    return p


def add_out_arguments(parser: Any, *, folder: bool, what: str, size_guard: bool = False) -> None:
    """Add ``--out`` (required), ``--force`` and, with ``size_guard``, ``--allow-large``.

    One wording of the output policy for every command (see :func:`prepare_out_file` and
    :func:`prepare_out_dir`).
    """
    kind = "folder" if folder else "file"
    parser.add_argument("--out", required=True,
                        help=f"{what} (an existing {'non-empty ' if folder else ''}{kind} "
                             "needs --force)")
    parser.add_argument("--force", action="store_true",
                        help=f"replace an existing --out {kind}"
                             + (" (its old files are all removed)" if folder else ""))
    if size_guard:
        parser.add_argument("--allow-large", action="store_true",
                            help="run even when the size guard estimates more memory than is "
                                 "available or more than a day")


def prepare_out_file(path: str | os.PathLike[str], *, force: bool, field: str = "--out") -> Path:
    """Check an output file before any work: writable, and not an existing file unless ``force``.

    Every command that writes one file uses this, so ``--out`` means the same everywhere:
    an existing file is never replaced without ``--force``.
    """
    p = ensure_writable_file(path, field)
    if p.exists() and not force:
        raise ValueError(f"{field}: {str(p)!r} already exists; pass --force to replace it")
    return p


def prepare_out_dir(path: str | os.PathLike[str], *, force: bool, field: str = "--out") -> Path:
    """Check an output folder before any work: refuse a non-empty one unless ``force``.

    The folder itself is written later by :func:`replaced_dir`, which swaps the new content in
    whole, so files of an earlier run never survive beside new results.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{field}: {str(p)!r} exists and is not a directory")
    if p.is_dir() and any(p.iterdir()) and not force:
        raise ValueError(f"{field}: folder {str(p)!r} already exists and is not empty; "
                         "pass --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"{field}: cannot create directory {str(p)!r}: {str(probe)!r} is a "
                         "file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{field}: cannot create directory {str(p)!r}: folder "
                         f"{str(probe)!r} is not writable")
    return p


@contextlib.contextmanager
def replaced_dir(out: str | os.PathLike[str], field: str = "--out") -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; on success it replaces ``out`` as a whole.

    On an error the temporary folder is removed and ``out`` is left as it was. Errors while
    publishing name ``out``, never the temporary folder.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise ValueError(f"{field}: cannot create {str(out)!r}: {exc.strerror}") from None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_UMASK)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "content")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, _WriteError):
            raise _write_error(out, exc) from None
        raise


def json_dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): stable input for hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sha256_text(text: str) -> str:
    """Hex SHA-256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StagedFiles:
    """Files collected in a staging folder; :attr:`written` lists them once published."""

    def __init__(self, stage: Path) -> None:
        self.stage = stage
        self.written: list[Path] = []


@contextlib.contextmanager
def staged_files(out: str | os.PathLike[str]) -> Iterator[StagedFiles]:
    """Write several files into ``out`` so that ``out`` never holds a half-written one.

    The body writes into ``staged.stage`` (a temporary folder inside ``out``); on success
    every file is moved into ``out`` with ``os.replace`` (atomic per file) and listed in
    ``staged.written``; on an error nothing is moved. The staging folder is always removed.
    """
    out = Path(out)
    staged = StagedFiles(Path(tempfile.mkdtemp(prefix=".tomstats-", dir=out)))
    try:
        yield staged
        for f in sorted(staged.stage.iterdir()):
            os.chmod(f, 0o666 & ~_UMASK)
            os.replace(f, out / f.name)
            staged.written.append(out / f.name)
    finally:
        shutil.rmtree(staged.stage, ignore_errors=True)
