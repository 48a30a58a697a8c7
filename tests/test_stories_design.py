"""The context-length × ToM-order item set: shape, lengths, answers, determinism."""

from __future__ import annotations

import collections

import pytest

from tomstats.stories import build_design_items, read_items, write_items
from tomstats.stories.beliefs import belief, well_defined
from tomstats.stories.storyboard import Storyboard, generate_story
from tomstats.stories.taxonomy import classify_answer
from tomstats.stories.world import Event, replay


@pytest.fixture(scope="module")
def paper_items():
    return build_design_items(3, seed=11)


def rebuild(item) -> tuple[Storyboard, list[Event]]:
    sb_d = item.metadata["storyboard"]
    events = [Event(t, "enter", a, loc, src) for t, a, loc, src in item.metadata["events"]]
    return sb_d, events


def test_shape_every_cell_and_length(paper_items) -> None:
    cells = collections.Counter((it.context_words, it.tom_order) for it in paper_items)
    assert cells == {(c, o): 3 for c in (200, 500, 1000, 2000, 5000) for o in (0, 1, 2)}
    assert len({it.item_id for it in paper_items}) == len(paper_items)
    for it in paper_items:
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
        assert it.n_words == len(it.story.split())
        assert it.answer in it.candidates
        assert it.first_common_location in it.candidates
        assert it.last_location in it.candidates
        assert it.mislead_distance == 10
        assert it.n_characters == 8
        assert len(it.agents) == it.tom_order


def test_answers_come_from_the_tracker(paper_items) -> None:
    for it in paper_items:
        sb, events = rebuild(it)
        roles = it.metadata["roles"]
        from tomstats.stories.world import World
        world = World(tuple(sb["characters"]), tuple(sb["locations"]),
                      tuple(tuple(e) for e in sb["edges"]),
                      {c: sb["start"] for c in sb["characters"]})
        replay(world, events)  # the event log is consistent with the graph
        assert belief(world, events, it.agents, it.target) == it.answer
        assert well_defined(world, events, it.agents, it.target)
        expected = roles["L3"] if it.tom_order == 0 else roles["L2"]
        assert it.answer == expected
        assert it.first_common_location == roles["L1"]
        assert it.last_location == roles["L3"]
        # the three heuristic answers differ, so the taxonomy can tell them apart
        assert len({roles["L1"], roles["L2"], roles["L3"]}) == 3
        # filler events never involve the key characters
        key = {roles["S1"], roles["S2"], roles["T"]}
        a, b = it.metadata["critical_span"]
        assert all(e.actor not in key for e in events if not a <= e.time <= b)
        assert classify_answer(it, it.answer) == "correct"


def test_orders_share_one_story(paper_items) -> None:
    by_story = collections.defaultdict(list)
    for it in paper_items:
        by_story[it.metadata["story_id"]].append(it)
    assert len(by_story) == 15
    for group in by_story.values():
        assert sorted(it.tom_order for it in group) == [0, 1, 2]
        assert len({it.story for it in group}) == 1


def test_same_seed_same_items_other_seed_other_items() -> None:
    a = build_design_items(2, seed=5, contexts=(200, 500))
    b = build_design_items(2, seed=5, contexts=(200, 500))
    c = build_design_items(2, seed=6, contexts=(200, 500))
    assert [x.to_dict() for x in a] == [x.to_dict() for x in b]
    assert [x.story for x in a] != [x.story for x in c]


@pytest.mark.parametrize("setting", ["rooms", "field", "calls"])
@pytest.mark.parametrize("position", [0.0, 0.5, 1.0])
def test_settings_and_critical_position(setting: str, position: float) -> None:
    items = build_design_items(2, seed=3, contexts=(200, 1000), setting=setting,
                               critical_position=position, mislead_distance=5,
                               n_characters=5)
    for it in items:
        assert it.setting == setting
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
        assert abs(it.critical_position - position) < 0.08
        assert it.mislead_distance == 5
        assert it.n_characters == 5
        assert it.metadata["instructions"]


def test_world_model_questions() -> None:
    items = build_design_items(1, seed=2, contexts=(500,), orders=(1,),
                               question_types=("tom", "wm_human", "wm_object"))
    kinds = {it.question_type: it for it in items}
    assert set(kinds) == {"tom", "wm_human", "wm_object"}
    human, obj = kinds["wm_human"], kinds["wm_object"]
    assert human.answer == human.metadata["roles"]["L2"]
    assert obj.answer == obj.metadata["roles"]["L2"]
    assert "where did" in human.question and "moved to" in obj.question
    assert human.story == kinds["tom"].story
    assert not any(name in obj.story for name in obj.metadata["storyboard"]["characters"])
    assert obj.question.startswith("When the ")
    assert abs(obj.n_words - 500) <= 10


def test_jsonl_roundtrip(tmp_path, paper_items) -> None:
    path = write_items(tmp_path / "items.jsonl", paper_items)
    assert read_items(path) == paper_items


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_per_cell": 0}, "n_per_cell"),
    ({"seed": -1}, "seed"),
    ({"contexts": (200, 200)}, "contexts"),
    ({"contexts": (40,)}, "cannot hold"),
    ({"orders": (3,)}, "orders"),
    ({"setting": "moon"}, "setting"),
    ({"n_characters": 3}, "n_characters"),
    ({"mislead_distance": 0}, "mislead_distance"),
    ({"critical_position": 1.5}, "critical_position"),
    ({"question_types": ("gossip",)}, "question_types"),
    ({"mislead_distance": 40, "question_types": ("tom", "wm_object")}, "told with objects"),
])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    args = {"n_per_cell": 1, "seed": 0, "contexts": (200,)} | kwargs
    with pytest.raises(ValueError, match=message):
        build_design_items(**args)


def test_storyboard_of_item_regenerates_story(paper_items) -> None:
    from tomstats.stories.storyboard import Scripted
    it = paper_items[0]
    d = it.metadata["storyboard"]
    sb = Storyboard(tuple(d["characters"]), tuple(d["locations"]),
                    tuple(tuple(e) for e in d["edges"]),
                    tuple(Scripted(e["name"], tuple(e["actors"]), e["t"], e.get("location"),
                                   e.get("stop")) for e in d["events"]),
                    d["n"], d["start"], setting=d["setting"], roles=d["roles"])
    story = generate_story(sb, it.seed)
    assert [[e.time, e.actor, e.location, e.source] for e in story.events] == \
        it.metadata["events"]


def test_items_frame(paper_items) -> None:
    from tomstats.stories import items_frame

    df = items_frame(paper_items)
    assert len(df) == len(paper_items)
    assert df.groupby(["context_words", "tom_order"]).size().eq(3).all()
    assert df.groupby("story_id").size().eq(3).all()
    assert "metadata" not in df and "metadata" in items_frame(paper_items[:2], metadata=True)
