"""Length ladders: each story told at every length with the same events, questions and gold
answers, grown only with sentences that move no one; the coded tracker, the readable one and
an independent one written in the tests agree at every step."""

from __future__ import annotations

import collections
import itertools
import random

import pytest

from stories.test_generator import independent_answers
from stories.test_items_design import last_seen, rebuild
from stories.test_weaving import HOST
from tomstats.stories import audit_by_length, build_design_items
from tomstats.stories.audit import item_parse, sentences
from tomstats.stories.audit_adversary import fold_units
from tomstats.stories.beliefs import belief, well_defined
from tomstats.stories.items_design import _tell, object_names
from tomstats.stories.ladder import grow_story, words_after_block
from tomstats.stories.narrative import natural_setting
from tomstats.stories.settings import CHARACTERS

CONTEXTS = (200, 500, 1000)
#: What a question and its answer are made of: identical at every step of a ladder.
SAME = ("question", "answer", "question_type", "tom_order", "agents", "target",
        "last_location", "first_common_location", "belief_status", "same_as",
        "mislead_distance", "candidates", "setting", "n_characters", "seed")
SAME_META = ("story_id", "events", "roles", "scenario", "critical_span", "simpler_answers",
             "join_places", "extra_unseen", "answer_reach", "reference_hops", "selection")


@pytest.fixture(scope="module")
def ladders():
    return build_design_items(4, seed=5, contexts=CONTEXTS, within_story=True, tellings=1,
                              question_types=("tom", "wm_human", "wm_object"))


@pytest.fixture(scope="module")
def end_ladders():
    """The other anchor, another setting, the longest paper length."""
    return build_design_items(2, seed=6, contexts=(200, 5000), setting="field",
                              within_story=True, ladder_anchor="end", tellings=1)


def by_story(items):
    out = collections.defaultdict(list)
    for it in items:
        out[it.metadata["story_id"]].append(it)
    return out


def told_moves(item) -> list[tuple[str, str, str | None, tuple[str, ...]]]:
    """The told moves the audit's parser finds: sentence, actor, place, hosts."""
    story = item_parse(item).story
    return [(story.text[slice(*story.spans[m.sentence])], m.actor, m.place, m.hosts)
            for m in story.moves]


def test_every_story_at_every_length(ladders) -> None:
    stories = by_story(ladders)
    assert len(stories) == 4  # n_per_cell ladders
    assert len({it.item_id for it in ladders}) == len(ladders)
    cells = collections.Counter((it.context_words, it.tom_order) for it in ladders
                                if it.question_type in ("tom", "reality"))
    assert cells == {(c, o): 4 for c in CONTEXTS for o in (0, 1, 2)}
    assert [it.context_words for it in ladders] == sorted(it.context_words for it in ladders)
    for group in stories.values():
        steps = {(it.context_words, it.metadata["ladder"]["step"]) for it in group}
        assert steps == {(c, i) for i, c in enumerate(CONTEXTS)}
        assert {tuple(it.metadata["ladder"]["lengths"]) for it in group} == {CONTEXTS}
        assert len({it.story for it in group if it.question_type != "wm_object"}) == 3


def test_every_step_has_the_same_events_questions_and_answers(ladders, end_ladders) -> None:
    for items in (ladders, end_ladders):
        for group in by_story(items).values():
            questions = collections.defaultdict(list)
            for it in group:
                questions[(it.question_type, it.tom_order)].append(it)
            for steps in questions.values():
                assert len(steps) == len({it.context_words for it in items})
                for it in steps[1:]:
                    for f in SAME:
                        assert getattr(it, f) == getattr(steps[0], f), (it.item_id, f)
                    for f in SAME_META:
                        assert it.metadata[f] == steps[0].metadata[f], (it.item_id, f)
                    # the pair: the same other version at every step
                    assert bool(it.pair_id) == bool(steps[0].pair_id)


def test_lengths_within_two_percent(ladders, end_ladders) -> None:
    for it in ladders + end_ladders:
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words, it.item_id
        assert it.n_words == len(it.story.split())


