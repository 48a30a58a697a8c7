r"""Row queries and model formulas as a small language: parsed, checked, never handed to ``eval``.

A ``--query`` and a ``--model`` formula come from the user, and a formula also comes back from a
fit file someone else wrote. Both are parsed here into a syntax tree (Python's :mod:`ast` for
expressions, a tokeniser of our own for the formula operators) and only what the language
allows passes:

**Query** (:func:`query_mask`, :func:`parse_query`), evaluated by our own tree walker against
the DataFrame's columns:

- column names: bare identifiers, or any name in backticks (```context words` > 500``);
- literals: numbers, strings, ``True``, ``False``, ``None``;
- comparisons ``== != < <= > >=`` (chained: ``200 <= context_words < 2000``);
- ``in`` / ``not in`` a list or tuple of literals (``model in ['a', 'b']``);
- ``and``, ``or``, ``not`` and their spellings ``&``, ``|``, ``~`` (``&`` and ``|`` have the
  precedence of ``and``/``or``, as in :meth:`pandas.DataFrame.query`);
- arithmetic on numbers ``+ - * / // % **`` and unary ``-``/``+``;
- the functions of :data:`FUNCTIONS` (``log``, ``exp``, ``sqrt``, ``abs`` …) of one argument.

The result must be a condition (a boolean per row); missing values never match. Anything
else (attribute access, subscripts, other calls, ``@`` references to Python variables,
lambdas, comprehensions, f-strings, ``:=``) is refused with :class:`ExpressionError`, one
line naming the offending piece.

**Formula** (:func:`check_formula`, :func:`check_terms`): lme4 syntax
``response ~ terms``, ``successes | trials(n) ~ terms`` or lme4's binomial
``cbind(successes, trials - successes) ~ terms`` / ``cbind(successes, failures) ~ terms``
(column names only inside ``cbind``; :data:`CBIND`); terms are column names (bare or in
backticks), the numbers ``0``/``1``, the operators ``+ - * / : ^ **`` and parentheses, random
terms ``(expr | g)`` / ``(expr || g)`` with ``g`` a column, ``g1:g2`` or ``g1/g2`` at the top
level, and calls of the transforms of :data:`TRANSFORMS`. Inside ``I(...)``, ``log(...)``,
``center(...)``… only arithmetic over columns and numbers and the :data:`FUNCTIONS` are
allowed (the query rules without comparisons); ``C(col)`` takes a column and optionally a
contrast (``Treatment``, ``Sum``, ``Helmert``, ``Diff``, ``Poly``, with literal arguments) and
``levels=[...]`` literals. :data:`FORMULA_CONTEXT` is the only namespace the formula engine
should be given beyond the data.

Sizes are bounded (:data:`MAX_LENGTH` characters, nesting :data:`MAX_DEPTH`), so a hostile
string cannot exhaust the recursion limit or the memory. A formula is also bounded in what it
asks the formula engine to build: ``^ n`` takes ``n`` from 1 to the number of factors of what
it raises (a higher power adds no term: ``x:x`` is ``x``), the terms it expands to are counted
as the parser reads it (at most :data:`MAX_TERMS`, :func:`expand_terms`), and every constant
inside a transform is computed by the checker in floating point and must be finite and at
most :data:`MAX_CONSTANT` in magnitude, so the formula engine, which evaluates a transform
with Python's exact integers, never meets ``9 ** 9 ** 9``.
"""

from __future__ import annotations

import ast
import operator
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import closest_hint

__all__ = ["CBIND", "CONTRASTS", "FORMULA_CONTEXT", "FUNCTIONS", "MAX_CONSTANT", "MAX_DEPTH",
           "MAX_LENGTH", "MAX_POLY_DEGREE", "MAX_TERMS", "TRANSFORMS", "ExpressionError",
           "Factor", "FormulaParts", "Query", "TermExpansion", "check_column", "check_formula",
           "check_group", "check_terms", "expand_terms", "parse_query", "query_mask"]

#: Longest query or formula accepted, in characters.
MAX_LENGTH = 10_000
#: Deepest nesting accepted (syntax-tree levels of a query; parentheses of a formula).
MAX_DEPTH = 50

#: Highest degree of ``poly(x, degree)`` in a formula.
MAX_POLY_DEGREE = 10
#: Most terms a formula's fixed part (or one random term's effects) may expand to: formulaic
#: expands ``a * b``, ``a / b`` and ``(a + b) ^ n`` term by term before building a column.
MAX_TERMS = 1000
#: Largest magnitude of a constant inside a formula transform (a literal, or arithmetic of
#: literals such as ``9 ** 9``), computed by the checker in floating point.
MAX_CONSTANT = 1e100

#: Functions of one number a query (and a formula transform's argument) may call.
FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "log": np.log, "log10": np.log10, "log2": np.log2, "log1p": np.log1p,
    "exp": np.exp, "expm1": np.expm1, "sqrt": np.sqrt, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil,
}
#: Contrast codings ``C(x, <contrast>)`` may name (formulaic's patsy-compatible names).
CONTRASTS = frozenset({"Treatment", "Sum", "Helmert", "Diff", "Poly"})
#: Formula transforms: the :data:`FUNCTIONS`, ``I`` (arithmetic as is), ``C`` (categorical),
#: the stateful ``center``, ``scale``, ``standardize`` and orthogonal ``poly``.
TRANSFORMS = frozenset({*FUNCTIONS, "I", "C", "center", "scale", "standardize", "poly"})
#: Keyword arguments each transform accepts (each takes a literal).
_KEYWORDS: dict[str, frozenset[str]] = {
    "C": frozenset({"levels", "contrasts"}),
    "center": frozenset(),
    "scale": frozenset({"center", "scale", "ddof"}),
    "standardize": frozenset({"center", "rescale", "ddof"}),
    "poly": frozenset({"degree", "raw"}),
}

#: The namespace handed to the formula engine (it shadows the engine's own ``np``): the
#: :data:`FUNCTIONS` by name, and as ``np.<name>`` for formulas written that way.
FORMULA_CONTEXT: dict[str, Any] = {
    **FUNCTIONS,
    "np": types.SimpleNamespace(**FUNCTIONS),
    "numpy": types.SimpleNamespace(**FUNCTIONS),
}


