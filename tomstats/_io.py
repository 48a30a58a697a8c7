"""Small I/O helpers shared by every stage: atomic writes and output-path checks.

Temporaries carry the writer's process id in their names (``.NAME.PID.XXXXXXXX.tmp`` beside a
file or folder, ``.tomstats-PID-XXXXXXXX`` inside an output folder), so a later run can tell
the leftovers of a killed process from those of a live one: :func:`clean_stale` removes the
first and leaves the second alone. A folder is replaced by one atomic exchange where the
platform has it (Linux ``renameat2(RENAME_EXCHANGE)``), else by two renames whose
interrupted state (``--out`` absent, the old result in a hidden ``.NAME.PID.XXXXXXXX.old``
folder) the next run restores, saying so.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["add_out_arguments", "atomic_path", "atomic_write_bytes", "atomic_write_text",
           "clean_stale", "refuse_inputs_as_outputs",
           "ensure_writable_dir", "ensure_writable_file", "json_dumps", "prepare_out_dir",
           "prepare_out_file", "remove_own_temporaries", "replaced_dir", "sha256_text",
           "staged_files"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: os.umask is process-wide, so never toggle it later

#: Name of a temporary beside ``out``: ``.{out.name}.{pid}.{random}.tmp`` or ``.old``.
_BESIDE = re.compile(r"(?P<pid>\d+)\.[A-Za-z0-9_]+\.(?P<kind>tmp|old)")
#: Name of a staging folder inside an output folder (:func:`staged_files`).
_STAGE = re.compile(r"\.tomstats-(?P<pid>\d+)-[A-Za-z0-9_]+")


def _prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine); unknown counts as alive."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's; anything else: do not guess
        return True
    return True


def _note(message: str) -> None:
    print(f"tomstats: {message}", file=sys.stderr)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def clean_stale(out: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries that killed processes left beside ``out``; finish their swaps.

    Looks in ``out``'s folder for ``.NAME.PID.XXXXXXXX.tmp`` / ``.old`` entries of ``out``
    (and, if ``out`` is a folder, ``.tomstats-PID-XXXXXXXX`` staging folders inside it) whose
    process no longer runs. A dead ``.old`` folder with ``out`` absent is a folder swap
    killed between its two renames: its ``content`` (the previous result) is moved back to
    ``out`` and a note says so on stderr. Entries of live processes (or of another user's)
    are left alone. Returns the paths removed or restored.
    """
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    head = f".{out.name}."
    done: list[Path] = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(head)]
    except OSError:
        return done
    dead: list[tuple[float, Path, str, int]] = []
    for n in names:
        m = _BESIDE.fullmatch(n[len(head):])
        if m and not _pid_alive(int(m["pid"])):
            p = parent / n
            with contextlib.suppress(OSError):
                dead.append((p.lstat().st_mtime, p, m["kind"], int(m["pid"])))
    # newest interrupted swap first: it holds the result that --out had last
    for _, p, kind, pid in sorted(dead, key=lambda t: t[0], reverse=True):
        content = p / "content"
        if (kind == "old" and not os.path.lexists(out) and content.is_dir()
                and not content.is_symlink()):
            try:
                os.replace(content, out)
            except OSError:
                continue
            _note(f"restored {str(out)!r}: a run (pid {pid}) was killed while replacing it; "
                  f"the earlier result is back")
        _remove(p)
        done.append(p)
    if out.is_dir() and not out.is_symlink():
        with contextlib.suppress(OSError):
            for n in os.listdir(out):
                m = _STAGE.fullmatch(n)
                if m and not _pid_alive(int(m["pid"])):
                    _remove(out / n)
                    done.append(out / n)
    return done