def test_trackers_agree_at_every_step(ladders, end_ladders) -> None:
    """The gold answers (the coded tracker), the readable tracker and the independent one of
    tests/stories/test_generator.py agree on every item of every step."""
    checked = 0
    for it in ladders + end_ladders:
        got = independent_answers(it)
        key = "wm" if it.question_type.startswith("wm") else str(it.tom_order)
        assert got[key] == it.answer, (it.item_id, got, it.answer)
        if it.question_type in ("tom", "reality"):
            world, events = rebuild(it)
            assert belief(world, events, it.agents, it.target) == it.answer
            if it.tom_order:  # the observers' tail moves find no seen absence
                assert well_defined(world, events, it.agents, it.target), it.item_id
            if it.tom_order == 1:
                assert last_seen(world, events, it.agents[0], it.target) == it.answer
        checked += 1
    assert checked == len(ladders) + len(end_ladders) == 4 * 3 * 5 + 2 * 2 * 3


def test_each_step_keeps_the_step_before_it(ladders, end_ladders) -> None:
    """Growing only adds sentences: a step's sentences are, in order, among the next step's
    (the object telling's too); the critical block and every move are told alike."""
    for items in (ladders, end_ladders):
        for group in by_story(items).values():
            for kind in ("reality", "wm_object"):
                steps = sorted((it for it in group if it.question_type == kind),
                               key=lambda it: it.context_words)
                for short, long in itertools.pairwise(steps):
                    rest = iter(sentences(long.story))
                    assert all(s in rest for s in sentences(short.story)), long.item_id
                    assert told_moves(short) == told_moves(long)


def test_anchors(ladders, end_ladders) -> None:
    """``end``: the words after the block are the shortest step's; ``relative``: the block's
    share of the free words nears the ladder's target position as the story grows."""
    for group in by_story(end_ladders).values():
        after = {it.metadata["ladder"]["words_after_block"] for it in group}
        assert len(after) == 1
        words = after.pop()
        tails = {" ".join(it.story.split()[-words:]) for it in group}
        assert len(tails) == 1
        assert max(it.critical_position for it in group) > 0.9  # the block moves to the end
    near = 0
    for it in ladders:
        ladder = it.metadata["ladder"]
        if it.context_words == 1000 and ladder["position"] > 0.2:
            assert abs(it.critical_position - ladder["position"]) < 0.05, it.item_id
            near += 1
    assert near >= 1


def test_grow_story_keeps_block_events_and_marks() -> None:
    st = natural_setting("calls")
    chars = CHARACTERS[:6]
    ps = _tell(st, chars, "ff_z", 200, 3, places=list(st.locations), critical_position=0.4,
               mislead_distance=5, tolerance=0.02, objects=True, lively=True)
    b0, b1 = ps.block_sentences
    step = ps
    for n, anchor in ((600, "relative"), (1500, "end")):
        grown = grow_story(step, st, chars, n, rng=random.Random(n), anchor=anchor,
                           critical_position=0.4, objects=object_names(st, len(chars)))
        g0, g1 = grown.block_sentences
        assert grown.sentences[g0:g1] == ps.sentences[b0:b1]
        assert grown.events == ps.events and grown.told == ps.told
        assert grown.text == " ".join(grown.sentences)
        assert abs(len(grown.text.split()) - n) <= 0.02 * n
        assert abs(len(grown.object_text.split()) - n) <= 0.02 * n
        told = [m[0] for m in grown.marks if m[0] >= 0]
        assert told == list(range(len(ps.events)))  # every event told once, in order
        if anchor == "end":
            assert words_after_block(grown) == words_after_block(step)
        step = grown
    with pytest.raises(ValueError, match="more than"):
        grow_story(step, st, chars, 500, rng=random.Random(0))
    with pytest.raises(ValueError, match="anchor"):
        grow_story(ps, st, chars, 500, rng=random.Random(0), anchor="middle")


def test_selection_keeps_one_telling_per_ladder() -> None:
    """With tellings, a telling is a whole ladder (both versions at every step): one score,
    one kept telling for all of its items."""
    items = build_design_items(20, seed=2, contexts=(200, 500), orders=(1, 2),
                               within_story=True, tellings=2)
    kept = collections.defaultdict(set)
    for it in items:
        pair = it.pair_id.split("-lp")[1].split("-")[0]
        kept[pair].add(tuple(sorted(it.metadata["selection"].items())))
    assert len(kept) == 10 and all(len(v) == 1 for v in kept.values())
    assert {dict(next(iter(v)))["kept"] for v in kept.values()} == {0, 1}


