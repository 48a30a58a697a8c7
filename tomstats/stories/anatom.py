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


def _padded(world: World, events: Sequence[Event], target: int, rng: random.Random,
            tolerance: float) -> str:
    """The story told with sentences that move nothing, to ``target`` ± ``tolerance`` words.

    The placements and the events keep their order; between them go actions, short
    descriptions of the agents and places, dialogue between agents who share a place and
    remarks about other places, handling of everyday things (:mod:`tomstats.stories.\
narrative`; a sentence that names an object or a container of the world is never used).
    None changes where anything is.
    """
    from tomstats.stories.narrative import _NOTES_ROOMS, NaturalSetting, Phrases
    from tomstats.stories.render import length_window

    lo, hi = length_window(target, tolerance)
    locs = tuple(world.locations)
    st = NaturalSetting("anatom", locs[0], locs[1:], ("{a} enters {l}.",), _NOTES_ROOMS,
                        "", "the same room", "")
    ph = Phrases(st, rng)  # object handling too; sentences naming the world's are dropped
    head = _render(world, ()).split(". ")
    head = [h if h.endswith(".") else h + "." for h in head]
    lines = [f"{e.actor} enters the {e.location}." if e.action == "enter" else
             f"{e.actor} moves the {e.obj} to the {e.container}." for e in events]
    words = sum(len(x.split()) for x in head + lines)
    if words > hi:
        raise ValueError(f"an AnaToM story of {words} words does not fit {target} words")
    state = dict(world.start)
    slots: list[list[str]] = [[] for _ in range(len(lines) + 1)]
    states = [dict(state)]
    for e in events:
        if e.action == "enter":
            state[e.actor] = e.location
        states.append(dict(state))
    agents = list(world.agents)
    # a padding sentence never names an object or a container of the world ("a pen")
    taken = re.compile(r"\b(" + "|".join(map(re.escape, [*world.objects, *world.containers]))
                       + r")s?\b", re.I)
    for _ in range(100000):
        if words >= lo:
            break
        k = rng.randrange(len(slots))
        pos, who = states[k], rng.choice(agents)
        u = rng.random()
        mates = [a for a in agents if a != who and pos[a] == pos[who]]
        if u < 0.35:
            sent = ph.action(who)
        elif u < 0.6 and mates:
            sent = ph.dialogue(who, rng.choice(mates))
        elif u < 0.85:
            sent = ph.about(who, rng.choice(locs))
        elif u < 0.95:
            sent = ph.note(rng.choice(locs))
        else:
            sent = ph.looks(who)
        n = len(sent.split())
        if words + n <= hi and not taken.search(sent):
            slots[k].append(sent)
            words += n
    if words < lo:
        raise ValueError(f"could not pad an AnaToM story to {target} words")
    out = list(head) + slots[0]
    for line, extra in zip(lines, slots[1:], strict=True):
        out.append(line)
        out.extend(extra)
    return " ".join(out)


def anatom_items(n_stories: int, seed: int, composition: Composition = Composition(),
                 timeline: str | Sequence[str] = "E->M->E->M", *,
                 require_all: bool = False, max_tries: int = 200,
                 contexts: Sequence[int] | None = None,
                 tolerance: float = 0.02) -> list[Item]:
    """AnaToM items: every well-defined question type of ``n_stories`` stories.

    With ``contexts`` (target lengths in words) AnaToM joins the length design: every
    story is told once per length, its placements and events padded with sentences that
    move nothing (see :func:`_padded`), and ``context_words`` is the target length;
    ``item_id`` gains ``-w{words}``. Without it, ``context_words`` is the story's own
    length.

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
    if contexts is not None and (not contexts or any(
            not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in contexts)
            or len(set(contexts)) != len(contexts)):
        raise ValueError(f"contexts must be distinct positive integers (words), got "
                         f"{contexts!r}")
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
        final = initial_state(world)
        for e in events:
            apply_event(world, final, e)
        for length in (None,) if contexts is None else contexts:
            if length is None:
                text, suffix = _render(world, events), ""
            else:
                text = _padded(world, events, length,
                               random.Random(f"anatom-pad:{story_seed}:{length}"), tolerance)
                suffix = f"-w{length}"
            for qtype in ANATOM_QUESTION_TYPES:
                if qtype not in qs:
                    continue
                q, chain, obj, gold = qs[qtype]
                status = "true" if qtype.endswith("_true_belief") else (
                    "false" if qtype.endswith("_false_belief") else "none")
                items.append(Item(
                    item_id=f"anatom-s{seed}{suffix}-r{r:04d}-{qtype}", story=text,
                    question=q, answer=gold, question_type=qtype, tom_order=len(chain),
                    context_words=word_count(text) if length is None else length,
                    n_words=word_count(text), candidates=tuple(world.containers),
                    agents=chain, target=obj, last_location=final[obj],
                    n_characters=len(world.agents), setting="anatom", generator="anatom",
                    seed=story_seed, belief_status=status,
                    metadata={"timeline": "->".join(kinds),
                              "composition": list(vars(composition).values()),
                              "events": [e.to_dict() for e in events]}))
    return items
