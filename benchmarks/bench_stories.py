"""Story generator throughput: 100-event StorySim stories per second, with ground truth.

Each story is the paper's second-order storyboard (8 characters, rooms off a hallway,
n = 100 events, mislead distance 30; roles and places drawn anew for every seed), checked
(:func:`validate_storyboard`), filled with the look-ahead random fill, and answered for
every question type: reality (order 0), first order, second order and the WM-Human
question. Two paths are timed in the same run:

- **fast**: :func:`generate_story` (integer-coded fill, events built only on demand) and
  :mod:`tomstats.stories.coded_tracker` (one pass over the story's moves answers orders 0, 1 and 2);
- **reference**: :func:`generate_story_reference` (one ``Event`` object per step) and the
  readable tracker :func:`tomstats.stories.beliefs.belief` / ``wm_answer``.

Included: storyboard, validation, the 100-event fill, ground truth for the four
questions. Not included: rendering text (sentences are built from the events when an item
is rendered; fitting a story to 200–5,000 words is a separate cost). Before timing, the
two paths are checked to give the same events and the same answers.

A second part times the **paper item set with text**: ``build_design_items(500, seed)``
in the rooms setting (5 lengths × 500 stories, orders 0–2: 7,500 items, every story told
to its length with the natural sentence forms, three times for the adversarial selection,
and answered by the tracker), in one process and then with ``cores`` worker processes
(the default of ``tomstats stories`` on this machine; the same items, checked), beside
writing the items to JSON Lines (the cost any item set pays); the issue's target is under
a minute. CPU seconds count the worker processes too.

Run: ``python benchmarks/bench_stories.py [n_stories] [repeats] [paper_per_cell]
[--write-docs]``. The issue's target is ≥ 5,000 stories/s on one core of an idle machine;
timings are noisy on a shared machine, so the best and the median of several repeats are
printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tomstats.stories import SETTINGS, belief, second_order_storyboard
from tomstats.stories.coded_tracker import beliefs_along, encode_story, wm_answer_fast
from tomstats.stories.questions import wm_answer
from tomstats.stories.storyboard import Story, generate_story, generate_story_reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402
from _timing import timed  # noqa: E402

#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("path", "stories × repeats", "stories per CPU-s, best / median",
           "stories per wall-s, best / median")

ST = SETTINGS["rooms"]
CHARS = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank")
Answers = tuple[str | None, ...]


def _story(seed: int, generate: Callable[..., Story]) -> Story:
    sb = second_order_storyboard(CHARS, ST.locations, ST.edges, ST.hub, n=100,
                                 mislead_distance=30, seed=seed)
    return generate(sb, seed)


def fast(seed: int) -> tuple[Story, Answers]:
    """One story and its four answers, fast path."""
    story = _story(seed, generate_story)
    r = story.storyboard.roles
    coded = encode_story(story)
    reality, first, second = beliefs_along(coded, (r["S1"], r["S2"]), r["T"])
    return story, (reality, first, second, wm_answer_fast(coded, r["S1"], r["S2"], r["T"]))


def reference(seed: int) -> tuple[Story, Answers]:
    """One story and its four answers, reference path."""
    story = _story(seed, generate_story_reference)
    r, w, ev = story.storyboard.roles, story.world, story.events
    return story, (belief(w, ev, (), r["T"]), belief(w, ev, (r["S1"],), r["T"]),
                   belief(w, ev, (r["S1"], r["S2"]), r["T"]),
                   wm_answer(w, ev, r["S1"], r["S2"], r["T"]))


def rate(fn: Callable[[int], object], n: int,
         repeats: int) -> tuple[float, float, float, float]:
    """Best and median stories/s over ``repeats`` runs of ``n`` seeds: wall clock, then
    per CPU second of this process (``time.process_time``; closer to one idle core when
    the machine is shared)."""
    wall, cpu = [], []
    for _ in range(repeats):
        _out, c, w = timed(lambda: [fn(seed) for seed in range(n)])
        wall.append(n / w)
        cpu.append(n / max(c, 1e-9))
    return max(wall), statistics.median(wall), max(cpu), statistics.median(cpu)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=2000,
                    help="stories timed on the fast path (the reference path: a fifth)")
    ap.add_argument("repeats", type=int, nargs="?", default=5, help="repeats of each")
    ap.add_argument("paper_per_cell", type=int, nargs="?", default=500,
                    help="stories per length of the paper item set with text")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return ["fast", "reference"]


def throughput(n: int = 2000, repeats: int = 5) -> tuple[list[list[str]], str]:
    """The table rows of the two paths and the line with their ratio."""
    for seed in range(200):  # same stories, same answers
        (s1, a1), (s2, a2) = fast(seed), reference(seed)
        if s1.events != s2.events or a1 != a2:
            raise AssertionError(f"seed {seed}: fast path differs from the reference")
    m = max(1, n // 5)
    f, r = rate(fast, n, repeats), rate(reference, m, repeats)
    rows = [[name, f"{k:,} × {repeats}", f"{x[2]:,.0f} / {x[3]:,.0f}",
             f"{x[0]:,.0f} / {x[1]:,.0f}"] for name, x, k in (("fast", f, n),
                                                             ("reference", r, m))]
    line = (f"Stories of 100 events with ground truth (reality, order 1, order 2, WM-Human), "
            f"storyboard and validation included, text not; fast / reference (median): "
            f"{f[3] / r[3]:.1f} × per CPU-second, {f[1] / r[1]:.1f} × per wall-second "
            f"(target: ≥ 5,000 stories/s on one idle core).")
    return rows, line


_PAPER_RUN = """
import hashlib, json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from tomstats.stories import build_design_items
items = build_design_items(int(sys.argv[1]), seed=0, progress=False, cores=int(sys.argv[2]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
r = resource.getrusage(resource.RUSAGE_CHILDREN)
h = hashlib.sha256("\\n".join(repr(it) for it in items).encode()).hexdigest()
words = sum(it.n_words for it in items if it.tom_order == 0)
from tomstats.stories import write_items
t1 = time.perf_counter()
write_items(sys.argv[3], items)
print(json.dumps(dict(wall=wall, cpu=cpu + r.ru_utime + r.ru_stime, hash=h, n=len(items),
                      words=words, write=time.perf_counter() - t1)))
"""


def _paper_run(per_cell: int, cores: int) -> dict[str, float | str]:
    """Build the paper set in a fresh process (no cache warmed by an earlier run): wall
    seconds, CPU seconds of it and its worker processes, and a hash of the items."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", _PAPER_RUN, str(per_cell), str(cores),
                              str(Path(d) / "items.jsonl")],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def paper_set(per_cell: int = 500) -> str:
    """Time the paper item set with text (CPU and wall) in one process and in worker
    processes, each in a fresh process, and writing it out."""
    from tomstats._cpus import usable_cpus
    from tomstats.stories.cli import MAX_DEFAULT_CORES

    cores = min(MAX_DEFAULT_CORES, usable_cpus())
    one, many = _paper_run(per_cell, 1), _paper_run(per_cell, cores)
    if one["hash"] != many["hash"]:
        raise AssertionError(f"cores={cores} told other items than one process")
    return (f"Paper item set with text (import included): {one['n']:,} items ({per_cell} "
            f"stories per length, {one['words']:,} words of stories, each story told 3 "
            f"times for the selection) in one process {one['cpu']:.1f} CPU-s / "
            f"{one['wall']:.1f} s wall; with {cores} worker processes (the same items) "
            f"{many['cpu']:.1f} CPU-s in all / {many['wall']:.1f} s wall, "
            f"{one['wall'] / many['wall']:.2f} × faster (target: under 60 s); writing them: "
            f"{one['write']:.1f} s wall.")


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    rows, line = throughput(args.n, args.repeats)
    text = markdown_table(COLUMNS, rows) + f"\n{line} {paper_set(args.paper_per_cell)}\n"
    print(text, end="")
    if args.write_docs:
        write_docs("bench_stories.py", argv, text)


if __name__ == "__main__":
    main()
