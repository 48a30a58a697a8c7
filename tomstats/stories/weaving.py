"""Weave a story into a user's own natural text (after BABILong).

BABILong grows a task's context by scattering its sentences through unrelated natural text
instead of repeating them. :func:`weave` does the same for a design story: the story's
sentences keep their order and are spread at random places through a run of consecutive
sentences of the host text (starting at a random sentence), until the woven text reaches
the target length. The host text must not name anything the story is about — a character,
a place — or the reader could not tell the story from the background:
:func:`check_host` refuses it, naming the word.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

from tomstats.stories.audit import sentences
from tomstats.stories.render import length_window

__all__ = ["check_host", "host_sentences", "weave"]


def host_sentences(text: str) -> list[str]:
    """The host text as sentences (whitespace runs, line breaks included, read as spaces)."""
    return sentences(" ".join(text.split()))


def check_host(text: str, names: Iterable[str], *, what: str = "host text") -> None:
    """``ValueError`` naming the first of ``names`` that ``text`` contains (whole words,
    any case)."""
    for name in names:
        m = re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.I)
        if m:
            raise ValueError(f"{what} names {m.group()!r} (line "
                             f"{text.count(chr(10), 0, m.start()) + 1}), which is a "
                             f"character, place or object of the stories; use a text that "
                             f"names none of them")


def weave(story: str, host: Sequence[str], target_words: int, rng: random.Random, *,
          tolerance: float = 0.02) -> str:
    """``story``'s sentences spread, in order, through consecutive ``host`` sentences.

    The opening sentence of the story stays first. Host sentences are taken from a random
    start (wrapping around at most once); one that would overshoot the window is skipped.

    Raises
    ------
    ValueError
        When the host text is too short to reach ``target_words``.
    """
    lo, hi = length_window(target_words, tolerance)
    story_s = sentences(story)
    total = sum(len(s.split()) for s in story_s)
    if total > hi:
        raise ValueError(f"the story alone has {total} words, more than {hi}")
    picked: list[str] = []
    start = rng.randrange(len(host)) if host else 0
    for k in range(len(host)):
        if total >= lo:
            break
        s = host[(start + k) % len(host)]
        n = len(s.split())
        if total + n <= hi:
            picked.append(s)
            total += n
    if total < lo:
        raise ValueError(f"the host text is too short: {sum(len(s.split()) for s in host)} "
                         f"words cannot pad a story to {target_words} words")
    # story sentence i (i ≥ 1) goes after a sorted random number of host sentences
    cuts = sorted(rng.randint(0, len(picked)) for _ in story_s[1:])
    out, h = [story_s[0]], 0
    for s, c in zip(story_s[1:], cuts, strict=True):
        out.extend(picked[h:c])
        h = c
        out.append(s)
    out.extend(picked[h:])
    return " ".join(out)
