"""ANOVA from rows and from cell counts, against statsmodels ``anova_lm`` and closed forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from tomstats.analysis.row_anova import anova
from tomstats.simulation.count_anova import (
    SOURCES,
    AnovaArrays,
    anova_from_counts,
    counts_table_to_frame,
    systematic_share,
)

RTOL = 1e-9
N_ROW_DESIGNS = 36
COUNT_SHAPES = [(2, 2), (5, 3), (4, 4), (3, 5)]  # both reduction branches (A >= B, A < B)
TABLES_PER_SHAPE = 9  # 36 designs per type, every other one balanced


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _statsmodels(df: pd.DataFrame, factors: list[str], typ: int) -> pd.DataFrame:
    """Reference table from statsmodels, rows in tomstats order, columns SS, DF, F, p."""
    if typ == 3:
        terms = [f"C({f}, Sum)" for f in factors]
    else:
        terms = [f"C({f})" for f in factors]
    fit = smf.ols("y ~ " + " * ".join(terms), df).fit()
    tab = anova_lm(fit, typ=typ)
    order = [*terms, ":".join(terms)] if len(terms) == 2 else terms
    tab = tab.loc[[*order, "Residual"]]
    return pd.DataFrame(
        {
            "SS": tab["sum_sq"].to_numpy(),
            "DF": tab["df"].to_numpy(),
            "F": tab["F"].to_numpy(),
            "p": tab["PR(>F)"].to_numpy(),
        }
    )


def _assert_table(got: dict[str, np.ndarray], ref: pd.DataFrame, msg: str = "") -> None:
    """SS, DF, F and p agree to ``RTOL`` relative; the absolute floor (1e-12 of the total SS for
    SS, 1e-12 for F and p) only matters for effects that are exactly 0 up to round-off."""
    scale = float(np.sum(ref["SS"]))
    for col in ("SS", "DF", "F", "p"):
        atol = 1e-12 * scale if col == "SS" else 1e-12
        np.testing.assert_allclose(
            np.asarray(got[col], dtype=float),
            ref[col].to_numpy(),
            rtol=RTOL,
            atol=atol,
            err_msg=f"{msg} {col}",
        )


def _random_rows(seed: int) -> tuple[pd.DataFrame, list[str], bool]:
    """A random one- or two-way design: levels 2–5, balanced or not, binary or continuous,
    numeric, string or categorical factor values."""
    rng = np.random.default_rng(seed)
    one_way = seed % 6 == 5
    binary = seed % 2 == 0
    balanced = seed % 3 == 0
    n_a, n_b = int(rng.integers(2, 6)), (1 if one_way else int(rng.integers(2, 6)))
    if balanced:
        sizes = np.full((n_a, n_b), int(rng.integers(2, 9)))
    else:
        sizes = rng.integers(1, 12, size=(n_a, n_b))
        sizes[0, 0] = max(sizes[0, 0], 2)  # at least one residual degree of freedom
    eff_a, eff_b = rng.normal(0, 0.6, n_a), rng.normal(0, 0.6, n_b)
    eff_ab = rng.normal(0, 0.4, (n_a, n_b))
    a_levels = [0.5 * i + 1 for i in range(n_a)] if seed % 4 else [f"a{i}" for i in range(n_a)]
    b_levels = [200 * (j + 1) for j in range(n_b)]
    rows = []
    for i in range(n_a):
        for j in range(n_b):
            mu = eff_a[i] + eff_b[j] + eff_ab[i, j]
            m = sizes[i, j]
            if binary:
                y = rng.binomial(1, 1 / (1 + np.exp(-mu)), m).astype(float)
            else:
                y = mu + rng.normal(0, 1, m)
            rows += [(a_levels[i], b_levels[j], v) for v in y]
    df = pd.DataFrame(rows, columns=["A", "B", "y"]).sample(frac=1.0, random_state=seed)
    if seed % 5 == 1:
        df["B"] = pd.Categorical(df["B"])
    factors = ["A"] if one_way else ["A", "B"]
    return df.reset_index(drop=True), factors, binary


def _expand(k: np.ndarray, n: np.ndarray) -> pd.DataFrame:
    """One row per trial: outcome 1 for the first k of each cell's n trials."""
    rows = []
    for i in range(n.shape[0]):
        for j in range(n.shape[1]):
            kk, nn = int(k[i, j]), int(n[i, j])
            rows += [(i, j, 1.0)] * kk + [(i, j, 0.0)] * (nn - kk)
    return pd.DataFrame(rows, columns=["A", "B", "y"])


