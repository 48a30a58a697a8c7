"""The world a story happens in, and the events that change it.

A :class:`World` holds agents, locations joined by a *directed* graph (an agent can enter
``b`` from ``a`` only if ``(a, b)`` is an edge), and optionally containers (fixed in a
location) holding objects. A story is the world's initial state plus a list of
:class:`Event` records; text is rendered from events, never parsed back.

Two actions, with AnaToM's preconditions:

- ``enter``: agent ``A`` leaves ``loc(A)`` for ``L``; needs ``L != loc(A)`` and the edge
  ``(loc(A), L)``;
- ``move_object``: agent ``A`` moves object ``O`` from ``con(O)`` to container ``C``; needs
  ``C != con(O)`` and ``loc(A) = loc(con(O)) = loc(C)``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Event", "World", "apply_event", "distances", "enter", "initial_state",
           "move_object", "replay"]

#: Actions an event can carry.
ACTIONS = ("enter", "move_object")


@dataclass(frozen=True, slots=True)
class Event:
    """One action at one time step.

    Parameters
    ----------
    time : int
        Position in the story (0, 1, 2, …).
    action : str
        ``"enter"`` or ``"move_object"``.
    actor : str
        The agent who acts.
    location : str
        ``enter``: the location entered; ``move_object``: where the move happens.
    source : str
        ``enter``: the location left; ``move_object``: the object's former container.
    obj : str or None
        ``move_object``: the object moved.
    container : str or None
        ``move_object``: the destination container.
    """

    time: int
    action: str
    actor: str
    location: str
    source: str
    obj: str | None = None
    container: str | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (``None`` fields left out)."""
        d: dict[str, object] = {"time": self.time, "action": self.action, "actor": self.actor,
                                "location": self.location, "source": self.source}
        if self.obj is not None:
            d["obj"] = self.obj
            d["container"] = self.container
        return d


@dataclass(frozen=True)
class World:
    """Agents, a directed location graph, containers and objects, and the initial state.

    Parameters
    ----------
    agents : tuple of str
    locations : tuple of str
    edges : tuple of (str, str)
        Directed edges ``(from, to)``; an agent may enter ``to`` only from ``from``.
    start : mapping agent -> location
        Initial location of every agent.
    containers : mapping container -> location
        Where each container stands (containers never move).
    objects : mapping object -> container
        Initial container of every object.
    initial_knowledge : str
        ``"common"``: every agent knows the whole initial state (StorySim: "all characters
        start in the hallway"); ``"perceived"``: an agent initially knows only the entities
        in its own location (AnaToM's rule).
    """

    agents: tuple[str, ...]
    locations: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    start: Mapping[str, str]
    containers: Mapping[str, str] = field(default_factory=dict)
    objects: Mapping[str, str] = field(default_factory=dict)
    initial_knowledge: str = "common"

    def __post_init__(self) -> None:
        _check_unique("agents", self.agents)
        _check_unique("locations", self.locations)
        names = [*self.agents, *self.locations, *self.containers, *self.objects]
        _check_unique("entity names (agents, locations, containers, objects)", names)
        locs = set(self.locations)
        for a, b in self.edges:
            for end in (a, b):
                if end not in locs:
                    raise ValueError(f"edge ({a!r}, {b!r}): {end!r} is not a location")
            if a == b:
                raise ValueError(f"edge ({a!r}, {b!r}) is a self-loop")
        for who in self.agents:
            if self.start.get(who) not in locs:
                raise ValueError(f"start of agent {who!r} is {self.start.get(who)!r}, "
                                 "not a location")
        for c, loc in self.containers.items():
            if loc not in locs:
                raise ValueError(f"container {c!r} stands in {loc!r}, not a location")
        for o, c in self.objects.items():
            if c not in self.containers:
                raise ValueError(f"object {o!r} starts in {c!r}, not a container")
        if self.initial_knowledge not in ("common", "perceived"):
            raise ValueError(f"initial_knowledge must be 'common' or 'perceived', "
                             f"got {self.initial_knowledge!r}")
        adj: dict[str, tuple[str, ...]] = {loc: () for loc in self.locations}
        for a, b in self.edges:
            if b not in adj[a]:
                adj[a] = (*adj[a], b)
        object.__setattr__(self, "_adj", adj)

    def neighbours(self, location: str) -> tuple[str, ...]:
        """Locations that can be entered from ``location``."""
        return self._adj[location]  # type: ignore[attr-defined]

    def is_location(self, name: str) -> bool:
        """Whether ``name`` is a location of this world."""
        return name in self._adj  # type: ignore[attr-defined]

    def has_edge(self, a: str, b: str) -> bool:
        """Whether an agent in ``a`` may enter ``b``."""
        return b in self._adj.get(a, ())  # type: ignore[attr-defined]

    def location_of(self, entity: str, state: Mapping[str, str]) -> str:
        """Location of an agent, a container or an object (via its container) in ``state``."""
        if entity in self.containers:
            return self.containers[entity]
        pos = state[entity]
        return self.containers.get(pos, pos)


