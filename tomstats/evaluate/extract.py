"""Answer extraction: pull the answer out of a raw model response, then score it.

Extraction is this module's job; mapping the answer to a location and classifying it with
StorySim's error taxonomy is the story generator's (:mod:`tomstats.stories.taxonomy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tomstats.stories.items import Item

__all__ = ["Scored", "extract_answer_text", "score_response"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_MARKER = re.compile(r"\banswer\s*(?:is\s*:?|:)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Scored:
    """A scored response: extracted text, location, taxonomy category and outcome."""

    answer_text: str
    parsed_answer: str | None
    category: str
    correct: int


def extract_answer_text(response: str) -> str:
    """The answer part of a raw response.

    Drops reasoning in ``<think>…</think>`` (an unterminated ``<think>`` means the model ran
    out of tokens before answering: the answer is empty), keeps the text after the last
    "answer:" / "answer is" marker if there is one, and returns its first non-empty line
    without Markdown decoration and trailing punctuation.

    Examples
    --------
    >>> extract_answer_text("<think>hmm</think>\\n**Answer:** Room 3.")
    'Room 3'
    """
    text = _THINK.sub(" ", response)
    if re.search(r"<think>", text, re.IGNORECASE):
        return ""
    marks = list(_MARKER.finditer(text))
    if marks:
        text = text[marks[-1].end():]
    for line in text.splitlines():
        line = line.strip()
        if line.strip("*_`#>\"“”' "):
            return _strip_decor(line)
    return ""


def _strip_decor(line: str) -> str:
    # keep underscores inside names such as room_3: only strip them at the edges
    line = line.strip().strip("*`#>\"“”' ").strip()
    line = re.sub(r"[*`\"“”]+", "", line)
    return line.rstrip(" .,!;:").strip()


def score_response(item: Item, response: str) -> Scored:
    """Extract, normalise and classify one response to ``item``.

    The extracted text is mapped to one of ``item.candidates`` with
    :func:`tomstats.stories.taxonomy.normalize_location` (falling back to the whole
    response when the answer line names no location) and classified with
    :func:`tomstats.stories.taxonomy.classify_answer`; ``correct`` is 1 exactly when the
    category is ``"correct"``.
    """
    from tomstats.stories.taxonomy import classify_answer, normalize_location

    text = extract_answer_text(response)
    parsed = normalize_location(text, item.candidates) if text else None
    if parsed is None and text:
        whole = _THINK.sub(" ", response)
        parsed = normalize_location(whole, item.candidates)
        if parsed is not None:
            text = whole.strip()
    category = classify_answer(item, text)
    return Scored(answer_text=text, parsed_answer=parsed, category=category,
                  correct=int(category == "correct"))