class ExpressionError(ValueError):
    """A query or formula outside the language: one line naming the offending piece."""


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(field: str, text: str, problem: str) -> ExpressionError:
    return ExpressionError(f"{field} {_short(text)!r}: {problem}")


# --------------------------------------------------------------------------- lexing

_PLACEHOLDER = "_q{}bq{}_"


@dataclass(frozen=True)
class _Lexed:
    """An expression with backtick names replaced by placeholders and ``&``/``|`` spelled
    ``and``/``or``."""

    source: str
    names: dict[str, str]


def _string_end(text: str, i: int) -> int:
    """Index just past the string literal opening at ``text[i]`` (a quote character)."""
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(quote)
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j):
            return j + len(quote)
        j += 1
    return len(text)  # unterminated: the parser reports it


def _lex(text: str, field: str, *, booleans: bool) -> _Lexed:
    """Replace `` `name` `` by placeholders; with ``booleans``, ``&``/``|`` by ``and``/``or``.

    Refuses ``@`` (pandas' reference to a Python variable) outside string literals.
    """
    tag = 0
    while _PLACEHOLDER.format(tag, "") in text:
        tag += 1
    out: list[str] = []
    names: dict[str, str] = {}
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            j = _string_end(text, i)
            out.append(text[i:j])
            i = j
        elif ch == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise _fail(field, text, f"unclosed backtick at position {i + 1}")
            name = text[i + 1:j]
            if not name:
                raise _fail(field, text, f"empty backtick name at position {i + 1}")
            key = _PLACEHOLDER.format(tag, len(names))
            names[key] = name
            out.append(f" {key} ")
            i = j + 1
        elif ch == "@":
            raise _fail(field, text, "'@' (a reference to a Python variable) is not allowed; "
                                     "name columns and write values as literals")
        elif booleans and ch in "&|":
            out.append(" and " if ch == "&" else " or ")
            i += 1
        else:
            out.append(ch)
            i += 1
    return _Lexed("".join(out), names)


def _parse(lexed: _Lexed, text: str, field: str) -> ast.Expression:
    """``ast.parse(mode="eval")`` with every failure as one :class:`ExpressionError` line."""
    try:
        tree = ast.parse(lexed.source.strip(), mode="eval")
    except SyntaxError as exc:
        raise _fail(field, text, f"not a valid expression ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise _fail(field, text, "too deeply nested or too large") from None
    _check_depth(tree, text, field)
    return tree


def _check_size(text: object, field: str) -> str:
    if not isinstance(text, str):
        raise ExpressionError(f"{field} must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"{field}: {len(text)} characters, more than the {MAX_LENGTH} "
                              f"accepted")
    if not text.strip():
        raise ExpressionError(f"{field} is empty")
    return text


def _check_depth(tree: ast.AST, text: str, field: str) -> None:
    """Refuse trees deeper than :data:`MAX_DEPTH` (iteratively: no recursion to exhaust)."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _fail(field, text, f"nested more than {MAX_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


# --------------------------------------------------------------------------- checking

_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_OP_TEXT: dict[type, str] = {
    ast.MatMult: "@", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
    ast.BitOr: "|", ast.Is: "is", ast.IsNot: "is not",
}
_WHAT: dict[type, str] = {
    ast.Attribute: "attribute access is", ast.Subscript: "subscripts are",
    ast.Lambda: "lambdas are", ast.ListComp: "comprehensions are",
    ast.SetComp: "comprehensions are", ast.DictComp: "comprehensions are",
    ast.GeneratorExp: "comprehensions are", ast.JoinedStr: "f-strings are",
    ast.FormattedValue: "f-strings are", ast.NamedExpr: "':=' assignments are",
    ast.IfExp: "'if ... else' expressions are", ast.Dict: "dictionaries are",
    ast.Set: "sets are", ast.Starred: "'*' unpacking is", ast.Slice: "slices are",
    ast.Await: "await is", ast.Yield: "yield is", ast.YieldFrom: "yield is",
    ast.List: "lists (except after 'in') are", ast.Tuple: "tuples (except after 'in') are",
}


def _show(node: ast.AST, names: dict[str, str]) -> str:
    """The source of ``node`` as the user wrote it (backtick names restored)."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for a message
        text = type(node).__name__
    for key, name in names.items():
        text = text.replace(key, f"`{name}`")
    return _short(text, 80)


class _Rules:
    """Which nodes an expression may hold; raises :class:`ExpressionError` on the first other.

    ``mode`` is ``"query"`` (comparisons, booleans, ``in``) or ``"arith"`` (arithmetic and
    :data:`FUNCTIONS` only: the argument of a formula transform).
    """

    def __init__(self, text: str, field: str, names: dict[str, str], mode: str) -> None:
        self.text, self.field, self.names, self.mode = text, field, names, mode
        self.variables: list[str] = []

    def refuse(self, node: ast.AST, problem: str) -> ExpressionError:
        return _fail(self.field, self.text, f"{problem}: {_show(node, self.names)}")

    def check(self, node: ast.AST) -> None:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            what = _WHAT.get(type(node), f"{type(node).__name__} expressions are")
            raise self.refuse(node, f"{what} not allowed")
        method(node)

    def _Expression(self, node: ast.Expression) -> None:
        self.check(node.body)

    def _Name(self, node: ast.Name) -> None:
        name = self.names.get(node.id, node.id)
        if node.id.startswith("__") and node.id not in self.names:
            raise self.refuse(node, "names starting with '__' are not allowed")
        self.variables.append(name)

    def _Constant(self, node: ast.Constant) -> None:
        value = node.value
        if self.mode == "arith":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.refuse(node, "only numbers are allowed as literals here")
        elif not (value is None or isinstance(value, (bool, int, float, str))):
            raise self.refuse(node, f"{type(value).__name__} literals are not allowed")

    def _UnaryOp(self, node: ast.UnaryOp) -> None:
        if self.mode == "arith" and isinstance(node.op, (ast.Not, ast.Invert)):
            raise self.refuse(node, "only arithmetic is allowed here")
        self.check(node.operand)

    def _BinOp(self, node: ast.BinOp) -> None:
        if type(node.op) not in _ARITH:
            raise self.refuse(node, f"the operator {_OP_TEXT.get(type(node.op), '?')!r} is "
                                    f"not allowed")
        self.check(node.left)
        self.check(node.right)

    def _BoolOp(self, node: ast.BoolOp) -> None:
        if self.mode == "arith":
            raise self.refuse(node, "only arithmetic is allowed here")
        for value in node.values:
            self.check(value)

    def _Compare(self, node: ast.Compare) -> None:
        if self.mode == "arith":
            raise self.refuse(node, "only arithmetic is allowed here (no comparisons)")
        self.check(node.left)
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)) and len(node.ops) > 1:
                raise self.refuse(node, "'in' cannot be chained with other comparisons; "
                                        "join them with 'and'")
            if isinstance(op, (ast.In, ast.NotIn)):
                self._members(right)
            elif type(op) in _COMPARE:
                if isinstance(right, (ast.List, ast.Tuple)):
                    raise self.refuse(right, "compare with a list using 'in', e.g. "
                                             "\"model in ['a', 'b']\"")
                self.check(right)
            else:
                raise self.refuse(node, f"the operator {_OP_TEXT.get(type(op), '?')!r} is "
                                        f"not allowed")

    def _members(self, node: ast.AST) -> None:
        if not isinstance(node, (ast.List, ast.Tuple)):
            raise self.refuse(node, "'in' needs a list of literals, e.g. \"model in ['a', "
                                    "'b']\"")
        for elt in node.elts:
            if not _is_literal(elt):
                raise self.refuse(elt, "the list after 'in' may hold only literals")

    def _Call(self, node: ast.Call) -> None:
        func = node.func
        name = _function_name(func, self.names, numpy=self.mode == "arith")
        if name is None and isinstance(func, ast.Attribute):
            raise self.refuse(func, "attribute access is not allowed")
        if name is None:
            raise self.refuse(node, f"calls are allowed only to {', '.join(FUNCTIONS)}")
        if node.keywords or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
            raise self.refuse(node, f"{name}() takes exactly one argument")
        self.check(node.args[0])


