"""``tomstats compare`` and :func:`tomstats.glmm.compare.compare`: LOO tables equal to
:func:`arviz.compare` on the same fits, and clear refusals (fewer than two fits, no
log-likelihood, different data, duplicate names, existing outputs).

The fits are small synthetic InferenceData in the layout of :func:`tomstats.glmm.fit`
(pointwise Bernoulli log-likelihood ``y`` over ``obs``), so no sampler runs here.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import arviz as az
import numpy as np
import pandas as pd
import pytest

from tomstats.cli import main
from tomstats.glmm import save_fit
from tomstats.glmm.compare import compare, fit_names
from tomstats.glmm.data import build_design

N_OBS = 40


def _outcomes(n: int = N_OBS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.3 + 1.2 * x)))).astype(np.int8)
    return x, y


def make_fit(slope: bool, *, n: int = N_OBS, seed: int = 0, y: np.ndarray | None = None,
             log_likelihood: bool = True, wild: bool = False) -> az.InferenceData:
    """A logistic 'fit' with (slope=True) or without the predictor: posterior draws near the
    maximum-likelihood values, its pointwise log-likelihood, and tomstats' attributes."""
    x, y0 = _outcomes(n)
    y = y0 if y is None else y
    rng = np.random.default_rng(seed + 10)
    chains, draws = 2, 200
    a = 0.3 + 0.15 * rng.standard_normal((chains, draws))
    b = (1.2 + 0.2 * rng.standard_normal((chains, draws))) if slope else np.zeros((chains,
                                                                                 draws))
    eta = a[..., None] + b[..., None] * x
    p = 1 / (1 + np.exp(-eta))
    ll = np.where(y == 1, np.log(p), np.log1p(-p))
    if wild:  # one observation whose likelihood swings wildly over the draws: high Pareto k
        ll[..., 0] = -np.exp(rng.normal(0, 2.5, (chains, draws)))
    formula = "correct ~ x" if slope else "correct ~ 1"
    spec, _ = build_design(formula, pd.DataFrame({"correct": y, "x": x}))
    attrs = {"tomstats_glmm_format": "1", "model": formula, "spec": json.dumps(spec.to_dict()),
             "family": "bernoulli", "n_obs": n}
    beta = np.stack([a, b], axis=-1) if slope else a[..., None]
    groups = dict(
        posterior={"beta": beta},
        sample_stats={"diverging": np.zeros((chains, draws), dtype=bool)},
        observed_data={"y": y},
        constant_data={"obs_trials": np.ones(n, dtype=np.int64)},
        dims={"y": ["obs"], "obs_trials": ["obs"], "beta": ["coef"]},
        coords={"coef": ["Intercept", "x"] if slope else ["Intercept"]},
        attrs=attrs,
    )
    if log_likelihood:
        groups["log_likelihood"] = {"y": ll.astype(np.float32)}
    idata = az.from_dict(**groups)
    idata.posterior.attrs.update(attrs)
    return idata


@pytest.fixture()
def two_fits(tmp_path):
    a, b = tmp_path / "slope.nc", tmp_path / "flat.nc"
    save_fit(make_fit(True), a)
    save_fit(make_fit(False, seed=1), b)
    return a, b


def test_compare_equals_arviz():
    fits = {"slope": make_fit(True), "flat": make_fit(False, seed=1)}
    ours = compare(fits)
    ref = az.compare(fits, ic="loo")
    pd.testing.assert_frame_equal(ours, ref)
    assert list(ours.index) == ["slope", "flat"]  # the true predictor wins
    assert ours.loc["flat", "elpd_diff"] > 0


def test_plot_shows_the_difference_and_its_standard_error():
    """The plot draws what the table ranks by: each fit's elpd_loo ± se, and the worse fit's
    difference from the best ± dse (ArviZ draws only the first unless asked), with a legend."""
    from tomstats.glmm.compare import fig_compare

    table = compare({"slope": make_fit(True), "flat": make_fit(False, seed=1)})
    ax = fig_compare(table).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ELPD", "ELPD difference"]
    # the triangle sits at elpd_loo(best) − elpd_diff(flat), its bar is ± dse
    diff = next(c for c in ax.containers if c.get_label() == "ELPD difference")
    (x,), _ = diff.lines[0].get_data()
    best = table["elpd_loo"].iloc[0]
    assert x == pytest.approx(best - table.loc["flat", "elpd_diff"])
    seg = diff.lines[2][0].get_segments()[0]
    assert seg[1][0] - seg[0][0] == pytest.approx(2 * table.loc["flat", "dse"])


