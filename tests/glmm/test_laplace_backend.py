"""``tomstats.glmm.fit(..., backend="laplace")`` with random intercepts: the one Laplace
engine as a backend.

The agreement of the solver with lme4 is tested in the solver's own tests (test_laplace,
test_glmm_lme); here: the backend builds the same problem from a formula (centred design
mapped back, aggregation, binomial form), reports it like lme4's summary, refuses what it
cannot fit, round-trips through JSON, and runs from the command line. Two compiled programs
(crossed K = 2, one factor K = 1) keep the file fast.
"""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from _crossed import crossed_frame, crossed_grid

from tomstats import glmm
from tomstats.glmm import LaplaceConvergenceWarning, LaplaceFit

FORMULA = "correct ~ x + (1 | model) + (1 | item)"
BETA = (-0.3, 0.8)
SD = {"model": 0.7, "item": 1.0}


@pytest.fixture(scope="module")
def crossed() -> pd.DataFrame:
    """4 LLMs × 60 items × 3 questions, binary outcome, known beta and SDs (seeded)."""
    rng = np.random.default_rng(20240611)
    n_m, n_i, reps = 4, 60, 3
    m = np.repeat(np.arange(n_m), n_i * reps)
    it = np.tile(np.repeat(np.arange(n_i), reps), n_m)
    x = rng.normal(size=m.size)
    eta = (BETA[0] + BETA[1] * x + rng.normal(0, SD["model"], n_m)[m]
           + rng.normal(0, SD["item"], n_i)[it])
    y = (rng.random(m.size) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"model": [f"llm{k}" for k in m], "item": [f"q{j:02d}" for j in it],
                         "x": x, "correct": y})


@pytest.fixture(scope="module")
def fit_crossed(crossed: pd.DataFrame) -> LaplaceFit:
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaplaceConvergenceWarning)
        return glmm.fit(crossed, FORMULA, backend="laplace")


@pytest.fixture(scope="module")
def one_factor() -> pd.DataFrame:
    """8 LLMs × ToM orders 0–2 × 10 questions: rows that aggregate into 24 binomial cells."""
    rng = np.random.default_rng(7)
    rows = []
    caps = rng.normal(1.0, 0.6, 8)
    for k, cap in enumerate(caps):
        for t in (0, 1, 2):
            p = 1 / (1 + np.exp(-(cap - 0.7 * t)))
            rows += [{"model": f"m{k}", "tom_order": t, "correct": int(rng.random() < p)}
                     for _ in range(10)]
    return pd.DataFrame(rows)


def test_crossed_recovers_and_equals_laplace_fit(crossed, fit_crossed):
    import jax

    from tomstats.glmm.laplace import laplace_fit

    f = fit_crossed
    assert f.converged and f.iterations >= 1
    assert f.coef_names == ("(Intercept)", "x") and f.groups == ("model", "item")
    assert f.n_levels == (4, 60) and f.n_rows == f.n_obs == 720 and not f.aggregated
    # roughly recovered: slope within 3 SE, SDs of the right size
    assert abs(f.beta[1] - BETA[1]) < 3 * f.se[1]
    assert abs(f.beta[0] - BETA[0]) < 3 * f.se[0] + 0.3
    assert 0.6 < f.sd[1] < 1.5 and f.sd[0] < 1.5
    # the same numbers as laplace_fit on the uncentred design (lme4's problem)
    codes = np.column_stack([pd.factorize(crossed[c], sort=True)[0] for c in ("model", "item")])
    X = np.column_stack([np.ones(len(crossed)), crossed["x"].to_numpy()])
    with jax.enable_x64(True):
        r = laplace_fit(X, crossed["correct"].to_numpy(float), None, codes.astype(np.int64),
                        (4, 60))
        ref = {k: np.asarray(getattr(r, k)) for k in ("beta", "se", "cov", "sd", "ranef",
                                                      "loglik")}
    for k in ("beta", "se", "cov", "sd"):
        np.testing.assert_allclose(getattr(f, k), ref[k], rtol=1e-6, atol=1e-7, err_msg=k)
    np.testing.assert_allclose(f.b, ref["ranef"], rtol=1e-6, atol=1e-7)
    assert f.loglik == pytest.approx(float(ref["loglik"]), abs=1e-7)
    # lme4's definitions: d = p + K parameters, N = rows
    assert f.aic == pytest.approx(-2 * f.loglik + 2 * 4)
    assert f.bic == pytest.approx(-2 * f.loglik + np.log(720) * 4)


