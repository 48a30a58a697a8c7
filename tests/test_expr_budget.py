"""The resource bounds of the formula language (security, third round: findings 1-3).

``^ n`` within the factors it raises, at most ``MAX_TERMS`` terms, constants inside transforms
computed in floating point and bounded, and the design matrix estimated before formulaic
builds it. The term counts are compared with formulaic's own expansion, and the column bound
with the columns formulaic builds.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import tomstats._guards as guards
from tomstats._expr import (
    MAX_CONSTANT,
    MAX_TERMS,
    ExpressionError,
    check_formula,
    check_terms,
    expand_terms,
)
from tomstats.glmm.spec import check_stored_formula

#: (formula, words of the refusal): each refused at once by the parser.
REFUSED = [
    ("correct ~ tom_order ^ 1000000000 + (1|model)",
     "'^ 1000000000' on tom_order: the power must be a whole number from 1 to the 1 factor"),
    ("correct ~ (tom_order + context_words) ^ 50", "from 1 to the 2 factor(s) it raises"),
    ("correct ~ (tom_order + context_words) ** 3", "from 1 to the 2 factor(s) it raises"),
    ("correct ~ x ^ 2", "or I(x ** 2) for the arithmetic power"),
    ("correct ~ (x + y) ^ 0", "from 1 to the 2 factor(s)"),
    ("correct ~ x ^ " + "9" * 5000, "from 1 to the 1 factor"),
    ("correct ~ (a + b + c + d + e + f + g + h + i + j) ^ 10",
     f"expands to more than {MAX_TERMS} terms"),
    ("correct ~ (a + b + c + d + e) ^ 5 : (f + g + h + i + j) ^ 5 : (k + l)",
     f"expands to more than {MAX_TERMS} terms"),
    ("correct ~ x + (1 + (a + b + c + d + e + f + g + h + i + j + k) ^ 11 | g)",
     f"expands to more than {MAX_TERMS} terms"),
    ("correct ~ I(9**9**9 * tom_order)", "the constant is inf"),
    ("correct ~ I(2**10**10**10 * tom_order)", "the constant is inf"),
    ("correct ~ I(x * 2 ** 400)", f"magnitude at most {MAX_CONSTANT:g}"),
    ("correct ~ I(x * 1e200)", f"magnitude at most {MAX_CONSTANT:g}"),
    ("correct ~ I(x * " + "9" * 4000 + ")", "the constant is inf"),
    ("correct ~ log(x + exp(1000))", "the constant is inf"),
    ("correct ~ center(x * 10 ** 10 ** 3)", "the constant is inf"),
    ("correct ~ poly(x + 9 ** 9 ** 9, 2)", "the constant is inf"),
    ("correct ~ I(x + 1 / (1 - 1))", "divides by zero"),
    ("correct ~ I(x * (-8) ** 0.5)", "is not a real number"),
]


@pytest.mark.parametrize(("formula", "words"), REFUSED)
def test_refused_in_milliseconds(formula, words):
    start = time.process_time()
    with pytest.raises(ExpressionError) as info:
        check_formula(formula)
    assert words in str(info.value)
    # a bound, not a timing figure: the expansions above take minutes and gigabytes
    assert time.process_time() - start < 5


#: Right-hand sides and their terms, as formulaic expands them (the intercept aside).
EXPANSIONS = [
    "x", "x + y", "x * y", "x:y", "x / y", "(x + y) ^ 2", "(x + y + z) ^ 2",
    "(x + y + z) ** 3", "x * y * z", "(x + y) / z", "x * (y + z)", "C(g) * x",
    "poly(x, 3) + center(y) : z", "(x + y + z + w) ^ 3 + x:y:z:w",
]


@pytest.mark.parametrize("rhs", EXPANSIONS)
def test_term_count_is_formulaics(rhs):
    from formulaic import Formula

    ours = {t for t in expand_terms(rhs).terms if t}
    theirs = [t for t in Formula(rhs) if str(t) != "1"]
    assert len(ours) == len(theirs)
    assert {frozenset(str(f).replace(" ", "") for f in t.factors) for t in theirs} == ours


def test_allowed_powers_and_constants():
    """What the bounds leave: powers up to the factors raised, ordinary constants."""
    for formula in ["correct ~ (a + b + c) ^ 3", "correct ~ (a + b) ** 2 + (1 | g)",
                    "correct ~ I(x * 9 ** 9) + I(x / 1e-300) + I(x ** 2)",
                    "correct ~ I(x * 1e100) + log(x + 1e-12) + I(-x ** 0.5)"]:
        check_formula(formula)


@pytest.mark.parametrize("edit", ["formula", "fixed", "random"])
def test_a_stored_formula_gets_the_same_bounds(edit):
    """The re-check of a fit file's stored spec (every fit loader) applies the bounds."""
    d = {"formula": "correct ~ tom_order + (1 | model)", "response": "correct",
         "fixed": "tom_order", "random": [{"expr": "1", "group": "model"}]}
    check_stored_formula(d)
    bad = "tom_order ^ 1000000000"
    if edit == "formula":
        d["formula"] = f"correct ~ {bad} + (1 | model)"
    elif edit == "fixed":
        d["fixed"] = bad
    else:
        d["random"] = [{"expr": f"1 + {bad}", "group": "model"}]
    with pytest.raises(ExpressionError, match="the fit file's stored .*the power must be"):
        check_stored_formula(d)


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"x": rng.normal(size=n), "y": rng.normal(size=n),
                         "g": rng.choice(list("abcd"), n), "h": rng.choice(list("pqr"), n),
                         "b": rng.random(n) < 0.5, "k": rng.integers(0, 3, n)})


@pytest.mark.parametrize(("rhs", "exact"), [
    ("x", True), ("x * y", True), ("x + I(y ** 2) + log(abs(x))", True), ("poly(x, 3)", True),
    ("C(g)", False), ("g", False), ("g * h", False), ("C(g) : x", True), ("b + x", False),
    ("C(k) * g", False), ("0 + g:h", False),
    ("C(g, levels=['a', 'b', 'c', 'd']) + center(x)", False)])
def test_design_columns_bound_formulaics_columns(rhs, exact):
    """The estimate before the build is an upper bound on what formulaic builds (a level
    dropped for full rank is counted), and exact for numeric terms."""
    from tomstats.glmm.data import design_columns, formula_matrices

    df = _frame()
    X, _ = formula_matrices(rhs, df)
    bound = design_columns(rhs, df)
    assert bound >= X.shape[1]
    assert (bound == X.shape[1]) == exact


def test_design_matrix_beyond_memory_is_refused_before_formulaic(monkeypatch):
    """rows × columns is checked by the size guard of ``fit --draws`` before formulaic runs."""
    import formulaic

    from tomstats.glmm.data import formula_matrices

    df = _frame(2000)
    df["item"] = [f"i{i}" for i in range(len(df))]
    monkeypatch.setattr(guards, "available_memory", lambda: 10**8)  # a 100 MB machine

    def boom(*a, **k):  # pragma: no cover - the guard must stop first
        raise AssertionError("formulaic was called")

    monkeypatch.setattr(formulaic, "model_matrix", boom)
    with pytest.raises(ValueError, match=r"design matrix of the fixed part too large: needs "
                                         r"about .* \(2,000 rows × at most 4,002 columns"):
        formula_matrices("C(item) * x + x", df, what="fixed part")


def test_check_terms_still_names_the_columns():
    assert check_terms("(x + `y z`) ^ 2 + C(g) + poly(w, 2)") == ("x", "y z", "g", "w")
