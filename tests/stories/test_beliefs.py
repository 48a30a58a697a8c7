"""Belief tracker: hand-worked stories with known answers, and invariants on random stories."""

from __future__ import annotations

import random

import pytest

from tomstats.stories.beliefs import belief, last_perceived, observers, well_defined
from tomstats.stories.world import Event, World, enter, initial_state, move_object, replay


def sally_anne() -> tuple[World, list[Event]]:
    """Sally puts the marble in the basket, goes out; Anne moves it to the box; Sally returns."""
    world = World(("Sally", "Anne"), ("room", "outside"),
                  (("room", "outside"), ("outside", "room")),
                  {"Sally": "room", "Anne": "room"},
                  containers={"basket": "room", "box": "room"}, objects={"marble": "basket"})
    state = initial_state(world)
    events = [enter(world, state, 0, "Sally", "outside"),
              move_object(world, state, 1, "Anne", "marble", "box"),
              enter(world, state, 2, "Sally", "room")]
    return world, events


@pytest.mark.parametrize(("chain", "expected"), [
    ((), "box"),
    (("Anne",), "box"),
    (("Sally",), "basket"),
    (("Anne", "Sally"), "basket"),
    (("Sally", "Anne"), "basket"),
    (("Anne", "Sally", "Anne"), "basket"),
    (("Anne", "Anne"), "box"),
    (("Sally", "Anne", "Sally", "Anne"), "basket"),
    (("Anne", "Sally", "Anne", "Sally"), "basket"),
])
def test_sally_anne_marble(chain: tuple[str, ...], expected: str) -> None:
    world, events = sally_anne()
    assert belief(world, events, chain, "marble") == expected
    assert belief(world, events, chain, "marble", as_location=True) == "room"


def test_sally_anne_agents_and_perception() -> None:
    world, events = sally_anne()
    # Sally comes back and sees Anne; Anne sees Sally leave and come back.
    assert belief(world, events, ("Sally",), "Anne") == "room"
    assert belief(world, events, ("Anne",), "Sally") == "room"
    assert belief(world, events, ("Anne", "Sally"), "Anne") == "room"
    assert observers(world, events) == [frozenset({"Sally", "Anne"}), frozenset({"Anne"}),
                                        frozenset({"Sally", "Anne"})]
    assert last_perceived(world, events, ("Sally",), "marble") is None
    assert last_perceived(world, events, ("Anne",), "marble") == 1


def rooms_world(agents: tuple[str, ...]) -> World:
    locs = ("hallway", "room_1", "room_2", "room_3")
    edges = tuple(e for r in locs[1:] for e in (("hallway", r), (r, "hallway"))) + (
        ("room_1", "room_2"), ("room_2", "room_1"), ("room_2", "room_3"), ("room_3", "room_2"))
    return World(agents, locs, edges, {a: "hallway" for a in agents})


def three_friends() -> tuple[World, list[Event]]:
    """Bob and Anne cross paths in room_1; Anne goes to room_2 (Bob sees), Carl goes to
    room_3, Anne goes back to the hallway (no one sees)."""
    world = rooms_world(("Anne", "Bob", "Carl"))
    state = initial_state(world)
    moves = [("Bob", "room_1"), ("Anne", "room_1"), ("Anne", "room_2"), ("Carl", "room_3"),
             ("Anne", "hallway")]
    return world, [enter(world, state, t, a, loc) for t, (a, loc) in enumerate(moves)]


@pytest.mark.parametrize(("chain", "target", "expected"), [
    ((), "Anne", "hallway"),
    (("Bob",), "Anne", "room_2"),
    (("Carl",), "Anne", "room_1"),  # saw her leave the hallway for room_1, nothing after
    (("Bob", "Carl"), "Anne", "room_1"),  # Bob saw Carl in the hallway when Anne left it
    (("Carl", "Bob"), "Anne", "room_1"),  # Carl left before Anne moved on to room_2
    (("Anne",), "Carl", "hallway"),  # she never saw Carl leave (last seen place)
    (("Bob",), "Carl", "hallway"),
    (("Anne", "Bob"), "Anne", "room_2"),
    (("Bob", "Anne", "Bob"), "Anne", "room_2"),
    (("Carl", "Anne", "Bob", "Anne"), "Anne", "room_1"),
])
def test_three_friends_orders_0_to_4(chain: tuple[str, ...], target: str,
                                     expected: str) -> None:
    world, events = three_friends()
    assert belief(world, events, chain, target) == expected


