r"""Audit an item set: can anything easier than belief reasoning answer it?

A ToM item set is a valid instrument only if text-only shortcuts score near chance. The
audit reads items (their text, question, candidates and recorded covariates; never the
generator) and reports, per cell (setting × length × order × belief status):

**Rules** — text-only answers that use no belief reasoning. A story is split into
sentences; a sentence *names* a location when a candidate appears in it (whole words,
``_`` read as a space); the location of a sentence is the one it names last. ``T`` is the
question's target as written in the story.

- ``t_last``, ``t_second_last``, ``t_first``: the location of the last, second-to-last,
  first sentence that names ``T`` and a location;
- ``t_near_frequent``: the location named most often in the sentences that name ``T`` and
  their neighbours (one before, one after; ties: the one named last);
- ``story_last``, ``story_frequent``: the last location named in the story, and the one
  named most often (ties: the one named last);
- ``opening``: the first location named in the story;
- ``cell_mode``: the most common gold answer of the *other* items of the cell
  (leave-one-out, ties by name), so a perfectly balanced cell scores at most chance;
- ``reality`` (reality tracking, the one rule exempt from the thresholds): the target's
  true final location (``item.last_location``).

Chance is ``1 / len(candidates)``.

**Balance** — the share of the most frequent gold answer among a setting's belief items
(orders ≥ 1); the true-belief share at orders 1 and 2 (an item is a *true belief* when its
answer equals reality); for order-2 items, how often the answer equals a simpler
question's: reality, the first-order belief of the chain's first agent about ``T``
(``S1``) and that of the second agent (``S2``).

**Text** — per story: the share of sentences that repeat an earlier sentence of the same
story verbatim; distinct-n (distinct word n-grams / all word n-grams, lower-cased); tokens
per word (:func:`estimate_tokens`, or a real tokenizer when given).

**Thresholds** (:data:`THRESHOLDS`): every rule except ``reality`` at most chance + 0.10,
pooled per (setting, order, belief status) over lengths; the most frequent gold answer of a
setting's belief items at most 2 × chance; a true-belief share in [0.35, 0.65] at orders 1
and 2; order-2 answers equal to some simpler question's in at most 70 % of order-2 items;
per (setting, length) at most 10 % verbatim repeats and distinct-2 at least 0.15.

**Verdicts** — a proportion measured on ``n`` items is noisy, so every check of a share
(rules, gold share, true-belief share, order-2 answers) gets one of three verdicts:
``PASS`` when the share :math:`\hat p` is within the limit; ``FAIL`` when the 95 % Wilson
interval of :math:`\hat p` lies wholly beyond the limit; ``UNSURE`` otherwise (too few
items to tell). The Wilson interval is the inversion of the score test, so with :math:`L`
the limit crossed (``<= L``, or the nearer edge of a band) the interval lies beyond
:math:`L` exactly when

.. math::

    z = \frac{|\hat p - L|}{\sqrt{L (1 - L) / n}} > z_{0.975} \approx 1.96,

and the same share on :math:`n > z_{0.975}^2 L(1-L)/(\hat p - L)^2` items would be a
``FAIL`` (``Check.need``: about how many items would tell). ``Check.z`` keeps the score.
Text checks (repeats, distinct-2) have no interval: beyond the limit is ``FAIL``.
``Check.passed`` and ``Audit.passed`` keep the strict reading (every point estimate within
its limit); ``tomstats stories audit`` exits with 4 only on a ``FAIL``.
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

from tomstats.stories.items import Item

__all__ = ["AUDIT_RULES", "LEVEL", "THRESHOLDS", "Audit", "Check", "audit_items",
           "belief_status", "distinct_n", "estimate_tokens", "format_audit", "repeat_share",
           "rule_answers", "sentences", "share_check", "simpler_answers"]

#: Text-only rules, in the order they are reported (``reality`` is exempt from thresholds).
AUDIT_RULES = ("t_last", "t_second_last", "t_first", "t_near_frequent", "story_last",
               "story_frequent", "opening", "cell_mode", "reality")

#: Thresholds of :func:`audit_items` (see the module docstring).
THRESHOLDS: dict[str, float] = {
    "rule_above_chance": 0.10, "gold_share_over_chance": 2.0, "true_belief_min": 0.35,
    "true_belief_max": 0.65, "order2_same_as_simpler": 0.70, "repeat_share": 0.10,
    "distinct_2": 0.15,
}

#: Level of the Wilson intervals behind the verdicts.
LEVEL = 0.95
_Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)

_SPLIT = re.compile(r'(?<=[.!?])["”]?\s+')
_WORD = re.compile(r"[A-Za-z]+|[0-9]|[^\sA-Za-z0-9]")


def sentences(text: str) -> list[str]:
    """Split a story into sentences (after ``.``, ``!`` or ``?``, a closing quote kept)."""
    out, start = [], 0
    for m in _SPLIT.finditer(text):
        end = m.start() + len(m.group().rstrip())
        out.append(text[start:end].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` estimated without a tokenizer (byte-pair encodings of English).

    Every run of letters costs ``ceil(len / 7)`` tokens (most English words are one
    token; long or rare words split), every digit and every other non-space character one
    token. ``room_3`` is estimated at 3 tokens, ``"the kitchen."`` at 3. SmolLM2's own
    tokenizer is within about 10 % of this on generated stories (checked in the tests when
    it is installed).
    """
    n = 0
    for m in _WORD.finditer(text):
        w = m.group()
        n += math.ceil(len(w) / 7) if w[0].isalpha() else 1
    return n


