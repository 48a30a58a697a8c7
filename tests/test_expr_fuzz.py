"""Property-based tests of the formula and query parsers (security, third round).

Over generated inputs — strings of the languages' own tokens, arithmetic towers of literals,
powers and products of terms — the parsers either accept or refuse with the documented
:class:`~tomstats._expr.ExpressionError`, and nothing runs past its budget: each example has a
deadline, and an accepted formula's design matrix is built by formulaic on a small table (the
proof that what the checker lets through is cheap), an accepted query is evaluated on it.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tomstats._expr import ExpressionError, check_formula, parse_query, query_mask  # noqa: E402

#: A budget per example: the refused inputs took minutes and gigabytes before the bounds.
FUZZ = settings(max_examples=300, deadline=timedelta(seconds=3), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

COLUMNS = ["x", "y", "tom_order", "g"]
NUMBERS = ["0", "1", "2", "9", "10", "0.5", "1e308", "1e-300", "400", "1000000000",
           "9" * 40, "3.0", "-1"]
FORMULA_TOKENS = [*COLUMNS, *NUMBERS, "`a b`", "__x", "np.log", "a.b", "+", "-", "*", "/",
                  ":", "^", "**", "|", "||", "~", "(", ")", ",", "[", "]", "=", "'a'", "@",
                  ";", "%", " ", "I(", "C(", "log(", "exp(", "poly(", "center(", "scale(",
                  "np.log(", "Treatment(", "levels=[", "sqrt(", "abs(", "cbind(", "trials("]
QUERY_TOKENS = [*COLUMNS, *NUMBERS, "`a b`", "__x", "@x", "+", "-", "*", "/", "//", "%",
                "**", "==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "&", "|", "~",
                "in", "(", ")", "[", "]", ",", "'a'", "\"b\"", " ", "log(", "exp(", "sqrt(",
                "abs(", "floor(", "x.str", "lambda", "if", "else", "True", "None"]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 24
    return pd.DataFrame({"correct": rng.integers(0, 2, n), "x": rng.normal(size=n),
                         "y": rng.normal(size=n), "tom_order": rng.integers(0, 3, n),
                         "g": rng.choice(list("abc"), n), "a b": rng.normal(size=n)})


FRAME = _frame()


def tokens(alphabet: list[str], most: int = 30) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(alphabet), max_size=most).map("".join)


#: Arithmetic over literals and columns, as inside ``I(...)`` (towers of powers included).
literal = st.one_of(st.integers(-10**6, 10**6).map(str),
                    st.floats(allow_nan=False, allow_infinity=False).map(repr),
                    st.sampled_from(["9", "10", "2", "1e308", "9" * 30]))
arith = st.recursive(
    st.one_of(literal, st.sampled_from(["x", "y", "tom_order"])),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "//", "%"]), inner)
        .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["log", "exp", "sqrt", "abs", "np.log"]), inner)
        .map(lambda t: f"{t[0]}({t[1]})")),
    max_leaves=8)
term = st.one_of(st.sampled_from(["x", "y", "tom_order", "C(g)", "g", "center(x)",
                                  "poly(x, 2)"]),
                 arith.map(lambda a: f"I({a})"))
rhs = st.recursive(
    term,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" + ", " * ", " : ", " / ", " - "]), inner)
        .map("".join),
        st.tuples(inner, st.sampled_from(["^", "**"]),
                  st.sampled_from(["1", "2", "3", "5", "50", "1000000000"]))
        .map(lambda t: f"({t[0]}) {t[1]} {t[2]}")),
    max_leaves=10)


def _checked_formula(text: str):
    try:
        return check_formula(text)
    except ExpressionError:
        return None


@FUZZ
@given(st.one_of(tokens(FORMULA_TOKENS).map(lambda s: f"correct ~ {s}"),
                 tokens(FORMULA_TOKENS), st.text(max_size=60)))
def test_formula_parser_accepts_or_refuses(text):
    _checked_formula(text)


@FUZZ
@given(rhs, st.booleans())
def test_an_accepted_formula_is_cheap_to_build(expr, random):
    """What passes the checker, formulaic builds on a small table in the deadline (or
    refuses with a ValueError naming the part)."""
    from tomstats.glmm.data import formula_matrices

    formula = f"correct ~ {expr}" + (" + (1 + x | g)" if random else "")
    parts = _checked_formula(formula)
    if parts is None:
        return
    try:
        X, names = formula_matrices(parts.fixed, FRAME, what="fixed part")
    except ValueError:
        return
    assert X.shape[0] == len(FRAME) and len(names) == X.shape[1]


def _mask(text: str):
    try:
        return query_mask(FRAME, parse_query(text))
    except ExpressionError:
        return None


@FUZZ
@given(st.one_of(tokens(QUERY_TOKENS), st.text(max_size=60),
                 st.tuples(arith, st.sampled_from(["<", ">=", "=="]), arith)
                 .map(lambda t: " ".join(t))))
def test_query_parser_accepts_or_refuses(text):
    mask = _mask(text)
    if mask is not None:
        assert mask.dtype == bool and len(mask) == len(FRAME)
