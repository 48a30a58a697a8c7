"""Separation: a Laplace fit whose maximum is at infinity says so and exits 4.

Under separation the optimiser used to stop at estimates of 24-115 with standard errors of
1e4-1e5 and report "converged" (exit 0). The linear program of
:mod:`tomstats.glmm.separation` now names the diverging terms.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.cli import main
from tomstats.glmm.separation import separation


def _rows(p_correct, seed: int = 1) -> pd.DataFrame:
    """Six models × ToM order 0/1/2 × 20 items; ``p_correct(order, k)`` the accuracy."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(6):
        for t in (0, 1, 2):
            for k in range(20):
                rows.append({"correct": int(rng.random() < p_correct(t, k)), "model": f"m{m}",
                             "item": f"i{t}{k}", "tom_order": t,
                             "context_words": 200 * (1 + k % 3)})
    return pd.DataFrame(rows)


# (id, accuracy by (order, item), the separated terms expected)
CASES = [
    ("order-0-always-right", lambda t, k: 1.0 if t == 0 else 0.4,
     ("(Intercept)", "C(tom_order)[T.1]", "C(tom_order)[T.2]")),
    ("order-2-always-wrong", lambda t, k: 0.0 if t == 2 else 0.6, ("C(tom_order)[T.2]",)),
    ("no-separation", lambda t, k: (0.8, 0.6, 0.4)[t], ()),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_laplace_fit_under_separation_exits_4(case, tmp_path: Path, capsys) -> None:
    _, p, expected = case
    _rows(p).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "f.json"
    capsys.readouterr()
    rc = main(["fit", str(tmp_path / "t.csv"), "--backend", "laplace", "--model",
               "correct ~ C(tom_order) + (1 | model)", "--out", str(out)])
    printed = capsys.readouterr()
    doc = json.loads(out.read_text())
    if expected:
        assert rc == 4, printed
        assert "fitted probabilities numerically 0 or 1 occurred" in printed.out
        assert set(expected) <= set(doc["separation"]) and doc["converged"] is False
        assert "the data are separated by" in printed.err and "infinite" in printed.err
    else:
        assert rc == 0, printed
        assert doc["separation"] == [] and doc["converged"] is True
        assert "WARNING" not in printed.out and max(map(abs, doc["beta"])) < 5


@pytest.mark.parametrize("X,y,trials,expected", [
    # complete separation by x
    ([[1, -2], [1, -1], [1, 1], [1, 2]], [0, 0, 1, 1], None, ("x0", "x1")),
    # overlap at x = 0: quasi-complete (x = 0 has both outcomes, the rest is ordered)
    ([[1, -1], [1, 0], [1, 0], [1, 1]], [0, 0, 1, 1], None, ("x1",)),
    # overlapping: not separated
    ([[1, -1], [1, 0], [1, 1], [1, 2]], [0, 1, 0, 1], None, ()),
    # binomial cells: a cell with both outcomes pins x'b = 0
    ([[1, 0], [1, 1]], [3, 5], [5, 5], ("x1",)),
    ([[1, 0], [1, 1]], [3, 2], [5, 5], ()),
])
def test_separation_linear_program(X, y, trials, expected) -> None:
    found = separation(np.array(X, float), np.array(y, float),
                       None if trials is None else np.array(trials, float))
    assert set(expected) <= set(found) if expected else found == ()
    if found:  # an independent check: the log-likelihood grows along the direction
        X_, y_ = np.array(X, float), np.array(y, float)
        n_ = np.ones_like(y_) if trials is None else np.array(trials, float)
        from scipy.optimize import minimize

        def nll(b):
            eta = X_ @ b
            return -(y_ * eta - n_ * np.logaddexp(0, eta)).sum()

        res = minimize(nll, np.zeros(X_.shape[1]), method="BFGS")
        assert nll(res.x) < 1e-3 * len(y_) or np.max(np.abs(res.x)) > 5
