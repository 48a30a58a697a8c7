"""Repeated-measures and mixed ANOVA against R's afex ``aov_car`` and statsmodels ``AnovaRM``.

The afex numbers come from ``tests/reference/afex_rm.R``: when ``Rscript`` with afex is
installed the script is run afresh into a temporary file; otherwise the committed
``tests/reference/afex_rm.json`` (same script, same seeds, data included) is used. The test
output says which (``-rs``/``-s`` show it; the choice is also a recorded property).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import r_reference
from statsmodels.stats.anova import AnovaRM

from tomstats.analysis.row_anova import EFFECT_SIZES, RM_COLUMNS, anova

RTOL = 1e-9
REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT = REFERENCE / "afex_rm.R"
COMMITTED = REFERENCE / "afex_rm.json"
# afex/car name -> tomstats column
COLUMN_MAP = {
    "SS": "SS", "DF": "DF", "SS_error": "SS_error", "DF_error": "DF_error", "F": "F", "p": "p",
    "pes": "partial_eta2", "ges": "generalized_eta2", "eps_gg": "eps_gg", "p_gg": "p_gg",
    "eps_hf": "eps_hf", "p_hf": "p_hf", "mauchly_W": "mauchly_W", "mauchly_p": "mauchly_p",
}


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("afex", "jsonlite"), Path(tmp), timeout=600)


@pytest.fixture(scope="module")
def afex(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    ref, source = _reference(str(tmp_path_factory.mktemp("afex")))
    print(f"\nafex reference: {source}; afex {ref['afex']}, car {ref['car']}, {ref['R']}")
    return ref, source


DESIGNS = [d["name"] for d in json.loads(COMMITTED.read_text())["designs"]]


def _design(afex: tuple[dict[str, Any], str], name: str) -> dict[str, Any]:
    return next(d for d in afex[0]["designs"] if d["name"] == name)


def _fit(d: dict[str, Any], **kw: Any) -> pd.DataFrame:
    return anova(pd.DataFrame(d["data"]), "y", d["between"] or None, within=d["within"],
                 subject="subj", ss_type=d["type"], observed=d["observed"] or None,
                 binary=d["binary"], **kw)


# ---------------------------------------------------------------------------------------------
# afex
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DESIGNS)
def test_matches_afex(afex, name: str, record_property) -> None:
    record_property("afex_reference", afex[1])
    d = _design(afex, name)
    got = _fit(d)
    assert got["source"].tolist() == [r["source"] for r in d["rows"]]  # afex's row order
    got = got.set_index("source")
    for r in d["rows"]:
        row = got.loc[r["source"]]
        for theirs, ours in COLUMN_MAP.items():
            want, have = r[theirs], row[ours]
            where = f"{name} {r['source']} {theirs}"
            if want is None:
                if theirs in ("eps_gg", "eps_hf", "p_gg", "p_hf") and row["eps_gg"] == 1.0:
                    # 1-df within effect: car has no correction; we report ε = 1, p unchanged
                    expect = 1.0 if theirs.startswith("eps") else row["p"]
                    assert have == pytest.approx(expect, rel=1e-14), where
                else:
                    assert np.isnan(have), where
                continue
            assert have == pytest.approx(want, rel=RTOL, abs=1e-14), where


def test_reference_covers_the_cases(afex) -> None:
    designs = afex[0]["designs"]
    kinds = {(bool(d["between"]), bool(d["within"])) for d in designs}
    assert kinds == {(False, True), (True, True)}
    assert {d["type"] for d in designs} == {2, 3}
    rows = [r for d in designs for r in d["rows"]]
    assert any(r["eps_hf"] is not None and r["eps_hf"] > 1 for r in rows)  # capped in p_hf
    assert any(r["eps_hf"] is not None and r["eps_hf"] < 1 for r in rows)
    assert any(d["observed"] for d in designs) and any(d["binary"] for d in designs)
    sizes = [pd.DataFrame(d["data"]).groupby("subj").size() for d in designs]
    assert any(len(set(s)) > 1 for s in sizes)  # unequal replicates: aggregation matters


def test_committed_reference_is_current(afex) -> None:
    """The committed JSON equals a fresh run of the R script (when R and afex are present)."""
    if not afex[1].startswith("Rscript"):
        pytest.skip("Rscript with afex not available; using the committed reference")
    committed = json.loads(COMMITTED.read_text())
    for fresh, old in zip(afex[0]["designs"], committed["designs"], strict=True):
        assert fresh["name"] == old["name"] and fresh["data"] == old["data"]
        for a, b in zip(fresh["rows"], old["rows"], strict=True):
            for k, v in a.items():
                if isinstance(v, float):
                    assert b[k] == pytest.approx(v, rel=1e-12), (fresh["name"], k)


# ---------------------------------------------------------------------------------------------
# statsmodels AnovaRM (uncorrected F of pure within designs)
# ---------------------------------------------------------------------------------------------


def _random_within(seed: int) -> tuple[pd.DataFrame, list[str]]:
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(2, 5, size=1 + seed % 3))
    names = ["ctx", "tom", "fmt"][: len(shape)]
    rows = []
    for s in range(int(rng.integers(6, 12))):
        u = rng.normal()
        for idx in np.ndindex(*shape):
            for _ in range(int(rng.integers(1, 4))):
                rows.append((f"m{s}", *idx, u + 0.3 * sum(idx) + rng.normal()))
    return pd.DataFrame(rows, columns=["model", *names, "y"]), names


@pytest.mark.parametrize("seed", range(6))
def test_within_matches_statsmodels_anovarm(seed: int) -> None:
    df, names = _random_within(seed)
    got = anova(df, "y", within=names, subject="model").set_index("source")
    ref = AnovaRM(df, "y", "model", within=names, aggregate_func="mean").fit().anova_table
    assert sorted(got.index) == sorted(ref.index)
    for src in ref.index:
        assert got.loc[src, "F"] == pytest.approx(ref.loc[src, "F Value"], rel=RTOL)
        assert got.loc[src, "p"] == pytest.approx(ref.loc[src, "Pr > F"], rel=RTOL, abs=1e-15)
        assert got.loc[src, "DF"] == ref.loc[src, "Num DF"]
        assert got.loc[src, "DF_error"] == ref.loc[src, "Den DF"]


def test_afex_within_designs_match_statsmodels_anovarm(afex) -> None:
    for d in afex[0]["designs"]:
        if d["between"]:
            continue
        df = pd.DataFrame(d["data"])
        got = _fit(d).set_index("source")
        ref = AnovaRM(df, "y", "subj", within=d["within"], aggregate_func="mean").fit()
        tab = ref.anova_table
        np.testing.assert_allclose(got.loc[tab.index, "F"], tab["F Value"], rtol=RTOL)


# ---------------------------------------------------------------------------------------------
# effect sizes against textbook formulas (two-way within design, means decomposition)
# ---------------------------------------------------------------------------------------------


def test_within_effect_sizes_equal_textbook_decomposition() -> None:
    """Classic S × A × B decomposition by marginal means; generalized η² of Olejnik & Algina
    (2003, table 2: all factors manipulated) = SS_effect / (SS_effect + SS_S + SS_AS + SS_BS +
    SS_ABS); ω² and partial ω² by the formulas in the docstring with the effect's error term."""
    rng = np.random.default_rng(5)
    n_s, n_a, n_b = 9, 3, 4
    y = (rng.normal(size=(n_s, 1, 1)) + rng.normal(0, 0.5, size=(1, n_a, 1))
         + rng.normal(0, 0.3, size=(1, 1, n_b)) + rng.normal(size=(n_s, n_a, n_b)))
    df = pd.DataFrame([(f"s{s}", a, b, y[s, a, b]) for s in range(n_s) for a in range(n_a)
                       for b in range(n_b)], columns=["subj", "A", "B", "y"])
    got = anova(df, "y", within=["A", "B"], subject="subj").set_index("source")
    g = y.mean()
    ms, ma, mb = y.mean(axis=(1, 2)), y.mean(axis=(0, 2)), y.mean(axis=(0, 1))
    msa, msb, mab = y.mean(axis=2), y.mean(axis=1), y.mean(axis=0)
    ss = {
        "S": n_a * n_b * np.sum((ms - g) ** 2),
        "A": n_s * n_b * np.sum((ma - g) ** 2),
        "B": n_s * n_a * np.sum((mb - g) ** 2),
        "A:B": n_s * np.sum((mab - ma[:, None] - mb[None, :] + g) ** 2),
    }
    ss["AS"] = n_b * np.sum((msa - ms[:, None] - ma[None, :] + g) ** 2)
    ss["BS"] = n_a * np.sum((msb - ms[:, None] - mb[None, :] + g) ** 2)
    ss_total = np.sum((y - g) ** 2)
    ss["ABS"] = ss_total - sum(ss.values())
    err = {"A": ("AS", (n_a - 1) * (n_s - 1)), "B": ("BS", (n_b - 1) * (n_s - 1)),
           "A:B": ("ABS", (n_a - 1) * (n_b - 1) * (n_s - 1))}
    dfs = {"A": n_a - 1, "B": n_b - 1, "A:B": (n_a - 1) * (n_b - 1)}
    all_err = ss["S"] + ss["AS"] + ss["BS"] + ss["ABS"]
    n_obs = n_s * n_a * n_b
    for eff in ("A", "B", "A:B"):
        e_ss, e_df = ss[err[eff][0]], err[eff][1]
        mse = e_ss / e_df
        row = got.loc[eff]
        assert row["SS"] == pytest.approx(ss[eff], rel=1e-11)
        assert row["SS_error"] == pytest.approx(e_ss, rel=1e-11)
        assert row["DF_error"] == e_df
        assert row["eta2"] == pytest.approx(ss[eff] / ss_total, rel=1e-11)
        assert row["partial_eta2"] == pytest.approx(ss[eff] / (ss[eff] + e_ss), rel=1e-11)
        assert row["generalized_eta2"] == pytest.approx(ss[eff] / (ss[eff] + all_err), rel=1e-11)
        assert row["omega2"] == pytest.approx((ss[eff] - dfs[eff] * mse) / (ss_total + mse),
                                              rel=1e-11)
        assert row["partial_omega2"] == pytest.approx(
            (ss[eff] - dfs[eff] * mse) / (ss[eff] + (n_obs - dfs[eff]) * mse), rel=1e-11)