def test_woven_ladder_keeps_its_events() -> None:
    items = build_design_items(2, seed=4, contexts=(200, 800), within_story=True,
                               host_text=HOST, tellings=1)
    for group in by_story(items).values():
        assert len({str(it.metadata["events"]) for it in group}) == 1
        for it in group:
            assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
            assert it.critical_position is None
            assert independent_answers(it)[str(it.tom_order)] == it.answer


def test_audit_per_length_and_pooled_counts_stories(ladders) -> None:
    audits = audit_by_length(ladders, adversary=False, lint=False)
    assert list(audits) == ["200", "500", "1000", "all"]
    for key, audit in audits.items():
        lengths = {c["length"] for c in audit.cells}
        assert lengths == (set(CONTEXTS) if key == "all" else {int(key)})
        for row in audit.pooled:  # a story's steps are one observation, not three
            assert row["n"] == row["stories"] * (3 if key == "all" else 1)
    # the adversary holds out every step of a ladder (and its other version) together
    units = fold_units([item_parse(it) for it in ladders])
    stories, lengths = collections.defaultdict(set), collections.defaultdict(set)
    for it, u in zip(ladders, units, strict=True):
        stories[u].add(it.metadata["story_id"])
        lengths[u].add(it.context_words)
    assert len(stories) == 2 and all(len(v) == 2 for v in stories.values())
    assert all(v == set(CONTEXTS) for v in lengths.values())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"within_story": True, "contexts": (200,)}, "two context lengths"),
    ({"within_story": "yes"}, "within_story"),
    ({"within_story": True, "ladder_anchor": "middle"}, "ladder_anchor"),
    ({"ladder_anchor": "end"}, "needs within_story=True"),
    ({"within_story": True, "ladder_anchor": "end", "host_text": HOST}, "host_text"),
])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    args = {"n_per_cell": 1, "seed": 0, "contexts": (200, 500)} | kwargs
    with pytest.raises(ValueError, match=message):
        build_design_items(**args)


def test_growth_keeps_what_the_text_rules_on_t_answer(ladders, end_ladders) -> None:
    """Sentences inserted after T's final move name T with T's decoy only, so the place
    named in the last sentence naming T (``t_last``) and the place most named with T
    (``t_comention``) are the same at every step of a ladder: a text rule on T answers a
    story alike at every length (before, a remark about the place least named with T
    told late in a long step changed both)."""
    from tomstats.stories.audit import rule_answers

    checked = 0
    for items in (ladders, end_ladders):
        answers = collections.defaultdict(set)
        for it in items:
            if it.question_type in ("tom", "reality"):
                got = rule_answers(it, ("t_last", "t_comention"))
                answers[(it.metadata["story_id"], it.question_type, it.tom_order)].add(
                    (got["t_last"], got["t_comention"]))
                checked += 1
        assert all(len(v) == 1 for v in answers.values()), \
            {k: v for k, v in answers.items() if len(v) > 1}
    assert checked >= 40


def test_lively_tail_moves_leave_the_answers_and_enter_asked_places() -> None:
    """The observers' moves after the block of a lively telling keep every answer (the
    tracker check of ``plot_items`` passes) and are not kept out of the asked places: over
    a few stories some enter one (kept out, "the places the observers never go" would
    point at the answers); the place notes name a place not named since the opening."""
    st = natural_setting("rooms")
    entered_asked = notes = 0
    for seed in range(12):
        ps = _tell(st, CHARACTERS[:8], ("tf", "ff_none", "tt")[seed % 3], 200, seed,
                   critical_position=None, mislead_distance=10, tolerance=0.02,
                   objects=False, places=st.locations, lively=True)
        asked = {ps.expected[k] for k in ("S1", "S2", "S1S2")} - {ps.expected["reality"]}
        final = ps.critical_span[1]
        tail = [e for e in ps.events[final + 1:] if e.actor in (ps.roles["S1"], ps.roles["S2"])]
        entered_asked += any(e.location in asked for e in tail)
        block_end = ps.block_sentences[1]
        notes += any(ev < 0 and places and not who for ev, who, places
                     in ps.marks[block_end:block_end + 2])
    assert entered_asked >= 2, entered_asked
    assert notes >= 6, notes
