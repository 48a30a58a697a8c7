"""The examples in docs/stories.md and in the stories docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(("page", "least"), [("stories.md", 10), ("item-validity.md", 10)])
def test_stories_md_examples(repo_root, page: str, least: int) -> None:
    result = doctest.testfile(str(repo_root / "docs" / page), module_relative=False,
                              optionflags=doctest.ELLIPSIS)
    assert result.attempted > least
    assert result.failed == 0


@pytest.mark.parametrize("module", ["taxonomy", "questions", "items_design", "anatom"])
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"tomstats.stories.{module}"))
    assert result.attempted > 0
    assert result.failed == 0
