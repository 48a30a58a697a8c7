"""The fit report's sections (:mod:`tomstats.report.sections`) on synthetic fits.

The fits come from :mod:`_report_data` (InferenceData in ``tomstats.glmm.fit``'s layout,
no sampling): a crossed formula fit ``correct ~ fb * implicit + (1 | model) + (1 | item)``
whose posterior sits at the generating parameters (well specified), the same with β fb
shrunk to 40 % of the truth (deliberately misspecified), and the structural-style
:func:`_report_data.make_fit`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _report_data import FORMULA_TRUTH, make_fit, make_formula_fit, save_fit

from tomstats.report import fit as R
from tomstats.report._document import Image, Table, Text, render_html, render_markdown
from tomstats.report.sections import SECTIONS, FitContext, param_label, prior_key
from tomstats.report.sections import priors as P
from tomstats.report.sections import random_effects as RE
from tomstats.report.sections import traces as T
from tomstats.report.sections.forest import forest_groups
from tomstats.report.sections.parameters import parameter_table

MISFIT = "falls outside the 94 % posterior predictive interval"


@pytest.fixture(scope="module")
def formula_fit():
    return make_formula_fit(seed=0)


@pytest.fixture(scope="module")
def misfit_fit():
    return make_formula_fit(seed=0, shrink_fb=0.4)


@pytest.fixture(scope="module")
def formula_doc(formula_fit):
    return R.fit_document(formula_fit, "crossed.nc", sweep_draws=0)


def _texts(doc, kind: str | None = None) -> list[str]:
    return [b.text for s in doc.sections for b in s.blocks
            if isinstance(b, Text) and (kind is None or b.kind == kind)]


def _images(doc) -> list[str]:
    return [b.name for s in doc.sections for b in s.blocks if isinstance(b, Image)]


# --------------------------------------------------------------------------- names, priors


def test_readable_names() -> None:
    assert param_label("beta", ["fb"]) == "β fb"
    assert param_label("sd_model", ["Intercept"]) == "SD of model intercepts"
    assert param_label("sd_item", ["tom_order"]) == "SD of item slopes on tom_order"
    assert param_label("alpha") == "α" and param_label("capability", ["gpt-a"]) == \
        "capability gpt-a"
    # treatment coding reads as bambi writes it, not formulaic's [T.level]
    assert param_label("beta", ["prompt_variant[T.spaced]"]) == "β prompt_variant[spaced]"
    assert param_label("beta", ["tom_order:prompt_variant[T.original]"]) == \
        "β tom_order:prompt_variant[original]"
    assert param_label("sd_model", ["g[T.b]"]) == "SD of model slopes on g[b]"


def test_prior_key_maps_posterior_names_to_spec_keys() -> None:
    pri = {"Intercept": {}, "fb": {}, "beta": {}, "sd_model": {}, "alpha_scaled": {},
           "gamma": {}, "capability_mu": {}}
    assert prior_key("beta", ["fb"], "formula", pri) == ("fb", 1.0)
    assert prior_key("beta", ["implicit"], "formula", pri) == ("beta", 1.0)  # default slope
    assert prior_key("sd_model", ["Intercept"], "formula", pri) == ("sd_model", 1.0)
    # the intercept prior is on the intercept at the predictors' means
    assert prior_key("beta", ["Intercept"], "formula", pri) is None
    assert prior_key("beta_c", ["Intercept"], "formula", pri) == ("Intercept", 1.0)
    assert prior_key("beta", ["Intercept"], "formula", pri, centred=False) == ("Intercept", 1.0)
    # structural: alpha = alpha_scale · alpha_scaled
    assert prior_key("alpha", [], "structural", pri, scales={"alpha_scale": 1e-4}) == \
        ("alpha_scaled", 1e-4)
    assert prior_key("gamma", [], "structural", pri) == ("gamma", 1.0)
    assert prior_key("capability", ["a"], "structural", pri) is None  # hierarchical
    assert prior_key("capability", ["a"], "structural", pri, hierarchical=False) == \
        ("capability_mu", 1.0)


def _dashed(ax) -> int:
    return sum(1 for ln in ax.get_lines() if ln.get_linestyle() == "--")


def test_prior_curve_on_every_panel_with_a_prior(formula_fit) -> None:
    """Breaks when posterior names and prior keys stop matching (the bug of issue 15)."""
    ctx = FitContext(formula_fit)
    fig = P.fig_prior_posterior(ctx, ctx.params)
    by_title = {ax.get_title(): _dashed(ax) for ax in fig.axes if ax.get_visible()}
    # every spec prior except the LKJ ones has a posterior panel of its own
    expected = {"β fb", "β implicit", "β fb:implicit", "β Intercept (centred predictors)",
                "SD of model intercepts", "SD of item intercepts"}
    spec_keys = {k for k in ctx.priors if not k.startswith("lkj_")}
    assert len(spec_keys) == len(expected) == 6
    assert {t: by_title[t] for t in expected} == dict.fromkeys(expected, 1)
    # β Intercept on the original scale is derived: no prior of its own
    assert by_title["β Intercept"] == 0
    # the drawn prior is the spec's: N(0, 2.5) for the intercept at the means
    ax = next(a for a in fig.axes if a.get_title() == "β Intercept (centred predictors)")
    line = next(ln for ln in ax.get_lines() if ln.get_linestyle() == "--")
    x, y = line.get_data()
    from scipy.stats import norm

    np.testing.assert_allclose(y, norm(0, 2.5).pdf(x), rtol=1e-6)


def test_prior_curve_from_prior_group() -> None:
    ctx = FitContext(make_fit(seed=1))
    fig = P.fig_prior_posterior(ctx, ctx.params)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(ctx.params) == 7  # α, γ, δ, σ item, 3 capabilities
    assert all(_dashed(ax) == 1 for ax in panels)


def test_densities_caption_names_what_has_no_prior(formula_doc) -> None:
    caption = next(b.caption for s in formula_doc.sections for b in s.blocks
                   if isinstance(b, Image) and b.name == "densities")
    assert "on the 6 of 7 panels" in caption
    assert "β Intercept has none: the intercept prior is on the intercept at the " \
        "predictors' means" in caption
    # a structural fit with a prior on every panel says nothing about β or derived panels
    doc = R.fit_document(make_fit(seed=1), sweep_draws=0)
    caption = next(b.caption for s in doc.sections for b in s.blocks
                   if isinstance(b, Image) and b.name == "densities")
    assert "on the 7 of 7 panels" in caption and "β" not in caption and "derived" not in caption


def test_scaled_prior_of_an_absent_parameter_is_left_out(formula_fit) -> None:
    import json

    idata = make_fit(seed=1)
    spec = {"kind": "structural", "alpha_scale": 1e-4,
            "priors": {"alpha_scaled": {"dist": "normal", "loc": 0, "scale": 5},
                       "sd_alpha_llm_scaled": {"dist": "half_normal", "scale": 1}}}
    idata.posterior.attrs["spec"] = json.dumps(spec)
    rows = P.prior_table(FitContext(idata)).set_index("prior on")["applies to"]
    assert rows["alpha_scaled"] == "α"
    # a prior on a parameter this fit does not have is not listed (issue: priors only where
    # they apply)
    assert "sd_alpha_llm_scaled" not in rows.index


def test_prior_table_is_readable(formula_doc) -> None:
    tab = next(b.frame for s in formula_doc.sections for b in s.blocks
               if isinstance(b, Table) and b.caption == "Priors")
    rows = tab.set_index("prior on")
    assert rows.loc["Intercept", "distribution"] == "Normal(0, 2.5)"
    assert rows.loc["sd_model", "distribution"] == "Half-normal(1)"
    assert rows.loc["sd_model", "applies to"] == "SD of model intercepts"
    # (1 | item) has no correlations: its LKJ prior does not apply and is not listed
    assert "lkj_item" not in rows.index
    from tomstats.report.sections._context import prior_text

    assert prior_text({"dist": "lkj", "eta": 2.0}) == "LKJ(η=2)"
    assert "{" not in " ".join(tab["distribution"])  # no JSON


# --------------------------------------------------------------------------- tables


def test_parameter_table_names_and_beta_c(formula_fit) -> None:
    ctx = FitContext(formula_fit)
    tab = parameter_table(ctx).set_index("name in fit")
    assert tab.loc["beta[fb]", "parameter"] == "β fb"
    assert tab.loc["sd_model[Intercept]", "parameter"] == "SD of model intercepts"
    # beta_c (4 elements) is tabulated (its intercept; its slopes are beta's)
    assert "beta_c[Intercept]" in tab.index
    assert tab.loc["beta[fb]", "mean"] == pytest.approx(FORMULA_TRUTH["fb"], abs=0.05)
    # the left-out count is right: only the 64-level item effects are too many
    assert ctx.left_out == {"re_model": 8, "z_model": 8, "re_item": 64, "z_item": 64}
    note = " ".join(_texts(R.fit_document(formula_fit, sweep_draws=0), "note"))
    assert "re_item (64 elements)" in note and "beta_c (" not in note
    assert "more than 12 elements each" in note and "re_model" not in note.split(
        "Sampler internals")[0]


def test_random_effects_tables_and_sds(formula_fit) -> None:
    ctx = FitContext(formula_fit)
    groups = {g.key: g for g in RE.group_effects(ctx)}
    assert set(groups) == {"model_Intercept", "item_Intercept"}
    model = groups["model_Intercept"]
    assert len(model.levels) == 8 and model.draws.shape == (400, 8)
    tab, cut = RE.level_table(model, ctx.prob)
    assert not cut and list(tab["rank"]) == list(range(1, 9))
    assert (np.diff(tab["mean"].to_numpy()) <= 0).all()  # sorted, largest first
    np.testing.assert_allclose(tab["mean"], np.sort(model.draws.mean(axis=0))[::-1])
    items, cut = RE.level_table(groups["item_Intercept"], ctx.prob)
    assert cut and len(items) == 2 * RE.N_TABLE
    sds = RE.sd_table(list(groups.values()), ctx.prob).set_index("grouping factor")
    assert sds.loc["model intercepts", "SD mean"] == pytest.approx(
        FORMULA_TRUTH["sd_model"], abs=0.05)


def test_caterpillar_names_top_and_bottom_only(formula_fit) -> None:
    ctx = FitContext(formula_fit)
    g = next(g for g in RE.group_effects(ctx) if g.key == "item_Intercept")
    ax = RE.fig_caterpillar(g, ctx.prob).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 2 * RE.N_NAMED
    order = np.argsort(g.draws.mean(axis=0))
    assert labels[0] == g.levels[order[0]] and labels[-1] == g.levels[order[-1]]


def _overlapping_labels(fig, labels) -> list[tuple[str, str]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    boxes = [(t.get_text(), t.get_window_extent()) for t in labels if t.get_text()]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


def test_caterpillar_labels_of_many_levels_do_not_overlap(formula_fit) -> None:
    """With 64 (or 300) levels the named top and bottom rows sit next to each other: their
    labels are spread apart and each is joined to its own row by a leader line."""
    import dataclasses

    ctx = FitContext(formula_fit)
    g = next(g for g in RE.group_effects(ctx) if g.key == "item_Intercept")
    rng = np.random.default_rng(3)
    many = dataclasses.replace(g, levels=tuple(f"story-{i:04d}" for i in range(300)),
                               draws=rng.normal(np.linspace(-1, 1, 300), 0.3, (400, 300)))
    for case in (g, many):
        fig = RE.fig_caterpillar(case, ctx.prob)
        ax = fig.axes[0]
        assert _overlapping_labels(fig, ax.get_yticklabels()) == []
        # one leader per named label, ending at its own row (sorted: row i of n)
        leaders = [ln for ln in ax.get_lines() if ln.get_color() == "grey"
                   and len(ln.get_xdata()) == 3]
        n = len(case.levels)
        rows = sorted(int(ln.get_ydata()[-1]) for ln in leaders)
        assert rows == list(range(RE.N_NAMED)) + list(range(n - RE.N_NAMED, n))
    assert RE.label_positions([0, 1, 2, 7, 8, 9], 1.5, 10) == [0, 1.5, 3.0, 6.0, 7.5, 9.0]


def test_caterpillar_axis_of_structural_capabilities() -> None:
    ctx = FitContext(make_fit(seed=1))
    cap = next(g for g in RE.group_effects(ctx) if g.key == "capability")
    ax = RE.fig_caterpillar(cap, ctx.prob).axes[0]
    # capabilities multiply β0: not a log-odds deviation around 0
    assert "log-odds scale" not in ax.get_xlabel() and "capability m" in ax.get_xlabel()
    assert cap.centre == 1.0 and cap.sd is None and "not pooled" in cap.sd_label
    formula = next(g for g in RE.group_effects(FitContext(make_formula_fit(seed=0))))
    assert formula.scale == "log-odds scale"


def test_forest_rows(formula_fit) -> None:
    groups = dict(forest_groups(FitContext(formula_fit)))
    assert [p.label for p in groups["fixed effects β"]] == [
        "β Intercept", "β fb", "β implicit", "β fb:implicit"]
    structural = dict(forest_groups(FitContext(make_fit(seed=1))))
    assert [p.label for p in structural["α, γ, δ"]] == ["α", "γ", "δ"]
    assert len(structural["capabilities"]) == 3
    # γ (per order) and α, δ (per word) cannot share an axis: each panel names its rows
    from tomstats.report.sections.forest import fig_forest

    ctx = FitContext(make_fit(seed=1))
    titles = [ax.get_title(loc="left") for ax in fig_forest(ctx, forest_groups(ctx)).axes]
    assert titles[:2] == ["α, γ, δ: γ", "α, γ, δ: α, δ"]
    assert not any(re.search(r"\(\d/\d\)", t) for t in titles)


def test_failed_verdict_advises_in_cli_syntax(formula_fit) -> None:
    idata = formula_fit.copy()
    div = idata.sample_stats["diverging"].values.copy()
    div[0, :3] = True
    idata.sample_stats["diverging"] = (("chain", "draw"), div)
    check = next(c for c in R.diagnostics_verdict(idata).checks if c.name == "divergences")
    assert check.passed is False
    assert "--target-accept" in check.detail and "--option noncentered=true" in check.detail
    assert "target_accept" not in check.detail and "noncentered=True" not in check.detail


def test_one_labelled_trace_and_rank_panel_per_coefficient(formula_fit) -> None:
    ctx = FitContext(formula_fit)
    fig = T.fig_trace(ctx, ctx.params)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    for p in ctx.params:
        assert p.label in titles
    assert len(fig.axes) == 2 * len(ctx.params)
    rank_titles = [ax.get_title() for ax in T.fig_rank(ctx, ctx.params).axes
                   if ax.get_visible()]
    assert rank_titles == [p.label for p in ctx.params]


# --------------------------------------------------------------------------- checks


def test_misfit_sentence_only_on_the_misspecified_fit(formula_doc, misfit_fit) -> None:
    good = " ".join(_texts(formula_doc))
    assert MISFIT not in good
    assert "Every calibration bin's observed rate lies inside" in good
    assert "Every design cell's observed accuracy (fb × implicit) lies inside" in good
    bad_doc = R.fit_document(misfit_fit, sweep_draws=0)
    warnings_ = _texts(bad_doc, "warning")
    cal = next(t for t in warnings_ if "calibration bins" in t)
    cells = next(t for t in warnings_ if "design cells" in t)
    assert MISFIT in cal and MISFIT in cells
    # which bins/cells, and by how much
    assert re.search(r"bin 0\.\d–0\.\d: observed 0\.\d{3} \(n = \d+\) vs predicted", cal)
    assert re.search(r"\d\.\d{3} (above|below) the interval", cal)
    assert "fb 1, implicit 0: observed" in cells
    assert "points to a misfit" in cells
    # the numbers: the fb = 1 cells are observed far below what the shrunk fit predicts
    m = re.search(r"fb 1, implicit 0: observed (0\.\d+) \(n = (\d+)\) vs predicted (0\.\d+)",
                  cells)
    assert float(m.group(1)) < float(m.group(3)) - 0.1


# --------------------------------------------------------------------------- page


def test_page_order_and_markdown_has_the_same_sections(formula_doc, tmp_path: Path) -> None:
    titles = [s.title for s in formula_doc.sections]
    assert len(titles) == len(SECTIONS) + 1  # "Is there an effect?" follows the verdict
    assert titles[:6] == ["", "Is there an effect?", "Parameters", "Forest plot",
                          "Random effects", "Predicted accuracy by condition"]
    assert titles[-1] == "Model, data and provenance"
    html = render_html(formula_doc)
    md, images = render_markdown(formula_doc)
    h2 = re.findall(r'<h2 id="[^"]*">([^<]*)</h2>', html)
    assert re.findall(r"^## (.*)$", md, flags=re.M) == [t for t in titles if t] == [
        t.replace("&amp;", "&") for t in h2]
    for name in ("forest", "caterpillar_model_Intercept", "caterpillar_item_Intercept",
                 "predictions", "calibration", "densities", "trace", "rank"):
        assert f"{name}.png" in images and f"]({name}.png)" in md
    assert md.count("Intervals on this page") == 1 == html.count("Intervals on this page")
    assert "94 % highest-density intervals" in md


def test_provenance_is_readable_and_last(formula_doc) -> None:
    prov = formula_doc.sections[-1]
    tab = next(b.frame for b in prov.blocks if isinstance(b, Table)
               and b.caption.startswith("Fit attributes")).set_index("attribute")
    # the fixture is a PyMC fit: NumPyro's chain_method means nothing there; nulls dropped
    assert "sampler.chain_method" not in tab.index and "sampler.chain_groups" not in tab.index
    assert tab.loc["sampler.chains", "value"] == "2"
    assert "spec" not in tab.index and "priors" not in tab.index  # in the prior table
    assert tab.loc["versions", "value"] == "pymc 5.x, tomstats 0.0.test"
    data = next(b.frame for b in prov.blocks if isinstance(b, Table)
                and b.caption == "Data").set_index("quantity")["value"]
    # the formula's own cells (2 × 2), as in the design-cell check, not a lone default
    assert data["design cells (fb × implicit)"] == "4"
    assert data["LLMs"].startswith("8 (") and data["items"] == "64"


def test_predictions_marginal_and_conditional(formula_fit) -> None:
    from tomstats.report.sections.predictions import prediction_table

    tab, obs, x, colour = prediction_table(FitContext(formula_fit))
    assert {x, colour} == {"fb", "implicit"} and len(tab) == 4
    row = tab[(tab.fb == 0) & (tab.implicit == 0)].iloc[0]
    # conditional on a typical group: logistic(β0) at the posterior; marginal is pulled
    # towards 0.5 by the random effects (Jensen), and its interval is wider
    b0 = FORMULA_TRUTH["Intercept"]
    assert row["typical group mean"] == pytest.approx(1 / (1 + np.exp(-b0)), abs=0.02)
    assert row["marginal mean"] < row["typical group mean"]
    assert (row["marginal 94 % high"] - row["marginal 94 % low"]
            > row["typical group 94 % high"] - row["typical group 94 % low"])
    o = obs[(obs.fb == 0) & (obs.implicit == 0)].iloc[0]
    df = formula_fit.constant_data
    mask = (df["data_fb"].values == 0) & (df["data_implicit"].values == 0)
    assert o["observed"] == pytest.approx(df["data_correct"].values[mask].mean())


def test_formula_fit_report_files(formula_fit, tmp_path: Path) -> None:
    p = save_fit(formula_fit, tmp_path / "crossed.nc")
    html = R.write_fit_report(p, tmp_path / "r.html", sweep_draws=0).read_text()
    assert html.index("Forest plot") < html.index("Model, data and provenance")
    md = R.write_fit_report(p, tmp_path / "md", fmt="md", sweep_draws=0)
    assert (md.parent / "caterpillar_model_Intercept.png").stat().st_size > 5_000
