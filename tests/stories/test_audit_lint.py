"""The text lint: a clean story passes; each defect planted into it is found, and only it."""

from __future__ import annotations

import re

import pytest

from tomstats.stories import Item
from tomstats.stories.audit import audit_items
from tomstats.stories.audit_lint import (
    LINT_CHECKS,
    MAX_MOVE_RUN,
    foreign_vocabulary,
    lint_story,
)
from tomstats.stories.audit_parse import parse_story
from tomstats.stories.narrative import NATURAL_SETTINGS

CLEAN = {
    "rooms": ("Alice, Bob and Carol are in the hallway. Alice walks into the kitchen. Bob reads "
              "an old letter. Carol goes into the library. Alice tells Bob: \"I could do with "
              "a coffee.\" Bob heads to the lounge. The kitchen smells of fresh bread. Carol "
              "wanders over to the bedroom. Alice sits down for a moment."),
    "calls": ("Alice, Bob and Carol are waiting in the lobby of the conference service. Alice "
              "dials into the budget call. Bob checks the time. Carol joins the sales call. "
              "The audio in the budget call crackles now and then. Bob logs into the design "
              "call. Alice asks Bob: \"Did you finish the report?\""),
    "field": ("Alice, Bob and Carol are standing in the field. Alice climbs down into the "
              "ditch. Bob stretches both arms. Carol heads for the old well. Crows circle "
              "high above the quarry. Bob crawls over to the cave. Carol yawns loudly."),
}

# (setting, sentence planted after the second sentence, the check it must trip)
PLANTS = [
    ("rooms", "Bob peels a orange.", "a_before_vowel"),
    ("rooms", "This afternoon, Bob fixes a loose button, soon afterwards.",
     "stacked_adverbials"),
    ("rooms", "Right now, Bob has heard that the cellar is cold.", "tense_clash"),
    ("calls", "All the while, the support call was scheduled weeks ago.", "tense_clash"),
    ("rooms", "Carol once lost a glove. Carol once lost a glove.", "near_duplicate"),
    ("field", "The quarry echoes when anyone speaks. Apparently, the quarry echoes when "
              "anyone speaks.", "near_duplicate"),
    ("rooms", "Just then, Dan recalls a long story about the cellar. Later on, Dan recalls a "
              "long story about the cellar.", "near_duplicate"),
    ("field", "Dan scans the quarry, with a sigh. Dan scans the quarry, at last.",
     "near_duplicate"),
    ("calls", "Bob leans against the wall.", "foreign_words"),
    ("calls", "Bob nods, with a cup of tea.", "foreign_words"),  # a manner phrase of rooms
    ("calls", "Carol asks Bob: \"Can I borrow a pen?\"", "foreign_words"),
    ("calls", "Bob plans to tidy the sales call at the weekend.", "foreign_words"),
    ("field", "Bob says that the quarry is going to be repainted.", "foreign_words"),
    ("rooms", "Bob says that the lounge is quieter than the budget call.", "foreign_words"),
    ("rooms", " ".join(f"{n} walks into the {p}." for n, p in zip(
        ("Dan", "Eve", "Fay", "Gus", "Hal", "Ida", "Jo"),
        ("kitchen", "cellar", "lounge", "library", "bedroom", "kitchen", "cellar"),
        strict=True)), "move_runs"),
    ("rooms", "Meanwhile, Bob yawns. Meanwhile, Carol sighs.", "repeated_opener"),
    ("rooms", "Later on, Bob yawns. Carol sighs. Dan nods. Later on, Eve laughs.",
     "repeated_opener"),
    ("rooms", "The kitchen still smells of fresh paint.", "contradiction"),  # then bread
    ("rooms", "The cellar is the tidiest place in the house. The lounge is the tidiest "
              "place in the house.", "contradiction"),
    ("rooms", "Dan says that the lounge is always too cold. The lounge is warmer than the "
              "rest of the house.", "contradiction"),
    ("calls", "The agenda of the sales call is very long. Dan wonders whether the sales "
              "call needs an agenda.", "contradiction"),
    ("rooms", "In the meantime, the lounge has a creaky wooden floor.", "timed_description"),
    ("field", "Just then, the quarry is deeper than it looks.", "timed_description"),
    ("field", "Bob climbs down into the field.", "misfit_place"),
    ("field", "The field is deeper than it looks.", "misfit_place"),
    ("field", "Dan wonders who first dug the field.", "misfit_place"),
    ("calls", "The lobby runs late as usual.", "misfit_place"),
    ("calls", "Dan wonders who scheduled the lobby.", "misfit_place"),
]


def _plant(setting: str, extra: str) -> str:
    head, _sep, rest = CLEAN[setting].partition(". ")
    second, _sep, tail = rest.partition(". ")
    return f"{head}. {second}. {extra} {tail}"


def _lint(setting: str, text: str) -> dict[str, int]:
    return lint_story(parse_story(text, NATURAL_SETTINGS[setting].locations), setting)


@pytest.mark.parametrize("setting", sorted(CLEAN))
def test_clean_stories_pass(setting: str) -> None:
    assert _lint(setting, CLEAN[setting]) == dict.fromkeys(LINT_CHECKS, 0)