def test_subject_without_within_is_between_anova_of_subject_means() -> None:
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"model": np.repeat([f"m{i}" for i in range(12)], 5),
                       "family": np.repeat(["a", "b", "c"] * 4, 5),
                       "y": rng.normal(size=60)})
    got = anova(df, "y", ["family"], subject="model")
    means = df.groupby(["model", "family"], as_index=False)["y"].mean()
    ref = anova(means, "y", ["family"])
    for col in ("SS", "DF", "F", "p", "partial_eta2", "generalized_eta2"):
        assert got[col].iloc[0] == pytest.approx(ref[col].iloc[0], rel=1e-12)
    assert np.isnan(got[list(RM_COLUMNS)].iloc[0]).all()


# ---------------------------------------------------------------------------------------------
# bootstrap for repeated measures
# ---------------------------------------------------------------------------------------------


def _rm_log(seed: int) -> pd.DataFrame:
    """LLMs as subjects (two families), context × order within, stories as clusters."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(8):
        skill = rng.normal(0, 0.5)
        for c, ctx in enumerate([200, 1000, 5000]):
            for o in range(3):
                for s in range(12):
                    for _ in range(int(rng.integers(1, 4))):
                        eta = 1.0 + skill - 0.6 * o - 0.3 * c + rng.normal(0, 0.3)
                        rows.append((f"llm{m}", "big" if m < 4 else "small", ctx, o, f"st{s}",
                                     rng.binomial(1, 1 / (1 + np.exp(-eta)))))
    return pd.DataFrame(rows, columns=["model", "family", "ctx", "order", "story", "correct"])


def test_rm_bootstrap_same_seed_same_interval() -> None:
    df = _rm_log(0)
    kw = {"within": ["ctx", "order"], "subject": "model", "ci": 0.95, "n_boot": 300,
          "cluster": "story", "binary": True}
    one = anova(df, "correct", ["family"], seed=3, **kw)
    two = anova(df, "correct", ["family"], seed=3, **kw)
    pd.testing.assert_frame_equal(one, two)
    other = anova(df, "correct", ["family"], seed=4, **kw)
    assert not np.allclose(one["eta2_low"], other["eta2_low"])
    for e in EFFECT_SIZES:
        assert (one[f"{e}_low"] <= one[f"{e}_high"]).all(), e
    # the large order effect: estimate inside its interval, interval clearly above 0
    row = one.set_index("source").loc["order"]
    assert row["generalized_eta2_low"] <= row["generalized_eta2"] <= row[
        "generalized_eta2_high"]
    assert row["generalized_eta2_low"] > 0.05
    assert one.attrs["design"] == "mixed" and one.attrs["subjects"] == 8


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "kwargs", "match"),
    [
        (lambda d: d[~((d.model == "llm3") & (d.ctx == 5000) & (d.order == 2))], {},
         r"subject 'llm3' \('model'\) has no rows with ctx=5000, order=2; every subject needs "
         r"every within cell"),
        (lambda d: d.assign(family=np.where((d.model == "llm1") & (d.ctx == 200), "small",
                                            d.family)), {},
         r"between factor 'family' varies within subject 'llm1' \('model'\): values 'big' and "
         r"'small'"),
        (None, {"between": ["ctx"]}, r"factor 'ctx' is named twice \(as between and as within\)"),
        (None, {"within": ["ctx", "order", "ctx"]},
         r"factor 'ctx' is named twice in within$"),
        (None, {"subject": "modle"}, r"subject column 'modle' not in data \(did you mean "
         r"'model'\?\)"),
        (None, {"subject": "order"}, r"subject column 'order' is also used as within"),
        (lambda d: d[d.model.isin(["llm0", "llm5"])], {},
         r"no error degrees of freedom: 2 subjects \('model'\) for 2 between cells"),
        (lambda d: d.assign(model=d.model.where(d.index != 7, None)), {},
         r"subject column 'model' has a missing value at index 7"),
        (lambda d: d.assign(order=0), {}, r"factor 'order' has a single level 0"),
        (lambda d: d[d.family == "big"], {}, r"factor 'family' has a single level 'big'"),
    ],
)
def test_rm_bad_input(mutate, kwargs, match) -> None:
    df = _rm_log(1)
    if mutate is not None:
        df = mutate(df)
    args = {"dv": "correct", "between": ["family"], "within": ["ctx", "order"],
            "subject": "model", **kwargs}
    with pytest.raises(ValueError, match=match) as info:
        anova(df, **args)
    assert "\n" not in str(info.value)