def _function_name(func: ast.AST, names: dict[str, str], *, numpy: bool) -> str | None:
    """The :data:`FUNCTIONS` name a call's ``func`` names (``np.log`` too when ``numpy``)."""
    if isinstance(func, ast.Name) and func.id in FUNCTIONS and func.id not in names:
        return func.id
    if (numpy and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in ("np", "numpy") and func.attr in FUNCTIONS):
        return func.attr
    return None


def _is_literal(node: ast.AST) -> bool:
    """A number, string, bool or None literal (a negative number too)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool)
    return isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, int, float, str)))


def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(node)


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    """A checked query: its text, syntax tree, backtick names and the names it reads.

    Attributes
    ----------
    text : str
        The query as given.
    field : str
        What the query is called in messages (``"--query"``).
    tree : ast.Expression
        The checked syntax tree (backtick names as placeholders).
    names : dict
        Placeholder → column name of each backtick name.
    variables : tuple of str
        Column names the query reads, in order of first use.
    """

    text: str
    field: str
    tree: ast.Expression
    names: dict[str, str]
    variables: tuple[str, ...]


def parse_query(text: str, field: str = "--query") -> Query:
    """Parse and check a query (see the module docstring for the language).

    Raises
    ------
    ExpressionError
        Anything outside the language, a syntax error, or a query longer than
        :data:`MAX_LENGTH` or nested deeper than :data:`MAX_DEPTH`; one line naming the piece.
    """
    _check_size(text, field)
    lexed = _lex(text, field, booleans=True)
    tree = _parse(lexed, text, field)
    rules = _Rules(text, field, lexed.names, "query")
    rules.check(tree)
    return Query(text, field, tree, lexed.names, tuple(dict.fromkeys(rules.variables)))


def query_mask(df: pd.DataFrame, query: str | Query, field: str = "--query") -> pd.Series:
    """The rows of ``df`` that satisfy ``query``, as a boolean Series on ``df``'s index.

    Missing values never match (a comparison with a missing value is false).

    Raises
    ------
    ExpressionError
        A query outside the language (:func:`parse_query`), a name that is not a column
        (with the closest column), an operation the values do not support (a string
        compared with a number), or a query whose value is not a condition.
    """
    q = query if isinstance(query, Query) else parse_query(query, field)
    value = _Evaluator(q, df).eval(q.tree.body)
    if isinstance(value, (bool, np.bool_)):
        return pd.Series(bool(value), index=df.index)
    if isinstance(value, pd.Series) and pd.api.types.is_bool_dtype(value.dtype):
        return value.fillna(False).astype(bool)
    kind = _kind(value)
    raise _fail(q.field, q.text, f"the query must be a condition, e.g. \"tom_order >= 1\" or "
                                 f"\"model in ['a', 'b']\"; this one gives {kind}")


def _kind(value: Any) -> str:
    if isinstance(value, pd.Series):
        if pd.api.types.is_bool_dtype(value.dtype):
            return "true/false values"
        if pd.api.types.is_numeric_dtype(value.dtype):
            return "numbers"
        if pd.api.types.is_string_dtype(value.dtype):
            return "text"
        return f"values of type {value.dtype}"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"the single value {value!r}"


class _Evaluator:
    """Evaluate a checked query tree against ``df`` (the only place values are computed)."""

    def __init__(self, q: Query, df: pd.DataFrame) -> None:
        self.q, self.df = q, df

    def error(self, node: ast.AST, problem: str) -> ExpressionError:
        return _fail(self.q.field, self.q.text, f"{problem}: {_show(node, self.q.names)}")

    def eval(self, node: ast.AST) -> Any:
        return getattr(self, f"_{type(node).__name__}")(node)

    def _Name(self, node: ast.Name) -> Any:
        name = self.q.names.get(node.id, node.id)
        if name not in self.df.columns and name in FUNCTIONS and node.id not in self.q.names:
            raise self.error(node, f"{name!r} is a function; call it as {name}(x)")
        if name not in self.df.columns:
            raise _fail(self.q.field, self.q.text, f"name {name!r} is not defined"
                        f"{closest_hint(name, map(str, self.df.columns))}")
        col = self.df[name]
        if isinstance(col, pd.DataFrame):
            raise _fail(self.q.field, self.q.text, f"column {name!r} appears "
                        f"{col.shape[1]} times in the data")
        return col

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, (ast.Not, ast.Invert)):
            return ~self._boolean(value, node.operand) if isinstance(value, pd.Series) \
                else not self._boolean(value, node.operand)
        self._numeric(value, node.operand)
        return -value if isinstance(node.op, ast.USub) else +value

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.eval(node.left), self.eval(node.right)
        self._numeric(left, node.left)
        self._numeric(right, node.right)
        scalars = not isinstance(left, pd.Series) and not isinstance(right, pd.Series)
        if scalars and isinstance(node.op, ast.Pow):
            left, right = float(left), float(right)  # no unbounded integer powers
        try:
            with np.errstate(all="ignore"):
                out = _ARITH[type(node.op)](left, right)
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise self.error(node, f"cannot compute ({_reason(exc)})") from None
        if isinstance(out, complex) or (isinstance(out, pd.Series)
                                        and pd.api.types.is_complex_dtype(out.dtype)):
            # Python's (-1.0) ** 0.5 is a complex number; the query language has real numbers
            raise self.error(node, "cannot compute (a negative number to a fractional power "
                                   "has no real value)")
        return out

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self._boolean(self.eval(v), v) for v in node.values]
        combine = operator.and_ if isinstance(node.op, ast.And) else operator.or_
        out = values[0]
        for v in values[1:]:
            out = combine(out, v)
        return out

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        out: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                members = [_literal(e) for e in right_node.elts]  # type: ignore[attr-defined]
                hit = left.isin(members) if isinstance(left, pd.Series) else left in members
                result = ~hit if isinstance(op, ast.NotIn) else hit
                right = None
            else:
                right = self.eval(right_node)
                try:
                    result = _COMPARE[type(op)](left, right)
                except (TypeError, ValueError) as exc:
                    raise self.error(node, f"cannot compare ({_reason(exc)})") from None
            if isinstance(result, pd.Series):
                result = result.fillna(False).astype(bool)
            out = out & result if out is not True else result
            left = right
        return out

    def _Call(self, node: ast.Call) -> Any:
        arg = self.eval(node.args[0])
        self._numeric(arg, node.args[0])
        with np.errstate(all="ignore"):
            return FUNCTIONS[node.func.id](arg)  # type: ignore[attr-defined]

    def _boolean(self, value: Any, node: ast.AST) -> Any:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, pd.Series) and pd.api.types.is_bool_dtype(value.dtype):
            return value.fillna(False).astype(bool)
        raise self.error(node, f"'and', 'or' and 'not' need conditions, not {_kind(value)}")

    def _numeric(self, value: Any, node: ast.AST) -> None:
        if isinstance(value, pd.Series):
            ok = pd.api.types.is_numeric_dtype(value.dtype) \
                and not pd.api.types.is_bool_dtype(value.dtype)
        else:
            ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
        if not ok:
            raise self.error(node, f"arithmetic needs numbers, not {_kind(value)}")


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:120] or type(exc).__name__


# --------------------------------------------------------------------------- formulas


@dataclass(frozen=True)
class FormulaParts:
    """A checked lme4-style formula.

    Attributes
    ----------
    response : str
        Column of the outcome (or of the successes).
    trials : str or None
        Column of the trials of ``successes | trials(n) ~ ...``.
    fixed : str
        The fixed part (top-level terms that are not random terms, joined by ``+``; ``"1"``
        when there are none).
    random : tuple of (str, str, bool)
        ``(expr, group, correlated)`` of each random term as written (``g1/g2`` not expanded).
    variables : tuple of str
        Every column the formula reads (response, trials, predictors, groups), in order.
    failures : str or None
        Column of the failures of ``cbind(successes, failures) ~ ...`` (``cbind(k, n - k)``
        gives ``trials="n"`` instead).
    """

    response: str
    trials: str | None
    fixed: str
    random: tuple[tuple[str, str, bool], ...]
    variables: tuple[str, ...]
    failures: str | None = None


#: One term of a formula: the keys (:attr:`Factor.key`) of the factors it multiplies; the
#: empty term is the intercept.
Term = frozenset[str]


@dataclass(frozen=True)
class Factor:
    """One factor of a formula's terms, as the parser read it.

    Attributes
    ----------
    key : str
        The factor as written, spaces removed (``x``, `` `tom order` ``, ``C(model,Sum)``).
    kind : {"column", "categorical", "poly", "transform"}
        A bare column (numeric: one design column; text, boolean or categorical: one per
        level), ``C(col)`` (one per level), ``poly(x, d)`` (``d`` columns) or any other
        transform (one column).
    column : str or None
        The column of a bare name, of ``C(col)``.
    width : int or None
        The degree of ``poly``, the number of ``levels=[...]`` of ``C``.
    """

    key: str
    kind: str
    column: str | None = None
    width: int | None = None


@dataclass(frozen=True)
class TermExpansion:
    """The terms a right-hand side expands to (before any data are read).

    Attributes
    ----------
    terms : tuple of frozenset of str
        Each term's factor keys (the intercept is the empty term), at most :data:`MAX_TERMS`.
    factors : dict
        Key → :class:`Factor`.
    """

    terms: tuple[Term, ...]
    factors: dict[str, Factor]


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?)|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)"
                    r"|(?P<tick>`[^`]*`)|(?P<op>\|\||\*\*|[-+*/:^|~()]))")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num", "name", "tick", "op", "call", "end"
    text: str
    pos: int


def _call_end(text: str, start: int, field: str, formula: str) -> int:
    """Index just past the ``)`` closing the call whose ``(`` is at ``start``."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            i = _string_end(text, i)
            continue
        if ch == "`":
            j = text.find("`", i + 1)
            i = len(text) if j < 0 else j + 1
            continue
        if ch == "(":
            depth += 1
            if depth > MAX_DEPTH:
                raise _fail(field, formula, f"nested more than {MAX_DEPTH} levels deep")
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _fail(field, formula, f"unbalanced '(' at position {start + 1}")


def _tokens(text: str, field: str) -> list[_Tok]:
    """Tokens of a formula; a name followed by ``(`` becomes one ``call`` token."""
    out: list[_Tok] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        m = _TOKEN.match(text, i)
        if m is None or m.end() == i:
            raise _fail(field, text, f"{text[i]!r} at position {i + 1} is not allowed in a "
                                     f"formula")
        kind = m.lastgroup or "op"
        start = m.start(kind)
        if kind == "name":
            j = m.end()
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and text[j] == "(":
                end = _call_end(text, j, field, text)
                out.append(_Tok("call", text[start:end], start))
                i = end
                continue
        out.append(_Tok(kind, m.group(kind), start))
        i = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


class _FormulaParser:
    """Recursive descent over formula tokens; collects variables and top-level terms."""

    def __init__(self, text: str, field: str) -> None:
        self.text, self.field = text, field
        self.toks = _tokens(text, field)
        self.i = 0
        self.depth = 0
        self.variables: list[str] = []
        self.factors: dict[str, Factor] = {}

    # -- helpers
    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, problem: str) -> ExpressionError:
        return _fail(self.field, self.text, problem)

    def expect(self, op: str) -> None:
        tok = self.take()
        if tok.text != op or tok.kind != "op":
            raise self.error(f"expected {op!r} at position {tok.pos + 1}, found "
                             f"{tok.text or 'the end'!r}")

    def slice(self, a: int, b: int) -> str:
        """The source text from token ``a`` to just before token ``b``."""
        start = self.toks[a].pos
        end = self.toks[b].pos if b < len(self.toks) else len(self.text)
        return self.text[start:end].strip()

    # -- grammar
    def terms(self) -> tuple[str, tuple[tuple[str, str, bool], ...]]:
        """``rhs := term (('+'|'-') term)*`` at the top level, random terms split off."""
        fixed: list[str] = []
        random: list[tuple[str, str, bool]] = []
        sign = ""
        expanded: frozenset[Term] = frozenset()
        while True:
            start = self.i
            rand = self.random_term()
            if rand is not None:
                if sign == "-":
                    raise self.error(f"a random term cannot be removed with '-': "
                                     f"{self.slice(start, self.i)}")
                random.append(rand)
            else:
                expanded = self.bounded(expanded | self.product())
                fixed.append(f"{sign} {self.slice(start, self.i)}" if sign == "-"
                             else self.slice(start, self.i))
            tok = self.peek()
            if tok.kind == "op" and tok.text in ("+", "-"):
                sign = self.take().text
                continue
            break
        body = " + ".join(fixed).replace("+ - ", "- ")
        return body or "1", tuple(random)

    def random_term(self) -> tuple[str, str, bool] | None:
        """``(expr | g)`` or ``(expr || g)`` when the parenthesis holds a top-level bar."""
        if not (self.peek().kind == "op" and self.peek().text == "("):
            return None
        depth, j, bar = 0, self.i, None
        while self.toks[j].kind != "end":
            t = self.toks[j]
            if t.kind == "op" and t.text == "(":
                depth += 1
            elif t.kind == "op" and t.text == ")":
                depth -= 1
                if depth == 0:
                    break
            elif depth == 1 and t.kind == "op" and t.text in ("|", "||") and bar is None:
                bar = j
            j += 1
        if bar is None:
            return None
        self.take()  # "("
        start = self.i
        self.sum()
        if self.i != bar:
            raise self.error(f"unexpected {self.peek().text!r} at position "
                             f"{self.peek().pos + 1}")
        expr = self.slice(start, self.i)
        correlated = self.take().text == "|"
        group = self.group()
        self.expect(")")
        return " ".join(expr.split()), group, correlated

    def group(self) -> str:
        """``g := name ((':'|'/') name)*``: the grouping factor of a random term."""
        parts: list[str] = []
        while True:
            tok = self.take()
            if tok.kind not in ("name", "tick"):
                raise self.error(f"the grouping factor of a random term must be a column name "
                                 f"(or g1:g2, g1/g2), found {tok.text or 'the end'!r} at "
                                 f"position {tok.pos + 1}")
            name = tok.text[1:-1] if tok.kind == "tick" else tok.text
            if tok.kind == "name" and any(p.startswith("__") for p in name.split(".")):
                raise self.error(f"{name!r}: names starting with '__' are not allowed")
            self.variables.append(name)
            parts.append(tok.text)
            nxt = self.peek()
            if nxt.kind == "op" and nxt.text in (":", "/"):
                parts.append(self.take().text)
                continue
            return "".join(parts)

    # -- the term algebra (what formulaic expands), counted as it is read
    def bounded(self, terms: frozenset[Term]) -> frozenset[Term]:
        """``terms``, refused when more than :data:`MAX_TERMS`."""
        if len(terms) > MAX_TERMS:
            raise self.error(f"expands to more than {MAX_TERMS} terms (products and powers "
                             f"multiply the terms); write the interactions you need")
        return terms

    def interact(self, a: frozenset[Term], b: frozenset[Term]) -> frozenset[Term]:
        """``a : b``: every term of ``a`` with every term of ``b``."""
        if len(a) * len(b) > 100 * MAX_TERMS:
            raise self.error(f"expands to more than {MAX_TERMS} terms ({len(a)} × {len(b)} "
                             f"terms multiplied); write the interactions you need")
        return self.bounded(frozenset(x | y for x in a for y in b))

    def sum(self) -> frozenset[Term]:
        """``sum := product (('+'|'-') product)*``; a removed term still counts (formulaic
        expands it before removing it)."""
        out = self.product()
        while self.peek().kind == "op" and self.peek().text in ("+", "-"):
            self.take()
            out = self.bounded(out | self.product())
        return out

    def product(self) -> frozenset[Term]:
        """``product := power (('*'|'/'|':') power)*``: ``a*b`` is ``a + b + a:b``, ``a/b``
        is ``a + (all of a):b``."""
        out = self.power()
        while self.peek().kind == "op" and self.peek().text in ("*", "/", ":"):
            op = self.take().text
            right = self.power()
            if op == ":":
                out = self.interact(out, right)
            elif op == "*":
                out = self.bounded(out | right | self.interact(out, right))
            else:
                whole = frozenset([frozenset().union(*out)])
                out = self.bounded(out | self.interact(whole, right))
        return out

    def power(self) -> frozenset[Term]:
        """``power := atom (('^'|'**') n)?`` with ``n`` from 1 to the number of factors of
        the atom: ``(a + b) ^ 2`` is ``a + b + a:b``; a higher power adds no term."""
        start = self.i
        base = self.atom()
        if not (self.peek().kind == "op" and self.peek().text in ("^", "**")):
            return base
        self.take()
        tok = self.take()
        if tok.kind != "num" or not tok.text.isdigit():
            raise self.error(f"'^' needs a whole number after it, found "
                             f"{tok.text or 'the end'!r}")
        factors = len(frozenset().union(*base))
        n = int(tok.text) if len(tok.text) <= 6 else MAX_TERMS * MAX_LENGTH
        if not 1 <= n <= max(factors, 1):
            shown = _short(self.slice(start, self.i - 2), 60)
            square = (f", or I({shown} ** {tok.text}) for the arithmetic power"
                      if factors == 1 and len(tok.text) <= 2 else "")
            raise self.error(f"'^ {_short(tok.text, 20)}' on {shown}: the power must be a "
                             f"whole number from 1 to the {factors} factor(s) it raises (a "
                             f"higher power adds no term: x:x is x){square}")
        out = base
        for _ in range(n - 1):
            out = self.bounded(out | self.interact(out, base))
        return out

    def factor(self, factor: Factor) -> frozenset[Term]:
        """The one term of one factor (recorded under its key)."""
        self.factors.setdefault(factor.key, factor)
        return frozenset([frozenset([factor.key])])

    def atom(self) -> frozenset[Term]:
        tok = self.take()
        if tok.kind == "name":
            if "." in tok.text:
                raise self.error(f"{tok.text!r}: attribute access is not allowed; write a "
                                 f"column with a dot in backticks: `{tok.text}`")
            if tok.text.startswith("__"):
                raise self.error(f"{tok.text!r}: names starting with '__' are not allowed")
            self.variables.append(tok.text)
            return self.factor(Factor(tok.text, "column", tok.text))
        if tok.kind == "tick":
            self.variables.append(tok.text[1:-1])
            return self.factor(Factor(tok.text, "column", tok.text[1:-1]))
        if tok.kind == "num":
            if tok.text not in ("0", "1"):
                raise self.error(f"the number {tok.text} cannot stand as a term (only 0 and "
                                 f"1: without or with an intercept)")
            return frozenset([frozenset()]) if tok.text == "1" else frozenset()
        if tok.kind == "call":
            call = _check_call(tok.text, self.field, self.text)
            self.variables.extend(call.variables)
            return self.factor(call.factor)
        if tok.kind == "op" and tok.text == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error(f"nested more than {MAX_DEPTH} levels deep")
            out = self.sum()
            if self.peek().kind == "op" and self.peek().text in ("|", "||"):
                raise self.error(f"a random term (expr | group) may stand only as a term of "
                                 f"its own, at position {self.peek().pos + 1}")
            self.expect(")")
            self.depth -= 1
            return out
        if tok.kind == "op" and tok.text == "-":
            self.depth += 1  # "-1" removes the intercept
            if self.depth > MAX_DEPTH:
                raise self.error(f"nested more than {MAX_DEPTH} levels deep")
            out = self.atom()
            self.depth -= 1
            return out
        else:
            raise self.error(f"unexpected {tok.text or 'end of formula'!r} at position "
                             f"{tok.pos + 1}")