def test_summary_tables(fit_crossed):
    from scipy.stats import norm

    f = fit_crossed
    s = f.summary()  # the name of earlier versions of fixed_effects()
    pd.testing.assert_frame_equal(s, f.fixed_effects())
    assert list(s.columns) == ["estimate", "se", "z", "p", "ci_lower", "ci_upper"]
    assert list(s.index) == ["(Intercept)", "x"]
    np.testing.assert_allclose(s["z"], f.beta / f.se)
    np.testing.assert_allclose(s["p"], 2 * norm.sf(np.abs(f.beta / f.se)))
    np.testing.assert_allclose(s["ci_upper"] - s["estimate"], 1.959963984540054 * f.se)
    s90 = f.summary(level=0.9)
    np.testing.assert_allclose(s90["estimate"] - s90["ci_lower"], 1.6448536269514722 * f.se)
    with pytest.raises(ValueError, match="level"):
        f.summary(level=95)
    vc = f.variance_components()
    assert list(vc.columns) == ["group", "effect", "n_levels", "sd", "variance"]
    assert vc["group"].tolist() == ["model", "item"] and vc["n_levels"].tolist() == [4, 60]
    np.testing.assert_allclose(vc["variance"], f.sd ** 2)
    np.testing.assert_allclose(f.VarCorr()["sdcor"], f.sd)
    re = f.ranef()
    pd.testing.assert_frame_equal(re, f.random_effects())
    assert list(re.columns) == ["group", "level", "effect", "estimate", "cond_sd"]
    assert len(re) == 64 and (re["effect"] == "(Intercept)").all()
    assert re["level"].iloc[:4].tolist() == ["llm0", "llm1", "llm2", "llm3"]
    assert re["level"].iloc[4] == "q00" and (re["group"].iloc[4:] == "item").all()
    np.testing.assert_allclose(re["estimate"], f.b)
    prior_sd = f.sd[re["group"].map({"model": 0, "item": 1}).to_numpy()]
    assert ((re["cond_sd"] > 0) & (re["cond_sd"] < prior_sd)).all()  # below the prior SD
    text = str(f)
    for part in ("Laplace", "Random effects:", "Fixed effects:", "Number of obs: 720",
                 "item, 60", "logLik", "Std. Error", FORMULA):
        assert part in text, part
    assert "did not converge" not in text


def test_no_random_terms_equals_statsmodels_logit(crossed):
    import statsmodels.api as sm

    f = glmm.fit(crossed, "correct ~ x", backend="laplace")
    ref = sm.Logit(crossed["correct"].to_numpy(),
                   sm.add_constant(crossed["x"].to_numpy())).fit(disp=0, tol=1e-12)
    np.testing.assert_allclose(f.beta, ref.params, atol=1e-6)
    np.testing.assert_allclose(f.se, ref.bse, atol=1e-6)
    np.testing.assert_allclose(f.cov, ref.cov_params(), atol=1e-6)
    assert f.loglik == pytest.approx(ref.llf, abs=1e-6)
    assert f.aic == pytest.approx(ref.aic, abs=1e-6) and f.bic == pytest.approx(ref.bic,
                                                                                  abs=1e-6)
    assert f.groups == () and f.ranef().empty and f.variance_components().empty
    assert "Random effects" not in str(f) and "Generalized linear model" in str(f)


