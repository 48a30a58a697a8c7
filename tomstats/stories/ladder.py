r"""Length ladders: one design story told at several context lengths, grown with narrative.

A *ladder* tells one story of :mod:`tomstats.stories.plot` — its characters, places, events
(every move, hence who sees what) and critical block — at every requested length. The
events are drawn once, for the shortest length, by :func:`~tomstats.stories.plot.\
tell_story`; each longer step is the step before it with sentences that move no one
inserted (:func:`grow_story`): the same actions, dialogue, remarks about other places and
descriptions the generator tells between moves (about the character and the place named
least so far; a remark of ``T`` names ``T``'s decoy, so the place most named with ``T``
and the place of the last sentence naming ``T`` are the same at every step), chosen with
the story's state at the point of insertion (who stands where). Every sentence of a step
is kept, in order, by the next step, so the critical block (from the words before it to
``T``'s final move) is the same text at every step, and the event log, the questions and
the tracker's gold answers are identical.

Where the inserted words go is the *anchor*:

- ``"relative"``: the critical block keeps its place *relative to the story*. With
  :math:`I` the opening's words, :math:`B` the block's, :math:`L` the step's length and
  :math:`p` the target position, the words before the block are

  .. math::

      P_L = \min\bigl(\max(p\,(L - I - B),\; P_{L'}),\; P_{L'} + (L - N_{L'})\bigr),

  where :math:`L'` is the step before, :math:`N_{L'}` its words and :math:`P_{L'}` its
  words before the block; the rest go after the block. The share of free words before the
  block, ``Item.critical_position``, tends to :math:`p` as the story grows (a short first
  step may hold almost nothing before its block). A length contrast then asks: *does a
  longer story, the critical events as deep in it, cost accuracy?* — distance from the
  question and the amount of surrounding text grow together.
- ``"end"``: the words after the block (up to the question) stay those of the shortest
  step, and every inserted word goes before the block. The block ends the same number of
  words before the question at every step; the length contrast asks: *does text before
  the critical events, which the question never needs, cost accuracy?* — the distance
  from the question is held fixed.

The object telling of the world-model controls (``wm_object``) grows the same way: the
shorter step's sentences, with place notes and remarks about objects that move nothing
inserted (:func:`~tomstats.stories.plot.pad_object_sentences`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from tomstats.stories.narrative import NaturalSetting, Phrases, nearly_in, word_set
from tomstats.stories.plot import PlotStory, _Teller, pad_object_sentences
from tomstats.stories.render import length_window

__all__ = ["ANCHORS", "grow_story", "words_after_block"]

#: Where a ladder keeps the critical block (see the module docstring).
ANCHORS = ("relative", "end")
#: Decor sentences tried per inserted sentence before a gap is given up (a sentence that
#: nearly repeats one of the ten before it is not told).
_TRIES = 20
#: More words than any sentence that moves no one has (bulk filling stops this short of a
#: window, which :func:`~tomstats.stories.plot._fit` then hits).
_LONGEST = 30
#: Sentences before and after an inserted one that it must not nearly repeat (the lint's
#: window, :data:`tomstats.stories.audit_lint.NEAR_DUPLICATE_WINDOW`).
_WINDOW = 10


def _words(s: str) -> int:
    return len(s.split())


def words_after_block(ps: PlotStory) -> int:
    """Words told after ``T``'s final move (the critical block's end) up to the story's end."""
    return sum(_words(s) for s in ps.sentences[ps.block_sentences[1]:])


def _quotas(rng: random.Random, gaps: int, total: int) -> list[int]:
    """``total`` words dealt to ``gaps`` gaps: cumulative quotas of random (exponential,
    i.e. flat Dirichlet) shares."""
    if gaps <= 0:
        return []
    w = [rng.expovariate(1.0) for _ in range(gaps)]
    s, acc, out = sum(w), 0.0, []
    for x in w:
        acc += x
        out.append(round(total * acc / s))
    return out


