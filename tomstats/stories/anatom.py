"""AnaToM worlds: entity composition, initial placements, timelines and six question types.

AnaToM's world has agents ``A``, objects ``O``, containers ``C`` and locations ``L``
(``N_A, N_O, N_C, N_L`` of each); agents and containers stand in locations, objects lie in
containers. Two actions: ``E(A, L)`` (enter another location; any location can be entered
from any other) and ``M(O, C)`` (an agent moves an object to another container, all three
in one location). A *timeline* is a sequence of action types such as ``E→M→E→M``.

**Initial placement patterns.** AnaToM counts initial states as a balls-and-bins problem
with indistinguishable entities and indistinguishable locations: a pattern says how many
agents and containers stand in each location and how many objects each container holds,
up to renaming agents, containers, objects and locations. :func:`placement_patterns`
enumerates them exactly; for ``N_A = N_O = N_C = N_L = 3`` there are 97 (AnaToM, appendix
A.1: 30 with all agents together, 55 with a 2 + 1 split, 12 with one agent per location).
Named stories are then drawn by placing named entities uniformly at random.

**Questions** (AnaToM's six types; answers are containers, from the belief tracker, with
AnaToM's perception rule for the initial state: an agent knows only what is in its own
location): memory ("where was O at the beginning?"), reality ("where is O now?"),
first-order true/false belief ("where does A think O is?") and second-order true/false
belief ("where does A think B thinks O is?"). A belief question is generated only when it
is well defined (the chain has a belief about ``O``), and is *true* or *false* by comparing
that belief with reality; a type with no well-defined instance in a story is left out.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tomstats.stories.beliefs import belief
from tomstats.stories.items import Item
from tomstats.stories.render import word_count
from tomstats.stories.settings import CHARACTERS
from tomstats.stories.world import Event, World, apply_event, enter, initial_state, move_object

__all__ = ["ANATOM_QUESTION_TYPES", "Composition", "anatom_items", "generate_anatom_story",
           "parse_timeline", "placement_patterns", "random_world"]

ANATOM_QUESTION_TYPES = ("memory", "reality", "first_order_true_belief",
                         "first_order_false_belief", "second_order_true_belief",
                         "second_order_false_belief")
LOCATIONS = ("kitchen", "garden", "hall", "attic", "cellar", "garage", "study", "porch")
CONTAINERS = ("box", "basket", "drawer", "bag", "crate", "jar", "chest", "bucket")
OBJECTS = ("apple", "ball", "key", "coin", "pen", "cup", "sock", "book")


@dataclass(frozen=True)
class Composition:
    """AnaToM's entity composition ``(N_A, N_O, N_C, N_L)``."""

    n_agents: int = 3
    n_objects: int = 3
    n_containers: int = 3
    n_locations: int = 3

    def __post_init__(self) -> None:
        limits = {"n_agents": len(CHARACTERS), "n_objects": len(OBJECTS),
                  "n_containers": len(CONTAINERS), "n_locations": len(LOCATIONS)}
        for name, hi in limits.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
                raise ValueError(f"composition {name} must be an integer in [1, {hi}], "
                                 f"got {v!r}")


def _compositions(n: int, k: int) -> Iterator[tuple[int, ...]]:
    """Ordered ways to put ``n`` identical items in ``k`` labelled bins."""
    if k == 1:
        yield (n,)
        return
    for i in range(n + 1):
        for rest in _compositions(n - i, k - 1):
            yield (i, *rest)


def _loads(n: int, k: int, cap: int | None = None) -> Iterator[tuple[int, ...]]:
    """Partitions of ``n`` identical objects into ``k`` identical containers (zeros kept)."""
    cap = n if cap is None else cap
    if k == 0:
        if n == 0:
            yield ()
        return
    for first in range(min(n, cap), -1, -1):
        for rest in _loads(n - first, k - 1, first):
            yield (first, *rest)


def _pattern_string(pattern: tuple[tuple[int, int, tuple[int, ...]], ...]) -> str:
    return "/".join("A" * a + "".join("C" + "O" * k for k in loads)
                    for a, _c, loads in pattern)