def test_binomial_form_and_aggregated_rows_agree(one_factor):
    from scipy.special import gammaln

    rows = glmm.fit(one_factor, "correct ~ tom_order + (1 | model)", backend="laplace")
    assert rows.aggregated and rows.n_obs == 24 and rows.n_rows == 240
    cells = (one_factor.groupby(["model", "tom_order"], as_index=False)
             .agg(k=("correct", "sum"), n=("correct", "size")))
    binom = glmm.fit(cells, "k | trials(n) ~ tom_order + (1 | model)", backend="laplace")
    assert binom.family == "binomial" and rows.family == "bernoulli"
    assert binom.n_rows == binom.n_obs == 24 and binom.converged and rows.converged
    for k in ("beta", "se", "sd", "b"):
        np.testing.assert_allclose(getattr(rows, k), getattr(binom, k), rtol=1e-8,
                                   atol=1e-10, err_msg=k)
    # ℓ of 0/1 rows = ℓ of the cells without their binomial coefficients (lme4's logLik)
    k, n = cells["k"].to_numpy(float), cells["n"].to_numpy(float)
    log_c = np.sum(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))
    assert log_c > 10
    assert rows.loglik == pytest.approx(binom.loglik - log_c, abs=1e-8)
    assert rows.bic == pytest.approx(-2 * rows.loglik + np.log(240) * 3)
    assert abs(rows.beta[1] + 0.7) < 3 * rows.se[1]


def test_rejects_what_it_cannot_fit(crossed):
    with pytest.raises(ValueError, match="lme4-style formula models.*structural"):
        glmm.fit(crossed, "structural", backend="laplace")
    # random slopes go to lme4's general terms, which refuse a slope the data cannot support
    per_model = crossed.assign(z=crossed["model"].str[3:].astype(float))
    with pytest.raises(ValueError, match=r"'z' is constant within every level of 'model'"):
        glmm.fit(per_model, "correct ~ z + (1 + z | model)", backend="laplace")
    with pytest.raises(ValueError, match=r"sampler option\(s\) \['chains', 'seed'\]"):
        glmm.fit(crossed, FORMULA, backend="laplace", chains=2, seed=3)
    with pytest.raises(ValueError, match=r"does not take the option\(s\) \['priors'\]"):
        glmm.fit(crossed, FORMULA, backend="laplace", priors={"beta": glmm.normal(0, 1)})
    with pytest.raises(ValueError, match="se must be"):
        glmm.fit(crossed, FORMULA, backend="laplace", se="sandwich")
    with pytest.raises(ValueError, match="backend must be one of"):
        glmm.fit(crossed, FORMULA, backend="lme4")
    assert "laplace" in glmm.BACKENDS


def _stuck(monkeypatch) -> None:
    """Every fit of the engine reports no convergence."""
    import tomstats.glmm.lme as lme

    real = lme._solve
    monkeypatch.setattr(lme, "_solve", lambda *a, **k: dataclasses.replace(
        real(*a, **k), converged=np.asarray(False)))


def test_not_converged_warns(monkeypatch, one_factor):
    _stuck(monkeypatch)
    with pytest.warns(LaplaceConvergenceWarning, match="did not converge"):
        f = glmm.fit(one_factor, "correct ~ tom_order + (1 | model)", backend="laplace")
    assert not f.converged and "did not converge" in str(f)
    assert issubclass(LaplaceConvergenceWarning, glmm.DiagnosticsWarning)


