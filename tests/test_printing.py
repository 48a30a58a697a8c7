"""The package face lists only its public API, and its objects print as compact tables."""

from __future__ import annotations

import numpy as np

import tomstats


def test_dir_lists_only_the_public_api():
    names = dir(tomstats)
    assert set(names) == {"__version__", *tomstats.__all__, "model", "design", "stories",
                          "evaluate", "analysis", "glmm", "simulation", "planning", "report"}
    for private in ("importlib", "Any", "annotations", "_NAMES", "__getattr__"):
        assert private not in names


def test_the_log_analysis_functions_are_reachable():
    from tomstats.analysis.log_anova import log_anova
    from tomstats.analysis.summary import summarize

    assert tomstats.summarize is summarize and tomstats.log_anova is log_anova
    assert "summarize" in tomstats.__all__ and "log_anova" in tomstats.__all__


def test_params_print_compactly():
    p = tomstats.Params(alpha=7.021e-05, gamma=1.175, delta=2.324e-04, sigma=0.6107)
    assert repr(p) == "Params(alpha=7.021e-05, gamma=1.175, delta=0.0002324, sigma=0.6107)"
    assert eval(repr(p), {"Params": tomstats.Params}) == p
    draws = np.random.default_rng(0).normal(0.6, 0.05, size=(200, 2))
    text = repr(tomstats.Params(alpha=7e-5, gamma=draws, delta=0.0, sigma=0.5))
    lines = text.splitlines()
    assert len(lines) == 5 and "mean" in lines[0] and "97.5 %" in lines[0]
    gamma = lines[2].split()
    assert gamma[0] == "gamma" and "(200, 2)" in lines[2]
    assert abs(float(gamma[-4]) - draws.mean()) < 1e-3
    assert abs(float(gamma[-1]) - np.quantile(draws, 0.975)) < 1e-3


def test_laplace_fit_prints_its_summary_not_its_arrays():
    import pandas as pd

    from tomstats.glmm import fit

    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"model": rng.choice(["a", "b", "c", "d"], n),
                       "tom_order": rng.integers(0, 3, n)})
    df["correct"] = (rng.random(n) < 0.8 - 0.2 * df["tom_order"]).astype(int)
    res = fit(df, "correct ~ tom_order + (1 | model)", backend="laplace")
    text = str(res)  # print(): lme4's summary
    assert text.startswith("Generalized linear mixed model fit by maximum likelihood")
    assert "array(" not in text and len(text.splitlines()) < 40
    line = repr(res)  # the REPL: one line
    assert line.startswith("<LaplaceFit: correct ~ tom_order + (1 | model)") and "\n" not in line


def test_fit_is_typed():
    from tomstats.glmm import fit

    ann = fit.__annotations__
    assert "InferenceData" in ann["return"] and "LaplaceFit" in ann["return"]
    import inspect

    unannotated = [n for n, p in inspect.signature(fit).parameters.items()
                   if p.annotation is inspect.Parameter.empty]
    assert not unannotated


def test_the_anova_printout_has_ss_and_ms_columns():
    """`tomstats anova` prints SS, DF, MS, F, p in that order, as pingouin and statsmodels do;
    the sums of squares are statsmodels' type II ones on the same rows."""
    import pandas as pd
    import pytest

    smf = pytest.importorskip("statsmodels.formula.api")
    sm = pytest.importorskip("statsmodels.api")
    from pathlib import Path

    from tomstats.analysis.log_anova import format_anova, log_anova
    from tomstats.evaluate import read_log

    log = read_log(Path(__file__).resolve().parents[1] / "data" / "smollm2_storysim_log.jsonl")
    table = log_anova(log)
    text = format_anova(table)
    header = text.splitlines()[0].split()
    assert header[:6] == ["source", "SS", "DF", "MS", "F", "p"]
    ref = sm.stats.anova_lm(smf.ols("correct ~ C(context_words) * C(tom_order)",
                                    data=log).fit(), typ=2)
    for row in text.splitlines()[1:5]:
        cells = row.split()
        source, ss, df, ms = cells[0], float(cells[1]), float(cells[2]), float(cells[3])
        key = {"context_words": "C(context_words)", "tom_order": "C(tom_order)",
               "context_words:tom_order": "C(context_words):C(tom_order)"}.get(source, source)
        assert ss == pytest.approx(ref.loc[key, "sum_sq"], rel=1e-3), source
        assert ms == pytest.approx(ref.loc[key, "sum_sq"] / ref.loc[key, "df"], rel=1e-3)
        assert df == ref.loc[key, "df"]
    assert isinstance(table, pd.DataFrame) and {"SS", "MS"} <= set(table.columns)
