"""Fast ground truth: the belief tracker of :mod:`tomstats.stories.beliefs` on integer codes.

:func:`tomstats.stories.beliefs.belief` is the *reference*: written to be checked line by
line against the definitions (views of views of the update list), it rebuilds the nested
view from scratch for every question. This module computes the same thing faster:

- entities (agents first, in the order of ``world.start``, then objects) and values
  (locations, then containers) are small integers, ``None`` is ``-1``;
- an update is a plain tuple ``(entity, value, vis_a, vis_b, actor, kind)`` (``kind`` 0 =
  enter, 1 = object move, 2 = sighting; ``vis_a``/``vis_b`` are the one or two locations it
  is visible in);
- :func:`beliefs_along` walks a chain ``X1 → … → Xk`` once and returns the answers of every
  prefix (reality, ``X1``, ``X1 → X2``, …), so a story's order-0, order-1 and order-2
  questions cost one view pass per order;
- :func:`all_beliefs` answers every chain up to a given order by sharing each prefix's
  view among its extensions (``A + A² + … + Aᵏ`` view passes instead of one per chain and
  order level);
- stories from :func:`tomstats.stories.storyboard.generate_story` carry their events as
  integer codes, which :func:`encode_story` turns into updates without building
  :class:`~tomstats.stories.world.Event` objects.

The view rule is the reference's, step for step (same perception test, sightings listed
before the arrival in the same entity order, same initial knowledge), so the answers are
equal by construction; ``tests/test_stories_fast.py`` checks equality with the reference on
thousands of random stories for every chain up to order 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING

from tomstats.stories.world import Event, World, initial_state

if TYPE_CHECKING:
    from tomstats.stories.storyboard import Story

__all__ = ["Codebook", "CodedStory", "all_beliefs", "beliefs_along", "codebook", "encode",
           "encode_story", "wm_answer_fast"]

#: ``kind`` codes of an update tuple.
ENTER, OBJECT, SIGHTING = 0, 1, 2

Upd = tuple[int, int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class Codebook:
    """Integer codes of a world's entities and values.

    Parameters
    ----------
    entities : tuple of str
        Entity names by code: the agents (keys of ``world.start``, in order), then objects.
    values : tuple of str
        Value names by code: the locations, then the containers.
    n_agents : int
        Entities ``0 … n_agents-1`` are agents.
    where : tuple of int
        Location code of every value code (a location is its own location).
    common : bool
        Whether the initial state is common knowledge.
    """

    entities: tuple[str, ...]
    values: tuple[str, ...]
    n_agents: int
    where: tuple[int, ...]
    common: bool

    def entity(self, name: str) -> int:
        """Code of an entity; ``ValueError`` names an unknown one."""
        try:
            return self.entities.index(name)
        except ValueError:
            raise ValueError(f"{name!r} is neither an agent nor an object of the world") \
                from None

    def agent(self, name: str) -> int:
        """Code of an agent; ``ValueError`` names an unknown one."""
        i = self.entities.index(name) if name in self.entities else -1
        if not 0 <= i < self.n_agents:
            raise ValueError(f"{name!r} is not an agent of the world")
        return i

    def name(self, value: int) -> str | None:
        """Name of a value code (``-1`` → ``None``)."""
        return None if value < 0 else self.values[value]


def codebook(world: World) -> Codebook:
    """The codebook of ``world`` (built once per world and kept on it)."""
    book = world.__dict__.get("_codebook")
    if book is None:
        values = (*world.locations, *world.containers)
        vix = {v: i for i, v in enumerate(values)}
        where = tuple(vix[world.containers.get(v, v)] for v in values)
        book = Codebook(tuple(initial_state(world)), values, len(world.start), where,
                        world.initial_knowledge == "common")
        object.__setattr__(world, "_codebook", book)
    return book


@dataclass(frozen=True, slots=True)
class CodedStory:
    """A story as integer codes: codebook, initial values, updates and event times."""

    book: Codebook
    start: tuple[int, ...]
    updates: tuple[Upd, ...]
    times: tuple[int, ...]


def encode(world: World, events: Sequence[Event]) -> CodedStory:
    """Encode a story given as :class:`~tomstats.stories.world.Event` records."""
    book = codebook(world)
    eix = {e: i for i, e in enumerate(book.entities)}
    vix = {v: i for i, v in enumerate(book.values)}
    state = initial_state(world)
    start = tuple(vix[state[e]] for e in book.entities)
    ups: list[Upd] = []
    for e in events:
        if e.action == "enter":
            a, loc = eix[e.actor], vix[e.location]
            ups.append((a, loc, vix[e.source], loc, a, ENTER))
        else:
            p = vix[e.location]
            ups.append((eix[str(e.obj)], vix[str(e.container)], p, p, eix[e.actor], OBJECT))
    return CodedStory(book, start, tuple(ups), tuple(e.time for e in events))


def encode_story(story: Story) -> CodedStory:
    """Encode a generated story from its integer codes (no Event objects are built)."""
    codes = story.codes
    world = story.world
    book = codebook(world)
    if codes is None or book.entities != world.agents or book.values != world.locations:
        return encode(world, story.events)
    actors, dests, sources = codes
    start = tuple(book.values.index(world.start[a]) for a in world.agents)
    ups = tuple(zip(actors, dests, sources, dests, actors, [ENTER] * len(actors), strict=True))
    return CodedStory(book, start, ups, tuple(range(len(actors))))


def _known_start(book: Codebook, start: Sequence[int], x: int) -> list[int]:
    """The initial values as agent ``x`` knows them (reference: ``_known_start``)."""
    if book.common:
        return list(start)
    here, na, where = start[x], book.n_agents, book.where
    return [v if e == x or (here >= 0 and v >= 0 and (v if e < na else where[v]) == here)
            else -1 for e, v in enumerate(start)]


def _view(book: Codebook, start: Sequence[int], updates: Sequence[Upd],
          x: int) -> tuple[list[int], list[Upd]]:
    """The story (``start``, ``updates``) as agent ``x`` knows it (reference: ``view``)."""
    pos = list(start)
    mine: list[Upd] = []
    add = mine.append
    na = book.n_agents
    for u in updates:
        ent, val, va, vb, act, kind = u
        here = pos[x]
        if act == x or ent == x or here == va or here == vb:
            if kind == ENTER and ent == x:
                # sightings first, in entity order: the agents already in the place entered
                for e in range(na):
                    if e != x and pos[e] == val:
                        add((e, val, val, val, x, SIGHTING))
            add(u)
        pos[ent] = val
    return _known_start(book, start, x), mine


def _final(start: Sequence[int], updates: Sequence[Upd]) -> list[int]:
    pos = list(start)
    for u in updates:
        pos[u[0]] = u[1]
    return pos


def _answer(book: Codebook, target: int, value: int, as_location: bool) -> str | None:
    if value < 0:
        return None
    if as_location and target >= book.n_agents:
        value = book.where[value]
    return book.values[value]


def beliefs_along(coded: CodedStory, chain: Sequence[str], target: str, *,
                  as_location: bool = False) -> tuple[str | None, ...]:
    """Answers of every prefix of ``chain`` about ``target``, in one pass per level.

    Parameters
    ----------
    coded : CodedStory
        From :func:`encode` or :func:`encode_story`.
    chain : sequence of str
        ``(X1, …, Xk)``.
    target : str
        An agent or an object.
    as_location : bool
        For objects: the location of the believed container.

    Returns
    -------
    tuple of (str or None)
        ``k + 1`` answers: ``belief(W, (), T)``, ``belief(W, (X1,), T)``, …,
        ``belief(W, (X1, …, Xk), T)`` — equal to the reference tracker's.
    """
    book = coded.book
    xs = [book.agent(a) for a in chain]
    t = book.entity(target)
    start: Sequence[int] = coded.start
    updates: Sequence[Upd] = coded.updates
    out = [_answer(book, t, _final(start, updates)[t], as_location)]
    for x in xs:
        start, updates = _view(book, start, updates, x)
        out.append(_answer(book, t, _final(start, updates)[t], as_location))
    return tuple(out)


def all_beliefs(coded: CodedStory, max_order: int = 2, *,
                as_location: bool = False) -> dict[tuple[str, ...], dict[str, str | None]]:
    """Every chain's belief about every entity, for all chains of length ≤ ``max_order``.

    Each chain's view is computed once from its parent's view (depth-first), so the cost
    is one view pass per chain, ``A + A² + … + A^max_order`` passes in all.

    Returns
    -------
    dict
        ``{chain: {entity: answer}}``, chains as tuples of agent names (``()``: reality).
    """
    if not isinstance(max_order, int) or max_order < 0:
        raise ValueError(f"max_order must be a non-negative integer, got {max_order!r}")
    book = coded.book
    names = book.entities
    out: dict[tuple[str, ...], dict[str, str | None]] = {}

    def visit(chain: tuple[str, ...], start: Sequence[int], updates: Sequence[Upd]) -> None:
        final = _final(start, updates)
        out[chain] = {n: _answer(book, i, final[i], as_location) for i, n in enumerate(names)}
        if len(chain) < max_order:
            for x in range(book.n_agents):
                visit((*chain, names[x]), *_view(book, start, updates, x))

    visit((), coded.start, coded.updates)
    return out


def wm_answer_fast(coded: CodedStory, s1: str, s2: str, target: str) -> str | None:
    """:func:`tomstats.stories.questions.wm_answer` on codes (same definition, same answer)."""
    book = coded.book
    group = sorted({book.entity(s1), book.entity(s2), book.entity(target)})
    t = book.entity(target)
    g0, g1, g2 = (group * 3)[:3]  # the (up to three) distinct members
    pos = list(coded.start)
    met = -1
    for i, (ent, val, _va, _vb, _act, kind) in enumerate(coded.updates):
        if kind:  # only enter events move agents
            continue
        pos[ent] = val
        if (ent == g0 or ent == g1 or ent == g2) and pos[g0] == val and pos[g1] == val \
                and pos[g2] == val:
            if met >= 0:  # a second meeting: which one would the question mean?
                return None
            met = i
    if met < 0:
        return None
    times = coded.times
    when = times[met]
    for i, (ent, val, _va, _vb, _act, kind) in enumerate(coded.updates):
        if not kind and ent == t and times[i] > when:
            return book.values[val]
    return None


def chains(agents: Sequence[str], max_order: int) -> list[tuple[str, ...]]:
    """All chains of ``agents`` of length ``0 … max_order`` (repeats allowed)."""
    return [c for k in range(max_order + 1) for c in product(agents, repeat=k)]
