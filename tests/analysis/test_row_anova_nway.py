"""N-way between-subjects ANOVA: statsmodels ``anova_lm``, textbook effect sizes, bootstrap."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

import tomstats
from tomstats.analysis.row_anova import EFFECT_SIZES, _Between, _factorial_terms, anova

RTOL = 1e-9
N_DESIGNS = 36
FACTOR_NAMES = ["A", "B", "D", "E"]  # not "C": patsy's C() would shadow it


# ---------------------------------------------------------------------------------------------
# random designs
# ---------------------------------------------------------------------------------------------


def _random_design(seed: int) -> tuple[pd.DataFrame, list[str], bool, bool]:
    """2–4 factors with 2–6 levels (at most 96 cells), balanced or not, binary or continuous,
    with integer, float, string or categorical levels."""
    rng = np.random.default_rng(seed)
    k = 2 + seed % 3
    while True:
        shape = tuple(int(x) for x in rng.integers(2, 7, size=k))
        if np.prod(shape) <= 96:
            break
    balanced = seed % 4 in (0, 3)
    binary = seed % 2 == 1
    if balanced:
        sizes = np.full(shape, int(rng.integers(2, 4)))
    else:
        sizes = rng.integers(1, 5, size=shape)
        sizes.flat[0] = max(int(sizes.flat[0]), 2)
    names = FACTOR_NAMES[:k]
    effects = [rng.normal(0, 0.5, size=s) for s in shape]
    inter = rng.normal(0, 0.3, size=shape)
    rows = []
    for idx in np.ndindex(*shape):
        mu = sum(e[i] for e, i in zip(effects, idx, strict=True)) + inter[idx]
        m = int(sizes[idx])
        y = (rng.binomial(1, 1 / (1 + np.exp(-mu)), m).astype(float) if binary
             else mu + rng.normal(0, 1, m))
        rows += [(*idx, v) for v in y]
    df = pd.DataFrame(rows, columns=[*names, "y"])
    kinds = seed % 5
    if kinds == 1:
        df["A"] = df["A"].map(lambda i: f"lvl{i}")
    elif kinds == 2:
        df["B"] = pd.Categorical(df["B"] * 100)
    elif kinds == 3:
        df["A"] = 0.5 * df["A"] + 1
    df = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return df, names, balanced, binary


def _statsmodels(df: pd.DataFrame, names: list[str], typ: int) -> pd.DataFrame:
    terms = [f"C({f}, Sum)" if typ == 3 else f"C({f})" for f in names]
    tab = anova_lm(smf.ols("y ~ " + " * ".join(terms), df).fit(), typ=typ)
    tab = tab.drop(index="Intercept", errors="ignore")
    rename = {t: f for t, f in zip(terms, names, strict=True)}
    tab.index = [":".join(rename[p] for p in s.split(":")) if s != "Residual" else s
                 for s in tab.index]
    return tab


# ---------------------------------------------------------------------------------------------
# against statsmodels
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(N_DESIGNS))
def test_nway_matches_statsmodels(seed: int) -> None:
    df, names, balanced, binary = _random_design(seed)
    for typ in (1, 2, 3):
        got = anova(df, "y", names, ss_type=typ, binary=binary).set_index("source")
        ref = _statsmodels(df, names, typ)
        assert list(got.index) == list(ref.index), (typ, list(ref.index))
        scale = float(ref["sum_sq"].sum())
        for ours, theirs, atol in (("SS", "sum_sq", 1e-12 * scale), ("DF", "df", 0),
                                   ("F", "F", 1e-12), ("p", "PR(>F)", 1e-12)):
            np.testing.assert_allclose(got[ours].to_numpy(), ref[theirs].to_numpy(),
                                       rtol=RTOL, atol=atol, err_msg=f"type {typ} {ours}")


def test_designs_cover_the_acceptance_grid() -> None:
    seen = {"k": set(), "levels": set(), "balanced": set(), "binary": set()}
    for seed in range(N_DESIGNS):
        df, names, balanced, binary = _random_design(seed)
        seen["k"].add(len(names))
        seen["levels"] |= {df[f].nunique() for f in names}
        seen["balanced"].add(balanced)
        seen["binary"].add(binary)
    assert seen["k"] == {2, 3, 4}
    assert seen["levels"] == {2, 3, 4, 5, 6}
    assert seen["balanced"] == {True, False} and seen["binary"] == {True, False}


def test_term_order_is_patsy_order() -> None:
    names = ["A", "B", "D", "E"]
    got = [":".join(names[f] for f in t) for t in _factorial_terms(4)]
    df, _, _, _ = _random_design(2)  # a 4-factor design
    ref = _statsmodels(df, FACTOR_NAMES[:4], 1)
    assert got == [s for s in ref.index if s != "Residual"]


def test_type1_depends_on_order_type2_does_not() -> None:
    df, names, _, _ = _random_design(1)  # unbalanced three-way
    fwd = anova(df, "y", names, ss_type=1).set_index("source")
    rev = anova(df, "y", names[::-1], ss_type=1).set_index("source")
    assert fwd.loc["A", "SS"] != pytest.approx(rev.loc["A", "SS"], rel=1e-6)
    t2f = anova(df, "y", names, ss_type=2).set_index("source")
    t2r = anova(df, "y", names[::-1], ss_type=2).set_index("source")
    for f in names:
        assert t2f.loc[f, "SS"] == pytest.approx(t2r.loc[f, "SS"], rel=1e-10)


def test_tomstats_anova_is_this_function() -> None:
    assert tomstats.anova is anova


# ---------------------------------------------------------------------------------------------
# effect sizes: textbook formulas computed here from the statsmodels table
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 5, 10])
def test_effect_sizes_equal_textbook_formulas(seed: int) -> None:
    df, names, _, _ = _random_design(seed)
    got = anova(df, "y", names, ss_type=3).set_index("source")
    ref = _statsmodels(df, names, 3)
    y = df["y"].to_numpy()
    n_obs = len(y)
    ss_total = float(np.sum((y - y.mean()) ** 2))
    ss_res, df_res = ref.loc["Residual", "sum_sq"], ref.loc["Residual", "df"]
    ms_res = ss_res / df_res
    eff = ref.drop(index="Residual")
    ss, dfe = eff["sum_sq"].to_numpy(), eff["df"].to_numpy()
    want = {
        "eta2": ss / ss_total,
        "partial_eta2": ss / (ss + ss_res),
        # Hays' omega squared and partial omega squared (Olejnik & Algina 2003, table 1)
        "omega2": (ss - dfe * ms_res) / (ss_total + ms_res),
        "partial_omega2": (ss - dfe * ms_res) / (ss + (n_obs - dfe) * ms_res),
        # generalized eta squared, all factors manipulated, between design: SS/(SS + SS_res)
        "generalized_eta2": ss / (ss + ss_res),
    }
    for col, val in want.items():
        np.testing.assert_allclose(got.loc[eff.index, col].to_numpy(), val, rtol=1e-9,
                                   atol=1e-13, err_msg=col)
    res = got.loc["Residual"]
    assert res["eta2"] == pytest.approx(ss_res / ss_total, rel=1e-10)
    assert res[["F", "p", *EFFECT_SIZES[1:], "SS_error", "DF_error"]].isna().all()
    np.testing.assert_allclose(got.loc[eff.index, "SS_error"], ss_res, rtol=1e-10)
    np.testing.assert_array_equal(got.loc[eff.index, "DF_error"], df_res)


def test_generalized_eta2_with_an_observed_factor() -> None:
    """Olejnik & Algina (2003): with A measured, every effect's denominator adds the SS of the
    effects that involve A (the effect itself only once)."""
    df, names, _, _ = _random_design(4)
    got = anova(df, "y", names, ss_type=2, observed="A").set_index("source")
    eff = got.drop(index="Residual")
    ss_res = got.loc["Residual", "SS"]
    involves_a = np.array(["A" in s.split(":") for s in eff.index])
    obs_total = eff["SS"][involves_a].sum()
    ss = eff["SS"].to_numpy()
    want = ss / (ss + ss_res + obs_total - np.where(involves_a, ss, 0.0))
    np.testing.assert_allclose(eff["generalized_eta2"], want, rtol=1e-12)
    assert not np.allclose(eff["generalized_eta2"], eff["partial_eta2"])


def test_balanced_eta2_add_up_and_omega_below_eta() -> None:
    df, names, balanced, _ = _random_design(0)
    assert balanced
    got = anova(df, "y", names)
    assert got["eta2"].sum() == pytest.approx(1.0, rel=1e-12)
    eff = got.iloc[:-1]
    assert (eff["omega2"] < eff["eta2"]).all()
    assert (eff["partial_omega2"] < eff["partial_eta2"]).all()


# ---------------------------------------------------------------------------------------------
# the vectorised SS used by the bootstrap
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ss_type", [1, 2, 3])
def test_batched_ss_with_varying_cell_sizes_equals_single_fits(ss_type: int) -> None:
    """The bootstrap's normal-equation path (cell sizes differ per resample) equals the exact
    path of anova() for each data set of the batch."""
    rng = np.random.default_rng(3)
    shape = (3, 2, 4)
    names = ["A", "B", "D"]
    terms = _factorial_terms(3)
    frames, sums, sizes = [], [], []
    for _ in range(4):
        n = rng.integers(1, 6, size=shape)
        n.flat[0] = 2
        rows = [(*idx, rng.normal(idx[0] * 0.4 + idx[2] * idx[1] * 0.3))
                for idx in np.ndindex(*shape) for _ in range(int(n[idx]))]
        df = pd.DataFrame(rows, columns=[*names, "y"])
        frames.append(df)
        flat = np.ravel_multi_index(tuple(df[f].to_numpy() for f in names), shape)
        sizes.append(np.bincount(flat, minlength=24).astype(float))
        sums.append(np.bincount(flat, weights=df["y"].to_numpy(), minlength=24))
    n_b, s_b = np.stack(sizes), np.stack(sums)
    sc = s_b - n_b * (s_b.sum(1) / n_b.sum(1))[:, None]
    model = _Between.build(shape, terms, ss_type, n_b[0])
    got = model.ss_weighted(sc, n_b)
    for i, df in enumerate(frames):
        ref = anova(df, "y", names, ss_type=ss_type)["SS"].to_numpy()[:-1]
        np.testing.assert_allclose(got[i], ref, rtol=1e-8, atol=1e-10)
    # and the fixed-size path (used when resampling keeps the cell sizes)
    np.testing.assert_allclose(model.ss(sc[0] / np.sqrt(n_b[0])), got[0], rtol=1e-8)


# ---------------------------------------------------------------------------------------------
# bootstrap intervals
# ---------------------------------------------------------------------------------------------


def _clustered_log(seed: int, stories: int = 60, story_sd: float = 0.6, most: int = 4
                   ) -> pd.DataFrame:
    """Three factors, questions nested in stories with a story effect, 1–``most`` each."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(3):
        for b in range(2):
            for d in range(2):
                for s in range(stories // 3):
                    u = rng.normal(0, story_sd)
                    for _ in range(int(rng.integers(1, most + 1))):
                        eta = 0.4 - 0.5 * a + 0.3 * b * d + u
                        rows.append((a, b, d, f"s{s}", rng.binomial(1, 1 / (1 + np.exp(-eta)))))
    return pd.DataFrame(rows, columns=["A", "B", "D", "story", "correct"])


def test_same_seed_same_interval_and_columns() -> None:
    df = _clustered_log(0)
    kw = {"ci": 0.9, "n_boot": 300, "cluster": "story"}
    one = anova(df, "correct", ["A", "B", "D"], seed=7, **kw)
    two = anova(df, "correct", ["A", "B", "D"], seed=7, **kw)
    other = anova(df, "correct", ["A", "B", "D"], seed=8, **kw)
    pd.testing.assert_frame_equal(one, two)
    assert not np.allclose(one["eta2_low"][:-1], other["eta2_low"][:-1])
    for e in EFFECT_SIZES:
        eff = one.iloc[:-1]
        assert (eff[f"{e}_low"] <= eff[f"{e}_high"]).all()
        assert eff[f"{e}_low"].notna().all()
    assert one.attrs["ci"] == 0.9 and one.attrs["n_boot"] == 300
    assert one.attrs["ci_method"] == "BCa"
    # without ci the interval columns are absent and the point estimates unchanged
    plain = anova(df, "correct", ["A", "B", "D"])
    assert "eta2_low" not in plain.columns
    pd.testing.assert_frame_equal(one[plain.columns], plain)


def test_cluster_bootstrap_is_wider_than_row_bootstrap_with_story_effects() -> None:
    df = _clustered_log(1, stories=90, story_sd=2.0, most=8)
    rows = anova(df, "correct", ["A", "B", "D"], ci=0.95, n_boot=600, seed=0)
    clus = anova(df, "correct", ["A", "B", "D"], ci=0.95, n_boot=600, seed=0, cluster="story")
    width_rows = (rows["eta2_high"] - rows["eta2_low"]).iloc[0]
    width_clus = (clus["eta2_high"] - clus["eta2_low"]).iloc[0]
    assert width_clus > 1.3 * width_rows


def test_binary_rows_bootstrap_fast_path_matches_index_draws_in_distribution() -> None:
    """0/1 rows are resampled by a multinomial over distinct values; continuous rows by index
    draws. Jittering a 0/1 outcome by 1e-9 forces the second path: same interval to 1e-3."""
    df = _clustered_log(2)
    jit = df.assign(correct=df["correct"] + 1e-9 * np.arange(len(df)) / len(df))
    a = anova(df, "correct", ["A", "B"], ci=0.95, n_boot=4000, seed=1)
    b = anova(jit, "correct", ["A", "B"], ci=0.95, n_boot=4000, seed=2)
    np.testing.assert_allclose(a["eta2_high"][:3], b["eta2_high"][:3], atol=3e-3)
    np.testing.assert_allclose(a["eta2_low"][:3], b["eta2_low"][:3], atol=3e-3)


def _coverage(reps: int, n_per_cell: int, n_boot: int) -> dict[str, float]:
    """Share of 95 % intervals covering the population η² of A and B in a 3 × 2 design with
    normal errors (σ = 1): :math:`\\eta^2_X = SS_X(\\mu) / (SS_\\text{cells}(\\mu) + N)`."""
    alpha = np.array([-0.3, 0.0, 0.3])
    beta = np.array([0.15, -0.15])
    mu = alpha[:, None] + beta[None, :]
    n_obs = 6 * n_per_cell
    ss_a, ss_b = n_obs * np.mean(alpha**2), n_obs * np.mean(beta**2)
    truth = {"A": ss_a / (ss_a + ss_b + n_obs), "B": ss_b / (ss_a + ss_b + n_obs)}
    a = np.repeat(np.arange(3), 2 * n_per_cell)
    b = np.tile(np.repeat(np.arange(2), n_per_cell), 3)
    rng = np.random.default_rng(2024)
    hits = dict.fromkeys(truth, 0)
    for r in range(reps):
        df = pd.DataFrame({"y": mu[a, b] + rng.normal(size=n_obs), "A": a, "B": b})
        out = anova(df, "y", ["A", "B"], ci=0.95, n_boot=n_boot, seed=r).set_index("source")
        for k, t in truth.items():
            hits[k] += bool(out.loc[k, "eta2_low"] <= t <= out.loc[k, "eta2_high"])
    return {k: v / reps for k, v in hits.items()}


def test_bootstrap_coverage_quick() -> None:
    cov = _coverage(reps=300, n_per_cell=100, n_boot=500)
    for k, c in cov.items():
        assert 0.90 <= c <= 0.99, (k, c)


@pytest.mark.slow
def test_bootstrap_coverage_of_true_eta2(record_property: Callable[[str, object], None]) -> None:
    """Acceptance: coverage of the true η² within 93–97 % (2,000 data sets; binomial SE 0.5 %)."""
    cov = _coverage(reps=2000, n_per_cell=100, n_boot=1000)
    record_property("coverage", cov)
    print(f"\ncoverage of the true eta2 by 95% BCa intervals: {cov}")
    for k, c in cov.items():
        assert 0.93 <= c <= 0.97, (k, c)


# ---------------------------------------------------------------------------------------------
# bad input: one clear line naming the column and the value, before any work
# ---------------------------------------------------------------------------------------------


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "correct": [1, 0, 1, 1, 0, 0, 1, 0] * 2,
        "tom": [0, 0, 0, 0, 1, 1, 1, 1] * 2,
        "ctx": [200, 200, 500, 500] * 4,
        "model": ["a"] * 8 + ["b"] * 8,
        "story": ["s1", "s2"] * 8,
    })


