"""The rule the docs' shown outputs and doctests are checked by (docs/printed.py): a number
may differ by one unit of its last printed digit (the last bits of a sum differ between
machines); a word, a column, a line or any larger change of a number is a difference."""

from __future__ import annotations

import doctest
import importlib.util
import re
import sys
from decimal import Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "docs" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


printed = _module("printed")


def _shown_outputs() -> list[str]:
    """Every shown command output of the pages the docs-example test checks."""
    ue = _module("update_examples")
    tde = _module_from_tests("test_docs_examples")
    out = []
    for page in tde.OUTPUT_PAGES + tde.SLOW_OUTPUT_PAGES:
        out += [ex.output for ex in ue.examples((REPO / "docs" / page).read_text("utf-8"))]
    return out


def _module_from_tests(name: str):
    spec = importlib.util.spec_from_file_location(f"_t_{name}", REPO / "tests" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rounded_numbers(text: str) -> list[re.Match[str]]:
    """The numbers printed with a decimal point (rounded values)."""
    return [m for m in printed.NUMBER.finditer(text)
            if re.fullmatch(r"[-+]?\d[\d,]*\.\d+", m.group())]


def _shift(number: str, units: int, place: int = 0) -> str:
    """``number`` plus ``units`` units of its ``place``-th digit from the last one, printed
    with the same decimals."""
    decimals = len(number.partition(".")[2])
    step = Decimal(1).scaleb(place - decimals)
    return f"{Decimal(number.replace(',', '')) + units * step:.{decimals}f}"


def _replace(text: str, m: re.Match[str], new: str) -> str:
    return text[: m.start()] + new + text[m.end():]


SHOWN = _shown_outputs()


def test_the_checked_pages_show_rounded_numbers():
    assert SHOWN and sum(len(_rounded_numbers(s)) for s in SHOWN) > 50


@pytest.mark.parametrize("units", [1, -1])
def test_one_unit_in_the_last_digit_passes(units):
    """Every rounded number of every shown output, moved by one unit of its last digit, in
    turn, and all of them at once: the check passes."""
    for shown in SHOWN:
        moved = shown
        for m in reversed(_rounded_numbers(shown)):
            one = _replace(shown, m, _shift(m.group(), units))
            assert printed.same(shown, one), printed.differences(shown, one)
            moved = _replace(moved, m, _shift(m.group(), units))
        assert printed.same(shown, moved), printed.differences(shown, moved)


def test_the_second_digit_fails():
    for shown in SHOWN:
        for m in _rounded_numbers(shown):
            for units in (1, -1):
                two = _replace(shown, m, _shift(m.group(), units, place=1))
                assert not printed.same(shown, two), (m.group(), two)
            # two units of the last digit are more than one
            assert not printed.same(shown, _replace(shown, m, _shift(m.group(), 2)))


def test_words_columns_lines_and_counts_fail():
    shown = max(SHOWN, key=len)
    lines = shown.splitlines(keepends=True)
    words = [m for m in re.finditer(r"[A-Za-z_]{3,}", shown)]
    assert words
    for m in words[:20]:  # a changed word
        assert not printed.same(shown, _replace(shown, m, m.group()[:-1] + "x"))
    # a missing column: the last token of a line that has several
    line = next(i for i, x in enumerate(lines) if len(x.split()) > 3)
    cut = lines[:line] + [lines[line].rsplit(" ", 1)[0] + "\n"] + lines[line + 1:]
    assert not printed.same(shown, "".join(cut))
    # a missing, an extra or a swapped line
    assert not printed.same(shown, "".join(lines[:-1]))
    assert not printed.same(shown, "".join(lines + ["extra\n"]))
    if len(lines) > 2:
        assert not printed.same(shown, "".join([lines[1], lines[0], *lines[2:]]))
    # an integer (a count, a degree of freedom) is compared digit for digit
    ints = [m for m in printed.NUMBER.finditer(shown) if m.group().isdigit()]
    assert ints
    for m in ints[:10]:
        assert not printed.same(shown, _replace(shown, m, str(int(m.group()) + 1)))
    # another number of decimals is another printout
    m = _rounded_numbers(shown)[0]
    assert not printed.same(shown, _replace(shown, m, m.group() + "0"))


def test_the_reported_case_and_column_padding():
    """The case of the issue (1.023 printed 1.022), a sign at zero, and a column whose
    padding changes because a number gained a digit."""
    assert printed.same("context_words 1.023  3 0.3408\n", "context_words 1.022  3 0.3408\n")
    assert printed.same("x  -0.000  y", "x   0.000  y")
    assert printed.same("a   9.999  b", "a  10.000  b")
    assert not printed.same("a   9.999  b", "a 10.000  b  ")
    assert not printed.same("a  1.5  b", "a 1.5  b")  # padding without a wider number
    assert printed.same("p 1.00e-05", "p 1.01e-05")
    assert not printed.same("p 1.00e-05", "p 1.00e-04")
    assert not printed.same("v 0.1.0", "v 0.2.0")  # a version is a word


def test_doctest_checker():
    checker = printed.NumbersChecker()
    flags = doctest.ELLIPSIS
    assert checker.check_output("1.023\n", "1.022\n", flags)
    assert not checker.check_output("1.023\n", "1.021\n", flags)
    assert not checker.check_output("1.023 rows\n", "1.023 cols\n", flags)
    assert checker.check_output("a   1.5\n", "a 1.6\n", doctest.NORMALIZE_WHITESPACE)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(">>> print(round(1 / 3, 3) + 0.001)\n0.333\n", {}, "t", None, 0)
    runner = doctest.DocTestRunner(checker=checker, optionflags=flags)
    runner.run(test, out=lambda s: None)
    assert runner.summarize(verbose=False).failed == 0
