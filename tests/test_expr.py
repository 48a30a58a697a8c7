"""Queries and formulas as a small language (tomstats._expr): what passes, what is refused.

Valid queries are compared with pandas' own ``DataFrame.query`` on the same (safe) inputs;
valid formulas with formulaic's reading of the same text. Every attack string must be
refused and the marker file it would write must stay unwritten; for two of them the test
first shows that the engines tomstats used before do run them.
"""

from __future__ import annotations

import os  # noqa: F401 - the '@os' attack resolves it in this scope when pandas runs it
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats._expr import (
    CONTRASTS,
    FORMULA_CONTEXT,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_POLY_DEGREE,
    TRANSFORMS,
    ExpressionError,
    check_column,
    check_formula,
    check_group,
    check_terms,
    parse_query,
    query_mask,
)


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 60
    return pd.DataFrame({
        "model": rng.choice(["a", "b", "c"], n),
        "tom_order": rng.integers(0, 3, n),
        "context_words": rng.choice([200, 500, 1000, 2000], n),
        "correct": rng.integers(0, 2, n),
        "score": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
        "flag": rng.random(n) < 0.5,
        "context words": rng.choice([1, 2, 3], n),
    })


# ---------------------------------------------------------------- valid queries vs pandas

SAME_AS_PANDAS = [
    "tom_order >= 1",
    "tom_order == 2",
    "model == 'a'",
    'model != "b"',
    "model in ['a', 'c']",
    "model not in ('a',)",
    "tom_order in [0, 2]",
    "200 <= context_words < 2000",
    "tom_order >= 1 and correct == 1",
    "tom_order >= 1 & correct == 1",
    "tom_order == 0 | model == 'b'",
    "not (tom_order == 0)",
    "~(model == 'a')",
    "(tom_order == 0 or tom_order == 2) and not model == 'c'",
    "context_words / 100 > 4.5",
    "context_words * 2 - 1 >= 999",
    "context_words // 3 % 2 == 1",
    "tom_order ** 2 >= 4",
    "-tom_order < -1",
    "log(context_words) > 6",
    "sqrt(context_words) >= 30",
    "abs(score) < 0.5",
    "exp(score) > 1",
    "score > 0",
    "score != 0.5",
    "flag",
    "~flag",
    "flag & (tom_order > 0)",
    "`context words` >= 2",
    "`context words` == 1 and model == 'a'",
    "model == 'a & b' or tom_order == 1",
    "tom_order > 0 and tom_order < 2 and context_words > 200",
]


@pytest.mark.parametrize("query", SAME_AS_PANDAS)
def test_query_keeps_the_rows_pandas_keeps(df, query):
    ref = df.query(query, engine="python")
    mask = query_mask(df, query)
    assert mask.dtype == bool
    assert list(df.index[mask]) == list(ref.index)
    assert len(ref) > 0  # each case selects something, so a wrong mask shows


def test_a_column_may_share_a_functions_name():
    frame = pd.DataFrame({"exp": ["x", "y", "x"], "v": [1.0, 2.0, 3.0]})
    assert list(query_mask(frame, "exp == 'x'")) == [True, False, True]
    assert list(query_mask(frame, "exp(v) > 3")) == list(np.exp(frame["v"]) > 3)


def test_missing_values_never_match_a_comparison(df):
    nan_rows = df["score"].isna()
    assert nan_rows.any()
    assert not (query_mask(df, "score > -1e9") & nan_rows).any()
    assert not (query_mask(df, "score <= 1e9") & nan_rows).any()


def test_constant_condition_keeps_all_or_none(df):
    assert query_mask(df, "1 == 1").all()
    assert not query_mask(df, "1 > 2").any()


def test_parse_query_names_the_columns_it_reads():
    q = parse_query("`context words` > 1 and model in ['a'] or log(tom_order) > 0")
    assert q.variables == ("context words", "model", "tom_order")


# ---------------------------------------------------------------- refused queries

