"""Marginal means and contrasts of a log's ANOVA (tomstats.analysis.contrasts) against R's
emmeans, and pairwise tests of a within design against pingouin's ``pairwise_tests``.

The emmeans numbers come from ``tests/reference/emmeans_anova.R``: when ``Rscript`` with
emmeans and afex is here the script is run afresh into a temporary folder; otherwise the
committed ``tests/reference/emmeans_anova.json`` (same script, same seeds, data included) is
used. Three cases: a between design (``lm`` on one row per question, unequal cells), a
within design and a mixed design (afex ``aov_ez``, the multivariate model). Every number
agrees within 1e-6 (relative, or absolute near 0) except the bounds of Tukey intervals,
which R computes with ``qtukey``, documented as accurate to about 4 decimals: those within
5e-4 of the SE.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import r_reference

from tomstats.analysis.contrasts import anova_grid
from tomstats.analysis.marginal import (
    contrasts,
    emmeans,
    p_adjust,
    poly_coefficients,
    simple_effects,
)

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT = REFERENCE / "emmeans_anova.R"
COMMITTED = REFERENCE / "emmeans_anova.json"
TOL = 1e-6
#: R's qtukey is accurate to about 4 decimals (its documentation): Tukey bounds, in SEs.
TUKEY_Q_TOL = 5e-4
#: emmeans' column -> tomstats'
COLUMNS = {"emmean": "estimate", "estimate": "estimate", "SE": "se", "df": "df",
           "lower.CL": "lower", "upper.CL": "upper", "t.ratio": "statistic",
           "p.value": "p_adjusted"}
CASES = [c["name"] for c in json.loads(COMMITTED.read_text())["cases"]]


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("emmeans", "afex", "jsonlite"), Path(tmp))


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    data, source = _reference(str(tmp_path_factory.mktemp("emmeans")))
    print(f"\nemmeans reference: {source}; emmeans {data['emmeans_version']}, "
          f"afex {data['afex_version']}")
    return {c["name"]: c for c in data["cases"]}


def _grid(case: dict[str, Any]):
    return anova_grid(pd.DataFrame(case["data"]), dv=case["dv"], between=case["between"],
                      within=case["within"] or None, subject=case["subject"])


def _ours(grid, q: dict[str, Any]) -> pd.DataFrame:
    by = q["by"] or None
    if q["kind"] == "emmeans":
        return emmeans(grid, q["specs"], by, level=q["level"])
    return contrasts(grid, q["specs"], by, method=q["method"] if q["interaction"]
                     else q["method"][0], interaction=q["interaction"], adjust=q["adjust"],
                     level=q["level"])


def _r_text(value: str) -> str:
    """A label as tomstats writes it: afex names numeric within levels ``X0`` (R's syntactic
    names), and emmeans then does not prefix them with the factor's name."""
    return re.sub(r"(?<![\w.])X(?=-?\d)", "", value)


def _label_columns(ours: pd.DataFrame, r: dict[str, list], within: bool) -> None:
    for col, values in r.items():
        if col in COLUMNS:
            continue
        have = [str(v) for v in ours[col]]
        want = [_r_text(str(v)) for v in values]
        if within and col == "contrast":  # afex's levels carry no factor-name prefix
            have = [re.sub(r"[A-Za-z_]+(?=-?\d)", "", h) for h in have]
        assert have == want, col


def _compare(ours: pd.DataFrame, q: dict[str, Any], within: bool) -> float:
    r = q["result"]
    assert len(ours) == len(r["df"])
    _label_columns(ours, r, within)
    worst = 0.0
    for theirs, col in COLUMNS.items():
        if theirs not in r:
            continue
        want = np.array(r[theirs], dtype=float)
        have = ours[col].to_numpy(dtype=float)
        if q.get("adjust") == "tukey" and col in ("lower", "upper"):
            se = ours["se"].to_numpy()
            np.testing.assert_allclose((have - want) / se, 0.0, atol=TUKEY_Q_TOL, err_msg=col)
            continue
        np.testing.assert_allclose(have, want, rtol=TOL, atol=TOL, err_msg=col)
        gap = np.abs(have - want) / np.maximum(np.abs(want), 1.0)
        worst = max(worst, float(np.max(gap)))
    return worst


