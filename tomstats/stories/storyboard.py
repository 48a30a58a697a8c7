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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter

from tomstats._validate import check_type
from tomstats.stories.world import Event, World, distances, enter

__all__ = ["Scripted", "Story", "Storyboard", "cross_paths", "exclusive_random",
           "first_order_storyboard", "generate_story", "generate_story_reference", "move",
           "second_order_storyboard", "validate_storyboard"]

KINDS = ("move", "cross_paths", "exclusive_random")


@lru_cache(maxsize=256)
def _world(characters: tuple[str, ...], locations: tuple[str, ...],
           edges: tuple[tuple[str, str], ...], start: str) -> World:
    return World(characters, locations, edges, {c: start for c in characters})


@dataclass(frozen=True)
class _Graph:
    """A world's location graph and agents as integer codes (built once per world).

    Locations are indices into ``world.locations``, agents indices into ``world.agents``.
    Everything here is data of the world (the setting and the cast), not of a storyboard.
    """

    index: dict[str, int]
    agent_index: dict[str, int]
    nbr: tuple[tuple[int, ...], ...]  # neighbours, in ``world.neighbours`` order
    nbr_bits: tuple[int, ...]  # len(nbr[i]).bit_length(), for ``random``'s draws
    # ``nbr[i]`` padded with -1 to ``2 ** nbr_bits[i]`` entries: ``pad[getrandbits(b)]`` is
    # a neighbour, or -1 where ``random``'s rejection loop draws again
    nbr_pad: tuple[tuple[int, ...], ...]
    nbr_sets: tuple[frozenset[int], ...]
    dist: dict[str, dict[str, int]]  # as :func:`distances`
    dmat: tuple[tuple[int, ...], ...]  # shortest steps, ``_FAR`` when unreachable
    preds: dict[str, frozenset[str]]  # locations with an edge into each location
    only: dict[str, frozenset[str]]  # ``frozenset({loc})`` for each location
    # steps needed from each place to reach one of a set of places (filled on demand)
    rows: dict[frozenset[str], tuple[int, ...]] = field(default_factory=dict)
    # excluded characters -> (codes of the agents that may act, the same padded with -1
    # to a power of two, its bit length) (filled on demand)
    movers: dict[frozenset[str], tuple[tuple[int, ...], tuple[int, ...], int]] = field(
        default_factory=dict)


_FAR = 10**9


def _padded(codes: tuple[int, ...]) -> tuple[int, ...]:
    """``codes`` padded with -1 to ``2 ** len(codes).bit_length()`` entries."""
    return codes + (-1,) * ((1 << len(codes).bit_length()) - len(codes))


def _graph(world: World) -> _Graph:
    """The graph of ``world`` as codes (built once per world and kept on it)."""
    g = world.__dict__.get("_graph")
    if g is None:
        locs = world.locations
        ix = {loc: i for i, loc in enumerate(locs)}
        nbr = tuple(tuple(ix[b] for b in world.neighbours(a)) for a in locs)
        dist = distances(world)
        preds = {loc: frozenset(a for a in locs if world.has_edge(a, loc)) for loc in locs}
        g = _Graph(ix, {c: i for i, c in enumerate(world.agents)}, nbr,
                   tuple(len(x).bit_length() for x in nbr), tuple(map(_padded, nbr)),
                   tuple(frozenset(x) for x in nbr), dist,
                   tuple(tuple(dist[a].get(b, _FAR) for b in locs) for a in locs), preds,
                   {loc: frozenset((loc,)) for loc in locs})
        object.__setattr__(world, "_graph", g)
    return g


def _row(g: _Graph, targets: frozenset[str]) -> tuple[int, ...]:
    """Steps needed from each location to reach one of ``targets`` (``_FAR``: never)."""
    row = g.rows.get(targets)
    if row is None:
        cols = [g.index[x] for x in targets]
        row = g.rows[targets] = tuple(min((r[x] for x in cols), default=_FAR)
                                      for r in g.dmat)
    return row


