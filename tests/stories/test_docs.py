"""The examples in docs/stories.md and in the stories docstrings run and give what they show
(numbers to one unit of their last printed digit, as docs/printed.py compares them)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _checker() -> doctest.OutputChecker:
    if "printed" not in sys.modules:
        spec = importlib.util.spec_from_file_location("printed", REPO / "docs" / "printed.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["printed"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["printed"].NumbersChecker()


def _run(tests: list[doctest.DocTest]) -> doctest.TestResults:
    runner = doctest.DocTestRunner(checker=_checker(), optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    return runner.summarize(verbose=False)


@pytest.mark.parametrize(("page", "least"), [("stories.md", 10), ("item-validity.md", 10)])
def test_stories_md_examples(repo_root, page: str, least: int) -> None:
    path = repo_root / "docs" / page
    test = doctest.DocTestParser().get_doctest(path.read_text(encoding="utf-8"),
                                               {"__name__": "__main__"}, page, str(path), 0)
    result = _run([test])
    assert result.attempted > least
    assert result.failed == 0


@pytest.mark.parametrize("module", ["taxonomy", "questions", "items_design", "anatom"])
def test_docstring_examples(module: str) -> None:
    mod = importlib.import_module(f"tomstats.stories.{module}")
    result = _run(doctest.DocTestFinder().find(mod))
    assert result.attempted > 0
    assert result.failed == 0
