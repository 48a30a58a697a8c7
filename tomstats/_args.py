"""Argument types shared by the subcommands: values checked while the command line is parsed.

A seed must fit the 64-bit generators (JAX, NumPy) it ends in: ``--seed 2**63`` used to fail
deep inside them as an ``OverflowError`` (exit 3). :func:`seed_arg` refuses it, and a
negative seed, with one line naming the value (exit 2).
"""

from __future__ import annotations

import argparse

__all__ = ["MAX_SEED", "seed_arg"]

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