def placement_patterns(comp: Composition) -> list[str]:
    """All initial placement patterns of ``comp`` (AnaToM's count), as strings.

    Each location is written as its agents ``A`` then its containers, each ``C`` followed
    by one ``O`` per object inside, e.g. ``"AACOOO/ACC/"``; locations are separated by ``/``
    and sorted, so each pattern (up to renaming) appears once.

    >>> len(placement_patterns(Composition(3, 3, 3, 3)))
    97
    """
    seen: set[tuple[tuple[int, int, tuple[int, ...]], ...]] = set()
    k = comp.n_locations
    for agents in _compositions(comp.n_agents, k):
        for conts in _compositions(comp.n_containers, k):
            for objs in _compositions(comp.n_objects, k):
                if any(c == 0 and o > 0 for c, o in zip(conts, objs, strict=True)):
                    continue  # objects lie in containers
                per_loc = [list(_loads(o, c)) for o, c in zip(objs, conts, strict=True)]
                for loads in itertools.product(*per_loc):
                    seen.add(tuple(sorted(zip(agents, conts, loads, strict=True),
                                          reverse=True)))
    return sorted(_pattern_string(p) for p in seen)


def random_world(comp: Composition, rng: random.Random) -> World:
    """A named initial state: agents and containers in random locations, objects in random
    containers (AnaToM's perception rule for initial knowledge)."""
    agents = CHARACTERS[:comp.n_agents]
    locs = LOCATIONS[:comp.n_locations]
    conts = {c: rng.choice(locs) for c in CONTAINERS[:comp.n_containers]}
    objs = {o: rng.choice(sorted(conts)) for o in OBJECTS[:comp.n_objects]}
    edges = tuple((a, b) for a in locs for b in locs if a != b)
    return World(agents, locs, edges, {a: rng.choice(locs) for a in agents}, conts, objs,
                 initial_knowledge="perceived")


def parse_timeline(timeline: str | Sequence[str]) -> tuple[str, ...]:
    """``"E->M->E->M"`` (or ``"E→M→E→M"``, ``"EMEM"``, ``["E", "M"]``) → ``("E", "M", …)``."""
    steps = tuple(re.findall(r"[A-Za-z]", timeline)) if isinstance(timeline, str) \
        else tuple(timeline)
    bad = [s for s in steps if s not in ("E", "M")]
    if not steps or bad:
        raise ValueError(f"timeline must be a sequence of 'E' (enter/exit) and 'M' (move), "
                         f"got {timeline!r}")
    return steps


def _actions(world: World, state: dict[str, str], kind: str) -> list[tuple[str, ...]]:
    if kind == "E":
        return [(a, loc) for a in world.agents for loc in world.locations if loc != state[a]]
    return [(a, o, c) for a in world.agents for o in world.objects
            for c, where in world.containers.items()
            if c != state[o] and where == state[a] == world.containers[state[o]]]


def _complete(world: World, state: dict[str, str], kinds: Sequence[str], t: int,
              rng: random.Random) -> list[Event] | None:
    """Depth-first look-ahead: a random completion of ``kinds`` from ``state``, or None."""
    if not kinds:
        return []
    options = _actions(world, state, kinds[0])
    rng.shuffle(options)
    for act in options:
        trial = dict(state)
        ev = enter(world, trial, t, *act) if kinds[0] == "E" else \
            move_object(world, trial, t, *act)
        rest = _complete(world, trial, kinds[1:], t + 1, rng)
        if rest is not None:
            return [ev, *rest]
    return None


def generate_anatom_story(comp: Composition, timeline: str | Sequence[str], seed: int,
                          max_tries: int = 100) -> tuple[World, list[Event]]:
    """Draw an initial state and a timeline that can be completed (look-ahead).

    Initial states from which the timeline dead-ends are redrawn (up to ``max_tries``).
    """
    kinds = parse_timeline(timeline)
    rng = random.Random(seed)
    for _ in range(max_tries):
        world = random_world(comp, rng)
        events = _complete(world, initial_state(world), kinds, 0, rng)
        if events is not None:
            return world, events
    raise ValueError(f"timeline {'->'.join(kinds)} could not be completed in {max_tries} "
                     f"initial states of {comp} (e.g. 'M' needs an agent, an object and two "
                     "containers in one location)")