REFUSED_QUERY = [
    ("tom_order", "the query must be a condition"),
    ("context_words / 2", "the query must be a condition"),
    ("model", "the query must be a condition"),
    ("'a'", "the query must be a condition"),
    ("tom_ordr == 0", "name 'tom_ordr' is not defined (did you mean 'tom_order'?)"),
    ("zzz == 0", "name 'zzz' is not defined (known: model, tom_order, "),
    ("log == 1", "'log' is a function; call it as log(x)"),
    ("model.str.len() > 1", "attribute access is not allowed"),
    ("model[0] == 'a'", "subscripts are not allowed"),
    ("len(model) > 1", "calls are allowed only to log"),
    ("log(tom_order, 2) > 1", "log() takes exactly one argument"),
    ("(lambda: 1)() == 1", "calls are allowed only to"),
    ("tom_order in [x for x in [1]]", "'in' needs a list of literals"),
    ("[x for x in [1]] == 1", "comprehensions are not allowed"),
    ("tom_order in [tom_order]", "the list after 'in' may hold only literals"),
    ("tom_order in 'abc'", "'in' needs a list of literals"),
    ("tom_order == [1, 2]", "compare with a list using 'in'"),
    ("f'{model}' == 'a'", "f-strings are not allowed"),
    ("(y := 1) == 1", "':=' assignments are not allowed"),
    ("tom_order if flag else 0", "'if ... else' expressions are not allowed"),
    ("{1: 2} == 1", "dictionaries are not allowed"),
    ("tom_order is None", "the operator 'is' is not allowed"),
    ("tom_order ^ 1 == 1", "the operator '^' is not allowed"),
    ("tom_order << 1 == 1", "the operator '<<' is not allowed"),
    ("__import__ == 1", "names starting with '__' are not allowed"),
    ("tom_order in [1] == True", "'in' cannot be chained"),
    ("model + 'x' == 'ax'", "arithmetic needs numbers, not text"),
    ("'a' * 1000000000 == 'b'", "arithmetic needs numbers"),
    ("9 ** 9 ** 9 > 1", "cannot compute"),
    ("1 // 0 == 1", "cannot compute"),
    ("model > 3", "cannot compare"),
    ("tom_order and correct", "'and', 'or' and 'not' need conditions"),
    ("tom_order >=", "not a valid expression"),
    ("`model", "unclosed backtick"),
    ("``", "empty backtick name"),
    ("", "--query is empty"),
    ("   ", "--query is empty"),
    ("b'x' == model", "bytes literals are not allowed"),
    ("tom_order == ...", "ellipsis literals are not allowed"),
]


@pytest.mark.parametrize(("query", "message"), REFUSED_QUERY)
def test_query_outside_the_language_is_one_clear_line(df, query, message):
    with pytest.raises(ExpressionError) as info:
        query_mask(df, query)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert isinstance(info.value, ValueError)  # the command line's exit code 2


def test_duplicate_column_is_refused():
    dup = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.raises(ExpressionError, match="column 'a' appears 2 times"):
        query_mask(dup, "a == 1")


def test_the_field_name_starts_the_message(df):
    with pytest.raises(ExpressionError, match=r"^--where 'tom_ordr > 0': name"):
        query_mask(df, "tom_ordr > 0", field="--where")


# ---------------------------------------------------------------- attacks


def _attacks(marker: Path) -> list[str]:
    cmd = f"touch {marker}"
    return [
        f"tom_order >= (@os.system('{cmd}') * 0)",
        f"tom_order >= (@pd.io.common.os.system('{cmd}') * 0)",
        f"@os.system('{cmd}') == 0",
        f"tom_order >= __import__('os').system('{cmd}') * 0",
        f"tom_order >= (tom_order.__class__.__init__.__globals__['os'].system('{cmd}') * 0)",
        f"tom_order.__class__ == 1 or __builtins__['exec']('open(\"{marker}\", \"w\")')",
        f"tom_order >= (lambda: __import__('os').system('{cmd}'))() * 0",
        f"[__import__('os').system('{cmd}') for _ in [1]] == 1",
        f"tom_order >= exec('import os; os.system(\"{cmd}\")')",
        f"tom_order >= eval(\"__import__('os').system('{cmd}')\")",
        f"tom_order >= open('{marker}', 'w').write('x')",
        f"tom_order >= `__import__`('os').system('{cmd}')",
        f"tom_order >= log.__self__.__class__('{marker}')",
        f"tom_order >= (x := __import__('os')).system('{cmd}')",
        f"tom_order >= f\"{{__import__('os').system('{cmd}')}}\"",
    ]


