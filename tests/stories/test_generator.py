"""The design generator, second round: text a careful reader accepts, gold answers that an
independent tracker written here agrees with, paired versions, and reference load recorded
and balanced."""

from __future__ import annotations

import collections
import re

import pytest

from tomstats.stories import build_design_items
from tomstats.stories.audit import item_parse, sentences
from tomstats.stories.narrative import (
    _ADVERBIALS,
    _JOINS,
    _JOINS_CALLS,
    _OPENERS,
    NATURAL_SETTINGS,
    articles,
    near_duplicate,
)
from tomstats.stories.plot import MAX_MOVE_RUN

SETTINGS = ("rooms", "field", "calls")


@pytest.fixture(scope="module")
def items():
    """Every setting, the three question types, two lengths (200 words included)."""
    return [it for s in SETTINGS
            for it in build_design_items(16, seed=7, setting=s, contexts=(200, 1000),
                                         question_types=("tom", "wm_human", "wm_object"))]


def stories(items, setting=None):
    seen = {}
    for it in items:
        if setting is None or it.setting == setting:
            seen.setdefault(it.story, it)
    return list(seen.values())


# ---------------------------------------------------------------- text rules

def test_a_before_a_vowel_is_an(items) -> None:
    assert articles("She peels a orange and a pear.") == "She peels an orange and a pear."
    for it in stories(items):
        assert not re.search(r"\b[Aa] [aeiouAEIOU]", it.story), it.story


_MANNER = {m.lower() for m in (*_OPENERS, *(a for bank in _ADVERBIALS.values() for a in bank))}


def manner_phrases(sentence: str) -> int:
    """Manner or time phrases set off by a comma: leading ("Meanwhile, …") or trailing
    ("…, with a sigh.")."""
    parts = [p.strip(" .").lower() for p in narration(sentence).split(",")]
    return sum(p in _MANNER for p in parts)


def test_one_manner_phrase_at_most(items) -> None:
    assert manner_phrases("Meanwhile, Bob fixes a button, soon afterwards.") == 2  # the check
    for it in stories(items):
        for s in sentences(it.story):
            assert manner_phrases(s) <= 1, s


_PAST = re.compile(r"\b(Right now|By now|All the while|was|were|had|has heard|dreamt)\b")


def narration(sentence: str) -> str:
    """The sentence without quoted speech."""
    return re.sub(r'"[^"]*"', " ", sentence)


def test_one_tense(items) -> None:
    assert _PAST.search("Right now, Hank has heard that the cellar was repainted.")
    for it in stories(items):
        for s in sentences(it.story):
            assert not _PAST.search(narration(s)), s


def test_no_near_duplicate_within_ten_sentences(items) -> None:
    assert near_duplicate("The quarry echoes when anyone speaks.",
                          "Apparently, the quarry echoes when anyone speaks.")
    assert not near_duplicate("Bob walks into the kitchen.", "Bob walks into the cellar.")
    for it in stories(items):
        ss = sentences(it.story)
        for i, s in enumerate(ss):
            for x in ss[max(0, i - 10):i]:
                assert not near_duplicate(s, x), (x, s)


def move_patterns(setting: str) -> list[re.Pattern[str]]:
    st = NATURAL_SETTINGS[setting]
    forms = [*st.moves, *(_JOINS_CALLS if setting == "calls" else _JOINS)]
    out = []
    for f in forms:
        body = re.escape(f[:-1]).replace(re.escape("{a}"), r"[A-Z][a-z]+").replace(
            re.escape("{l}"), r"the [a-z ]+").replace(re.escape("{b}"), r"[A-Z][a-z ,]+")
        out.append(re.compile(rf"(^|, ){body}(,|\.)"))
    return out


def test_no_long_runs_of_moves(items) -> None:
    for setting in SETTINGS:
        pats = move_patterns(setting)
        for it in stories(items, setting):
            if it.question_type == "wm_object":
                continue
            run = 0
            for s in sentences(it.story)[1:]:
                run = run + 1 if any(p.search(s) for p in pats) else 0
                assert run <= MAX_MOVE_RUN, it.story


#: Words a story of the setting never uses (things the setting does not have).
FOREIGN = {
    "calls": ("wall", "walls", "pen", "pencil", "weekend", "tidy", "floor", "curtains", "boots",
              "grass", "mud", "shoelace", "cellar", "haunted", "umbrella", "repainted"),
    "field": ("repainted", "wall", "walls", "ceiling", "window", "wallpaper", "microphone",
              "screen", "camera", "slippers", "sofa", "chat"),
    "rooms": ("microphone", "camera", "screen", "headset", "muddy", "nettles", "crows", "chat"),
}