def test_json_round_trip(tmp_path, fit_crossed):
    path = fit_crossed.to_json(tmp_path / "fit.json")
    d = json.loads(path.read_text())  # strict JSON
    assert d["backend"] == "laplace" and d["converged"] is True
    assert d["aic"] == pytest.approx(fit_crossed.aic)
    back = LaplaceFit.from_json(path)
    for f in dataclasses.fields(LaplaceFit):
        if f.name == "design":  # the data, kept in memory only
            assert back.design is None and fit_crossed.design is not None
            continue
        a, b = getattr(fit_crossed, f.name), getattr(back, f.name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=f.name)
        else:
            assert a == b, f.name
    pd.testing.assert_frame_equal(back.summary(), fit_crossed.summary())
    assert str(back) == str(fit_crossed)
    # non-finite numbers are written as null and read back as NaN
    nan = dataclasses.replace(fit_crossed, se=np.array([np.nan, 0.1]), converged=False)
    back = LaplaceFit.from_json(nan.to_json(tmp_path / "nan.json"))
    assert np.isnan(back.se[0]) and back.se[1] == 0.1 and not back.converged
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="field 'format' is None: not a maximum-likelihood fit"):
        LaplaceFit.from_json(tmp_path / "other.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        LaplaceFit.from_json(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        LaplaceFit.from_json(tmp_path / "missing.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "fit.json", "nan.json",
                                                          "other.json"]  # no temp files


def test_cli(tmp_path, capsys, monkeypatch, crossed, fit_crossed):
    from tomstats.cli import main

    csv = tmp_path / "log.csv"
    crossed.rename(columns={"correct": "is_correct"}).to_csv(csv, index=False)
    out = tmp_path / "fit.json"
    rc = main(["fit", str(csv), "--model", FORMULA, "--backend", "laplace", "--out", str(out),
               "--map", "correct=is_correct"])
    printed = capsys.readouterr().out
    assert rc == 0 and out.is_file()
    assert "Fixed effects:" in printed and "Random effects:" in printed
    assert printed.strip().splitlines()[-1] == f"wrote {out}"
    f = LaplaceFit.from_json(out)
    np.testing.assert_allclose(f.beta, fit_crossed.beta, rtol=1e-10)
    np.testing.assert_allclose(f.sd, fit_crossed.sd, rtol=1e-10)
    # refused before any work: the log does not even exist
    missing = tmp_path / "nope.csv"
    for args, msg in ((["--out", str(tmp_path / "fit.nc")], "ending in .json"),
                      (["--out", str(tmp_path / "x.json"), "--chains", "2"], "--chains")):
        rc = main(["fit", str(missing), "--model", FORMULA, "--backend", "laplace", *args])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and "nope.csv" not in err, err
    assert not (tmp_path / "fit.nc").exists() and not (tmp_path / "x.json").exists()
    rc = main(["fit", str(csv), "--model", "structural", "--backend",
               "laplace", "--out", str(tmp_path / "s.json"), "--map", "correct=is_correct"])
    err = capsys.readouterr().err
    assert rc == 2 and "lme4-style formula models" in err and "structural" in err, err
    assert "backend='laplace'" not in err  # the command line's syntax, not Python's
    assert not (tmp_path / "s.json").exists()
    # not converged: JSON written, exit 1, the last line says so
    _stuck(monkeypatch)
    bad = tmp_path / "bad.json"
    rc = main(["fit", str(csv), "--model", FORMULA, "--backend", "laplace", "--out", str(bad),
               "--map", "correct=is_correct"])
    err = capsys.readouterr().err
    assert rc == 4 and bad.is_file() and not LaplaceFit.from_json(bad).converged
    assert "did not converge" in err.strip().splitlines()[-1]
    # --allow-warnings: exit 0, still said on the last line; the existing --out needs --force
    args = ["fit", str(csv), "--model", FORMULA, "--backend", "laplace", "--out", str(bad),
            "--map", "correct=is_correct", "--allow-warnings"]
    assert main(args) == 2 and "pass --force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("tomstats fit: warning: the Laplace fit did not converge")


# ---------------------------------------------------------------- shapes of the compiled fit


def test_bucket_sizes_are_a_ladder():
    """q itself up to 8, then four sizes per doubling: at least q, at most 25 % more."""
    from tomstats.glmm.laplace import bucket_size

    sizes = [bucket_size(q) for q in range(1, 5000)]
    assert sizes[:8] == list(range(1, 9))
    assert all(b >= q and b <= 1.25 * q for q, b in enumerate(sizes, start=1))
    assert sizes == sorted(sizes)
    assert len(set(sizes)) < 60  # a few dozen programs cover every size up to 5,000
    assert [bucket_size(q) for q in (9, 41, 48, 49, 192, 7872)] == [10, 48, 48, 56, 192, 8192]