def test_the_query_attack_is_real_in_pandas(tmp_path):
    """The engine tomstats used before runs the first attack (so the test below can fail)."""
    marker = tmp_path / "PWNED"
    frame = pd.DataFrame({"tom_order": [0, 1]})
    frame.query(_attacks(marker)[0])
    assert marker.exists()


@pytest.mark.parametrize("index", range(15))
def test_query_attacks_are_refused_and_run_nothing(df, tmp_path, index):
    marker = tmp_path / "PWNED"
    attack = _attacks(marker)[index]
    with pytest.raises(ExpressionError) as info:
        query_mask(df, attack)
    assert "\n" not in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("text", [
    "(" * 10_000 + "tom_order" + ")" * 10_000,
    "(" * 300 + "tom_order > 0" + ")" * 300,
    "-" * 5_000 + "tom_order > 0",
    "not " * 2_000 + "flag",
    "tom_order" + " + tom_order" * 700 + " > 0",
    "tom_order > 0" + " and (tom_order > 0" * 60 + ")" * 60,
    "tom_order in [" + ", ".join(["1"] * 3_000) + "]",
])
def test_huge_or_deep_queries_are_bad_input_not_a_crash(df, text):
    if len(text) <= MAX_LENGTH and text.startswith("tom_order in"):
        assert query_mask(df, text).sum() == (df["tom_order"] == 1).sum()
        return
    with pytest.raises(ExpressionError) as info:
        query_mask(df, text)
    msg = str(info.value)
    assert any(s in msg for s in (f"more than {MAX_DEPTH} levels", f"the {MAX_LENGTH} accepted",
                                  "too deeply nested", "not a valid expression")), msg


def test_longest_query_is_accepted_and_one_more_character_is_not(df):
    base = "tom_order >= 0"
    padded = base + " " * (MAX_LENGTH - len(base))
    assert query_mask(df, padded).all()
    with pytest.raises(ExpressionError, match="characters, more than"):
        query_mask(df, padded + " ")


# ---------------------------------------------------------------- formulas

VALID_FORMULAS = [
    "correct ~ tom_order * log_context + (1 | model)",
    "correct ~ tom_order * log_context + (1 | model) + (1 | item)",
    "correct ~ x + (1 + x | model)",
    "correct ~ x + (1 | model) + (0 + x | item)",
    "correct ~ tom_order + (1 + tom_order || model)",
    "correct ~ tom_order + (1 | a/b)",
    "correct ~ tom_order + (1 | a:b)",
    "correct ~ C(tom_order) + log_context",
    "correct ~ C(model) * C(context)",
    "correct ~ C(model, Sum) + C(tom_order, Treatment(0))",
    "correct ~ C(model, levels=['b', 'a', 'c'])",
    "correct ~ C(model, contrasts=Treatment(reference='b'))",
    "correct ~ I(context_len / 1000) + tom_order + (1 | model)",
    "correct ~ I(condition / 10) + tom_order + (1 | model)",
    "k | trials(n) ~ I(context_len / 1000) + language + (1 + I(context_len / 1000) || model)",
    "successes | trials(trials) ~ np.log(context_words) + (1 | model)",
    "correct ~ log(context_words) + sqrt(x) + exp(z) + abs(w)",
    "correct ~ center(x) + scale(log(y)) + standardize(z)",
    "correct ~ poly(x, 2) + scale(x, ddof=1)",
    "correct ~ (x + y) ^ 2",
    "correct ~ x:y + x/y - 1",
    "correct ~ 0 + x",
    "correct ~ -1 + x + (1 | g)",
    "correct ~ I(x ** 2) + I(-x) + I(np.log(x + 1))",
    "correct ~ `tom order` + (1 | `run dir`)",
    "correct ~ 1 + (1 | model)",
]


@pytest.mark.parametrize("formula", VALID_FORMULAS)
def test_valid_formula_splits_as_the_existing_parser_does(formula):
    from tomstats.glmm.spec import parse_formula

    parts = check_formula(formula)
    if "`" in formula:
        assert parts.response == "correct" and parts.random[0][1] == "`run dir`"
        assert "tom order" in parts.variables and "run dir" in parts.variables
        return
    response, trials, fixed, random = parse_formula(formula)
    assert (parts.response, parts.trials) == (response, trials)
    assert " ".join(parts.fixed.split()) == " ".join(fixed.split())
    groups = {t.group.split(":")[0] for t in random}
    assert {g.split("/")[0].split(":")[0] for _, g, _ in parts.random} == groups