@dataclass(frozen=True)
class _CallInfo:
    """A checked transform call: the columns it reads and the factor it makes."""

    variables: list[str]
    factor: Factor


def _check_call(call: str, field: str, formula: str) -> _CallInfo:
    """Check one transform call ``name(...)`` of a formula; return the columns it reads and
    its :class:`Factor`."""
    lexed = _lex(call, field, booleans=False)
    try:
        tree = ast.parse(lexed.source.strip(), mode="eval")
    except SyntaxError as exc:
        raise _fail(field, formula, f"{_short(call, 80)}: not a valid call ({exc.msg})") \
            from None
    except (RecursionError, MemoryError, ValueError):
        raise _fail(field, formula, "too deeply nested or too large") from None
    _check_depth(tree, formula, field)
    node = tree.body
    rules = _Rules(formula, field, lexed.names, "arith")
    if not isinstance(node, ast.Call):
        raise rules.refuse(node, "not a transform call")
    name = _transform_name(node.func, rules)
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords):
        raise rules.refuse(node, "'*' and '**' arguments are not allowed")
    key = "".join(call.split())
    if name in FUNCTIONS or name == "I":
        if len(node.args) != 1 or node.keywords:
            raise rules.refuse(node, f"{name}() takes exactly one argument")
        rules.check(node.args[0])
        _fold_constants(node.args[0], rules)
        return _CallInfo(rules.variables, Factor(key, "transform"))
    if name == "C":
        _check_categorical(node, rules)
        levels = [k.value for k in node.keywords if k.arg == "levels"]
        width = len(levels[0].elts) if levels else None  # type: ignore[attr-defined]
        return _CallInfo(rules.variables, Factor(key, "categorical", rules.variables[0],
                                                 width))
    _check_stateful(node, name, rules)
    _fold_constants(node.args[0], rules)
    if name == "poly":
        degree = node.args[1:] + [k.value for k in node.keywords if k.arg == "degree"]
        return _CallInfo(rules.variables, Factor(key, "poly", None,
                                                 int(_literal(degree[0])) if degree else 1))
    return _CallInfo(rules.variables, Factor(key, "transform"))


