"""Assurance from a Bayesian formula fit (``tomstats power --from-fit FIT.nc``): each study
simulated from one posterior draw and refitted by Laplace, as from a Laplace fit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.glmm._hints import InputError
from tomstats.glmm.lme import fit_lme
from tomstats.planning.from_fit import load_power_fit, power_from_fit
from tomstats.planning.from_posterior import posterior_fit

REF = Path(__file__).resolve().parents[1] / "reference"
SLOPES = "y ~ x + (1 + x | g)"
INTERCEPTS = "y ~ x + (1 | g)"


@pytest.fixture(scope="module")
def pilot() -> pd.DataFrame:
    """20 groups x 30 Bernoulli rows (the data of tests/reference/lme4_power.json)."""
    return pd.DataFrame(json.loads((REF / "lme4_power.json").read_text())["data"])


@pytest.fixture(scope="module")
def slopes_fit(pilot):
    return fit_lme(pilot, SLOPES)


@pytest.fixture(scope="module")
def intercepts_fit(pilot):
    return fit_lme(pilot, INTERCEPTS)


def posterior(df: pd.DataFrame, formula: str, beta: dict[str, np.ndarray],
              sd: np.ndarray, corr: np.ndarray | None = None, *, chains: int = 2,
              diverging: bool = False, columns: dict[str, str] | None = None,
              family: str | None = None):
    """An InferenceData laid out as ``tomstats.glmm.fit`` writes a formula fit of one term
    ``(... | g)``: draws (chain-major) of ``beta`` (by the Bayesian names, ``Intercept``),
    ``sd_g`` and ``corr_g``, the spec, data hash and column mapping of ``df``."""
    import arviz as az

    from tomstats.glmm.data import build_design, prepare_data
    from tomstats.glmm.provenance import data_hash, used_columns

    prepared = prepare_data(df, columns).reset_index(drop=True)
    spec, md = build_design(formula, prepared, family=family)
    names = list(beta)
    b = np.stack([beta[n] for n in names], axis=-1)
    S = b.shape[0]

    def shaped(v: np.ndarray) -> np.ndarray:
        return v.reshape((chains, S // chains) + v.shape[1:])

    effects = [str(e) for e in md.coords["g_effect"]]
    post = {"beta": shaped(b), "sd_g": shaped(sd)}
    dims = {"beta": ["coef"], "sd_g": ["g_effect"]}
    if corr is not None:
        post["corr_g"] = shaped(corr)
        dims["corr_g"] = ["g_effect", "g_effect2"]
    idata = az.from_dict(
        posterior=post, coords={"coef": names, "g_effect": effects, "g_effect2": effects},
        dims=dims,
        sample_stats={"diverging": np.full((chains, S // chains), diverging)},
        constant_data={f"data_{c}": prepared[c].to_numpy()
                       for c in used_columns(spec, prepared)})
    idata.posterior.attrs.update({
        "tomstats_glmm_format": "1", "model": formula, "model_kind": "formula",
        "spec": json.dumps(spec.to_dict()), "data_hash": data_hash(
            prepared, used_columns(spec, prepared)),
        "column_mapping": json.dumps(columns or {}), "backend": "numpyro", "seed": 0,
        "created_at": "2026-01-01T00:00:00+00:00"})
    return idata


def repeated(fit, df: pd.DataFrame, n: int = 4):
    """A posterior of ``n`` copies of the Laplace fit's parameters (its β, SDs and
    correlation from its Σ = T Tᵀ)."""
    S = fit.covariances()[0]
    sd = np.sqrt(np.diag(S))
    corr = S / np.outer(sd, sd) if len(sd) > 1 else None
    beta = {("Intercept" if k == "(Intercept)" else k): np.full(n, v)
            for k, v in zip(fit.coef_names, fit.beta, strict=True)}
    return posterior(df, fit.formula, beta, np.tile(sd, (n, 1)),
                     None if corr is None else np.tile(corr, (n, 1, 1)), family=fit.family)


COUNTS = ["n_sims", "n_valid", "n_failed", "n_singular", "null_n_sims", "null_n_valid",
          "null_n_failed", "null_n_singular"]


def test_one_repeated_draw_is_power_from_the_fit_with_those_parameters(slopes_fit, pilot):
    """(a) Every study takes the same draw: the same studies as the Laplace path, same seed,
    so the same rejections, study counts and estimates."""
    kw = dict(along={"g": [20, 26]}, n_sims=16, seed=5, chunk=8, progress=False)
    ml = power_from_fit(slopes_fit, "x", **kw)
    bayes = power_from_fit(repeated(slopes_fit, pilot), "x", data=pilot, **kw)
    assert ml.kind == "power" and bayes.kind == "assurance"
    a, b = ml.table, bayes.table
    assert "assurance" in b.columns and "power" not in b.columns
    np.testing.assert_array_equal(a["power"], b["assurance"])
    np.testing.assert_array_equal(a["null_power"], b["null_power"])
    pd.testing.assert_frame_equal(a[COUNTS], b[COUNTS])
    np.testing.assert_allclose(b["estimate"], a["estimate"], rtol=0, atol=1e-8)
    assert bayes.posterior["draws_used"] == bayes.posterior["draws_available"] == 4


def test_one_repeated_draw_compare_is_the_laplace_path(slopes_fit, pilot):
    """The same with a reduced model that drops the random slope: its type I error studies
    take each draw's Σ without the slope's row and column."""
    kw = dict(compare=INTERCEPTS, n_sims=8, seed=2, chunk=8, progress=False)
    ml = power_from_fit(slopes_fit, **kw)
    bayes = power_from_fit(repeated(slopes_fit, pilot), data=pilot, **kw)
    a, b = ml.table, bayes.table
    np.testing.assert_array_equal(a["power"], b["assurance"])
    np.testing.assert_array_equal(a["null_power"], b["null_power"])
    pd.testing.assert_frame_equal(a[COUNTS], b[COUNTS])
    assert bayes.df == ml.df == 2


def test_a_binomial_fit_is_the_laplace_path_too(pilot):
    """Binomial counts (``k | trials(n)``): one repeated draw, the Laplace path's studies."""
    agg = pilot.assign(xb=(pilot["x"] > 0).astype(int)).groupby(
        ["g", "xb"], as_index=False).agg(k=("y", "sum"), n=("y", "size"))
    fit = fit_lme(agg, "k | trials(n) ~ xb + (1 | g)", family="binomial")
    kw = dict(n_sims=10, seed=7, chunk=10, progress=False)
    ml = power_from_fit(fit, "xb", **kw)
    bayes = power_from_fit(repeated(fit, agg), "xb", data=agg, **kw)
    np.testing.assert_array_equal(ml.table["power"], bayes.table["assurance"])
    pd.testing.assert_frame_equal(ml.table[COUNTS], bayes.table[COUNTS])