def remove_own_temporaries(out: str | os.PathLike[str]) -> None:
    """Remove the temporaries this process made beside and inside ``out`` (a run that is
    being abandoned: :func:`tomstats._distributed.abort`); ``out`` itself is left as it was."""
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    pid = os.getpid()
    with contextlib.suppress(OSError):
        for n in os.listdir(parent):
            m = _BESIDE.fullmatch(n[len(f".{out.name}."):]) if n.startswith(
                f".{out.name}.") else None
            if m and int(m["pid"]) == pid and m["kind"] == "tmp":
                _remove(parent / n)
    if out.is_dir() and not out.is_symlink():
        with contextlib.suppress(OSError):
            for n in os.listdir(out):
                m = _STAGE.fullmatch(n)
                if m and int(m["pid"]) == pid:
                    _remove(out / n)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    Nothing is left behind on failure, and readers never see a half-written file.
    """
    path = Path(path)
    clean_stale(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".tmp", dir=path.parent)
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
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = f"disk full ({reason}); nothing was written"
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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, then rename)."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)


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
    clean_stale(p)
    if p.exists() and not force:
        raise ValueError(f"{field}: {str(p)!r} already exists; pass --force to replace it")
    return p


def prepare_out_dir(path: str | os.PathLike[str], *, force: bool, field: str = "--out") -> Path:
    """Check an output folder before any work: refuse a non-empty one unless ``force``.

    The folder itself is written later by :func:`replaced_dir`, which swaps the new content in
    whole, so files of an earlier run never survive beside new results.
    """
    p = Path(path)
    _refuse_precious(p, field)
    clean_stale(p)
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


def _refuse_precious(p: Path, field: str) -> None:
    """Refuse an output folder that replacing would destroy more than a result: the current
    folder or one above it, the home folder, the file-system root, a repository's root."""
    try:
        target = p.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError):
        return
    what = None
    if target == cwd:
        what = "the current folder"
    elif target in cwd.parents:
        what = "a folder above the current folder"
    elif target == Path.home().resolve():
        what = "the home folder"
    elif target == Path(target.anchor):
        what = "the root of the file system"
    elif (target / ".git").exists():
        what = "the root of a git repository"
    if what:
        raise ValueError(f"{field}: {str(p)!r} is {what}; a result folder is replaced as a "
                         "whole (with --force, everything in it is removed): choose a new "
                         "folder such as results/")


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns ``False`` where the platform or file system has no such call (the caller then
    uses two renames); other errors raise ``OSError``.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def replaced_dir(out: str | os.PathLike[str], field: str = "--out") -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; on success it replaces ``out`` as a whole.

    On an error the temporary folder is removed and ``out`` is left as it was. Errors while
    publishing name ``out``, never the temporary folder.
    """
    out = Path(out)
    _refuse_precious(out, field)
    clean_stale(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(out), suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise ValueError(f"{field}: cannot create {str(out)!r}: {exc.strerror}") from None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_UMASK)
        if out.exists() and _exchange(tmp, out):
            _remove(tmp)  # now the old result (or the link that --out was: unlinked)
        elif out.exists():
            # two renames; a kill between them leaves the old result in `old`, which
            # clean_stale puts back on the next run
            old = Path(tempfile.mkdtemp(prefix=_prefix(out), suffix=".old", dir=out.parent))
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


def _same_or_inside(inp: Path, out: Path) -> str | None:
    """How writing ``out`` would destroy the existing input ``inp``: the same file (also
    through a link, a hard link or another spelling of the path), or a file inside the
    folder ``out`` that a result folder replaces as a whole."""
    try:
        if os.path.samefile(inp, out):
            return "is the same file as the input"
        if out.is_dir() and inp.resolve().is_relative_to(out.resolve()):
            return "is a folder that holds the input"
    except (OSError, RuntimeError):
        return None
    return None


def refuse_inputs_as_outputs(outputs: dict[str, Any], inputs: dict[str, Any]) -> None:
    """Refuse (``ValueError``, before any work) an output path that would overwrite an input.

    ``outputs`` and ``inputs`` map an option's name (``--out``, ``LOG``) to a path, or to a
    list of paths; ``None`` and paths that do not exist are skipped. An output is refused
    when it is the same file as an input (compared with :func:`os.path.samefile`: links and
    other spellings of one path are the same file) or an existing folder holding an input
    (a result folder is replaced whole, so ``--force`` would delete the input).
    """
    def paths(v: Any) -> list[Path]:
        items = v if isinstance(v, (list, tuple)) else [v]
        return [Path(x) for x in items if isinstance(x, (str, os.PathLike)) and str(x)
                and os.path.exists(x)]

    for out_name, out_value in outputs.items():
        for out in paths(out_value):
            for in_name, in_value in inputs.items():
                for inp in paths(in_value):
                    why = _same_or_inside(inp, out)
                    if why:
                        raise ValueError(f"{out_name} {str(out)!r} {why} {in_name} "
                                         f"{str(inp)!r}; writing it would destroy the input "
                                         f"(even with --force): choose another {out_name}")


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
    clean_stale(out)
    staged = StagedFiles(Path(tempfile.mkdtemp(prefix=f".tomstats-{os.getpid()}-", dir=out)))
    try:
        yield staged
        for f in sorted(staged.stage.iterdir()):
            os.chmod(f, 0o666 & ~_UMASK)
            os.replace(f, out / f.name)
            staged.written.append(out / f.name)
    finally:
        shutil.rmtree(staged.stage, ignore_errors=True)