def distinct_n(text: str, n: int = 2) -> float:
    """Distinct word n-grams over all word n-grams of ``text`` (lower-cased; 1.0 if none)."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    grams = list(zip(*(words[i:] for i in range(n)), strict=False))
    return len(set(grams)) / len(grams) if grams else 1.0


def repeat_share(text: str) -> float:
    """Share of the sentences of ``text`` that repeat an earlier sentence verbatim."""
    seen: set[str] = set()
    rep = 0
    ss = sentences(text)
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


def _location_pattern(candidates: Sequence[str]) -> tuple[re.Pattern[str], dict[str, str]]:
    forms: dict[str, str] = {}
    for c in candidates:
        for f in {c, c.replace("_", " ")}:
            forms[f.lower()] = c
    alts = sorted(forms, key=len, reverse=True)
    pat = re.compile(r"(?<![\w])(" + "|".join(map(re.escape, alts)) + r")(?![\w])", re.I)
    return pat, forms


def _target_text(item: Item) -> str:
    meta = item.metadata
    if meta.get("target_text"):
        return str(meta["target_text"])
    if item.target and re.search(rf"\b{re.escape(item.target)}\b", item.story):
        return item.target
    if item.question_type == "wm_object":  # told with objects (format 1): map the name
        from tomstats.stories.settings import OBJECT_NAMES

        chars = meta.get("storyboard", {}).get("characters", [])
        names = dict(zip(chars, OBJECT_NAMES, strict=False))
        return names.get(item.target, item.target).removeprefix("the ")
    return item.target


def _mode(names: Iterable[str]) -> str:
    """Most frequent name; ties go to the one that occurs last."""
    counts: Counter[str] = Counter()
    last: dict[str, int] = {}
    for i, x in enumerate(names):
        counts[x] += 1
        last[x] = i
    if not counts:
        return ""
    return max(counts, key=lambda x: (counts[x], last[x]))


def rule_answers(item: Item) -> dict[str, str]:
    """The answer of every text-only rule except ``cell_mode`` (``""``: no answer)."""
    pat, forms = _location_pattern(item.candidates)
    ss = sentences(item.story)
    locs = [[forms[m.group(1).lower()] for m in pat.finditer(s)] for s in ss]
    t = _target_text(item)
    tpat = re.compile(rf"(?<![\w]){re.escape(t)}(?![\w])", re.I) if t else None
    with_t = [i for i, s in enumerate(ss) if tpat is not None and tpat.search(s)]
    t_loc = [locs[i][-1] for i in with_t if locs[i]]
    near: list[str] = []
    for j in sorted({j for i in with_t for j in (i - 1, i, i + 1) if 0 <= j < len(ss)}):
        near.extend(locs[j])
    flat = [x for row in locs for x in row]
    return {
        "t_last": t_loc[-1] if t_loc else "",
        "t_second_last": t_loc[-2] if len(t_loc) > 1 else "",
        "t_first": t_loc[0] if t_loc else "",
        "t_near_frequent": _mode(near),
        "story_last": flat[-1] if flat else "",
        "story_frequent": _mode(flat),
        "opening": flat[0] if flat else "",
        "reality": item.last_location or "",
    }


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


@dataclass(frozen=True)
class Audit:
    """The result of :func:`audit_items`.

    Attributes
    ----------
    cells : list of dict
        One row per (setting, length, order, belief status): ``n``, ``chance`` and the
        accuracy of every rule in :data:`AUDIT_RULES`.
    pooled : list of dict
        The same pooled over lengths, per (setting, order, belief status).
    text : list of dict
        Per (setting, length): stories, mean words, verbatim-repeat share, distinct-2,
        tokens per word.
    checks : list of Check
    """

    cells: list[dict[str, Any]]
    pooled: list[dict[str, Any]]
    text: list[dict[str, Any]]
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: cells, pooled, text, checks and ``passed``."""
        return {"cells": self.cells, "pooled": self.pooled, "text": self.text,
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


def _rule_scores(items: Sequence[Item]) -> list[dict[str, float]]:
    """Per item, 1.0/0.0 for every rule (``cell_mode`` leave-one-out within the cell)."""
    out = []
    gold = Counter(it.answer for it in items)
    for it in items:
        ans = rule_answers(it)
        others = gold.copy()
        others[it.answer] -= 1
        top = max(sorted(others), key=lambda x: others[x]) if +others else ""
        ans["cell_mode"] = top
        out.append({r: float(ans[r] == it.answer) for r in AUDIT_RULES})
    return out


def _cell_row(key: dict[str, Any], items: Sequence[Item],
              scores: Sequence[dict[str, float]]) -> dict[str, Any]:
    row = dict(key)
    row["n"] = len(items)
    row["chance"] = sum(1 / max(len(it.candidates), 1) for it in items) / len(items)
    for r in AUDIT_RULES:
        row[r] = sum(s[r] for s in scores) / len(scores)
    return row


def _text_rows(items: Sequence[Item],
               tokenizer: Callable[[str], int] | None) -> list[dict[str, Any]]:
    stories: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
    for it in items:
        stories[(it.setting, it.context_words)].setdefault(it.story, it.story)
    count = tokenizer or estimate_tokens
    rows = []
    for (setting, length), texts in sorted(stories.items()):
        ts = list(texts)
        words = sum(len(t.split()) for t in ts)
        rows.append({"setting": setting, "length": length, "stories": len(ts),
                     "words": words / len(ts),
                     "repeat_share": sum(map(repeat_share, ts)) / len(ts),
                     "distinct_2": sum(distinct_n(t, 2) for t in ts) / len(ts),
                     "tokens_per_word": sum(count(t) for t in ts) / max(words, 1),
                     "tokenizer": "model" if tokenizer else "estimate"})
    return rows


def audit_items(items: Iterable[Item], *,
                tokenizer: Callable[[str], int] | None = None) -> Audit:
    """Audit ``items`` (see the module docstring for the rules, metrics and thresholds).

    Parameters
    ----------
    items : iterable of Item
    tokenizer : callable, optional
        ``text -> number of tokens`` of a real model; default :func:`estimate_tokens`.

    Returns
    -------
    Audit
    """
    items = list(items)
    if not items:
        raise ValueError("items: the item set is empty; nothing to audit")
    groups: dict[tuple[str, int, str, str], list[Item]] = defaultdict(list)
    for it in items:
        groups[(it.setting, it.context_words, _question_kind(it), belief_status(it))].append(it)
    cells, pooled_src = [], defaultdict(list)
    for (setting, length, kind, status), its in sorted(groups.items()):
        scores = _rule_scores(its)
        key = {"setting": setting, "length": length, "order": kind, "belief": status}
        cells.append(_cell_row(key, its, scores))
        pooled_src[(setting, kind, status)].append((its, scores))
    pooled = []
    for (setting, kind, status), parts in sorted(pooled_src.items()):
        its = [x for p in parts for x in p[0]]
        sc = [x for p in parts for x in p[1]]
        pooled.append(_cell_row({"setting": setting, "order": kind, "belief": status}, its, sc))
    text = _text_rows(items, tokenizer)
    checks = _rule_checks(pooled) + _balance_checks(items) + _text_checks(text)
    return Audit(cells, pooled, text, checks)


def _rule_checks(pooled: Sequence[dict[str, Any]]) -> list[Check]:
    out = []
    for row in pooled:
        limit = row["chance"] + THRESHOLDS["rule_above_chance"]
        scope = f"{row['setting']} order {row['order']} belief {row['belief']}"
        for r in AUDIT_RULES[:-1]:
            out.append(share_check(f"rule {r}", scope, round(row[r] * row["n"]), row["n"],
                                   upper=limit, limit=f"<= {limit:.3f} (chance + 0.10)"))
    return out


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
    out = []
    for row in text:
        scope = f"{row['setting']} {row['length']} words"
        lim = THRESHOLDS["repeat_share"]
        out.append(Check("verbatim repeats", scope, row["repeat_share"], f"<= {lim}",
                         row["repeat_share"] <= lim))
        lim = THRESHOLDS["distinct_2"]
        out.append(Check("distinct-2", scope, row["distinct_2"], f">= {lim}",
                         row["distinct_2"] >= lim))
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


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> list[str]:
    def fmt(v: Any) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    cells = [[fmt(r[c]) for c in cols] for r in rows]
    width = [max(len(c), *(len(x[i]) for x in cells)) if cells else len(c)
             for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, width, strict=True))]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, width, strict=True)) for row in cells]
    return lines