def test_cli_table_csv_and_plot(two_fits, tmp_path, capsys):
    import matplotlib.image as mpimg

    a, b = two_fits
    csv, png = tmp_path / "cmp.csv", tmp_path / "cmp.png"
    rc = main(["compare", str(a), str(b), "--out", str(csv), "--plot", str(png)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    head = cap.out.splitlines()[1].split()
    assert head == ["rank", "elpd_loo", "p_loo", "elpd_diff", "se", "dse", "weight",
                    "warning"]
    ref = az.compare({"slope": make_fit(True), "flat": make_fit(False, seed=1)}, ic="loo")
    table = pd.read_csv(csv, index_col="fit")
    assert list(table.index) == list(ref.index)
    for col in ("elpd_loo", "p_loo", "elpd_diff", "weight", "se", "dse"):
        np.testing.assert_allclose(table[col].to_numpy(), ref[col].to_numpy(dtype=float),
                                   rtol=1e-6, atol=1e-9)
    row = next(ln for ln in cap.out.splitlines() if ln.startswith("slope"))
    assert row.split()[2] == format(ref.loc["slope", "elpd_loo"], ".4g")
    img = mpimg.imread(png)
    assert img.shape[0] > 50 and img.shape[1] > 50 and np.ptp(img[..., :3]) > 0
    # NAME=PATH names the rows
    rc = main(["compare", f"with_x={a}", f"without={b}"])
    assert rc == 0 and "with_x" in capsys.readouterr().out


def _err(capsys) -> list[str]:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert all("Traceback" not in ln for ln in err)
    return err


def test_cli_refusals(two_fits, tmp_path, capsys):
    a, b = two_fits
    csv = tmp_path / "t.csv"
    # fewer than two fits
    assert main(["compare", str(a), "--out", str(csv)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "at least two fits, got 1" in err[0]
    # no log-likelihood
    nolog = tmp_path / "nolog.nc"
    save_fit(make_fit(True, log_likelihood=False), nolog)
    assert main(["compare", str(a), str(nolog), "--out", str(csv)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "'nolog' has no pointwise log-likelihood" in err[0]
    assert "log_likelihood=True" not in err[0]  # CLI syntax, not the Python keyword
    # different data: another number of observations, or other outcomes
    other = tmp_path / "other.nc"
    save_fit(make_fit(True, n=30), other)
    assert main(["compare", str(a), str(other), "--out", str(csv)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "different data: 40 vs 30 observations" in err[0]
    assert "--option aggregate=false" in err[0]
    flipped = tmp_path / "flipped.nc"
    save_fit(make_fit(True, y=1 - _outcomes()[1]), flipped)
    assert main(["compare", str(a), str(flipped)]) == 2
    assert "outcomes differ" in _err(capsys)[0]
    # duplicate names: the same stem in two folders, or one file twice
    (tmp_path / "d").mkdir()
    twin = tmp_path / "d" / "slope.nc"
    save_fit(make_fit(False), twin)
    assert main(["compare", str(a), str(twin)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "two fits are named 'slope'" in err[0] and "NAME=PATH" in err[0]
    assert main(["compare", str(a), str(a)]) == 2
    assert "the same file is given twice" in _err(capsys)[0]
    # outputs: unknown suffixes, and existing files without --force (checked before work)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "t.txt")]) == 2
    assert "--out" in _err(capsys)[0]
    assert main(["compare", str(a), str(b), "--plot", str(tmp_path / "p.gif")]) == 2
    assert "--plot" in _err(capsys)[0]
    csv.write_text("keep me")
    png = tmp_path / "p.png"
    assert main(["compare", str(a), str(b), "--out", str(csv), "--plot", str(png)]) == 2
    assert "already exists; pass --force" in _err(capsys)[0]
    assert csv.read_text() == "keep me" and not png.exists()
    assert main(["compare", str(a), str(b), "--out", str(csv), "--force"]) == 0
    assert pd.read_csv(csv).shape[0] == 2
    assert not list(tmp_path.glob(".*.tmp"))


def test_pareto_warning_exit_code(two_fits, tmp_path, capsys):
    a, _ = two_fits
    wild = tmp_path / "wild.nc"
    save_fit(make_fit(True, seed=3, wild=True), wild)
    assert main(["compare", str(a), str(wild)]) == 4
    cap = capsys.readouterr()
    last = cap.err.strip().splitlines()[-1]
    assert last.startswith("tomstats compare: warning: the LOO estimate of wild is unreliable")
    assert "--allow-warnings" in last and "True" in cap.out
    assert main(["compare", str(a), str(wild), "--allow-warnings"]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "tomstats compare: warning:")


def test_python_api_refusals():
    with pytest.raises(TypeError, match="^fits must be a mapping"):
        compare([make_fit(True), make_fit(False)])
    with pytest.raises(TypeError, match=r"^fits\['b'\] must be an arviz.InferenceData"):
        compare({"a": make_fit(True), "b": "b.nc"})
    with pytest.raises(ValueError, match="log_likelihood=True"):  # Python syntax here
        compare({"a": make_fit(True), "b": make_fit(True, log_likelihood=False)})
    assert list(fit_names(["x/a.nc", "b=y/a.nc"])) == ["a", "b"]


# --------------------------------------------------------------------------- Laplace fits
# ``tomstats compare`` of maximum-likelihood fits prints lme4's anova(m0, m1); the reference
# is the R script's anova() of the case below (tests/glmm/conftest.py: run now when R with
# lme4 is here, the committed JSON otherwise).

LRT_CASE = "sim_singular_slope"


@pytest.fixture(scope="module")
def lrt_fits(lme4_slopes_reference, tmp_path_factory):
    """The case's two fits as JSON: the slopes model through fit_lme (an LmeFit) and the
    reduced one through tomstats.glmm.fit's random-intercept path (a LaplaceFit)."""
    from tomstats.glmm import fit
    from tomstats.glmm.lme import fit_lme

    case = lme4_slopes_reference[LRT_CASE]
    df = pd.DataFrame(case["data"])
    d = tmp_path_factory.mktemp("lrt")
    full = fit_lme(df, case["formula"]).to_json(d / "slopes.json")
    reduced = fit(df, case["anova"]["reduced"], "laplace").to_json(d / "intercepts.json")
    return case, df, reduced, full


def test_cli_lrt_equals_lme4_anova(lrt_fits, tmp_path, capsys):
    case, _, reduced, full = lrt_fits
    ref = case["anova"]
    csv = tmp_path / "lrt.csv"
    rc = main(["compare", f"m1={full}", f"m0={reduced}", "--out", str(csv)])
    out = capsys.readouterr().out
    assert rc == 0
    table = pd.read_csv(csv, index_col="fit")
    assert list(table.index) == ["m0", "m1"]  # by number of parameters, as lme4
    assert list(table["npar"]) == ref["npar"]
    np.testing.assert_allclose(table["logLik"], ref["loglik"], atol=1e-3)
    for col, key in (("AIC", "aic"), ("BIC", "bic"), ("deviance", "deviance")):
        np.testing.assert_allclose(table[col], ref[key], atol=2e-3)
    assert table.loc["m1", "Chisq"] == pytest.approx(ref["chisq"], abs=2e-3)
    assert table.loc["m1", "Df"] == ref["df"]
    assert table.loc["m1", "p"] == pytest.approx(ref["p"], rel=1e-2)
    assert np.isnan(table.loc["m0", "Chisq"])
    # the printed table is lme4's: its models, its columns, these numbers
    lines = out.splitlines()
    assert f"m0: {case['anova']['reduced']}" in lines and f"m1: {case['formula']}" in lines
    head = next(ln for ln in lines if ln.lstrip().startswith("npar"))
    assert head.split() == ["npar", "AIC", "BIC", "logLik", "deviance", "Chisq", "Df",
                            "Pr(>Chisq)"]
    row = next(ln for ln in lines if ln.startswith("m1 ")).split()
    assert row[:7] == ["m1", str(ref["npar"][1]), f"{table.loc['m1', 'AIC']:.2f}",
                       f"{table.loc['m1', 'BIC']:.2f}", f"{table.loc['m1', 'logLik']:.2f}",
                       f"{table.loc['m1', 'deviance']:.2f}", f"{table.loc['m1', 'Chisq']:.4f}"]
    assert row[8] == f"{table.loc['m1', 'p']:.4g}"
    assert "the boundary of their range" in out  # the slope's variance is tested at 0


def test_cli_lrt_refusals(lrt_fits, tmp_path, capsys):
    """Fits of other data, non-nested fits, a sampler fit beside a Laplace fit, --plot, a
    JSON that is not a fit: one line each, exit 2, nothing written."""
    from tomstats.glmm import fit

    case, df, reduced, full = lrt_fits
    csv = tmp_path / "t.csv"
    fewer = fit(df.iloc[:400], case["anova"]["reduced"], "laplace").to_json(
        tmp_path / "fewer.json")
    other = fit(df, "y ~ I(x ** 2) + (1 | g)", "laplace").to_json(tmp_path / "other.json")
    nc = tmp_path / "sampler.nc"
    save_fit(make_fit(True), nc)
    junk = tmp_path / "junk.json"
    junk.write_text('{"format": "something-else"}')
    cases = [
        ([str(full), str(fewer)], "fewer was fitted to 400 rows, slopes to 480"),
        ([str(reduced), str(other)], "intercepts (y ~ x + (1 | g)) is not nested in other "
                                     "(y ~ I(x ** 2) + (1 | g)): other lacks the fixed effect(s) "
                                     "x"),
        ([str(full), str(nc)], "'slopes' is a maximum-likelihood fit (JSON) and 'sampler' a "
                               "sampler fit"),
        ([str(full), str(reduced), "--plot", str(tmp_path / "p.png")], "--plot"),
        ([str(full), str(junk)], "field 'format' is 'something-else': not a maximum-likelihood "
                                 "fit"),
        ([str(full)], "a likelihood-ratio test needs at least two fits, got 1"),
    ]
    for args, message in cases:
        assert main(["compare", *args, "--out", str(csv)]) == 2, message
        err = _err(capsys)
        assert len(err) == 1 and message in err[0], (message, err)
        assert not csv.exists() and not (tmp_path / "p.png").exists()


def test_cli_lrt_of_a_fit_that_did_not_converge(lrt_fits, tmp_path, capsys):
    """The table is printed, and the exit status says the test is unreliable (4), unless
    --allow-warnings."""
    import json

    _, _, reduced, full = lrt_fits
    d = json.loads(full.read_text())
    d["converged"] = False
    stuck = tmp_path / "stuck.json"
    stuck.write_text(json.dumps(d))
    assert main(["compare", str(reduced), str(stuck)]) == 4
    cap = capsys.readouterr()
    assert "Pr(>Chisq)" in cap.out
    assert cap.err.strip().startswith("tomstats compare: warning: the fit(s) stuck did not "
                                      "converge")
    assert main(["compare", str(reduced), str(stuck), "--allow-warnings"]) == 0
    assert "(exit 0: --allow-warnings)" in capsys.readouterr().err


def test_nesting_follows_lme4s_terms():
    """A model is nested in another when its fixed effects, varying effects and
    correlations are among the other's: (1 + x || g) in (1 + x | g), not the reverse."""
    from tomstats.glmm.lme_result import LmeTerm, nesting_problem

    def model(fixed, *terms):
        return SimpleNamespace(coef_names=fixed, terms=[LmeTerm(g, e, c, ()) for g, e, c in
                                                        terms])

    both = ("(Intercept)", "x")
    corr = model(both, ("g", both, True))
    uncorr = model(both, ("g", both, False))
    split = model(both, ("g", ("(Intercept)",), True), ("g", ("x",), True))
    intercepts = SimpleNamespace(coef_names=("Intercept", "x"), groups=("g",))  # LaplaceFit
    assert nesting_problem(uncorr, corr) == "" and nesting_problem(split, uncorr) == ""
    assert nesting_problem(corr, uncorr) == "the correlation of (Intercept) and x within 'g'"
    assert nesting_problem(intercepts, corr) == ""
    assert nesting_problem(corr, intercepts) == "the random effect(s) x of 'g'"
    assert nesting_problem(model(("(Intercept)",), ("h", ("(Intercept)",), True)), corr) \
        == "the random effect(s) (Intercept) of 'h'"