def test_seen_absence_is_flagged_as_ill_defined() -> None:
    world, events = three_friends()
    # Anne walks into the hallway where she last saw Carl, and Carl is not there.
    assert belief(world, events, ("Anne",), "Carl") == "hallway"
    assert not well_defined(world, events, ("Anne",), "Carl")
    assert well_defined(world, events, ("Bob",), "Anne")
    assert well_defined(world, events, ("Bob", "Carl"), "Anne")


def test_sighting_on_entry() -> None:
    world = rooms_world(("Anne", "Bob"))
    state = initial_state(world)
    events = [enter(world, state, 0, "Anne", "room_1"),  # Bob in hallway sees this
              enter(world, state, 1, "Bob", "room_2"),  # Anne in room_1 does not
              enter(world, state, 2, "Anne", "room_2")]  # Anne walks in and sees Bob
    assert belief(world, events, ("Anne",), "Bob") == "room_2"
    assert belief(world, events, ("Bob",), "Anne") == "room_2"
    assert belief(world, events, ("Bob", "Anne"), "Bob") == "room_2"


def test_perceived_initial_knowledge() -> None:
    world = World(("A", "B"), ("k", "g"), (("k", "g"), ("g", "k")), {"A": "k", "B": "g"},
                  containers={"box": "k", "bin": "g"}, objects={"apple": "box", "pear": "bin"},
                  initial_knowledge="perceived")
    assert belief(world, [], ("A",), "apple") == "box"
    assert belief(world, [], ("A",), "pear") is None
    assert belief(world, [], ("A",), "B") is None
    state = initial_state(world)
    events = [enter(world, state, 0, "B", "k")]  # B walks in: A sees B arrive
    assert belief(world, events, ("A",), "B") == "k"
    assert belief(world, events, ("B",), "A") == "k"  # B sees A on entering
    assert belief(world, events, ("B",), "apple") is None  # hidden in its box


def test_world_preconditions_are_enforced() -> None:
    world, _ = sally_anne()
    state = initial_state(world)
    with pytest.raises(ValueError, match="already there"):
        enter(world, state, 0, "Sally", "room")
    enter(world, state, 0, "Sally", "outside")
    with pytest.raises(ValueError, match="must share a location"):
        move_object(world, state, 1, "Sally", "marble", "box")
    with pytest.raises(ValueError, match="already in basket"):
        move_object(world, state, 1, "Anne", "marble", "basket")
    rooms = rooms_world(("Anne",))
    with pytest.raises(ValueError, match="no such edge"):
        enter(rooms, {"Anne": "room_1"}, 1, "Anne", "room_3")
    with pytest.raises(ValueError, match="is in"):
        replay(rooms, [Event(0, "enter", "Anne", "room_2", "room_1")])


# --- invariants over many random stories ---------------------------------------------------

def random_world(rng: random.Random) -> World:
    n_loc = rng.randint(2, 5)
    locs = tuple(f"L{i}" for i in range(n_loc))
    edges = {(locs[i], locs[i + 1]) for i in range(n_loc - 1)} | \
        {(locs[i + 1], locs[i]) for i in range(n_loc - 1)}
    for _ in range(rng.randint(0, 4)):
        a, b = rng.sample(locs, 2)
        edges.add((a, b))
    agents = tuple(f"A{i}" for i in range(rng.randint(2, 5)))
    conts = {f"C{i}": rng.choice(locs) for i in range(rng.randint(0, 4))}
    objs = {f"O{i}": rng.choice(sorted(conts)) for i in range(rng.randint(0, 3))} if conts \
        else {}
    return World(agents, locs, tuple(sorted(edges)), {a: rng.choice(locs) for a in agents},
                 containers=conts, objects=objs)


