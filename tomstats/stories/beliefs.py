"""Perception and nested beliefs: the ground truth of every question.

Definitions (check the code below against them line by line):

**Updates.** A story is an initial state and a list of updates, each saying "entity ``E``
is now at ``v``" and where it can be seen:

- ``A`` enters ``L`` from ``S``: ``E = A``, ``v = L``, visible in ``S`` and ``L``;
- ``A`` moves object ``O`` into container ``C`` in location ``P``: ``E = O``, ``v = C``,
  visible in ``P``;
- a *sighting* (made by an agent entering ``L``): agent ``E`` (already in ``L``) is there,
  visible in ``L``.

**Perception.** Agent ``X`` perceives update ``u`` iff ``X`` is ``u``'s actor, or ``X`` is
``u``'s entity, or ``X`` is — just before ``u`` — in a location where ``u`` is visible. So a
departure is seen by those in the room left (they see where the agent goes), an arrival by
those already in the room entered, and an agent who enters a location sees every agent
already there (one sighting each; objects stay hidden in their containers).

**View.** ``view(W, X)`` is the story as ``X`` knows it: the updates of ``W`` that ``X``
perceives (judged with the positions that ``W`` itself implies), plus ``X``'s sightings
(listed just before ``X``'s arrival, so that in a nested view those seen also see ``X``
arrive), starting from the initial state as ``X`` knows it (all of it when the world's
``initial_knowledge`` is ``"common"``; only the entities in ``X``'s own location when it is
``"perceived"`` — the rest unknown).

**Belief.** For a chain of agents ``(X1, …, Xk)`` and a target ``T`` (agent or object)::

    belief(W, (), T)            = where T is after replaying W            (k = 0: reality)
    belief(W, (X1, …, Xk), T)   = belief(view(W, X1), (X2, …, Xk), T)

so "where does A think B thinks T is" is read off the story as B would know it if B knew
only what A knows. ``None`` means the chain has no belief (an unknown initial position under
``"perceived"`` knowledge that was never updated). Consequences (tested): an agent that
perceives every update has true beliefs; a chain whose first agent perceives everything
has the beliefs of the rest of the chain; an agent's belief about ``T`` is ``T``'s initial
place or a place it perceived ``T`` at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

from tomstats.stories.world import Event, World, initial_state

__all__ = ["Update", "belief", "last_perceived", "observers", "to_updates", "view",
           "well_defined"]


class Update(NamedTuple):
    """"``entity`` is now at ``value``", visible in the locations ``visible_in``."""

    time: int
    entity: str
    value: str
    visible_in: tuple[str, ...]
    actor: str
    kind: str  # "enter", "object" or "sighting"


State = dict[str, str | None]


def to_updates(events: Sequence[Event]) -> list[Update]:
    """Translate events into updates (the world as it really happened)."""
    out: list[Update] = []
    for e in events:
        if e.action == "enter":
            out.append(Update(e.time, e.actor, e.location, (e.source, e.location), e.actor,
                              "enter"))
        else:
            out.append(Update(e.time, str(e.obj), str(e.container), (e.location,), e.actor,
                              "object"))
    return out


def _where(world: World, entity: str, value: str | None) -> str | None:
    """Location of ``entity`` given its position ``value`` (a container for objects)."""
    if value is None:
        return None
    return world.containers.get(value, value) if entity in world.objects else value


def _known_start(world: World, start: Mapping[str, str | None], agent: str) -> State:
    """The initial state as ``agent`` knows it inside a world whose initial state is ``start``."""
    if world.initial_knowledge == "common":
        return dict(start)
    here = start.get(agent)
    return {e: (v if e == agent or (here is not None and _where(world, e, v) == here) else None)
            for e, v in start.items()}


def view(world: World, start: Mapping[str, str | None], updates: Sequence[Update],
         agent: str) -> tuple[State, list[Update]]:
    """The story (initial state, updates) as ``agent`` knows it; see the module docstring."""
    pos: State = dict(start)
    mine: list[Update] = []
    for u in updates:
        here = pos.get(agent)
        if u.actor == agent or u.entity == agent or here in u.visible_in:
            if u.kind == "enter" and u.entity == agent:
                # the sightings come first: whoever the agent sees on arrival is already
                # there, and so (in the next view) sees the agent arrive
                mine.extend(_sightings(world, pos, agent, u.value, u.time))
            mine.append(u)
        pos[u.entity] = u.value
    return _known_start(world, start, agent), mine


def _sightings(world: World, pos: State, agent: str, loc: str, time: int) -> list[Update]:
    """What ``agent`` sees on entering ``loc``: every other agent placed there.

    Objects are not seen on entry: they sit inside containers (the marble in Sally's
    basket); an agent learns where an object is only by seeing it moved.
    """
    return [Update(time, e, v, (loc,), agent, "sighting") for e, v in pos.items()
            if e != agent and v == loc and e in world.start]


def _final(start: Mapping[str, str | None], updates: Sequence[Update]) -> State:
    pos: State = dict(start)
    for u in updates:
        pos[u.entity] = u.value
    return pos


def _check_query(world: World, chain: Sequence[str], target: str) -> None:
    for a in chain:
        if a not in world.start:
            raise ValueError(f"chain {tuple(chain)!r}: {a!r} is not an agent of the world")
    if target not in world.start and target not in world.objects:
        raise ValueError(f"target {target!r} is neither an agent nor an object of the world")


def _nested(world: World, events: Sequence[Event],
            chain: Sequence[str]) -> tuple[State, list[Update]]:
    start: State = dict(initial_state(world))
    updates = to_updates(events)
    for agent in chain:
        start, updates = view(world, start, updates, agent)
    return start, updates


def belief(world: World, events: Sequence[Event], chain: Sequence[str], target: str,
           *, as_location: bool = False) -> str | None:
    """Where the chain ``X1 → … → Xk`` believes ``target`` is (``k = 0``: where it is).

    Parameters
    ----------
    world : World
    events : sequence of Event
        The story, in order.
    chain : sequence of str
        ``()`` for reality, ``("A",)`` for "where does A think T is", ``("A", "B")`` for
        "where does A think B thinks T is", and so on to any depth.
    target : str
        An agent or an object.
    as_location : bool
        For objects: return the location of the believed container instead of the container.

    Returns
    -------
    str or None
        A location (agents), a container (objects) or ``None`` if the chain has no belief.
    """
    _check_query(world, chain, target)
    start, updates = _nested(world, events, chain)
    value = _final(start, updates).get(target)
    return _where(world, target, value) if as_location else value


def last_perceived(world: World, events: Sequence[Event], chain: Sequence[str],
                   target: str) -> int | None:
    """Time of the last update about ``target`` in the chain's view (``None``: never)."""
    _check_query(world, chain, target)
    _, updates = _nested(world, events, chain)
    times = [u.time for u in updates if u.entity == target]
    return times[-1] if times else None