def _movers(g: _Graph, agents: tuple[str, ...], excluded: frozenset[str]
            ) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The agents that may act when ``excluded`` may not: codes, padded codes, bit length."""
    m = g.movers.get(excluded)
    if m is None:
        codes = tuple(i for i, c in enumerate(agents) if c not in excluded)
        m = g.movers[excluded] = (codes, _padded(codes), len(codes).bit_length())
    return m


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
        """The world the storyboard's story happens in (everyone starts in ``start``).

        Storyboards with the same cast, graph and start share one (immutable) world; a
        storyboard remembers its world after the first call.
        """
        world = self.__dict__.get("_world")
        if world is None:
            key = (tuple(self.characters), tuple(self.locations),
                   tuple(map(tuple, self.edges)), self.start)
            try:
                world = _world(*key)
            except TypeError:  # unhashable names: build it without the cache
                world = World(key[0], key[1], key[2], {c: self.start for c in key[0]})
            object.__setattr__(self, "_world", world)
        return world

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (stored in item metadata)."""
        return {"name": self.name, "setting": self.setting, "n": self.n, "start": self.start,
                "characters": list(self.characters), "locations": list(self.locations),
                "edges": [list(e) for e in self.edges], "actions": list(self.actions),
                "events": [e.to_dict() for e in self.events], "roles": dict(self.roles)}


class Story:
    """A generated story: its storyboard, world, events and seed.

    Parameters
    ----------
    storyboard : Storyboard
    world : World
    events : tuple of Event or None
        The events; ``None`` when ``codes`` is given (they are then built on first access).
    seed : int
    codes : (actors, locations, sources) or None
        The events as integer codes (indices into ``world.agents`` and
        ``world.locations``), as :func:`generate_story` produces them; the fast ground
        truth (:func:`tomstats.stories.coded_tracker.encode_story`) reads these directly.
    """

    __slots__ = ("_codes", "_events", "_seed", "_storyboard", "_world")

    def __init__(self, storyboard: Storyboard, world: World, events: Sequence[Event] | None,
                 seed: int, *, codes: tuple[list[int], list[int], list[int]] | None = None
                 ) -> None:
        if events is None and codes is None:
            raise ValueError("a Story needs its events or their codes")
        self._storyboard = storyboard
        self._world = world
        self._events = None if events is None else tuple(events)
        self._seed = seed
        self._codes = codes

    @property
    def storyboard(self) -> Storyboard:
        """The storyboard the story was generated from."""
        return self._storyboard

    @property
    def world(self) -> World:
        """The world the story happens in."""
        return self._world

    @property
    def seed(self) -> int:
        """Seed of the random fill."""
        return self._seed

    @property
    def codes(self) -> tuple[list[int], list[int], list[int]] | None:
        """The events as integer codes ``(actors, locations, sources)``, if known."""
        return self._codes

    @property
    def events(self) -> tuple[Event, ...]:
        """The events, in order (built from the codes on first access)."""
        if self._events is None:
            agents, locs = self._world.agents, self._world.locations
            actors, dests, sources = self._codes  # type: ignore[misc]
            self._events = tuple(
                Event(t, "enter", agents[a], locs[d], locs[r])
                for t, (a, d, r) in enumerate(zip(actors, dests, sources, strict=True)))
        return self._events

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Story):
            return NotImplemented
        return (self.storyboard, self.world, self.seed, self.events) == \
            (other.storyboard, other.world, other.seed, other.events)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Story(storyboard={self.storyboard!r}, world={self.world!r}, "
                f"events={self.events!r}, seed={self.seed!r})")


@dataclass
class _Plan:
    """Validated schedule: scripted steps, exclusions and per-character requirements."""

    scripted: dict[int, tuple[str, str, int]]
    excluded: list[frozenset[str]]
    # character -> [(step after which it must be in targets, targets, event index)]
    needs: dict[str, list[tuple[int, frozenset[str], int]]]
    # prefix sums of the steps a character may use (characters with requirements)
    may_act: dict[str, list[int]]
    free: list[int]  # prefix sums of free (unscripted) steps
    dist: dict[str, dict[str, int]]
    # (lo, hi, excluded): steps lo … hi-1 share one excluded set
    stretches: list[tuple[int, int, frozenset[str]]] = field(default_factory=list)


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
        # the actors are distinct characters (checked above), and so are the characters
        # (``World`` checks): the window freezes everyone iff it names as many
        if ev.stop > ev.t and len(ev.actors) == len(sb.characters):
            raise _err(i, ev, "it excludes every character, so no one can act in it")
        return
    if ev.kind == "move" and len(ev.actors) != 1:
        raise _err(i, ev, "a move has exactly one actor")
    if ev.location is None or not world.is_location(ev.location):
        raise _err(i, ev, f"location {ev.location!r} is not in the location graph")