def _render(world: World, events: Sequence[Event]) -> str:
    lines = [f"{a} is in the {loc}." for a, loc in world.start.items()]
    lines += [f"The {c} is in the {loc}." for c, loc in world.containers.items()]
    lines += [f"The {o} is in the {c}." for o, c in world.objects.items()]
    for e in events:
        lines.append(f"{e.actor} enters the {e.location}." if e.action == "enter" else
                     f"{e.actor} moves the {e.obj} to the {e.container}.")
    return " ".join(lines)


def _questions(world: World, events: Sequence[Event],
               rng: random.Random) -> dict[str, tuple[str, tuple[str, ...], str, str]]:
    """One well-defined question per type: type -> (question, chain, object, answer)."""
    state = initial_state(world)
    for e in events:
        apply_event(world, state, e)
    objs = list(world.objects)
    rng.shuffle(objs)
    o = objs[0]
    out = {"memory": (f"Where was the {o} at the beginning?", (), o, world.objects[o]),
           "reality": (f"Where is the {o} now?", (), o, state[o])}
    chains = [(a,) for a in world.agents] + list(itertools.permutations(world.agents, 2))
    rng.shuffle(chains)
    for chain in chains:
        for obj in objs:
            b = belief(world, events, chain, obj)
            if b is None:
                continue
            order = "first" if len(chain) == 1 else "second"
            kind = f"{order}_order_{'true' if b == state[obj] else 'false'}_belief"
            if kind not in out:
                q = (f"Where does {chain[0]} think the {obj} is?" if len(chain) == 1 else
                     f"Where does {chain[0]} think {chain[1]} thinks the {obj} is?")
                out[kind] = (q, chain, obj, b)
    return out


def anatom_items(n_stories: int, seed: int, composition: Composition = Composition(),
                 timeline: str | Sequence[str] = "E->M->E->M", *,
                 require_all: bool = False, max_tries: int = 200) -> list[Item]:
    """AnaToM items: every well-defined question type of ``n_stories`` stories.

    With ``require_all`` only stories in which all six question types are well defined are
    kept (AnaToM's dataset is balanced that way); others are redrawn (up to ``max_tries``
    draws per story).

    Returns
    -------
    list of Item
        ``setting="anatom"``, ``generator="anatom"``, answers are container names,
        ``candidates`` the containers; ``context_words`` is the story's own length.
    """
    if not isinstance(n_stories, int) or isinstance(n_stories, bool) or n_stories < 1:
        raise ValueError(f"n_stories must be a positive integer, got {n_stories!r}")
    kinds = parse_timeline(timeline)
    items = []
    for r in range(n_stories):
        for attempt in range(max_tries):
            story_seed = random.Random(f"anatom:{seed}:{r}:{attempt}").randrange(2**63)
            world, events = generate_anatom_story(composition, kinds, story_seed)
            qs = _questions(world, events, random.Random(story_seed + 1))
            if not require_all or len(qs) == len(ANATOM_QUESTION_TYPES):
                break
        else:
            raise ValueError(f"no story with all six question types in {max_tries} draws "
                             f"for {composition} and timeline {'->'.join(kinds)}")
        text = _render(world, events)
        final = initial_state(world)
        for e in events:
            apply_event(world, final, e)
        for qtype in ANATOM_QUESTION_TYPES:
            if qtype not in qs:
                continue
            q, chain, obj, gold = qs[qtype]
            items.append(Item(
                item_id=f"anatom-s{seed}-r{r:04d}-{qtype}", story=text, question=q,
                answer=gold, question_type=qtype, tom_order=len(chain),
                context_words=word_count(text), n_words=word_count(text),
                candidates=tuple(world.containers), agents=chain, target=obj,
                last_location=final[obj],
                n_characters=len(world.agents), setting="anatom", generator="anatom",
                seed=story_seed, metadata={"timeline": "->".join(kinds),
                                           "composition": list(vars(composition).values()),
                                           "events": [e.to_dict() for e in events]}))
    return items