@pytest.mark.parametrize("layout", ["grid", "rows"])
def test_padding_to_bucket_shapes_changes_no_estimate(crossed, layout):
    """Padded rows (zero trials) and levels (no rows) leave every reported number as it was:
    9 × 50 grid → 10 × 56 (crossed reshapes); 720 rows of 4 × 60 levels with repeats: 64
    item levels of 12 rows (blocked by item)."""
    import jax

    from tomstats.glmm.laplace import laplace_fit
    from tomstats.glmm.lme_fit import TermShape, _plan

    if layout == "grid":
        X, y, codes = crossed_grid(9, 50, 3)
        levels = (9, 50)
    else:
        codes = np.column_stack([pd.factorize(crossed[c], sort=True)[0]
                                 for c in ("model", "item")])
        X = np.column_stack([np.ones(len(crossed)), crossed["x"].to_numpy()])
        y, levels = crossed["correct"].to_numpy(float), (4, 60)
    lay = _plan((codes[:, 0], codes[:, 1]), tuple(TermShape(1, q, True) for q in levels),
                bucket=True)
    assert [s.q for s in lay.shapes] == ([10, 56] if layout == "grid" else [4, 64])
    assert lay.rows == (560 if layout == "grid" else 768)
    assert lay.blocked and lay.crossed == (0 if layout == "grid" else -1)
    with jax.enable_x64(True):
        a = laplace_fit(X, y, None, codes, levels)
        b = laplace_fit(X, y, None, codes, levels, bucket=True)
    assert bool(a.converged) and bool(b.converged)
    assert int(a.iterations) == int(b.iterations)
    for f in ("beta", "se", "cov", "sd", "ranef", "loglik"):
        np.testing.assert_allclose(np.asarray(getattr(b, f)), np.asarray(getattr(a, f)),
                                   rtol=1e-9, atol=1e-10, err_msg=f)
    assert np.asarray(b.ranef).shape == (sum(levels),)


def test_a_fit_compiles_one_program(caplog):
    """``fit(backend="laplace")`` compiles the single fit and nothing else (no batching, no
    eager array operations, each of which would be an XLA program of its own)."""
    import logging

    import jax

    df = crossed_frame(7, 33, 5)  # shapes no other test compiles
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        f = glmm.fit(df, FORMULA, backend="laplace", engine="jax")
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert f.converged
    assert len(compiled) == 1 and "_fit_one" in compiled[0], compiled


def test_singular_fit_says_it_as_lme4_does(fit_crossed):
    """Every LLM answers exactly alike: the LLM variance is 0 at the maximum, and the summary
    says lme4's words, the term at the boundary, and the advice."""
    from tomstats.glmm.laplace_backend import SINGULAR_MESSAGE

    rng = np.random.default_rng(11)
    n_items = 40
    x = rng.normal(size=n_items)
    y_item = (rng.random(n_items) < 1 / (1 + np.exp(-(0.3 + x + rng.normal(0, 1, n_items)))))
    df = pd.DataFrame({"model": np.repeat(["a", "b", "c", "d"], n_items),
                       "item": np.tile([f"q{j:02d}" for j in range(n_items)], 4),
                       "x": np.tile(x, 4), "correct": np.tile(y_item.astype(int), 4)})
    f = glmm.fit(df, FORMULA, backend="laplace")
    assert f.singular and f.sd[0] < 1e-4 and f.sd[1] > 0.1
    text = str(f)
    assert SINGULAR_MESSAGE == "boundary (singular) fit: see help('isSingular')"
    assert SINGULAR_MESSAGE in text and "(1 | model): SD of (Intercept) ~ 0" in text
    assert "(1 | item)" not in f.singular_advice() and "drop the effect" in text
    assert not fit_crossed.singular and fit_crossed.singular_advice() == ""
    assert "singular" not in str(fit_crossed)
