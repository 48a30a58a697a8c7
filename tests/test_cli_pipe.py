"""A closed pipe (``tomstats ... | head``) ends a command quietly with 141 = 128 + SIGPIPE,
the status a shell reports for a Unix tool killed by SIGPIPE; it is not bad input (2)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from tomstats.cli import EXIT_PIPE, main

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "tomstats"]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pipe")
    items, out = tmp / "items.jsonl", tmp / "run.jsonl"
    subprocess.run([*RUN, "stories", "--n-per-cell", "2", "--seed", "1", "--out", str(items)],
                   check=True, capture_output=True, cwd=ROOT)
    subprocess.run([*RUN, "evaluate", "--items", str(items), "--model",
                    "models/heuristic-oracle.toml", "--out", str(out), "--no-cache",
                    "--no-progress"], check=True, capture_output=True, cwd=ROOT)
    return out


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone: every write fails with EPIPE."""

    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_broken_pipe_in_process(log: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert EXIT_PIPE == 128 + 13  # SIGPIPE
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["summarize", str(log)]) == EXIT_PIPE
    assert capsys.readouterr().err == ""


def test_closed_pipe_exits_141_quietly(log: Path) -> None:
    proc = subprocess.Popen([*RUN, "summarize", str(log), "--by", "item_id"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes (as `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_PIPE, err
    assert err == ""
