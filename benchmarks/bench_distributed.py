"""Speed-up of a run split over two processes (``jax.distributed``, docs/cluster.md).

The same command runs once as one process pinned to one core (``taskset -c A``) and once as
two processes joined on 127.0.0.1, each pinned to its own core (``taskset -c A`` and
``taskset -c B``): the speed-up a user of two hosts would see. Two runs:

``power grid``
    ``tomstats power simulations/power.toml`` with the tests ``anova:tom_order`` and
    ``glm-wald:delta`` along its 10 questions-per-cell values, ``--replicates`` studies a
    value (default 40,000: about three minutes on one quiet core);
``from fit``
    ``tomstats power --from-fit``: the pilot data of ``tests/reference/lme4_power.json`` (20
    groups × 30 Bernoulli rows) fitted with ``y ~ x + (1 + x | g)``, the power of ``x`` with
    ``--fit-studies`` studies (default 40,000) and as many for the type I error (about a
    millisecond a refit: four to five minutes on one quiet core).

Both are the size of a real planning run. Every process pays its own start-up and compilation
(tens of seconds, whatever the run's size), so a run of a minute on one core gains less from a
second process than a run of several minutes: try ``--replicates 5000`` beside the default.

Each run is timed whole (start-up, compilation, work, gathering, writing), as a user waits for
it; JAX's persistent compilation cache is off, so both sides compile. Columns: wall seconds,
the speed-up over one process, the CPU seconds (user + system) of the busiest process and the
speed-up in those (what the wall-clock speed-up is on an idle machine: on a loaded one the
processes wait for their cores, and the wall-clock figures say more about the load than about
the split), the overhead over a perfect split (:math:`t_2 - t_1/2`), the seconds process 0
spent gathering (waiting for the other process included) and the bytes it received
(``summary.json``/``power.json``'s ``run``), and whether the two runs' ``power.csv`` are byte
for byte the same. The load average before and after is printed and written.

    python benchmarks/bench_distributed.py [--replicates N] [--fit-studies N]
        [--only power|fit] [--write-docs]

``--write-docs`` replaces the table between the script's markers in ``docs/cluster.md``
(:mod:`benchmarks._docs`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import (  # noqa: E402
    add_write_docs_argument,
    markdown_table,
    require_markers,
    write_docs,
)

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "cluster.md"
SCRIPT = "bench_distributed.py"
DATA = REPO / "tests" / "reference" / "lme4_power.json"
COLUMNS = ("run", "processes", "seconds", "speed-up", "CPU s", "CPU speed-up", "overhead s",
           "gather s", "gathered kB", "identical")
RUNS = {"power": "power grid", "fit": "from fit"}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=40_000,
                    help="power grid: studies per value (default 40000)")
    ap.add_argument("--fit-studies", type=int, default=40_000,
                    help="from fit: studies (and as many for the type I error; default "
                         "40000)")
    ap.add_argument("--only", choices=tuple(RUNS), default=None,
                    help="run one of the two (default both)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The first two cells of each row the command writes."""
    names = [RUNS[args.only]] if args.only else list(RUNS.values())
    return [(n, p) for n in names for p in ("1", "2")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "JAX_PLATFORMS": "cpu", "TOMSTATS_JAX_CACHE": "off",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _timed(commands: list[list[str]], cwd: Path) -> tuple[float, float]:
    """Wall seconds from starting ``commands`` side by side to the last one's end, and the
    most CPU seconds (user + system) one of them used."""
    t0 = time.perf_counter()
    errs = [cwd / f"err{i}.txt" for i in range(len(commands))]
    procs = [subprocess.Popen(c, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL,
                              stderr=open(e, "w")) for c, e in zip(commands, errs, strict=True)]
    cpu = 0.0
    try:
        for p, c, e in zip(procs, commands, errs, strict=True):
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            cpu = max(cpu, usage.ru_utime + usage.ru_stime)
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(c)} failed ({p.returncode}):\n"
                                 f"{e.read_text()[-2000:]}")
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
    return time.perf_counter() - t0, cpu


def _run(name: str, argv: list[str], work: Path, cores: tuple[int, int]) -> list[list[str]]:
    """Rows of one run: one process on ``cores[0]``, then two on both."""
    base = [sys.executable, "-m", "tomstats", *argv, "--no-figures", "--quiet"]
    t1, c1 = _timed([["taskset", "-c", str(cores[0]), *base, "--out", "one"]], work)
    port = _free_port()
    pair = [["taskset", "-c", str(cores[i]), *base, "--out", "two", "--coordinator",
             f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)]
            for i in (0, 1)]
    t2, c2 = _timed(pair, work)
    meta = "power.json" if "--from-fit" in argv else "summary.json"
    runs = [json.loads((work / d / meta).read_text())["run"] for d in ("one", "two")]
    same = (work / "one" / "power.csv").read_bytes() == (work / "two" / "power.csv").read_bytes()
    rows = []
    for procs, t, c, run in ((1, t1, c1, runs[0]), (2, t2, c2, runs[1])):
        rows.append([name, str(procs), f"{t:.1f}", f"{t1 / t:.2f}", f"{c:.1f}",
                     f"{c1 / c:.2f}", "" if procs == 1 else f"{t2 - t1 / 2:.1f}",
                     f"{run['gather_seconds']:.2f}", f"{run['gathered_bytes'] / 1e3:.0f}",
                     "" if procs == 1 else ("yes" if same else "NO")])
    for d in ("one", "two"):
        shutil.rmtree(work / d)
    return rows


def _fit_files(work: Path) -> None:
    """``fit.json`` (``y ~ x + (1 + x | g)`` fitted to the pilot data) and ``log.csv``."""
    import pandas as pd

    from tomstats.glmm.lme import fit_lme

    df = pd.DataFrame(json.loads(DATA.read_text())["data"])
    df.to_csv(work / "log.csv", index=False)
    fit_lme(df, "y ~ x + (1 + x | g)").to_json(work / "fit.json")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.write_docs:
        require_markers(SCRIPT, PAGE)
    if shutil.which("taskset") is None:
        raise SystemExit("taskset (util-linux) is needed to pin the processes to cores")
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        raise SystemExit(f"two usable cores are needed, this process may use {usable}")
    cores = (usable[0], usable[1])
    load0 = os.getloadavg()[0]
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        work = Path(tmp)
        if args.only in (None, "power"):
            rows += _run(RUNS["power"], [
                "power", str(REPO / "simulations" / "power.toml"), "--test", "anova:tom_order",
                "--test", "glm-wald:delta", "--replicates", str(args.replicates)], work, cores)
        if args.only in (None, "fit"):
            _fit_files(work)
            rows += _run(RUNS["fit"], [
                "power", "--from-fit", "fit.json", "--data", "log.csv", "--term", "x",
                "--replicates", str(args.fit_studies)], work, cores)
    table = markdown_table(COLUMNS, rows)
    print(f"cores {cores[0]} and {cores[1]}; load average {load0:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(table, end="")
    if args.write_docs:
        write_docs(SCRIPT, argv, table, PAGE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