def test_draws_become_lme4s_covariance_factors(slopes_fit, pilot):
    """θ of each draw gives back its Σ = D C D (TᵀT, lower triangular), in the Laplace fit's
    order of effects and coefficients, whatever the stored order."""
    rng = np.random.default_rng(1)
    n = 6
    sd = rng.uniform(0.2, 2.0, (n, 2))
    r = rng.uniform(-0.9, 0.9, n)
    corr = np.stack([[[1.0, v], [v, 1.0]] for v in r])
    beta = {"x": rng.normal(size=n), "Intercept": rng.normal(size=n)}  # stored reversed
    centre, draws = posterior_fit(posterior(pilot, SLOPES, beta, sd, corr), pilot)
    assert centre.coef_names == ("(Intercept)", "x")
    np.testing.assert_array_equal(draws.beta[:, 0], beta["Intercept"])
    T = draws.factors(centre.terms)[0]
    assert np.all(np.triu(T, 1) == 0) and np.all(T[:, [0, 1], [0, 1]] >= 0)
    sigma = sd[:, :, None] * corr * sd[:, None, :]
    np.testing.assert_allclose(T @ np.swapaxes(T, 1, 2), sigma, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(centre.theta, np.median(draws.theta, axis=0))
    np.testing.assert_allclose(centre.beta, [np.median(beta["Intercept"]),
                                             np.median(beta["x"])])
    _, thin = posterior_fit(posterior(pilot, SLOPES, beta, sd, corr), pilot, draws=3)
    assert thin.n_draws == 3 and thin.source["draws_available"] == 6
    # without data: the rows the fit stored (its constant_data), the same data hash
    _, own = posterior_fit(posterior(pilot, SLOPES, beta, sd, corr))
    np.testing.assert_array_equal(own.theta, draws.theta)


def test_half_null_half_huge_gives_the_mean_of_the_two(intercepts_fit, pilot):
    """(b) Half the draws put x at 0, half at 3 (power ≈ 1): assurance ≈ (type I error + 1)/2
    and the mean estimate ≈ 1.5, within Monte Carlo error; with x set to 0 in every draw,
    assurance is the type I error."""
    n = 40
    sd = np.sqrt(intercepts_fit.covariances()[0][0, 0])
    x = np.tile([0.0, 3.0], n // 2)
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.full(n, intercepts_fit.beta[0]),
                                          "x": x}, np.full((n, 1), sd))
    n_sims = 300
    res = power_from_fit(idata, "x", data=pilot, n_sims=n_sims, seed=3, chunk=50,
                         progress=False, allow_warnings=True)  # 40 draws: a low ESS
    row = res.table.iloc[0]
    assert row["n_valid"] == n_sims and row["null_n_valid"] == n_sims
    se = np.sqrt(0.25 / n_sims + row["null_power"] * (1 - row["null_power"]) / n_sims / 4)
    assert abs(row["assurance"] - (row["null_power"] + 1) / 2) < 4 * se
    assert 0.3 < row["assurance"] < 0.75  # neither all draws at 0 nor all at 3
    assert abs(row["estimate"] - 1.5) < 4 * 1.5 / np.sqrt(n_sims)
    assert abs(row["null_estimate"]) < 0.1  # the type I error run: x at 0 in every draw
    zero = power_from_fit(idata, "x", data=pilot, n_sims=100, seed=4, chunk=50,
                          set_effects={"x": 0.0}, type_one=False, progress=False,
                          allow_warnings=True)
    z = zero.table.iloc[0]
    assert z["assurance"] < 0.15 and abs(z["estimate"]) < 0.1
    assert zero.effects == {"x": 0.0}


