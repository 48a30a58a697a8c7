"""``tomstats report``: simulation and fit reports, their content, and bad input."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from _report_data import make_fit, save_fit, write_simulation_dir

from tomstats.cli import main
from tomstats.report import fit as R
from tomstats.report._document import Check, Verdict, write_document
from tomstats.report.simulation import simulation_document, write_simulation_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMG_SRC = re.compile(r'<img src="([^"]*)"')


def _assert_self_contained(html: str, n_images: int) -> None:
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert not re.search(r'(src|href)="(https?:)?//', html)
    srcs = IMG_SRC.findall(html)
    assert len(srcs) == n_images
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_MAGIC


# --------------------------------------------------------------------------- simulation


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_simulation_dir(tmp_path_factory.mktemp("sim") / "out")


def test_simulation_html(sim_dir: Path, tmp_path: Path) -> None:
    out = write_simulation_report(sim_dir, tmp_path / "r.html")
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(html, 5)
    t1 = pd.read_csv(sim_dir / "table1.csv").set_index("factor")
    # measured Table 1 beside the paper's values
    assert f"{t1.loc['tom_order', 'pct_total']:.4g}" in html
    for paper in ("22.4", "1155", "0.236", "73"):
        assert f"<td class=\"num\">{paper}</td>" in html
    # seed, parameters and replicates shown
    assert "seed 0" in html and "7.5e-05" in html and "20 replicates" in html
    # the synthetic ToM share (21.57 %) lies outside 22.4 ± 0.6: the verdict says FAIL
    assert 'data-verdict="FAIL"' in html
    assert html.index('id="verdict"') < html.index("Table 1")


def test_simulation_verdict_bands(sim_dir: Path, tmp_path: Path) -> None:
    d = write_simulation_dir(tmp_path / "inband")
    t1 = pd.read_csv(d / "table1.csv").set_index("factor")
    t1.loc[["tom_order", "context_length", "interaction"], "pct_total"] = [22.9, 3.7, 0.31]
    t1.reset_index().to_csv(d / "table1.csv", index=False)
    verdict = simulation_document(d).sections[0].blocks[0]
    assert isinstance(verdict, Verdict)
    assert [c.passed for c in verdict.checks] == [True, True, True, True]
    assert verdict.label == "PASS"
    # the interaction outside 0.5 ± 0.2 is the paper's own inconsistency: shown, not graded
    t1.loc["interaction", "pct_total"] = 0.71
    t1.reset_index().to_csv(d / "table1.csv", index=False)
    verdict = simulation_document(d).sections[0].blocks[0]
    assert [c.passed for c in verdict.checks] == [True, True, None, True]
    assert "known inconsistency of the paper" in verdict.checks[2].detail
    assert verdict.label == "PASS"
    t1.loc["context_length", "pct_total"] = 4.7  # just outside 4.1 ± 0.5
    t1.reset_index().to_csv(d / "table1.csv", index=False)
    verdict = simulation_document(d).sections[0].blocks[0]
    assert [c.passed for c in verdict.checks] == [True, False, None, True]
    assert verdict.label == "FAIL"


def test_simulation_markdown(sim_dir: Path, tmp_path: Path) -> None:
    out = write_simulation_report(sim_dir, tmp_path / "md", fmt="md")
    assert out == tmp_path / "md" / "report.md"
    text = out.read_text(encoding="utf-8")
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert refs == [f"fig{i}.png" for i in range(1, 6)]
    for r in refs:
        assert (out.parent / r).read_bytes()[:8] == PNG_MAGIC
    assert "| ToM order |" in text and "**FAIL**" in text


def test_simulation_cli(sim_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "--simulation", str(sim_dir), "--out", str(tmp_path / "a.html")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "a.html").stat().st_size > 50_000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--simulation", "{tmp}/missing"], "does not exist or is not a folder"),
        (["--simulation", "{tmp}/empty"], "is not a tomstats reproduce output"),
        (["--simulation", "{sim}", "--out", "{tmp}/no/such/dir/r.html"],
         "--out: folder '{tmp}/no/such/dir' of"),
        (["--simulation", "{sim}", "--out", "{tmp}"], "is a directory, expected a file path"),
        (["--simulation", "{sim}", "--format", "md", "--out", "{tmp}/file.txt"],
         "exists and is not a folder"),
        (["{tmp}/fit.nc", "--simulation", "{sim}"], "give exactly one of FIT.nc or --simulation"),
        (["{tmp}/missing.nc"], "FIT: '{tmp}/missing.nc' does not exist"),
        (["{sim}"], "is a folder, expected a fit netCDF file"),
        (["{tmp}/file.txt"], "is not a readable netCDF InferenceData file"),
        (["{tmp}/plain.nc"], "has no 'posterior' group"),
        (["--simulation", "{tmp}/halfsweep"], "calibrated sweep folder '{tmp}/halfsweep' is "
         "incomplete: missing ['dominance_posterior.csv', 'summary.json']"),
        (["{tmp}/plain.nc", "--sweep-draws", "-1"],
         "--sweep-draws must be a non-negative integer, got -1"),
        (["--simulation", "{sim}", "--sweep-draws", "5"], "--sweep-draws applies to a fit"),
    ],
)
def test_report_bad_input(sim_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                          argv: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("not a netCDF file\n")
    (tmp_path / "halfsweep").mkdir()
    (tmp_path / "halfsweep" / "decomposition_posterior.csv").write_text("llm,source\n")
    save_fit(xr.Dataset({"y": ("obs", np.arange(3.0))}), tmp_path / "plain.nc")
    args = [a.format(tmp=tmp_path, sim=sim_dir) for a in argv]
    assert main(["report", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tomstats report: error: ")
    assert message.format(tmp=tmp_path) in err
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob(".*.tmp"))


# --------------------------------------------------------------------------- fit


@pytest.fixture(scope="module")
def fit_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    # a foreign InferenceData (no tomstats format attribute): the fit file reader refuses it
    # (tests/glmm/test_fit_loader.py), the document is built from it in memory
    out = tmp_path_factory.mktemp("fitreport") / "report.html"
    write_document(R.fit_document(make_fit(seed=1), "fit.nc"), out)
    return out.read_text(encoding="utf-8")


def test_fit_html_sections(fit_html: str) -> None:
    # forest, caterpillar, predictions, calibration, densities, trace, rank, energy
    _assert_self_contained(fit_html, 8)
    order = ['id="verdict"', "Intervals on this page", ">Parameters<", "Forest plot",
             "Random effects", "Predicted accuracy by condition", "Posterior predictive checks",
             "Pareto k diagnostic", "Priors and posteriors", "Sampler plots",
             "Model, data and provenance"]
    pos = [fit_html.index(s) for s in order]
    assert pos == sorted(pos)
    assert fit_html.count("Intervals on this page") == 1  # the convention is stated once
    for attr in ("data_hash", "model", "backend", "tomstats_version"):
        assert f"<td>{attr}</td>" in fit_html
    assert "<td>structural</td>" in fit_html and "<td>numpyro</td>" in fit_html
    # per-LLM rows in the summary table: readable name beside the name in the fit
    assert "<td>capability llama-b</td><td>capability[llama-b]</td>" in fit_html
    assert '<td>design cells (context × ToM)</td><td class="num">15</td>' in fit_html
    # the only missing part: the synthetic fit was not written by tomstats.glmm.fit, so
    # the calibrated sweep cannot read its spec, and the report says so
    missing = re.findall(r'<p class="missing">([^<]*)</p>', fit_html)
    assert len(missing) == 1 and "No calibrated sweep" in missing[0]
    assert "not a tomstats GLMM fit" in missing[0]


def test_fit_markdown(tmp_path: Path) -> None:
    idata = make_fit(seed=2, groups=())
    out = write_document(R.fit_document(idata, "bare.nc"), tmp_path / "md", "md")
    text = out.read_text(encoding="utf-8")
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert refs == ["forest.png", "caterpillar_capability.png", "densities.png", "trace.png",
                    "rank.png", "energy.png"]
    assert all((out.parent / r).is_file() for r in refs)
    # the missing groups are named, not silently skipped
    assert "No 'prior' group" in text
    assert "No 'posterior_predictive' group with 'correct'" in text
    assert "No 'log_likelihood' group" in text


def test_verdict_flags_divergences_and_rhat() -> None:
    idata = make_fit(seed=3, diverging=3)
    # shift one chain of one capability element: R-hat must name that element
    cap = idata.posterior["capability"]
    cap.loc[{"chain": 1, "llm_level": "llama-b"}] = cap.sel(chain=1, llm_level="llama-b") + 0.5
    v = R.diagnostics_verdict(idata)
    by = {c.name: c for c in v.checks}
    assert v.label == "FAIL"
    assert by["divergences"].passed is False and by["divergences"].value == "3"
    assert by["R-hat"].passed is False
    assert "capability[llama-b]" in by["R-hat"].detail
    assert "capability[gpt-a]" not in by["R-hat"].detail
    assert by["tree depth"].passed is True
    assert by["E-BFMI"].passed is True


def test_verdict_tree_depth_and_ebfmi() -> None:
    idata = make_fit(seed=4)
    idata.sample_stats["reached_max_treedepth"][0, :5] = True
    # energy as a slow random walk: E-BFMI ≈ 0
    walk = np.cumsum(np.random.default_rng(0).normal(size=idata.sample_stats["energy"].shape),
                     axis=1)
    idata.sample_stats["energy"].values[:] = walk
    by = {c.name: c for c in R.diagnostics_verdict(idata).checks}
    assert by["tree depth"].passed is False and by["tree depth"].value == "5"
    assert by["E-BFMI"].passed is False and "chain 0" in by["E-BFMI"].detail


def test_verdict_unknown_without_stats() -> None:
    idata = make_fit(seed=5)
    del idata.sample_stats["diverging"]
    by = {c.name: c for c in R.diagnostics_verdict(idata).checks}
    assert by["divergences"].passed is None and "no 'diverging'" in by["divergences"].detail
    assert by["R-hat"].passed is not None
    del idata.sample_stats  # fallback checks: every sampler statistic is n/a
    by = {c.name: c for c in R.diagnostics_verdict(idata).checks}
    assert [by[k].passed for k in ("divergences", "tree depth", "E-BFMI")] == [None] * 3
    assert by["bulk ESS"].passed is not None


def test_fallback_tree_depth() -> None:
    idata = make_fit(seed=8)
    del idata.sample_stats["reached_max_treedepth"]  # depth vs the max_tree_depth attribute
    idata.sample_stats["tree_depth"][1, :2] = 10
    checks = {c.name: c for c in R._fallback_checks(idata)}
    assert checks["tree depth"].passed is False
    assert checks["tree depth"].value == "2 draws at depth 10"


def test_verdict_states() -> None:
    ok, bad, na = (Check("a", s, "", "") for s in (True, False, None))
    assert Verdict("t", (ok, na)).label == "PASS"
    assert Verdict("t", (ok, bad, na)).label == "FAIL"
    assert Verdict("t", (na,)).label == "UNKNOWN"


def test_calibration_table_matches_wilson() -> None:
    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(0)
    p_hat = rng.random(2000)
    y = (rng.random(2000) < p_hat).astype(float)
    tab = R.calibration_table(y, p_hat, bins=10)
    assert tab["n"].sum() == 2000
    for _, r in tab.iterrows():
        m = (p_hat >= r.bin_low) & (p_hat < r.bin_high)
        assert r.n == m.sum()
        assert r.observed == pytest.approx(y[m].mean())
        lo, hi = proportion_confint(y[m].sum(), m.sum(), method="wilson")
        assert (r.observed_low, r.observed_high) == pytest.approx((lo, hi), rel=1e-6)
    # a well-calibrated predictor: every bin's interval covers its mean prediction but a few
    assert ((tab.observed_low <= tab.predicted) & (tab.predicted <= tab.observed_high)).sum() >= 8


def test_cell_accuracy_table() -> None:
    rng = np.random.default_rng(1)
    ctx = np.repeat([200, 5000], 50)
    tom = np.tile([0, 1], 50)
    y = rng.integers(0, 2, 100).astype(float)
    y_rep = rng.integers(0, 2, (300, 100)).astype(float)
    tab = R.cell_accuracy_table(y, y_rep, ctx, tom)
    ref = pd.DataFrame({"c": ctx, "t": tom, "y": y}).groupby(["c", "t"]).y.mean()
    np.testing.assert_allclose(tab.observed, ref.to_numpy())
    assert list(tab.n) == [25, 25, 25, 25]
    m = (ctx == 5000) & (tom == 1)
    draws = y_rep[:, m].mean(axis=1)
    row = tab[(tab.context_length == 5000) & (tab.tom_order == 1)].iloc[0]
    assert row.predicted == pytest.approx(draws.mean())
    assert row.predicted_low == pytest.approx(np.quantile(draws, 0.025))


def test_loo_table_counts() -> None:
    idata = make_fit(seed=1)
    est, ktab = R.loo_tables(idata)
    n_obs = idata.observed_data["correct"].size
    assert ktab["count"].sum() == n_obs
    assert ktab["share"].sum() == pytest.approx(1.0)
    # readable bin edges: two decimals, never ArviZ's raw good_k (e.g. "0.697064")
    for label in ktab["Pareto k"]:
        assert all(len(x.split(".")[1]) == 2 for x in re.findall(r"\d+\.\d+", label)), label
    assert ktab["Pareto k"].iloc[0] == "(−∞, 0.50]" and ktab["Pareto k"].iloc[-1] == "(1.00, ∞)"
    elpd = float(est.set_index("quantity").loc["elpd_loo", "value"])
    # elpd_loo of Bernoulli data lies between n·log(min p) and 0
    assert -n_obs * np.log(2) * 2 < elpd < 0


def test_no_provenance_is_stated(tmp_path: Path) -> None:
    idata = make_fit(seed=6, provenance=False)
    doc = R.fit_document(idata)
    assert doc.sections[-1].title == "Model, data and provenance"  # provenance comes last
    blocks = doc.sections[-1].blocks
    assert blocks[0].kind == "missing" and "no tomstats provenance" in blocks[0].text


def test_nonbinary_outcome_stated() -> None:
    idata = make_fit(seed=7)
    idata.observed_data["correct"].values[:] = 2
    from tomstats.report.sections import FitContext
    from tomstats.report.sections.checks import ppc_section

    text = " ".join(b.text for b in ppc_section(FitContext(idata)).blocks)
    assert "is not binary" in text


# --------------------------------------------------------------------------- structural fits


SWEEP_TITLE = "Calibrated η² decomposition and ToM-dominance map"


@pytest.fixture(scope="module")
def structural_fit():
    """A small real structural fit (2 LLMs × 60 answers, 2 chains × 150 draws; ~30 s)."""
    import warnings

    from _report_data import structural_log

    import tomstats.glmm as glmm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glmm.DiagnosticsWarning)
        return glmm.fit(structural_log(seed=0), "structural", chains=2, draws=150, tune=150,
                        seed=1, progress=False)


@pytest.fixture(scope="module")
def sweep(structural_fit):
    from tomstats.report.posterior_sweep import calibrated_sweep

    # the report's default budget per draw, fewer draws
    return calibrated_sweep(structural_fit, draws=20)


def _section(doc, title: str):
    return next(s for s in doc.sections if s.title == title)


def test_structural_fit_report_has_calibrated_section(structural_fit, sweep, tmp_path):
    from tomstats.report._document import Image, Table, render_html
    from tomstats.report.posterior_sweep import eta2_table

    doc = R.fit_document(structural_fit, "small.nc", sweep_draws=20)
    titles = [s.title for s in doc.sections]
    assert titles.index("Leave-one-out cross-validation (PSIS-LOO)") < titles.index(SWEEP_TITLE)
    blocks = _section(doc, SWEEP_TITLE).blocks
    assert [b.name for b in blocks if isinstance(b, Image)] == ["calibrated_eta2",
                                                                 "calibrated_dominance"]
    eta, per_llm = (b.frame for b in blocks if isinstance(b, Table))
    # 2 LLMs × (ToM, context, interaction), numbers finite and intervals ordered
    assert list(eta["LLM"]) == ["llm-a"] * 3 + ["llm-b"] * 3
    assert list(eta["source"]) == ["ToM order", "Context length", "Interaction"] * 2
    num = eta.drop(columns=["LLM", "source"]).to_numpy(dtype=float)
    assert np.isfinite(num).all()
    assert (eta["95 % low"] <= eta["η² (mean)"]).all()
    assert (eta["η² (mean)"] <= eta["95 % high"]).all()
    assert (eta["95 % low"] >= 0).all() and (eta["95 % high"] <= 1).all()
    assert (eta["predictive 2.5 %"] <= eta["predictive 97.5 %"]).all()
    assert ((eta["% low"] <= eta["% of systematic"])
            & (eta["% of systematic"] <= eta["% high"])).all()
    # per LLM: the ToM share agrees with the decomposition's ToM rows (two code paths)
    tom = eta[eta["source"] == "ToM order"].set_index("LLM")["% of systematic"]
    np.testing.assert_allclose(per_llm.set_index("LLM")["ToM % of systematic"], tom,
                               rtol=1e-6)  # float32 sums in two orders
    assert per_llm["P(ToM dominant)"].between(0, 1).all()
    # same draws, seed and budget as `sweep`: the report shows exactly its numbers
    np.testing.assert_allclose(num, eta2_table(sweep[0]).drop(columns=["LLM", "source"])
                               .to_numpy(dtype=float))
    text = " ".join(b.text for b in blocks if hasattr(b, "text"))
    assert "20 of 300 posterior draws" in text
    assert "--posterior small.nc --draws 200" in text
    html = render_html(doc)
    assert f'<h2 id="calibrated-decomposition-and-tom-dominance-map">{SWEEP_TITLE}</h2>' \
        in html
    assert html.index("Pareto k diagnostic") < html.index(SWEEP_TITLE)


def test_sweep_dominance_map_numbers(sweep) -> None:
    _, dom, summary = sweep
    assert len(dom) == 49
    assert np.isfinite(dom[["tom_share_mean", "tom_share_low", "tom_share_high",
                            "p_dominant"]].to_numpy()).all()
    assert ((dom.tom_share_low <= dom.tom_share_mean)
            & (dom.tom_share_mean <= dom.tom_share_high)).all()
    assert dom.p_dominant.between(0, 1).all()
    # P(share > 0.5) is near 1 where even the 2.5 % quantile is above 0.5, near 0 where the
    # 97.5 % one is below: a linearly interpolated q-quantile of n draws lies between the
    # sorted draws f and f + 1, f = floor((n - 1) q), so below 0.5 it leaves at most
    # n - 1 - f draws above 0.5 (at most 1 of 20 at q = 0.975), above 0.5 at least n - 1 - f
    n = 20
    bound = (n - 1 - np.floor((n - 1) * np.array([0.025, 0.975]))) / n
    assert (dom.loc[dom.tom_share_low > 0.5, "p_dominant"] >= bound[0]).all()
    assert (dom.loc[dom.tom_share_high < 0.5, "p_dominant"] <= bound[1]).all()
    nd = summary["dominance"]["n_dominant"]
    assert nd["low"] <= nd["mean"] <= nd["high"] <= 49


def test_formula_fit_skips_sweep_with_reason(structural_fit) -> None:
    import arviz as az

    from tomstats.report.posterior_sweep import fit_sweep_blocks

    post = structural_fit.posterior.copy()
    post.attrs = {**post.attrs, "model_kind": "formula",
                  "model": "correct ~ tom_order + (1 | model)"}
    blocks = fit_sweep_blocks(az.InferenceData(posterior=post))
    assert len(blocks) == 1 and blocks[0].kind == "note"
    assert "formula model 'correct ~ tom_order + (1 | model)'" in blocks[0].text
    assert "need a structural fit" in blocks[0].text
    none = fit_sweep_blocks(structural_fit, draws=0)
    assert none[0].kind == "note" and "left out" in none[0].text


def test_calibrated_sweep_folder_report(sweep, tmp_path: Path) -> None:
    import json

    decomp, dom, summary = sweep
    d = tmp_path / "calibrated"
    d.mkdir()
    decomp.to_csv(d / "decomposition_posterior.csv", index=False)
    dom.to_csv(d / "dominance_posterior.csv", index=False)
    summary = {**summary, "fit": {**summary["fit"], "path": "small.nc"}}
    (d / "summary.json").write_text(json.dumps(summary, default=float))
    out = write_simulation_report(d, tmp_path / "sweep.html")
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(html, 2)
    assert "tomstats calibrated sweep report" in html and SWEEP_TITLE in html
    assert "structural fit small.nc: 20 of 300 draws" in html
    tom_a = decomp[(decomp.llm == "llm-a") & (decomp.source == "tom_order")].iloc[0]
    assert f'<td class="num">{tom_a.eta2_mean:.3g}</td>' in html
    md = write_simulation_report(d, tmp_path / "md", fmt="md").read_text(encoding="utf-8")
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md) == ["calibrated_eta2.png",
                                                          "calibrated_dominance.png"]


# --------------------------------------------------------------------------- power


@pytest.fixture(scope="module")
def power_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tomstats
    from tomstats.planning.result import write_power
    from tomstats.simulation.study import StudyConfig

    res = tomstats.power(StudyConfig(), along={"questions_per_cell": [10, 40, 160]},
                         tests=["anova:interaction", "anova:tom_order"], replicates=40,
                         seed=3, progress=False)
    out = tmp_path_factory.mktemp("power") / "pw"
    write_power(res, out)
    return out


def test_power_folder_report(power_dir: Path, tmp_path: Path) -> None:
    out = write_simulation_report(power_dir, tmp_path / "p.html")
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(html, 1)
    assert "Power analysis" in html and "smallest questions_per_cell reaching 80%" in html
    frame = pd.read_csv(power_dir / "power.csv")
    # every test of the run appears in the table with its estimate as the report prints it
    for _, row in frame.iterrows():
        assert row["test"] in html
    assert f"{frame['power'].iloc[-1]:.3g}" in html


def test_simulation_report_gains_power_section(sim_dir: Path, power_dir: Path,
                                               tmp_path: Path) -> None:
    import shutil

    sim = tmp_path / "sim"
    shutil.copytree(sim_dir, sim)
    before = write_simulation_report(sim, tmp_path / "a.html").read_text(encoding="utf-8")
    assert "Power analysis" not in before
    shutil.copytree(power_dir, sim / "power")
    after = write_simulation_report(sim, tmp_path / "b.html").read_text(encoding="utf-8")
    _assert_self_contained(after, 6)
    assert "Power analysis" in after and after.index("Figures") < after.index("Power analysis")
    md = write_simulation_report(sim, tmp_path / "md", fmt="md").read_text(encoding="utf-8")
    assert "## Power analysis" in md and "![power](power.png)" in md


def test_power_report_with_a_second_dimension(tmp_path: Path) -> None:
    import tomstats
    from tomstats.planning.result import write_power
    from tomstats.simulation.study import StudyConfig

    res = tomstats.power(StudyConfig(), along={"questions_per_cell": [10, 40]},
                         by={"n_llms": [3, 6]}, tests=["rm-anova:interaction"],
                         replicates=30, seed=2, progress=False)
    write_power(res, tmp_path / "pw")
    html = write_simulation_report(tmp_path / "pw", tmp_path / "p.html").read_text(
        encoding="utf-8")
    _assert_self_contained(html, 1)
    assert "one panel per test, one line per n llms" in html
    assert "<th>n_llms</th>" in html  # the targets and power tables name the second dimension
