"""Runs over two processes (``jax.distributed`` on 127.0.0.1, CPU, gloo) give the numbers of
one process, and a run that loses a process ends on the other with one line and exit 3,
``--out`` untouched (docs/cluster.md)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.cli import main

from ._distributed_work import SMALL_TOML, run_all

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parents[1])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], tmp: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=tmp, env=ENV, stdout=open(tmp / f"{name}.out", "w"),
                            stderr=open(tmp / f"{name}.err", "w"))


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def _tail(tmp: Path, name: str) -> str:
    return (tmp / f"{name}.err").read_text()[-2000:]


def _cli_pair(tmp: Path, args: list[str], *, timeout: float = 300) -> list[int]:
    """Exit statuses of ``tomstats ARGS`` run as processes 0 and 1 of one run."""
    port = _free_port()
    procs = [_start([sys.executable, "-m", "tomstats", *args, "--coordinator",
                     f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)],
                    tmp, f"p{i}") for i in (1, 0)]
    try:
        return [p.wait(timeout) for p in procs][::-1]
    finally:
        _stop(procs)


@pytest.fixture
def work(tmp_path: Path, structural_fit: Path) -> Path:
    """``small.toml``, a structural posterior ``fit.nc`` and a Laplace ``fit.json`` with its
    ``log.csv`` (``y ~ x + (1 | g)``, 6 groups of 10 rows)."""
    from tomstats.glmm.lme import fit_lme

    (tmp_path / "small.toml").write_text(SMALL_TOML)
    shutil.move(structural_fit, tmp_path / "fit.nc")
    rng = np.random.default_rng(0)
    g, x = np.repeat(np.arange(6), 10), np.tile(np.linspace(-1, 1, 10), 6)
    eta = 0.2 + 0.8 * x + rng.normal(0, 0.7, 6)[g]
    df = pd.DataFrame({"y": (rng.random(60) < 1 / (1 + np.exp(-eta))).astype(int), "x": x,
                       "g": [f"g{i}" for i in g]})
    fit_lme(df, "y ~ x + (1 | g)").to_json(tmp_path / "fit.json")
    df.to_csv(tmp_path / "log.csv", index=False)
    return tmp_path


def _same(a, b, what: str) -> None:
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=what)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _same(a[k], b[k], f"{what}[{k}]")
    elif isinstance(a, tuple | list):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{what}[{i}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def test_two_processes_give_the_numbers_of_one(work):
    """simulate (both paths), power (ANOVA, assurance), a posterior sweep and power from a
    Laplace fit: bit for bit the single-process numbers of the same seed."""
    port = _free_port()
    procs = [_start([sys.executable, str(HERE / "_distributed_work.py"), str(port), str(i),
                     str(work)], work, f"w{i}") for i in (1, 0)]
    try:
        one = run_all(work)  # meanwhile, in this process
        codes = [p.wait(400) for p in procs]
    finally:
        _stop(procs)
    assert codes == [0, 0], _tail(work, "w0") + _tail(work, "w1")
    two = pickle.loads((work / "two.pkl").read_bytes())
    _same(one, two, "result")
    # the parts really differ between processes: process 1's share of a run is not empty
    assert len(one["simulate_exact"]["successes"]) == 13


def test_cli_two_processes_write_once_what_one_writes(tmp_path, monkeypatch):
    """``tomstats simulate`` on two processes: the files of one process, written by process 0
    (no temporaries left), with the run's processes in ``summary.json``."""
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    monkeypatch.chdir(tmp_path)
    args = ["simulate", "small.toml", "--no-figures", "--quiet"]
    assert main([*args, "--out", "one"]) == 0
    codes = _cli_pair(tmp_path, [*args, "--out", "two"])
    assert codes == [0, 0], _tail(tmp_path, "p0") + _tail(tmp_path, "p1")
    one, two = tmp_path / "one", tmp_path / "two"
    assert sorted(os.listdir(one)) == sorted(os.listdir(two))
    for f in os.listdir(one):
        if f.endswith(".csv"):
            assert (one / f).read_bytes() == (two / f).read_bytes(), f
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    run1, run2 = s1.pop("run"), s2.pop("run")
    assert {k: run2[k] for k in ("processes", "devices", "local_devices", "backend")} == {
        "processes": 2, "devices": 2, "local_devices": 1, "backend": "cpu"}
    assert run2["gathered_bytes"] > 0 and run1["gathered_bytes"] == 0
    assert run1["processes"] == 1
    s1.pop("seconds"), s2.pop("seconds")
    assert s1 == s2
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