def test_along_a_coefficient_sets_it_in_every_draw(intercepts_fit, pilot):
    """The varied coefficient takes the point's value in every draw (the rest is drawn):
    the estimates follow the point, not the posterior of x; the null studies are shared."""
    n = 10
    sd = np.sqrt(intercepts_fit.covariances()[0][0, 0])
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.full(n, intercepts_fit.beta[0]),
                                          "x": np.linspace(-3, 3, n)}, np.full((n, 1), sd))
    res = power_from_fit(idata, "x", data=pilot, along={"x": [0.0, 2.0]}, n_sims=40,
                         seed=6, chunk=40, progress=False, allow_warnings=True)
    t = res.table
    assert abs(t["estimate"].iloc[0]) < 0.15 and abs(t["estimate"].iloc[1] - 2.0) < 0.3
    assert t["assurance"].iloc[0] < 0.2 < 0.9 < t["assurance"].iloc[1]
    assert t["null_power"].nunique() == 1 and t["null_estimate"].nunique() == 1


def test_same_seed_same_assurance_other_seed_other_draws(intercepts_fit, pilot):
    n = 10
    sd = np.sqrt(intercepts_fit.covariances()[0][0, 0])
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.full(n, intercepts_fit.beta[0]),
                                          "x": np.linspace(-1, 1, n)}, np.full((n, 1), sd))
    kw = dict(data=pilot, n_sims=20, type_one=False, progress=False, allow_warnings=True)
    a = power_from_fit(idata, "x", seed=1, **kw)
    pd.testing.assert_frame_equal(a.table, power_from_fit(idata, "x", seed=1, **kw).table)
    assert a.table["estimate"].iloc[0] != power_from_fit(idata, "x", seed=2, **kw
                                                         ).table["estimate"].iloc[0]
    text = str(a)
    assert text.startswith("assurance of the wald test of x")
    assert "one of 10 posterior draws" in text and " power " not in text
    d = a.to_dict()
    assert d["kind"] == "assurance" and d["posterior"]["draws_used"] == 10
    assert d["posterior"]["data_hash"] == idata.posterior.attrs["data_hash"]
    assert "assurance" in d["rows"][0] and "power" not in d["rows"][0]