#: lme4's binomial left-hand sides, with the (response, trials, failures) each names.
CBIND_FORMULAS = [
    ("cbind(k, n - k) ~ x + (1 + x | g)", ("k", "n", None)),
    ("cbind(k,n-k)~x", ("k", "n", None)),
    ("cbind ( n_correct , n_tries - n_correct ) ~ x + (1 + x || g)",
     ("n_correct", "n_tries", None)),
    ("cbind(k, f) ~ x + (1 | g)", ("k", None, "f")),
    ("cbind(k.ok, k.bad) ~ x", ("k.ok", None, "k.bad")),
    ("cbind(`k ok`, `n all` - `k ok`) ~ x", ("k ok", "n all", None)),
]


@pytest.mark.parametrize(("formula", "names"), CBIND_FORMULAS)
def test_cbind_reads_as_the_fit_rewrites_it(formula, names):
    """check_formula names the columns of cbind() as tomstats.glmm.lme.rewrite_cbind reads
    them: ``cbind(k, n - k)`` is ``k | trials(n)``; ``cbind(k, f)`` adds the trials k + f."""
    from tomstats.glmm.lme import CBIND_TRIALS, rewrite_cbind

    parts = check_formula(formula)
    assert (parts.response, parts.trials, parts.failures) == names
    assert parts.variables[:2] == tuple(c for c in names if c)
    frame = pd.DataFrame({c: [1, 2] for c in names if c})
    rewritten, out = rewrite_cbind(formula, frame)
    again = check_formula(rewritten)
    assert (again.fixed, again.random) == (parts.fixed, parts.random)
    assert again.response == parts.response
    if parts.failures is None:
        assert again.trials == parts.trials and out is frame
    else:
        assert again.trials == CBIND_TRIALS
        np.testing.assert_array_equal(out[CBIND_TRIALS], frame[names[0]] + frame[names[2]])


def _design_data(names, rng):
    """Columns for formulaic: integers 0-2 for ``tom_order``, text for ``C()`` arguments,
    positive floats otherwise."""
    cols = {}
    for name in names:
        if name == "tom_order":
            cols[name] = np.arange(30) % 3
        elif name in ("model", "context"):
            cols[name] = np.array(["a", "b", "c"])[np.arange(30) % 3]
        else:
            cols[name] = rng.uniform(1.0, 5.0, 30)
    return pd.DataFrame(cols)


@pytest.mark.parametrize("formula", [f for f in VALID_FORMULAS if "`" not in f])
def test_formula_variables_are_exactly_the_columns_formulaic_needs(formula):
    """formulaic builds each part from the columns check_terms names, and fails without any
    one of them (formulaic's own required_variables misses those inside center()/scale())."""
    import formulaic

    parts = check_formula(formula)
    rng = np.random.default_rng(3)
    exprs = [parts.fixed] + [expr for expr, _, _ in parts.random]
    for expr in exprs:
        names = check_terms(expr)
        data = _design_data(names, rng)
        mm = formulaic.model_matrix(expr, data, context=FORMULA_CONTEXT)
        assert np.isfinite(np.asarray(mm, dtype=float)).all()
        for name in names:
            with pytest.raises(Exception):  # noqa: B017 - formulaic's own error types
                formulaic.model_matrix(expr, data.drop(columns=name), context=FORMULA_CONTEXT)
    groups = {p for _, g, _ in parts.random for p in g.replace("/", ":").split(":")}
    lhs = {parts.response} | ({parts.trials} if parts.trials else set())
    assert set(parts.variables) == set().union(*map(check_terms, exprs)) | groups | lhs