@pytest.mark.parametrize("name", CASES)
def test_matches_emmeans(ref, name: str) -> None:
    case = ref[name]
    grid = _grid(case)
    worst = 0.0
    for q in case["queries"]:
        where = f"{name}: {q['kind']} {q['specs']} | {q['by']} {q['method']} {q['adjust']}"
        try:
            worst = max(worst, _compare(_ours(grid, q), q, bool(case["within"])))
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    print(f"{name}: {len(case['queries'])} queries, max |tomstats - emmeans| / "
          f"max(|emmeans|, 1) = {worst:.1e}")


def test_poly_coefficients_are_emmeans_integers() -> None:
    assert poly_coefficients(3).tolist() == [[-1, 0, 1], [1, -2, 1]]
    assert poly_coefficients(5).tolist() == [[-2, -1, 0, 1, 2], [2, -1, -2, -1, 2],
                                             [-1, 2, 0, -2, 1], [1, -4, 6, -4, 1]]
    c = poly_coefficients(8)  # degree at most 6, orthogonal to 1 and to each other
    assert c.shape == (6, 8)
    np.testing.assert_allclose(c.sum(axis=1), 0.0, atol=1e-12)
    gram = c @ c.T
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-9)


def test_p_adjust_equals_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, 0.04, 0.03, 0.2, 0.001, 0.04])
    for ours, theirs in (("holm", "holm"), ("bonferroni", "bonferroni"), ("fdr", "fdr_bh")):
        np.testing.assert_allclose(p_adjust(p, ours), multipletests(p, method=theirs)[1],
                                   rtol=1e-12)


def test_simple_effects_stack_both_directions(ref) -> None:
    grid = _grid(ref["between_5x3"])
    table = simple_effects(grid, ["tom_order", "context_words"], adjust="holm")
    by_ctx = contrasts(grid, "tom_order", "context_words", adjust="holm")
    rows = table[table["effect"] == "tom_order"]
    assert (rows["tom_order"] == ".").all()
    np.testing.assert_allclose(rows["p_adjusted"], by_ctx["p_adjusted"], rtol=1e-12)
    assert set(table["effect"]) == {"tom_order", "context_words"}
    assert len(table) == 5 * 3 + 3 * 10


# ------------------------------------------------------------------------------- pingouin


def _balanced_within() -> pd.DataFrame:
    rng = np.random.default_rng(33)
    rows = []
    for s in range(9):
        u = rng.normal(0, 0.8)
        for c in (200, 1000, 5000):
            for t in (0, 1, 2):
                p = 1 / (1 + np.exp(-(1 + u - 0.6 * t - 0.2 * np.log(c / 200))))
                rows += [(f"m{s}", c, t, int(y)) for y in rng.binomial(1, p, 5)]
    return pd.DataFrame(rows, columns=["model", "context_words", "tom_order", "correct"])


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
def test_within_pairwise_equals_pingouin() -> None:
    """Paired comparisons: the multivariate model's contrasts of within cells are paired t
    tests of the subjects' means (pingouin aggregates by mean too; balanced cells, so the
    mean of a subject's rows is the mean of its cell means)."""
    import pingouin as pg

    df = _balanced_within()
    grid = anova_grid(df, within=["tom_order", "context_words"], subject="model")
    pg_table = pg.pairwise_tests(df, dv="correct", within=["tom_order", "context_words"],
                                 subject="model", padjust="holm")
    main = pg_table[pg_table["Contrast"] == "tom_order"]
    ours = contrasts(grid, "tom_order", adjust="holm")
    np.testing.assert_allclose(ours["statistic"], main["T"], rtol=1e-9)
    np.testing.assert_allclose(ours["df"], main["dof"], rtol=0)
    np.testing.assert_allclose(ours["p"], main["p_unc"], rtol=1e-9)
    np.testing.assert_allclose(ours["p_adjusted"], main["p_corr"], rtol=1e-9)
    # the interaction rows: context lengths compared within each ToM order; pingouin adjusts
    # over all of them as one family
    inter = pg_table[pg_table["Contrast"] == "tom_order * context_words"]
    simple = contrasts(grid, "context_words", by="tom_order", adjust="none")
    np.testing.assert_allclose(simple["statistic"], inter["T"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(simple["p"], inter["p_unc"], rtol=1e-9)
    np.testing.assert_allclose(p_adjust(simple["p"], "holm"), inter["p_corr"], rtol=1e-9)
