"""StorySim storyboards: scripted events, validation, and a random fill that respects them.

A storyboard ``D = (C, φ, G, E, n)`` (StorySim, section 3) names the characters ``C``, the
actions ``φ`` (here ``enter``), the directed location graph ``G`` (with the start location
of every character), the scripted events ``E`` and the story length ``n`` in events. Steps
are numbered ``0 … n-1``; each step is one event. Scripted events:

``move(actor, location, t)``
    the event at step ``t`` is ``actor`` entering ``location``;
``cross_paths(actors, location, t)``
    after step ``t`` all ``actors`` are in ``location``: the event at ``t`` is the arrival of
    the *last* actor listed, the others must already be there (the fill brings them);
``exclusive_random(actors, t, stop)``
    steps ``t … stop-1`` that are not scripted are random events by characters *other* than
    ``actors``, who stay where they are.

Every other step is a random event: a random character enters a random neighbouring
location. The fill looks ahead: a random event is drawn only if every pending scripted
constraint can still be met in the free steps left (checked per character and jointly,
earliest deadline first), so a valid storyboard never dead-ends.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from tomstats.stories.world import Event, World, distances, enter

__all__ = ["Scripted", "Story", "Storyboard", "cross_paths", "exclusive_random",
           "first_order_storyboard", "generate_story", "move", "second_order_storyboard",
           "validate_storyboard"]

KINDS = ("move", "cross_paths", "exclusive_random")


@dataclass(frozen=True)
class Scripted:
    """One scripted event of a storyboard (see the module docstring for the semantics)."""

    kind: str
    actors: tuple[str, ...]
    t: int
    location: str | None = None
    stop: int | None = None

    def describe(self) -> str:
        """Short human-readable form used in error messages."""
        who = ",".join(self.actors)
        if self.kind == "exclusive_random":
            return f"exclusive_random {{{who}}} t={self.t} stop={self.stop}"
        return f"{self.kind} {who} -> {self.location} t={self.t}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        d: dict[str, object] = {"name": self.kind, "actors": list(self.actors), "t": self.t}
        if self.location is not None:
            d["location"] = self.location
        if self.stop is not None:
            d["stop"] = self.stop
        return d


def move(actor: str, location: str, t: int) -> Scripted:
    """Scripted event: ``actor`` enters ``location`` at step ``t``."""
    return Scripted("move", (actor,), t, location)


def cross_paths(actors: Sequence[str], location: str, t: int) -> Scripted:
    """Scripted event: all ``actors`` are in ``location`` after step ``t`` (last one arrives)."""
    return Scripted("cross_paths", tuple(actors), t, location)


def exclusive_random(actors: Sequence[str], t: int, stop: int) -> Scripted:
    """Scripted window: steps ``t … stop-1`` are random events not involving ``actors``."""
    return Scripted("exclusive_random", tuple(actors), t, None, stop)


@dataclass(frozen=True)
class Storyboard:
    """``D = (C, φ, G, E, n)`` plus where everyone starts.

    Parameters
    ----------
    characters : tuple of str
    locations : tuple of str
    edges : tuple of (str, str)
        Directed location graph.
    events : tuple of Scripted
    n : int
        Story length in events.
    start : str
        Location every character starts in.
    actions : tuple of str
        ``φ``; only ``("enter",)`` is supported by StorySim-style storyboards.
    setting : str
        Name of the setting whose templates render the story.
    name : str
        Storyboard name (``"first_order"``, ``"second_order"``, ``"custom"``, …).
    roles : mapping str -> str
        Role names to characters (``{"S1": "Alice", "T": "Bob"}``).
    """

    characters: tuple[str, ...]
    locations: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    events: tuple[Scripted, ...]
    n: int
    start: str
    actions: tuple[str, ...] = ("enter",)
    setting: str = "rooms"
    name: str = "custom"
    roles: Mapping[str, str] = field(default_factory=dict)

    def world(self) -> World:
        """The world the storyboard's story happens in (everyone starts in ``start``)."""
        return World(tuple(self.characters), tuple(self.locations), tuple(self.edges),
                     {c: self.start for c in self.characters})

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (stored in item metadata)."""
        return {"name": self.name, "setting": self.setting, "n": self.n, "start": self.start,
                "characters": list(self.characters), "locations": list(self.locations),
                "edges": [list(e) for e in self.edges], "actions": list(self.actions),
                "events": [e.to_dict() for e in self.events], "roles": dict(self.roles)}


@dataclass(frozen=True)
class Story:
    """A generated story: its storyboard, world, events and seed."""

    storyboard: Storyboard
    world: World
    events: tuple[Event, ...]
    seed: int


@dataclass
class _Plan:
    """Validated schedule: scripted steps, exclusions and per-character requirements."""

    scripted: dict[int, tuple[str, str, int]]
    excluded: list[frozenset[str]]
    # character -> [(step after which it must be in targets, targets, event index)]
    needs: dict[str, list[tuple[int, frozenset[str], int]]]
    may_act: dict[str, list[int]]  # prefix sums of steps the character may use
    free: list[int]  # prefix sums of free (unscripted) steps
    dist: dict[str, dict[str, int]]


def _err(i: int, ev: Scripted, why: str) -> ValueError:
    return ValueError(f"storyboard event {i} ({ev.describe()}): {why}")


def _check_fields(sb: Storyboard) -> World:
    if not isinstance(sb.n, int) or isinstance(sb.n, bool) or sb.n < 1:
        raise ValueError(f"storyboard n (story length in events) must be a positive "
                         f"integer, got {sb.n!r}")
    if not sb.characters:
        raise ValueError("storyboard characters: at least one character is needed")
    unknown = [a for a in sb.actions if a != "enter"]
    if unknown:
        raise ValueError(f"storyboard actions: {unknown[0]!r} is not supported "
                         "(StorySim storyboards use 'enter')")
    if sb.start not in sb.locations:
        raise ValueError(f"storyboard start {sb.start!r} is not a location")
    return sb.world()


def _check_event(sb: Storyboard, world: World, i: int, ev: Scripted) -> None:
    if ev.kind not in KINDS:
        raise _err(i, ev, f"unknown kind {ev.kind!r} (expected one of {KINDS})")
    if not ev.actors:
        raise _err(i, ev, "no actors")
    for a in ev.actors:
        if a not in sb.characters:
            raise _err(i, ev, f"actor {a!r} is not a character")
    if len(set(ev.actors)) != len(ev.actors):
        raise _err(i, ev, "an actor is listed twice")
    last = sb.n if ev.kind == "exclusive_random" else sb.n - 1  # a window may be empty
    if not isinstance(ev.t, int) or isinstance(ev.t, bool) or not 0 <= ev.t <= last:
        raise _err(i, ev, f"t={ev.t!r} is outside the story (steps 0 … {sb.n - 1})")
    if ev.kind == "exclusive_random":
        if not isinstance(ev.stop, int) or ev.stop < ev.t:
            raise _err(i, ev, f"stop={ev.stop!r} is before the start t={ev.t}")
        if ev.stop > sb.n:
            raise _err(i, ev, f"stop={ev.stop} is after the end of the story (n={sb.n})")
        if ev.stop > ev.t and set(ev.actors) >= set(sb.characters):
            raise _err(i, ev, "it excludes every character, so no one can act in it")
        return
    if ev.kind == "move" and len(ev.actors) != 1:
        raise _err(i, ev, "a move has exactly one actor")
    if ev.location is None or not world.is_location(ev.location):
        raise _err(i, ev, f"location {ev.location!r} is not in the location graph")


def _schedule(sb: Storyboard) -> tuple[dict[int, tuple[str, str, int]], list[frozenset[str]]]:
    scripted: dict[int, tuple[str, str, int]] = {}
    excluded: list[set[str]] = [set() for _ in range(sb.n)]
    for i, ev in enumerate(sb.events):
        if ev.kind == "exclusive_random":
            for s in range(ev.t, int(ev.stop)):
                excluded[s].update(ev.actors)
            continue
        if ev.t in scripted:
            j = scripted[ev.t][2]
            raise _err(i, ev, f"step t={ev.t} is already taken by event {j} "
                              f"({sb.events[j].describe()}); one event per step")
        scripted[ev.t] = (ev.actors[-1], str(ev.location), i)
    for s, (actor, _loc, i) in scripted.items():
        if actor in excluded[s]:
            j = next(k for k, e in enumerate(sb.events) if e.kind == "exclusive_random"
                     and actor in e.actors and e.t <= s < int(e.stop))
            raise _err(i, sb.events[i], f"{actor} acts at t={s}, inside event {j} "
                                        f"({sb.events[j].describe()}) which excludes {actor}")
    return scripted, [frozenset(x) for x in excluded]


def _requirements(sb: Storyboard, world: World) -> dict[str, list[tuple[int, frozenset[str],
                                                                         int, str | None]]]:
    """Per character: (deadline step, allowed places, event index, place after the event)."""
    preds: dict[str, frozenset[str]] = {
        loc: frozenset(a for a in world.locations if world.has_edge(a, loc))
        for loc in world.locations}
    needs: dict[str, list[tuple[int, frozenset[str], int, str | None]]] = {
        c: [] for c in sb.characters}
    for i, ev in enumerate(sb.events):
        if ev.kind == "exclusive_random":
            continue
        loc = str(ev.location)
        for a in ev.actors[:-1]:
            needs[a].append((ev.t - 1, frozenset([loc]), i, loc))
        needs[ev.actors[-1]].append((ev.t - 1, preds[loc], i, loc))
    for lst in needs.values():
        lst.sort()
    return needs


def _prefix(flags: Sequence[bool]) -> list[int]:
    return list(accumulate(map(int, flags), initial=0))


def validate_storyboard(sb: Storyboard) -> _Plan:
    """Check ``sb`` and return its schedule; ``ValueError`` says which event and why.

    Checked: story length, characters, actions, locations, every scripted event's fields
    (known actors and locations, ``0 ≤ t < n``, ``t ≤ stop ≤ n``), one event per step, no
    scripted action by a character its own exclusive window freezes, and — per character,
    following its scripted events in time — that each place can be reached along the graph
    in the free steps the character may use (a scripted move along a missing edge fails
    here).
    """
    world = _check_fields(sb)
    for i, ev in enumerate(sb.events):
        _check_event(sb, world, i, ev)
    scripted, excluded = _schedule(sb)
    free = [s not in scripted for s in range(sb.n)]
    may_act = {c: _prefix([free[s] and c not in excluded[s] for s in range(sb.n)])
               for c in sb.characters}
    dist = distances(world)
    reqs = _requirements(sb, world)
    for c, lst in reqs.items():
        pos, since = sb.start, -1
        for deadline, targets, i, after in lst:
            ev = sb.events[i]
            if deadline < since:
                j = next(k for k, e in enumerate(sb.events) if e.kind != "exclusive_random"
                         and c in e.actors and e.t == since)
                raise _err(i, ev, f"{c} is also scripted by event {j} at t={since}")
            steps = may_act[c][deadline + 1] - may_act[c][since + 1] if deadline >= 0 else 0
            need = min((dist[pos].get(x, sb.n + 1) for x in targets), default=sb.n + 1)
            if need > sb.n:
                raise _err(i, ev, f"{c} is in {pos} and {after} cannot be reached from there "
                                  "in the location graph")
            if need > steps and steps == 0 and pos == after and ev.kind == "move":
                raise _err(i, ev, f"{c} is already in {after}")
            if need > steps:
                where = f"{c} is in {pos} at t={since}" if since >= 0 else f"{c} starts in {pos}"
                goal = "reach" if targets == {after} else "get next to"
                why = (f"there is no edge {pos} -> {after}" if steps == 0 and ev.kind == "move"
                       else f"it needs {need} step(s) to {goal} {after} but has only {steps} "
                       "free step(s) in which it may act")
                raise _err(i, ev, f"{where}; {why}")
            pos, since = str(after), sb.events[i].t
    return _Plan(scripted, list(excluded),
                 {c: [(d, tg, i) for d, tg, i, _ in lst] for c, lst in reqs.items()},
                 may_act, _prefix(free), dist)


def _feasible(plan: _Plan, state: Mapping[str, str], s: int, actor: str, dst: str,
              pending: Mapping[str, tuple[int, frozenset[str], int]]) -> bool:
    """Can every pending requirement still be met if ``actor`` enters ``dst`` at step ``s``?"""
    total: list[tuple[int, int]] = []
    for c, (deadline, targets, _i) in pending.items():
        pos = dst if c == actor else state[c]
        need = min(plan.dist[pos].get(x, 10**9) for x in targets)
        if need == 0:
            continue
        if need > plan.may_act[c][deadline + 1] - plan.may_act[c][s + 1]:
            return False
        total.append((deadline, need))
    total.sort()
    cum = 0
    for deadline, need in total:
        cum += need
        if cum > plan.free[deadline + 1] - plan.free[s + 1]:
            return False
    return True


def _pending(plan: _Plan, s: int) -> dict[str, tuple[int, frozenset[str], int]]:
    out = {}
    for c, lst in plan.needs.items():
        for req in lst:
            if req[0] >= s:
                out[c] = req
                break
    return out


def generate_story(sb: Storyboard, seed: int) -> Story:
    """Generate the ``n`` events of a storyboard (same seed, same story).

    Parameters
    ----------
    sb : Storyboard
        Validated first (:func:`validate_storyboard`); errors name the event.
    seed : int
        Seed of the random fill.

    Returns
    -------
    Story
    """
    plan = validate_storyboard(sb)
    world = sb.world()
    rng = random.Random(seed)
    state = {c: sb.start for c in sb.characters}
    events: list[Event] = []
    for s in range(sb.n):
        if s in plan.scripted:
            actor, loc, _i = plan.scripted[s]
            events.append(enter(world, state, s, actor, loc))
            continue
        events.append(_random_event(plan, world, state, s, rng))
    return Story(sb, world, tuple(events), seed)


def _random_event(plan: _Plan, world: World, state: dict[str, str], s: int,
                  rng: random.Random) -> Event:
    pending = _pending(plan, s)
    movers = [c for c in world.agents if c not in plan.excluded[s]]
    if movers:  # fast path: one uniform draw (character, then neighbour), usually feasible
        c = rng.choice(movers)
        options = world.neighbours(state[c])
        if options:
            dst = rng.choice(options)
            if _feasible(plan, state, s, c, dst, pending):
                return enter(world, state, s, c, dst)
    rng.shuffle(movers)
    for c in movers:
        options = list(world.neighbours(state[c]))
        rng.shuffle(options)
        for dst in options:
            if _feasible(plan, state, s, c, dst, pending):
                return enter(world, state, s, c, dst)
    blocking = ", ".join(f"event {i}" for _d, _t, i in pending.values()) or "none"
    raise ValueError(f"storyboard cannot be filled at step t={s}: no character can make a "
                     f"random move without making a scripted event impossible "
                     f"(pending: {blocking})")


def _pick_roles(rng: random.Random, characters: Sequence[str], k: int,
                what: str) -> list[str]:
    if len(characters) < k:
        raise ValueError(f"{what} storyboard needs {k} distinct characters, got "
                         f"{len(characters)} ({', '.join(characters) or 'none'})")
    return rng.sample(list(characters), k)


def _pick_places(world_edges: Sequence[tuple[str, str]], locations: Sequence[str], start: str,
                 rng: random.Random, first_from_start: bool) -> tuple[str, str, str]:
    """L1, L2, L3 with edges L1→L2→L3, all distinct (L1 a neighbour of ``start`` if asked)."""
    nb: dict[str, list[str]] = {loc: [] for loc in locations}
    for a, b in world_edges:
        nb[a].append(b)
    triples = [(l1, l2, l3) for l1 in (nb[start] if first_from_start else locations)
               for l2 in nb[l1] for l3 in nb[l2] if len({l1, l2, l3}) == 3]
    if not triples:
        raise ValueError("the location graph has no path L1 -> L2 -> L3 through three "
                         "distinct locations, which the ToM storyboards need")
    return rng.choice(sorted(triples))


def first_order_storyboard(characters: Sequence[str], locations: Sequence[str],
                           edges: Sequence[tuple[str, str]], start: str, *, n: int = 100,
                           mislead_distance: int = 10, cross_time: int = 10, seed: int = 0,
                           setting: str = "rooms") -> Storyboard:
    """StorySim's first-order storyboard (appendix A), roles and places drawn with ``seed``.

    ``S1`` and ``T`` cross paths in ``L1`` at ``cross_time``; ``T`` enters ``L2`` (seen by
    ``S1``); ``mislead_distance`` random events not involving them; ``T`` enters ``L3``
    (unseen by ``S1``); random events not involving them to the end. "Where does S1 think
    T is?" → ``L2``; reality → ``L3``; first common location → ``L1``.
    """
    rng = random.Random(seed)
    s1, t = _pick_roles(rng, characters, 2, "the first-order")
    l1, l2, l3 = _pick_places(edges, locations, start, rng, first_from_start=False)
    m = int(mislead_distance)
    if m < 0:
        raise ValueError(f"mislead_distance must be ≥ 0, got {mislead_distance!r}")
    c = int(cross_time)
    events = (cross_paths((s1, t), l1, c), move(t, l2, c + 1),
              exclusive_random((s1, t), c + 2, c + 2 + m), move(t, l3, c + 2 + m),
              exclusive_random((s1, t), c + 3 + m, max(n, c + 3 + m)))
    return Storyboard(tuple(characters), tuple(locations), tuple(edges), events, n, start,
                      setting=setting, name="first_order",
                      roles={"S1": s1, "T": t, "L1": l1, "L2": l2, "L3": l3})


def second_order_storyboard(characters: Sequence[str], locations: Sequence[str],
                            edges: Sequence[tuple[str, str]], start: str, *, n: int = 100,
                            mislead_distance: int = 30, cross_time: int = 10, seed: int = 0,
                            setting: str = "rooms") -> Storyboard:
    """StorySim's second-order storyboard (appendix A), roles and places drawn with ``seed``.

    ``S1``, ``S2`` and ``T`` cross paths in ``L1``; ``T`` enters ``L2`` and ``S2`` follows
    (both seen by ``S1``: they cross paths again in ``L2``); random events not involving
    the three; ``T`` enters ``L3`` (seen by ``S2`` only). The mislead distance counts the
    events between ``T`` entering ``L2`` and ``T`` entering ``L3`` (``S2``'s move included),
    so it is at least 1. "Where does S1 think S2 thinks T is?" → ``L2``.
    """
    rng = random.Random(seed)
    s1, s2, t = _pick_roles(rng, characters, 3, "the second-order")
    l1, l2, l3 = _pick_places(edges, locations, start, rng, first_from_start=False)
    m = int(mislead_distance)
    if m < 1:
        raise ValueError(f"mislead_distance must be ≥ 1 for the second-order storyboard "
                         f"(S2's move counts), got {mislead_distance!r}")
    c = int(cross_time)
    key = (s1, s2, t)
    events = (cross_paths(key, l1, c), move(t, l2, c + 1), cross_paths((t, s2), l2, c + 2),
              exclusive_random(key, c + 3, c + 2 + m), move(t, l3, c + 2 + m),
              exclusive_random(key, c + 3 + m, max(n, c + 3 + m)))
    return Storyboard(tuple(characters), tuple(locations), tuple(edges), events, n, start,
                      setting=setting, name="second_order",
                      roles={"S1": s1, "S2": s2, "T": t, "L1": l1, "L2": l2, "L3": l3})
