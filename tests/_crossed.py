"""A crossed LLM × item design with one row per pair, for the Laplace fits' tests."""

from __future__ import annotations

import numpy as np
import pandas as pd


def crossed_grid(n_llms: int, n_items: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, codes)``: intercept and an item covariate x, 0/1 outcomes from
    :math:`\\eta = 0.2 + 0.9x + a_{llm} + b_{item}` (SDs 0.8 and 0.6; seeded), level codes
    ``[llm, item]``; rows LLM-major (a grid)."""
    rng = np.random.default_rng(seed)
    llm = np.repeat(np.arange(n_llms), n_items)
    item = np.tile(np.arange(n_items), n_llms)
    x = np.tile(rng.normal(size=n_items), n_llms)
    eta = 0.2 + 0.9 * x + rng.normal(0, 0.8, n_llms)[llm] + rng.normal(0, 0.6, n_items)[item]
    y = (rng.random(llm.size) < 1 / (1 + np.exp(-eta))).astype(float)
    return np.column_stack([np.ones_like(x), x]), y, np.column_stack([llm, item])


def crossed_frame(n_llms: int, n_items: int, seed: int) -> pd.DataFrame:
    """:func:`crossed_grid` as a log: ``model``, ``item``, ``x``, ``correct``."""
    X, y, codes = crossed_grid(n_llms, n_items, seed)
    return pd.DataFrame({"model": [f"llm{k:02d}" for k in codes[:, 0]],
                         "item": [f"p{j:03d}" for j in codes[:, 1]], "x": X[:, 1],
                         "correct": y.astype(int)})