def test_no_words_of_another_setting(items) -> None:
    for setting in SETTINGS:
        bad = re.compile(r"\b(" + "|".join(FOREIGN[setting]) + r")\b", re.I)
        for it in stories(items, setting):
            m = bad.search(it.story)
            assert m is None, (setting, m and m.group(), it.story)


def test_object_stories_are_told_with_people_carrying_objects(items) -> None:
    for it in items:
        if it.question_type != "wm_object":
            continue
        assert "deep in thought" not in it.story
        assert "see" not in it.metadata["instructions"].split()
        assert "people carry them" in it.metadata["instructions"]
        assert abs(it.n_words - it.context_words) <= 0.02 * it.context_words
        for c in it.metadata["storyboard"]["characters"]:
            assert not re.search(rf"\b{c}\b", it.story)


def test_object_stories_tell_one_move_a_sentence_and_leave_out_only_fillers(items) -> None:
    """Each recorded move of a told object is one sentence naming that object and its
    place; a tight length leaves out filler objects whole, never a key character's; the
    recorded moves are the story's, and T's object's coda after them."""
    human = {(it.metadata["story_id"]): it for it in items if it.question_type == "wm_human"}
    left_out = 0
    for it in items:
        if it.question_type != "wm_object":
            continue
        h = human[it.metadata["story_id"]]
        names = it.metadata["object_names"]
        roles = it.metadata["roles"]
        assert {roles[r] for r in ("S1", "S2", "T")} <= set(names)
        told = [e[1:] for e in h.metadata["events"] if e[1] in names]
        recorded = it.metadata["events"]
        n_t = sum(e[0] == roles["T"] for e in told)
        coda = [i for i, e in enumerate(recorded)
                if e[1] == roles["T"] and sum(x[1] == roles["T"] for x in recorded[:i]) >= n_t]
        assert [e[1:] for i, e in enumerate(recorded) if i not in coda] == told
        left_out += len(names) < len(h.metadata["storyboard"]["characters"])
        found, n_moves = item_parse(it).coverage()  # one move a sentence: all parsed
        assert found == n_moves == len(recorded)
        for other in set(h.metadata["storyboard"]["characters"]) - set(names):
            assert other not in (roles["S1"], roles["S2"], roles["T"])
    assert left_out >= 1  # the 200-word stories need it


# ---------------------------------------------------------------- an independent tracker

def _perceives(pos: dict[str, str], who: str, actor: str, src: str, dst: str) -> bool:
    return who == actor or pos[who] in (src, dst)


def view(start: dict[str, str], updates: list[tuple[str, str, str, str]],
         x: str) -> tuple[dict[str, str], list[tuple[str, str, str, str]]]:
    """The story as ``x`` knows it, from the documented perception rule.

    An update is ``(entity, place, seen_from_a, seen_from_b)``: the entity is now in the
    place, and the update can be perceived from the two places (a move: the place left
    and the place entered; a sighting: the place itself). ``x`` perceives what it does and
    what happens where it stands just before; entering a place, ``x`` first sees everyone
    already there.
    """
    pos = dict(start)
    mine: list[tuple[str, str, str, str]] = []
    for ent, place, a, b in updates:
        if ent == x or pos[x] in (a, b):
            if ent == x and (a, b) != (place, place):  # x moves: it sees who is there
                mine += [(e, place, place, place) for e in sorted(pos, key=list(pos).index)
                         if e != x and pos[e] == place]
            mine.append((ent, place, a, b))
        pos[ent] = place
    return dict(start), mine


def final(start: dict[str, str], updates: list[tuple[str, str, str, str]]) -> dict[str, str]:
    pos = dict(start)
    for ent, place, _a, _b in updates:
        pos[ent] = place
    return pos


def independent_answers(item) -> dict[str, str | None]:
    sb = item.metadata["storyboard"]
    start = {c: sb["start"] for c in sb["characters"]}
    ups = [(a, loc, src, loc) for _t, a, loc, src in item.metadata["events"]]
    r = item.metadata["roles"]
    s1, s2, t = r["S1"], r["S2"], r["T"]
    st1, v1 = view(start, ups, s1)
    st12, v12 = view(st1, v1, s2)
    # where T went next after the one time S1, S2 and T were together (after the start)
    pos, meetings, wm = dict(start), [], None
    for i, (a, loc, _src, _dst) in enumerate(ups):
        pos[a] = loc
        if a in (s1, s2, t) and pos[s1] == pos[s2] == pos[t] == loc:
            meetings.append(i)
    if len(meetings) == 1:
        wm = next((loc for a, loc, _s, _d in ups[meetings[0] + 1:] if a == t), None)
    return {"0": final(start, ups)[t], "1": final(st1, v1)[t], "2": final(st12, v12)[t],
            "wm": wm}