def _fold_constants(node: ast.AST, rules: _Rules) -> float | None:
    """The value of ``node`` when it holds no column (else ``None``), computed in floating
    point; every constant part must be a finite number of magnitude at most
    :data:`MAX_CONSTANT`.

    The formula engine evaluates a transform with Python's exact integers, for which
    ``9 ** 9 ** 9`` runs for minutes and takes gigabytes; here it is an overflow, refused in
    microseconds. ``node`` has passed :class:`_Rules` in ``"arith"`` mode (numbers, columns,
    arithmetic, :data:`FUNCTIONS`) and :func:`_check_depth`.
    """
    value: Any
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.UnaryOp):
        inner = _fold_constants(node.operand, rules)
        if inner is None:
            return None
        value = -inner if isinstance(node.op, ast.USub) else inner
    elif isinstance(node, ast.BinOp):
        left, right = _fold_constants(node.left, rules), _fold_constants(node.right, rules)
        if left is None or right is None:
            return None
        try:
            value = _ARITH[type(node.op)](left, right)
        except ZeroDivisionError:
            raise rules.refuse(node, "divides by zero") from None
        except OverflowError:
            value = float("inf")
    elif isinstance(node, ast.Call):
        arg = _fold_constants(node.args[0], rules)
        if arg is None:
            return None
        name = _function_name(node.func, rules.names, numpy=True)
        with np.errstate(all="ignore"):
            value = FUNCTIONS[name or ""](np.float64(arg))
    else:
        return None  # a column
    if isinstance(value, complex):
        raise rules.refuse(node, "is not a real number")
    try:
        value = float(value)
    except OverflowError:
        value = float("inf")
    if not (np.isfinite(value) and abs(value) <= MAX_CONSTANT):
        raise rules.refuse(node, f"the constant is {value:g}; a constant in a formula must be "
                                 f"a finite number of magnitude at most {MAX_CONSTANT:g} "
                                 f"(it is computed in floating point)")
    return value


