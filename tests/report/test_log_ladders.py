"""The log report's section "Context length within stories": the ToM effect adjusted for
context length, and with length ladders the within-story length effect and the ANOVA with the
story as its unit (each number the analysis functions' own), or why they are missing."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from _ladders import ladder_log
from _shipped import SHIPPED_LOG

from tomstats.analysis.ladders import adjusted_tom_effect, length_effects
from tomstats.analysis.log_anova import log_anova
from tomstats.cli import main
from tomstats.report.log import SECTIONS

TITLE = "Context length within stories"


def _section(log: Path, out: Path) -> str:
    assert main(["report", str(log), "--format", "md", "--out", str(out), "--n-boot", "0"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.*)$", text, flags=re.M) == list(SECTIONS)
    start = text.index(f"## {TITLE}")
    return text[start: text.index("\n## ", start + 1)]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> tuple[pd.DataFrame, Path]:
    df = ladder_log(12, seed=4)
    path = tmp_path_factory.mktemp("ladder") / "ladder.csv"
    df.to_csv(path, index=False)
    return df, path


def test_ladder_log_gets_all_three(ladder, tmp_path):
    df, path = ladder
    sec = _section(path, tmp_path / "md")
    adj = adjusted_tom_effect(df, by="model").set_index(["model", "tom_order"])
    a = adj.loc[("(pooled)", 2)]
    assert (f"| (pooled) | 2 | 0 | {a['estimate']:+.3f} [{a['ci_low']:+.3f}, "
            f"{a['ci_high']:+.3f}] |") in sec
    eff = length_effects(df).set_index(["model", "tom_order"]).loc[("llm-b", 1)]
    assert (f"| llm-b | 1 | 12 | {eff['acc_shortest']:.3f} | {eff['acc_longest']:.3f} | "
            f"{eff['difference']:+.3f} [{eff['ci_low']:+.3f}, {eff['ci_high']:+.3f}] |") in sec
    tab = log_anova(df, unit="story", by="model").set_index(["model", "source"])
    f_order = tab.loc[("(pooled)", "tom_order"), "F"]
    assert re.search(r"\| \(pooled\) \| tom_order \| [\d.]+, [\d.]+ \| "
                     + re.escape(f"{f_order:.4g}") + r" \|", sec)
    assert "12 of 12 stories are told at two or more context lengths" in sec
    assert "Missing" not in sec


def test_incomplete_ladder_names_the_gap_and_keeps_the_rest(ladder, tmp_path):
    df, _ = ladder
    gap = df[~((df["story_id"] == "s02") & (df["context_words"] == 1000))]
    path = tmp_path / "gap.csv"
    gap.to_csv(path, index=False)
    sec = _section(path, tmp_path / "md")
    assert "No ANOVA with the story as its unit: --unit story: story_id='s02' is not observed "\
           "at context_words=1000" in sec
    assert "Within-story length effect" in sec and "ToM effect adjusted" in sec


def test_between_story_log_says_it_has_no_ladders(tmp_path):
    sec = _section(SHIPPED_LOG, tmp_path / "md")
    assert "No length ladders: each story is told at one context length" in sec
    adj = adjusted_tom_effect(SHIPPED_LOG).set_index("tom_order").loc[1]
    assert f"| 1 | 0 | {adj['estimate']:+.3f} [{adj['ci_low']:+.3f}, " in sec
    assert "Within-story length effect" not in sec
