"""BABILong-style weaving of design stories into a host text."""

from __future__ import annotations

import random

import pytest

from tomstats.stories import build_design_items
from tomstats.stories.audit import sentences
from tomstats.stories.weaving import check_host, weave

HOST = " ".join(f"Line {i} of the almanac says the river rose {i % 7} inches near the mill."
                for i in range(400))


def test_weave_keeps_the_story_in_order() -> None:
    story = "A is in the yard. A walks to the barn. B sees A. The end comes."
    host = sentences(HOST)
    text = weave(story, host, 200, random.Random(1))
    assert 196 <= len(text.split()) <= 204
    ss = sentences(text)
    assert ss[0] == "A is in the yard."
    mine = [s for s in ss if s in sentences(story)]
    assert mine == sentences(story)  # every story sentence, in order
    rest = [s for s in ss if s not in mine]
    i = host.index(rest[0])
    assert rest == host[i:i + len(rest)]  # consecutive host sentences


def test_woven_items() -> None:
    items = build_design_items(3, seed=2, contexts=(200, 1000), host_text=HOST,
                               question_types=("tom", "wm_human"))
    for it in items:
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
        assert it.critical_position is None
        if it.context_words == 1000:
            assert "almanac" in it.story
            # the story itself was told at the smallest length and survives whole
            own = [s for s in sentences(it.story) if "almanac" not in s]
            assert 196 <= sum(len(s.split()) for s in own) <= 204
            assert it.metadata["critical_position_story"] is not None


@pytest.mark.parametrize(("text", "word"), [
    ("Yesterday Alice went fishing.", "Alice"),
    ("The KITCHEN was closed.", "KITCHEN"),
    ("We met in the lounge\nand left.", "lounge"),
])
def test_host_naming_story_things_is_refused(text: str, word: str) -> None:
    with pytest.raises(ValueError, match=rf"host text names '{word}' \(line 1\)"):
        build_design_items(1, seed=0, contexts=(200, 500), host_text=text + " " + HOST)


def test_host_too_short() -> None:
    with pytest.raises(ValueError, match="host_text has 7 words"):
        build_design_items(1, seed=0, contexts=(200, 500),
                           host_text="The river rose near the mill today.")
    with pytest.raises(ValueError, match="names 'Bob'"):
        check_host("x\nBob", ["Bob"])


def test_cli_weave(tmp_path) -> None:
    from tomstats.cli import main
    from tomstats.stories import read_items

    host = tmp_path / "host.txt"
    host.write_text(HOST)
    out = tmp_path / "w.jsonl"
    assert main(["stories", "--out", str(out), "--n", "1", "--contexts", "200", "500",
                 "--weave", str(host), "--no-progress"]) == 0
    assert all("almanac" in it.story for it in read_items(out) if it.context_words == 500)
    host.write_text("Hank was here. " + HOST)
    assert main(["stories", "--out", str(tmp_path / "x.jsonl"), "--n", "1", "--contexts",
                 "200", "500", "--weave", str(host)]) == 2
    assert not (tmp_path / "x.jsonl").exists()
    assert main(["stories", "--out", str(tmp_path / "y.jsonl"), "--weave",
                 str(tmp_path / "missing.txt")]) == 2