def grow_story(ps: PlotStory, st: NaturalSetting, characters: Sequence[str],
               target_words: int, *, rng: random.Random, anchor: str = "relative",
               critical_position: float = 0.5, tolerance: float = 0.02,
               handling: bool = True, objects: Sequence[str] | None = None) -> PlotStory:
    """The story ``ps`` told again at ``target_words`` ± ``tolerance``, longer, with the same
    events: every sentence of ``ps`` in order, sentences that move no one inserted.

    Parameters
    ----------
    ps : PlotStory
        A told story (:func:`~tomstats.stories.plot.tell_story` or an earlier step), with
        its ``sentences``, ``marks`` and ``block_sentences``.
    st : NaturalSetting
    characters : sequence of str
        The story's cast, as told.
    target_words : int
        The step's length; ``ps`` must not be longer than its window.
    rng : random.Random
        The step's random stream (the inserted sentences and where they go).
    anchor : {"relative", "end"}
        Keep the block's share of the free words before it (``critical_position``) or its
        distance from the story's end (see the module docstring).
    critical_position : float
        ``anchor="relative"``: the target share :math:`p` of free words before the block.
    tolerance : float
        Relative length tolerance.
    handling : bool
        Whether characters handle objects in the inserted sentences (as the story was told).
    objects : sequence of str, optional
        The object names of the characters, when ``ps`` has an object telling to grow.

    Returns
    -------
    PlotStory
        The same ``events``, ``roles``, ``expected``, ``critical_span``, ``told`` and block
        (``block_words``); new ``text``, ``sentences``, ``marks``, ``block_sentences``,
        ``critical_position`` (share of free words before the block) and object telling.

    Raises
    ------
    ValueError
        An unknown ``anchor``, a story without sentences, or one longer than the window.
    """
    if anchor not in ANCHORS:
        raise ValueError(f"anchor must be one of {ANCHORS}, got {anchor!r}")
    if not ps.sentences:
        raise ValueError("ps has no sentences to grow (a story from tell_story has them)")
    lo, hi = length_window(target_words, tolerance)
    sents = ps.sentences
    b0, b1 = ps.block_sentences
    n = len(sents)
    w = [_words(s) for s in sents]
    total = sum(w)
    if total > hi:
        raise ValueError(f"the story has {total} words, more than the {hi} of a "
                         f"{target_words}-word step")
    opening, pre0, block = w[0], sum(w[1:b0]), sum(w[b0:b1])
    add = max(0, target_words - total)
    if anchor == "end":
        pre = pre0 + add
    else:
        free = target_words - opening - block
        pre = min(max(round(critical_position * free), pre0), pre0 + add)
    pre_q = _quotas(rng, b0, pre - pre0)  # gaps before sentences 1 … b0
    tail_q = _quotas(rng, n - b1 + 1, add - (pre - pre0))  # before b1 … n - 1, at the end
    tl = _Grower(st, characters, ps.roles, rng, 1.0, handling, frozenset(ps.join_places))
    sets = [word_set(x) for x in sents]
    if tl.sents[0] != sents[0]:
        raise ValueError("ps was told with another cast or setting (its opening differs)")
    tl.said |= set(sents)  # no inserted sentence repeats one told later
    if ps.decoy:  # an inserted remark of T names T's decoy, which stays the place most
        tl.decoys[ps.roles["T"]] = ps.decoy  # named with T, and last, at every step
    slack = max(1, (hi - lo) // 4)
    new_b0 = new_b1 = tail_start = 0
    for i in range(1, n + 1):  # the gap before sentence i (i = n: after the last one)
        tl.ahead = sets[i:i + _WINDOW]
        if i == b1:
            new_b1, tail_start = len(tl.sents), tl.words
        if i <= b0:  # before the block; the last gap fits the planned words before it
            goal = opening + sum(w[1:i]) + pre_q[i - 1]
            if i < b0:
                _decor_until(tl, goal)
            elif anchor == "end":
                rest = block + sum(w[b1:])
                _fill(tl, max(lo - rest, goal - slack), hi - rest)
            else:
                _fill(tl, goal - slack, goal + slack)
            if i == b0:
                new_b0 = len(tl.sents)
        elif i >= b1 and anchor == "relative":  # after it; the last gap fits the length
            if i < n:
                _decor_until(tl, tail_start + sum(w[b1:i]) + tail_q[i - b1])
            else:
                _fill(tl, max(lo, target_words - slack), min(hi, target_words + slack))
        if i < n:
            _replay(tl, ps, i)
    if list(tl.events) != list(ps.events) or tuple(tl.told) != tuple(ps.told):
        raise RuntimeError("growing the story changed its events")  # never: replayed as told
    if not lo <= tl.words <= hi:
        raise ValueError(f"cannot grow the story to {target_words} words "
                         f"(±{tolerance:.0%}): {tl.words} words")
    pre_words = sum(_words(s) for s in tl.sents[1:new_b0])
    outside = tl.words - opening - block
    pos = pre_words / outside if outside > 0 else 0.0
    obj: dict[str, object] = {}
    if ps.object_sentences and objects is not None and ps.object_cast is not None:
        names = dict(zip(characters, objects, strict=False))
        osents = pad_object_sentences(ps.object_sentences, st,
                                      [names[c] for c in ps.object_cast], lo, hi,
                                      Phrases(st, rng))
        obj = {"object_text": " ".join(osents), "object_sentences": tuple(osents)}
    return dataclasses.replace(ps, text=" ".join(tl.sents), sentences=tuple(tl.sents),
                               marks=tuple(tl.marks), block_sentences=(new_b0, new_b1),
                               critical_position=round(pos, 4), **obj)


class _Grower(_Teller):
    """A teller that inserts sentences into a told story: a new sentence must not nearly
    repeat the ten told before it nor the next ten of the story (``ahead``, word sets)."""

    ahead: Sequence[frozenset[str]] = ()

    def repeats(self, s: str, *, anywhere: bool = True) -> bool:
        return super().repeats(s, anywhere=anywhere) or nearly_in(word_set(s), self.ahead)


def _fit(tl: _Grower, lo: int, hi: int) -> None:
    """Sentences that move no one until ``tl`` has ``lo`` … ``hi`` words: one that fits the
    room, else a filler sentence of the right length (naming no one), never a near-repeat
    (as :func:`tomstats.stories.plot._fit`, whose filler is not checked)."""
    for _ in range(200):
        if tl.words >= lo:
            return
        for _try in range(12):
            n, words = len(tl.sents), tl.words
            tl.decor()
            if tl.words <= hi:
                break
            del tl.sents[n:], tl.wsets[n:], tl.marks[n:]
            tl.words = words
        else:
            for _try in range(12):
                s = tl.ph.fill(max(1, lo - tl.words), hi - tl.words)
                if s is None:
                    return
                if not tl.repeats(s):
                    tl.say(s)
                    break
            else:
                return


def _decor_until(tl: _Teller, goal: int, margin: int = 6) -> None:
    """Sentences that move no one until ``tl`` has ``goal - margin`` words or more (a gap's
    quota is approximate; the last gap of a part fits the rest exactly)."""
    stalls = 0
    while tl.words + margin < goal and stalls < _TRIES:
        before = tl.words
        tl.decor()
        stalls = stalls + 1 if tl.words == before else 0


def _fill(tl: _Teller, lo: int, hi: int) -> None:
    """Sentences that move no one until ``tl`` has ``lo`` … ``hi`` words: bulk first, then
    :func:`_fit`."""
    _decor_until(tl, lo, _LONGEST)
    _fit(tl, lo, hi)


def _replay(tl: _Teller, ps: PlotStory, i: int) -> None:
    """Tell sentence ``i`` of ``ps`` again, as it was: a move applies its event."""
    s, (event, who, places) = ps.sentences[i], ps.marks[i]
    if event >= 0:
        e = ps.events[event]
        if len(tl.events) != event:
            raise RuntimeError(f"sentence {i} tells event {event} out of order")
        tl.events.append(e)
        tl.told.append(ps.told[event])
        tl.came[e.actor], tl.pos[e.actor] = e.source, e.location
    tl.say(s, move=event >= 0)
    tl._count(s, who, places)
