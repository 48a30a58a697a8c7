"""Item audit throughput: the whole audit with its learned adversary on the paper item set.

The paper item set, ``build_design_items(per_cell, seed=0)`` in the rooms setting (5
lengths × ``per_cell`` stories, orders 0–2: 7,500 items at 500 stories per length), is
audited three ways in the same run, each from a cold parse cache (every story parsed
again):

- **first audit's rules**: ``audit_items(items, rules=FIRST, adversary=False,
  lint=False)`` with ``FIRST`` the eight rules of the first audit (``t_last`` …
  ``cell_mode``, :data:`tomstats.stories.audit.AUDIT_RULES`) — the old audit's work
  (rules, balance, text), the obvious cheaper alternative;
- **every rule, no adversary**: all registered rules, the reference load and the lint;
- **whole audit**: that and the learned adversary (cross-fitted by story, blind and
  given the belief status).

The issue's target: the whole audit on 7,500 items in under a minute on one CPU core. The
script pins the linear-algebra libraries to one thread before NumPy loads, and reports CPU
seconds of this process beside wall seconds (CPU-s is the steadier figure on a shared
machine).

Run: ``python benchmarks/bench_audit.py [per_cell] [--write-docs]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402
from _timing import timed  # noqa: E402

#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("audit", "items", "CPU-s", "wall-s", "items per CPU-s", "checks (failed)")
ROWS = ("first audit's rules", "every rule, no adversary", "whole audit")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("per_cell", type=int, nargs="?", default=500,
                    help="stories per length of the paper item set (default 500: 7,500 "
                         "items)")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return list(ROWS)


def _timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    from tomstats.stories import audit_parse

    audit_parse._CACHE.clear()  # a cold start: every story parsed again
    return timed(fn)


def measure(per_cell: int = 500) -> tuple[list[list[str]], str]:
    """The table rows and the line with the ratios."""
    from tomstats.stories import build_design_items
    from tomstats.stories.audit import AUDIT_RULES, audit_items

    items = build_design_items(per_cell, seed=0, progress=False)
    first = [r for r in AUDIT_RULES if r != "reality"]
    runs: Sequence[tuple[str, Callable[[], object]]] = (
        (ROWS[0], lambda: audit_items(items, rules=first, adversary=False, lint=False)),
        (ROWS[1], lambda: audit_items(items, adversary=False)),
        (ROWS[2], lambda: audit_items(items)),
    )
    rows, cpu = [], {}
    for name, fn in runs:
        audit, c, w = _timed(fn)
        cpu[name] = c
        rows.append([name, f"{len(items):,}", f"{c:.1f}", f"{w:.1f}", f"{len(items) / c:,.0f}",
                     f"{len(audit.checks):,} ({len(audit.failed):,})"])
    line = (f"Paper item set, rooms, {per_cell} stories per length: the whole audit costs "
            f"{cpu[ROWS[2]] / cpu[ROWS[0]]:.1f} × the first audit's rules and "
            f"{cpu[ROWS[2]] / cpu[ROWS[1]]:.1f} × the audit without its adversary, per "
            f"CPU-second (target: the whole audit of 7,500 items under 60 s on one core).")
    return rows, line


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    rows, line = measure(args.per_cell)
    text = markdown_table(COLUMNS, rows) + f"\n{line}\n"
    print(text, end="")
    if args.write_docs:
        write_docs("bench_audit.py", argv, text)


if __name__ == "__main__":
    main()
