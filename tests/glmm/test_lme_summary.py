"""``print(fit)`` against lme4's ``print(summary(glmer(...)))`` line by line: the slopes example
of docs/glmm-slopes.md (``tests/reference/lme4_summary.csv``), whose lme4 printout
``tests/reference/lme4_summary.R`` wrote to ``lme4_summary.txt`` (rerun when R is here).

The words, the order of the lines and of the random-effect groups, the column layout and the
digits shown must be lme4's, character for character, except lme4's ``Data:`` line (a fit
from a data frame has no name for it) and the class in the title (``[tomstats]`` for
``[glmerMod]``); each number must agree with lme4's within its optimiser's tolerance."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tomstats.glmm import fit

REF = Path(__file__).resolve().parents[1] / "reference"
FORMULA = "correct ~ tom_order + (1 + tom_order | model) + (1 | item)"
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)(e[-+]\d+)?$")


def _lme4_lines(tmp_path: Path) -> list[str]:
    out = REF / "lme4_summary.txt"
    if shutil.which("Rscript"):
        out = tmp_path / "lme4_summary.txt"
        proc = subprocess.run(["Rscript", str(REF / "lme4_summary.R"),
                               str(REF / "lme4_summary.csv"), str(out)], capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:  # R without lme4: the committed printout
            out = REF / "lme4_summary.txt"
    lines = out.read_text().splitlines()
    return [ln.replace("[glmerMod]", "[tomstats]") for ln in lines
            if not ln.startswith("   Data: ")]


def _layout(line: str) -> str:
    """The line with each number written as as many ``#`` as it has characters."""
    return re.sub(r"\S+", lambda m: "#" * len(m.group()) if _NUMBER.match(m.group())
                  else m.group(), line)


def test_printout_is_lme4s_line_by_line(tmp_path: Path) -> None:
    ours = str(fit(pd.read_csv(REF / "lme4_summary.csv"), FORMULA, backend="laplace"))
    ours_lines, theirs = ours.splitlines(), _lme4_lines(tmp_path)
    assert len(ours_lines) == len(theirs), ours
    for a, b in zip(ours_lines, theirs, strict=True):
        assert _layout(a) == _layout(b), f"\n{a!r}\n{b!r}"
        for x, y in zip(a.split(), b.split(), strict=True):
            if _NUMBER.match(y):
                assert float(x) == pytest.approx(float(y), rel=5e-3, abs=2e-3), (a, b)