@pytest.mark.parametrize(("setting", "extra", "check"), PLANTS)
def test_each_planted_defect_is_found(setting: str, extra: str, check: str) -> None:
    got = _lint(setting, _plant(setting, extra))
    assert got[check] > 0, got
    assert {k for k, v in got.items() if v} == {check}, got


def test_what_is_not_a_defect() -> None:
    ok = [
        "Bob has an umbrella and a user guide.",  # "a user": a consonant sound
        "Quite suddenly, Bob walks into the cellar.",  # one adverbial
        "Right now, Bob remembers a party in the cellar long ago.",  # present main verb
        "Right now, Bob wonders whether anyone has tidied the cellar.",  # subordinate clause
        "Meanwhile, Carol leans against the door, on second thought.",  # idiom, not a past
    ]
    for s in ok:
        got = _lint("rooms", _plant("rooms", s))
        assert got["a_before_vowel"] == got["tense_clash"] == 0, (s, got)
    # the last one stacks two adverbials (Meanwhile + on second thought)
    assert _lint("rooms", _plant("rooms", ok[-1]))["stacked_adverbials"] == 1
    # a state told with an opener that fits it; the same opener four sentences apart; a
    # place's own description twice of two places; the hub in its own forms
    fine = [("rooms", "Apparently, the lounge has a creaky wooden floor."),
            ("rooms", "Meanwhile, Bob yawns. Carol sighs. Dan nods. Eve waits. Meanwhile, Fay "
                      "laughs."),
            ("rooms", "The cellar has pale blue walls. The lounge still smells of fresh "
                      "paint."),
            ("field", "Bob walks back out into the field. The grass in the field is "
                      "knee-high."),
            ("calls", "Dan goes back to the lobby. The lobby lists the calls of the day.")]
    for setting, s in fine:
        got = _lint(setting, _plant(setting, s))
        assert not any(got.values()), (s, got)
    # exactly MAX_MOVE_RUN moves in a row is allowed, one more is a run
    moves = [f"Dan walks into the {p}." for p in ("kitchen", "cellar") * 4]
    base = "Intro. "
    assert _lint("rooms", base + " ".join(moves[:MAX_MOVE_RUN]) + " Dan sighs.")[
        "move_runs"] == 0
    assert _lint("rooms", base + " ".join(moves[:MAX_MOVE_RUN + 1]))["move_runs"] == 1


def test_foreign_vocabulary_is_built_from_the_settings() -> None:
    words, places = foreign_vocabulary("calls")
    assert {"wall", "pen", "weekend", "kitchen"} & (words | set(places)) == {
        "wall", "pen", "weekend", "kitchen"}
    assert "budget call" not in places and "budget call" in foreign_vocabulary("rooms")[1]
    for name, st in NATURAL_SETTINGS.items():  # a setting's own words are never foreign
        own = {re.sub(r"s$", "", w) for t in (*st.place_notes, *st.moves)
               for w in re.findall(r"[a-z]+", t.lower()) if len(w) > 3}
        assert not own & foreign_vocabulary(name)[0], name
    assert foreign_vocabulary("nowhere") == (frozenset(), ())


def test_the_audit_fails_a_lint_check_on_any_count() -> None:
    def item(story: str, i: int) -> Item:
        return Item(item_id=str(i), story=story, question="?", answer="kitchen",
                    question_type="reality", tom_order=0, context_words=100,
                    n_words=len(story.split()), candidates=NATURAL_SETTINGS["rooms"].locations,
                    target="Alice", last_location="kitchen", setting="rooms")

    clean = audit_items([item(CLEAN["rooms"], 0)], adversary=False)
    assert all(c.verdict == "PASS" for c in clean.checks if c.name.startswith("lint"))
    bad = audit_items([item(CLEAN["rooms"], 0), item(_plant("rooms", "Bob peels a orange."),
                                                      1)], adversary=False)
    failed = {c.name for c in bad.failed}
    assert failed >= {"lint a_before_vowel"}
    assert not failed & {f"lint {c}" for c in LINT_CHECKS if c != "a_before_vowel"}


def test_near_duplicates_match_a_plain_loop() -> None:
    """The matrix count equals pairwise Jaccard over the ten sentences before, by hand."""
    import random

    from tomstats.stories.audit_lint import (
        NEAR_DUPLICATE_JACCARD,
        _near_duplicates,
        _near_duplicates_sets,
    )

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(12)]
    for _ in range(50):
        tokens = [rng.sample(vocab, rng.randint(1, 6)) for _ in range(rng.randint(0, 40))]
        want = 0
        for i, a in enumerate(tokens):
            if any(len(set(a) & set(b)) / len(set(a) | set(b)) >= NEAR_DUPLICATE_JACCARD
                   for b in tokens[max(0, i - 10):i]):
                want += 1
        assert _near_duplicates(tokens) == want == _near_duplicates_sets(
            [set(t) for t in tokens])


def test_hostile_text_is_linted_without_blowing_up() -> None:
    long_sentence = "Bob walks into the kitchen" + ", and on" * 20000 + "."
    got = _lint("rooms", "Intro. " + long_sentence + " " + "a b c. " * 3000)
    assert got["near_duplicate"] == 2999 and got["move_runs"] == 0
