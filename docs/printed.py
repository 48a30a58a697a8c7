"""Compare printed text as a reader does: words and layout exactly, numbers to the digits shown.

A command's table printed on two machines can differ in the last digit of a number: the last
bits of a sum depend on the BLAS kernels and the summation order, and a value at a rounding
boundary (3 × 0.3408 = 1.0224…) prints ``1.022`` on one machine and ``1.023`` on another.
The docs' shown outputs and doctests are checked with the rule of this module:

* the text is split into lines and each line into tokens and the whitespace between them; a
  token's *shape* is the token with every number replaced by ``#``;
* the same number of lines, the same number of tokens on each line, and every token's shape
  the same: words, punctuation, column order, missing or extra lines are compared exactly;
* a number printed with a decimal point or an exponent is a rounded value: it must be
  printed the same way (the same count of decimals, the same notation) and lie within one
  unit of its last printed digit of the shown number, :math:`|a - b| \\le 10^{-d}` for
  :math:`d` decimals (:math:`10^{e - d}` in ``m.ddde±e`` notation), so ``-0.000`` and
  ``0.000`` agree and ``1.022`` and ``1.032`` do not;
* a number printed without a decimal point (a count, a degree of freedom, a seed) must be
  the same digits;
* the whitespace between two tokens is compared exactly unless a number beside it is printed
  with another width (``9.999`` and ``10.000``): then the padding of the column may differ.

``docs/update_examples.py --check``, ``tests/test_docs_examples.py`` and the doctests of the
docs pages (Sphinx's doctest builder, through :class:`NumbersChecker` installed in
``docs/conf.py``, and ``tests/stories/test_docs.py``) use it.
"""

from __future__ import annotations

import doctest
import re
from decimal import Decimal, InvalidOperation

__all__ = ["NumbersChecker", "differences", "same"]

#: A number as tables print it: an optional sign (ASCII or Unicode minus), digits with
#: optional thousands commas, an optional fraction, an optional exponent. Not preceded by a
#: letter, digit or point (``x2``, ``v1.2`` are words), nor followed by a letter, a digit or
#: a point and a digit (``0.1.0`` is a word).
NUMBER = re.compile(
    r"(?<![\w.])[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w]|\.\d)")
_SPACE = re.compile(r"(\s+)")


def _numbers(token: str) -> list[re.Match[str]]:
    return [m for m in NUMBER.finditer(token) if any(ch.isdigit() for ch in m.group())]


def _shape(token: str) -> str:
    out, last = [], 0
    for m in _numbers(token):
        out.append(token[last:m.start()] + "#")
        last = m.end()
    return "".join(out) + token[last:]


def _parts(number: str) -> tuple[Decimal, int | None, str]:
    """The value, the exponent of its last printed digit (``None`` for an integer) and its
    notation (``"f"`` fixed, ``"e"`` exponent, ``"d"`` integer)."""
    text = number.replace("\u2212", "-").replace(",", "")
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    value = Decimal(text.lower())
    if exponent:
        return value, int(exponent) - decimals, "e"
    if "." in mantissa:
        return value, -decimals, "f"
    return value, None, "d"


def _numbers_agree(shown: str, got: str) -> bool:
    try:
        a, ea, ka = _parts(shown)
        b, eb, kb = _parts(got)
    except (InvalidOperation, ValueError):
        return shown == got
    if ka != kb or ea != eb:
        return False
    if ea is None:
        return a == b
    return abs(a - b) <= Decimal(1).scaleb(ea)


def _line_differences(n: int, shown: str, got: str) -> list[str]:
    a, b = _SPACE.split(shown), _SPACE.split(got)
    where = f"line {n}: {shown.strip()!r} vs {got.strip()!r}"
    if len(a) != len(b):
        return [f"{where}: another number of columns"]
    out = []
    widths_differ = [False] * len(a)
    for i in range(0, len(a), 2):  # tokens at even places, whitespace at odd ones
        if _shape(a[i]) != _shape(b[i]):
            return [f"{where}: {a[i]!r} is not {b[i]!r}"]
        for x, y in zip(_numbers(a[i]), _numbers(b[i]), strict=True):
            if not _numbers_agree(x.group(), y.group()):
                out.append(f"{where}: {x.group()} and {y.group()} differ by more than one "
                           f"unit of the last digit shown")
        widths_differ[i] = len(a[i]) != len(b[i])
    for i in range(1, len(a), 2):
        if a[i] != b[i] and not (widths_differ[i - 1] or widths_differ[i + 1]):
            out.append(f"{where}: other spacing")
    return out


def differences(shown: str, got: str) -> list[str]:
    """Where ``got`` differs from ``shown`` by the rule of this module (empty: they agree).

    Examples
    --------
    >>> differences("context_words 1.023  3 0.3408", "context_words 1.022  3 0.3408")
    []
    >>> differences("F 1.023", "F 1.033")
    ["line 1: 'F 1.023' vs 'F 1.033': 1.023 and 1.033 differ by more than one unit of the last digit shown"]
    >>> differences("df 3", "df 4")[0].endswith("digit shown")
    True
    """  # noqa: E501
    a, b = shown.split("\n"), got.split("\n")
    if len(a) != len(b):
        return [f"{len(a)} lines shown, {len(b)} printed"]
    out: list[str] = []
    for n, (x, y) in enumerate(zip(a, b, strict=True), 1):
        if x != y:
            out.extend(_line_differences(n, x, y))
    return out


def same(shown: str, got: str) -> bool:
    """Whether ``got`` is ``shown`` up to one unit in the last printed digit of each number."""
    return not differences(shown, got)


class NumbersChecker(doctest.OutputChecker):
    """A doctest output checker that passes an example whose output is the expected one up
    to one unit in the last printed digit of each number (:func:`same`); every other
    difference is judged by the standard checker (with the example's option flags)."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        if super().check_output(want, got, optionflags):
            return True
        if optionflags & doctest.NORMALIZE_WHITESPACE:
            want, got = " ".join(want.split()), " ".join(got.split())
        return "..." not in want and same(want, got)