# --------------------------------------------------------------------------- bad input


def test_a_structural_fit_points_to_power_config_posterior(structural_fit, pilot):
    from tomstats.glmm.fitting import load_fit

    with pytest.raises(InputError, match="power CONFIG --posterior"):
        power_from_fit(load_fit(structural_fit), "x", data=pilot, progress=False)
    with pytest.raises(InputError, match="power CONFIG --posterior"):
        load_power_fit(structural_fit, "nowhere.csv")


def test_a_fit_that_failed_its_checks_needs_allow_warnings(slopes_fit, pilot):
    bad = repeated(slopes_fit, pilot)
    bad.sample_stats["diverging"][:] = True
    with pytest.raises(ValueError, match=r"failed its own checks \(divergences\)"):
        power_from_fit(bad, "x", data=pilot, n_sims=4, progress=False)
    res = power_from_fit(bad, "x", data=pilot, n_sims=4, type_one=False, progress=False,
                         allow_warnings=True)
    assert res.posterior["failed_checks"] == ["divergences"]
    assert "failed its own checks (divergences)" in str(res)


def test_a_model_the_laplace_path_cannot_refit(pilot):
    n = 4
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.zeros(n), "x": np.zeros(n)},
                      np.ones((n, 1)))
    spec = json.loads(idata.posterior.attrs["spec"])
    spec.update(formula="y ~ x + (1 | h)")  # a grouping column the log does not have
    idata.posterior.attrs["spec"] = json.dumps(spec)
    with pytest.raises(InputError, match=r"the Laplace path cannot refit its model "
                                         r"'y ~ x \+ \(1 \| h\)' to this log: .*'h'"):
        power_from_fit(idata, "x", data=pilot, progress=False)


def test_a_changed_model_is_not_the_fit_of_the_data(pilot):
    """A posterior whose model now reads other columns (here no group) was not fitted to
    this log as it stands: its data hash differs, and the message names the fit once."""
    n = 4
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.zeros(n), "x": np.zeros(n)},
                      np.ones((n, 1)))
    spec = json.loads(idata.posterior.attrs["spec"])
    spec.update(formula="y ~ x", random=[], noncentered=[])
    idata.posterior.attrs["spec"] = json.dumps(spec)
    with pytest.raises(InputError, match=r"^data: not the data the fit of 'y ~ x' was made"):
        power_from_fit(idata, "x", data=pilot, progress=False)


@pytest.mark.parametrize("change, message", [
    (lambda p: p.drop_vars("sd_g"), "the posterior lacks 'sd_g'"),
    (lambda p: p.assign(sd_g=p["sd_g"] * np.nan), "'sd_g' are not all finite"),
    (lambda p: p.assign(sd_g=-p["sd_g"]), "negative standard deviations"),
    (lambda p: p.assign_coords(coef=["Intercept", "z"]), "are not the Laplace fit's"),
])
def test_malformed_draws_are_one_line(pilot, change, message):
    n = 4
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.zeros(n), "x": np.zeros(n)},
                      np.ones((n, 1)))
    attrs = dict(idata.posterior.attrs)
    idata.posterior = change(idata.posterior).assign_attrs(attrs)
    with pytest.raises(InputError, match=message):
        power_from_fit(idata, "x", data=pilot, progress=False)


def test_another_log_a_formula_in_the_file_and_draws_are_checked(pilot):
    n = 4
    idata = posterior(pilot, INTERCEPTS, {"Intercept": np.zeros(n), "x": np.zeros(n)},
                      np.ones((n, 1)))
    with pytest.raises(InputError, match="not the data the fit"):
        power_from_fit(idata, "x", data=pilot.assign(y=1 - pilot["y"]), progress=False)
    with pytest.raises(InputError, match="draws must be an integer >= 1"):
        power_from_fit(idata, "x", data=pilot, draws=0, progress=False)
    spec = json.loads(idata.posterior.attrs["spec"])
    spec["formula"] = "y ~ __import__('os').system('x') + (1 | g)"
    idata.posterior.attrs["spec"] = json.dumps(spec)
    with pytest.raises(InputError, match="not a tomstats Bayesian fit"):
        power_from_fit(idata, "x", data=pilot, progress=False)


