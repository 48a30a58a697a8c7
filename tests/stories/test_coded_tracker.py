"""The fast paths equal the readable references: same stories, same beliefs, same answers."""

from __future__ import annotations

import random
from itertools import product

import pytest

from stories.test_beliefs import random_events, random_world, sally_anne
from tomstats.stories.beliefs import _final, _nested, _where, belief
from tomstats.stories.coded_tracker import (
    CodedStory,
    all_beliefs,
    beliefs_along,
    chains,
    encode,
    encode_story,
    wm_answer_fast,
)
from tomstats.stories.items_design import design_storyboard
from tomstats.stories.questions import wm_answer
from tomstats.stories.settings import SETTINGS
from tomstats.stories.storyboard import (
    Story,
    Storyboard,
    cross_paths,
    exclusive_random,
    first_order_storyboard,
    generate_story,
    generate_story_reference,
    move,
    second_order_storyboard,
)
from tomstats.stories.world import Event, World, enter

CHARS = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank")


def _reference_table(world: World, events, chain: tuple[str, ...]) -> dict[str, str | None]:
    """Every entity's belief for ``chain``, straight from the reference's nested view."""
    start, updates = _nested(world, events, chain)
    return _final(start, updates)


def _some_worlds(rng: random.Random):
    """Random worlds (objects, containers, one-way edges), half with perceived knowledge."""
    world = random_world(rng)
    if rng.random() < 0.5:
        world = World(world.agents, world.locations, world.edges, world.start,
                      world.containers, world.objects, initial_knowledge="perceived")
    return world, random_events(world, rng, rng.randint(0, 15))


@pytest.mark.parametrize("block", range(2))
def test_fast_tracker_equals_reference_every_chain_to_order_2(block: int) -> None:
    """2 × 1,200 random stories: every chain of length ≤ 2, every agent and object."""
    rng = random.Random(500 + block)
    for _ in range(1200):
        world, events = _some_worlds(rng)
        coded = encode(world, events)
        fast = all_beliefs(coded, 2)
        assert set(fast) == set(chains(world.agents, 2))
        for chain, answers in fast.items():
            assert answers == _reference_table(world, events, chain)
        # the public reference function, on one target and chain per story
        chain = rng.choice(sorted(fast))
        t = rng.choice([*world.agents, *world.objects])
        assert fast[chain][t] == belief(world, events, chain, t)
        for as_loc in (False, True):
            along = beliefs_along(coded, chain, t, as_location=as_loc)
            assert along == tuple(belief(world, events, chain[:k], t, as_location=as_loc)
                                  for k in range(len(chain) + 1))


def test_fast_tracker_equals_reference_to_order_4() -> None:
    """300 random stories, every chain of length ≤ 4 (≤ 3 agents), every entity."""
    rng = random.Random(77)
    done = 0
    while done < 300:
        world, events = _some_worlds(rng)
        if len(world.agents) > 3:
            continue
        done += 1
        fast = all_beliefs(encode(world, events), 4)
        for chain, answers in fast.items():
            assert answers == _reference_table(world, events, chain)


def test_fast_tracker_hand_worked_story() -> None:
    world, events = sally_anne()
    fast = all_beliefs(encode(world, events), 4, as_location=False)
    assert fast[("Sally",)]["marble"] == "basket"
    assert fast[("Anne", "Sally")]["marble"] == "basket"
    assert fast[()]["marble"] == "box"
    assert beliefs_along(encode(world, events), ("Anne", "Sally"), "marble",
                         as_location=True) == ("room", "room", "room")
    with pytest.raises(ValueError, match="'Zed' is not an agent"):
        beliefs_along(encode(world, events), ("Zed",), "marble")
    with pytest.raises(ValueError, match="'ring' is neither"):
        beliefs_along(encode(world, events), ("Sally",), "ring")
    with pytest.raises(ValueError, match="max_order"):
        all_beliefs(encode(world, events), -1)


def _boards(seed: int) -> list[Storyboard]:
    st = SETTINGS[("rooms", "field", "calls")[seed % 3]]
    cast = CHARS[:4 + seed % 5]
    rng = random.Random(seed)
    return [
        first_order_storyboard(cast, st.locations, st.edges, st.hub, n=20 + seed % 90,
                               mislead_distance=seed % 12, seed=seed),
        second_order_storyboard(cast, st.locations, st.edges, st.hub, n=25 + seed % 90,
                                mislead_distance=1 + seed % 12, seed=seed),
        design_storyboard(st, cast, 30 + seed % 60, mislead_distance=1 + seed % 10,
                          critical_start=seed % 15, rng=rng),
        Storyboard(CHARS[:4], st.locations, st.edges,
                   (cross_paths(("Alice", "Bob"), st.places[2], 3 + seed % 5),
                    move("Bob", st.hub, 9), exclusive_random(("Charlie",), 2, 12),
                    cross_paths(("Bob", "Charlie", "Danny"), st.places[0], 14 + seed % 6)),
                   30, st.hub),
    ]


def test_fast_fill_gives_the_reference_stories() -> None:
    """Same storyboard and seed: the integer-coded fill draws the reference's story."""
    compared = failed = 0
    for seed in range(600):
        for sb in _boards(seed):
            try:
                ref = generate_story_reference(sb, seed)
            except ValueError as exc:  # same error from both
                with pytest.raises(ValueError) as info:
                    generate_story(sb, seed)
                assert str(info.value) == str(exc)
                failed += 1
                continue
            story = generate_story(sb, seed)
            assert story.events == ref.events
            assert story == ref
            compared += 1
            coded = encode_story(story)
            assert coded == encode(story.world, ref.events)
            r = sb.roles
            if "S2" in r:
                assert wm_answer_fast(coded, r["S1"], r["S2"], r["T"]) == \
                    wm_answer(story.world, ref.events, r["S1"], r["S2"], r["T"])
    assert compared > 2000


