"""``tomstats contrasts`` on logs (the ANOVA's reference grid) and the grid's own checks:
equal-weight marginal means, the between factors constant within a subject, residual df."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.analysis.contrasts import anova_grid
from tomstats.analysis.marginal import contrasts, emmeans
from tomstats.cli import main

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "data" / "smollm2_storysim_log.jsonl"


def test_command_writes_the_simple_effects(tmp_path, capsys) -> None:
    out = tmp_path / "c.csv"
    assert main(["contrasts", str(LOG), "--specs", "tom_order", "--by", "context_words",
                 "--adjust", "holm", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Reference model: linear model of the 300 rows")
    assert "Holm's step-down" in printed and "intervals Bonferroni" in printed
    want = contrasts(anova_grid(LOG), "tom_order", "context_words", adjust="holm")
    got = pd.read_csv(out)
    assert got["contrast"].tolist() == want["contrast"].tolist()
    np.testing.assert_allclose(got[["estimate", "se", "p_adjusted", "lower"]],
                               want[["estimate", "se", "p_adjusted", "lower"]], rtol=1e-12)


def test_command_poly_and_interaction(capsys) -> None:
    assert main(["contrasts", str(LOG), "--specs", "context_words", "--method", "poly"]) == 0
    text = capsys.readouterr().out
    assert "Polynomial contrasts of context_words" in text
    assert all(w in text for w in ("linear", "quadratic", "cubic", "quartic"))
    assert main(["contrasts", str(LOG), "--specs", "tom_order", "context_words",
                 "--interaction", "--method", "poly", "pairwise"]) == 0
    text = capsys.readouterr().out
    assert "tom_order_poly" in text and "context_words_pairwise" in text


def _rows(cells: dict[tuple[str, str], list[int]]) -> pd.DataFrame:
    rows = [(a, b, y) for (a, b), ys in cells.items() for y in ys]
    return pd.DataFrame(rows, columns=["tom_order", "context_words", "correct"])


def test_marginal_means_weight_cells_equally() -> None:
    """Unequal cells: the marginal mean of a level is the mean of its cell means (emmeans'
    default), not the share of its correct rows; its SE is sqrt(MSE * sum 1/n_c) / 2."""
    df = _rows({("0", "a"): [1, 1, 1, 0], ("0", "b"): [0, 1], ("1", "a"): [0, 0, 1],
                ("1", "b"): [1, 0, 0, 0, 1]})
    grid = anova_grid(df, between=["tom_order", "context_words"])
    m = emmeans(grid, "tom_order")
    cell = df.groupby(["tom_order", "context_words"])["correct"]
    means, n = cell.mean(), cell.size()
    mse = ((df["correct"] - cell.transform("mean")) ** 2).sum() / (len(df) - 4)
    np.testing.assert_allclose(m["estimate"], means.groupby(level=0).mean(), rtol=1e-12)
    se = np.sqrt(mse * (1 / n).groupby(level=0).sum()) / 2
    np.testing.assert_allclose(m["se"], se, rtol=1e-12)
    assert m["df"].iloc[0] == len(df) - 4
    assert m["estimate"].iloc[0] != pytest.approx(df.loc[df.tom_order == "0", "correct"].mean())


def test_grid_refuses_a_subject_in_two_between_cells() -> None:
    df = pd.DataFrame({"model": ["m1", "m1", "m2", "m2", "m3", "m3"],
                       "family": ["a", "b", "a", "a", "b", "b"],
                       "tom_order": [0, 1, 0, 1, 0, 1], "correct": [1, 0, 1, 1, 0, 1]})
    with pytest.raises(ValueError, match="subject model='m1' has two values of the between "
                                         "factor 'family'"):
        anova_grid(df, between="family", within="tom_order", subject="model")


def test_grid_needs_residual_df() -> None:
    df = _rows({("0", "a"): [1], ("0", "b"): [0], ("1", "a"): [0], ("1", "b"): [1]})
    with pytest.raises(ValueError, match="no residual degrees of freedom: 4 rows in 4"):
        anova_grid(df, between=["tom_order", "context_words"])