def observers(world: World, events: Sequence[Event]) -> list[frozenset[str]]:
    """For each event, the agents that perceive it (sightings aside)."""
    pos = initial_state(world)
    out: list[frozenset[str]] = []
    for u in to_updates(events):
        out.append(frozenset(a for a in world.agents
                             if a == u.actor or a == u.entity or pos[a] in u.visible_in))
        pos[u.entity] = u.value
    return out


def _absence_seen(world: World, start: Mapping[str, str | None], updates: Sequence[Update],
                  agent: str, target: str) -> bool:
    """Whether ``agent`` stood in the place it believes ``target`` is while ``target`` was not.

    Judged inside the world (``start``, ``updates``): after ``agent``'s last update about
    ``target``, is ``agent`` ever in the believed place while ``target`` is elsewhere?
    """
    mine_start, mine = view(world, start, updates, agent)
    believed = _final(mine_start, mine).get(target)
    times = [u.time for u in mine if u.entity == target]
    since = times[-1] if times else -1
    pos: State = dict(start)
    if since < 0 and pos.get(agent) == believed != pos.get(target):
        return True
    for u in updates:
        pos[u.entity] = u.value
        if u.time >= since and pos.get(agent) == believed and pos.get(target) != believed:
            return True
    return False


def well_defined(world: World, events: Sequence[Event], chain: Sequence[str],
                 target: str) -> bool:
    """Whether the chain's belief about an agent ``target`` is free of seen absences.

    Beliefs here are "last seen" places, and no one infers where someone is *not*: if
    ``A`` walks into the room where it last saw ``T`` and ``T`` has left, the tracker keeps
    ``A``'s old belief, while a reader may say "A knows T is not there". Such questions
    are ambiguous. This returns ``False`` when, at any level of the chain, the agent stood
    in the place it believes ``target`` is in while ``target`` was elsewhere (after its
    last update about ``target``), or when the chain has no belief. Objects are hidden in
    containers, so questions about objects are never ambiguous in this way.
    """
    _check_query(world, chain, target)
    start: State = dict(initial_state(world))
    updates = to_updates(events)
    for agent in chain:
        if target in world.start and _absence_seen(world, start, updates, agent, target):
            return False
        start, updates = view(world, start, updates, agent)
    return _final(start, updates).get(target) is not None


def simpler_chains(chain: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The simpler questions about an order-``k`` question's target, labelled.

    For the chain ``(A_1, …, A_k)`` these are reality (label ``"reality"``, the empty chain)
    and every proper non-empty subsequence ``(A_{i_1}, …, A_{i_r})``, ``i_1 < … < i_r``,
    ``r < k``, labelled ``"S{i_1}…S{i_r}"``: for order 2, ``"S1"`` (the first agent's own
    belief) and ``"S2"`` (the second's); for order 3 also ``"S3"``, ``"S1S2"``, ``"S1S3"``,
    ``"S2S3"``. An order-``k`` item whose gold answer equals one of these can be answered by
    the simpler question instead.
    """
    k = len(chain)
    out: dict[str, tuple[str, ...]] = {"reality": ()}
    for r in range(1, k):
        for idx in combinations(range(k), r):
            out["".join(f"S{i + 1}" for i in idx)] = tuple(chain[i] for i in idx)
    return out
