"""The power report states its assumptions first (design, effect sizes, tests, the fit used),
shows the power per LLM when the LLMs differ, warns on rm-anova tests when the stories share
difficulty, and says "or fewer" where the smallest value tried already reaches the target."""

from __future__ import annotations

import re

import tomstats
from tomstats.design import paper_design
from tomstats.model import Params
from tomstats.planning.result import format_power, write_power
from tomstats.report._document import render_html
from tomstats.report.power import power_document
from tomstats.simulation.study import StudyConfig


def _html(res, tmp_path):
    write_power(res, tmp_path / "pw", figure=False)
    return render_html(power_document(tmp_path / "pw"))


def _headings(html: str) -> list[str]:
    return re.findall(r"<h2[^>]*>(.*?)</h2>", html)


def test_assurance_report_names_the_fit_and_its_parameters(structural_fit, tmp_path):
    res = tomstats.power(StudyConfig(design=paper_design().with_(capability=(1.0,))),
                         along={"questions_per_cell": [30, 60]},
                         tests=["anova:tom_order", "rm-anova:interaction"], replicates=20,
                         posterior=structural_fit, seed=0, progress=False)
    html = _html(res, tmp_path)
    heads = _headings(html)
    assert heads[0] == "Assumptions" and heads.index("Assumptions") < heads.index(
        "Power analysis")
    assumptions = html.split("Power analysis")[0]
    assert "fit.nc" in assumptions and "ab" * 32 in assumptions  # the fit and its data hash
    assert "0.6" in assumptions and "posterior mean" in assumptions  # γ from the fit
    assert "1.175" not in assumptions  # not the paper's γ
    assert "sphericity correction" in assumptions and "GG" in assumptions
    # rm-anova with shared story difficulty (σ ≈ 0.5 in the fit): warned
    assert "treat the stories as fixed" in html
    # the fit's two LLMs differ: power per LLM
    assert "power, LLM weak" in html and "power, LLM strong" in html


def test_no_rm_anova_warning_without_story_effects_and_or_fewer(tmp_path):
    cfg = StudyConfig(design=paper_design(), params=Params(7e-5, 1.2, 2e-4, 0.0))
    res = tomstats.power(cfg, along={"questions_per_cell": [20, 40]}, n_llms=6,
                         tests=["rm-anova:tom_order"], replicates=20, seed=0, progress=False)
    html = _html(res, tmp_path)
    assert "treat the stories as fixed" not in html
    # the order effect is detected at the smallest value tried: the target is met at "20 or
    # fewer", not at 20
    assert float(res.frame()["power"].iloc[0]) >= 0.8
    assert "20 or fewer" in html
    assert "questions_per_cell = 20 or fewer" in format_power(res)
    # capabilities drawn per study: no per-LLM table
    assert "power, LLM" not in html


def test_design_and_effect_sizes_of_a_plain_run(tmp_path):
    res = tomstats.power(StudyConfig(), along={"questions_per_cell": [10]},
                         tests=["anova:interaction"], replicates=10, seed=0, progress=False)
    html = _html(res, tmp_path)
    assumptions = html.split("Power analysis")[0]
    for text in ("context length levels", "200, 500, 1000, 2000, 5000", "tom order levels",
                 "0.7, 0.85, 1, 1.15, 1.3", "1.175", "none: plug-in power",
                 "significance level"):
        assert text in assumptions, text
