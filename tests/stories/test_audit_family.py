"""The audit's story parse, the told-event rule family, the rule registry and the
reference load, checked by hand on small stories."""

from __future__ import annotations

import dataclasses

import pytest

from tomstats.stories import Item, build_design_items
from tomstats.stories.audit import (
    THRESHOLDS,
    audit_items,
    difference_check,
    format_audit,
    rule_answers,
    share_check,
)
from tomstats.stories.audit_parse import Move, item_parse, move_forms, parse_story
from tomstats.stories.audit_rules import RULES, rule
from tomstats.stories.narrative import NATURAL_SETTINGS

LOCS = ("hallway", "kitchen", "study", "cellar")
STORY = ("Ann, Bob and Cat are in the hallway. Bob walks into the kitchen. Ann goes into the "
         "study. Bob says that the cellar is cold. After lunch, Bob heads to the study, "
         "humming a tune. Cat joins Ann and Bob. Bob walks into the cellar. Bob goes into the "
         "study. Ann steps into the kitchen.")


def item(story: str = STORY, answer: str = "kitchen", *, order: int = 2,
         agents: tuple[str, ...] = ("Ann", "Cat"), target: str = "Bob",
         qtype: str = "tom", **kw) -> Item:
    return Item(item_id=kw.pop("item_id", "x"), story=story, question="?", answer=answer,
                question_type=qtype, tom_order=order, context_words=200,
                n_words=len(story.split()), candidates=kw.pop("candidates", LOCS),
                agents=agents[:order] if qtype == "tom" else agents, target=target,
                last_location="study", setting="rooms", **kw)


def test_told_moves_are_move_sentences_only() -> None:
    p = parse_story(STORY, LOCS)
    assert p.moves == (
        Move(1, "bob", "kitchen"), Move(2, "ann", "study"), Move(4, "bob", "study"),
        Move(5, "cat", None, ("ann", "bob")), Move(6, "bob", "cellar"),
        Move(7, "bob", "study"), Move(8, "ann", "kitchen"))
    # the remark about the cellar (sentence 3) is not a move
    assert 3 not in {m.sentence for m in p.moves}


def test_every_narrative_move_form_parses() -> None:
    """Each setting's move forms, with the adverbials the generator adds, and objects."""
    for st in NATURAL_SETTINGS.values():
        for form in st.moves:
            for text in (form, "Quite suddenly, " + form,
                         form[:-1] + ", without looking back."):
                s = text.format(a="Hank", l=st.text(st.places[1]))
                p = parse_story("Intro. " + s, st.locations)
                assert p.moves == (Move(1, "hank", st.places[1]),), s
    for s, who in (("Someone carries the silver key to the ditch.", "silver key"),
                   ("The silver key is put down in the ditch.", "silver key")):
        p = parse_story(s, NATURAL_SETTINGS["field"].locations)
        assert p.moves == (Move(0, who, "ditch"),)
    assert "{a} joins {b}." in move_forms()


def test_family_rules_by_hand() -> None:
    got = rule_answers(item())
    assert {k: got[k] for k in ("t_dest_last1", "t_dest_last2", "t_dest_last3",
                                "t_dest_first", "t_dest_most", "t_dest_least",
                                "t_comention")} == {
        # Bob's told destinations: kitchen, study, cellar, study (the remark is no move)
        "t_dest_last1": "study", "t_dest_last2": "cellar", "t_dest_last3": "study",
        "t_dest_first": "kitchen", "t_dest_most": "study",
        "t_dest_least": "",  # kitchen and cellar both once: a tie, no answer
        # sentences naming Bob name hallway, kitchen, cellar (twice), study (twice):
        # a tie of cellar and study, the one named last wins
        "t_comention": "study"}
    # Ann (S1): study, kitchen; Cat (S2) only joins: no told destination
    assert (got["s1_dest_last1"], got["s1_dest_last2"], got["s1_dest_first"]) == (
        "kitchen", "study", "study")
    assert got["s1_dest_most"] == got["s1_dest_least"] == got["s1_dest_last3"] == ""
    assert all(got[f"s2_{s}"] == "" for s in ("dest_last1", "dest_first", "dest_most"))
    assert got["s2_comention"] == "hallway"  # "Ann, Bob and Cat are in the hallway."
    # mentions: hallway 1, kitchen 2, study 3, cellar 2
    assert got["story_least"] == "hallway" and got["story_frequent"] == "study"
    # an order-1 question has no S2: its rules answer nothing
    one = rule_answers(item(order=1))
    assert one["s1_dest_last1"] == "kitchen" and one["s2_comention"] == ""


