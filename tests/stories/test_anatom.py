"""AnaToM worlds: the 97 placement patterns, timelines with look-ahead, six question types."""

from __future__ import annotations

import collections

import pytest

from tomstats.stories.anatom import (
    ANATOM_QUESTION_TYPES,
    Composition,
    anatom_items,
    generate_anatom_story,
    parse_timeline,
    placement_patterns,
)
from tomstats.stories.beliefs import belief
from tomstats.stories.world import World, enter, initial_state, move_object, replay


def test_97_initial_placement_patterns() -> None:
    patterns = placement_patterns(Composition(3, 3, 3, 3))
    assert len(patterns) == len(set(patterns)) == 97
    # AnaToM's appendix A.1 groups them by how the three agents are spread: 30 + 55 + 12
    spread = collections.Counter(
        tuple(sorted((loc.count("A") for loc in p.split("/")), reverse=True)) for p in patterns)
    assert spread == {(3, 0, 0): 30, (2, 1, 0): 55, (1, 1, 1): 12}
    # a few patterns printed in the appendix (their "0" is the letter O)
    for printed in ("AAAC000CC//", "AC000/AC/AC", "ACOCOCO/A/A", "ACO/AC0/AC0"):
        locs = sorted(printed.replace("0", "O").split("/"))
        assert sum(sorted(p.split("/")) == locs for p in patterns) == 1


def brute_force_count(na: int, no: int, nc: int, nl: int) -> int:
    """Independent count: label everything, then identify states up to renaming."""
    import itertools
    seen = set()
    for agents in itertools.product(range(nl), repeat=na):
        for conts in itertools.product(range(nl), repeat=nc):
            for objs in itertools.product(range(nc), repeat=no):
                per_loc = []
                for loc in range(nl):
                    loads = sorted((objs.count(c) for c in range(nc) if conts[c] == loc),
                                   reverse=True)
                    per_loc.append((agents.count(loc), tuple(loads)))
                seen.add(tuple(sorted(per_loc)))
    return len(seen)


@pytest.mark.parametrize("comp", [(3, 3, 3, 3), (2, 2, 2, 2), (2, 3, 2, 3), (3, 1, 2, 2),
                                  (1, 2, 3, 2)])
def test_pattern_count_matches_brute_force(comp: tuple[int, int, int, int]) -> None:
    assert len(placement_patterns(Composition(*comp))) == brute_force_count(*comp)


def test_state_transition_example() -> None:
    """A and B in the kitchen with the apple in the box. E: A goes to the garden; M: B moves
    the apple to the basket; E: A comes back; E: B goes to the garden."""
    world = World(("A", "B"), ("kitchen", "garden"),
                  (("kitchen", "garden"), ("garden", "kitchen")),
                  {"A": "kitchen", "B": "kitchen"},
                  {"box": "kitchen", "basket": "kitchen"}, {"apple": "box"},
                  initial_knowledge="perceived")
    s = initial_state(world)
    events = [enter(world, s, 0, "A", "garden"), move_object(world, s, 1, "B", "apple", "basket"),
              enter(world, s, 2, "A", "kitchen"), enter(world, s, 3, "B", "garden")]
    assert replay(world, events)["apple"] == "basket"
    assert belief(world, events, ("A",), "apple") == "box"  # first-order false belief
    assert belief(world, events, ("B",), "apple") == "basket"  # first-order true belief
    assert belief(world, events, ("B", "A"), "apple") == "box"  # second-order false belief
    assert belief(world, events, ("A", "B"), "apple") == "box"


def test_timelines_complete_and_follow_the_pattern() -> None:
    for seed in range(300):
        kinds = parse_timeline(["E->M->E->M", "E->E->M->M", "M->E->E->M", "E→M→M→E"][seed % 4])
        world, events = generate_anatom_story(Composition(3, 3, 3, 3), kinds, seed)
        assert [("E" if e.action == "enter" else "M") for e in events] == list(kinds)
        replay(world, events)  # preconditions hold at every step


def test_items_only_well_defined_and_balanced() -> None:
    items = anatom_items(30, seed=2, require_all=True)
    counts = collections.Counter(it.question_type for it in items)
    assert counts == {t: 30 for t in ANATOM_QUESTION_TYPES}
    for it in items:
        assert it.answer in it.candidates
        kind = it.question_type
        if "true" in kind:
            assert it.answer == it.last_location
        if "false" in kind:
            assert it.answer != it.last_location
        assert it.tom_order == (2 if kind.startswith("second") else
                                1 if kind.startswith("first") else 0)
    loose = anatom_items(30, seed=2)
    assert {it.question_type for it in loose} <= set(ANATOM_QUESTION_TYPES)
    assert anatom_items(3, seed=9) == anatom_items(3, seed=9)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: parse_timeline("E->X"), "timeline must be"),
    (lambda: Composition(0, 3, 3, 3), "n_agents"),
    (lambda: anatom_items(0, seed=1), "n_stories"),
    (lambda: generate_anatom_story(Composition(3, 3, 1, 3), "M", 0, max_tries=5),
     "could not be completed"),
])
def test_bad_anatom_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_anatom_joins_the_length_design() -> None:
    import re

    from tomstats.stories.audit import sentences

    items = anatom_items(4, seed=3, contexts=(200, 1000), require_all=True)
    assert len(items) == 4 * 2 * 6
    plain = {it.item_id: it for it in anatom_items(4, seed=3, require_all=True)}
    for it in items:
        assert it.context_words in (200, 1000)
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
        base = plain[it.item_id.replace(f"-w{it.context_words}", "")]
        assert (it.answer, it.question) == (base.answer, base.question)
        # the original sentences survive in order; padding names no object or container
        own = sentences(base.story)
        kept = [s for s in sentences(it.story) if s in own]
        assert kept == own
        things = [*it.candidates, it.target]
        for s in sentences(it.story):
            if s not in own:
                assert not re.search(r"\b(" + "|".join(things) + r")\b", s, re.I), s
        assert it.belief_status == ("true" if it.question_type.endswith("true_belief") else
                                    "false" if it.question_type.endswith("false_belief")
                                    else "none")
