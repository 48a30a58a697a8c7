"""The audit on the first-round design generator: its told events and a learned ranker
answer the items, and the audit says so beyond sampling noise.

The fixture ``tests/fixtures/stories/items_round1_seed7.json.xz`` holds 2,688 items of the
design generator as it was at commit cc142be (three settings, 64 stories per length at 200,
500 and 1,000 words; tom, wm_human and, from 500 words, wm_object questions), made with

    python tests/fixtures/stories/make_round1.py tests/fixtures/stories/items_round1_seed7.json.xz

(see that script's docstring for the exact calls).
"""

from __future__ import annotations

import json
import lzma

import pytest

from tomstats.cli import main
from tomstats.stories import Item, write_items
from tomstats.stories.audit import audit_items, format_audit

FIXTURE = "tests/fixtures/stories/items_round1_seed7.json.xz"
SETTINGS = ("calls", "field", "rooms")


def load_fixture(path) -> list[Item]:
    """Items of the fixture (each story text stored once, items point at it by index)."""
    d = json.loads(lzma.decompress(path.read_bytes()))
    assert d["format"] == "tomstats.audit-fixture/1"
    return [Item.from_dict({**x, "story": d["stories"][x["story"]]}) for x in d["items"]]


@pytest.fixture(scope="module")
def round1(repo_root):
    items = load_fixture(repo_root / FIXTURE)
    return items, audit_items(items)


def _failed(audit) -> set[tuple[str, str]]:
    return {(c.name, c.scope) for c in audit.failed}


def test_fixture_is_the_first_round(round1) -> None:
    items, _audit = round1
    assert len(items) == 2688 and {it.setting for it in items} == set(SETTINGS)
    assert len({it.story for it in items}) == 3 * (3 * 64 + 2 * 64)


def test_told_destination_rules_fail(round1) -> None:
    """T's second-to-last told destination answers order-1 false beliefs in every
    setting; S1's first told destination, order-2 false beliefs."""
    _items, audit = round1
    failed = _failed(audit)
    for setting in SETTINGS:
        assert ("rule t_dest_last2", f"{setting} order 1 belief false") in failed
        assert ("rule t_dest_last1", f"{setting} order wm_human belief none") in failed
    assert {("rule s1_dest_first", f"{s} order 2 belief false") for s in SETTINGS} & failed
    # the first audit's rules, which count every sentence naming T, pass there
    assert not {(n, s) for n, s in failed if n in ("rule t_second_last",
                                                   "rule t_near_frequent")
                and "belief false" in s}


def test_learned_adversary_fails_blind_to_the_status(round1) -> None:
    _items, audit = round1
    failed = {s for n, s in _failed(audit) if n.startswith("adversary")}
    assert {f"{s} order 1 belief false" for s in SETTINGS} <= failed
    for row in audit.pooled:
        if row["belief"] != "none":  # knowing the status helps (reported only)
            assert row["adversary_given"] >= row["adversary_blind"] - 0.05, row


def test_reference_load_and_lint_fail(round1) -> None:
    _items, audit = round1
    failed = _failed(audit)
    for setting in SETTINGS:
        ref = {(r["order"], r["belief"]): r["join_only"] for r in audit.reference
               if r["setting"] == setting and r["by"] == "cell"}
        assert ref[("2", "false")] > max(v for k, v in ref.items() if k != ("2", "false"))
        assert any(n.startswith("join-only") and s.startswith(setting) for n, s in failed)
        for check in ("lint stacked_adverbials", "lint tense_clash", "lint move_runs"):
            assert (check, f"{setting} 1000 words") in failed
    assert ("lint foreign_words", "calls 500 words") in failed
    assert "wall" in audit.foreign["calls"] and "repainted" in audit.foreign["field"]
    assert all(r["move_coverage"] == 1.0 for r in audit.text)
    text = format_audit(audit)
    assert "FAIL adversary (blind to the belief status) [rooms order 1 belief false]" in text
    assert "words of another setting in calls: " in text


def test_cli_exit_code_4(round1, tmp_path, capsys) -> None:
    items, audit = round1
    path = write_items(tmp_path / "round1.jsonl", [it for it in items if it.setting == "rooms"])
    assert main(["stories", "audit", str(path), "--seed", "0"]) == 4
    out = capsys.readouterr().out
    assert "FAIL rule t_dest_last2 [rooms order 1 belief false]" in out
    assert "Learned adversary" in out and "Reference load" in out and "Text lint" in out
