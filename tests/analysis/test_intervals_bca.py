"""BCa bootstrap intervals: the formula against SciPy's ``bootstrap(method="BCa")`` on the same
resamples, the ANOVA's intervals against SciPy's on the same data, and the estimate always
inside its interval (the percentile interval of η² = 0 lay wholly above 0)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import tomstats
from tomstats.analysis.intervals import bca_interval


def _eta2(*groups, axis=-1):
    """η² of a one-way layout, one sample per group (vectorised over leading axes)."""
    allv = np.concatenate(groups, axis=axis)
    grand = allv.mean(axis=axis, keepdims=True)
    ss_tot = ((allv - grand) ** 2).sum(axis=axis)
    ss_b = sum(g.shape[axis] * (g.mean(axis=axis) - grand[..., 0]) ** 2 for g in groups)
    return ss_b / ss_tot


def _jackknife(groups, statistic):
    vals, strata = [], []
    for j, g in enumerate(groups):
        for i in range(len(g)):
            rest = list(groups)
            rest[j] = np.delete(g, i)
            vals.append(statistic(*rest))
            strata.append(j)
    return np.array(vals), np.array(strata)


@pytest.mark.parametrize("case", ["one sample, skewed mean", "three strata, eta2",
                                  "three strata, 0/1 outcomes"])
def test_bca_formula_is_scipys_on_the_same_resamples(case):
    rng = np.random.default_rng(3)
    if case.startswith("one"):
        groups = [rng.exponential(size=40)]

        def statistic(x, axis=-1):
            return np.mean(x, axis=axis)
    elif case.startswith("three strata, eta2"):
        groups = [rng.normal(m, 1, n) for m, n in ((0, 12), (0.4, 15), (0.9, 10))]
        statistic = _eta2
    else:
        groups = [rng.binomial(1, p, n).astype(float) for p, n in ((0.3, 20), (0.5, 25),
                                                                   (0.7, 18))]
        statistic = _eta2
    for level in (0.9, 0.95):
        ref = stats.bootstrap(groups, statistic, method="BCa", n_resamples=3000,
                              confidence_level=level, random_state=np.random.default_rng(7))
        est = statistic(*groups)
        jack, strata = _jackknife(groups, statistic)
        lo, hi = bca_interval(ref.bootstrap_distribution[:, None], [est], jack[:, None],
                              strata, level)
        assert lo[0] == pytest.approx(ref.confidence_interval.low, rel=1e-10)
        assert hi[0] == pytest.approx(ref.confidence_interval.high, rel=1e-10)
        # the pooled form: identical units of a stratum given once, with their count
        keys, first, counts = np.unique(np.column_stack([strata, np.round(jack, 12)]),
                                        axis=0, return_index=True, return_counts=True)
        lo2, hi2 = bca_interval(ref.bootstrap_distribution[:, None], [est],
                                jack[first][:, None], strata[first], level, counts)
        assert (lo2[0], hi2[0]) == pytest.approx((lo[0], hi[0]), rel=1e-10)
        if case.endswith("0/1 outcomes"):
            assert len(keys) == 6  # two distinct units per stratum


def test_anova_interval_matches_scipy_bca_on_the_same_data():
    """A one-way ANOVA with rows resampled within cells is SciPy's multi-sample bootstrap
    (each sample resampled on its own): the same BCa interval up to Monte Carlo error."""
    rng = np.random.default_rng(11)
    groups = [rng.normal(m, 1, n) for m, n in ((0, 30), (0.5, 25), (0.8, 35))]
    df = pd.DataFrame({"y": np.concatenate(groups),
                       "g": np.repeat(["a", "b", "c"], [len(g) for g in groups])})
    tab = tomstats.anova(df, "y", ["g"], ci=0.95, n_boot=20000, seed=2)
    row = tab.set_index("source").loc["g"]
    assert row["eta2"] == pytest.approx(_eta2(*groups), rel=1e-12)
    ref = stats.bootstrap(groups, _eta2, method="BCa", n_resamples=20000,
                          random_state=np.random.default_rng(5))
    assert tab.attrs["ci_method"] == "BCa"
    # Monte Carlo se of a 2.5 % quantile from 20,000 resamples: ~0.004 here
    assert row["eta2_low"] == pytest.approx(ref.confidence_interval.low, abs=0.012)
    assert row["eta2_high"] == pytest.approx(ref.confidence_interval.high, abs=0.012)
    # the percentile interval differs measurably here (η² is biased upward)
    pct = np.quantile(stats.bootstrap(groups, _eta2, method="percentile", n_resamples=20000,
                                      random_state=np.random.default_rng(5)
                                      ).bootstrap_distribution, [0.025, 0.975])
    assert abs(row["eta2_low"] - pct[0]) > 0.01


def test_zero_effect_interval_contains_its_estimate():
    """The recency baseline: context has no effect at all (equal cell means, SS = 0)."""
    rng = np.random.default_rng(0)
    rows = []
    for ctx in (200, 500, 1000, 2000, 5000):
        for tom in (0, 1, 2):
            for s in range(4):
                rows.append((ctx, tom, f"s{ctx}-{tom}-{s}", int(tom == 0 or s % 2 == 0)))
    df = pd.DataFrame(rows, columns=["context_words", "tom_order", "story", "correct"])
    tab = tomstats.anova(df, "correct", ["context_words", "tom_order"], ci=0.95,
                         cluster="story", seed=0).set_index("source")
    assert tab.loc["context_words", "SS"] == 0
    for k in ("eta2", "partial_eta2", "generalized_eta2"):
        assert tab.loc["context_words", f"{k}_low"] == 0 < tab.loc["context_words", f"{k}_high"]
    # every interval of every effect size contains its estimate, on null and real effects
    for seed in range(5):
        df["correct"] = rng.integers(0, 2, len(df))
        t = tomstats.anova(df, "correct", ["context_words", "tom_order"], ci=0.9,
                           cluster="story", seed=seed)
        for k in ("eta2", "partial_eta2", "omega2", "partial_omega2", "generalized_eta2"):
            ok = t[k].isna() | ((t[f"{k}_low"] <= t[k] + 1e-12)
                                & (t[k] <= t[f"{k}_high"] + 1e-12))
            assert ok.all(), (seed, k, t[["source", k, f"{k}_low", f"{k}_high"]])


def test_edge_cases():
    boot = np.array([[0.1], [0.2], [0.3], [0.4]])
    lo, hi = bca_interval(boot, [0.0], np.zeros((3, 1)), [0, 0, 0], 0.5)
    assert lo[0] == 0.0 and hi[0] == pytest.approx(np.quantile(boot, 0.75))
    lo, hi = bca_interval(boot, [0.5], np.zeros((3, 1)), [0, 0, 0], 0.5)
    assert hi[0] == 0.5 and lo[0] == pytest.approx(np.quantile(boot, 0.25))
    lo, hi = bca_interval(np.full((4, 1), np.nan), [0.5], np.zeros((3, 1)), [0, 0, 0])
    assert np.isnan(lo[0]) and np.isnan(hi[0])
    lo, hi = bca_interval(boot, [np.nan], np.zeros((3, 1)), [0, 0, 0])
    assert np.isnan(lo[0]) and np.isnan(hi[0])


def test_subsampled_jackknife_gives_nearly_the_same_interval(monkeypatch):
    """Many distinct clusters: the acceleration from a weighted subsample of them moves the
    bounds by far less than the interval's width."""
    import tomstats.analysis.row_anova as ra

    rng = np.random.default_rng(4)
    n = 3000
    df = pd.DataFrame({"a": rng.integers(0, 3, n), "b": rng.integers(0, 2, n)})
    df["y"] = rng.gamma(2.0, size=n) + 0.15 * df["a"]
    full = tomstats.anova(df, "y", ["a", "b"], ci=0.95, n_boot=2000, seed=3)
    monkeypatch.setattr(ra, "_MAX_JACKKNIFE", 300)
    sub = tomstats.anova(df, "y", ["a", "b"], ci=0.95, n_boot=2000, seed=3)
    width = (full["eta2_high"] - full["eta2_low"]).iloc[:3]
    for side in ("eta2_low", "eta2_high"):
        assert ((sub[side] - full[side]).abs().iloc[:3] < 0.1 * width).all(), (sub, full)
    again = tomstats.anova(df, "y", ["a", "b"], ci=0.95, n_boot=2000, seed=3)
    pd.testing.assert_frame_equal(sub, again)  # the subsample is seeded