# --------------------------------------------------------------------------- command line


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """``tomstats ARGS`` in this process, in ``tmp_path``: (exit code, stdout, stderr)."""
    from tomstats.cli import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_cli_assurance_and_refusals(intercepts_fit, pilot, tmp_path, structural_fit, cli):
    """(d) The file's column mapping is applied to the log, which is read with the fit's
    columns only (an extra column would change the data hash otherwise)."""
    n = 6
    sd = np.sqrt(intercepts_fit.covariances()[0][0, 0])
    log = pilot.rename(columns={"y": "ok"}).assign(tom_order=np.arange(len(pilot)) % 3)
    log.to_csv(tmp_path / "log.csv", index=False)
    idata = posterior(log[["ok", "x", "g"]], INTERCEPTS,
                      {"Intercept": np.full(n, intercepts_fit.beta[0]),
                       "x": np.full(n, 0.5)}, np.full((n, 1), sd), columns={"y": "ok"})
    idata.to_netcdf(str(tmp_path / "bayes.nc"))
    run = ("power", "--data", "log.csv", "--term", "x", "--replicates", "10")
    code, out, err = cli(*run, "--from-fit", "bayes.nc", "--draws", "3", "--out", "out")
    assert code == 0, err
    assert "assurance of the wald test of x" in out
    assert "one of 3 posterior draws of bayes.nc (of 6)" in out
    js = json.loads((tmp_path / "out" / "power.json").read_text())
    assert js["kind"] == "assurance" and js["posterior"]["file"] == "bayes.nc"
    assert js["posterior"]["file_sha256"] == hashlib.sha256(
        (tmp_path / "bayes.nc").read_bytes()).hexdigest()
    assert "assurance" in pd.read_csv(tmp_path / "out" / "power.csv").columns
    # refusals: one line, exit 2, nothing written
    bad = idata.copy()
    bad.sample_stats["diverging"][:] = True
    bad.to_netcdf(str(tmp_path / "bad.nc"))
    pilot.assign(y=1 - pilot["y"]).rename(columns={"y": "ok"}).to_csv(
        tmp_path / "other.csv", index=False)
    for args, message in (
            (["--from-fit", str(structural_fit)], "power CONFIG --posterior"),
            (["--from-fit", "bad.nc"], "failed its own checks (divergences)"),
            (["--from-fit", "bayes.nc", "--draws", "0"], "draws must be an integer >= 1"),
            (["--from-fit", "bayes.nc", "--data", "other.csv"], "not the data the fit"),
    ):
        code, out, err = cli(*run, *args, "--out", "no")
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
    code, out, err = cli(*run, "--from-fit", "bad.nc", "--allow-warnings", "--out", "warned")
    assert code == 0 and "failed its own checks (divergences)" in out


def test_cli_a_laplace_fit_of_a_log_with_more_columns(pilot, tmp_path, cli):
    """`tomstats fit` reads the formula's columns only; power reads the same, so the data
    hash matches even when the log holds standard columns the formula does not use."""
    pilot.assign(tom_order=np.arange(len(pilot)) % 3).to_csv(tmp_path / "log.csv",
                                                              index=False)
    code, _, err = cli("fit", "log.csv", "--model", INTERCEPTS, "--backend", "laplace",
                       "--out", "fit.json")
    assert code == 0, err
    run = ("power", "--from-fit", "fit.json", "--data", "log.csv", "--term", "x")
    code, out, err = cli(*run, "--replicates", "4", "--out", "out")
    assert code == 0, err
    code, out, err = cli(*run, "--draws", "3", "--out", "no")
    assert code == 2 and "--draws applies to a Bayesian fit" in err


# --------------------------------------------------------------------------- a real fit, docs

#: The commands of docs/power-from-fit.md's assurance section (in the folder of pilot.csv).
DOCS_FIT = ("fit", "pilot.csv", "--model", SLOPES, "--backend", "numpyro", "--chains", "4",
            "--draws", "1000", "--tune", "1000", "--seed", "1", "--out", "fit.nc")
DOCS_LAPLACE = ("fit", "pilot.csv", "--model", SLOPES, "--backend", "laplace", "--out",
                "fit.json")