def _schedule(sb: Storyboard) -> tuple[dict[int, tuple[str, str, int]], list[frozenset[str]],
                                       list[tuple[int, int, frozenset[str]]]]:
    scripted: dict[int, tuple[str, str, int]] = {}
    windows: list[tuple[int, int, frozenset[str]]] = []
    cuts = {0, sb.n}
    for i, ev in enumerate(sb.events):
        if ev.kind == "exclusive_random":
            stop = int(ev.stop)
            windows.append((ev.t, stop, frozenset(ev.actors)))
            cuts.add(ev.t)
            cuts.add(stop)
            continue
        if ev.t in scripted:
            j = scripted[ev.t][2]
            raise _err(i, ev, f"step t={ev.t} is already taken by event {j} "
                              f"({sb.events[j].describe()}); one event per step")
        scripted[ev.t] = (ev.actors[-1], str(ev.location), i)
    # the excluded set is constant between window boundaries: one frozenset per stretch
    points = sorted(cuts)
    excluded: list[frozenset[str]] = []
    stretches: list[tuple[int, int, frozenset[str]]] = []
    nobody: frozenset[str] = frozenset()
    for lo, hi in zip(points, points[1:], strict=False):
        here = nobody
        for t, stop, actors in windows:
            if t <= lo < stop:
                here = here | actors if here else actors
        excluded += [here] * (hi - lo)
        stretches.append((lo, hi, here))
    for s, (actor, _loc, i) in scripted.items():
        if actor in excluded[s]:
            j = next(k for k, e in enumerate(sb.events) if e.kind == "exclusive_random"
                     and actor in e.actors and e.t <= s < int(e.stop))
            raise _err(i, sb.events[i], f"{actor} acts at t={s}, inside event {j} "
                                        f"({sb.events[j].describe()}) which excludes {actor}")
    return scripted, excluded, stretches


def _requirements(sb: Storyboard, g: _Graph) -> dict[str, list[tuple[int, frozenset[str], int]]]:
    """Per character, in time order: (deadline step, allowed places, event index).

    The character must be in one of the allowed places after the deadline step; event
    ``i`` then leaves it in ``sb.events[i].location``.
    """
    needs: dict[str, list[tuple[int, frozenset[str], int]]] = {c: [] for c in sb.characters}
    for i, ev in enumerate(sb.events):
        if ev.kind == "exclusive_random":
            continue
        loc = str(ev.location)
        deadline = ev.t - 1
        for a in ev.actors[:-1]:  # they must already be there
            needs[a].append((deadline, g.only[loc], i))
        needs[ev.actors[-1]].append((deadline, g.preds[loc], i))  # next to it, to step in
    for lst in needs.values():
        lst.sort()
    return needs


def _free_prefix(n: int, scripted: Mapping[int, object]) -> list[int]:
    """``out[s]`` = number of free (unscripted) steps among ``0 … s-1``; ``s = 0 … n``."""
    out = [0]
    done = 0
    for t in sorted(scripted):  # free steps between scripted ones count up by one
        out.extend(range(out[-1] + 1, out[-1] + 1 + t - done))
        out.append(out[-1])
        done = t + 1
    out.extend(range(out[-1] + 1, out[-1] + 1 + n - done))
    return out


def _may_act(c: str, free: list[int], stretches: Sequence[tuple[int, int, frozenset[str]]]
             ) -> list[int]:
    """Prefix sums of the free steps in which ``c`` may act (not in an excluding window)."""
    out = [0]
    for lo, hi, excluded in stretches:
        if c in excluded:
            out += [out[-1]] * (hi - lo)
        elif out[-1] == free[lo]:  # no step lost yet: the free steps' own prefix sums
            out += free[lo + 1:hi + 1]
        else:
            base = out[-1] - free[lo]
            out += [x + base for x in free[lo + 1:hi + 1]]
    return out