def _check_unique(what: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if not isinstance(n, str) or not n:
            raise ValueError(f"{what}: {n!r} is not a non-empty string")
        if n in seen:
            raise ValueError(f"{what}: {n!r} appears twice")
        seen.add(n)


def initial_state(world: World) -> dict[str, str]:
    """The initial state: agent -> location and object -> container."""
    return {**dict(world.start), **dict(world.objects)}


def enter(world: World, state: dict[str, str], time: int, actor: str, location: str) -> Event:
    """Make agent ``actor`` enter ``location``; check the preconditions, update ``state``.

    Raises
    ------
    ValueError
        Naming the event and the broken precondition.
    """
    if actor not in world.agents:
        raise ValueError(f"event t={time}: {actor!r} is not an agent")
    if not world.is_location(location):
        raise ValueError(f"event t={time}: {location!r} is not a location")
    here = state[actor]
    if here == location:
        raise ValueError(f"event t={time}: {actor} enters {location} but is already there")
    if not world.has_edge(here, location):
        raise ValueError(f"event t={time}: {actor} cannot enter {location} from {here} "
                         "(no such edge in the location graph)")
    state[actor] = location
    return Event(time, "enter", actor, location, here)


def move_object(world: World, state: dict[str, str], time: int, actor: str, obj: str,
                container: str) -> Event:
    """Make ``actor`` move ``obj`` into ``container``; check AnaToM's preconditions.

    Raises
    ------
    ValueError
        Naming the event and the broken precondition.
    """
    if actor not in world.agents:
        raise ValueError(f"event t={time}: {actor!r} is not an agent")
    if obj not in world.objects:
        raise ValueError(f"event t={time}: {obj!r} is not an object")
    if container not in world.containers:
        raise ValueError(f"event t={time}: {container!r} is not a container")
    src = state[obj]
    if src == container:
        raise ValueError(f"event t={time}: {obj} is already in {container}")
    here = state[actor]
    if world.containers[src] != here or world.containers[container] != here:
        raise ValueError(f"event t={time}: {actor} (in {here}) cannot move {obj} from {src} "
                         f"(in {world.containers[src]}) to {container} "
                         f"(in {world.containers[container]}): all three must share a location")
    state[obj] = container
    return Event(time, "move_object", actor, here, src, obj, container)


def apply_event(world: World, state: dict[str, str], event: Event) -> None:
    """Apply ``event`` to ``state`` after checking it is consistent and allowed."""
    if event.action == "enter":
        if state.get(event.actor) != event.source:
            raise ValueError(f"event t={event.time}: {event.actor} leaves {event.source} but "
                             f"is in {state.get(event.actor)}")
        enter(world, state, event.time, event.actor, event.location)
    elif event.action == "move_object":
        if event.obj is None or event.container is None:
            raise ValueError(f"event t={event.time}: move_object needs obj and container")
        if state.get(event.obj) != event.source:
            raise ValueError(f"event t={event.time}: {event.obj} is taken from {event.source} "
                             f"but is in {state.get(event.obj)}")
        move_object(world, state, event.time, event.actor, event.obj, event.container)
    else:
        raise ValueError(f"event t={event.time}: unknown action {event.action!r} "
                         f"(expected one of {ACTIONS})")


def replay(world: World, events: Iterable[Event]) -> dict[str, str]:
    """Final state after checking and applying every event in order."""
    state = initial_state(world)
    for ev in events:
        apply_event(world, state, ev)
    return state


def distances(world: World) -> dict[str, dict[str, int]]:
    """Shortest number of ``enter`` steps between all pairs of locations (BFS).

    Unreachable pairs are absent from the inner dict.
    """
    out: dict[str, dict[str, int]] = {}
    for src in world.locations:
        dist = {src: 0}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            for v in world.neighbours(u):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        out[src] = dist
    return out
