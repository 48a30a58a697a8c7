"""``tomstats fit`` opens with a header as lme4 and bambi do (model, family, rows, groups and
their sizes, the priors that apply, the sampler); one chain shows R-hat as n/a, quietly."""

from __future__ import annotations

from _fits import fit_file
from _report_data import make_formula_fit

from tomstats.glmm.header import applicable_priors, fit_header


def test_structural_header_from_the_command() -> None:
    _path, code, text = fit_file(30, 30, 1)
    assert code == 4, text  # 30 draws of one chain: ESS fails, the file is written
    head = text.splitlines()
    assert head[0].startswith("Bayesian GLMM fit by NUTS")
    assert "Model: structural, equation (1)" in head[1]
    assert head[2].strip() == "Family: bernoulli (logit link)"
    assert head[3].strip() == "Rows: 120 (likelihood terms: 120)"
    # structural_log: 2 LLMs, 4 items in each of the 15 cells
    assert head[4].strip() == "Groups: model, 2 levels; item, 60 levels"
    priors = text[text.index("Priors:"):text.index("Sampler:")]
    assert "gamma ~ normal(loc=0, scale=2)" in priors
    # two LLMs: independent capabilities, so the population sd and slope priors do not apply
    for absent in ("capability_sd", "sd_gamma_llm", "sd_alpha_llm_scaled"):
        assert absent not in priors
    assert "1 chain(s) × 30 draws after 30 warm-up" in text
    table = text[text.index("r_hat"):text.index("wrote")]
    assert "n/a" in table and "nan" not in table
    assert "Shape validation" not in text and "arviz - WARNING" not in text


def test_formula_header() -> None:
    idata = make_formula_fit()
    text = fit_header(idata)
    assert "Formula: correct ~ fb * implicit + (1 | model) + (1 | item)" in text
    assert "Groups: model, 8 levels; item, 64 levels" in text
    keys = set(applicable_priors(idata))
    assert {"Intercept", "fb", "sd_model", "sd_item"} <= keys
    assert not any(k.startswith("lkj_") for k in keys)  # no correlated terms