@pytest.mark.parametrize("killed", [1, 0], ids=["worker", "coordinator"])
def test_a_killed_process_ends_the_run_with_one_line(tmp_path, killed):
    """Process 1 (a worker) or process 0 (the coordinator's host, the writer) killed mid-run:
    the other ends within 30 s, exit 3, one line naming the lost process; ``--out`` keeps its
    old content and no temporary is left beside it."""
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("old result")
    port = _free_port()
    # the paper's study question by question: a long run, its results small in memory
    base = [sys.executable, "-m", "tomstats", "reproduce", "--path", "bernoulli",
            "--replicates", "2000000", "--allow-large", "--no-figures", "--quiet", "--force",
            "--out", "out",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
            "--distributed-timeout", "9"]
    p1 = _start([*base, "--process-id", "1"], tmp_path, "p1")
    p0 = _start([*base, "--process-id", "0", "--progress"], tmp_path, "p0")
    victim, survivor = (p1, p0) if killed == 1 else (p0, p1)
    name = "p0" if killed == 1 else "p1"
    try:
        deadline = time.monotonic() + 120
        while "simulate (bernoulli)" not in (tmp_path / "p0.err").read_text():  # joined
            assert p0.poll() is None and time.monotonic() < deadline, _tail(tmp_path, "p0")
            time.sleep(0.2)
        time.sleep(1.0)  # well inside the work
        victim.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        code = survivor.wait(60)
        took = time.monotonic() - t0
    finally:
        _stop([p0, p1])
    err = (tmp_path / f"{name}.err").read_text()
    assert code == 3, err[-2000:]
    assert took < 30
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if "tomstats: error" in ln]
    assert len(lines) == 1 and f"process {killed}" in lines[0], err[-2000:]
    assert "nothing was written" in lines[0]
    assert os.listdir(tmp_path / "out") == ["old.txt"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


def test_an_error_inside_a_session_ends_the_others(work):
    """``tomstats.distributed.session``: process 1 raises inside the block; it prints its
    traceback and one line and exits 1, and process 0, waiting in a gather, ends with exit 3
    and one line naming process 1 and its status; nothing is written."""
    port = _free_port()
    procs = [_start([sys.executable, str(HERE / "_distributed_work.py"), str(port), str(i),
                     str(work), "raise"], work, f"w{i}") for i in (1, 0)]
    try:
        t0 = time.monotonic()
        codes = [p.wait(120) for p in procs]
        took = time.monotonic() - t0
    finally:
        _stop(procs)
    err0, err1 = (work / "w0.err").read_text(), (work / "w1.err").read_text()
    assert codes == [1, 3], err0[-2000:] + err1[-2000:]
    assert "ValueError: a planted error in process 1" in err1
    assert [ln for ln in err1.splitlines() if "tomstats: error" in ln] == [
        "tomstats: error: an exception left the session's body (its traceback is above); the "
        "run is stopped (process 1 of 2)"]
    lines = [ln for ln in err0.splitlines() if "tomstats: error" in ln]
    assert len(lines) == 1 and "process 1 of 2 stopped with exit status 1" in lines[0], err0
    assert took < 90  # joining included
    assert not (work / "two.pkl").exists()


def test_no_coordinator_and_half_given_options_are_one_line(tmp_path, capsys):
    """Options that do not go together: exit 2 before any work; a coordinator nobody runs:
    exit 3 within the timeout."""
    assert main(["simulate", "x.toml", "--out", str(tmp_path / "o"),
                 "--coordinator", "127.0.0.1:1"]) == 2
    assert "go together" in capsys.readouterr().err
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "tomstats", "simulate", "small.toml", "--out",
                          "o", "--coordinator", f"127.0.0.1:{_free_port()}",
                          "--num-processes", "2", "--process-id", "1",
                          "--distributed-timeout", "3"], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 3, res.stderr[-2000:]
    assert time.monotonic() - t0 < 30
    assert "cannot reach the coordinator" in res.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()
    # --distributed outside SLURM and Open MPI: one line that says what to do, exit 3
    env = {k: v for k, v in ENV.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_"))}
    res = subprocess.run([sys.executable, "-m", "tomstats", "simulate", "small.toml", "--out",
                          "o", "--distributed"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 3, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == (
        "tomstats simulate: error: no multi-process environment found (SLURM or Open MPI, "
        "for --distributed): start the processes with srun or mpirun, or give --coordinator "
        "HOST:PORT --num-processes N --process-id I")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("n", [0, 1, 5, 13, 64])
@pytest.mark.parametrize("p", [1, 2, 3, 7])
def test_shares_are_contiguous_and_cover_every_index_once(n, p):
    from tomstats._distributed import share

    parts = [share(n, i, p) for i in range(p)]
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    sizes = [hi - lo for lo, hi in parts]
    assert max(sizes) == -(-n // p) and sizes == sorted(sizes, reverse=True)
    assert share(n) == (0, n)  # one process: everything
