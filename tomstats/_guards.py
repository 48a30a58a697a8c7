"""Size guards: estimate a run's memory and time before it starts, refuse what cannot fit.

A simulation with ``replicates = 1e12`` or ``questions_per_cell = 2e9``, or a story set of a
billion stories, would otherwise fail minutes later with an out-of-memory traceback (or
swap the machine to a halt). Each stage turns its sizes into a :class:`Footprint` (bytes held
at once, rough seconds) and calls :func:`check_footprint` before any work; the estimate is
deliberately simple (the big arrays only) and the refusal says how to override it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Footprint", "available_memory", "check_footprint", "format_bytes",
           "format_seconds", "MAX_SECONDS"]

#: Runs estimated to take longer than this are refused unless overridden (one day).
MAX_SECONDS = 24 * 3600.0
#: Share of the available memory a run may plan to use.
MEMORY_SHARE = 0.8


@dataclass(frozen=True)
class Footprint:
    """An estimate of what a run needs.

    Attributes
    ----------
    what
        The run in words, e.g. ``"simulation"``.
    bytes
        Peak memory of its largest arrays, in bytes.
    seconds
        Rough wall time on one CPU core (``0`` when negligible).
    detail
        Where the size comes from, e.g. ``"1e12 replicates × 5 capability levels × 15 cells"``.
    """

    what: str
    bytes: float
    seconds: float
    detail: str

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.what, max(self.bytes, other.bytes), self.seconds + other.seconds,
                         f"{self.detail}; {other.detail}")


def available_memory() -> int:
    """Bytes of memory available to a new allocation (``MemAvailable``, else physical RAM)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 2**63 - 1


def format_bytes(n: float) -> str:
    """``1.5e9`` → ``"1.4 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def format_seconds(s: float) -> str:
    """``5400`` → ``"1.5 h"``."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.3g} days"


def check_footprint(fp: Footprint, *, allow_large: bool = False,
                    flag: str | None = "allow_large=True (--allow-large)",
                    share: float = MEMORY_SHARE) -> None:
    """Raise ``ValueError`` when ``fp`` needs more memory than is available or over a day.

    The limit is ``share`` (default :data:`MEMORY_SHARE`) × :func:`available_memory` bytes
    and :data:`MAX_SECONDS` seconds; ``allow_large=True`` skips the check (the caller takes
    the risk). ``flag`` names the override in the message; ``None``: there is none.
    """
    if allow_large:
        return
    avail = available_memory()
    way_out = "make it smaller" + (f" or pass {flag} to run it anyway" if flag else "")
    if fp.bytes > share * avail:
        raise ValueError(
            f"{fp.what} too large: needs about {format_bytes(fp.bytes)} of memory "
            f"({fp.detail}) but {format_bytes(avail)} is available; {way_out}")
    if fp.seconds > MAX_SECONDS:
        raise ValueError(
            f"{fp.what} too large: would take about {format_seconds(fp.seconds)} "
            f"({fp.detail}); {way_out}")
