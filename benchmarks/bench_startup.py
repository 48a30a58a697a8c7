"""Start-up of the command line: whole-process times of the light commands, beside a bare
interpreter and ``import numpy`` measured in the same run.

Each command runs ``--repeat`` times (default 7) in a fresh process; the table gives the
median wall time, its ratio to ``python -c pass`` and whether JAX was imported (read from
``sys.modules`` at exit). The goals of the layout: ``tomstats --help`` within 15 × a bare
interpreter, ``tomstats summarize`` on the shipped log under 1.5 s.

    python benchmarks/bench_startup.py [--repeat 7] [--write-docs]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("command", "median s", "× bare python", "JAX imported")

REPO = Path(__file__).resolve().parents[1]
LOG = REPO / "data" / "smollm2_storysim_log.jsonl"

#: Runs the command line in this interpreter and reports whether JAX was imported.
_CLI = ("import sys; from tomstats.cli import main; sys.argv = ['tomstats', *sys.argv[1:]]\n"
        "try:\n    rc = main()\nexcept SystemExit as e:\n    rc = e.code or 0\n"
        "sys.stderr.write('jax=%d\\n' % ('jax' in sys.modules)); sys.exit(rc)")
_PROBE = "; import sys; sys.stderr.write('jax=%d\\n' % ('jax' in sys.modules))"


def _cases(tmp: Path) -> list[tuple[str, list[str]]]:
    py = sys.executable
    return [
        ("python -c pass", [py, "-c", "pass" + _PROBE]),
        ('python -c "import numpy"', [py, "-c", "import numpy" + _PROBE]),
        ('python -c "import tomstats"', [py, "-c", "import tomstats" + _PROBE]),
        ("tomstats --help", [py, "-c", _CLI, "--help"]),
        ("tomstats stories --help", [py, "-c", _CLI, "stories", "--help"]),
        ("tomstats stories --design paper --n 1",
         [py, "-c", _CLI, "stories", "--design", "paper", "--n", "1", "--out",
          str(tmp / "items.jsonl"), "--force"]),
        (f"tomstats summarize {LOG.relative_to(REPO)}", [py, "-c", _CLI, "summarize", str(LOG)]),
    ]


def _time(cmd: list[str]) -> tuple[float, bool]:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({res.returncode}):\n{res.stderr}")
    return dt, "jax=1" in res.stderr


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per command (default 7)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return [f"`{name}`" for name, _ in _cases(Path("."))]


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cases = _cases(Path(tmp))
        for _name, cmd in cases:  # warm the file cache and compiled bytecode
            _time(cmd)
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        jax: dict[str, bool] = {}
        for _ in range(args.repeat):  # interleaved, so load changes hit every command alike
            for name, cmd in cases:
                dt, jax[name] = _time(cmd)
                times[name].append(dt)
    bare = statistics.median(times["python -c pass"])
    rows = [[key, f"{statistics.median(ts):.3f}", f"{statistics.median(ts) / bare:.1f}",
             "yes" if jax[name] else "no"]
            for key, (name, ts) in zip(row_keys(args), times.items(), strict=True)]
    text = markdown_table(COLUMNS, rows) + (
        f"\n{args.repeat} runs each (median), interleaved; goals: `tomstats --help` within "
        "15 × bare python, `summarize` under 1.5 s, none importing JAX.\n")
    print(text, end="")
    if args.write_docs:
        write_docs("bench_startup.py", argv, text)


if __name__ == "__main__":
    main()