def test_formula_context_computes_the_allowed_transforms():
    import formulaic

    data = pd.DataFrame({"x": [1.0, 2.0, 4.0], "y": [0, 1, 0]})
    mm = formulaic.model_matrix("np.log(x) + sqrt(x) + I(x / 2)", data,
                                context=FORMULA_CONTEXT)
    np.testing.assert_allclose(mm["np.log(x)"], np.log(data["x"]))
    np.testing.assert_allclose(mm["sqrt(x)"], np.sqrt(data["x"]))
    np.testing.assert_allclose(mm["I(x / 2)"], data["x"] / 2)
    assert not hasattr(FORMULA_CONTEXT["np"], "load")  # only the allowed functions


REFUSED_FORMULA = [
    ("correct tom_order", "expected one '~'"),
    ("correct ~ ", "the right-hand side is empty"),
    ("correct ~ x +", "unexpected 'end of formula'"),
    ("correct ~ x.y", "attribute access is not allowed; write a column with a dot in "
                      "backticks"),
    ("correct ~ np.random.seed(1)", "not a transform"),
    ("correct ~ os.system('id')", "not a transform"),
    ("correct ~ eval('1')", "not a transform"),
    ("correct ~ bs(x, 3)", "not a transform"),
    ("correct ~ I(x.values)", "attribute access is not allowed"),
    ("correct ~ I(x[0])", "subscripts are not allowed"),
    ("correct ~ I(x > 1)", "only arithmetic is allowed here (no comparisons)"),
    ("correct ~ I('a')", "only numbers are allowed as literals here"),
    ("correct ~ I(len(x))", "calls are allowed only to"),
    ("correct ~ I(x, y)", "I() takes exactly one argument"),
    ("correct ~ log(x, base=2)", "log() takes exactly one argument"),
    ("correct ~ C(x + y)", "the first argument of C() must be a column name"),
    ("correct ~ C(x, Evil)", "the contrast must be one of"),
    ("correct ~ C(x, Treatment(y))", "contrast arguments must be literals"),
    ("correct ~ C(x, spans_intercept=False)", "C() takes no keyword 'spans_intercept'"),
    ("correct ~ C(x, levels=[y])", "levels= must be a list of literals"),
    ("correct ~ scale(x, bad=1)", "scale() takes no keyword 'bad'"),
    ("correct ~ poly(x, degree=y)", "the options of poly() must be literals"),
    ("correct ~ poly(x, 10 ** 9)", "the options of poly() must be literals"),
    ("correct ~ poly(x, 1000000000)", "the degree of poly() must be a whole number from 1 to"),
    ("correct ~ poly(x, degree=0)", "the degree of poly() must be a whole number from 1 to"),
    ("correct ~ poly(x, 2.5)", "the degree of poly() must be a whole number from 1 to"),
    ("correct ~ center(*x)", "'*' and '**' arguments are not allowed"),
    ("correct ~ 2 + x", "the number 2 cannot stand as a term"),
    ("correct ~ x ^ y", "'^' needs a whole number"),
    ("correct ~ x * (1 | g)", "a random term (expr | group) may stand only as a term of "
                              "its own, at position 18"),
    ("correct ~ (1 | g) * x", "unexpected '*' at position 19"),
    ("correct ~ x + (x + (1 | g))", "a random term (expr | group) may stand only as a term"),
    ("correct ~ x - (1 | g)", "a random term cannot be removed with '-'"),
    ("correct ~ x + (1 | g + h)", "expected ')'"),
    ("correct ~ x + (1 | log(g))", "the grouping factor of a random term must be a column"),
    ("correct ~ x + ( | g)", "unexpected '|'"),
    ("correct ~ x @ y", "'@' at position 13 is not allowed in a formula"),
    ("correct ~ I(x @ y)", "'@' (a reference to a Python variable) is not allowed"),
    ("correct ~ x; import os", "';' at position 12 is not allowed in a formula"),
    ("correct ~ 'x'", "is not allowed in a formula"),
    ("correct ~ __class__", "names starting with '__' are not allowed"),
    ("correct ~ x %in% y", "'%' at position 13 is not allowed"),
    ("cbind(k, n - m) ~ x", "cbind(k, n - m) must subtract the successes 'k' from the "
                            "trials"),
    ("cbind(k, n + k) ~ x", "the left-hand side must be a column name, 'successes | "
                            "trials(n)', 'cbind(successes, trials - successes)' or "
                            "'cbind(successes, failures)'"),
    ("cbind(k) ~ x", "cbind(k): the left-hand side must be"),
    ("cbind(k, f, g) ~ x", "cbind(k, f, g): the left-hand side must be"),
    ("cbind(k, 10 - k) ~ x", "the left-hand side must be"),
    ("cbind(k, log(n) - k) ~ x", "the left-hand side must be"),
    ("cbind(k, n - k - 1) ~ x", "the left-hand side must be"),
    ("cbind(cbind(a, b), c) ~ x", "the left-hand side must be"),
    ("cbind(k, 'f') ~ x", "the left-hand side must be"),
    ("cbind(k, n.__class__ - k) ~ x", "'n.__class__': names starting with '__' are not"),
    ("cbind(__k, f) ~ x", "'__k': names starting with '__' are not allowed"),
    ("CBIND(k, f) ~ x", "the left-hand side must be"),
    ("cbind(k, n - k) | trials(n) ~ x", "expected '~' at position 17"),
    ("k + cbind(k, f) ~ x", "expected '~'"),
    ("k | trials(n + 1) ~ x", "the left-hand side must be a column name"),
    ("k | n ~ x", "the left-hand side must be a column name"),
    ("correct ~ log(x", "unbalanced '(' at position 14"),
    ("correct ~ x)", "unexpected ')'"),
]