def format_audit(audit: Audit, *, cells: bool = False, failures: bool = True) -> str:
    """The audit as plain-text tables (pooled rules, text, failed checks).

    ``cells`` adds the per-cell table; ``failures=False`` leaves out the list of failed
    checks (their number is always given).
    """
    rule_cols = ["setting", "order", "belief", "n", "chance", *AUDIT_RULES]
    lines = ["Text-only rules, accuracy pooled over lengths (chance = 1/candidates):"]
    lines += _table(audit.pooled, rule_cols)
    if cells:
        lines += ["", "Per cell:"]
        lines += _table(audit.cells, ["setting", "length", *rule_cols[1:]])
    lines += ["", "Text per (setting, length):"]
    lines += _table(audit.text, ["setting", "length", "stories", "words", "repeat_share",
                                 "distinct_2", "tokens_per_word"])
    fails = audit.failures
    lines += ["", f"Checks: {len(audit.checks) - len(fails)} of {len(audit.checks)} passed, "
              f"{len(audit.unsure)} unsure (too few items to tell), {len(audit.failed)} failed"]
    for c in fails if failures else ():
        lines.append(_check_line(c))
    if failures and audit.unsure:
        factor = max(math.ceil((c.need or 0) / c.n) for c in audit.unsure)
        lines.append(f"  UNSURE: beyond the limit, but within sampling noise of it: too few "
                     f"items to tell; about {factor}x as many items (--n-per-cell/--n) would "
                     f"tell, if the shares stayed the same")
    return "\n".join(lines)


def _check_line(c: Check) -> str:
    """One line of a check beyond its limit: ``FAIL`` or ``UNSURE``, value, interval."""
    line = f"  {c.verdict} {c.name} [{c.scope}]: {c.value:.3f}, limit {c.limit}"
    if c.z is not None:
        line += f"; n = {c.n}, score z = {c.z:.2f} (beyond noise above {_Z:.2f})"
    if c.need is not None:
        line += f"; about {c.need} items would tell it from noise"
    return line