@pytest.fixture
def second_most():
    """The registry's docstring example, registered for one test."""
    from collections import Counter

    @rule("t_dest_second_most")
    def t_dest_second_most(p):
        ranked = Counter(p.dests("T")).most_common(2)
        return ranked[1][0] if len(ranked) > 1 else ""

    yield t_dest_second_most
    del RULES["t_dest_second_most"]


def test_registry_adds_a_rule_and_refuses_a_second_one(second_most) -> None:
    assert rule_answers(item())["t_dest_second_most"] == "kitchen"
    audit = audit_items([item(item_id=str(i)) for i in range(3)], adversary=False)
    assert "t_dest_second_most" in audit.pooled[0]
    assert "t_dest_second_most" in format_audit(audit).splitlines()[1]
    with pytest.raises(ValueError, match="registered already"):
        rule("t_dest_second_most")(second_most)
    with pytest.raises(ValueError, match="lower-case identifier"):
        rule("Bad Name")
    with pytest.raises(ValueError, match="unknown rule"):
        rule_answers(item(), ["nope"])


def test_rules_read_the_text_not_the_metadata() -> None:
    """Recorded events that disagree with the text change nothing."""
    it = item(metadata={"events": [[0, "Bob", "cellar", "hallway"]]})
    got = rule_answers(it)
    assert got == rule_answers(item())
    assert item_parse(it).coverage() == (7, 1)


def _checked_rules(audit, scope: str) -> set[str]:
    return {c.name[5:] for c in audit.checks if c.name.startswith("rule ") and c.scope == scope}


def test_reality_exemptions_and_roles() -> None:
    items = [item(order=o, item_id=f"{o}{i}") for o in (0, 1) for i in range(3)]
    items += [dataclasses.replace(item(order=1, item_id=f"t{i}"), answer="study",
                                  belief_status="true") for i in range(3)]
    audit = audit_items(items, adversary=False)
    false1 = _checked_rules(audit, "rooms order 1 belief false")
    true1 = _checked_rules(audit, "rooms order 1 belief true")
    zero = _checked_rules(audit, "rooms order 0 belief none")
    assert "reality" not in false1 | true1 | zero
    assert "t_dest_last1" in false1 and "t_dest_last1" not in true1 | zero
    assert "s1_dest_last2" in false1 and "s2_dest_last2" not in false1  # no S2 at order 1
    assert "s1_dest_last2" not in zero


def test_cell_checks_need_thirty_items() -> None:
    """A rule right on every item: FAIL pooled, and per cell only where n >= 30."""
    items = [item(answer="study", item_id=f"a{i}", order=1) for i in range(29)]
    items += [dataclasses.replace(item(answer="study", item_id=f"b{i}", order=1),
                                  context_words=500) for i in range(30)]
    audit = audit_items(items, adversary=False, lint=False)
    scopes = {c.scope for c in audit.failed if c.name == "rule s1_dest_last2"}
    # the answer is the item's last_location: true beliefs
    assert scopes == {"rooms order 1 belief true", "rooms 500 words order 1 belief true"}
    limit = audit.pooled[0]["chance"] + THRESHOLDS["rule_above_chance_cell"]
    cell = next(c for c in audit.checks if c.name == "rule s1_dest_last2"
                and c.scope.startswith("rooms 500"))
    assert cell.limit.startswith(f"<= {limit:.3f}")


