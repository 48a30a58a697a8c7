"""The item schema shared by the story generator (which writes items) and the runner
(which reads them). One item is one question about one rendered story.

Items are stored as JSON Lines, one item per line, each line carrying ``format``
(:data:`ITEM_FORMAT`) so that readers can refuse files of another version.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tomstats._io import atomic_open
from tomstats._validate import read_text

__all__ = ["BELIEF_STATUSES", "ITEM_FORMAT", "READABLE_FORMATS", "Item", "read_items",
           "write_items"]

#: Version tag written into every item record (version 2 added ``belief_status`` and
#: ``same_as``, version 3 ``pair_id``; version-1 records are still read, ``belief_status``
#: derived on reading; records of versions 1 and 2 read as unpaired, ``pair_id = ""``).
ITEM_FORMAT = "tomstats.items/3"
#: Every version :meth:`Item.from_dict` reads.
READABLE_FORMATS = ("tomstats.items/1", "tomstats.items/2", ITEM_FORMAT)


@dataclass(frozen=True)
class Item:
    """One question about one story, with its verified gold answer and design covariates.

    Parameters
    ----------
    item_id : str
        Unique, stable identifier (same seed and settings give the same id).
    story : str
        The rendered story text put to the model.
    question : str
        The question text.
    answer : str
        Gold answer (a location name as it appears in ``candidates``), from the belief tracker.
    question_type : str
        ``"reality"`` (order 0), ``"tom"`` (order ≥ 1), ``"wm_human"``, ``"wm_object"``,
        or an AnaToM type (``"memory"``, ``"first_order_true_belief"``, …).
    tom_order : int
        Nesting depth of the question: 0 reality / world model, 1 first order, 2 second order.
    context_words : int
        Target story length in words (the design level); ``n_words`` is the achieved length.
    n_words : int
        Number of words of ``story``.
    candidates : tuple of str
        Every location of the world (the answer space).
    agents : tuple of str
        The question's chain of agents (empty for reality questions).
    target : str
        The entity whose location is asked (an agent or an object).
    first_common_location : str or None
        StorySim's heuristic answer (the first location the chain's agents shared).
    last_location : str or None
        The target's true final location (the recency heuristic's answer).
    mislead_distance : int or None
        Events between the belief-forming event and the end of the story (StorySim).
    n_characters : int
        Number of characters in the story.
    setting : str
        ``"rooms"``, ``"field"``, ``"calls"`` (StorySim settings) or ``"anatom"``.
    generator : str
        ``"storysim"`` or ``"anatom"``.
    seed : int
        Seed the item was generated from.
    critical_position : float or None
        Relative position (0–1) of the critical events in the rendered story.
    metadata : mapping
        Anything else (storyboard name, event log, …); must be JSON-serialisable.
    belief_status : str
        ``"true"`` (the asked belief equals reality), ``"false"``, or ``"none"`` (reality
        and world-model questions): a design factor of orders ≥ 1.
    same_as : str
        StorySim items of order 2 or more: which simpler questions have the same answer,
        ``+``-joined among the labels of :func:`~tomstats.stories.beliefs.simpler_chains`
        (order 2: ``reality``, ``S1`` — the chain's first agent about the target — and
        ``S2``, the second agent about the target), or ``"none"``; ``""`` for other items.
    pair_id : str
        Items that share a non-empty ``pair_id`` are the versions of one story's question
        that differ only in the belief status: the true-belief and the false-belief telling
        of the same story, with the same characters, places and question. Paired scoring
        counts such a unit right only when every version is answered right, which a reality
        tracker cannot do. ``""`` when the item is unpaired.
    """

    item_id: str
    story: str
    question: str
    answer: str
    question_type: str
    tom_order: int
    context_words: int
    n_words: int
    candidates: tuple[str, ...]
    agents: tuple[str, ...] = ()
    target: str = ""
    first_common_location: str | None = None
    last_location: str | None = None
    mislead_distance: int | None = None
    n_characters: int = 0
    setting: str = ""
    generator: str = ""
    seed: int = 0
    critical_position: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    belief_status: str = "none"
    same_as: str = ""
    pair_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict with the format tag."""
        d = dataclasses.asdict(self)
        d["candidates"] = list(self.candidates)
        d["agents"] = list(self.agents)
        d["metadata"] = dict(self.metadata)
        return {"format": ITEM_FORMAT, **d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Item:
        """Build an item from :meth:`to_dict` output; ``ValueError`` names a bad field."""
        fmt = d.get("format", ITEM_FORMAT)
        if fmt not in READABLE_FORMATS:
            raise ValueError(f"item format {fmt!r} is not supported (expected one of "
                             f"{list(READABLE_FORMATS)})")
        if fmt == "tomstats.items/1":
            d = {**d, "belief_status": _derived_belief_status(d)}
        if fmt != ITEM_FORMAT and "pair_id" in d:
            raise ValueError(f"item {d.get('item_id', '?')!r}: field 'pair_id' exists from "
                             f"format {ITEM_FORMAT!r} on, not in {fmt!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - set(d))
        if missing:
            raise ValueError(f"item {d.get('item_id', '?')!r} is missing fields {missing}")
        unknown = sorted(set(d) - names - {"format"})
        if unknown:
            raise ValueError(f"item {d.get('item_id', '?')!r} has unknown fields {unknown}")
        kw = {k: v for k, v in d.items() if k in names}
        kw["candidates"] = tuple(kw["candidates"])
        kw["agents"] = tuple(kw.get("agents", ()))
        if kw.get("belief_status", "none") not in BELIEF_STATUSES:
            raise ValueError(f"item {kw['item_id']!r}: field 'belief_status' must be one of "
                             f"{list(BELIEF_STATUSES)}, got {kw['belief_status']!r}")
        if not isinstance(kw.get("pair_id", ""), str):
            raise ValueError(f"item {kw['item_id']!r}: field 'pair_id' must be a string, "
                             f"got {kw['pair_id']!r}")
        for k in ("tom_order", "context_words", "n_words"):
            if not isinstance(kw[k], int) or isinstance(kw[k], bool) or kw[k] < 0:
                raise ValueError(f"item {kw['item_id']!r}: field {k!r} must be a non-negative "
                                 f"integer, got {kw[k]!r}")
        return cls(**kw)


#: Values of :attr:`Item.belief_status`.
BELIEF_STATUSES = ("true", "false", "none")


def _derived_belief_status(d: Mapping[str, Any]) -> str:
    """``belief_status`` of a version-1 record: its answer compared with reality."""
    qtype = str(d.get("question_type", ""))
    if qtype.endswith("_true_belief"):
        return "true"
    if qtype.endswith("_false_belief"):
        return "false"
    if qtype == "tom" and isinstance(d.get("tom_order"), int) and d["tom_order"] >= 1 \
            and d.get("last_location") is not None:
        return "true" if d.get("answer") == d["last_location"] else "false"
    return "none"


def write_items(path: str | os.PathLike[str], items: Iterable[Item]) -> Path:
    """Write items as JSON Lines, atomically. Returns the path.

    ``TypeError`` naming the argument when ``items`` is not an iterable of :class:`Item`
    (checked before anything is written).
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise TypeError(f"items must be an iterable of tomstats Item objects, got "
                        f"{type(items).__name__}")
    items = list(items)
    bad = next((x for x in items if not isinstance(x, Item)), None)
    if bad is not None:
        raise TypeError(f"items must hold tomstats Item objects, got {type(bad).__name__} "
                        f"{bad!r:.60}")
    path = Path(path)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it.to_dict(), ensure_ascii=False) + "\n")
    return path


def read_items(path: str | os.PathLike[str]) -> list[Item]:
    """Read and validate a JSON Lines item file; errors name the line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"item file {str(path)!r} does not exist")
    items: list[Item] = []
    seen: set[str] = set()
    for lineno, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict):
                raise ValueError(f"an item must be a JSON object, got {type(d).__name__}")
            item = Item.from_dict(d)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
        if item.item_id in seen:
            raise ValueError(f"{path}:{lineno}: duplicated item_id {item.item_id!r}")
        seen.add(item.item_id)
        items.append(item)
    if not items:
        raise ValueError(f"item file {str(path)!r} holds no items")
    return items