def validate_storyboard(sb: Storyboard) -> _Plan:
    """Check ``sb`` and return its schedule; ``ValueError`` says which event and why.

    Checked: story length, characters, actions, locations, every scripted event's fields
    (known actors and locations, ``0 ≤ t < n``, ``t ≤ stop ≤ n``), one event per step, no
    scripted action by a character its own exclusive window freezes, and — per character,
    following its scripted events in time — that each place can be reached along the graph
    in the free steps the character may use (a scripted move along a missing edge fails
    here). Anything but a :class:`Storyboard` is a ``TypeError`` naming ``sb``.
    """
    check_type(sb, Storyboard, "sb", "a tomstats.stories.Storyboard")
    world = _check_fields(sb)
    for i, ev in enumerate(sb.events):
        _check_event(sb, world, i, ev)
    scripted, excluded, stretches = _schedule(sb)
    free = _free_prefix(sb.n, scripted)
    g = _graph(world)
    reqs = _requirements(sb, g)
    # only characters with scripted requirements are ever asked how many steps they have;
    # characters frozen in the same stretches share one (read-only) list
    may_act: dict[str, list[int]] = {}
    shared: dict[tuple[bool, ...], list[int]] = {}
    for c, lst in reqs.items():
        if lst:
            frozen = tuple(c in ex for _lo, _hi, ex in stretches)
            if frozen not in shared:
                shared[frozen] = _may_act(c, free, stretches)
            may_act[c] = shared[frozen]
    locs, n = world.locations, sb.n
    for c, lst in reqs.items():
        if not lst:
            continue
        mac = may_act[c]
        pos, since = g.index[sb.start], -1
        for deadline, targets, i in lst:
            ev = sb.events[i]
            after = str(ev.location)
            if deadline < since:
                j = next(k for k, e in enumerate(sb.events) if e.kind != "exclusive_random"
                         and c in e.actors and e.t == since)
                raise _err(i, ev, f"{c} is also scripted by event {j} at t={since}")
            steps = mac[deadline + 1] - mac[since + 1] if deadline >= 0 else 0
            need = _row(g, targets)[pos]
            if need > n:
                raise _err(i, ev, f"{c} is in {locs[pos]} and {after} cannot be reached from "
                                  "there in the location graph")
            if need > steps and steps == 0 and locs[pos] == after and ev.kind == "move":
                raise _err(i, ev, f"{c} is already in {after}")
            if need > steps:
                where = (f"{c} is in {locs[pos]} at t={since}" if since >= 0
                         else f"{c} starts in {locs[pos]}")
                goal = "reach" if targets == {after} else "get next to"
                why = (f"there is no edge {locs[pos]} -> {after}"
                       if steps == 0 and ev.kind == "move"
                       else f"it needs {need} step(s) to {goal} {after} but has only {steps} "
                       "free step(s) in which it may act")
                raise _err(i, ev, f"{where}; {why}")
            pos, since = g.index[after], ev.t
    return _Plan(scripted, excluded, reqs, may_act, free, g.dist, stretches)


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

    The fill runs on integer codes and draws exactly the random numbers that the readable
    reference fill (:func:`generate_story_reference`) draws, so both give the same story
    for the same seed (tested); the story's events are built on first access.

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
    codes = _fill(plan, world, sb.start, random.Random(seed))
    return Story(sb, world, None, seed, codes=codes)