@pytest.mark.parametrize(("formula", "message"), REFUSED_FORMULA)
def test_formula_outside_the_language_is_one_clear_line(formula, message):
    with pytest.raises(ExpressionError) as info:
        check_formula(formula)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def _formula_attacks(marker: Path) -> list[str]:
    cmd = f"touch {marker}"
    return [
        f"correct ~ tom_order + I(pd.io.common.os.system('{cmd}') * 0) + (1|model)",
        f"correct ~ tom_order + I(__import__('os').system('{cmd}') * 0) + (1|model)",
        f"correct ~ I(np.lib.npyio.os.system('{cmd}') * 0)",
        f"correct ~ log(__import__('os').system('{cmd}') + 1)",
        f"correct ~ C(model, Treatment(__import__('os').system('{cmd}')))",
        f"correct ~ C(model, levels=[__import__('os').system('{cmd}')])",
        f"correct ~ scale(x, ddof=__import__('os').system('{cmd}'))",
        f"correct ~ x + (1 | __import__('os').system('{cmd}'))",
        f"correct ~ I((lambda: __import__('os').system('{cmd}'))())",
        f"correct ~ I(x.__class__.__init__.__globals__['os'].system('{cmd}'))",
        f"correct ~ I(`__import__`('os').system('{cmd}'))",
        f"correct | trials(__import__('os').system('{cmd}')) ~ x",
        f"__import__('os').system('{cmd}') ~ x",
        f"correct ~ x + np.lib.npyio.os.system('{cmd}')",
        f"correct ~ I(exec(\"import os; os.system('{cmd}')\"))",
        # inside (and around) lme4's cbind() left-hand side
        f"cbind(k, __import__('os').system('{cmd}')) ~ x",
        f"cbind(k, n - __import__('os').system('{cmd}')) ~ x",
        f"cbind(__import__('os').system('{cmd}'), f) ~ x",
        f"cbind(k, I(__import__('os').system('{cmd}'))) ~ x",
        f"cbind(k, np.lib.npyio.os.system('{cmd}') - k) ~ x",
        f"cbind(k, n.__class__.__init__.__globals__['os'].system('{cmd}') - k) ~ x",
        f"cbind(k, (lambda: __import__('os').system('{cmd}'))()) ~ x",
        f"cbind(k, exec(\"import os; os.system('{cmd}')\")) ~ x",
        f"cbind(k, @os.system('{cmd}')) ~ x",
        f"cbind(k, n - k); __import__('os').system('{cmd}') ~ x",
        f"cbind(k, n - k) ~ x + I(__import__('os').system('{cmd}') * 0)",
        f"cbind(k, n - k) ~ x + (1 | __import__('os').system('{cmd}'))",
        f"cbind(k, `n`) ~ x + I(`__import__`('os').system('{cmd}'))",
        f"cbind(k, n - k, __import__('os').system('{cmd}')) ~ x",
        f"cbind(*__import__('os').system('{cmd}')) ~ x",
    ]


