"""A small evaluation table for the command-line tests: three LLMs × ToM order 0/1/2 ×
two context lengths × four items a cell, one binary outcome a row (seeded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def small_table(path: Path) -> Path:
    """Write the table as CSV to ``path`` and return it (accuracy falls with ToM order)."""
    rng = np.random.default_rng(0)
    rows = [{"correct": int(rng.random() < 0.8 - 0.2 * t), "model": m, "item": f"i{t}{c}{k}",
             "tom_order": t, "context_words": c}
            for m in ("a", "b", "c") for t in (0, 1, 2) for c in (200, 1000) for k in range(4)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path
