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

__all__ = ["atomic_path", "atomic_write_text", "ensure_writable_dir", "ensure_writable_file",
           "json_dumps", "sha256_text", "staged_files"]


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():
            os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


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
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{field}: folder {str(parent)!r} of {str(p)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{field}: folder {str(parent)!r} is not writable")
    return p


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