def _transform_name(func: ast.AST, rules: _Rules) -> str:
    """The transform a call names: ``C``, ``I``, ``log`` … or ``np.log`` for a function."""
    if isinstance(func, ast.Name) and func.id in TRANSFORMS and func.id not in rules.names:
        return func.id
    name = _function_name(func, rules.names, numpy=True)
    if name is not None:
        return name
    raise rules.refuse(func, f"not a transform; a formula may call only "
                             f"{', '.join(sorted(TRANSFORMS))} (and np.<function> for "
                             f"{', '.join(FUNCTIONS)})")


def _check_categorical(node: ast.Call, rules: _Rules) -> None:
    """``C(col)``, ``C(col, Sum)``, ``C(col, Treatment('a'))``, ``C(col, levels=[...])``."""
    if not 1 <= len(node.args) <= 2:
        raise rules.refuse(node, "C() takes a column and optionally a contrast")
    column = node.args[0]
    if not isinstance(column, ast.Name):
        raise rules.refuse(column, "the first argument of C() must be a column name")
    rules.check(column)
    contrasts = node.args[1:] + [k.value for k in node.keywords if k.arg == "contrasts"]
    for k in node.keywords:
        if k.arg not in _KEYWORDS["C"]:
            raise rules.refuse(node, f"C() takes no keyword {k.arg!r} (only levels=, "
                                     f"contrasts=)")
        if k.arg == "levels" and not (isinstance(k.value, (ast.List, ast.Tuple))
                                      and all(_is_literal(e) for e in k.value.elts)):
            raise rules.refuse(k.value, "levels= must be a list of literals")
    for c in contrasts:
        target = c.func if isinstance(c, ast.Call) else c
        if not (isinstance(target, ast.Name) and target.id in CONTRASTS):
            raise rules.refuse(c, f"the contrast must be one of {', '.join(sorted(CONTRASTS))}")
        if isinstance(c, ast.Call) and not all(
                _is_literal(a) for a in [*c.args, *(k.value for k in c.keywords)]):
            raise rules.refuse(c, "contrast arguments must be literals")


