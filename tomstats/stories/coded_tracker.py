"""The coded belief tracker: ground truth of :mod:`tomstats.stories.beliefs` on integer codes,
in one pass over a story.

:func:`tomstats.stories.beliefs.belief` is the *reference*: written to be checked line by
line against the definitions (views of views of the update list), it rebuilds the nested
view from scratch for every question. This module computes the same thing faster:

- entities (agents first, in the order of ``world.start``, then objects) and values
  (locations, then containers) are small integers, ``None`` is ``-1``;
- an update is a plain tuple ``(entity, value, vis_a, vis_b, actor, kind)`` (``kind`` 0 =
  enter, 1 = object move, 2 = sighting; ``vis_a``/``vis_b`` are the one or two locations it
  is visible in);
- :func:`beliefs_along` walks a chain ``X1 → … → Xk`` once and returns the answers of every
  prefix (reality, ``X1``, ``X1 → X2``, …), one view pass per order; for a chain of two
  agents in a story of ``enter`` events (every generated story) the order-0, order-1 and
  order-2 answers come from a single pass over the events, both views merged;
- :func:`all_beliefs` answers every chain up to a given order by sharing each prefix's
  view among its extensions (``A + A² + … + Aᵏ`` view passes instead of one per chain and
  order level);
- stories from :func:`tomstats.stories.storyboard.generate_story` carry their events as
  integer codes, which :func:`encode_story` keeps as the story's *moves* (who entered
  where, from where) without building :class:`~tomstats.stories.world.Event` objects or
  update tuples (built only if asked for).

The view rule is the reference's, step for step (same perception test, sightings listed
before the arrival in the same entity order, same initial knowledge), so the answers are
equal by construction; ``tests/stories/test_coded_tracker.py`` checks equality with the
reference on thousands of random stories for every chain up to order 4, and the merged pass
against the reference and against the view-by-view passes.
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
    start : tuple of int
        The world's initial value of every entity (its initial state, coded).
    """

    entities: tuple[str, ...]
    values: tuple[str, ...]
    n_agents: int
    where: tuple[int, ...]
    common: bool
    start: tuple[int, ...]

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
        state = initial_state(world)
        book = Codebook(tuple(state), values, len(world.start), where,
                        world.initial_knowledge == "common",
                        tuple(vix[v] for v in state.values()))
        object.__setattr__(world, "_codebook", book)
    return book


# A story of ``enter`` events at times 0, 1, 2, …: (actors, places entered, places left).
Moves = tuple[Sequence[int], Sequence[int], Sequence[int]]


class CodedStory:
    """A story as integer codes: codebook, initial values, updates and event times.

    Parameters
    ----------
    book : Codebook
    start : tuple of int
        Initial value of every entity.
    updates : tuple of Upd, optional
        One update per event.
    times : tuple of int, optional
        The time of every event.
    moves : (actors, places, sources), optional
        A story made of ``enter`` events at times ``0, 1, 2, …`` (every generated story)
        as three lists of codes: who moved, the place entered, the place left. ``updates``
        and ``times`` are then built from it on first access; :func:`beliefs_along` and
        :func:`wm_answer_fast` read it directly.

    Two coded stories are equal when their codebooks, initial values, updates and times
    are.
    """

    __slots__ = ("_book", "_moves", "_start", "_times", "_updates")

    def __init__(self, book: Codebook, start: tuple[int, ...],
                 updates: tuple[Upd, ...] | None = None, times: tuple[int, ...] | None = None,
                 *, moves: Moves | None = None) -> None:
        if moves is None and (updates is None or times is None):
            raise ValueError("a CodedStory needs its updates and times, or its moves")
        self._book = book
        self._start = start
        self._updates = updates
        self._times = times
        self._moves = moves

    @property
    def book(self) -> Codebook:
        """The codebook of the story's world."""
        return self._book

    @property
    def start(self) -> tuple[int, ...]:
        """Initial value of every entity."""
        return self._start

    @property
    def moves(self) -> Moves | None:
        """``(actors, places, sources)`` for a story of ``enter`` events only, else ``None``."""
        return self._moves

    @property
    def updates(self) -> tuple[Upd, ...]:
        """The updates, one per event (built from the moves on first access)."""
        if self._updates is None:
            actors, places, sources = self._moves  # type: ignore[misc]
            self._updates = tuple(zip(actors, places, sources, places, actors,
                                      [ENTER] * len(actors), strict=True))
        return self._updates

    @property
    def times(self) -> tuple[int, ...]:
        """The time of every event (``0, 1, 2, …`` for moves)."""
        if self._times is None:
            self._times = tuple(range(len(self._moves[0])))  # type: ignore[index]
        return self._times

    def _key(self) -> tuple[object, ...]:
        return self.book, self.start, self.updates, self.times

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CodedStory):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"CodedStory(book={self.book!r}, start={self.start!r}, "
                f"updates={self.updates!r}, times={self.times!r})")