def test_difference_check_against_the_two_proportion_score() -> None:
    # 30/40 vs 10/40: d = 0.5 beyond 0.10, se = sqrt(2 * .75 * .25 / 40)
    c = difference_check("d", "s", (30, 40), (10, 40), limit=0.1, label="<= 0.1")
    se = (2 * 0.75 * 0.25 / 40) ** 0.5
    assert c.verdict == "FAIL" and c.z == pytest.approx(0.4 / se)
    c = difference_check("d", "s", (6, 20), (3, 20), limit=0.1, label="<= 0.1")
    assert c.verdict == "UNSURE" and c.need > 40
    bigger = difference_check("d", "s", (6 * c.need, 20 * c.need), (3 * c.need, 20 * c.need),
                              limit=0.1, label="")
    assert bigger.verdict == "FAIL"
    assert difference_check("d", "s", (5, 20), (4, 20), limit=0.1, label="").verdict == "PASS"
    assert share_check("r", "s", 1, 2, upper=0.9, limit="").verdict == "PASS"


def test_reference_load_by_hand() -> None:
    """Bob's told destinations are kitchen, study, cellar: the hallway is join-only."""
    items = [dataclasses.replace(item(order=o, answer=a, item_id=f"{o}{a}"),
                                 belief_status=b)
             for o, a, b in ((1, "hallway", "false"), (1, "kitchen", "false"),
                             (2, "hallway", "false"), (2, "hallway", "true"))]
    audit = audit_items(items, adversary=False, lint=False)
    cells = {(r["order"], r["belief"]): r["join_only"] for r in audit.reference
             if r["by"] == "cell"}
    assert cells == {("1", "false"): 0.5, ("2", "false"): 1.0, ("2", "true"): 1.0}
    check = next(c for c in audit.checks if c.name.startswith("join-only"))
    assert check.value == 0.5 and "order 2 false vs order 1 false" in check.scope


def test_design_items_are_parsed_completely() -> None:
    items = build_design_items(4, seed=3, contexts=(500,), setting="calls",
                               question_types=("tom", "wm_human", "wm_object"))
    for it in items:
        parsed, recorded = item_parse(it).coverage()
        assert parsed == recorded, it.item_id
    audit = audit_items(items, adversary=False)
    assert all(r["move_coverage"] == 1.0 for r in audit.text)


def test_token_estimate_equals_the_token_by_token_count() -> None:
    """The regex-count form of estimate_tokens equals the rule it states, applied token by
    token (letters: ceil(len / 7) a run; every digit and other non-space character: 1)."""
    import math
    import random
    import re

    from tomstats.stories.audit import estimate_tokens

    def by_token(text: str) -> int:
        return sum(math.ceil(len(w) / 7) if w[0].isalpha() else 1
                   for w in re.findall(r"[A-Za-z]+|[0-9]|[^\sA-Za-z0-9]", text))

    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABC  \n.,;'\"0123456789_-é"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert estimate_tokens(text) == by_token(text), text


@pytest.mark.parametrize("setting", ["rooms", "calls", "field"])
def test_a_short_story_does_not_end_with_its_observers_where_the_answer_is(setting) -> None:
    """At 200 words the belief block fills the story: told without the observers' tail
    moves, S1's last told destination answered about half of the true-belief order-1
    questions (0.51-0.53 at 150 per cell, seed 11). Told lively, it is near chance (1/6)
    on both belief statuses, and every rule of the family passes the cell."""
    items = build_design_items(150, seed=11, contexts=(200,), setting=setting, progress=False,
                               orders=(1,))
    audit = audit_items(items, adversary=False, lint=False)
    assert not audit.failed, [str(c) for c in audit.failed]
    scores = {c.scope: c.value for c in audit.checks if c.name == "rule s1_dest_last1"}
    assert scores and max(scores.values()) <= 0.30, scores
