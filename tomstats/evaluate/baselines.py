"""What the runner records about an item for the baselines a report shows beside each model.

Two answers that need no belief reasoning are scored against every question's gold answer:

- the **reality tracker** answers the target's true final place (``Item.last_location``,
  already in every record as ``last_location``);
- the **previous place** answers the target's place before its last move
  (:func:`previous_location`, recorded as ``previous_location``): in a false-belief item the
  belief is, by construction, where the target was when the observer last saw it, which is
  often exactly that place.

``previous_location`` is taken from the item's structured events (``metadata["events"]``, the
generator's own record of every move: ``[time, actor, location, source]`` lists, or the
storyboard's and AnaToM's ``{"time", "action", "actor", "location", "source"}`` objects), not
from the story text: it is the place the target really left on its last move. Items whose
metadata lack the events (e.g. a copy stripped to stay small) record ``None``, and the
baseline is reported as not available for them. ``n_candidates`` (the number of places a
question can be answered with) gives each question's chance level, ``1 / n_candidates``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomstats.stories.items import Item

__all__ = ["baseline_fields", "previous_location"]


def _move(e: Any) -> tuple[Any, str, Any, Any] | None:
    """``(time, actor, location, source)`` of an event that moves an agent, else ``None``."""
    if isinstance(e, Sequence) and not isinstance(e, str) and len(e) >= 4:
        return e[0], e[1], e[2], e[3]
    if isinstance(e, Mapping) and e.get("action", "enter") == "enter":
        return e.get("time"), e.get("actor"), e.get("location"), e.get("source")
    return None


def previous_location(item: Item) -> str | None:
    """The target's place before its last move: the ``source`` of its last ``enter`` event.

    ``None`` when the item has no structured events, when the target never moves (or is not
    an agent, e.g. an object of a world-model question), or when that place is not one of the
    item's ``candidates``.
    """
    events = item.metadata.get("events") if isinstance(item.metadata, Mapping) else None
    if not isinstance(events, Sequence) or isinstance(events, str) or not item.target:
        return None
    last: tuple[int, Any] | None = None
    for i, e in enumerate(events):
        mv = _move(e)
        if mv is None or mv[1] != item.target:
            continue
        t = mv[0] if isinstance(mv[0], int) and not isinstance(mv[0], bool) else i
        if last is None or t >= last[0]:
            last = (t, mv[3])
    if last is None or not isinstance(last[1], str) or last[1] not in item.candidates:
        return None
    return last[1]


def baseline_fields(item: Item) -> dict[str, Any]:
    """The fields of a log record the baselines and the paired scores read: ``pair_id``,
    ``last_location``, ``previous_location`` and ``n_candidates``."""
    return {"pair_id": item.pair_id, "last_location": item.last_location,
            "previous_location": previous_location(item),
            "n_candidates": len(item.candidates)}
