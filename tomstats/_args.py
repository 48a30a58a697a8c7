"""Argument types shared by the subcommands: values checked while the command line is parsed.

A seed must fit the 64-bit generators (JAX, NumPy) it ends in: ``--seed 2**63`` used to fail
deep inside them as an ``OverflowError`` (exit 3). :func:`seed_arg` refuses it, and a
negative seed, with one line naming the value (exit 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["MAX_SEED", "count_arg", "int_arg", "seed_arg"]

#: Largest seed every generator takes (a signed 64-bit integer).
MAX_SEED = 2**63 - 1


def seed_arg(text: str) -> int:
    """``--seed``: an integer in ``[0, 2**63 - 1]``."""
    try:
        v = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"a seed must be an integer from 0 to 2**63 - 1 = {MAX_SEED}, got {text}")
    return v


def count_arg(text: str) -> int:
    """A whole number, also written like ``1e6`` (the command checks its range and size)."""
    try:
        v = float(text) if any(c in text.lower() for c in ".e") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(v)


def int_arg(lo: int, hi: int, why: str = "") -> Callable[[str], int]:
    """An argument type: a whole number (:func:`count_arg`) from ``lo`` to ``hi``; ``why``
    ends the message of a value out of range."""
    def parse(text: str) -> int:
        v = count_arg(text)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {lo} to {hi}{why}, got {text}")
        return v

    parse.__name__ = "int"
    return parse