def generate_story_reference(sb: Storyboard, seed: int) -> Story:
    """The readable fill, one :class:`Event` at a time (reference for :func:`generate_story`).

    At each free step ``s``: draw a character allowed to act, then one of its neighbouring
    places; keep the move if every pending scripted requirement can still be met
    (:func:`_feasible`), else try every (character, place) in random order.
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


# A pending requirement on codes: (character, steps needed from each place, may_act of the
# character at its deadline, its may_act prefix sums, free steps up to the deadline).
_Req = tuple[int, tuple[int, ...], int, list[int], int]
# A stretch of the fill: (first step, step after the last, the scripted (character, place)
# of a scripted step or None, the movers as :func:`_movers` gives them, the pending
# requirements, earliest deadline first).
_Stretch = tuple[int, int, tuple[int, int] | None,
                 tuple[tuple[int, ...], tuple[int, ...], int], tuple[_Req, ...]]


def _segments(plan: _Plan, world: World, n: int) -> list[_Stretch]:
    """Stretches of steps with the same movers and the same pending requirements.

    The pending requirements change only after a deadline, the movers only at a window
    boundary; within a stretch both are fixed, so they are coded once per stretch. Every
    scripted step is a stretch of its own.
    """
    g = _graph(world)
    aix, free = g.agent_index, plan.free
    cuts = {0, n}
    for lo, _hi, _ex in plan.stretches:
        cuts.add(lo)
    for t in plan.scripted:
        cuts.add(t)
        cuts.add(t + 1)
    # every requirement, coded once: (deadline, character, requirement)
    entries: list[tuple[int, int, _Req]] = []
    for c, lst in plan.needs.items():
        if lst:
            ci, mac = aix[c], plan.may_act[c]
            for deadline, targets, _i in lst:
                if 0 <= deadline + 1 <= n:
                    cuts.add(deadline + 1)
                entries.append((deadline, ci, (ci, _row(g, targets), mac[deadline + 1], mac,
                                               free[deadline + 1])))
    entries.sort(key=itemgetter(0))  # earliest deadline first, as in _feasible (stable)
    out: list[_Stretch] = []
    points = sorted(cuts)
    nobody: tuple[tuple[int, ...], tuple[int, ...], int] = ((), (-1,), 0)  # scripted steps
    for lo, hi in zip(points, points[1:], strict=False):
        scripted = plan.scripted.get(lo)
        if scripted is not None:
            out.append((lo, hi, (aix[scripted[0]], g.index[scripted[1]]), nobody, ()))
            continue
        reqs: list[_Req] = []
        bound: set[int] = set()
        for deadline, ci, req in entries:  # each character's first one still ahead (_pending)
            if deadline >= lo and ci not in bound:
                bound.add(ci)
                reqs.append(req)
        out.append((lo, hi, None, _movers(g, world.agents, plan.excluded[lo]), tuple(reqs)))
    return out


def _ok(reqs: tuple[_Req, ...], state: list[int], s1: int, free_s1: int, actor: int,
        dst: int) -> bool:
    """:func:`_feasible` on codes (``s1 = s + 1``); requirements sorted by deadline."""
    cum = 0
    for c, row, mac_deadline, mac, free_deadline in reqs:
        need = row[dst] if c == actor else row[state[c]]
        if need:
            if need > mac_deadline - mac[s1]:
                return False
            cum += need
            if cum > free_deadline - free_s1:
                return False
    return True


def _fill(plan: _Plan, world: World, start: str,
          rng: random.Random) -> tuple[list[int], list[int], list[int]]:
    """The reference fill on integer codes; returns (actors, locations, sources).

    ``random.Random.choice(seq)`` is ``seq[_randbelow(len(seq))]`` and ``_randbelow(m)``
    draws ``getrandbits(m.bit_length())`` until the draw is below ``m``; that loop is
    inlined here on tables padded with -1 (``pad[getrandbits(b)]`` is -1 exactly when the
    draw is rejected), so the stream of random numbers (and the story) is the reference's.
    """
    g = _graph(world)
    nbits, npad, nsets, free = g.nbr_bits, g.nbr_pad, g.nbr_sets, plan.free
    walk = all(nbits)  # every place has a way out
    state = [g.index[start]] * len(world.agents)
    n = len(plan.excluded)
    actors, dests, sources = [0] * n, [0] * n, [0] * n  # step s: actors[s] enters dests[s]
    gb = rng.getrandbits
    for lo, hi, scripted, (movers, mpad, mbits), reqs in _segments(plan, world, n):
        if scripted is not None:  # a scripted step (a stretch of its own)
            c, dst = scripted
            here = state[c]
            if dst not in nsets[here]:  # cannot happen after validation; say why anyway
                names = {a: world.locations[state[i]] for a, i in g.agent_index.items()}
                enter(world, names, lo, world.agents[c], world.locations[dst])
            state[c] = dst
            actors[lo] = c
            dests[lo] = dst
            sources[lo] = here
            continue
        if reqs:  # a frozen character already in place needs nothing in this stretch
            reqs = tuple(q for q in reqs if q[0] in movers or q[1][state[q[0]]])
        if not reqs and movers and walk:
            # a plain random walk: the first draw (character, then neighbour) always fits
            for s in range(lo, hi):
                c = mpad[gb(mbits)]
                while c < 0:
                    c = mpad[gb(mbits)]
                here = state[c]
                b = nbits[here]
                opts = npad[here]
                dst = opts[gb(b)]
                while dst < 0:
                    dst = opts[gb(b)]
                state[c] = dst
                actors[s] = c
                dests[s] = dst
                sources[s] = here
            continue
        for s in range(lo, hi):
            if movers:  # one uniform draw (character, then neighbour), kept if it fits
                c = mpad[gb(mbits)]
                while c < 0:
                    c = mpad[gb(mbits)]
                here = state[c]
                b = nbits[here]
                if b:  # ``here`` has a neighbour
                    opts = npad[here]
                    dst = opts[gb(b)]
                    while dst < 0:
                        dst = opts[gb(b)]
                    if not reqs or _ok(reqs, state, s + 1, free[s + 1], c, dst):
                        state[c] = dst
                        actors[s] = c
                        dests[s] = dst
                        sources[s] = here
                        continue
            c, dst = _search(plan, g, reqs, movers, state, s, rng)
            actors[s] = c
            dests[s] = dst
            sources[s] = state[c]
            state[c] = dst
    return actors, dests, sources


@lru_cache(maxsize=64)
def _swaps(n: int) -> tuple[tuple[int, int, int], ...]:
    """The steps of ``random.Random.shuffle`` on ``n`` items: ``(i, i + 1, its bit length)``."""
    return tuple((i, i + 1, (i + 1).bit_length()) for i in range(n - 1, 0, -1))


def _shuffle(x: list[int], gb: Callable[[int], int]) -> list[int]:
    """``random.Random.shuffle(x)`` (Python 3.11) with ``_randbelow`` inlined; returns ``x``."""
    for i, m, b in _swaps(len(x)):
        j = gb(b)  # j = _randbelow(m)
        while j >= m:
            j = gb(b)
        x[i], x[j] = x[j], x[i]
    return x


def _search(plan: _Plan, g: _Graph, reqs: tuple[_Req, ...], movers: tuple[int, ...],
            state: list[int], s: int, rng: random.Random) -> tuple[int, int]:
    """The reference's slow path: every (character, place) in random order.

    ``_shuffle`` is ``random.Random.shuffle`` with its draws inlined (same stream). A
    character without a pending requirement keeps every requirement possible either with
    every move or with none (its move changes no one's distance), so that is checked once.
    """
    gb = rng.getrandbits
    s1, free_s1 = s + 1, plan.free[s + 1]
    bound = {q[0] for q in reqs}
    idle: bool | None = None  # whether a move by an unbound character fits (once known)
    for c in _shuffle(list(movers), gb):
        options = _shuffle(list(g.nbr[state[c]]), gb)
        if c in bound:
            for dst in options:
                if _ok(reqs, state, s1, free_s1, c, dst):
                    return c, dst
        elif options:
            if idle is None:
                idle = _ok(reqs, state, s1, free_s1, c, options[0])
            if idle:
                return c, options[0]
    blocking = ", ".join(f"event {i}" for _d, _t, i in _pending(plan, s).values()) or "none"
    raise ValueError(f"storyboard cannot be filled at step t={s}: no character can make a "
                     f"random move without making a scripted event impossible "
                     f"(pending: {blocking})")


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
    try:
        triples = _triples(tuple(map(tuple, world_edges)), tuple(locations), start,
                           first_from_start)
    except TypeError:  # unhashable names
        triples = _triples.__wrapped__(world_edges, locations, start, first_from_start)
    if not triples:
        raise ValueError("the location graph has no path L1 -> L2 -> L3 through three "
                         "distinct locations, which the ToM storyboards need")
    return rng.choice(triples)


@lru_cache(maxsize=64)
def _triples(world_edges: Sequence[tuple[str, str]], locations: Sequence[str], start: str,
             first_from_start: bool) -> list[tuple[str, str, str]]:
    """Sorted paths L1 → L2 → L3 through distinct places (read-only: cached)."""
    nb: dict[str, list[str]] = {loc: [] for loc in locations}
    for a, b in world_edges:
        nb[a].append(b)
    return sorted((l1, l2, l3) for l1 in (nb[start] if first_from_start else locations)
                  for l2 in nb[l1] for l3 in nb[l2] if len({l1, l2, l3}) == 3)


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
