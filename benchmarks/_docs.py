"""Tables of docs/benchmarks.md (and of other pages, ``page=``) written by the benchmark
scripts themselves.

A script run with ``--write-docs`` replaces the block between its two markers in the page,

    <!-- begin: table written by bench_x.py --write-docs (do not edit by hand) -->
    `python benchmarks/bench_x.py ARGS` on MACHINE, load average L, DATE:

    | column | ... |
    |---|...|
    | ... |
    <!-- end: table written by bench_x.py -->

with the command as it was run, where and under what load, and the same Markdown table it
prints. Everything outside the markers (the text around, other scripts' tables) is kept.
``tests/test_docs_benchmarks.py`` checks that each block names a script that exists, whose
``--help`` works, and whose columns and rows are the ones the script writes (never the
timings).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def begin_marker(script: str, part: str = "") -> str:
    """The opening marker; ``part`` names one of several tables a script writes."""
    what = f"{script} --write-docs" + (f" [{part}]" if part else "")
    return f"<!-- begin: table written by {what} (do not edit by hand) -->"


def end_marker(script: str, part: str = "") -> str:
    return f"<!-- end: table written by {script}" + (f" [{part}]" if part else "") + " -->"


def add_write_docs_argument(ap: argparse.ArgumentParser) -> None:
    """``--write-docs``: put the table into docs/benchmarks.md between the script's markers."""
    ap.add_argument("--write-docs", action="store_true",
                    help="also write the table into docs/benchmarks.md, between this "
                         "script's markers, with the command, machine and load")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: header, separator, one line per row (cells as given)."""
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"row {list(r)} has {len(r)} cells for {len(columns)} columns")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def machine() -> str:
    """CPU count, processor and Python, as the page states them."""
    return (f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
            f"Python {sys.version.split()[0]}")


def require_markers(script: str, page: Path = PAGE, part: str = "") -> str:
    """The text of ``page``, after checking that it has exactly one pair of ``script``'s
    markers (for ``part``) in order; otherwise SystemExit naming them. Scripts that run long
    call it before any work, so that ``--write-docs`` fails at once, not at the end."""
    text = page.read_text(encoding="utf-8")
    begin, end = begin_marker(script, part), end_marker(script, part)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise SystemExit(f"{page}: needs exactly one pair of markers {begin!r} … {end!r}")
    return text


def write_docs(script: str, argv: Sequence[str], table: str, page: Path = PAGE,
               part: str = "") -> None:
    """Replace the block between ``script``'s markers in ``page`` with the command line
    (``python benchmarks/SCRIPT`` and ``argv`` without ``--write-docs``), the machine, the
    load average and the date, and ``table``. The page is written to a temporary file and
    renamed over the old one; a page without the markers is an error (nothing written).
    ``part`` selects one of several marked tables of the script (markers
    ``... SCRIPT --write-docs [PART] ...`` and ``... SCRIPT [PART] -->``)."""
    text = require_markers(script, page, part)
    begin, end = begin_marker(script, part), end_marker(script, part)
    args = [a for a in argv if a != "--write-docs"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cmd = shlex.join(["python", f"benchmarks/{script}", *args])
    head = (f"`{cmd}` on {machine()}, load average {load:.1f} at the end, "
            f"{datetime.date.today().isoformat()}:\n\n")
    head_at, tail_at = text.index(begin) + len(begin), text.index(end)
    new = text[:head_at] + "\n" + head + table + text[tail_at:]
    tmp = page.with_suffix(".md.tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(page)
    print(f"wrote the table into {page}", file=sys.stderr)
