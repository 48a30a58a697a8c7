"""Audit verdicts that account for sampling noise, and belief status balanced by construction.

A small item set (the README's 4 stories per length) must not FAIL from noise alone; a
biased one must still FAIL with exit code 4. The verdicts are checked against the score
test they invert, written out here independently of the Wilson formula.
"""

from __future__ import annotations

import dataclasses
import lzma
import math
from collections import Counter

import pytest

from tomstats.analysis.intervals import wilson_interval
from tomstats.cli import main
from tomstats.stories import build_design_items, read_items, write_items
from tomstats.stories.audit import audit_items, format_audit, rule_answers, share_check

Z = 1.959963984540054  # standard normal quantile at 0.975


def score_stat(p: float, limit: float, n: int) -> float:
    """Score statistic of the share ``p`` on ``n`` items against ``limit``."""
    return (p - limit) / math.sqrt(limit * (1 - limit) / n)


def score_beyond(k: int, n: int, limit: float) -> bool:
    """Score test of p = limit against p > limit at 2.5 %: the independent reference."""
    return k / n > limit and score_stat(k / n, limit, n) > Z


@pytest.mark.parametrize("limit", [0.1, 0.267, 0.35, 0.7])
def test_upper_limit_verdicts_match_the_score_test(limit: float) -> None:
    """FAIL exactly where the 95 % Wilson interval lies above the limit."""
    for n in (1, 2, 5, 10, 24, 60, 240):
        for k in range(n + 1):
            c = share_check("r", "s", k, n, upper=limit, limit="x")
            expect = ("PASS" if k / n <= limit else
                      "FAIL" if score_beyond(k, n, limit) else "UNSURE")
            assert c.verdict == expect, (k, n, limit, c)
            assert c.passed == (expect == "PASS")
            lo, hi = (float(x) for x in wilson_interval(k, n))  # the project's Wilson interval
            if k / n > limit and abs(lo - limit) > 1e-9:
                assert (c.verdict == "FAIL") == (lo > limit), (k, n, lo)
            if expect != "PASS":
                assert c.z == pytest.approx(score_stat(k / n, limit, n))
            if expect == "UNSURE":  # the same share on `need` items would FAIL, on one fewer not
                assert c.need > n and score_stat(k / n, limit, c.need) > Z >= score_stat(
                    k / n, limit, c.need - 1), (k, n, c.need)
            else:
                assert c.need is None


def test_band_verdicts() -> None:
    band = (0.35, 0.65)
    assert share_check("t", "s", 2, 4, band=band, limit="x").verdict == "PASS"
    assert share_check("t", "s", 3, 4, band=band, limit="x").verdict == "UNSURE"  # 0.75
    assert share_check("t", "s", 0, 20, band=band, limit="x").verdict == "FAIL"
    assert share_check("t", "s", 20, 20, band=band, limit="x").verdict == "FAIL"
    for k, n in ((3, 10), (0, 20), (20, 20), (1, 12), (11, 12), (30, 120), (90, 120)):
        lo, hi = (float(x) for x in wilson_interval(k, n))
        c = share_check("t", "s", k, n, band=band, limit="x")
        assert (c.verdict == "FAIL") == (hi < band[0] or lo > band[1]), (k, n)
    with pytest.raises(ValueError, match="n = 0"):
        share_check("t", "s", 0, 0, upper=0.5, limit="x")


@pytest.fixture(scope="module")
def small_items():
    """The README's quick start: ``tomstats stories --n-per-cell 4 --seed 0``."""
    return build_design_items(4, seed=0)


def test_readme_set_has_no_fail(small_items, tmp_path, capsys) -> None:
    audit = audit_items(small_items)
    assert audit.failed == []
    # what is beyond its limit is beyond it only within noise
    assert audit.failures == audit.unsure
    path = write_items(tmp_path / "items.jsonl", small_items)
    assert main(["stories", "audit", str(path)]) == 0
    printed = capsys.readouterr().out
    n_pass = sum(c.verdict == "PASS" for c in audit.checks)
    assert (f"Checks: {n_pass} of {len(audit.checks)} passed, {len(audit.unsure)} unsure "
            "(too few items to tell), 0 failed") in printed
    assert "  FAIL " not in printed
    for c in audit.unsure:
        assert (f"  UNSURE {c.name} [{c.scope}]: {c.value:.3f}, limit {c.limit}; n = {c.n}, "
                f"score z = {c.z:.2f}") in printed
    if audit.unsure:
        assert "--n-per-cell" in printed


def test_exact_belief_balance_at_four_per_length(small_items) -> None:
    for order in (1, 2):
        per_length = Counter((it.context_words, it.belief_status) for it in small_items
                             if it.tom_order == order)
        lengths = {c for c, _ in per_length}
        assert len(lengths) == 5
        for c in lengths:
            assert per_length[(c, "true")] == per_length[(c, "false")] == 2, (order, c)
    audit = audit_items(small_items)
    shares = {c.scope: c.value for c in audit.checks if c.name == "true-belief share"}
    assert shares == {"rooms order 1": 0.5, "rooms order 2": 0.5}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 9])
def test_belief_balance_within_one_story_and_prefix_stable(n: int) -> None:
    items = build_design_items(n, seed=4, contexts=(200,), setting="field")
    for order in (1, 2):
        true = sum(it.belief_status == "true" for it in items if it.tom_order == order)
        assert abs(2 * true - n) <= 1, (order, n, true)
    more = build_design_items(10, seed=4, contexts=(200,), setting="field")
    assert items == more[:len(items)]


def test_gold_always_the_last_place_named_fails(small_items, tmp_path, capsys) -> None:
    biased = [dataclasses.replace(it, answer=rule_answers(it)["story_last"])
              for it in small_items]
    audit = audit_items(biased)
    failed = {(c.name, c.scope) for c in audit.failed}
    for scope in ("rooms order 0 belief none", "rooms order 1 belief false",
                  "rooms order 2 belief true"):
        assert ("rule story_last", scope) in failed
    path = write_items(tmp_path / "biased.jsonl", biased)
    assert main(["stories", "audit", str(path)]) == 4
    printed = capsys.readouterr().out
    assert "  FAIL rule story_last [rooms order 1 belief false]: 1.000" in printed
    assert f", {len(audit.failed)} failed" in printed and len(audit.failed) >= 5


def test_old_generator_fails_beyond_noise(repo_root, tmp_path) -> None:
    fixture = repo_root / "tests/fixtures/stories/items_v1_seed21.jsonl.xz"
    path = tmp_path / "old.jsonl"
    path.write_bytes(lzma.decompress(fixture.read_bytes()))
    audit = audit_items(read_items(path))
    failed = {(c.name, c.scope) for c in audit.failed}
    assert ("rule t_second_last", "rooms order 1 belief false") in failed
    assert ("true-belief share", "rooms order 1") in failed
    assert ("gold share of 'field'", "field belief items") in failed
    assert audit.verdict == "FAIL"
    assert "  FAIL rule t_second_last [rooms order 1 belief false]: 1.000" in format_audit(audit)
