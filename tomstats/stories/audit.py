r"""Audit an item set: can anything easier than belief reasoning answer it?

A ToM item set is a valid instrument only if text-only shortcuts score near chance. The
audit reads items (their text, question and candidates; never the generator) and reports,
per cell (setting × length × order × belief status):

**Rules** — text-only answers that use no belief reasoning, kept in a registry
(:data:`tomstats.stories.audit_rules.RULES`; a user adds one with
:func:`tomstats.stories.audit_rules.rule`). The story is parsed once
(:mod:`tomstats.stories.audit_parse`): sentences, the candidate places each names, and the
*told moves* (sentences of a move form, "Alice walks into the library", with actor and
place; joins, "Alice joins Bob", name no place). The rules:

- the **told-event family**, for each questioned character ``R`` in ``T`` (the target),
  ``S1``, ``S2`` (the question's chain; the pair of a world-model question): its ``k``-th
  last told destination (``R_dest_last1`` … ``R_dest_last3``), first, most and least
  frequent told destination (``R_dest_first``, ``R_dest_most``, ``R_dest_least``; no
  answer on a tie), and the place most often named in the sentences naming it
  (``R_comention``);
- **story rules**: ``t_last``, ``t_second_last``, ``t_first`` (the place named last in the
  last, second-to-last, first sentence that names ``T``), ``t_near_frequent`` (the place
  named most often in and next to the sentences naming ``T``), ``story_last``,
  ``story_frequent``, ``story_least`` (last, most and least named place of the story),
  ``opening`` (first place named), ``cell_mode`` (the most common gold answer of the
  *other* items of the cell, leave-one-out, ties by name), and ``reality`` (the target's
  true final place, ``item.last_location``: reality tracking, exempt from the thresholds;
  so is ``t_dest_last1``, reality read off the text, where the answer *is* reality: order 0
  and true-belief items).

Chance is ``1 / len(candidates)``.

**Learned adversary** (:mod:`tomstats.stories.audit_adversary`) — a conditional-logit
ranker of the candidates on text features, cross-fitted by story (an item is scored only by
a model that never saw its story), blind to the belief status and, for reference, given it.

**Balance** — the share of the most frequent gold answer among a setting's belief items
(orders ≥ 1); the true-belief share at orders 1 and 2 (an item is a *true belief* when its
answer equals reality); for order-2 items, how often the answer equals a simpler
question's: reality, the first-order belief of the chain's first agent about ``T``
(``S1``) and that of the second agent (``S2``).

**Reference load** — for each belief item (``tom``, order ≥ 1), whether its gold place is
named in one of ``T``'s told moves or reachable only through joins ("X joins A and B"); the
share of join-only items per (setting, order, belief status) and per (setting, length).

**Text** — per story: the share of sentences that repeat an earlier sentence of the same
story verbatim; distinct-n (distinct word n-grams / all word n-grams, lower-cased); tokens
per word (:func:`estimate_tokens`, or a real tokenizer when given); the share of the
recorded events the parser finds told (``move_coverage``, when items record their events).
**Text lint** (:mod:`tomstats.stories.audit_lint`): counts of "a" before a vowel, stacked
adverbials, tense clashes, near-duplicate sentences, words of another setting, long runs of
bare moves, per (setting, length).

**Thresholds** (:data:`THRESHOLDS`): every checked rule at most chance + 0.10 pooled per
(setting, order, belief status) over lengths, and at most chance + 0.25 in every cell of at
least 30 items; the blind adversary at most chance + 0.10 on every false-belief pool; the
most frequent gold answer of a setting's belief items at most 2 × chance; a true-belief
share in [0.35, 0.65] at orders 1 and 2; order-2 answers equal to some simpler question's
in at most 70 % of order-2 items; join-only shares differing by at most 0.10 between any
two (order, belief status) cells and between any two lengths of a setting; per (setting,
length) at most 10 % verbatim repeats, distinct-2 at least 0.15, a move coverage of at
least 0.95 and no lint defect.

**Verdicts** — a proportion measured on ``n`` items is noisy, so every check of a share
(rules, adversary, gold share, true-belief share, order-2 answers) gets one of three
verdicts: ``PASS`` when the share :math:`\hat p` is within the limit; ``FAIL`` when the 95 %
Wilson interval of :math:`\hat p` lies wholly beyond the limit; ``UNSURE`` otherwise (too
few items to tell). The Wilson interval is the inversion of the score test, so with
:math:`L` the limit crossed (``<= L``, or the nearer edge of a band) the interval lies
beyond :math:`L` exactly when

.. math::

    z = \frac{|\hat p - L|}{\sqrt{L (1 - L) / n}} > z_{0.975} \approx 1.96,

and the same share on :math:`n > z_{0.975}^2 L(1-L)/(\hat p - L)^2` items would be a
``FAIL`` (``Check.need``: about how many items would tell). ``Check.z`` keeps the score.
A difference of two shares :math:`\hat p_1 - \hat p_2` (reference load) beyond a limit
:math:`D` is a ``FAIL`` when :math:`(|\hat p_1 - \hat p_2| - D) / \sqrt{\hat p_1 \hat q_1 /
n_1 + \hat p_2 \hat q_2 / n_2} > z_{0.975}` (:func:`difference_check`). Text checks
(repeats, distinct-2, move coverage, lint) have no interval: beyond the limit is ``FAIL``.
``Check.passed`` and ``Audit.passed`` keep the strict reading (every point estimate within
its limit); ``tomstats stories audit`` exits with 4 only on a ``FAIL``.

**Stories, not items, are the units** of the rule and adversary checks: :math:`n` is the
number of distinct stories (``metadata["story_id"]``, else the item) of the pool or cell,
and :math:`\hat p` the items' share. In a between-story set every story gives one item to a
pool, so :math:`n` is the number of items; a length ladder
(:mod:`tomstats.stories.ladder`) tells each story at every length with the same events,
so pooled over lengths its items are not independent: a told-event rule answers every
step of a ladder alike, and five steps of 24 stories are 24 observations, not 120.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from tomstats.stories.audit_parse import ItemParse, item_parse, sentences
from tomstats.stories.audit_rules import FAMILY_STATS, ROLES, RULES
from tomstats.stories.items import Item

__all__ = ["AUDIT_RULES", "LEVEL", "SECTIONS", "THRESHOLDS", "Audit", "Check",
           "audit_by_length", "audit_items", "belief_status", "difference_check",
           "distinct_n", "estimate_tokens",
           "format_audit", "repeat_share", "rule_answers", "sentences", "share_check",
           "simpler_answers"]

#: The rules of the first audit, in the order they were reported (``reality`` is exempt
#: from thresholds); the audit now runs every rule of
#: :data:`tomstats.stories.audit_rules.RULES` and ``cell_mode``.
AUDIT_RULES = ("t_last", "t_second_last", "t_first", "t_near_frequent", "story_last",
               "story_frequent", "opening", "cell_mode", "reality")

#: Thresholds of :func:`audit_items` (see the module docstring).
THRESHOLDS: dict[str, float] = {
    "rule_above_chance": 0.10, "rule_above_chance_cell": 0.25, "cell_min_items": 30,
    "adversary_above_chance": 0.10, "gold_share_over_chance": 2.0, "true_belief_min": 0.35,
    "true_belief_max": 0.65, "order2_same_as_simpler": 0.70, "join_only_difference": 0.10,
    "repeat_share": 0.10, "distinct_2": 0.15, "move_coverage": 0.95,
}

#: Level of the Wilson intervals behind the verdicts.
LEVEL = 0.95
_Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)

_LETTERS = re.compile(r"[A-Za-z]+")
_LONG = re.compile(r"[A-Za-z]{8,}")
_NOT_OTHER = re.compile(r"[\sA-Za-z]+")


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` estimated without a tokenizer (byte-pair encodings of English).

    Every run of letters costs ``ceil(len / 7)`` tokens (most English words are one
    token; long or rare words split), every digit and every other non-space character one
    token. ``room_3`` is estimated at 3 tokens, ``"the kitchen."`` at 3. SmolLM2's own
    tokenizer is within about 10 % of this on generated stories (checked in the tests when
    it is installed).
    """
    runs = len(_LETTERS.findall(text))
    extra = sum((len(w) + 6) // 7 - 1 for w in _LONG.findall(text))
    return runs + extra + len(_NOT_OTHER.sub("", text))


def distinct_n(text: str, n: int = 2) -> float:
    """Distinct word n-grams over all word n-grams of ``text`` (lower-cased; 1.0 if none)."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    grams = list(zip(*(words[i:] for i in range(n)), strict=False))
    return len(set(grams)) / len(grams) if grams else 1.0


def repeat_share(text: str | Sequence[str]) -> float:
    """Share of the sentences of ``text`` (or of the sentences given) that repeat an
    earlier sentence verbatim."""
    seen: set[str] = set()
    rep = 0
    ss = sentences(text) if isinstance(text, str) else text
    for s in ss:
        rep += s in seen
        seen.add(s)
    return rep / len(ss) if ss else 0.0


def belief_status(item: Item) -> str:
    """``"true"``/``"false"`` for ToM items of order ≥ 1 (answer = reality or not), else
    ``"none"``; the item's recorded ``belief_status`` when it has one."""
    recorded = getattr(item, "belief_status", None)
    if recorded in ("true", "false"):
        return str(recorded)
    if item.tom_order >= 1 and item.last_location is not None:
        return "true" if item.answer == item.last_location else "false"
    return "none"


def rule_answers(item: Item, rules: Sequence[str] | None = None) -> dict[str, str]:
    """The answer of every registered rule (``cell_mode`` aside), or of ``rules``
    (``""``: no answer). ``ValueError`` names an unknown rule."""
    names = list(RULES) if rules is None else list(rules)
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise ValueError(f"rules: unknown rule(s) {unknown}; registered: {sorted(RULES)}")
    p = item_parse(item)
    return {n: RULES[n].fn(p) for n in names}


def simpler_answers(item: Item) -> dict[str, str | None] | None:
    """Answers of the simpler questions about an order-``k`` (``k >= 2``) StorySim item.

    Keyed as :func:`~tomstats.stories.beliefs.simpler_chains` labels them — for order 2
    ``{"reality": …, "S1": …, "S2": …}``: where ``T`` is, where the chain's first agent
    thinks ``T`` is, where the second thinks ``T`` is. Read from
    ``metadata["simpler_answers"]`` when recorded, else recomputed from the event log with
    the tracker; ``None`` when neither is available.
    """
    meta = item.metadata
    if isinstance(meta.get("simpler_answers"), dict):
        return dict(meta["simpler_answers"])
    sb, events = meta.get("storyboard"), meta.get("events")
    if len(item.agents) < 2 or not isinstance(sb, dict) or not isinstance(events, list):
        return None
    from tomstats.stories.beliefs import belief, simpler_chains
    from tomstats.stories.world import Event, World

    try:
        world = World(tuple(sb["characters"]), tuple(sb["locations"]),
                      tuple(tuple(e) for e in sb["edges"]),
                      {c: sb["start"] for c in sb["characters"]})
        evs = [Event(int(t), "enter", a, loc, src) for t, a, loc, src in events]
        return {label: belief(world, evs, chain, item.target)
                for label, chain in simpler_chains(item.agents).items()}
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Check:
    r"""One threshold check.

    Attributes
    ----------
    name, scope : str
        What was checked and on which items.
    value : float
        The measured value (a share, or a text measure).
    limit : str
        The limit as text.
    passed : bool
        Whether ``value`` is within the limit (the point estimate).
    verdict : {"PASS", "UNSURE", "FAIL"}
        See the module docstring; text checks are ``PASS`` or ``FAIL``.
    n : int
        Items behind a share (0 for text checks).
    z : float or None
        The score of a share beyond its limit :math:`L`:
        :math:`|\hat p - L| / \sqrt{L(1-L)/n}` (``None`` within the limit or for text).
    need : int or None
        For ``UNSURE``: about how many items would turn the share, unchanged, into a
        ``FAIL`` (``None`` otherwise).
    """

    name: str
    scope: str
    value: float
    limit: str
    passed: bool
    verdict: str = ""
    n: int = 0
    z: float | None = None
    need: int | None = None

    def __post_init__(self) -> None:
        if not self.verdict:
            object.__setattr__(self, "verdict", "PASS" if self.passed else "FAIL")
        if self.verdict not in ("PASS", "UNSURE", "FAIL"):
            raise ValueError(f"verdict must be PASS, UNSURE or FAIL, got {self.verdict!r}")


def share_check(name: str, scope: str, k: int, n: int, *, upper: float | None = None,
                band: tuple[float, float] | None = None, limit: str) -> Check:
    r"""A check of the share ``k / n`` against ``<= upper`` or a ``band``, with its verdict.

    ``PASS`` when :math:`\hat p = k/n` is within the limit; else, with :math:`L` the limit
    crossed, ``FAIL`` when the score :math:`|\hat p - L| / \sqrt{L(1-L)/n}` exceeds
    :math:`z_{0.975}` (the 95 % Wilson interval lies wholly beyond :math:`L`) and
    ``UNSURE`` otherwise; ``need`` (``UNSURE`` only) is the smallest :math:`m` with
    :math:`m > z_{0.975}^2 L(1-L)/(\hat p - L)^2`.
    """
    if n <= 0:
        raise ValueError(f"{name} [{scope}]: a share needs at least one item, got n = {n}")
    p = k / n
    if upper is not None:
        passed, bound = p <= upper + 1e-12, upper
    elif band is not None:
        a, b = band
        passed, bound = a - 1e-12 <= p <= b + 1e-12, a if p < a else b
    else:
        raise ValueError("share_check needs upper or band")
    if passed:
        return Check(name, scope, p, limit, True, "PASS", n)
    var = bound * (1 - bound)
    if var <= 0:  # a limit of 0 or 1: any share beyond it is beyond noise
        return Check(name, scope, p, limit, False, "FAIL", n)
    gap = abs(p - bound)
    z = gap / math.sqrt(var / n)
    if z > _Z:
        return Check(name, scope, p, limit, False, "FAIL", n, z)
    need = math.floor(_Z * _Z * var / (gap * gap)) + 1
    return Check(name, scope, p, limit, False, "UNSURE", n, z, need)


def difference_check(name: str, scope: str, a: tuple[int, int], b: tuple[int, int], *,
                     limit: float, label: str) -> Check:
    r"""A check that two shares ``a = (k1, n1)``, ``b = (k2, n2)`` differ by at most
    ``limit`` :math:`D`.

    ``PASS`` when :math:`d = |\hat p_1 - \hat p_2| \le D`; else the score
    :math:`z = (d - D) / \sqrt{\hat p_1(1-\hat p_1)/n_1 + \hat p_2(1-\hat p_2)/n_2}` gives
    ``FAIL`` above :math:`z_{0.975}` (``FAIL`` too when both shares are 0 or 1), ``UNSURE``
    below; ``need`` is about how many items (both cells grown alike) would tell.
    """
    (k1, n1), (k2, n2) = a, b
    if n1 <= 0 or n2 <= 0:
        raise ValueError(f"{name} [{scope}]: a share needs at least one item")
    p1, p2 = k1 / n1, k2 / n2
    d = abs(p1 - p2)
    n = n1 + n2
    if d <= limit + 1e-12:
        return Check(name, scope, d, label, True, "PASS", n)
    var = p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2
    if var <= 0:
        return Check(name, scope, d, label, False, "FAIL", n)
    z = (d - limit) / math.sqrt(var)
    if z > _Z:
        return Check(name, scope, d, label, False, "FAIL", n, z)
    return Check(name, scope, d, label, False, "UNSURE", n, z,
                 math.floor(n * (_Z / z) ** 2) + 1)


@dataclass(frozen=True)
class Audit:
    """The result of :func:`audit_items`.

    Attributes
    ----------
    cells : list of dict
        One row per (setting, length, order, belief status): ``n``, ``chance`` and the
        accuracy of every rule (registered rules and ``cell_mode``).
    pooled : list of dict
        The same pooled over lengths, per (setting, order, belief status), with the
        adversary's accuracies ``adversary_blind`` and ``adversary_given`` (``None``
        without the adversary).
    text : list of dict
        Per (setting, length): stories, mean words, verbatim-repeat share, distinct-2,
        tokens per word, move coverage (``None`` without recorded events) and the lint
        counts (:data:`tomstats.stories.audit_lint.LINT_CHECKS`).
    checks : list of Check
    reference : list of dict
        Reference load: per (setting, order, belief status) and per (setting, length), the
        belief items ``n`` and the share reached only through joins (``join_only``).
    foreign : dict
        Per setting, the words of another setting the lint met, with counts.
    """

    cells: list[dict[str, Any]]
    pooled: list[dict[str, Any]]
    text: list[dict[str, Any]]
    checks: list[Check] = field(default_factory=list)
    reference: list[dict[str, Any]] = field(default_factory=list)
    foreign: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: cells, pooled, text, reference, checks and ``passed``."""
        return {"cells": self.cells, "pooled": self.pooled, "text": self.text,
                "reference": self.reference, "foreign": self.foreign,
                "checks": [dataclasses.asdict(c) for c in self.checks],
                "passed": self.passed, "verdict": self.verdict}

    @property
    def passed(self) -> bool:
        """Whether every point estimate is within its limit (the strict reading)."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        """The checks whose point estimate is beyond the limit (``FAIL`` and ``UNSURE``)."""
        return [c for c in self.checks if not c.passed]

    @property
    def failed(self) -> list[Check]:
        """The checks beyond their limit beyond sampling noise (verdict ``FAIL``)."""
        return [c for c in self.checks if c.verdict == "FAIL"]

    @property
    def unsure(self) -> list[Check]:
        """The checks beyond their limit that too few items cannot tell (``UNSURE``)."""
        return [c for c in self.checks if c.verdict == "UNSURE"]

    @property
    def verdict(self) -> str:
        """``"FAIL"`` when a check fails, else ``"UNSURE"`` when one is unsure, else
        ``"PASS"``."""
        return "FAIL" if self.failed else "UNSURE" if self.unsure else "PASS"


def _question_kind(item: Item) -> str:
    """The order column of the audit: ``"0"``, ``"1"``, ``"2"``, or the WM question type."""
    return item.question_type if item.question_type.startswith("wm") else str(item.tom_order)


def _rule_names() -> list[str]:
    """Every rule scored: the registered ones with ``cell_mode`` before ``reality``."""
    names = [n for n in RULES if n != "reality"]
    return [*names, "cell_mode", *(["reality"] if "reality" in RULES else [])]


def _rule_scores(parses: Sequence[ItemParse], names: Sequence[str]) -> list[dict[str, float]]:
    """Per item, 1.0/0.0 for every rule (``cell_mode`` leave-one-out within the cell)."""
    out = []
    gold = Counter(p.item.answer for p in parses)
    fns = [(n, RULES[n].fn) for n in names if n != "cell_mode"]
    for p in parses:
        ans = {n: fn(p) for n, fn in fns}
        others = gold.copy()
        others[p.item.answer] -= 1
        ans["cell_mode"] = max(sorted(others), key=lambda x: others[x]) if +others else ""
        out.append({r: float(ans[r] == p.item.answer) for r in names})
    return out


def _cell_row(key: dict[str, Any], parses: Sequence[ItemParse],
              scores: Sequence[dict[str, float]], names: Sequence[str]) -> dict[str, Any]:
    row = dict(key)
    row["n"] = len(parses)
    # the independent units: stories (a length ladder tells one story at several lengths)
    row["stories"] = len({p.item.metadata.get("story_id") or p.item.item_id for p in parses})
    row["chance"] = sum(1 / max(len(p.item.candidates), 1) for p in parses) / len(parses)
    row["roles"] = "".join(r for r in ROLES if any(r in p.roles for p in parses))
    for r in names:
        row[r] = sum(s[r] for s in scores) / len(scores)
    return row


def _text_rows(parses: Sequence[ItemParse], tokenizer: Callable[[str], int] | None,
               lint: bool) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    from tomstats.stories.audit_lint import LINT_CHECKS, lint_story

    stories: dict[tuple[str, int], dict[str, ItemParse]] = defaultdict(dict)
    for p in parses:
        stories[(p.item.setting, p.item.context_words)].setdefault(p.item.story, p)
    count = tokenizer or estimate_tokens
    rows = []
    foreign: dict[str, Counter[str]] = defaultdict(Counter)
    for (setting, length), by_text in sorted(stories.items()):
        ts = list(by_text)
        words = sum(len(t.split()) for t in ts)
        cov = [c for c in (p.coverage() for p in by_text.values()) if c is not None]
        row: dict[str, Any] = {
            "setting": setting, "length": length, "stories": len(ts),
            "words": words / len(ts),
            "repeat_share": sum(repeat_share([t[a:b] for a, b in p.story.spans])
                                for t, p in by_text.items()) / len(ts),
            "distinct_2": sum(distinct_n(t, 2) for t in ts) / len(ts),
            "tokens_per_word": sum(count(t) for t in ts) / max(words, 1),
            "tokenizer": "model" if tokenizer else "estimate",
            "move_coverage": (sum(a for a, _b in cov) / max(sum(b for _a, b in cov), 1)
                              if cov else None)}
        if lint:
            totals = dict.fromkeys(LINT_CHECKS, 0)
            for p in by_text.values():
                for k, v in lint_story(p.story, setting, foreign[setting]).items():
                    totals[k] += v
            row.update(totals)
        rows.append(row)
    return rows, {s: dict(c.most_common()) for s, c in sorted(foreign.items()) if c}


def _join_only(p: ItemParse) -> bool:
    """Whether the gold place is never named in one of T's told moves."""
    return p.item.answer not in set(p.dests("T"))


def _reference_rows(parses: Sequence[ItemParse]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for p in parses:
        it = p.item
        if it.question_type != "tom" or it.tom_order < 1:
            continue
        j = _join_only(p)
        groups[(it.setting, "cell", f"{it.tom_order}|{belief_status(it)}")].append(j)
        groups[(it.setting, "length", str(it.context_words))].append(j)
    rows = []
    for (setting, by, key), flags in sorted(groups.items(),
                                            key=lambda kv: (kv[0][0], kv[0][1],
                                                            _num(kv[0][2]))):
        row: dict[str, Any] = {"setting": setting, "by": by}
        if by == "cell":
            order, status = key.split("|")
            row.update(order=order, belief=status, length="")
        else:
            row.update(order="", belief="", length=int(key))
        row.update(n=len(flags), join_only=sum(flags) / len(flags), k=sum(flags))
        rows.append(row)
    return rows


def _num(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (0, key)


def audit_items(items: Iterable[Item], *,
                tokenizer: Callable[[str], int] | None = None, adversary: bool = True,
                lint: bool = True, seed: int = 0, rules: Sequence[str] | None = None) -> Audit:
    """Audit ``items`` (see the module docstring for the rules, metrics and thresholds).

    Parameters
    ----------
    items : iterable of Item
    tokenizer : callable, optional
        ``text -> number of tokens`` of a real model; default :func:`estimate_tokens`.
    adversary : bool
        Fit and check the learned adversary (:mod:`tomstats.stories.audit_adversary`).
    lint : bool
        Run the text lint (:mod:`tomstats.stories.audit_lint`).
    seed : int
        Seed of the adversary's folds (same seed, same audit).
    rules : sequence of str, optional
        Run only these rules (names of :data:`~tomstats.stories.audit_rules.RULES` and
        ``cell_mode``); default: every registered rule.

    Returns
    -------
    Audit
    """
    items = list(items)
    if not items:
        raise ValueError("items: the item set is empty; nothing to audit")
    names = _rule_names()
    if rules is not None:
        unknown = sorted(set(rules) - set(names))
        if unknown:
            raise ValueError(f"rules: unknown rule(s) {unknown}; registered: {names}")
        names = [n for n in names if n in set(rules)]
    parses = [item_parse(it) for it in items]
    groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        groups[(it.setting, it.context_words, _question_kind(it), belief_status(it))].append(i)
    scores: list[dict[str, float]] = [{} for _ in items]
    for idx in groups.values():
        for i, sc in zip(idx, _rule_scores([parses[i] for i in idx], names), strict=True):
            scores[i] = sc
    hits = None
    if adversary:
        from tomstats.stories.audit_adversary import cross_fit

        res = cross_fit(parses, [_question_kind(it) for it in items],
                        [belief_status(it) for it in items], seed=seed)
        hits = (res.blind, res.given)
    cells, pooled_src = [], defaultdict(list)
    for (setting, length, kind, status), idx in sorted(groups.items()):
        key = {"setting": setting, "length": length, "order": kind, "belief": status}
        cells.append(_cell_row(key, [parses[i] for i in idx], [scores[i] for i in idx],
                               names))
        pooled_src[(setting, kind, status)].extend(idx)
    pooled = []
    for (setting, kind, status), idx in sorted(pooled_src.items()):
        row = _cell_row({"setting": setting, "order": kind, "belief": status},
                        [parses[i] for i in idx], [scores[i] for i in idx], names)
        row["adversary_blind"] = None if hits is None else \
            sum(hits[0][i] for i in idx) / len(idx)
        row["adversary_given"] = None if hits is None else \
            sum(hits[1][i] for i in idx) / len(idx)
        pooled.append(row)
    text, foreign = _text_rows(parses, tokenizer, lint)
    reference = _reference_rows(parses)
    checks = (_rule_checks(pooled, cells, names) + _adversary_checks(pooled)
              + _balance_checks(items) + _reference_checks(reference) + _text_checks(text))
    return Audit(cells, pooled, text, checks, reference, foreign)


def audit_by_length(items: Iterable[Item], **kwargs: Any) -> dict[str, Audit]:
    """The audit of each context length's items alone, then of all of them pooled.

    For a length ladder (:mod:`tomstats.stories.ladder`) the first audits ask whether one
    step can be answered without belief reasoning, the pooled one whether anything that
    changes between steps helps (its adversary is cross-fitted by story, every step of a
    ladder held out together).

    Parameters
    ----------
    items : iterable of Item
    **kwargs
        Passed to :func:`audit_items`.

    Returns
    -------
    dict of str to Audit
        Keyed by the length in words (as a string, shortest first), then ``"all"``.
    """
    items = list(items)
    if not items:
        raise ValueError("items: the item set is empty; nothing to audit")
    lengths = sorted({it.context_words for it in items})
    out = {str(n): audit_items([it for it in items if it.context_words == n], **kwargs)
           for n in lengths}
    out["all"] = audit_items(items, **kwargs)
    return out


def _checked(rule: str, row: dict[str, Any]) -> bool:
    """Whether ``rule`` is checked on a row (exemptions, roles the question lacks)."""
    if rule == "cell_mode":
        return True
    r = RULES[rule]
    if r.exempt or (r.role and r.role not in row["roles"]):
        return False
    return not (r.tracks_reality and (row["order"] == "0" or row["belief"] == "true"))


def _rule_checks(pooled: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]],
                 names: Sequence[str]) -> list[Check]:
    out = []
    over, over_cell = THRESHOLDS["rule_above_chance"], THRESHOLDS["rule_above_chance_cell"]
    for row in pooled:
        limit = row["chance"] + over
        scope = f"{row['setting']} order {row['order']} belief {row['belief']}"
        for r in names:
            if _checked(r, row):
                out.append(share_check(f"rule {r}", scope, round(row[r] * row["stories"]),
                                       row["stories"], upper=limit,
                                       limit=f"<= {limit:.3f} (chance + {over})"))
    for row in cells:
        if row["n"] < THRESHOLDS["cell_min_items"]:
            continue
        limit = row["chance"] + over_cell
        scope = (f"{row['setting']} {row['length']} words order {row['order']} belief "
                 f"{row['belief']}")
        for r in names:
            if _checked(r, row):
                out.append(share_check(f"rule {r}", scope, round(row[r] * row["stories"]),
                                       row["stories"], upper=limit,
                                       limit=f"<= {limit:.3f} (chance + {over_cell})"))
    return out


def _adversary_checks(pooled: Sequence[dict[str, Any]]) -> list[Check]:
    out = []
    over = THRESHOLDS["adversary_above_chance"]
    for row in pooled:
        if row["belief"] != "false" or row.get("adversary_blind") is None:
            continue
        limit = row["chance"] + over
        scope = f"{row['setting']} order {row['order']} belief {row['belief']}"
        out.append(share_check("adversary (blind to the belief status)", scope,
                               round(row["adversary_blind"] * row["stories"]), row["stories"],
                               upper=limit, limit=f"<= {limit:.3f} (chance + {over})"))
    return out


def _reference_checks(reference: Sequence[dict[str, Any]]) -> list[Check]:
    out = []
    lim = THRESHOLDS["join_only_difference"]
    for setting in sorted({r["setting"] for r in reference}):
        for by, what in (("cell", "(order, belief status) cells"), ("length", "lengths")):
            rows = [r for r in reference if r["setting"] == setting and r["by"] == by]
            if len(rows) < 2:
                continue
            hi = max(rows, key=lambda r: r["join_only"])
            lo = min(rows, key=lambda r: r["join_only"])
            out.append(difference_check(
                "join-only share: largest difference", f"{setting} {what} "
                f"({_ref_label(hi)} vs {_ref_label(lo)})", (hi["k"], hi["n"]),
                (lo["k"], lo["n"]), limit=lim, label=f"<= {lim}"))
    return out


def _ref_label(row: dict[str, Any]) -> str:
    if row["by"] == "cell":
        return f"order {row['order']} {row['belief']}"
    return f"{row['length']} words"
def _balance_checks(items: Sequence[Item]) -> list[Check]:
    out = []
    by_setting: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_setting[it.setting].append(it)
    for setting, its in sorted(by_setting.items()):
        belief_items = [it for it in its if it.tom_order >= 1]
        if belief_items:
            counts = Counter(it.answer for it in belief_items)
            top, k = counts.most_common(1)[0]
            chance = sum(1 / len(it.candidates) for it in belief_items) / len(belief_items)
            lim = THRESHOLDS["gold_share_over_chance"] * chance
            out.append(share_check(f"gold share of {top!r}", f"{setting} belief items", k,
                                   len(belief_items), upper=lim,
                                   limit=f"<= {lim:.3f} (2 x chance)"))
        for order in (1, 2):
            oi = [it for it in its if it.tom_order == order]
            if oi:
                tb = sum(belief_status(it) == "true" for it in oi)
                lo, hi = THRESHOLDS["true_belief_min"], THRESHOLDS["true_belief_max"]
                out.append(share_check("true-belief share", f"{setting} order {order}", tb,
                                       len(oi), band=(lo, hi), limit=f"in [{lo}, {hi}]"))
        for order in sorted({it.tom_order for it in its if it.tom_order >= 2}):
            ok = [(it, simpler_answers(it)) for it in its if it.tom_order == order]
            ok = [(it, s) for it, s in ok if s is not None]
            if ok:
                same = sum(it.answer in s.values() for it, s in ok)
                lim = THRESHOLDS["order2_same_as_simpler"]
                out.append(share_check(f"order-{order} answer = a simpler question's",
                                       f"{setting} order {order}", same, len(ok), upper=lim,
                                       limit=f"<= {lim}"))
    return out


def _text_checks(text: Sequence[dict[str, Any]]) -> list[Check]:
    from tomstats.stories.audit_lint import LINT_CHECKS

    out = []
    for row in text:
        scope = f"{row['setting']} {row['length']} words"
        lim = THRESHOLDS["repeat_share"]
        out.append(Check("verbatim repeats", scope, row["repeat_share"], f"<= {lim}",
                         row["repeat_share"] <= lim))
        lim = THRESHOLDS["distinct_2"]
        out.append(Check("distinct-2", scope, row["distinct_2"], f">= {lim}",
                         row["distinct_2"] >= lim))
        if row.get("move_coverage") is not None:
            lim = THRESHOLDS["move_coverage"]
            out.append(Check("told moves found by the parser / recorded events", scope,
                             row["move_coverage"], f">= {lim}", row["move_coverage"] >= lim))
        for name in LINT_CHECKS:
            if name in row:
                out.append(Check(f"lint {name}", scope, float(row[name]), "= 0",
                                 row[name] == 0))
    return out


def simpler_shares(items: Iterable[Item]) -> dict[str, float]:
    """For order-2 items: the share equal to each simpler question's answer, and to any."""
    pairs = [(it, simpler_answers(it)) for it in items if it.tom_order == 2]
    pairs = [(it, s) for it, s in pairs if s is not None]
    if not pairs:
        return {}
    out = {k: sum(it.answer == s[k] for it, s in pairs) / len(pairs)
           for k in ("reality", "S1", "S2")}
    out["any"] = sum(it.answer in s.values() for it, s in pairs) / len(pairs)
    return out


def gguf_token_counter(path: str) -> Callable[[str], int]:
    """Token counter of a GGUF model's tokenizer (llama-cpp-python, vocabulary only).

    ``path`` is a ``.gguf`` file or ``pip:PACKAGE`` for the one GGUF file inside an
    installed package's folder (found with :func:`importlib.util.find_spec`; the package
    is never imported). ``ValueError`` names a missing file or package.
    """
    import importlib.util
    from pathlib import Path

    if path.startswith("pip:"):
        spec = importlib.util.find_spec(path[4:])
        if spec is None or spec.origin is None:
            raise ValueError(f"--tokenizer: package {path[4:]!r} is not installed")
        found = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if len(found) != 1:
            raise ValueError(f"--tokenizer: {path[4:]!r} holds {len(found)} .gguf files, "
                             "expected one")
        file = found[0]
    else:
        file = Path(path)
        if not file.is_file():
            raise ValueError(f"--tokenizer: {path!r} is not a file")
    try:
        from llama_cpp import Llama
    except ImportError:
        raise ValueError("--tokenizer needs llama-cpp-python (the 'local' extra)") from None
    model = Llama(model_path=str(file), vocab_only=True, verbose=False)
    return lambda text: len(model.tokenize(text.encode("utf-8"), add_bos=False))


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[str],
           heads: Sequence[str] | None = None) -> list[str]:
    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    heads = list(cols) if heads is None else list(heads)
    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    width = [max(len(h), *(len(x[i]) for x in cells)) if cells else len(h)
             for i, h in enumerate(heads)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(heads, width, strict=True))]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, width, strict=True)) for row in cells]
    return lines


