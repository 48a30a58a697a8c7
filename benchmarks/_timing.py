"""The benchmarks' one timing loop: CPU seconds of this process beside wall seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """Run ``fn()`` once: its result, the CPU seconds of this process
    (``time.process_time``; closer to one idle core when the machine is shared) and the
    wall seconds it took."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - t0