def test_the_formula_attack_is_real_in_formulaic(tmp_path):
    """formulaic evaluates I() as Python (so the test below can fail)."""
    import formulaic

    marker = tmp_path / "PWNED"
    data = pd.DataFrame({"correct": [0, 1], "x": [1.0, 2.0]})
    formulaic.model_matrix(f"x + I(__import__('os').system('touch {marker}') * 0)", data,
                           context={})
    assert marker.exists()


@pytest.mark.parametrize("index", range(30))
def test_formula_attacks_are_refused_and_run_nothing(tmp_path, index):
    marker = tmp_path / "PWNED"
    attack = _formula_attacks(marker)[index]
    with pytest.raises(ExpressionError) as info:
        check_formula(attack)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_cbind_attacks_are_refused_by_the_fits_own_reading(tmp_path):
    """:func:`tomstats.glmm.lme.fit_lme` reads cbind() before the formula check: it refuses
    each attack too, or passes on a formula the check refuses."""
    from tomstats.glmm._hints import InputError
    from tomstats.glmm.lme import rewrite_cbind

    marker = tmp_path / "PWNED"
    frame = pd.DataFrame({"k": [1], "n": [2], "f": [1], "x": [0.5]})
    for attack in [a for a in _formula_attacks(marker) if a.startswith("cbind")]:
        try:
            rewritten, _ = rewrite_cbind(attack, frame)
        except InputError:
            continue
        with pytest.raises(ExpressionError):
            check_formula(rewritten)
    assert not marker.exists()


@pytest.mark.parametrize("text", [
    "correct ~ " + "(" * 5_000 + "x" + ")" * 5_000,
    "correct ~ " + "-" * 5_000 + "x",
    "correct ~ I(" + "(" * 3_000 + "x" + ")" * 3_000 + ")",
    "correct ~ I(" + "-" * 5_000 + "x)",
    "correct ~ x" + " + x" * 3_000,
])
def test_huge_or_deep_formulas_are_bad_input_not_a_crash(text):
    if len(text) <= MAX_LENGTH and text.endswith(" + x"):
        assert check_formula(text).variables == ("correct", "x")  # flat: deep is not long
        return
    with pytest.raises(ExpressionError) as info:
        check_formula(text)
    msg = str(info.value)
    assert any(s in msg for s in (f"more than {MAX_DEPTH} levels", f"the {MAX_LENGTH} accepted",
                                  "too deeply nested")), msg


def test_check_terms_refuses_random_terms_and_names_columns():
    assert check_terms("1 + tom_order + I(x / 2)") == ("tom_order", "x")
    with pytest.raises(ExpressionError, match="may stand only as a term"):
        check_terms("(1 | g)")


def test_check_group_and_check_column():
    assert check_group("a/b") == ("a", "b")
    assert check_group("a:b") == ("a", "b")
    assert check_group("`run dir`") == ("run dir",)
    for bad in ("__import__('os')", "a + b", "log(a)", "a b", ""):
        with pytest.raises(ExpressionError):
            check_group(bad)
    assert check_column("n_correct") == "n_correct"
    for bad in ("correct.__class__", "a b", "__x", "", None, "x(1)"):
        with pytest.raises(ExpressionError, match="is not a column name"):
            check_column(bad, "stored response")


def test_security_docs_state_the_language(repo_root):
    """docs/security.md says what a query and a formula may contain: the same limits, functions,
    transforms and contrasts as the code."""
    text = (repo_root / "docs" / "security.md").read_text(encoding="utf-8")
    section = text[text.index("## Queries and formulas"):]
    assert f"longer than {MAX_LENGTH} characters" in section
    assert f"more than {MAX_DEPTH} levels deep" in section
    assert f"(degree 1 to {MAX_POLY_DEGREE})" in section
    for name in FUNCTIONS:
        assert f"`{name}`" in section, name
    for name in TRANSFORMS - set(FUNCTIONS):
        assert f"`{name}(" in section, name
    for name in CONTRASTS:
        assert f"`{name}`" in section, name
    for form in ("`successes | trials(n) ~ terms`",
                 "`cbind(successes, trials - successes) ~ terms`",
                 "`cbind(successes, failures) ~ terms`"):
        assert form in section, form
        check_formula(form.strip("`").replace("terms", "x"))