def _told_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        for role in ROLES:
            if role in row["roles"]:
                r = {k: row[k] for k in ("setting", "order", "belief", "n", "chance")}
                r["who"] = role
                r.update({s: row.get(f"{role.lower()}_{s}") for s in FAMILY_STATS})
                out.append(r)
    return out


#: The sections of :func:`format_audit`, in the order they are printed.
SECTIONS = ("rules", "told", "adversary", "cells", "reference", "text", "lint", "checks")


def format_audit(audit: Audit, *, cells: bool = False, failures: bool = True,
                 sections: Sequence[str] | None = None) -> str:
    """The audit as plain-text tables (rules, told events, adversary, reference load,
    text and lint, checks).

    ``cells`` adds the per-cell table; ``failures=False`` leaves out the list of failed
    checks (their number is always given); ``sections`` prints only these of
    :data:`SECTIONS` (default: all).
    """
    show = set(SECTIONS if sections is None else sections)
    bad = sorted(show - set(SECTIONS))
    if bad:
        raise ValueError(f"sections: unknown {bad}; choose among {list(SECTIONS)}")
    if not cells:
        show.discard("cells")
    general = [n for n in _rule_names() if n in audit.pooled[0] and not (
        n in RULES and RULES[n].role)] if audit.pooled else []
    key = ["setting", "order", "belief", "n", "chance"]
    parts: list[list[str]] = []
    if "rules" in show:
        parts.append(["Text-only rules, accuracy pooled over lengths (chance = "
                      "1/candidates):", *_table(audit.pooled, key + general)])
    if "told" in show:
        parts.append(["Told events of each questioned character (T, S1, S2): accuracy of its "
                      "k-th last, first, most and least frequent told destination and of the "
                      "place most named with it, pooled over lengths:",
                      *_table(_told_rows(audit.pooled),
                              key[:3] + ["who"] + key[3:] + list(FAMILY_STATS),
                              key[:3] + ["who"] + key[3:] + ["last1", "last2", "last3",
                                                             "first", "most", "least",
                                                             "comention"])])
    if "adversary" in show and audit.pooled and \
            audit.pooled[0].get("adversary_blind") is not None:
        parts.append(["Learned adversary (ranker on text features, cross-fitted by story): "
                      "accuracy blind to the belief status, and given it (reported only):",
                      *_table(audit.pooled, key + ["adversary_blind", "adversary_given"],
                              key + ["blind", "given_status"])])
    if "cells" in show:
        parts.append(["Per cell:", *_table(audit.cells,
                                           ["setting", "length", *key[1:], *general])])
    if "reference" in show and audit.reference:
        parts.append(["Reference load: share of belief items whose answer is named in none "
                      "of T's told moves (reached only through joins):",
                      *_table(audit.reference, ["setting", "order", "belief", "length", "n",
                                                "join_only"])])
    if "text" in show:
        parts.append(["Text per (setting, length):", *_table(
            audit.text, ["setting", "length", "stories", "words", "repeat_share",
                         "distinct_2", "tokens_per_word", "move_coverage"])])
    if "lint" in show and audit.text and "a_before_vowel" in audit.text[0]:
        from tomstats.stories.audit_lint import LINT_CHECKS

        lint = ["Text lint per (setting, length), defects counted:",
                *_table(audit.text, ["setting", "length", *LINT_CHECKS])]
        for setting, words in audit.foreign.items():
            top = ", ".join(f"{w} ({k})" for w, k in list(words.items())[:12])
            lint.append(f"  words of another setting in {setting}: {top}")
        parts.append(lint)
    if "checks" in show:
        parts.append(_check_lines(audit, failures))
    return "\n\n".join("\n".join(p) for p in parts)


def _check_lines(audit: Audit, failures: bool) -> list[str]:
    fails = audit.failures
    lines = [f"Checks: {len(audit.checks) - len(fails)} of {len(audit.checks)} passed, "
             f"{len(audit.unsure)} unsure (too few items to tell), {len(audit.failed)} failed"]
    for c in fails if failures else ():
        lines.append(_check_line(c))
    if failures and audit.unsure:
        factor = max(math.ceil((c.need or 0) / c.n) for c in audit.unsure)
        lines.append(f"  UNSURE: beyond the limit, but within sampling noise of it: too few "
                     f"items to tell; about {factor}x as many items (--n-per-cell/--n) would "
                     f"tell, if the shares stayed the same")
    return lines


def _check_line(c: Check) -> str:
    """One line of a check beyond its limit: ``FAIL`` or ``UNSURE``, value, interval."""
    line = f"  {c.verdict} {c.name} [{c.scope}]: {c.value:.3f}, limit {c.limit}"
    if c.z is not None:
        line += f"; n = {c.n}, score z = {c.z:.2f} (beyond noise above {_Z:.2f})"
    if c.need is not None:
        line += f"; about {c.need} items would tell it from noise"
    return line
