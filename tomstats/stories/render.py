"""Render events as text, and fit a story to a target length in words.

Words are whitespace-separated tokens (``len(text.split())``). Every event has several
sentence templates of different lengths that say the same thing (see
:mod:`tomstats.stories.settings`); :func:`fit_templates` picks one per sentence so that the
story's length falls within ``target × (1 ± tolerance)``. Critical (ToM-relevant) sentences
can be held fixed: they always use the plain first template, so they read the same at every
context length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence

from tomstats.stories.settings import OBJECT_TEMPLATES, Setting
from tomstats.stories.world import Event

__all__ = ["fit_templates", "intro_sentence", "length_window", "render", "sentence_options",
           "word_count"]


def word_count(text: str) -> int:
    """Number of whitespace-separated words in ``text``."""
    return len(text.split())


def length_window(target: int, tolerance: float = 0.02) -> tuple[int, int]:
    """The accepted word counts ``[ceil(target(1-tol)), floor(target(1+tol))]``."""
    if not isinstance(target, int) or target < 1:
        raise ValueError(f"target length in words must be a positive integer, got {target!r}")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    return math.ceil(target * (1 - tolerance) - 1e-9), math.floor(target * (1 + tolerance) + 1e-9)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def sentence_options(event: Event, setting: Setting,
                     names: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every sentence that can render ``event`` (plain template first).

    ``names`` maps characters to other names; with inanimate names (``"the red ball"``)
    the object templates of StorySim's WM-Inanimate stories are used.
    """
    if event.action != "enter":
        raise ValueError(f"event t={event.time}: StorySim settings render only 'enter' "
                         f"events, got {event.action!r}")
    loc = setting.text(event.location)
    if names is not None:
        x = names.get(event.actor, event.actor)
        return tuple(t.format(x=x, X=_cap(x), l=loc) for t in OBJECT_TEMPLATES)
    return tuple(t.format(a=event.actor, l=loc) for t in setting.templates(event.location))


def intro_sentence(setting: Setting, characters: Sequence[str],
                   names: Mapping[str, str] | None = None) -> str:
    """The opening sentence: who is where at the start."""
    shown = [names.get(c, c) for c in characters] if names else list(characters)
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return _cap(setting.intro.format(names=listed, hub=setting.text(setting.hub)))


def fit_templates(options: Sequence[Sequence[str]], target: int, *, fixed: Collection[int] = (),
                  extra_words: int = 0, tolerance: float = 0.02,
                  rng: random.Random | None = None) -> list[int]:
    """Choose one template per sentence so that the text hits ``target`` words.

    Parameters
    ----------
    options : sequence of sequences of str
        Per sentence, its alternative renderings.
    target : int
        Target length in words of the whole text.
    fixed : collection of int
        Sentences that keep their first (plain) rendering.
    extra_words : int
        Words outside ``options`` (the opening sentence).
    tolerance : float
        Relative tolerance (0.02 = ±2 %).
    rng : random.Random
        Draws the order in which sentences are adjusted.

    Notes
    -----
    Every sentence starts with its plain template; sentences are then visited in random
    order and each is given the template whose length best closes the remaining gap, until
    the total equals the target (or no sentence is left); it must end inside the window.
    Fixed sentences are never changed.

    Returns
    -------
    list of int
        Template index per sentence.

    Raises
    ------
    ValueError
        If no choice of templates lands in the window (too few or too many sentences).
    """
    rng = rng or random.Random(0)
    lo, hi = length_window(target, tolerance)
    lengths = [[word_count(s) for s in opts] for opts in options]
    fixed = set(fixed)
    choice = [0] * len(options)
    total = extra_words + sum(ln[0] for ln in lengths)
    free = [i for i in range(len(options)) if i not in fixed]
    rng.shuffle(free)
    for i in free:
        if total == target:
            break
        want = lengths[i][choice[i]] + (target - total)
        j = min(range(len(lengths[i])), key=lambda k: (abs(lengths[i][k] - want), k))
        total += lengths[i][j] - lengths[i][choice[i]]
        choice[i] = j
    if not lo <= total <= hi:
        raise ValueError(f"cannot fit {len(options)} sentences to {target} words "
                         f"(±{tolerance:.0%}): best total {total}")
    return choice


def render(events: Sequence[Event], setting: Setting, characters: Sequence[str], *,
           choice: Sequence[int] | None = None,
           names: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Render a story: the opening sentence and one sentence per event.

    Returns
    -------
    text : str
        The story: the opening sentence, then the event sentences, separated by spaces.
    sentences : list of str
        The event sentences (without the opening sentence).
    """
    sentences = []
    for k, e in enumerate(events):
        opts = sentence_options(e, setting, names)
        sentences.append(opts[choice[k] if choice is not None else 0])
    return " ".join([intro_sentence(setting, characters, names), *sentences]), sentences
