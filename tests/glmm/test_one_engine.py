"""One Laplace engine, one result type: a random-intercept and a random-slope fit answer the
same lme4 vocabulary; a fit saved by earlier versions in the random-intercept JSON format
(``tests/fixtures/fits/laplace_fit_v1.json``, written by the previous engine from
``crossed_frame(6, 14, 2)``) loads into that type with the estimates a fresh fit of the same
log gives; the package ``tomstats.glmm`` has no import circle."""

from __future__ import annotations

import ast
import functools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _crossed import crossed_frame

from tomstats.glmm import LaplaceFit, fit

ROOT = Path(__file__).resolve().parents[2]
OLD = ROOT / "tests" / "fixtures" / "fits" / "laplace_fit_v1.json"
INTERCEPTS = "correct ~ x + (1 | model) + (1 | item)"
SLOPES = "correct ~ x + (1 + x | model) + (1 | item)"


@functools.cache
def _log() -> pd.DataFrame:
    return crossed_frame(6, 14, 2)


@functools.cache
def _fit(formula: str) -> LaplaceFit:
    return fit(_log(), formula, backend="laplace")


@pytest.mark.parametrize("formula", [INTERCEPTS, SLOPES])
def test_intercepts_and_slopes_answer_the_same_methods(formula: str, tmp_path: Path) -> None:
    f = _fit(formula)
    df = _log()
    assert type(f) is LaplaceFit and f.converged
    p, d = len(f.coef_names), f.n_params
    # fixef / vcov / fixed_effects: the same numbers
    assert list(f.fixef().index) == ["(Intercept)", "x"] == list(f.vcov().index)
    np.testing.assert_array_equal(f.fixef().to_numpy(), f.beta)
    np.testing.assert_array_equal(np.sqrt(np.diag(f.vcov().to_numpy())), f.se)
    assert d == p + f.theta.size == p + {INTERCEPTS: 2, SLOPES: 4}[formula]
    # logLik, AIC, BIC, deviance (lme4's definitions, N = rows)
    assert f.logLik() == f.loglik and f.deviance == pytest.approx(-2 * f.loglik)
    assert f.AIC() == pytest.approx(-2 * f.loglik + 2 * d)
    assert f.BIC() == pytest.approx(-2 * f.loglik + math.log(len(df)) * d)
    # VarCorr: the SDs and correlation of the T factors
    vc = f.VarCorr()
    S = f.covariances()
    sds = [math.sqrt(S[k][i, i]) for k, t in enumerate(f.terms) for i in range(t.d)]
    np.testing.assert_allclose(vc.loc[vc["var2"] == "", "sdcor"], sds, rtol=1e-12)
    # ranef: the conditional modes; predict(link) = X beta + Z b by hand
    re = f.ranef()
    assert len(re) == sum(t.q * t.d for t in f.terms) and re["cond_sd"].gt(0).all()
    modes = {(r.group, r.level, r.effect): r.estimate for r in re.itertuples()}
    by_hand = f.beta[0] + f.beta[1] * df["x"].to_numpy()
    for t in f.terms:
        for e in t.effects:
            col = 1.0 if e == "(Intercept)" else df[e].to_numpy()
            by_hand = by_hand + col * df[t.group].map(
                lambda lv, g=t.group, e=e: modes[(g, lv, e)]).to_numpy()
    np.testing.assert_allclose(f.predict(type="link"), by_hand, atol=1e-10)
    np.testing.assert_allclose(f.predict(), 1 / (1 + np.exp(-by_hand)), atol=1e-12)
    pop = f.predict(random=False, type="link")
    np.testing.assert_allclose(pop, f.beta[0] + f.beta[1] * df["x"].to_numpy(), atol=1e-12)
    # simulate: 0/1 outcomes per row, reproducible by seed; with the modes (use_u) the mean
    # over simulations is the predicted probability
    sims = f.simulate(3, seed=4)
    assert sims.shape == (3, len(df)) and set(np.unique(sims)) <= {0.0, 1.0}
    np.testing.assert_array_equal(sims, f.simulate(3, seed=4))
    many = f.simulate(4000, seed=1, use_u=True).mean(axis=0)
    assert np.max(np.abs(many - f.predict())) < 0.04
    # confint: Wald intervals; profile intervals around them
    w = f.confint()
    np.testing.assert_allclose(w["upper"] - f.beta, 1.959963984540054 * f.se)
    assert list(f.anova_wald().index) == ["x"]
    np.testing.assert_allclose(f.anova_wald()["Chisq"], (f.beta[1] / f.se[1]) ** 2)
    # printout in lme4's layout; JSON in the one format, read back as the same type
    text = str(f)
    for part in ("Family: binomial  ( logit )", "Random effects:", "Fixed effects:",
                 "Correlation of Fixed Effects:", "Number of obs: 84, groups:  item, 14; "
                 "model, 6"):
        assert part in text, part
    back = LaplaceFit.from_json(f.to_json(tmp_path / "f.json"))
    assert json.loads((tmp_path / "f.json").read_text())["format"] == "tomstats-lme-fit"
    assert back.terms == f.terms and str(back).splitlines()[:12] == text.splitlines()[:12]


