"""StorySim storyboards: validation errors, the look-ahead fill, the paper's storyboards."""

from __future__ import annotations

import dataclasses
import random

import pytest

from tomstats.stories.beliefs import belief, last_perceived, well_defined
from tomstats.stories.questions import first_common_location, wm_answer
from tomstats.stories.settings import SETTINGS, make_setting
from tomstats.stories.storyboard import (
    Storyboard,
    cross_paths,
    exclusive_random,
    first_order_storyboard,
    generate_story,
    move,
    second_order_storyboard,
    validate_storyboard,
)
from tomstats.stories.world import replay

ROOMS = SETTINGS["rooms"]
CAST = ("Alice", "Bob", "Charlie", "Danny")
LINE = ("hallway", "room_1", "room_2", "room_3")
LINE_EDGES = tuple(e for a, b in zip(LINE, LINE[1:], strict=False) for e in ((a, b), (b, a)))


def board(events, n: int = 20, **kw) -> Storyboard:
    args = dict(characters=CAST, locations=ROOMS.locations, edges=ROOMS.edges,
                events=tuple(events), n=n, start="hallway") | kw
    return Storyboard(**args)


BAD = [
    ("n is zero", board([], n=0), "n \\(story length in events\\) must be a positive"),
    ("start elsewhere", board([], start="attic"), "start 'attic' is not a location"),
    ("unsupported action", board([], actions=("enter", "fly")), "'fly' is not supported"),
    ("unknown kind", board([dataclasses.replace(move("Bob", "room_1", 3), kind="teleport")]),
     "event 0 .*unknown kind 'teleport'"),
    ("unknown actor", board([move("Zed", "room_1", 3)]),
     "event 0 \\(move Zed -> room_1 t=3\\): actor 'Zed' is not a character"),
    ("unknown location", board([move("Bob", "attic", 3)]),
     "event 0 .*location 'attic' is not in the location graph"),
    ("t after the end", board([move("Bob", "room_1", 25)]),
     "event 0 .*t=25 is outside the story"),
    ("stop before start", board([exclusive_random(("Bob",), 8, 5)]),
     "event 0 .*stop=5 is before the start t=8"),
    ("stop after end", board([exclusive_random(("Bob",), 8, 30)]),
     "event 0 .*stop=30 is after the end of the story"),
    ("two events, one step", board([move("Bob", "room_1", 3), move("Alice", "room_2", 3)]),
     "event 1 .*step t=3 is already taken by event 0"),
    ("move along a missing edge", board([move("Bob", "room_1", 3), move("Bob", "room_3", 4)]),
     "event 1 .*Bob is in room_1 at t=3; there is no edge room_1 -> room_3"),
    ("no one left to act", board([exclusive_random(CAST, 2, 6)]),
     "event 0 .*excludes every character"),
    ("acting while frozen", board([exclusive_random(("Bob",), 2, 6), move("Bob", "room_1", 4)]),
     "event 1 .*Bob acts at t=4, inside event 0"),
    ("too far too soon", board([move("Bob", "room_2", 0)], locations=LINE, edges=LINE_EDGES),
     "event 0 .*Bob starts in hallway; there is no edge hallway -> room_2"),
    ("already there", board([move("Bob", "room_1", 3), move("Bob", "room_1", 4)]),
     "event 1 .*Bob is already in room_1"),
    ("not enough steps", board([cross_paths(("Bob", "Alice"), "room_3", 2)], locations=LINE,
                               edges=LINE_EDGES),
     "event 0 .*Bob starts in hallway; it needs 3 step\\(s\\) to reach room_3 but "
     "has only 2"),
    ("cross paths out of reach", board([exclusive_random(("Bob",), 0, 9),
                                        cross_paths(("Bob", "Alice"), "room_2", 9)]),
     "event 1 .*Bob starts in hallway; it needs 1 step\\(s\\) to reach room_2 but has "
     "only 0"),
    ("unreachable place", board([move("Bob", "room_9", 5)],
                                locations=(*ROOMS.locations, "room_9")),
     "event 0 .*room_9 cannot be reached"),
    ("actor twice", board([cross_paths(("Bob", "Bob"), "room_1", 5)]),
     "event 0 .*listed twice"),
    ("move with two actors", board([dataclasses.replace(move("Bob", "room_1", 5),
                                                        actors=("Bob", "Alice"))]),
     "event 0 .*exactly one actor"),
]