def _check_stateful(node: ast.Call, name: str, rules: _Rules) -> None:
    """``center(x)``, ``scale(x, ddof=1)``, ``standardize(x)``, ``poly(x, 2)``."""
    most = 2 if name == "poly" else 1
    if not 1 <= len(node.args) <= most:
        raise rules.refuse(node, f"{name}() takes one expression"
                                 + (" and a degree" if name == "poly" else ""))
    rules.check(node.args[0])
    extra = node.args[1:]
    for k in node.keywords:
        if k.arg not in _KEYWORDS[name]:
            allowed = ", ".join(f"{a}=" for a in sorted(_KEYWORDS[name])) or "none"
            raise rules.refuse(node, f"{name}() takes no keyword {k.arg!r} (allowed: "
                                     f"{allowed})")
        extra.append(k.value)
    for value in extra:
        if not _is_literal(value):
            raise rules.refuse(value, f"the options of {name}() must be literals")
    if name == "poly":
        degree = node.args[1:] + [k.value for k in node.keywords if k.arg == "degree"]
        for d in degree:
            v = _literal(d)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_POLY_DEGREE:
                raise rules.refuse(d, f"the degree of poly() must be a whole number from 1 to "
                                      f"{MAX_POLY_DEGREE}")


#: A column name on the left-hand side: bare (letters, digits, ``_``, ``.``) or in backticks.
_LHS_NAME = r"(`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)"
_TRIALS_CALL = re.compile(rf"^trials\s*\(\s*{_LHS_NAME}\s*\)$")
#: lme4's binomial response: ``cbind(k, n - k)`` (groups 1-3) or ``cbind(k, f)`` (1 and 4).
CBIND = re.compile(rf"^cbind\s*\(\s*{_LHS_NAME}\s*,\s*(?:{_LHS_NAME}\s*-\s*{_LHS_NAME}|"
                   rf"{_LHS_NAME})\s*\)$")
