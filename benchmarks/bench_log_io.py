"""Reading a large runner log: ``summarize`` and ``anova`` on N JSONL records vs the same rows
as CSV, in the same run.

The log: ``--records`` runner records (default 1,000,000; about 1.1 KB each, the shipped
SmolLM2 log's first record as the template: hashes, prompt and response text included),
4 LLMs × 5 contexts × 3 ToM orders, 1 % of the keys ending in an error record. The CSV:
the frame the analysis reader makes of that log, written with ``DataFrame.to_csv`` (the
same rows and columns, none of the raw text). Each command runs in a fresh process through
a small wrapper that reports its wall time, its CPU time (user + system) and its peak
resident memory (``resource.getrusage(RUSAGE_CHILDREN)`` of the command's process).

Goals (issue 22): the log within 3 × the CSV's time and under 1 GB peak memory.
``--baseline`` also times the runner's own reader (``tomstats.evaluate.read_log``, which
reads the whole file into memory; 49 s and 7.3 GB at 1,000,000 records before the streaming
reader existed): it needs several GB at the default size.

    python benchmarks/bench_log_io.py [--records 1000000] [--repeats 1] [--baseline]
        [--keep DIR] [--write-docs]

``--write-docs`` also writes the table into docs/benchmarks.md between this script's markers
(benchmarks/_docs.py), with the command, the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "data" / "smollm2_storysim_log.jsonl"

#: Runs a command in a child process; prints "<seconds> <peak RSS in KiB> <exit code> <CPU
#: seconds>" (CPU: user + system time of the command, less sensitive to a shared machine).
_WRAP = ("import resource, subprocess, sys, time\n"
         "t = time.perf_counter()\n"
         "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
         "dt = time.perf_counter() - t\n"
         "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
         "print(dt, u.ru_maxrss, rc, u.ru_utime + u.ru_stime)")

_CLI = "import sys; from tomstats.cli import main; sys.exit(main(sys.argv[1:]))"
_RUNNER = ("import sys, warnings; warnings.simplefilter('ignore')\n"
           "from tomstats.evaluate.log import read_log\n"
           "print(len(read_log(sys.argv[1], errors='keep')))")


def write_log(path: Path, n: int) -> None:
    """``n`` runner records (one in 100 keys an error) as JSON Lines."""
    t = json.loads(TEMPLATE.read_text(encoding="utf-8").splitlines()[0])
    contexts = (200, 500, 1000, 2000, 5000)
    with open(path, "wb") as fh:
        buf = []
        for i in range(n):
            m, rest = divmod(i, max(1, n // 4))
            ctx, order = contexts[rest % 5], rest // 5 % 3
            r = {**t, "model": f"llm-{min(m, 3)}", "config_hash": f"{min(m, 3):064x}",
                 "item_id": f"item-{i:08d}", "story_id": f"story-{i // 6:07d}",
                 "context_words": ctx, "n_words": ctx, "tom_order": order,
                 "correct": (i * 2654435761 >> 7) % 2}
            if i % 100 == 37:
                r.update(status="error", correct=None, error="HTTP 503: overloaded",
                         error_category="request_failed", parsed_answer=None)
            buf.append(orjson.dumps(r))
            if len(buf) == 10_000:
                fh.write(b"\n".join(buf) + b"\n")
                buf = []
        if buf:
            fh.write(b"\n".join(buf) + b"\n")


def write_csv(log: Path, csv: Path) -> int:
    """The analysis reader's frame of ``log`` as CSV; returns its rows."""
    from tomstats.analysis.table import read_evaluation

    df = read_evaluation(log)
    df.to_csv(csv, index=False)
    return len(df)


def measure(cmd: list[str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS (MiB), exit code and CPU seconds of ``cmd`` in a fresh
    process."""
    out = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout.split()
    return float(out[0]), float(out[1]) / 1024, int(out[2]), float(out[3])


#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("command", "CSV s", "log s", "ratio", "CSV MiB", "log MiB", "CSV CPU s",
           "log CPU s", "CPU ratio")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--baseline", action="store_true",
                    help="also time tomstats.evaluate.read_log (needs several GB)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="write the log and CSV here (default: a temporary folder)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return ["tomstats summarize", "tomstats anova",
            *(["evaluate.read_log (whole file)"] if args.baseline else [])]


def _row(name: str, csv: Path, log: Path, repeats: int) -> list[str]:
    """One command on the CSV and on the log: the best wall and CPU times, the peak memory."""
    res = {}
    for kind, path in (("csv", csv), ("log", log)):
        runs = [measure([sys.executable, "-c", _CLI, name, str(path)]) for _ in range(repeats)]
        if any(rc != 0 for _, _, rc, _ in runs):
            raise SystemExit(f"tomstats {name} {path.name} failed")
        res[kind] = (min(r[0] for r in runs), max(r[1] for r in runs), min(r[3] for r in runs))
    (tc, mc, cc), (tl, ml, cl) = res["csv"], res["log"]
    return [f"tomstats {name}", f"{tc:.1f}", f"{tl:.1f}", f"{tl / tc:.2f}", f"{mc:.0f}",
            f"{ml:.0f}", f"{cc:.1f}", f"{cl:.1f}", f"{cl / cc:.2f}"]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        log, csv = d / "run.jsonl", d / "run.csv"
        t0 = time.perf_counter()
        write_log(log, args.records)
        rows = write_csv(log, csv)
        made = (f"{args.records:,} records ({log.stat().st_size / 2**30:.2f} GiB) -> {rows:,} "
                f"rows; CSV {csv.stat().st_size / 2**20:.0f} MiB")
        print(f"{made}; made in {time.perf_counter() - t0:.0f} s")
        print(f"{platform.python_version()} on {platform.machine()}, "
              f"repeats {args.repeats} (best shown)")
        table = [_row(name, csv, log, args.repeats) for name in ("summarize", "anova")]
        if args.baseline:
            t, m, rc, c = measure([sys.executable, "-c", _RUNNER, str(log)])
            table.append(["evaluate.read_log (whole file)", "", f"{t:.1f}", "", "",
                          f"{m:.0f}" + ("" if rc == 0 else f" (exit {rc})"), "", f"{c:.1f}",
                          ""])
    text = markdown_table(COLUMNS, table)
    print(text, end="")
    if args.write_docs:
        write_docs("bench_log_io.py", argv,
                   text + f"\n{made}; seconds are wall time, CPU seconds user + system of the "
                   "command's process, MiB its peak resident memory (best of the repeats).\n")


if __name__ == "__main__":
    main()
