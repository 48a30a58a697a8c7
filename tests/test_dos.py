"""Every input within a resource budget (security, third round: findings 1-5).

Each hostile input of the table below is given to the command line in a child process under a
watchdog that polls its processor time and resident memory and kills it past its budget:
twice the processor time and 150 MB above the peak memory of the same harness refusing a
misspelled column (measured in this run, so the check is relative, never a fixed number of
seconds). Each case must end in exit 2 with one error line that says why, inside that
budget. On the code before the budgets every case failed: killed past the memory or the
processor time (formula expansions, integer towers, forged netCDF variables, sparse tables),
or a fit file with such a stored formula accepted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "tomstats"]
#: Memory a refusal may take above the refusal of a misspelled column.
MEMORY_SLACK = 150 * 2**20
#: Time a refusal may take, as a multiple of the refusal of a misspelled column.
TIME_FACTOR = 2.0
#: Size of the sparse tables: 8 KiB of text, then NUL bytes up to 2 GiB (nothing written).
SPARSE_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Run:
    """One watched run: exit status (``None``: killed), processor seconds (user and system,
    all threads), wall seconds, peak RSS in bytes, stderr, and why it was killed."""

    rc: int | None
    cpu: float
    wall: float
    peak: int
    stderr: str
    killed: str = ""


_TICK = os.sysconf("SC_CLK_TCK")


def _usage(pid: int) -> tuple[float, int]:
    """(processor seconds, resident bytes) of ``pid`` from /proc ((0, 0) once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0, 0
    return (int(fields[11]) + int(fields[12])) / _TICK, pages * os.sysconf("SC_PAGE_SIZE")


def watched(args: list[str], cwd: Path, *, cpu: float = float("inf"),
            memory: float = float("inf"), wall: float = 600.0) -> Run:
    """Run ``tomstats ARGS`` in ``cwd``; kill it past ``cpu`` processor seconds, ``memory``
    bytes of RSS or ``wall`` seconds.

    Processor time, not wall time, is the budget: the suite runs on machines shared with
    other work, where the wall time of the same run varies several-fold. The peak and the
    processor time of a run that ends are the kernel's own count (``wait4``); of a killed
    run, the largest polled (every 10 ms).
    """
    err = cwd / f".stderr-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOMSTATS_JAX_CACHE": "off"}
    with open(err, "wb") as fh:
        start = time.perf_counter()
        proc = subprocess.Popen([*RUN, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=fh,
                                stdin=subprocess.DEVNULL, env=env)
        used, peak, killed = 0.0, 0, ""
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            elapsed = time.perf_counter() - start
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                used = usage.ru_utime + usage.ru_stime
                peak = max(peak, usage.ru_maxrss * 1024)
                break
            now, rss = _usage(proc.pid)
            used, peak = max(used, now), max(peak, rss)
            if peak > memory or used > cpu or elapsed > wall:
                killed = (f"killed at {peak / 2**20:.0f} MiB" if peak > memory else
                          f"killed after {used:.1f} s of processor time" if used > cpu else
                          f"killed after {elapsed:.1f} s")
                proc.kill()
                proc.wait()
                break
            time.sleep(0.01)
    text = err.read_text(encoding="utf-8", errors="replace")
    err.unlink()
    return Run(None if killed else proc.returncode, used, elapsed, peak, text, killed)


# --------------------------------------------------------------------------- inputs


def _table(path: Path, n_items: int = 4) -> Path:
    rng = np.random.default_rng(0)
    rows = [{"correct": int(rng.random() < 0.8 - 0.2 * t), "model": m,
             "item": f"i{t}{c}{k}", "item2": f"j{t}{c}{k}", "tom_order": t,
             "context_words": c}
            for m in ("a", "b", "c") for t in (0, 1, 2) for c in (200, 1000)
            for k in range(n_items)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _sparse(path: Path, head: bytes) -> Path:
    """``head``, then NUL bytes up to :data:`SPARSE_BYTES`, written as a sparse file."""
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(SPARSE_BYTES)
    assert os.stat(path).st_blocks * 512 < 2**20  # nothing but the head on disk
    return path


#: The text before the NUL bytes of each sparse file (about 8 KiB).
HEADS = {
    "sparse.csv": b"correct,model,item,tom_order,context_words\n" + b"1,a,i1,0,200\n" * 630,
    "sparse.jsonl": (json.dumps({"model": "a", "item_id": "i1", "sample": 0, "correct": 1})
                     + "\n").encode() * 140,
    "sparse.txt": b"It was a quiet morning in the valley. " * 215,
    "sparse.toml": b"[design]\n" + b"# a comment line\n" * 480,
}


def _nul_at(name: str) -> str:
    """The refusal of a sparse file: its first NUL byte, just after the head."""
    return f"{name}: a NUL byte at byte {len(HEADS[name]) + 1};"


def _laplace_fit(d: Path) -> Path:
    """A real Laplace fit of :func:`_table` (``fit --backend laplace``)."""
    run = watched(["fit", "t.csv", "--backend", "laplace", "--model",
                   "correct ~ tom_order + (1 | model)", "--out", "ok.json"], d)
    assert run.rc == 0, run.stderr
    return d / "ok.json"


def _edited_json(src: Path, dest: Path, formula: str) -> Path:
    d = json.loads(src.read_text())
    d["formula"] = formula
    dest.write_text(json.dumps(d))
    return dest


def _forged_nc(src: Path, dest: Path) -> Path:
    """A copy of the fit ``src`` with one chunked, compressed and never written variable of
    10⁹ float64 (8 GB) in its posterior: the file grows by a few kilobytes."""
    import shutil

    import netCDF4

    shutil.copyfile(src, dest)
    with netCDF4.Dataset(dest, "a") as ds:
        post = ds.groups["posterior"]
        post.createDimension("forged", 10**9)
        post.createVariable("forged", "f8", ("forged",), zlib=True, chunksizes=(2**20,))
    assert dest.stat().st_size < src.stat().st_size + 2**20
    return dest


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A folder holding the tables and fits of the cases."""
    d = tmp_path_factory.mktemp("dos")
    _table(d / "t.csv")
    _table(d / "wide.csv", n_items=300)  # 5,400 rows, 5,400 items
    ok = _laplace_fit(d)
    for name, formula in EDITED.items():
        _edited_json(ok, d / f"{name}.json", formula)
    for name, head in HEADS.items():
        _sparse(d / name, head)
    return d


def _edited_nc(src: Path, dest: Path, formula: str) -> Path:
    """A copy of the formula fit ``src`` whose stored spec (``posterior.attrs['spec']``)
    has ``formula`` and its fixed part."""
    import shutil

    import netCDF4

    shutil.copyfile(src, dest)
    with netCDF4.Dataset(dest, "a") as ds:
        spec = json.loads(ds.groups["posterior"].getncattr("spec"))
        spec["formula"] = formula
        spec["fixed"] = formula.split("~", 1)[1].replace("+ (1 | model)", "").strip()
        ds.groups["posterior"].setncattr("spec", json.dumps(spec))
    return dest


@pytest.fixture(scope="module")
def forged(work) -> Path:
    """A real structural fit (two short chains) with a forged 8 GB variable added, a second
    copy of it, and copies of a real formula fit whose stored formula is one of
    :data:`EDITED`."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _fits import failed_fit

    fit = _forged_nc(failed_fit(), work / "forged.nc")
    _forged_nc(failed_fit(), work / "forged2.nc")
    run = watched(["fit", "t.csv", "--model", "correct ~ tom_order + (1 | model)", "--chains",
                   "2", "--draws", "30", "--tune", "30", "--seed", "1", "--cores", "1",
                   "--no-progress", "--allow-warnings", "--out", "formula.nc"], work)
    assert run.rc == 0, run.stderr
    for name, formula in EDITED.items():
        _edited_nc(work / "formula.nc", work / f"{name}.nc", formula)
    return fit


#: Stored formulas of edited Laplace fits (finding 3).
EDITED = {
    "power_1e9": "correct ~ tom_order ^ 1000000000 + (1 | model)",
    "power_50": "correct ~ (tom_order + context_words) ^ 50 + (1 | model)",
    "integer_tower": "correct ~ I(9**9**9 * tom_order) + (1 | model)",
}

LAPLACE = ["--backend", "laplace", "--out", "f.json"]
#: (finding, command line, words of the one error line); ``{fit}`` is a forged netCDF fit.
CASES = [
    ("1", ["fit", "t.csv", "--model", "correct ~ tom_order ^ 1000000000 + (1|model)", *LAPLACE],
     "the power must be a whole number from 1 to the 1 factor"),
    ("1", ["fit", "t.csv", "--model", "correct ~ (tom_order + context_words) ^ 50 + (1|model)",
           *LAPLACE], "from 1 to the 2 factor"),
    ("1", ["fit", "wide.csv", "--model", "correct ~ C(item) * C(item2) + (1|model)",
           *LAPLACE], "design matrix of the fixed part too large"),
    ("2", ["fit", "t.csv", "--model", "correct ~ I(9**9**9 * tom_order) + (1|model)", *LAPLACE],
     "a constant in a formula must be a finite number"),
    ("2", ["fit", "t.csv", "--model", "correct ~ I(2**10**10**10 * tom_order) + (1|model)",
           *LAPLACE], "a constant in a formula must be a finite number"),
    ("3", ["power", "--from-fit", "power_1e9.json", "--data", "t.csv", "--term", "tom_order",
           "--out", "p"], "the fit file's stored formula"),
    ("3", ["report", "power_50.json", "--out", "r.html"], "the fit file's stored formula"),
    ("3", ["compare", "integer_tower.json", "ok.json"], "the fit file's stored formula"),
    ("3", ["report", "{fit}power_1e9.nc", "--out", "r.html"], "the fit file's stored formula"),
    ("3", ["power", "--from-fit", "{fit}power_50.nc", "--data", "t.csv", "--term",
           "tom_order", "--allow-warnings", "--out", "p"], "the fit file's stored formula"),
    ("3", ["report", "{fit}integer_tower.nc", "--out", "r.html"],
     "the fit file's stored formula"),
    ("4", ["report", "{fit}", "--out", "r.html"], "declares 7.5 GiB"),
    ("4", ["compare", "{fit}", "{fit2}"], "declares 7.5 GiB"),
    ("4", ["calibrate", "{fit}", "--out", "c.toml"], "declares 7.5 GiB"),
    ("4", ["simulate", str(ROOT / "simulations" / "paper.toml"), "--posterior", "{fit}",
           "--out", "s"], "declares 7.5 GiB"),
    ("4", ["power", "--from-fit", "{fit}", "--data", "t.csv", "--term", "tom_order",
           "--out", "p"], "declares 7.5 GiB"),
    ("5", ["summarize", "sparse.csv"], _nul_at("sparse.csv")),
    ("5", ["anova", "sparse.csv"], _nul_at("sparse.csv")),
    ("5", ["fit", "sparse.csv", "--model", "correct ~ tom_order + (1|model)", *LAPLACE],
     _nul_at("sparse.csv")),
    ("5", ["report", "sparse.csv", "--out", "r.html"], _nul_at("sparse.csv")),
    ("5", ["summarize", "sparse.jsonl"], _nul_at("sparse.jsonl")),
    ("5", ["anova", "sparse.jsonl"], _nul_at("sparse.jsonl")),
    ("5", ["stories", "--weave", "sparse.txt", "--n", "1", "--out", "st.jsonl"],
     _nul_at("sparse.txt")),
    ("5", ["simulate", "sparse.toml", "--out", "s"], _nul_at("sparse.toml")),
]

#: Each command's refusal of a misspelled column, the yardstick of its budget; the commands
#: that read no table (``power --from-fit``, ``compare``, ``calibrate``, ``simulate``,
#: ``stories``) are held to the largest of these.
BASELINES = {
    "fit": ["fit", "t.csv", "--model", "correct ~ tom_ordr + (1|model)", *LAPLACE],
    "report": ["report", "t.csv", "--map", "correct=corect", "--out", "r.html"],
    "summarize": ["summarize", "t.csv", "--map", "correct=corect"],
    "anova": ["anova", "t.csv", "--map", "correct=corect"],
}


@pytest.fixture(scope="module")
def budgets(work) -> dict[str | None, tuple[float, float]]:
    """Command → (processor seconds, bytes): twice the time and 150 MB above the peak memory
    of its baseline (``None``: of the largest baseline)."""
    runs = {name: watched(args, work) for name, args in BASELINES.items()}
    for run in runs.values():
        assert run.rc == 2 and ("corect" in run.stderr or "tom_ordr" in run.stderr), run.stderr
    out = {name: (TIME_FACTOR * r.cpu, r.peak + MEMORY_SLACK) for name, r in runs.items()}
    out[None] = (max(s for s, _ in out.values()), max(m for _, m in out.values()))
    return out


@pytest.mark.parametrize(("finding", "args", "words"), CASES,
                         ids=[f"{c[0]}-{c[1][0]}-{i}" for i, c in enumerate(CASES)])
def test_hostile_input_is_refused_within_budget(request, work, budgets, finding, args, words):
    if any("{fit" in a for a in args):
        fit = request.getfixturevalue("forged")
        args = [str(work / a.removeprefix("{fit}")) if a.startswith("{fit}") and len(a) > 5
                else a.replace("{fit}", str(fit)).replace("{fit2}", str(work / "forged2.nc"))
                for a in args]
    # each case writes (if it wrongly writes at all) beside its own name
    args = [f"{request.node.callspec.id}-{a}" if i and args[i - 1] == "--out" else a
            for i, a in enumerate(args)]
    cpu, memory = budgets.get(args[0], budgets[None])
    run = watched(args, work, cpu=cpu, memory=memory)
    assert run.rc == 2, (run.killed, run.cpu, run.stderr[-2000:])
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error" in lines[0], lines
    assert words in lines[0], lines[0]
    assert run.cpu <= cpu and run.peak <= memory, (run.cpu, cpu, run.peak, memory)


def test_the_watchdog_kills_a_run_past_its_budget(work):
    """The harness can fail: a run that needs more memory than its budget is killed."""
    run = watched(["fit", "t.csv", "--model", "correct ~ tom_ordr + (1|model)", *LAPLACE],
                  work, memory=2**20)
    assert run.rc is None and run.killed.startswith("killed at")


# --------------------------------------------------------------------------- the docs


def _budget_rows() -> dict[str, str]:
    """docs/security.md's budget table: input → budget."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split("## Resource budgets", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[1:-1] for ln in section.splitlines() if ln.startswith("| ")]
    return {cells[0].strip(): cells[1].strip() for cells in rows[1:]}


def test_the_documented_budgets_are_the_codes():
    from tomstats import _expr, _guards, _netcdf, _validate
    from tomstats.glmm import data

    rows = _budget_rows()
    share = f"{_guards.MEMORY_SHARE:.0%}".replace("%", " %")
    assert rows["terms of a formula's fixed part, or of one random term"] == (
        f"at most {_expr.MAX_TERMS}")
    assert rows["a constant in a formula transform"] == (
        f"finite, magnitude at most {_expr.MAX_CONSTANT:g}".replace("e+", "e"))
    assert rows["the design matrix"] == (
        f"{data._DESIGN_CELL_BYTES} bytes × rows × columns within {share} of the available "
        f"memory")
    assert rows["a table, log, TOML or text file read whole"] == (
        f"{_validate.INPUT_MEMORY_FACTOR} bytes of memory per byte of file within {share} of "
        f"the available memory")
    assert rows["a NUL byte in a text input"] == (
        f"refused, checked in pieces of {_validate.READ_CHUNK // 2**20} MiB as they are read")
    assert rows["a netCDF fit's variables"] == (
        f"declared bytes at most {_netcdf.NETCDF_MAX_RATIO} × the file's bytes on disk, or "
        f"{_netcdf.NETCDF_FLOOR // 2**20} MiB, and within {share} of the available memory")