def _random_counts(shape: tuple[int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``TABLES_PER_SHAPE`` random tables (k, n) of one shape; every other one balanced."""
    rng = np.random.default_rng(1000 + seed)
    ks, ns = [], []
    for t in range(TABLES_PER_SHAPE):
        if t % 2 == 0:
            n = np.full(shape, int(rng.integers(2, 15)))
        else:
            n = rng.integers(1, 25, size=shape)
            n[0, 0] = max(n[0, 0], 2)
        p = rng.uniform(0.05, 0.95, size=shape)
        ks.append(rng.binomial(n, p))
        ns.append(n)
    return np.stack(ks), np.stack(ns)


def _one(arrs: AnovaArrays, idx: tuple[int, ...]) -> AnovaArrays:
    return jax.tree.map(lambda x: np.asarray(x)[idx], arrs)


# ---------------------------------------------------------------------------------------------
# anova() on rows versus statsmodels
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ss_type", [1, 2, 3])
@pytest.mark.parametrize("seed", range(N_ROW_DESIGNS))
def test_rows_match_statsmodels(seed: int, ss_type: int) -> None:
    df, factors, binary = _random_rows(seed)
    got = anova(df, "y", factors if len(factors) == 2 else factors[0], ss_type=ss_type,
                binary=binary)
    ref = _statsmodels(df, factors, ss_type)
    expected_sources = [*factors, "A:B", "Residual"] if len(factors) == 2 else ["A", "Residual"]
    assert got["source"].tolist() == expected_sources
    _assert_table({c: got[c].to_numpy() for c in ("SS", "DF", "F", "p")}, ref)
    np.testing.assert_allclose(got["MS"], got["SS"] / got["DF"], rtol=1e-14)


@pytest.mark.parametrize("seed", range(0, N_ROW_DESIGNS, 4))
def test_rows_effect_sizes_by_formula(seed: int) -> None:
    df, factors, _ = _random_rows(seed)
    got = anova(df, "y", factors, ss_type=3)
    y = df["y"].to_numpy()
    ss_total = np.sum((y - y.mean()) ** 2)
    ss, ss_res = got["SS"].to_numpy(), got["SS"].iloc[-1]
    np.testing.assert_allclose(got["eta2"], ss / ss_total, rtol=1e-12)
    np.testing.assert_allclose(got["partial_eta2"][:-1], ss[:-1] / (ss[:-1] + ss_res), rtol=1e-12)
    assert got.iloc[-1][["F", "p", "partial_eta2"]].isna().all()


def test_rows_type1_follows_the_given_order() -> None:
    df, _, _ = _random_rows(4)  # unbalanced two-way
    ab = anova(df, "y", ["A", "B"], ss_type=1).set_index("source")
    ba = anova(df, "y", ["B", "A"], ss_type=1).set_index("source")
    assert ab.loc["A", "SS"] != pytest.approx(ba.loc["A", "SS"], rel=1e-6)
    np.testing.assert_allclose(ba.loc["B:A", "SS"], ab.loc["A:B", "SS"], rtol=1e-10)
    ref = _statsmodels(df, ["B", "A"], 1)
    np.testing.assert_allclose(ba["SS"].to_numpy(), ref["SS"].to_numpy(), rtol=RTOL)


def test_balanced_closed_form_and_types_agree() -> None:
    rng = np.random.default_rng(7)
    n_a, n_b, n = 4, 3, 6
    y = rng.normal(size=(n_a, n_b, n)) + rng.normal(size=(n_a, 1, 1))
    df = pd.DataFrame(
        [(i, j, y[i, j, r]) for i in range(n_a) for j in range(n_b) for r in range(n)],
        columns=["A", "B", "y"],
    )
    m = y.mean(axis=2)
    gm, ma, mb = m.mean(), m.mean(axis=1), m.mean(axis=0)
    expected = [
        n * n_b * np.sum((ma - gm) ** 2),
        n * n_a * np.sum((mb - gm) ** 2),
        n * np.sum((m - ma[:, None] - mb[None, :] + gm) ** 2),
        np.sum((y - m[:, :, None]) ** 2),
    ]
    for typ in (1, 2, 3):
        got = anova(df, "y", ["A", "B"], ss_type=typ)
        np.testing.assert_allclose(got["SS"], expected, rtol=1e-11)
        np.testing.assert_allclose(got["DF"], [3, 2, 6, n_a * n_b * (n - 1)])
    # balanced: the four SS add up to SS_total, so the eta2 add up to 1
    np.testing.assert_allclose(got["eta2"].sum(), 1.0, rtol=1e-12)


def test_paper_design_degrees_of_freedom() -> None:
    """5 contexts × 3 ToM orders × 500 questions: df 4, 2, 8 and 7,485 as in the paper."""
    rng = np.random.default_rng(3)
    k = rng.binomial(500, rng.uniform(0.1, 0.9, size=(5, 3)))
    out = anova_from_counts(k, 500)
    np.testing.assert_array_equal(np.asarray(out.DF), [4, 2, 8, 7485])


# ---------------------------------------------------------------------------------------------
# anova_from_counts versus statsmodels on the expanded rows (float64)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ss_type", [1, 2, 3])
@pytest.mark.parametrize("shape", COUNT_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_counts_match_statsmodels(shape: tuple[int, int], ss_type: int) -> None:
    k, n = _random_counts(shape, seed=shape[0] * 10 + shape[1])
    with jax.enable_x64(True):
        batch = anova_from_counts(k, n, ss_type)
        assert batch.SS.dtype == jnp.float64
        assert batch.SS.shape == (TABLES_PER_SHAPE, len(SOURCES))
        for t in range(TABLES_PER_SHAPE):
            got = _one(batch, (t,))
            ref = _statsmodels(_expand(k[t], n[t]), ["A", "B"], ss_type)
            _assert_table({c: getattr(got, c) for c in ("SS", "DF", "F", "p")}, ref, f"{t}")


@pytest.mark.parametrize("ss_type", [1, 2, 3])
def test_counts_equal_rows_including_effect_sizes(ss_type: int) -> None:
    k, n = _random_counts((5, 3), seed=5)  # same shapes as above: reuses the compiled code
    with jax.enable_x64(True):
        batch = anova_from_counts(k, n, ss_type)
    for t in (0, 1):  # a balanced and an unbalanced table
        got = counts_table_to_frame(_one(batch, (t,)), names=("A", "B"))
        ref = anova(_expand(k[t], n[t]), "y", ["A", "B"], ss_type=ss_type, binary=True)
        assert got["source"].tolist() == ["A", "B", "A:B", "Residual"]
        pd.testing.assert_frame_equal(got, ref[list(got.columns)], rtol=1e-10)


def test_batched_equals_per_table_and_trials_broadcast() -> None:
    rng = np.random.default_rng(11)
    n = rng.integers(3, 30, size=(5, 3))
    k = rng.binomial(n, rng.uniform(0.1, 0.9, size=(2, 4, 5, 3)))
    with jax.enable_x64(True):
        batch = anova_from_counts(k, n)
        assert batch.F.shape == (2, 4, 4)
        jitted = jax.jit(lambda kk: anova_from_counts(kk, jnp.asarray(n)))(k)
        mapped = jax.vmap(jax.vmap(lambda kk: anova_from_counts(kk, n)))(jnp.asarray(k))
        for r in range(2):
            for c in range(4):
                single = anova_from_counts(k[r, c], n)
                for field in ("SS", "DF", "MS", "F", "p", "eta2", "partial_eta2"):
                    want = np.asarray(getattr(single, field))
                    for other in (batch, jitted, mapped):
                        np.testing.assert_allclose(
                            np.asarray(getattr(other, field))[r, c],
                            want,
                            rtol=1e-12,
                            equal_nan=True,
                            err_msg=field,
                        )


def test_balanced_fast_path_equals_general_path() -> None:
    rng = np.random.default_rng(2)
    k = rng.binomial(40, rng.uniform(0.1, 0.9, size=(7, 5, 3)))
    with jax.enable_x64(True):
        fast = anova_from_counts(k, 40, balanced=True)
        for typ in (2, 3):  # type I equals type II when balanced (tested against statsmodels)
            slow = anova_from_counts(k, np.full((5, 3), 40), typ, balanced=False)
            for field in ("SS", "F", "p", "eta2", "partial_eta2"):
                np.testing.assert_allclose(
                    np.asarray(getattr(fast, field)),
                    np.asarray(getattr(slow, field)),
                    rtol=1e-10,
                    equal_nan=True,
                )
    # closed forms of the balanced design on the cell proportions
    m = k / 40.0
    gm, ma, mb = m.mean(axis=(1, 2)), m.mean(axis=2), m.mean(axis=1)
    ss_a = 40 * 3 * np.sum((ma - gm[:, None]) ** 2, axis=1)
    ss_b = 40 * 5 * np.sum((mb - gm[:, None]) ** 2, axis=1)
    ss_ab = 40 * np.sum((m - ma[:, :, None] - mb[:, None, :] + gm[:, None, None]) ** 2, (1, 2))
    ss_res = np.sum(k - k**2 / 40.0, axis=(1, 2))
    expected = np.stack([ss_a, ss_b, ss_ab, ss_res], axis=1)
    np.testing.assert_allclose(np.asarray(fast.SS), expected, rtol=1e-10)


def test_systematic_share() -> None:
    rng = np.random.default_rng(5)
    k = rng.binomial(500, rng.uniform(0.1, 0.9, size=(3, 5, 3)))
    with jax.enable_x64(True):
        out = anova_from_counts(k, 500)
        share = np.asarray(systematic_share(out))
        prop = np.asarray(out.systematic_share)
    assert share.shape == (3, 3)
    # balanced: the denominator is the between-cells SS, sum_ij n (m_ij - m)^2
    m = k / 500.0
    between = 500 * np.sum((m - m.mean(axis=(1, 2), keepdims=True)) ** 2, axis=(1, 2))
    np.testing.assert_allclose(share, np.asarray(out.SS)[:, :3] / between[:, None], rtol=1e-10)
    np.testing.assert_array_equal(prop, share)
    np.testing.assert_allclose(share.sum(axis=1), 1.0, rtol=1e-12)


def test_dtype_follows_input_without_x64() -> None:
    k = np.array([[40, 30], [20, 10]])
    out32 = anova_from_counts(jnp.asarray(k, jnp.float32), 50)
    assert out32.SS.dtype == jnp.float32
    ref = anova(_expand(k, np.full((2, 2), 50)), "y", ["A", "B"])
    np.testing.assert_allclose(np.asarray(out32.SS), ref["SS"], rtol=1e-4, atol=1e-4)
    with jax.enable_x64(True):
        assert anova_from_counts(k, 50).SS.dtype == jnp.float64


def test_p_values_can_be_skipped() -> None:
    k = np.array([[40, 30, 20], [20, 10, 5]])
    with jax.enable_x64(True):
        full = anova_from_counts(k, 50)
        fast = anova_from_counts(k, 50, p_values=False)
    assert np.isnan(np.asarray(fast.p)).all()
    np.testing.assert_allclose(np.asarray(fast.F), np.asarray(full.F), rtol=1e-14, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


def _small_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"y": [1, 0, 1, 1, 0, 0, 1, 0], "tom": [0, 0, 0, 0, 1, 1, 1, 1], "ctx": [1, 1, 2, 2] * 2}
    )


@pytest.mark.parametrize(
    ("mutate", "kwargs", "match"),
    [
        (None, {"between": ["tom", "length"]}, r"between column 'length' not in data"),
        (None, {"dv": "score"}, r"dv column 'score' not in data"),
        (lambda d: d.assign(y=list("abababab")), {}, r"dv column 'y' must be numeric"),
        (lambda d: d.assign(y=[1, 0, np.nan, 1, 0, 0, 1, 0]), {}, r"'y' has a missing.*index 2"),
        (lambda d: d.assign(y=[1, 0, 1, 2, 0, 0, 1, 0]), {"binary": True}, r"value 2"),
        (lambda d: d.iloc[[0, 1, 4, 5, 6, 7]], {}, r"empty cell: no rows with tom=0, ctx=2"),
        (lambda d: d.assign(ctx=5), {}, r"factor 'ctx' has a single level 5"),
        (None, {"ss_type": 4}, r"ss_type must be 1, 2 or 3, got 4"),
        (lambda d: d.assign(tom=[0, 0, None, 0, 1, 1, 1, 1]), {}, r"'tom' has a missing"),
        (lambda d: d.iloc[[0, 2, 4, 6]], {}, r"no residual degrees of freedom"),
        (None, {"between": ["tom", "ctx", "y"]}, r"factor 'y' is named twice"),
    ],
)
def test_rows_bad_input(mutate, kwargs, match) -> None:
    df = _small_frame()
    if mutate is not None:
        df = mutate(df)
    args = {"dv": "y", "between": ["tom", "ctx"], **kwargs}
    with pytest.raises(ValueError, match=match):
        anova(df, **args)


@pytest.mark.parametrize(
    ("k", "n", "kwargs", "match"),
    [
        ([[5, 3], [2, 60]], 50, {}, r"successes\[\(1, 1\)\] = 60"),
        ([[5, 3], [2, -1]], 50, {}, r"successes\[\(1, 1\)\] = -1"),
        ([[5, 3], [2, 0]], [[9, 9], [9, 0]], {}, r"trials\[\(1, 1\)\] = 0"),
        ([5, 3, 2], 50, {}, r"shape \(\.\.\., A, B\)"),
        ([[5, 3, 1]], 50, {}, r"at least 2 levels, got A=1"),
        ([[5, 3], [2, 1]], [1, 2, 3], {}, r"does not broadcast"),
        ([[5, 3], [2, 1]], 50, {"ss_type": 0}, r"ss_type must be 1, 2 or 3, got 0"),
        ([[5, 3], [2, 1]], [[9, 9], [9, 8]], {"balanced": True}, r"balanced=True"),
        ([[1, 1], [1, 0]], 1, {}, r"no residual degrees of freedom"),
    ],
)
def test_counts_bad_input(k, n, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        anova_from_counts(np.asarray(k), np.asarray(n), **kwargs)


def test_counts_table_to_frame_wants_one_table() -> None:
    out = anova_from_counts(np.ones((3, 2, 2)), 4)
    with pytest.raises(ValueError, match=r"one table.*\(3, 4\)"):
        counts_table_to_frame(out)
