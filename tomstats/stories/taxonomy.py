"""Read a model's free-text answer as a location and classify it (StorySim's error taxonomy).

Reading rule (after StorySim's scorer, which reads the last line of the response):

1. Both the answer and every candidate are put in a *surface form*: lower case, ``_`` and
   ``-`` read as spaces, runs of spaces collapsed, a leading ``"the "`` dropped. A candidate
   matches where its surface form occurs as whole words, with optional spaces/underscores
   between its words (``room_3``, ``room 3``, ``Room 3.``, ``the Room 3``, ``room3`` all
   match ``"room_3"``; ``room 30`` does not).
2. The last non-empty line of the answer is searched first; if it names no candidate, the
   whole answer is searched. The candidate whose mention *ends last* is the answer (ties go
   to the longer mention), so "Bob was in room_2 but now thinks room_4" reads ``room_4``.

Classification precedence (first that applies): ``"correct"`` (the read location is the gold
answer — so when the gold answer equals a heuristic's answer the response counts as
correct), ``"first_common_location"``, ``"last_location"``, ``"other_location"``. A response
that names no candidate is a ``"refusal"`` if it contains a refusal phrase ("not enough
information", "cannot be determined", "unknown", …), else ``"unparseable"``. A refusal
phrase on an earlier line does not override a location named on the last line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from tomstats.stories.items import Item

__all__ = ["ERROR_CATEGORIES", "REFUSAL_PATTERNS", "classify_answer", "is_refusal",
           "normalize_location"]

#: Categories returned by :func:`classify_answer`, in precedence order.
ERROR_CATEGORIES = ("correct", "first_common_location", "last_location", "other_location",
                    "refusal", "unparseable")

#: Regular expressions (on the surface form) that mark a refusal to answer.
REFUSAL_PATTERNS = (
    r"not enough (information|info|context|details?)",
    r"(insufficient|no|missing) (information|info|context)",
    r"(can ?not|can't|cannot|unable to|impossible to|not possible to) (be )?"
    r"(determine|determined|tell|know|say|answer|infer|conclude)",
    r"\bunknown\b",
    r"\bunclear\b",
    r"\bundetermined\b",
    r"\bindeterminate\b",
    r"(i )?(do not|don't) know",
    r"(does not|doesn't|do not|don't) (say|specify|mention|state)",
    r"\bnot (specified|stated|mentioned)\b",
    r"\bno way to (know|tell)\b",
)
_REFUSAL_RE = re.compile("|".join(f"(?:{p})" for p in REFUSAL_PATTERNS))


def _surface(text: str) -> str:
    """Lower case, ``_``/``-`` as spaces, collapsed whitespace, no leading ``the``."""
    s = re.sub(r"[_\-]+", " ", text.lower())
    s = re.sub(r"\s+", " ", s).strip()
    return s[4:] if s.startswith("the ") else s


@lru_cache(maxsize=4096)
def _candidate_pattern(candidate: str) -> re.Pattern[str]:
    words = _surface(candidate).split(" ")
    if not words or words == [""]:
        raise ValueError(f"candidate location {candidate!r} is empty")
    body = r"[\s_\-]*".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![a-z0-9]){body}(?![a-z0-9])")


def _last_mention(text: str, candidates: Sequence[str]) -> str | None:
    s = re.sub(r"[_\-]+", " ", text.lower())
    best: tuple[int, int] | None = None
    found: str | None = None
    for cand in candidates:
        for m in _candidate_pattern(cand).finditer(s):
            key = (m.end(), m.end() - m.start())
            if best is None or key > best:
                best, found = key, cand
    return found


def normalize_location(text: str, candidates: Sequence[str]) -> str | None:
    """Map a free-text answer to the canonical candidate location it names.

    Parameters
    ----------
    text : str
        The model's answer (any length, any case).
    candidates : sequence of str
        Canonical location names, e.g. ``("hallway", "room_1", "room_2")``.

    Returns
    -------
    str or None
        The candidate mentioned last on the last non-empty line (else in the whole text),
        or ``None`` if no candidate is named.

    Examples
    --------
    >>> normalize_location("I think she is in the Room 3.", ["hallway", "room_3"])
    'room_3'
    >>> normalize_location("Bob saw her in room_1.\\nAnswer: hallway", ["hallway", "room_1"])
    'hallway'
    >>> normalize_location("no idea", ["hallway"]) is None
    True
    """
    if not isinstance(text, str):
        raise ValueError(f"answer must be a string, got {type(text).__name__}")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    found = _last_mention(lines[-1], candidates)
    if found is None and len(lines) > 1:
        found = _last_mention(text, candidates)
    return found


def is_refusal(text: str) -> bool:
    """Whether ``text`` contains a refusal phrase (see :data:`REFUSAL_PATTERNS`)."""
    return _REFUSAL_RE.search(_surface(text)) is not None


def classify_answer(item: Item, answer: str) -> str:
    """Classify a model's answer to ``item`` into one of :data:`ERROR_CATEGORIES`.

    Parameters
    ----------
    item : Item
        The question, with its gold ``answer``, ``candidates`` and the heuristic answers
        ``first_common_location`` and ``last_location``.
    answer : str
        The model's raw response.

    Returns
    -------
    str
        ``"correct"`` if the read location is the gold answer (this wins over any heuristic
        that gives the same location); else ``"first_common_location"``,
        ``"last_location"``, ``"other_location"``; ``"refusal"`` or ``"unparseable"`` if no
        location is named.
    """
    loc = normalize_location(answer, item.candidates)
    if loc is None:
        return "refusal" if is_refusal(answer) else "unparseable"
    if loc == item.answer:
        return "correct"
    if loc == item.first_common_location:
        return "first_common_location"
    if loc == item.last_location:
        return "last_location"
    return "other_location"