def encode(world: World, events: Sequence[Event]) -> CodedStory:
    """Encode a story given as :class:`~tomstats.stories.world.Event` records.

    A story of ``enter`` events at times ``0, 1, 2, …`` also gets its ``moves``.
    """
    book = codebook(world)
    eix = {e: i for i, e in enumerate(book.entities)}
    vix = {v: i for i, v in enumerate(book.values)}
    ups: list[Upd] = []
    for e in events:
        if e.action == "enter":
            a, loc = eix[e.actor], vix[e.location]
            ups.append((a, loc, vix[e.source], loc, a, ENTER))
        else:
            p = vix[e.location]
            ups.append((eix[str(e.obj)], vix[str(e.container)], p, p, eix[e.actor], OBJECT))
    times = tuple(e.time for e in events)
    moves = None
    if times == tuple(range(len(times))) and all(u[5] == ENTER for u in ups):
        moves = ([u[0] for u in ups], [u[1] for u in ups], [u[2] for u in ups])
    return CodedStory(book, book.start, tuple(ups), times, moves=moves)


def encode_story(story: Story) -> CodedStory:
    """Encode a generated story from its integer codes (no Event objects are built)."""
    codes = story.codes
    world = story.world
    book = codebook(world)
    if codes is None or book.entities != world.agents or book.values != world.locations:
        return encode(world, story.events)
    return CodedStory(book, book.start, moves=codes)


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


def _two_views(book: Codebook, start: Sequence[int], moves: Moves, x1: int,
               x2: int) -> tuple[list[int], list[int], list[int]]:
    """Final values in reality, in ``x1``'s view and in ``x2``'s view of it: one pass.

    The same as ``_final`` of ``start, updates``, of ``_view(…, x1)`` and of
    ``_view(_view(…, x1), x2)``, for a story of ``enter`` events given as its moves. Each
    move is judged by ``x1`` (with reality's positions just before it, as in ``_view``) and
    then applied to reality. What ``x1`` perceives — its sightings first, then the move —
    is, in that order, judged by ``x2`` with the positions of ``x1``'s world at that moment
    and then applied to ``x1``'s world; what ``x2`` perceives there (its own sightings
    first) is applied to ``x2``'s world. That is the order in which the second ``_view``
    would meet them on the first one's output, so only the number of passes changes.
    """
    na = book.n_agents
    p0 = list(start)
    p1 = _known_start(book, start, x1)
    p2 = _known_start(book, p1, x2)
    for a, dst, src in zip(*moves, strict=True):  # ``a`` enters ``dst`` from ``src``
        here = p0[x1]
        if a == x1 or here == src or here == dst:  # x1 perceives the move
            if a == x1:  # x1's sightings (each judged by x2 before it is applied)
                for e in range(na):
                    if e != x1 and p0[e] == dst:
                        if x1 == x2 or e == x2 or p1[x2] == dst:
                            p2[e] = dst
                        p1[e] = dst
            here = p1[x2]
            if a == x2 or here == src or here == dst:  # x2 perceives it in x1's world
                if a == x2:  # x2's sightings in x1's world
                    for e in range(na):
                        if e != x2 and p1[e] == dst:
                            p2[e] = dst
                p2[a] = dst
            p1[a] = dst
        p0[a] = dst
    return p0, p1, p2


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

    A chain of two agents in a story with ``moves`` takes a single pass for all three
    answers.

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
    moves = coded.moves
    if len(xs) == 2 and moves is not None:  # orders 0, 1 and 2 in one pass
        return tuple(_answer(book, t, final[t], as_location)
                     for final in _two_views(book, coded.start, moves, xs[0], xs[1]))
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
    group = {book.entity(s1), book.entity(s2), book.entity(target)}
    t = book.entity(target)
    member = [e in group for e in range(len(book.entities))]
    g0, g1, g2 = (sorted(group) * 3)[:3]  # the (up to three) distinct members
    moves = coded.moves
    if moves is not None:  # enter events at times 0, 1, 2, …
        actors, places = moves[0], moves[1]
        times: Sequence[int] = range(len(actors))
    else:
        enters = [(when, u) for when, u in zip(coded.times, coded.updates, strict=True)
                  if u[5] == ENTER]  # only enter events move agents
        times = [when for when, _u in enters]
        actors, places = [u[0] for _w, u in enters], [u[1] for _w, u in enters]
    pos = list(coded.start)
    met: int | None = None  # time of the meeting
    for when, a, place in zip(times, actors, places, strict=True):
        if not member[a]:  # only the members' places matter
            continue
        pos[a] = place
        if pos[g0] == place and pos[g1] == place and pos[g2] == place:
            if met is not None:  # a second meeting: which one would the question mean?
                return None
            met = when
    if met is None:
        return None
    for when, a, place in zip(times, actors, places, strict=True):
        if a == t and when > met:
            return book.values[place]
    return None


def chains(agents: Sequence[str], max_order: int) -> list[tuple[str, ...]]:
    """All chains of ``agents`` of length ``0 … max_order`` (repeats allowed)."""
    return [c for k in range(max_order + 1) for c in product(agents, repeat=k)]
