"""Leftovers of killed runs and precious output folders (tomstats._io).

Temporaries carry their writer's pid: the next run removes those of dead processes, keeps
those of live ones, and puts back a folder whose swap was killed between its two renames.
``--out`` that is the current folder, a folder above it, the home folder or a repository's
root is refused before any work.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tomstats._io as io
from tomstats.cli import main


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getppid()
    out = tmp_path / "f.nc"
    stale = [tmp_path / f".f.nc.{dead}.abc123de.tmp", tmp_path / f".o.{dead}.x_9.tmp",
             tmp_path / f".o.{dead}.zz.old"]
    stale[0].write_text("half")
    for d in stale[1:]:
        (d / "content").mkdir(parents=True)
    kept = [tmp_path / f".f.nc.{live}.abc123de.tmp",   # a live process is still writing
            tmp_path / ".f.nc.5.tmp",                  # not our pattern
            tmp_path / f".f.nc.x.{dead}.abc.tmp",      # another file's temporary
            tmp_path / "f.nc.1.a.tmp"]                 # not hidden
    for k in kept:
        k.write_text("keep")
    io.atomic_write_text(out, "new")
    assert out.read_text() == "new" and not stale[0].exists()
    assert all(k.exists() for k in kept)
    o = tmp_path / "o"
    (o / f".tomstats-{dead}-abc").mkdir(parents=True)
    (o / f".tomstats-{live}-abc").mkdir()
    (o / "table.csv").write_text("x")
    io.prepare_out_dir(o, force=True)
    assert not stale[1].exists() and not (o / f".tomstats-{dead}-abc").exists()
    assert (o / f".tomstats-{live}-abc").exists()
    # the dead .old folder of o: o exists, so the swap had finished; removed, o untouched
    assert not stale[2].exists() and (o / "table.csv").read_text() == "x"


KILLER = textwrap.dedent("""
    import os, signal, sys
    import tomstats._io as io
    mode, out = sys.argv[1], sys.argv[2]
    real_replace, real_exchange = os.replace, io._exchange
    calls = []
    def replace(a, b):
        calls.append((a, b))
        if mode == "two-renames" and len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)   # between the two renames
        return real_replace(a, b)
    def exchange(a, b):
        if mode == "two-renames":
            return False
        done = real_exchange(a, b)
        assert done, "this file system has no atomic exchange"
        os.kill(os.getpid(), signal.SIGKILL)       # after the swap, before cleaning up
    io.os.replace = replace
    io._exchange = exchange
    with io.replaced_dir(out) as tmp:
        (tmp / "result.txt").write_text("new")
""")


@pytest.mark.parametrize("mode", ["two-renames", "exchange"])
def test_killed_folder_swap_is_recovered(mode: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    if mode == "exchange" and not io._exchange(tmp_path, tmp_path):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    out = tmp_path / "o"
    out.mkdir()
    (out / "result.txt").write_text("old")
    rc = subprocess.run([sys.executable, "-c", KILLER, mode, str(out)]).returncode
    assert rc == -9
    hidden = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert all(h.startswith(".o.") for h in hidden)
    if mode == "two-renames":
        # the state to recover: no --out, the old result in .old, the new one in .tmp
        assert not out.exists() and sorted(h[-4:] for h in hidden) == [".old", ".tmp"]
        capsys.readouterr()
        io.prepare_out_dir(out, force=True)                     # the next run, before work
        assert (out / "result.txt").read_text() == "old"
        assert "restored" in capsys.readouterr().err
    else:
        assert [h[-4:] for h in hidden] == [".tmp"]             # the old result, to remove
        assert (out / "result.txt").read_text() == "new"        # the swap was one step
        io.prepare_out_dir(out, force=True)
        assert (out / "result.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["o"]


def test_swap_without_exchange_still_replaces(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)
    out = tmp_path / "o"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with io.replaced_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["o"]


@pytest.mark.parametrize("where", ["cwd", "parent", "home", "repo"])
def test_precious_out_refused_before_work(where: str, tmp_path: Path, monkeypatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "repo" / "sub"
    work.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (work / "keep.txt").write_text("keep")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    out = {"cwd": ".", "parent": str(tmp_path), "home": str(tmp_path / "home"),
           "repo": str(tmp_path / "repo")}[where]
    words = {"cwd": "the current folder", "parent": "a folder above the current folder",
             "home": "the home folder", "repo": "a folder above the current folder"}[where]
    if where == "repo":  # a repository root that is not above the current folder
        monkeypatch.chdir(tmp_path / "home")
        words = "the root of a git repository"
    capsys.readouterr()
    rc = main(["reproduce", "--out", out, "--force", "--replicates", "5", "--quiet",
               "--no-figures"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and words in err[0] and "--out" in err[0], err
    assert (work / "keep.txt").read_text() == "keep"
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == [".git", "sub"]


def _store_program(tmp_path: Path, monkeypatch) -> Path:
    """The samplers' compiled-program store (glmm._nuts) writes one program file."""
    import tomstats.glmm._nuts as nuts

    class Exported:
        def serialize(self) -> bytes:
            return b"program"

    monkeypatch.setattr(nuts, "_export_dir", lambda: tmp_path)
    nuts._store("sig", {"init": Exported()})
    return tmp_path / "sig-init.bin"


def _store_response(tmp_path: Path, monkeypatch) -> Path:
    """The evaluation's response cache writes one entry."""
    from tomstats.evaluate.cache import Completion, ResponseCache

    cache = ResponseCache(tmp_path)
    cache.put("c" * 64, "ab" + "0" * 62, Completion("hallway"))
    return cache._path("c" * 64, "ab" + "0" * 62)


@pytest.mark.parametrize("store", [_store_program, _store_response])
def test_caches_write_temporaries_that_cleanup_knows(store, tmp_path: Path,
                                                     monkeypatch) -> None:
    """A cache's temporary carries its writer's pid, so a dead writer's is removed when the
    entry is written again, and a live writer's is kept."""
    dead, live = _dead_pid(), os.getppid()
    seen: list[str] = []
    real = io.atomic_path

    def spy(path):  # the names of the temporaries the caches make
        cm = real(path)
        tmp = cm.__enter__()
        seen.append(tmp.name)

        class _Cm:
            def __enter__(self):
                return tmp

            def __exit__(self, *exc):
                return cm.__exit__(*exc)
        return _Cm()

    monkeypatch.setattr(io, "atomic_path", spy)
    target = store(tmp_path, monkeypatch)
    assert target.is_file()
    assert len(seen) == 1 and f".{target.name}.{os.getpid()}." in seen[0]
    stale = target.parent / f".{target.name}.{dead}.k1ll3d.tmp"
    alive = target.parent / f".{target.name}.{live}.wr1t1ng.tmp"
    stale.write_bytes(b"half")
    alive.write_bytes(b"half")
    store(tmp_path, monkeypatch)
    assert not stale.exists() and alive.exists() and target.is_file()
    assert sorted(p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")) == [
        alive.name]