def test_fast_wm_answer_on_random_stories() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        world, events = _some_worlds(rng)
        if len(world.agents) < 3:
            continue
        s1, s2, t = rng.sample(world.agents, 3)
        assert wm_answer_fast(encode(world, events), s1, s2, t) == \
            wm_answer(world, events, s1, s2, t)


def test_story_built_from_events_or_codes() -> None:
    st = SETTINGS["rooms"]
    sb = second_order_storyboard(CHARS, st.locations, st.edges, st.hub, seed=1)
    story = generate_story(sb, 1)
    again = Story(sb, story.world, story.events, 1)
    assert again == story and again.codes is None
    assert encode_story(again) == encode_story(story)
    with pytest.raises(ValueError, match="events or their codes"):
        Story(sb, story.world, None, 1)


def _enter_story(rng: random.Random) -> tuple[World, list[Event]]:
    """A random world (objects that never move, half with perceived knowledge) and a random
    story of ``enter`` events only: the stories the merged pass reads as moves."""
    world, _ = _some_worlds(rng)
    state = dict(world.start)
    events = []
    for t in range(rng.randint(0, 25)):
        a = rng.choice(world.agents)
        options = world.neighbours(state[a])
        if options:
            events.append(enter(world, state, t, a, rng.choice(options)))
    for t, e in enumerate(events):  # times 0, 1, 2, … (a stuck agent skipped a step)
        events[t] = Event(t, e.action, e.actor, e.location, e.source)
    return world, events


def test_merged_pass_equals_reference_and_view_by_view() -> None:
    """1,000 random enter-only stories: every chain of two agents (repeats included), every
    entity, as names and as locations: the one-pass answers are the reference's and those
    of the view-by-view passes on the same story without its moves."""
    rng = random.Random(2024)
    for _ in range(1000):
        world, events = _enter_story(rng)
        coded = encode(world, events)
        assert coded.moves is not None
        by_views = CodedStory(coded.book, coded.start, coded.updates, coded.times)
        assert by_views.moves is None and by_views == coded
        tables = {chain: _reference_table(world, events, chain)
                  for chain in chains(world.agents, 2)}
        for chain in product(world.agents, repeat=2):
            for t in (*world.agents, *world.objects):
                along = beliefs_along(coded, chain, t)
                assert along == tuple(tables[chain[:k]][t] for k in range(3))
                assert along == beliefs_along(by_views, chain, t)
                assert beliefs_along(coded, chain, t, as_location=True) == tuple(
                    _where(world, t, v) for v in along)


def test_merged_pass_on_generated_stories() -> None:
    """Generated stories (read from their codes): every chain of two agents, every agent."""
    done = 0
    for seed in range(40):
        for sb in _boards(seed)[:3]:
            story = generate_story(sb, seed)
            coded = encode_story(story)
            assert coded.moves is story.codes and coded.updates == encode(
                story.world, story.events).updates
            agents = story.world.agents
            tables = {chain: _reference_table(story.world, story.events, chain)
                      for chain in chains(agents, 2)}
            for chain in product(agents, repeat=2):
                for t in agents:
                    assert beliefs_along(coded, chain, t) == tuple(
                        tables[chain[:k]][t] for k in range(3))
            done += 1
    assert done == 120


def test_beliefs_along_every_chain_length_to_order_4() -> None:
    """Chains of length 0 … 4 with and without moves (the merged pass serves only length
    2): every prefix's answer is the reference's."""
    rng = random.Random(41)
    for i in range(600):
        world, events = _enter_story(rng) if i % 2 else _some_worlds(rng)
        coded = encode(world, events)
        for k in range(5):
            chain = tuple(rng.choice(world.agents) for _ in range(k))
            t = rng.choice([*world.agents, *world.objects])
            assert beliefs_along(coded, chain, t) == tuple(
                belief(world, events, chain[:j], t) for j in range(k + 1))


def test_coded_story_moves() -> None:
    """Moves only for enter events at times 0, 1, 2, …; updates and times built on demand."""
    world, events = sally_anne()  # an object move: no moves
    assert encode(world, events).moves is None
    st = SETTINGS["rooms"]
    story = generate_story(second_order_storyboard(CHARS, st.locations, st.edges, st.hub,
                                                   seed=3), 3)
    coded = encode_story(story)
    ref = encode(story.world, story.events)
    assert ref.moves == story.codes
    assert coded == ref and hash(coded) == hash(ref) and repr(coded) == repr(ref)
    assert coded.times == tuple(range(len(story.events)))
    late = [Event(e.time + 1, e.action, e.actor, e.location, e.source) for e in story.events]
    assert encode(story.world, late).moves is None  # times 1, 2, …: not moves
    key = [story.storyboard.roles[r] for r in ("S1", "S2", "T")]
    assert wm_answer_fast(encode(story.world, late), *key) == wm_answer_fast(coded, *key) \
        == wm_answer(story.world, story.events, *key)
    with pytest.raises(ValueError, match="updates and times, or its moves"):
        CodedStory(coded.book, coded.start)