def test_an_independent_tracker_agrees_with_every_gold_answer(items) -> None:
    checked = 0
    for it in items:
        got = independent_answers(it)
        key = "wm" if it.question_type.startswith("wm") else str(it.tom_order)
        assert got[key] == it.answer, (it.item_id, key, got, it.answer)
        checked += 1
    assert checked == len(items) >= 480


# ---------------------------------------------------------------- pairs

def test_pairs_are_one_true_and_one_false_version_of_one_question(items) -> None:
    pairs = collections.defaultdict(list)
    for it in items:
        if it.pair_id:
            pairs[it.pair_id].append(it)
        else:
            assert it.tom_order == 0  # belief items are all paired (even n per cell)
    assert pairs
    answers = collections.defaultdict(set)
    for it in items:
        if it.tom_order >= 1:
            answers[it.metadata["story_id"]].add(it.answer)
    same_start = 0  # versions told in one go share their beginning
    for group in pairs.values():
        assert len(group) == 2
        a, b = group
        assert {a.belief_status, b.belief_status} == {"true", "false"}
        assert a.question == b.question and a.tom_order == b.tom_order
        assert a.metadata["roles"]["S1"] == b.metadata["roles"]["S1"]
        assert a.metadata["storyboard"]["characters"] == b.metadata["storyboard"]["characters"]
        assert a.context_words == b.context_words and a.setting == b.setting
        # a reality tracker gets at most one version right
        assert (a.answer == a.last_location) + (b.answer == b.last_location) == 1
        golds = answers[a.metadata["story_id"]] | answers[b.metadata["story_id"]]
        # the join places of the two versions differ at most in their belief answers
        assert set(a.metadata["join_places"]) - golds == set(b.metadata["join_places"]) - golds
        ra, rb = a.metadata["roles"], b.metadata["roles"]
        assert ra == rb  # the same cast in the same roles, the same scenario places
        same_start += a.metadata["events"][:3] == b.metadata["events"][:3]
    assert same_start >= 1


# ---------------------------------------------------------------- reference load

def test_reference_load_is_recorded_and_balanced(items) -> None:
    belief = [it for it in items if it.tom_order >= 1]
    for it in items:
        reach, hops = it.metadata["answer_reach"], it.metadata["reference_hops"]
        assert reach in ("named", "joins")
        assert (hops == 0) == (reach == "named")
    by_cell = collections.defaultdict(list)
    by_length = collections.defaultdict(list)
    for it in belief:
        joins = it.metadata["answer_reach"] == "joins"
        by_cell[(it.tom_order, it.belief_status)].append(joins)
        by_length[it.context_words].append(joins)
    for groups in (by_cell, by_length):
        shares = [sum(v) / len(v) for v in groups.values()]
        assert 0.1 < min(shares) and max(shares) - min(shares) <= 0.12, groups.keys()


def test_a_sentence_taken_back_frees_no_opener_of_the_sentences_kept() -> None:
    """The opener memory follows the sentences the story keeps: after sentences that
    overflow the length are taken back (``_Teller.unsay``), an opener of the last kept
    sentences is still not used again. (Before, the memory counted the sentences taken
    back: "Apparently, Frank says that … Apparently, the audio in the lobby crackles".)"""
    import random

    from tomstats.stories.narrative import OPENER_MEMORY, STATIC_OPENERS, natural_setting
    from tomstats.stories.plot import _Teller

    st = natural_setting("calls")
    chars = ("Alice", "Bob", "Carol", "Dan")
    tl = _Teller(st, chars, {"S1": "Alice", "S2": "Bob", "T": "Carol"}, random.Random(0), 1.0)
    for op in STATIC_OPENERS:
        tl.say(f"{op}, Dan naps.")
    n = len(tl.sents)
    for _ in range(OPENER_MEMORY):
        tl.say("Bob yawns.")
    assert tl.ph._phrase(STATIC_OPENERS) is not None  # four sentences without an opener
    tl.unsay(n)
    kept = [s.split(",")[0] for s in tl.sents[-OPENER_MEMORY:]]
    assert kept == list(STATIC_OPENERS)[-OPENER_MEMORY:]
    assert tl.ph._phrase(kept) is None