@pytest.mark.parametrize(("sb", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_storyboards_are_rejected_with_reason(sb: Storyboard, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_storyboard(sb)
    with pytest.raises(ValueError, match=message):
        generate_story(sb, seed=0)


def test_more_roles_than_characters() -> None:
    with pytest.raises(ValueError, match="needs 3 distinct characters, got 2"):
        second_order_storyboard(("Alice", "Bob"), ROOMS.locations, ROOMS.edges, "hallway")
    with pytest.raises(ValueError, match="mislead_distance must be ≥ 1"):
        second_order_storyboard(CAST, ROOMS.locations, ROOMS.edges, "hallway",
                                mislead_distance=0)


def test_bad_edge_is_named() -> None:
    with pytest.raises(ValueError, match="edge \\('hallway', 'attic'\\): 'attic' is not a"):
        board([], edges=(*ROOMS.edges, ("hallway", "attic"))).world()


def test_lookahead_fill_meets_every_scripted_event() -> None:
    """Random walks must bring Alice and Bob to room_3 (three steps away) by t=8, etc."""
    sb = board([cross_paths(("Alice", "Bob"), "room_3", 8), move("Bob", "room_2", 9),
                cross_paths(("Bob", "Charlie", "Danny"), "room_4", 20)], n=30,
               edges=tuple(e for e in ROOMS.edges if "hallway" not in e or "room_1" in e))
    for seed in range(300):
        story = generate_story(sb, seed)
        world = story.world
        assert replay(world, story.events)  # every move follows an edge
        assert story.events[8].actor == "Bob" and story.events[8].location == "room_3"
        assert replay(world, story.events[:9])["Alice"] == "room_3"
        assert story.events[9].actor == "Bob" and story.events[9].location == "room_2"
        state = replay(world, story.events[:21])
        assert state["Bob"] == state["Charlie"] == state["Danny"] == "room_4"


def test_same_seed_same_story() -> None:
    sb = first_order_storyboard(CAST, ROOMS.locations, ROOMS.edges, "hallway", seed=4)
    assert generate_story(sb, 9).events == generate_story(sb, 9).events
    assert generate_story(sb, 9).events != generate_story(sb, 10).events


@pytest.mark.parametrize("setting", ["rooms", "field", "calls"])
def test_paper_first_order_storyboard(setting: str) -> None:
    st = SETTINGS[setting]
    chars = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank")
    for seed in range(150):
        m = seed % 20
        sb = first_order_storyboard(chars, st.locations, st.edges, st.hub, mislead_distance=m,
                                    seed=seed, setting=setting)
        story = generate_story(sb, seed)
        r, w, ev = sb.roles, story.world, story.events
        assert len(ev) == 100
        assert belief(w, ev, (), r["T"]) == r["L3"]
        assert belief(w, ev, (r["S1"],), r["T"]) == r["L2"]
        assert well_defined(w, ev, (r["S1"],), r["T"])
        final = max(e.time for e in ev if e.actor == r["T"])
        assert final - last_perceived(w, ev, (r["S1"],), r["T"]) - 1 == m


def test_paper_second_order_storyboard() -> None:
    chars = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank")
    defined = 0
    for seed in range(150):
        sb = second_order_storyboard(chars, ROOMS.locations, ROOMS.edges, "hallway",
                                     seed=seed, mislead_distance=30)
        story = generate_story(sb, seed + 1)
        r, w, ev = sb.roles, story.world, story.events
        assert belief(w, ev, (r["S1"], r["S2"]), r["T"]) == r["L2"]
        assert belief(w, ev, (r["S2"],), r["T"]) == r["L3"]  # S2 saw the last move
        assert belief(w, ev, (r["S1"],), r["T"]) == r["L2"]
        assert belief(w, ev, (), r["T"]) == r["L3"]
        # the WM question is defined when the three met only once (in L1, the random
        # start can bring them together earlier too)
        wm = wm_answer(w, ev, r["S1"], r["S2"], r["T"])
        defined += wm is not None
        assert wm in (None, r["L2"])
        if wm is not None:
            assert first_common_location(w, ev, (r["S1"], r["S2"], r["T"])) == r["L1"]
    assert defined > 100


def test_first_common_location_example() -> None:
    """After StorySim's Figure 1: Bob and Anne cross paths in room_2 on the way to room_3."""
    cast = ("Anne", "Bob", "Carl")
    sb = board([exclusive_random(cast, 0, 2), move("Bob", "room_2", 2),
                cross_paths(("Bob", "Anne"), "room_2", 3), move("Anne", "room_3", 4),
                move("Bob", "hallway", 5), move("Carl", "room_1", 6),
                move("Anne", "room_4", 7)], n=8, characters=(*cast, "Dora"))
    story = generate_story(sb, 0)
    w, ev = story.world, story.events
    assert first_common_location(w, ev, ("Bob", "Anne")) == "room_2"
    assert belief(w, ev, ("Bob",), "Anne") == "room_3"
    assert belief(w, ev, (), "Anne") == "room_4"
    assert belief(w, ev, ("Carl",), "Anne") == "room_2"  # saw her leave the hallway only
    assert belief(w, ev, ("Carl", "Bob"), "Anne") == "room_2"


def test_settings_graphs() -> None:
    for st in SETTINGS.values():
        assert st.hub not in st.places
        for p in st.places:
            assert (st.hub, p) in st.edges and (p, st.hub) in st.edges
    with pytest.raises(ValueError, match="setting must be one of"):
        make_setting("moon")
    rng = random.Random(0)
    assert make_setting("rooms", rng.randint(3, 9)).places[0] == "room_1"