def test_anova_of_the_two_fits_is_the_likelihood_ratio() -> None:
    small, big = _fit(INTERCEPTS), _fit(SLOPES)
    table = small.anova(big, names=["ri", "slopes"])
    assert list(table.index) == ["ri", "slopes"]
    stat = max(2 * (big.loglik - small.loglik), 0.0)
    assert table.loc["slopes", "Chisq"] == pytest.approx(stat)
    assert table.loc["slopes", "Df"] == 2


def test_a_fit_of_the_old_random_intercept_format_loads() -> None:
    from tomstats.glmm.fit_reader import read_ml_fit
    from tomstats.report.laplace import laplace_document

    raw = json.loads(OLD.read_text())
    assert raw["format"] == "tomstats-laplace-fit" and raw["coef_names"][0] == "Intercept"
    old = LaplaceFit.from_json(OLD)
    assert type(read_ml_fit(OLD)) is LaplaceFit
    assert old.coef_names == ("(Intercept)", "x") and old.groups == ("model", "item")
    assert old.n_levels == (6, 14) and old.design is None
    assert [t.label for t in old.terms] == ["(1 | model)", "(1 | item)"]
    np.testing.assert_array_equal(old.sd, raw["sd"])
    np.testing.assert_array_equal(old.b, raw["ranef"])
    assert np.isnan(old.b_var).all() and old.ranef()["cond_sd"].isna().all()
    # the same model as a fresh fit of the log it was made from, by the one engine
    new = _fit(INTERCEPTS)
    for name in ("beta", "se", "cov", "sd", "b"):
        np.testing.assert_allclose(getattr(old, name), getattr(new, name), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    assert old.loglik == pytest.approx(new.loglik, abs=1e-7)
    assert old.AIC() == pytest.approx(new.AIC()) and old.n_params == new.n_params
    assert "Random effects:" in str(old) and laplace_document(old, "old.json").sections
    # written again, it is in the one format
    assert old.to_dict()["format"] == "tomstats-lme-fit"
    assert LaplaceFit.from_dict(old.to_dict()).terms == old.terms


def _imports(path: Path, package: str, modules: set[str]) -> set[str]:
    """The modules of ``package`` that ``path`` imports, anywhere in the file (inside
    functions and ``TYPE_CHECKING`` blocks too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        out.update(n for n in names if n in modules)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (empty when there is none), by depth-first search."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str]:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        state[v] = 2
        stack.pop()
        return []

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return []


def test_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_circle_in_glmm() -> None:
    folder = ROOT / "tomstats" / "glmm"
    modules = {f"tomstats.glmm.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {f"tomstats.glmm.{p.stem}": _imports(p, "tomstats.glmm", modules) - {
        f"tomstats.glmm.{p.stem}"} for p in folder.glob("*.py") if p.stem != "__init__"}
    assert len(graph) > 20 and any(graph.values())
    assert _cycle(graph) == [], " -> ".join(_cycle(graph))