_LHS_FORMS = ("the left-hand side must be a column name, 'successes | trials(n)', "
              "'cbind(successes, trials - successes)' or 'cbind(successes, failures)'")


def _lhs_name(parser: _FormulaParser, text: str) -> str:
    """A left-hand-side column name without its backticks (no name starting with ``__``)."""
    name = text[1:-1] if text.startswith("`") else text
    if not text.startswith("`") and any(p.startswith("__") for p in name.split(".")):
        raise parser.error(f"{name!r}: names starting with '__' are not allowed")
    return name


def _cbind(parser: _FormulaParser, call: _Tok) -> tuple[str, str | None, str | None]:
    """``cbind(k, n - k)`` → ``(k, n, None)``; ``cbind(k, f)`` → ``(k, None, f)``."""
    m = CBIND.match(call.text)
    if m is None:
        raise parser.error(f"{_short(call.text, 60)}: {_LHS_FORMS}")
    k = _lhs_name(parser, m.group(1))
    n, k2, f = (None if g is None else _lhs_name(parser, g) for g in m.groups()[1:])
    if n is not None and k2 != k:
        raise parser.error(f"cbind({k}, {n} - {k2}) must subtract the successes {k!r} from "
                           f"the trials")
    return k, n, f


def _lhs(parser: _FormulaParser) -> tuple[str, str | None, str | None]:
    """``response``, ``successes | trials(n)``, ``cbind(successes, trials - successes)`` or
    ``cbind(successes, failures)``: (response, trials, failures)."""
    tok = parser.take()
    if tok.kind == "call" and re.match(r"cbind\s*\(", tok.text):
        response, trials, failures = _cbind(parser, tok)
    elif tok.kind not in ("name", "tick"):
        raise parser.error(_LHS_FORMS)
    else:
        response, trials, failures = _lhs_name(parser, tok.text), None, None
        if parser.peek().kind == "op" and parser.peek().text == "|":
            parser.take()
            call = parser.take()
            m = _TRIALS_CALL.match(call.text) if call.kind == "call" else None
            if m is None:
                raise parser.error(_LHS_FORMS)
            trials = _lhs_name(parser, m.group(1))
    parser.variables.extend([response] + [c for c in (trials, failures) if c])
    return response, trials, failures


def check_formula(formula: str, field: str = "formula") -> FormulaParts:
    """Check an lme4-style formula (see the module docstring) and split it into its parts.

    ``"correct ~ tom_order * log_context + (1 | model)"`` gives
    ``FormulaParts("correct", None, "tom_order * log_context", (("1", "model", True),),
    ("correct", "tom_order", "log_context", "model"))``.

    Raises
    ------
    ExpressionError
        Anything outside the formula language, one line naming the offending piece.
    """
    _check_size(formula, field)
    if formula.count("~") != 1:
        raise _fail(field, formula, "expected one '~': 'response ~ terms'")
    parser = _FormulaParser(formula, field)
    response, trials, failures = _lhs(parser)
    parser.expect("~")
    if parser.peek().kind == "end":
        raise parser.error("the right-hand side is empty")
    fixed, random = parser.terms()
    if parser.peek().kind != "end":
        tok = parser.peek()
        raise parser.error(f"unexpected {tok.text!r} at position {tok.pos + 1}")
    return FormulaParts(response, trials, fixed, random,
                        tuple(dict.fromkeys(parser.variables)), failures)


def check_terms(expr: str, field: str = "formula") -> tuple[str, ...]:
    """Check a right-hand side without random terms (a fixed part, or the effects of a random
    term); return the columns it reads.

    Raises
    ------
    ExpressionError
        Anything outside the formula language (random terms included).
    """
    return _read_terms(expr, field)[0]


def _read_terms(expr: str, field: str) -> tuple[tuple[str, ...], TermExpansion]:
    """:func:`check_terms` and :func:`expand_terms` in one reading."""
    _check_size(expr, field)
    parser = _FormulaParser(expr, field)
    terms = parser.sum()
    if parser.peek().kind != "end":
        tok = parser.peek()
        raise parser.error(f"unexpected {tok.text!r} at position {tok.pos + 1}")
    ordered = tuple(sorted(terms, key=lambda t: (len(t), sorted(t))))
    return tuple(dict.fromkeys(parser.variables)), TermExpansion(ordered, parser.factors)


def expand_terms(expr: str, field: str = "formula") -> TermExpansion:
    """The terms a right-hand side without random terms expands to, read by :func:`check_terms`.

    ``"(a + b) ^ 2"`` gives the terms ``{a}``, ``{b}``, ``{a, b}``; ``"1 + x * C(g)"`` gives
    the intercept ``{}``, ``{x}``, ``{C(g)}`` and ``{x, C(g)}``. A removed term (``- x``) is
    counted too: the formula engine expands it before removing it. Used to estimate the
    design matrix's columns before it is built.

    Raises
    ------
    ExpressionError
        As :func:`check_terms`, and more than :data:`MAX_TERMS` terms.
    """
    return _read_terms(expr, field)[1]



def check_group(group: str, field: str = "formula") -> tuple[str, ...]:
    """Check the grouping factor of a random term (``g``, ``g1:g2`` or ``g1/g2``); return its
    columns.

    Raises
    ------
    ExpressionError
        Anything else.
    """
    _check_size(group, field)
    parser = _FormulaParser(group, field)
    parser.group()
    if parser.peek().kind != "end":
        tok = parser.peek()
        raise parser.error(f"unexpected {tok.text!r} at position {tok.pos + 1}")
    return tuple(dict.fromkeys(parser.variables))


_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def check_column(name: object, field: str = "formula") -> str:
    """Check a column name as a formula's left-hand side spells it (``correct``, ``n``).

    Raises
    ------
    ExpressionError
        A name that is not a plain identifier (letters, digits, ``_`` and ``.``).
    """
    if (not isinstance(name, str) or not _COLUMN.fullmatch(name)
            or any(part.startswith("__") for part in name.split("."))):
        raise ExpressionError(f"{field}: {name!r} is not a column name (letters, digits, '_' "
                              f"and '.', no part starting with '__')")
    return name