@pytest.mark.parametrize(
    ("mutate", "kwargs", "exc", "match"),
    [
        (lambda d: d.assign(ctx=500), {}, ValueError, r"factor 'ctx' has a single level 500"),
        (lambda d: d[~((d.tom == 1) & (d.ctx == 500) & (d.model == "b"))], {}, ValueError,
         r"empty cell: no rows with tom=1, ctx=500, model='b'"),
        (lambda d: d.assign(correct=[1.0, np.nan] + [0.0] * 14), {}, ValueError,
         r"dv column 'correct' has a missing or infinite value at index 1: nan"),
        (None, {"between": ["tom", "ctx", "tom"]}, ValueError,
         r"factor 'tom' is named twice in between$"),
        (lambda d: d.assign(correct=["yes", "no"] * 8), {}, ValueError,
         r"dv column 'correct' must be numeric, got dtype .* \(e.g. value 'yes'\)"),
        (None, {"between": ["tom", "context"]}, ValueError,
         r"between column 'context' not in data \(did you mean 'ctx'\?\)"),
        (None, {"dv": "corect"}, ValueError, r"dv column 'corect' not in data \(did you mean "
         r"'correct'\?\)"),
        (None, {"ss_type": 4}, ValueError, r"ss_type must be 1, 2 or 3, got 4"),
        (None, {"ss_type": "2"}, TypeError, r"ss_type must be int .*got str '2'"),
        (None, {"between": 3}, TypeError, r"between must be a column name or a list"),
        (None, {"dv": ["correct"]}, TypeError, r"dv must be a column name \(str\)"),
        (None, {"ci": "0.95"}, TypeError, r"ci must be float"),
        (None, {"ci": 95}, ValueError, r"ci must lie strictly between 0 and 1.*got 95"),
        (None, {"n_boot": 2.5}, TypeError, r"n_boot must be int"),
        (None, {"cluster": "stroy"}, ValueError,
         r"cluster column 'stroy' not in data \(did you mean 'story'\?\)"),
        (None, {"cluster": "tom"}, ValueError, r"cluster column 'tom' is also used as between"),
        (None, {"binary": 1}, TypeError, r"binary must be bool"),
        (lambda d: d.assign(correct=[2] + [0] * 15), {"binary": True}, ValueError,
         r"binary=True but dv column 'correct' has value 2 at index 0"),
        (lambda d: d.assign(story=[None] + ["s1"] * 15), {"cluster": "story"}, ValueError,
         r"cluster column 'story' has a missing value at index 0"),
        (lambda d: d.drop_duplicates(["tom", "ctx", "model"]), {}, ValueError,
         r"no residual degrees of freedom: 8 rows for 8 cells \(tom × ctx × model\)"),
        (None, {"between": None}, ValueError, r"name at least one factor"),
        (None, {"observed": "length"}, ValueError,
         r"observed factor 'length' is not a between or within factor"),
        (None, {"within": ["ctx"], "between": ["tom"]}, ValueError,
         r"within factors \['ctx'\] need subject="),
        ("list", {}, TypeError, r"data must be a pandas DataFrame"),
    ],
)
def test_bad_input(mutate, kwargs, exc, match) -> None:
    df = _frame()
    if mutate == "list":
        df = df.to_dict("records")
    elif mutate is not None:
        df = mutate(df)
    args = {"dv": "correct", "between": ["tom", "ctx", "model"], **kwargs}
    with pytest.raises(exc, match=match) as info:
        anova(df, **args)
    assert "\n" not in str(info.value)
