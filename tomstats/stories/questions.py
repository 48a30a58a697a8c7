"""Question wording and the answers of the heuristics StorySim's error analysis names.

- order ``k`` ToM question: "Where does A think B thinks … T is?" (``k = 0``: "Where is T?");
- WM-Human: "After the start, when S1 and S2 were in the same room as T, where did T go
  next?";
- WM-Inanimate: the same events told with objects: "…, where was T moved to next?".

Heuristic answers (for the error taxonomy): the *first common location* of a group is where
they first meet — the location entered at the first event, by a member of the group, after
which all members are in one place; the *last location* is the target's true final place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tomstats.stories.settings import Setting
from tomstats.stories.world import Event, World, initial_state

__all__ = ["first_common_location", "tom_question", "wm_answer", "wm_question"]


def tom_question(chain: Sequence[str], target: str) -> str:
    """ "Where is T?" (empty chain) or "Where does A think B thinks T is?".

    >>> tom_question(("Bob", "Charlie"), "Alice")
    'Where does Bob think Charlie thinks Alice is?'
    """
    if not chain:
        return f"Where is {target}?"
    inner = " thinks ".join([*chain[1:], target])
    return f"Where does {chain[0]} think {inner} is?"


def wm_question(setting: Setting | Any, s1: str, s2: str, target: str, *,
                inanimate: bool = False) -> str:
    """StorySim's WM-Human (or, with ``inanimate``, WM-Inanimate) question.

    The opening co-location does not count (:func:`wm_answer` reads only events), and the
    wording says so::

        After the start, when S1 and S2 were in the same room as T, where did T go next?
    """
    verb = "was {t} moved to next" if inanimate else "did {t} go next"
    return (f"After the start, when {s1} and {s2} were in {setting.same_place} as {target}, "
            "where " + verb.format(t=target) + "?")


def _meetings(world: World, events: Sequence[Event],
              group: Sequence[str]) -> Iterator[Event]:
    state = initial_state(world)
    members = set(group)
    for e in events:
        if e.action == "enter":
            state[e.actor] = e.location
        if e.actor in members and e.action == "enter" \
                and all(state[g] == e.location for g in members):
            yield e


def first_common_location(world: World, events: Sequence[Event],
                          group: Sequence[str]) -> str | None:
    """Where ``group`` first meets (after the start); ``None`` if it never does."""
    return next((e.location for e in _meetings(world, events, group)), None)


def wm_answer(world: World, events: Sequence[Event], s1: str, s2: str,
              target: str) -> str | None:
    """Where ``target`` went next after it met ``s1`` and ``s2``.

    ``None`` when the question is ill defined: the three never met, met more than once
    (which meeting would the question mean?), or ``target`` never moved afterwards.
    """
    met = list(_meetings(world, events, (s1, s2, target)))
    if len(met) != 1:
        return None
    return next((e.location for e in events if e.time > met[0].time and e.actor == target
                 and e.action == "enter"), None)
