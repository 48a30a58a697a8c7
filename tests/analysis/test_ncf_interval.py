"""Noncentral-F intervals of partial η² and η² (Steiger 2004): against R, closed-form
properties, coverage by simulation, the cluster design effect, and the CLI's ``--interval``.

The R numbers come from ``tests/reference/effectsize_ncf.R``: when ``Rscript`` with effectsize
is installed the script is run afresh into a temporary file; otherwise the committed
``tests/reference/effectsize_ncf.json`` (same script, same seed, data included) is used. R's
bounds are R's own noncentral F CDF (``pf(..., ncp)``) solved with ``uniroot`` — an
implementation independent of SciPy's — and effectsize's ``F_to_eta2`` / ``eta_squared``,
which map a noncentrality :math:`\\lambda` to :math:`\\lambda/(\\lambda + d_2)` where tomstats
maps it to :math:`\\lambda/(\\lambda + d_1 + d_2 + 1)`; effectsize's bounds are converted back to
:math:`\\lambda` before comparing.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import r_reference
from scipy.stats import f as central_f
from scipy.stats import ncf

from tomstats.analysis.intervals import ncf_eta2_interval, ncf_lambda_interval
from tomstats.analysis.log_anova import DEFAULT_INTERVAL, log_anova
from tomstats.analysis.row_anova import anova
from tomstats.cli import main

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT = REFERENCE / "effectsize_ncf.R"
COMMITTED = REFERENCE / "effectsize_ncf.json"


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("effectsize", "jsonlite"), Path(tmp), timeout=300)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data, source = _reference(str(tmp_path_factory.mktemp("effectsize")))
    print(f"\neffectsize reference: {source}; effectsize {data['effectsize']}, {data['R']}")
    return data


def _grid(ref: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(ref["grid"])


# ---------------------------------------------------------------------------------------------
# against R
# ---------------------------------------------------------------------------------------------

def test_lambda_bounds_equal_r_uniroot(ref: dict[str, Any]) -> None:
    g = _grid(ref)
    assert len(g) == 192 and (g["lambda_high"] > 0).sum() > 100
    for level, sub in g.groupby("level"):
        lo, hi = ncf_lambda_interval(sub["f"], sub["df1"], sub["df2"], float(level))
        np.testing.assert_allclose(lo, sub["lambda_low"], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(hi, sub["lambda_high"], rtol=1e-6, atol=1e-7)


def test_eta2_bounds_equal_effectsize_where_its_search_converged(ref: dict[str, Any]) -> None:
    """effectsize's optim() misses its target in a few cells (its CDF at the bound is off by
    more than 1e-6; 6 of 192 in 0.8.3): those are left out, the rest agree."""
    g = _grid(ref)
    a = 1 - g["level"]
    ok_lo = g["effectsize_cdf_low"].isna() | ((g["effectsize_cdf_low"] - (1 - a / 2)).abs() < 1e-6)
    ok_hi = g["effectsize_cdf_high"].isna() | ((g["effectsize_cdf_high"] - a / 2).abs() < 1e-6)
    assert ok_lo.mean() > 0.9 and ok_hi.mean() > 0.9
    for level, sub in g.groupby("level"):
        lo, hi = ncf_eta2_interval(sub["f"], sub["df1"], sub["df2"], float(level))
        n = sub["df1"] + sub["df2"] + 1
        lam_es = {k: sub["df2"] * sub[k] / (1 - sub[k])
                  for k in ("effectsize_low", "effectsize_high")}
        mine = {"effectsize_low": lo, "effectsize_high": hi}
        for k, ok in (("effectsize_low", ok_lo), ("effectsize_high", ok_hi)):
            keep = ok[sub.index].to_numpy()
            want = (lam_es[k] / (lam_es[k] + n)).to_numpy()
            np.testing.assert_allclose(np.asarray(mine[k])[keep], want[keep], atol=2e-5)


def test_anova_table_equals_effectsize_eta_squared(ref: dict[str, Any]) -> None:
    """A two-way aov in R and tomstats.anova(interval="ncf") on the same rows: partial η² and
    η² (the term's F' = (η²/DF)/((1 − η²)/DF_E), as effectsize's eta_squared(partial=FALSE))."""
    data = pd.DataFrame(ref["aov"]["data"])
    rows = pd.DataFrame(ref["aov"]["rows"])
    tab = anova(data, "y", ["a", "b"], ss_type=1, ci=0.95, interval="ncf")
    eff = tab.iloc[: len(rows)]
    assert eff["source"].tolist() == rows["source"].tolist()
    np.testing.assert_allclose(eff["F"], rows["F"], rtol=1e-9)
    d1, d2 = rows["DF"].to_numpy(), rows["DF_error"].to_numpy()
    for col in ("partial_eta2_low", "partial_eta2_high", "eta2_low", "eta2_high"):
        e = rows[col].to_numpy()
        lam = d2 * e / (1 - e)
        np.testing.assert_allclose(eff[col], lam / (lam + d1 + d2 + 1), atol=2e-5, err_msg=col)
    assert tab.attrs["ci_method"] == "noncentral F"
    assert tab.iloc[-1][["partial_eta2_low", "eta2_low"]].isna().all()  # Residual


# ---------------------------------------------------------------------------------------------
# closed-form properties
# ---------------------------------------------------------------------------------------------

def test_cdf_at_the_bounds_is_the_tail_target() -> None:
    f = np.array([0.8, 2.5, 4.0, 12.0, 400.0])
    for d1, d2, level in ((1, 20, 0.95), (4, 300, 0.9), (8, 7485, 0.99)):
        lo, hi = ncf_lambda_interval(f, d1, d2, level)
        a = 1 - level
        pos_lo, pos_hi = lo > 0, hi > 0
        assert pos_hi.all()
        np.testing.assert_allclose(ncf.cdf(f[pos_lo], d1, d2, lo[pos_lo]), 1 - a / 2, atol=1e-9)
        np.testing.assert_allclose(ncf.cdf(f[pos_hi], d1, d2, hi[pos_hi]), a / 2, atol=1e-9)
        # lower bound 0 exactly where the central F's p-value is at least a/2
        np.testing.assert_array_equal(lo == 0, central_f.sf(f, d1, d2) >= a / 2)


def test_monotone_in_f_and_in_level() -> None:
    f = np.linspace(0, 30, 61)
    lo, hi = ncf_eta2_interval(f, 3, 120)
    assert np.all(np.diff(lo) >= 0) and np.all(np.diff(hi) >= 0)
    assert np.all(lo <= hi) and np.all((0 <= lo) & (hi < 1))
    lo90, hi90 = ncf_eta2_interval(f, 3, 120, ci=0.9)
    assert np.all(lo90 >= lo) and np.all(hi90 <= hi)


def test_zero_small_nan_and_infinite_f() -> None:
    lo, hi = ncf_eta2_interval([0.0, 1e-6, np.nan, np.inf, 1.0], 2, 50)
    assert (lo[0], hi[0]) == (0.0, 0.0)  # F = 0: the CDF is 0 for every λ, below a/2
    assert (lo[1], hi[1]) == (0.0, 0.0)  # below the central a/2 quantile
    assert np.isnan(lo[2:4]).all() and np.isnan(hi[2:4]).all()
    assert lo[4] == 0.0 < hi[4]
    lo, hi = ncf_eta2_interval(2.0, np.nan, 50)
    assert np.isnan(lo) and np.isnan(hi)


def test_vectorised_shape_and_conversion() -> None:
    f = np.array([[0.5, 3.0], [9.0, 0.0]])
    lo, hi = ncf_eta2_interval(f, np.array([2, 4]), 60)
    assert lo.shape == hi.shape == (2, 2)
    lam_lo, lam_hi = ncf_lambda_interval(f, np.array([2, 4]), 60)
    n = np.array([2, 4]) + 60 + 1
    np.testing.assert_allclose(hi, lam_hi / (lam_hi + n))
    np.testing.assert_allclose(lo, lam_lo / (lam_lo + n))


@pytest.mark.parametrize(("args", "match"), [
    ((1.0, 2, 10, 1.0), "ci must lie strictly between 0 and 1"),
    ((1.0, 2, 10, True), "ci must lie"),
    ((-1.0, 2, 10), "F must be >= 0, got -1.0"),
    ((1.0, 0, 10), "df1 must be > 0, got 0.0"),
    ((1.0, 2, -3), "df2 must be > 0, got -3.0"),
])
def test_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        ncf_lambda_interval(*args)


# ---------------------------------------------------------------------------------------------
# coverage by simulation
# ---------------------------------------------------------------------------------------------

def _one_way_f(rng: np.random.Generator, means: np.ndarray, n: int, reps: int) -> np.ndarray:
    y = rng.normal(means[None, :, None], 1.0, (reps, len(means), n))
    m = y.mean(axis=2)
    ss_b = n * ((m - m.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    ss_w = ((y - m[..., None]) ** 2).sum(axis=(1, 2))
    k = len(means)
    return (ss_b / (k - 1)) / (ss_w / (k * (n - 1)))


@pytest.mark.parametrize(("spread", "want"), [(0.0, 0.975), (0.12, 0.95), (0.4, 0.95)])
def test_coverage_one_way_normal(spread: float, want: float) -> None:
    """One-way ANOVA, 4 groups of 25, σ = 1: the true partial η² is σ²_T/(σ²_T + 1) with
    σ²_T the groups' mean square deviation, exactly λ/(λ + N) at λ = N σ²_T. At 0 the
    two-sided interval covers 1 − a/2 (its lower bound is 0 whenever p ≥ a/2)."""
    rng = np.random.default_rng(23 + int(spread * 100))
    means = spread * np.array([-1.5, -0.5, 0.5, 1.5])
    var_t = np.mean((means - means.mean()) ** 2)
    truth = var_t / (var_t + 1.0)
    reps = 1500
    lo, hi = ncf_eta2_interval(_one_way_f(rng, means, 25, reps), 3, 96)
    cover = np.mean((lo <= truth) & (truth <= hi))
    se = np.sqrt(want * (1 - want) / reps)
    assert abs(cover - want) < 3.3 * se, (spread, cover)


def _nested(rng: np.random.Generator, effect: float, reps: int) -> list[pd.DataFrame]:
    """3 groups × 12 clusters × 8 rows; cluster effects N(0, 0.5²), rows N(0, 1)."""
    g = np.repeat(np.arange(3), 12 * 8)
    c = np.repeat(np.arange(36), 8)
    out = []
    for _ in range(reps):
        y = effect * (g - 1) + rng.normal(0, 0.5, 36)[c] + rng.normal(0, 1, len(g))
        out.append(pd.DataFrame({"g": g, "cl": c, "y": y}))
    return out


def test_cluster_design_effect_restores_coverage() -> None:
    """Clustered rows: the rows' F test is too liberal and its interval too short; divided by
    the design effect (the nested F on (DF, K − C) df) the interval covers again."""
    rng = np.random.default_rng(5)
    effect = 0.25
    var_t = effect**2 * 2 / 3
    truth = var_t / (var_t + 0.25 + 1.0)
    hits = {"cluster": [], "rows": []}
    for df in _nested(rng, effect, 300):
        for how, cl in (("cluster", "cl"), ("rows", None)):
            row = anova(df, "y", ["g"], ci=0.95, interval="ncf", cluster=cl).iloc[0]
            hits[how].append(row["partial_eta2_low"] <= truth <= row["partial_eta2_high"])
    cover = {k: float(np.mean(v)) for k, v in hits.items()}
    se = np.sqrt(0.95 * 0.05 / 300)
    assert abs(cover["cluster"] - 0.95) < 3.3 * se, cover
    assert cover["rows"] < 0.85, cover


def test_design_effect_values() -> None:
    """D = MS_clusters/MS_res; every cluster one row: no correction; one cluster per cell:
    no interval, and the note names the column."""
    rng = np.random.default_rng(0)
    df = _nested(rng, 0.2, 1)[0]
    tab = anova(df, "y", ["g"], ci=0.95, interval="ncf", cluster="cl")
    means = df.groupby("cl")["y"].agg(["mean", "size"])
    cell_mean = df.groupby("g")["y"].transform("mean")
    grp = df.groupby("cl")["g"].first()
    ms_clu = float((means["size"] * (means["mean"] - df.groupby("g")["y"].mean()[grp].to_numpy())
                    ** 2).sum() / (36 - 3))
    ms_res = float(((df["y"] - cell_mean) ** 2).sum() / (len(df) - 3))
    assert tab.attrs["design_effect"] == pytest.approx(ms_clu / ms_res, rel=1e-10)
    single = df.assign(cl=np.arange(len(df)))
    t1 = anova(single, "y", ["g"], ci=0.95, interval="ncf", cluster="cl")
    t0 = anova(single, "y", ["g"], ci=0.95, interval="ncf")
    pd.testing.assert_frame_equal(t1, t0, check_like=True, check_exact=False)
    one = anova(df.assign(g2=df["g"]), "y", ["g"], ci=0.95, interval="ncf", cluster="g2")
    assert one[["partial_eta2_low", "eta2_high"]].isna().all().all()
    assert one["note"].iloc[0].startswith("no noncentral-F interval: one g2 cluster per cell")
    assert one["note"].iloc[-1] == ""  # the Residual row has no interval anyway


def test_degenerate_terms_are_nan() -> None:
    """A constant outcome (F NaN) and a term without effect and without error (F = 0/0)
    give NaN bounds; a zero-SS term with error variance gives [0, 0]."""
    df = pd.DataFrame({"a": np.repeat([0, 1], 10), "b": np.tile([0, 1], 10),
                       "y": np.ones(20)})
    tab = anova(df, "y", ["a", "b"], ci=0.95, interval="ncf")
    assert tab[["partial_eta2_low", "partial_eta2_high"]].isna().all().all()
    df["y"] = np.tile([0.0, 1.0, 1.0, 0.0], 5)  # a and b have no effect, rows vary
    tab = anova(df, "y", ["a", "b"], ci=0.95, interval="ncf")
    zero = tab[tab["source"] == "a"].iloc[0]
    assert zero["F"] == 0 and (zero["partial_eta2_low"], zero["partial_eta2_high"]) == (0, 0)


def test_interval_argument_checked() -> None:
    df = pd.DataFrame({"a": np.repeat([0, 1], 10), "y": np.arange(20.0)})
    with pytest.raises(ValueError, match="interval must be one of bca, ncf, got 'NCF'"):
        anova(df, "y", ["a"], ci=0.95, interval="NCF")
    with pytest.raises(ValueError, match="interval must be one of"):
        log_anova(df.assign(context_words=1, tom_order=df["a"]), dv="y", between="a",
                  interval="x")


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------

def _log(tmp: Path) -> Path:
    rng = np.random.default_rng(3)
    rows = [(f"m{m}", ctx, tom, f"s{ctx}-{tom}-{s}") for m in range(2)
            for ctx in (200, 1000, 5000) for tom in (0, 1, 2) for s in range(8)
            for _q in range(2)]
    df = pd.DataFrame(rows, columns=["model", "context_words", "tom_order", "story_id"])
    df["correct"] = rng.binomial(1, 0.8 - 0.2 * df["tom_order"])
    path = tmp / "t.csv"
    df.to_csv(path, index=False)
    return path


def test_cli_default_is_ncf_with_the_clusters(tmp_path: Path, capsys) -> None:
    assert DEFAULT_INTERVAL == "ncf"
    log = _log(tmp_path)
    out = tmp_path / "a.csv"
    assert main(["anova", str(log), "--ci", "0.95", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "95% noncentral-F intervals of partial η² and η², design effect of the story_id" \
        in text
    got = pd.read_csv(out)
    df = pd.read_csv(log)
    ref = anova(df, "correct", ["context_words", "tom_order"], binary=True, ci=0.95,
                interval="ncf", cluster="story_id")
    np.testing.assert_allclose(got["partial_eta2_high"], ref["partial_eta2_high"], rtol=1e-12)
    assert "omega2_low" not in got.columns


def test_cli_interval_choice(tmp_path: Path, capsys) -> None:
    log = _log(tmp_path)
    base = ["anova", str(log), "--ci", "0.9"]
    assert main([*base, "--n-boot", "50"]) == 0  # asking for resamples asks for the bootstrap
    assert "cluster-bootstrap intervals, 50 resamples of story_id" in capsys.readouterr().out
    assert main([*base, "--interval", "ncf", "--n-boot", "50"]) == 0
    assert "noncentral-F" in capsys.readouterr().out
    assert main([*base, "--interval", "bca"]) == 0
    assert "cluster-bootstrap intervals, 2000 resamples" in capsys.readouterr().out
    assert main([*base, "--within", "context_words", "tom_order", "--interval", "ncf"]) == 0
    assert "noncentral-F intervals of partial η² (on the subjects' error terms)" in \
        capsys.readouterr().out


def test_cli_bad_interval_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    log = _log(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["anova", str(log), "--ci", "0.95", "--interval", "steiger"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--interval" in err[0] and "'steiger'" in err[0], err


# ---------------------------------------------------------------------------------------------
# the measurement on docs/anova.md
# ---------------------------------------------------------------------------------------------

def test_docs_table_is_the_benchmarks() -> None:
    """docs/anova.md's coverage table lies between bench_eta2_intervals.py's markers, opens
    with the command that wrote it (whose arguments parse) and has the script's columns and
    rows (never its numbers: they are the measurement)."""
    import importlib.util
    import shlex

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(
        "bench_eta2_intervals_docs", repo / "benchmarks" / "bench_eta2_intervals.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (repo / "docs" / "anova.md").read_text(encoding="utf-8")
    import _docs  # the benchmark put benchmarks/ on the path

    begin, end = _docs.begin_marker(mod.SCRIPT), _docs.end_marker(mod.SCRIPT)
    assert text.count(begin) == 1 and text.count(end) == 1
    body = text[text.index(begin) + len(begin): text.index(end)]
    cmd = re.match(r"\s*`([^`]+)`", body)
    assert cmd, "the block does not open with the command that wrote it"
    words = shlex.split(cmd.group(1))
    assert words[:2] == ["python", "benchmarks/bench_eta2_intervals.py"]
    args = mod.parser().parse_args(words[2:])
    rows = [[c.strip() for c in line.strip().split("|")[1:-1]] for line in body.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    assert tuple(rows[0]) == mod.COLUMNS
    assert [tuple(r[:3]) for r in rows[1:]] == mod.row_keys(args)


def test_log_report_uses_the_default_interval(tmp_path: Path) -> None:
    """The log report's ANOVA shows the noncentral-F intervals unless --n-boot asks for the
    bootstrap (0: none)."""
    log = _log(tmp_path)
    texts = {}
    for name, extra in (("default", []), ("boot", ["--n-boot", "30"]), ("none", ["--n-boot", "0"])):
        out = tmp_path / f"{name}.md"
        assert main(["report", str(log), "--format", "md", "--out", str(out), *extra]) == 0
        texts[name] = (out / "report.md").read_text(encoding="utf-8")
    assert "noncentral-F intervals of η² and partial η² (Steiger 2004; the F tests divided by " \
           "the design effect of the story_id clusters" in texts["default"]
    assert "cluster bootstrap, 30 resamples of story_id within cells, seed 0 (BCa)" \
        in texts["boot"]
    assert "No intervals (--n-boot 0)." in texts["none"]