DOCS_RUN = ("--data", "pilot.csv", "--term", "x", "--along", "g=20,40", "--replicates", "200",
            "--seed", "4")


@pytest.fixture(scope="session")
def docs_runs(tmp_path_factory) -> dict[str, dict]:
    """The page's commands run in a fresh folder: a real NUTS fit of the pilot log, its
    assurance, and the power at the Laplace fit of the same log (power.json of each)."""
    import os

    import arviz as az

    from tomstats.cli import main

    folder = tmp_path_factory.mktemp("assurance_docs")
    pd.DataFrame(json.loads((REF / "lme4_power.json").read_text())["data"]).to_csv(
        folder / "pilot.csv", index=False)
    here = Path.cwd()
    os.chdir(folder)
    try:
        for args in (DOCS_FIT, DOCS_LAPLACE,
                     ("power", "--from-fit", "fit.nc", *DOCS_RUN, "--out", "assurance"),
                     ("power", "--from-fit", "fit.json", *DOCS_RUN, "--out", "power")):
            assert main(list(args)) == 0, args
    finally:
        os.chdir(here)
    fit_hash = az.from_netcdf(str(folder / "fit.nc")).posterior.attrs["data_hash"]
    return {k: json.loads((folder / k / "power.json").read_text()) | {"fit_hash": fit_hash}
            for k in ("assurance", "power")}


@pytest.mark.slow
def test_cli_end_to_end_on_a_real_bayesian_fit(docs_runs):
    """(d) A NUTS fit that passed its checks: every draw sampled from, provenance kept, the
    Laplace fit's power beside it on the same design points."""
    a, p = docs_runs["assurance"], docs_runs["power"]
    assert a["kind"] == "assurance" and p["kind"] == "power"
    src = a["posterior"]
    assert src["file"] == "fit.nc" and src["failed_checks"] == []
    assert src["draws_used"] == src["draws_available"] == 4000
    assert src["data_hash"] == a["fit_hash"] and src["backend"] == "numpyro"
    for rows in (a["rows"], p["rows"]):
        assert [r["g"] for r in rows] == [20, 40]
        assert all(r["n_valid"] == r["null_n_valid"] == 200 for r in rows)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


@pytest.mark.slow
def test_docs_assurance_numbers_are_the_commands(docs_runs):
    from .test_from_fit import _page_table

    head = ["groups", "power (%)", "95 % CI", "assurance (%)", "95 % CI",
            "type I error (%), power / assurance"]
    rows = [head]
    for ra, rp in zip(docs_runs["assurance"]["rows"], docs_runs["power"]["rows"],
                      strict=True):
        rows.append([str(ra["g"]), _pct(rp["power"]),
                     f"{_pct(rp['ci_low'])}–{_pct(rp['ci_high'])}", _pct(ra["assurance"]),
                     f"{_pct(ra['ci_low'])}–{_pct(ra['ci_high'])}",
                     f"{_pct(rp['null_power'])} / {_pct(ra['null_power'])}"])
    assert _page_table("<!-- table: assurance -->") == rows


@pytest.mark.parametrize("formula", [INTERCEPTS, SLOPES])
def test_cli_a_python_fit_of_the_whole_log_frame(pilot, tmp_path, cli, formula):
    """A fit made in Python on the log's whole frame hashes the standard columns it had
    (here tom_order): power reads the whole log then, so that workflow works too."""
    from tomstats.glmm.lme import fit_lme

    log = pilot.assign(tom_order=np.arange(len(pilot)) % 3)
    log.to_csv(tmp_path / "log.csv", index=False)
    fit_lme(log, formula).to_json(tmp_path / "fit.json")
    code, out, err = cli("power", "--from-fit", "fit.json", "--data", "log.csv", "--term", "x",
                         "--replicates", "4", "--out", "out")
    assert code == 0, err
    # another log is still refused, naming the hash
    log.assign(x=log["x"][::-1].to_numpy()).to_csv(tmp_path / "other.csv", index=False)
    code, out, err = cli("power", "--from-fit", "fit.json", "--data", "other.csv", "--term",
                         "x", "--replicates", "4", "--out", "out2")
    assert code == 2 and "data hash differs" in err and not (tmp_path / "out2").exists()