def random_events(world: World, rng: random.Random, n: int,
                  frozen: frozenset[str] = frozenset()) -> list[Event]:
    state = initial_state(world)
    events: list[Event] = []
    for t in range(n):
        movers = [a for a in world.agents if a not in frozen]
        a = rng.choice(movers)
        here = state[a]
        movable = [(o, c) for o, src in state.items() if o in world.objects
                   and world.containers[src] == here
                   for c, loc in world.containers.items() if loc == here and c != src]
        if movable and rng.random() < 0.4:
            o, c = rng.choice(movable)
            events.append(move_object(world, state, t, a, o, c))
        else:
            events.append(enter(world, state, t, a, rng.choice(world.neighbours(here))))
    return events


def first_order_reference(world: World, events: list[Event], x: str, target: str) -> str:
    """Independent first-order reference: T's place after the last event where X saw it."""
    state = initial_state(world)
    seen = state[target]
    for e, obs in zip(events, observers(world, events), strict=True):
        apply = dict(state)
        if e.action == "enter":
            apply[e.actor] = e.location
        else:
            apply[str(e.obj)] = str(e.container)
        about_target = e.actor == target if e.action == "enter" else e.obj == target
        walked_in = (e.action == "enter" and e.actor == x and target in world.start
                     and apply[target] == e.location)
        if (x in obs and about_target) or walked_in:
            seen = apply[target]
        state = apply
    return seen


@pytest.mark.parametrize("block", range(4))
def test_random_story_invariants(block: int) -> None:
    """10,000 random stories (4 blocks of 2,500) against invariants that need no tracker."""
    rng = random.Random(1000 + block)
    for _ in range(2500):
        world = random_world(rng)
        events = random_events(world, rng, rng.randint(0, 15))
        truth = replay(world, events)
        obs = observers(world, events)
        targets = list(world.agents) + list(world.objects)
        t = rng.choice(targets)
        # order 0 is reality
        assert belief(world, events, (), t) == truth[t]
        for x in world.agents:
            b = belief(world, events, (x,), t)
            # independent first-order reference
            assert b == first_order_reference(world, events, x, t)
            # the answer is always a candidate: a location or a container
            assert b in (world.containers if t in world.objects else world.locations)
            # an agent that perceived every event has true beliefs, at any depth after it
            if all(x in o for o in obs):
                assert b == truth[t]
                rest = tuple(rng.choices(world.agents, k=rng.randint(1, 3)))
                assert belief(world, events, (x, *rest), t) == belief(world, events, rest, t)
            # an agent who saw the last change of t believes t's true place
            changes = [i for i, e in enumerate(events)
                       if (e.actor == t and e.action == "enter") or e.obj == t]
            if changes and x in obs[changes[-1]]:
                assert b == truth[t]


def test_copresent_watchers_collapse_one_order() -> None:
    """Two agents who stay together all story long: order k reduces to order k-1."""
    rng = random.Random(7)
    for _ in range(2000):
        world = random_world(rng)
        if len(world.agents) < 3:
            continue
        w1, w2 = world.agents[:2]
        start = dict(world.start)
        start[w2] = start[w1]
        world = World(world.agents, world.locations, world.edges, start, world.containers,
                      world.objects)
        events = random_events(world, rng, rng.randint(0, 15), frozen=frozenset({w1, w2}))
        for t in list(world.agents[2:]) + list(world.objects):
            rest = tuple(rng.choices(world.agents, k=rng.randint(0, 2)))
            assert belief(world, events, (w1, w2, *rest), t) == \
                belief(world, events, (w1, *rest), t)
            assert belief(world, events, (w1, w2), t) == belief(world, events, (w2,), t)


def test_bad_queries_name_the_field() -> None:
    world, events = sally_anne()
    with pytest.raises(ValueError, match="'Zed' is not an agent"):
        belief(world, events, ("Zed",), "marble")
    with pytest.raises(ValueError, match="target 'ring'"):
        belief(world, events, ("Sally",), "ring")
