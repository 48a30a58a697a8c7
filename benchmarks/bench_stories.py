"""Story generator throughput: 100-event StorySim stories per second, with ground truth.

Each story is the paper's second-order storyboard (8 characters, rooms off a hallway,
n = 100 events, mislead distance 30) filled with the look-ahead random fill, then answered
for every question type: reality, first order, second order (belief tracker) and the
world-model question. Run: ``python benchmarks/bench_stories.py [n_stories]``.
The issue's target is ≥ 5,000 stories/s on one core; this pure-Python generator is
reported as measured, without claiming the target.
"""

from __future__ import annotations

import sys
import time

from tomstats.stories import SETTINGS, belief, generate_story, second_order_storyboard
from tomstats.stories.questions import wm_answer


def one(seed: int) -> tuple[str | None, ...]:
    st = SETTINGS["rooms"]
    chars = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank")
    sb = second_order_storyboard(chars, st.locations, st.edges, st.hub, n=100,
                                 mislead_distance=30, seed=seed)
    story = generate_story(sb, seed)
    r, w, ev = sb.roles, story.world, story.events
    return (belief(w, ev, (), r["T"]), belief(w, ev, (r["S1"],), r["T"]),
            belief(w, ev, (r["S1"], r["S2"]), r["T"]), wm_answer(w, ev, r["S1"], r["S2"], r["T"]))


def main(n: int = 2000) -> None:
    one(0)
    t0 = time.perf_counter()
    for seed in range(n):
        one(seed)
    dt = time.perf_counter() - t0
    print(f"{n} stories of 100 events with ground truth in {dt:.2f} s: "
          f"{n / dt:,.0f} stories/s (one core)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
