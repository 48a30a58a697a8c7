"""Design stories: a belief scenario told inside a whole story, at a target length in words.

A design story has three key characters — ``S1`` (the first-order observer), ``S2`` and
``T`` (the target) — and filler characters, in a :class:`~tomstats.stories.narrative.\
NaturalSetting` (everyone starts in the hub; every place can be entered from every other).
It is told in three phases:

1. **before** the critical block, everyone (the key characters too) moves about, never
   returning straight to the place just left, and the three key characters are never all
   in one place;
2. the **critical block**: ``S1`` goes to a place ``X``, then ``S2`` and ``T`` arrive (the
   one meeting of the three: the world-model questions ask about it), and a *scenario*
   (:data:`SCENARIOS`) plays out, with filler moves between its steps and exactly
   ``mislead_distance`` events between the last moment ``S1`` perceives ``T`` and ``T``'s
   final move when ``S1``'s belief is false;
3. **after** it, ``T`` stays where it is; ``S1`` and ``S2`` only move to places that none of
   the asked beliefs names (so no one walks into a place where they expect ``T`` and find
   it empty), everyone talks, acts and thinks.

Scenarios fix the answers of reality (``R``), ``S1``'s belief about ``T`` (order 1),
``S2``'s belief about ``T`` and ``S1``'s belief about ``S2``'s belief (order 2):

==============  ============  ============  =====================================
scenario        order 1       order 2       order-2 answer equals
==============  ============  ============  =====================================
``tt``          true          true          reality, S1, S2
``ft``          false         true          reality, S2
``tf``          true          false         none (X, Y, R, S1 = R all differ)
``ff_none``     false         false         none (four different places)
``ff_s1``       false         false         S1 (StorySim's second-order story)
``ff_s2``       false         false         S2
``tt2``         true          true          reality, S1, S2 (two seen moves)
``tt3``         true          true          reality, S1, S2 (three seen moves)
``ff_z``        false         false         S1 (S1S2 in Z, T's second place after X)
``ff_none_y``   false         false         none (S1S2 in Y, S1 followed T there)
``ff_none_w``   false         false         none (S1S2 in Y, S1 waited in Z)
``tf_y``        true          false         none (S1S2 in Y, S2 = S1 = R)
==============  ============  ============  =====================================

The places of a scenario are a random permutation of the setting's locations, so every
location is equally likely to be each answer. Between the scripted steps, and all through
the story, sentences that do not move anyone (actions, object handling, dialogue,
descriptions, remarks about other places; :mod:`tomstats.stories.narrative`) carry the
length; after ``T``'s final move, ``T`` is named only in sentences that do not place it,
the last of them remarks about ``T``'s *decoy*, a place drawn at random whatever the
answers, until it is the place named most often with ``T`` (:meth:`_Teller.decoy_remarks`;
else ``T``'s final place, named in ``T``'s last move, would win the ties of that count by
being named last, and it is the answer of every true belief).
The gold answers are never taken from the scenario: :mod:`tomstats.stories.coded_tracker` computes
them, and the scenario's expected answers are a cross-check.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tomstats.stories.beliefs import well_defined
from tomstats.stories.coded_tracker import beliefs_along, encode, wm_answer_fast
from tomstats.stories.narrative import (
    ALL_MOVERS,
    OBJECT_BREAKS,
    OBJECT_REMARKS,
    OPENER_MEMORY,
    NaturalSetting,
    Phrases,
    listing,
    near_duplicate,
    nearly_in,
    opener,
    word_set,
)
from tomstats.stories.world import Event, World

__all__ = ["CYCLE", "SCENARIOS", "PlotStory", "Scenario", "tell_story"]


@dataclass(frozen=True)
class Scenario:
    """A belief scenario: scripted steps after the meeting in ``X`` and expected answers.

    ``steps`` are ``(role, place index)`` pairs: the role enters ``places[index]`` (``X``
    is index 0). ``seen`` is the index of the step at which ``S1`` last perceives ``T``
    (``-1``: the meeting); ``answers`` maps ``reality``, ``S1``, ``S2``, ``S1S2`` and
    ``wm`` to place indices. ``T``'s extra unseen moves (``extra_unseen``) come before
    step ``wander`` (``-1``: after the last step).
    """

    name: str
    order1: str
    order2: str
    steps: tuple[tuple[str, int], ...]
    seen: int
    answers: dict[str, int]
    wander: int = -1


# place indices: 0 = X (the meeting place); the others as named in each docstring row
SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    # T: X -> R, seen by S1 and S2
    Scenario("tt", "true", "true", (("T", 1),), 0,
             {"reality": 1, "S1": 1, "S2": 1, "S1S2": 1, "wm": 1}),
    # a filler goes to R; T: X -> R (both see); S1 follows to R, sees T leave for Y, goes
    # to U (4); T: Y -> R unseen (after its extra unseen moves, if any)
    Scenario("ft", "false", "true", (("F", 1), ("T", 1), ("S1", 1), ("T", 2), ("S1", 4),
                                     ("T", 1)), 3,
             {"reality": 1, "S1": 2, "S2": 1, "S1S2": 1, "wm": 1}, wander=5),
    # S2 leaves for W (3) (S1 sees); S1 goes to R (1); S2: W -> Y (2); T: X -> Y (S2
    # sees); S2 leaves for V (4); T: Y -> R (S1 sees it arrive; T's extra moves, unseen,
    # come before)
    Scenario("tf", "true", "false", (("S2", 3), ("S1", 1), ("S2", 2), ("T", 2), ("S2", 4),
                                     ("T", 1)), 5,
             {"reality": 1, "S1": 1, "S2": 2, "S1S2": 0, "wm": 2}, wander=5),
    # S2 leaves for W (4); S1 goes to C (2); S2: W -> B (1); T: X -> B (S2 sees);
    # S2 leaves for V (5); T: B -> C (S1 sees); S1 leaves for U (1); T: C -> D (3) unseen
    Scenario("ff_none", "false", "false", (("S2", 4), ("S1", 2), ("S2", 1), ("T", 1),
                                           ("S2", 5), ("T", 2), ("S1", 1), ("T", 3)), 5,
             {"reality": 3, "S1": 2, "S2": 1, "S1S2": 0, "wm": 1}),
    # T: X -> Y (1) (both see); S2 follows T to Y; S1 goes to R (2); T: Y -> R (S2 sees it
    # leave, S1 sees it arrive): a true belief after two moves, the three never together again
    Scenario("tt2", "true", "true", (("T", 1), ("S2", 1), ("S1", 2), ("T", 2)), 3,
             {"reality": 2, "S1": 2, "S2": 2, "S1S2": 2, "wm": 1}),
    # StorySim: T: X -> Y (1) and S2 follows (S1 sees both); T: Y -> R (2), seen by S2 only
    Scenario("ff_s1", "false", "false", (("T", 1), ("S2", 1), ("T", 2)), 0,
             {"reality": 2, "S1": 1, "S2": 2, "S1S2": 1, "wm": 1}),
    # S2 leaves for W (3) (S1 sees); S1 goes to C (1); T: X -> C (S1 sees);
    # S1 leaves for U (4); T: C -> D (2) unseen
    Scenario("ff_s2", "false", "false", (("S2", 3), ("S1", 1), ("T", 1), ("S1", 4),
                                         ("T", 2)), 2,
             {"reality": 2, "S1": 1, "S2": 0, "S1S2": 0, "wm": 1}),
    # leapfrog: S2 goes ahead to Z (2) (S1 sees); T: X -> Y (1) (S1 sees); S1 follows to Y;
    # T: Y -> Z (S1 sees it leave, S2 sees it arrive, and S1 knows S2 is in Z); S1 goes
    # to R (3); T: Z -> R (S1 sees it arrive, S2 sees it leave): a true belief after three
    # moves
    Scenario("tt3", "true", "true", (("S2", 2), ("T", 1), ("S1", 1), ("T", 2), ("S1", 3),
                                     ("T", 3)), 5,
             {"reality": 3, "S1": 3, "S2": 3, "S1S2": 3, "wm": 1}),
    # leapfrog as tt3 up to T: Y -> Z; then S1 leaves for U (4); T: Z -> D (3), seen by
    # S2 only: S1 thinks S2 thinks T is where S1 last saw it, in Z
    Scenario("ff_z", "false", "false", (("S2", 2), ("T", 1), ("S1", 1), ("T", 2), ("S1", 4),
                                        ("T", 3)), 3,
             {"reality": 3, "S1": 2, "S2": 3, "S1S2": 2, "wm": 1}),
    # T: X -> Y (1) (both see); S2 leaves for W (3) (S1 sees); S1 follows T to Y;
    # T: Y -> Z (2) (S1 sees); S1 leaves for U (4); S2: W -> Z, finds T;
    # T: Z -> D (5) (S2 sees): four different places again, S1S2 in Y
    Scenario("ff_none_y", "false", "false", (("T", 1), ("S2", 3), ("S1", 1), ("T", 2),
                                             ("S1", 4), ("S2", 2), ("T", 5)), 3,
             {"reality": 5, "S1": 2, "S2": 5, "S1S2": 1, "wm": 1}),
    # as ff_none_y, but S1 waits for T in Z (2) instead of following it to Y
    Scenario("ff_none_w", "false", "false", (("T", 1), ("S2", 3), ("S1", 2), ("T", 2),
                                             ("S1", 4), ("S2", 2), ("T", 5)), 3,
             {"reality": 5, "S1": 2, "S2": 5, "S1S2": 1, "wm": 1}),
    # T: X -> Y (1) (both see); S2 leaves for W (3) (S1 sees); S2: W -> Z (2); S1 goes to
    # R (4); T: Y -> Z (S2 sees it arrive); T: Z -> R (S2 sees it leave, S1 sees it
    # arrive): S1 thinks S2 thinks T is in Y (T's extra moves, unseen, come before Z)
    Scenario("tf_y", "true", "false", (("T", 1), ("S2", 3), ("S2", 2), ("S1", 4), ("T", 2),
                                       ("T", 4)), 5,
             {"reality": 4, "S1": 4, "S2": 4, "S1S2": 1, "wm": 1}, wander=4),
)}

#: Probability that a location is a *join place* of a story (key characters' moves into
#: it are told as "joins H", the place unnamed).
P_JOIN_PLACE = 1 / 3
#: Probability that an observer who has not moved yet makes one move before the meeting
#: (so that its first told destination is not the meeting place).
P_WARM_UP = 0.75
#: At most this many move sentences in a row (then a sentence that moves no one).
MAX_MOVE_RUN = 4
#: The object telling carries ``T``'s object on this many more times after ``T``'s last move
#: (drawn uniformly per story; :func:`object_coda`): the world-model answer is ``T``'s first
#: move after the meeting and the scenario fixes ``T``'s moves after it (a ``tt3`` story has
#: exactly two), so with every move of ``T`` told by name, ``T``'s third-last told
#: destination was the answer about 0.33 of the time (chance 0.17) before the selection.
OBJECT_CODA = (0, 1, 2, 3, 4, 5)
#: Extra moves ``T`` makes after the scripted false-belief steps, unseen by ``S1`` and
#: ``S2`` (stories cycle through them), so the believed place is not a fixed step back
#: in ``T``'s told moves.
EXTRA_UNSEEN = (0, 1, 2, 3, 4)

_MAX_STEPS = 8
#: Words a remark about a place takes, about (room kept for the decoy's remarks).
REMARK_WORDS = 10
#: At most this many tries at the remarks that make a decoy the place most named with T.
_MAX_DECOY_REMARKS = 12
#: ``lively`` stories: moves each observer makes after the block (into places the sentence
#: names, where it can), as many as the told-destination rules look back
#: (:mod:`tomstats.stories.audit_rules`: the 1st to 3rd last).
LIVELY_TAIL = 3
#: ``lively``: notes about the places named longest ago, after the observers' tail moves.
LIVELY_NOTES = 2

#: A sentence's mark: the event it tells (-1: none), the characters and the places it names.
Mark = tuple[int, tuple[str, ...], tuple[str, ...]]


def tracker_answers(st: NaturalSetting, characters: Sequence[str], events: Sequence[Event],
                    roles: dict[str, str]) -> dict[str, str | None]:
    """The belief tracker's answers about ``roles["T"]`` after ``events`` (everyone starts
    in the hub): ``reality``, ``S1`` (S1's belief), ``S2``, ``S1S2`` (S1's belief about
    S2's) and ``wm`` (the world-model answer)."""
    s1, s2, t = roles["S1"], roles["S2"], roles["T"]
    world = World(tuple(characters), st.locations, st.edges,
                  {c: st.hub for c in characters})
    coded = encode(world, events)
    reality, first, second = beliefs_along(coded, (s1, s2), t)
    return {"reality": reality, "S1": first, "S2": beliefs_along(coded, (s2,), t)[1],
            "S1S2": second, "wm": wm_answer_fast(coded, s1, s2, t)}

def _keeps_answers(st: NaturalSetting, characters: Sequence[str], events: Sequence[Event],
                   roles: dict[str, str], expected: dict[str, str | None]) -> bool:
    """Whether after ``events`` the tracker still gives the ``expected`` answers and every
    belief question about ``T`` stays well defined (no observer has walked into the place
    where it believes ``T`` is and found it empty: :func:`~tomstats.stories.beliefs.\
well_defined`)."""
    if tracker_answers(st, characters, events, roles) != expected:
        return False
    s1, s2, t = roles["S1"], roles["S2"], roles["T"]
    world = World(tuple(characters), st.locations, st.edges,
                  {c: st.hub for c in characters})
    return all(well_defined(world, events, chain, t) for chain in ((s1,), (s2,), (s1, s2)))


#: Scenarios in the order a design cell cycles through them (story ``r`` takes slot
#: ``r % 8``, and of a slot's alternatives the ``(r // 8) % 3``-th): true beliefs are half
#: of the order-1 (``tt*``, ``tf*``) and half of the order-2 items (``tt*``, ``ft``). Each
#: pair of stories ``(2i, 2i + 1)`` is one true and one false belief at both orders (a
#: ``tt*`` with an ``ff_*``, a ``tf*`` with ``ft``), so the first ``n`` stories of a cell
#: are balanced exactly at even ``n`` and within one story at odd ``n``. Over 24 stories
#: the order-2 answer differs from every simpler question's in 8, and the order-2 false
#: beliefs point at the meeting place ``X`` in 5 of 12, at ``T``'s next place in 4 and at
#: the place after it in 3. ``ft`` needs ``T`` to enter ``R`` twice, which a "most
#: frequent place near ``T``" rule exploits, so it is the rarest.
CYCLE = ("tt|tt3|tt", "ff_none|ff_none_y|ff_none", "tf|tf_y|tf", "ft",
         "tt2|tt2|tt3", "ff_none_w|ff_z|ff_z", "tt3|tt2|tt2", "ff_s1|ff_s2|ff_none_w")


def cycle_scenario(r: int) -> str:
    """The scenario of replicate ``r`` of a cell: slot ``r % 8`` of :data:`CYCLE`, its
    ``(r // 8) % k``-th alternative of ``k``."""
    alts = CYCLE[r % len(CYCLE)].split("|")
    return alts[(r // len(CYCLE)) % len(alts)]


@dataclass(frozen=True)
class PlotStory:
    """A told design story.

    Attributes
    ----------
    events : tuple of Event
        Every move, in order (the tracker's input).
    text : str
        The story told with the characters.
    object_text : str or None
        The same events told with objects for the characters (``objects`` given).
    roles : dict
        ``S1``, ``S2``, ``T`` and the scenario's places ``X``, ``P1`` … ``P5``.
    scenario : str
    expected : dict
        The scenario's answers (``reality``, ``S1``, ``S2``, ``S1S2``, ``wm``) as places.
    critical_span : (int, int)
        Times of the block's first event and of ``T``'s final move.
    critical_position : float or None
        Share of the words outside the block and the opening that come before the block
        (``None`` once woven into a host text).
    mislead_distance : int
        Events between ``S1``'s last perception of ``T`` and ``T``'s final move (0 when
        ``S1`` sees that move).
    block_words : int
        Words of the critical block.
    told : tuple of tuple of str
        Per event, the characters a join names ("Bob joins Alice"; the place unnamed);
        empty when the sentence names the place.
    join_places : tuple of str
        The story's join places (key characters' moves into them are told as joins).
    extra_unseen : int
        Moves ``T`` made after the scripted steps, unseen by ``S1`` and ``S2``.
    object_cast : tuple of str or None
        The characters whose objects the object telling names and moves (a tight length
        leaves out filler characters' objects whole); ``None`` without an object telling.
    object_events : tuple of Event
        The moves the object telling tells, in order: the cast's events, then ``T``'s
        object's coda (:data:`OBJECT_CODA`); empty without an object telling.
    sentences : tuple of str
        The sentences of ``text`` (the opening first).
    marks : tuple of (int, tuple of str, tuple of str)
        Per sentence: the event it tells (``-1``: it moves no one) and the characters and
        places it counts as named (the naming balance).
    block_sentences : (int, int)
        The critical block as a slice of ``sentences``: from the first sentence after the
        words before it to the sentence of ``T``'s final move.
    object_sentences : tuple of str
        The sentences of ``object_text`` (empty without it).
    decoy : str
        ``T``'s decoy, the place ``T``'s remarks after its final move name
        (:meth:`_Teller.decoy_remarks`); ``""`` for a story told without one.
    """

    events: tuple[Event, ...]
    text: str
    object_text: str | None
    roles: dict[str, str]
    scenario: str
    expected: dict[str, str]
    critical_span: tuple[int, int]
    critical_position: float | None
    mislead_distance: int
    block_words: int = 0
    told: tuple[tuple[str, ...], ...] = ()
    join_places: tuple[str, ...] = ()
    extra_unseen: int = 0
    object_cast: tuple[str, ...] | None = None
    sentences: tuple[str, ...] = ()
    marks: tuple[Mark, ...] = ()
    block_sentences: tuple[int, int] = (0, 0)
    object_sentences: tuple[str, ...] = ()
    decoy: str = ""
    object_events: tuple[Event, ...] = ()


class _Teller:
    """Builds events and sentences together (one instance per attempt).

    ``hidden`` is the story's set of *join places*: every move of a key character into one
    of them is told as "joins H" (the place unnamed), every other key move names its place;
    each location is a join place with probability :data:`P_JOIN_PLACE`, independently of
    the scenario, so the share of answers reached only through joins is the same in every
    cell. ``told`` records, per event, the hosts of a join (empty: the place is named).
    """

    def __init__(self, st: NaturalSetting, characters: Sequence[str], roles: dict[str, str],
                 rng: random.Random, density: float, handling: bool = True,
                 hidden: frozenset[str] = frozenset()) -> None:
        self.st, self.rng, self.density = st, rng, density
        self.chars = tuple(characters)
        self.key = (roles["S1"], roles["S2"], roles["T"])
        self.fillers = tuple(c for c in self.chars if c not in self.key)
        self.pos = {c: st.hub for c in self.chars}
        self.came = {c: "" for c in self.chars}
        self.events: list[Event] = []
        self.told: list[tuple[str, ...]] = []
        self.hidden = hidden
        self.ph = Phrases(st, rng, handling)
        intro = st.intro.format(names=listing(self.chars), hub=st.text(st.hub))
        self.sents: list[str] = [intro[:1].upper() + intro[1:]]
        self.words = len(self.sents[0].split())
        self.described: set[str] = set()
        self.plain = density == 0  # the shortest telling: plain moves, few extra sentences
        # the opening names every character, in the hub: counted as any other sentence
        self.named = dict.fromkeys(self.chars, 1)  # sentences naming each character
        self.with_place = {c: {x: int(x == st.hub) for x in st.locations} for c in self.chars}
        self.mentions = {x: int(x == st.hub) for x in st.locations}
        #: character -> the place its remarks name from now on (:meth:`decoy_remarks`)
        self.decoys: dict[str, str] = {}
        self.run = 0  # move sentences in a row
        self.said: set[str] = set()  # no sentence is told twice
        self.wsets = [word_set(self.sents[0])]  # word sets of the sentences
        # per sentence: the event it tells (-1: none) and the characters and places it
        # counts as named (:func:`tomstats.stories.ladder.grow_story` replays them)
        self.marks: list[Mark] = [(-1, self.chars, (st.hub,))]

    # ---- primitives
    def say(self, s: str, *, move: bool = False) -> None:
        self.said.add(s)
        self.sents.append(s)
        self.ph.told(s)
        self.marks.append((len(self.events) - 1 if move else -1, (), ()))
        self.wsets.append(word_set(s))
        self.words += len(s.split())
        self.run = self.run + 1 if move else 0

    def _count(self, s: str, who: Sequence[str], places: Sequence[str]) -> None:
        """Count the names of the sentence just said (and record them in its mark)."""
        self.marks[-1] = (self.marks[-1][0], tuple(who), tuple(places))
        self._tally(who, places, 1)

    def _tally(self, who: Sequence[str], places: Sequence[str], sign: int) -> None:
        for c in who:
            self.named[c] += sign
            for p in places:
                self.with_place[c][p] += sign
        for p in places:
            self.mentions[p] += sign

    def unsay(self, n: int) -> None:
        """Take back every sentence from the ``n``-th on (sentences that move no one: a
        decor sentence that overflows the length), their names uncounted."""
        for i in range(len(self.sents) - 1, n - 1, -1):
            event, who, places = self.marks[i]
            if event >= 0:
                raise RuntimeError(f"sentence {i} tells a move; it cannot be taken back")
            self._tally(who, places, -1)
            self.words -= len(self.sents[i].split())
            self.said.discard(self.sents[i])
        del self.sents[n:], self.wsets[n:], self.marks[n:]
        self.ph.recall(self.sents)
        self.run = 0
        while self.run < len(self.marks) - 1 and self.marks[-1 - self.run][0] >= 0:
            self.run += 1

    def repeats(self, s: str, *, anywhere: bool = True) -> bool:
        """Whether ``s`` was told already (``anywhere``: in the whole story) or nearly
        repeats one of the last ten sentences (:func:`~tomstats.stories.narrative.nearly_in`,
        as the lint's near-duplicate check)."""
        if anywhere and s in self.said:
            return True
        return nearly_in(word_set(s), self.wsets[-10:])

    def decor_say(self, make: Callable[[], str], who: Sequence[str] = (),
                  places: Sequence[str] = ()) -> None:
        """Say a sentence that moves no one, redrawn (up to 6 times) while it nearly
        repeats one of the last ten sentences."""
        s = make()
        for _ in range(8):
            if not self.repeats(s):
                break
            s = make()
        else:
            return
        self.say(s)
        self._count(s, who, places)

    def move(self, who: str, dest: str, *, plain: bool = False,
             joins: Sequence[str] | None = None, p_join: float = 0.5) -> int:
        """``who`` enters ``dest``. A key character joins (place unnamed) exactly when
        ``dest`` is a join place; a filler joins someone there with probability ``p_join``
        (``joins``: these hosts, always)."""
        hosts = [c for c in self.chars if c != who and self.pos[c] == dest]
        if joins is None:
            if who in self.key:
                joins = self.rng.sample(hosts, min(len(hosts), 2)) \
                    if dest in self.hidden else ()
                if dest in self.hidden and not joins:
                    raise RuntimeError(f"{who} cannot join anyone in {dest}")
            else:
                joins = self.rng.sample(hosts, min(len(hosts), 2)) \
                    if hosts and self.rng.random() < p_join else ()
        src = self.pos[who]
        if src == dest:
            raise RuntimeError(f"{who} is already in {dest}")
        if self.run >= MAX_MOVE_RUN:  # no long runs of bare moves
            c = self._least(self.named)
            self.decor_say(lambda: self.ph.short(c), (c,))
        t = len(self.events)
        self.events.append(Event(t, "enter", who, dest, src))
        self.came[who], self.pos[who] = src, dest
        joins = tuple(joins)
        s = self.ph.joins(who, joins) if joins else \
            self.ph.move(who, dest, plain=plain or self.plain)
        for k in range(12):  # a repeat is told otherwise: another form, other hosts
            # (a sentence told long ago will do after six tries, a near-repeat of the last
            # ten never when another wording exists)
            if not self.repeats(s, anywhere=k < 6):
                break
            if joins and k >= 4:
                if who in self.key:  # a key character joins whoever else is there
                    joins = tuple(self.rng.sample(hosts, self.rng.randint(1, min(2, len(hosts)))))
                else:  # a filler's move names the place instead
                    joins = ()
            s = self.ph.joins(who, joins) if joins else self.ph.move(who, dest, plain=bool(k % 2))
        self.told.append(joins)
        self.say(s, move=True)
        if joins:
            self._count(s, (who, *joins), ())
        else:
            self._count(s, (who,), (dest,))
        return t

    def can_enter(self, who: str, dest: str) -> bool:
        """Whether ``who`` may enter ``dest`` now (a join place needs someone there)."""
        if who not in self.key or dest not in self.hidden:
            return True
        return any(self.pos[c] == dest for c in self.chars if c != who)

    def _dests(self, who: str, avoid: Sequence[str] = ()) -> list[str]:
        here, back = self.pos[who], self.came[who]
        return [x for x in self.st.locations if x != here and x != back and x not in avoid
                and self.can_enter(who, x)]

    def filler_move(self, prefer: Sequence[str] = ()) -> None:
        """A filler moves; a quarter of the time into one of ``prefer`` when it can (after the
        block: the asked places, which the observers avoid, so that they are mentioned as
        often as the others)."""
        who = self.rng.choice(self.fillers)
        opts = self._dests(who)
        liked = [x for x in opts if x in prefer]
        self.move(who, self.rng.choice(liked if liked and self.rng.random() < 0.25 else opts))

    def host(self, dest: str) -> None:
        """Send a filler to the join place ``dest`` unless someone is there already."""
        if dest not in self.hidden or any(self.pos[c] == dest for c in self.chars):
            return
        fs = [c for c in self.fillers if self.pos[c] != dest]
        self.move(self.rng.choice(fs), dest, p_join=0.0)

    def _triple(self, who: str, dest: str) -> bool:
        return all((dest if c == who else self.pos[c]) == dest for c in self.key)

    def key_move(self, who: str, avoid: Sequence[str] = ()) -> bool:
        opts = [x for x in self._dests(who, avoid) if not self._triple(who, x)]
        if not opts:
            return False
        self.move(who, self.rng.choice(opts))
        return True

    def leave(self, who: str, avoid: Sequence[str]) -> None:
        """Move ``who`` somewhere outside ``avoid``, sending a host to a join place first
        when needed."""
        opts = [x for x in self.st.locations if x not in (self.pos[who], self.came[who])
                and x not in avoid and not self._triple(who, x)]
        if not opts:
            raise ValueError(f"{who} cannot leave {self.pos[who]}")
        dest = self.rng.choice(opts)
        self.host(dest)
        self.move(who, dest)

    # ---- sentences that move no one
    def _least(self, counts: dict[str, int]) -> str:
        """A random one of the least counted keys (keeps counts level)."""
        low = min(counts.values())
        return self.rng.choice([k for k, v in counts.items() if v <= low])

    def decor(self) -> None:
        """A sentence that moves no one, about the least-named character (so that the
        questioned characters are named about as often as the others) and, when it names
        a place, about the place least named with that character."""
        rng, ph = self.rng, self.ph
        who = self._least(self.named)
        u = rng.random()
        if u < 0.22:
            self.decor_say(lambda: ph.action(who), (who,))
        elif u < 0.42:
            mates = [c for c in self.chars if c != who and self.pos[c] == self.pos[who]]
            if mates:
                b = rng.choice(mates)
                self.decor_say(lambda: ph.dialogue(who, b), (who, b))
            else:
                self.decor_say(lambda: ph.action(who), (who,))
        elif u < 0.62:
            self.about(who)
        elif u < 0.82:
            loc = self._least(self.mentions)
            self.decor_say(lambda: ph.note(loc), (), (loc,))
        elif who not in self.described or rng.random() < 0.2:
            self.described.add(who)
            self.decor_say(lambda: ph.looks(who), (who,))
        else:
            self.decor_say(lambda: ph.action(who), (who,))

    def about(self, who: str) -> None:
        """``who`` talks about the place least named with it so far (its decoy, once it has
        one: :meth:`decoy_remarks`)."""
        loc = self.decoys.get(who) or self._least(self.with_place[who])
        self.decor_say(lambda: self.ph.about(who, loc), (who,), (loc,))

    def stalest(self) -> str:
        """A random one of the locations named longest ago (in the sentences' marks; the
        opening names the hub)."""
        last = dict.fromkeys(self.st.locations, -1)
        for i, (_event, _who, places) in enumerate(self.marks):
            for p in places:
                last[p] = i
        return self._least(last)

    def decoy_lead(self, who: str, place: str) -> int:
        """How many more sentences must name ``who`` with ``place`` for ``place`` to be
        named with ``who`` at least as often as any other place."""
        counts = self.with_place[who]
        return max(counts[x] for x in counts if x != place) - counts[place]

    def decoy_remarks(self, who: str, place: str, at_least: int = 1) -> None:
        """Remarks of ``who`` about ``place`` (``at_least`` of them) until ``place`` is
        named with ``who`` at least as often as any other place; every later remark of
        ``who`` names it too. Told last, it is then the place named most often in the
        sentences that name ``who`` (ties go to the place named last)."""
        self.decoys[who] = place
        for _ in range(_MAX_DECOY_REMARKS):
            if at_least <= 0 and self.decoy_lead(who, place) <= 0:
                return
            n = len(self.sents)
            self.about(who)
            at_least -= len(self.sents) > n

    def decor_run(self, mean: float) -> None:
        """A geometric number of decor sentences with mean ``mean × density``."""
        m = mean * self.density
        p = m / (1 + m)
        while self.rng.random() < p:
            self.decor()

    def beat(self, phase: str, safe: dict[str, set[str]] | None = None,
             t_avoid: Sequence[str] = ()) -> None:
        """One free move (a filler or, sometimes, a key character) and some decor."""
        rng = self.rng
        if rng.random() < 0.3:
            if phase == "before":
                who = rng.choice(self.key)
                if self.key_move(who):
                    self.decor_run(1.3)
                    return
            elif safe is not None:
                who = rng.choice(self.key[:2])
                if self.key_move(who, avoid=sorted(safe[who])):
                    self.decor_run(1.3)
                    return
        self.filler_move(sorted(set().union(*safe.values())) if safe else ())
        self.decor_run(1.3)


def _key_places(st: NaturalSetting, teller: _Teller, rng: random.Random) -> list[str]:
    """``X`` (not where ``S2`` or ``T`` is) and the other five places in random order."""
    _s1, s2, t = teller.key
    xs = [x for x in st.locations if x not in (teller.pos[s2], teller.pos[t])]
    x = rng.choice(xs)
    rest = [p for p in st.locations if p != x]
    rng.shuffle(rest)
    return [x, *rest]


def tell_story(st: NaturalSetting, characters: Sequence[str], scenario: str,
               target_words: int, *, critical_position: float, mislead_distance: int,
               rng: random.Random, tolerance: float = 0.02,
               objects: Sequence[str] | None = None, density: float = 1.0,
               places: Sequence[str] | None = None,
               block_words: float | None = None, handling: bool = True,
               extra_unseen: int = 0, cast: Sequence[str] | None = None,
               join_places: Sequence[str] | None = None, lively: bool = False) -> PlotStory:
    """Tell one design story of ``target_words`` ± ``tolerance`` (see the module docstring).

    Parameters
    ----------
    st : NaturalSetting
    characters : sequence of str
        The cast; ``S1``, ``S2`` and ``T`` are drawn from it.
    scenario : str
        A key of :data:`SCENARIOS`.
    target_words : int
    critical_position : float
        Where the block starts: the share (0–1) of the free words told before it.
    mislead_distance : int
        Events between ``S1``'s last perception of ``T`` and ``T``'s final move, for the
        scenarios in which ``S1``'s belief is false.
    rng : random.Random
    objects : sequence of str, optional
        Object names for the characters: the same events are also told with them.
    density : float
        Decor sentences per move, relative to the default (lower: more moves per word).
    places : sequence of str, optional
        The scenario's places (``X`` first), a permutation of the setting's locations; by
        default ``X`` is drawn among the places where neither ``S2`` nor ``T`` is and the
        rest shuffled. Given places let a design balance the answers exactly.
    block_words : float, optional
        Expected words of the critical block (default: a rough estimate); a second telling
        with the first one's ``block_words`` lands closer to ``critical_position``.
    handling : bool
        Whether characters handle objects (cups, maps, …) in sentences that move no one.
    extra_unseen : int
        False beliefs (at order 1 or 2): moves ``T`` makes after the scripted steps or
        before step ``Scenario.wander`` (``ft``: before it returns; ``tf``, ``tf_y``:
        before ``S1`` sees it arrive), unseen by ``S1`` and ``S2`` and never into a
        believed place (at order 1 false they count towards the mislead distance).
    cast : (str, str, str), optional
        ``S1``, ``S2`` and ``T`` (default: drawn); the two versions of a pair share them.
    join_places : sequence of str, optional
        The story's join places (default: each location with probability
        :data:`P_JOIN_PLACE`).
    lively : bool
        ``T`` moves once before the block (outside it, not into the scenario's final
        place of ``T``) if it has not moved yet, an
        observer's warm-up move avoids its first scripted destination, and after the block
        up to :data:`LIVELY_NOTES` place notes name the places named longest ago, then
        ``S1`` and ``S2`` move up to :data:`LIVELY_TAIL` times each, as the length allows,
        into any place where the move leaves every answer of the tracker as it is (asked
        places included: avoided, they would be the places the observers never go), however
        short the story: the told moves of the questioned characters then do not start at
        the meeting nor end at their last scripted step, as in a long story, and the place
        of an outdated belief is not the one named longest ago. The shortest
        step of a length ladder (:mod:`tomstats.stories.ladder`), whose events every
        longer step keeps, is told so, and so is every story of the design of at most
        :data:`~tomstats.stories.items_design.LIVELY_WORDS` words (no beat follows the
        block of so short a story: without the tail, an observer who saw T's move would
        end where T went).

    Raises
    ------
    ValueError
        When the story cannot be told within the length window (too short a target).
    """
    from tomstats.stories.render import length_window

    sc = SCENARIOS[scenario]
    lo, hi = length_window(target_words, tolerance)
    s1, s2, t = rng.sample(list(characters), 3) if cast is None else cast
    roles = {"S1": s1, "S2": s2, "T": t}
    hidden = frozenset(x for x in st.locations if rng.random() < P_JOIN_PLACE) \
        if join_places is None else frozenset(join_places)
    tl = _Teller(st, characters, roles, rng, density, handling, hidden)
    # words the block and the tail need, roughly: ~8 words per scripted or filler move;
    # the same for every scenario, so the two versions of a story share its beginning
    block_moves = 3 + 2 * _MAX_STEPS + mislead_distance
    reserve = (block_moves * 8 * (1 + 0.9 * density) if block_words is None
               else block_words) + 40 + ((2 * LIVELY_TAIL + LIVELY_NOTES) * 9 if lively else 0)
    free = max(0.0, target_words - tl.words - reserve)
    stop_before = tl.words + critical_position * free
    # T's decoy: a place drawn at random, whatever the scenario, that T's last remarks name
    # (the words they will take, beyond what the words after the block hold, are kept)
    decoy = rng.choice(st.locations)
    tail_room = (1 - critical_position) * free
    while tl.words + 8 + max(0.0, REMARK_WORDS * (2 + max(0, tl.decoy_lead(t, decoy)))
                             - tail_room) < stop_before:
        tl.beat("before")
    if lively and not any(e.actor == t for e in tl.events):
        # into a named place, where it can, and not the scenario's final place of T (named
        # twice with T, it would be the place most named with T in a short story)
        final_place = [] if places is None else [places[sc.answers["reality"]]]
        if not tl.key_move(t, avoid=sorted({*hidden, *final_place})):
            tl.key_move(t, avoid=final_place)
        tl.decor_run(0.6)
    pre_words, pre_sents = tl.words, len(tl.sents)
    if places is None:
        places = _key_places(st, tl, rng)
    else:
        places = list(places)
        if sorted(places) != sorted(st.locations):
            raise ValueError(f"places must be a permutation of {st.locations}, got {places}")
    # S2 and T must arrive in X while S1 is there, and no one walks straight back into X
    # (nor, after the meeting, straight back to where it came from: its first scripted
    # step must not lead to the place it arrives from)
    code = {s1: "S1", s2: "S2", t: "T"}
    for c in (s1, s2):  # observers have been somewhere before the meeting, mostly
        if not tl.plain and not any(e.actor == c for e in tl.events) \
                and rng.random() < P_WARM_UP:
            # (lively: not where its first scripted step leads, which would make that
            # place its first told destination as well)
            first_step = [places[i] for r, i in sc.steps if r == code[c]][:1] if lively else []
            tl.key_move(c, avoid=[places[0], *first_step])
    for c in (s1, s2, t):
        nxt = next((places[i] for r, i in sc.steps if r == code[c]), None)
        for _ in range(3):
            if (c != s1 and tl.pos[c] == places[0]) or \
                    (tl.came[c] == places[0] and tl.pos[c] != places[0]) or \
                    (tl.pos[c] == nxt and tl.pos[c] != places[0]):
                if not tl.key_move(c, avoid=[places[0], nxt or places[0]]):
                    tl.leave(c, avoid=[places[0], nxt or places[0]])
    roles.update({"X": places[0], **{f"P{i}": p for i, p in enumerate(places[1:], 1)}})
    who = {"S1": s1, "S2": s2, "T": t}
    first = len(tl.events)
    # the meeting: S1 in X first, then S2 and T (random order)
    if tl.pos[s1] != places[0]:
        tl.host(places[0])
        tl.move(s1, places[0], plain=True)
        tl.decor_run(0.5)
    for c in rng.sample([s2, t], 2):
        tl.move(c, places[0], plain=True)
        if not tl.plain:
            tl.decor()
        tl.decor_run(0.5)
    seen_time = len(tl.events) - 1
    expected = {k: places[v] for k, v in sc.answers.items()}
    beliefs = {expected["S1"], expected["S2"], expected["S1S2"]}
    extra = extra_unseen if "false" in (sc.order1, sc.order2) else 0

    def plan(start: str, came: str, n: int) -> list[str]:
        """False beliefs: up to ``n`` further places for T from ``start``, unseen by S1 and
        S2 (where they will be) and never a believed place; before a step that S1 sees
        (``tf``, ``tf_y``) never a place either observer enters in the scenario either
        (T would arrive from where S1 believes S2 to be)."""
        path: list[str] = []
        observed = {places[i] for r, i in sc.steps if r in ("S1", "S2")} \
            if sc.order1 == "true" else set()
        for _ in range(n):
            free = [x for x in st.locations if x not in (start, tl.pos[s1], tl.pos[s2])
                    and x not in beliefs and x not in observed]
            # never straight back where it came from (fewer moves rather than T pacing
            # back and forth, which a selection of tellings would otherwise favour)
            opts = [x for x in free if x != came]
            if not opts:
                break
            came, start = start, rng.choice(opts)
            path.append(start)
        return path

    def wander(path: Sequence[str]) -> None:
        for dest in path:
            tl.host(dest)
            tl.decor_run(0.6)
            tl.move(t, dest, plain=True)

    path: list[str] = []
    for k, (role, idx) in enumerate(sc.steps):
        last = k == len(sc.steps) - 1
        if k == sc.wander:  # T wanders before this step
            path = plan(tl.pos[t], tl.came[t], extra)
        elif last and sc.wander < 0 and sc.order1 == "false":  # after its last move
            path = plan(places[idx], tl.pos[t], extra)
        if last and sc.order1 == "false":
            for _ in range(mislead_distance - len(path) - (len(tl.events) - seen_time - 1)):
                tl.filler_move()
                tl.decor_run(0.6)
        elif rng.random() < 0.5 * min(density, 1.0):
            tl.filler_move()
            tl.decor_run(0.6)
        if role == "F":  # a filler goes ahead, so that the next key arrival may be a join
            fs = [c for c in tl.fillers if tl.pos[c] != places[idx]]
            if fs and len(fs) == len(tl.fillers):  # nobody is there yet
                tl.move(rng.choice(fs), places[idx], p_join=0.0)
                tl.decor_run(0.6)
            continue
        if k == sc.wander:
            wander(path)
        tl.host(places[idx])
        tm = tl.move(who[role], places[idx], plain=True)
        if k == sc.seen:
            seen_time = tm
        if not last:
            tl.decor_run(0.6)
    if sc.wander < 0:
        wander(path)
    expected["reality"] = tl.pos[t]
    final = len(tl.events) - 1
    block_sents = (pre_sents, len(tl.sents))
    block_words = tl.words - pre_words
    asked = {expected[k] for k in ("reality", "S1", "S2", "S1S2")}
    safe = {s1: asked, s2: asked}
    if lively:
        # the places named longest ago are named again, whichever they are (in a short
        # story an outdated belief's place is otherwise the one named longest ago), then the
        # observers move on: their last told destinations are not their scripted ones
        for _ in range(LIVELY_NOTES):
            if tl.words + 36 > hi:  # room for the note, a move and two remarks about T
                break
            loc = tl.stalest()
            tl.decor_say(lambda loc=loc: tl.ph.note(loc), (), (loc,))
        # (into any place, asked or not, where the move leaves every answer as it is: kept
        # out of the asked places, the observers would point the reader at those)
        for c in rng.sample([s1, s2] * LIVELY_TAIL, 2 * LIVELY_TAIL):
            if tl.words + 27 > hi:  # room for the move and the two remarks about T
                break
            tl.decor_run(0.3)
            opts = [x for x in tl._dests(c) if not tl._triple(c, x)
                    and _keeps_answers(st, characters, [*tl.events, Event(
                        len(tl.events), "enter", c, x, tl.pos[c])], roles, expected)]
            named = [x for x in opts if x not in hidden]
            if named or opts:
                tl.move(c, rng.choice(named or opts))
    tail_about = 0
    while tl.words + 40 + REMARK_WORDS * max(0, tl.decoy_lead(t, decoy)) < lo:
        if tl.plain:  # the shortest telling moves no one after the block
            tl.decor()
        else:
            tl.beat("after", safe)
        if rng.random() < 0.15:
            tl.about(t)
            tail_about += 1
    # T is named after its final move in remarks about places (two at least), so that the
    # places of the last sentences naming T are not T's last moves; the last of them name
    # the decoy until it is the place named most often with T (T's final place would
    # otherwise be: named in T's last move, it wins the ties by being named last)
    tl.decoy_remarks(t, decoy, at_least=max(1, 2 - tail_about))
    _fit(tl, lo, hi)
    if not lo <= tl.words <= hi:
        raise ValueError(f"cannot tell a {scenario!r} story in {target_words} words "
                         f"(±{tolerance:.0%}): {tl.words} words")
    outside = tl.words - len(tl.sents[0].split()) - block_words
    pos = (pre_words - len(tl.sents[0].split())) / outside if outside > 0 else 0.0
    mislead = max(0, final - seen_time - 1) if sc.order1 == "false" else 0
    obj_sents: list[str] = []
    obj_told = None
    obj_events: tuple[Event, ...] = ()
    if objects is not None:
        obj_sents, obj_told, obj_events = _object_text(st, characters, objects, tl.events,
                                                       lo, hi, rng, t, tl.key)
    return PlotStory(tuple(tl.events), " ".join(tl.sents),
                     " ".join(obj_sents) if objects is not None else None, roles, scenario,
                     expected, (first, final), round(pos, 4), mislead, block_words,
                     tuple(tl.told), tuple(sorted(hidden)), len(path), obj_told,
                     tuple(tl.sents), tuple(tl.marks), block_sents, tuple(obj_sents),
                     decoy=decoy, object_events=obj_events)


def _fit(tl: _Teller, lo: int, hi: int) -> None:
    """Add sentences that move no one until the story is in ``[lo, hi]`` words."""
    for _ in range(200):
        if tl.words >= lo:
            return
        room = hi - tl.words
        for _try in range(12):
            n = len(tl.sents)
            tl.decor()
            if tl.words <= hi:
                break
            tl.unsay(n)
        else:
            s = tl.ph.fill(max(1, lo - tl.words), room)
            if s is None:
                return
            tl.say(s)


def object_coda(st: NaturalSetting, events: Sequence[Event], key: Sequence[str],
                rng: random.Random, n: int | None = None) -> list[Event]:
    """``events`` with ``T``'s object carried on after its last move: ``n`` more moves of
    ``T`` (``key`` is ``(S1, S2, T)``; by default ``n`` is drawn from :data:`OBJECT_CODA`),
    placed at random among the events after ``T``'s last move (later events' times shift
    up by the moves placed before them), each into a place other than where ``T`` is.

    The three never meet again (a coda that would let them is drawn anew, else told after
    every event, never into a place where ``S1`` and ``S2`` both are), so the world-model
    answer, ``T``'s first move after the one meeting, is unchanged, while the number of
    ``T``'s moves after it no longer follows from the scenario. Everyone starts in the hub.
    """
    s1, s2, t = key
    n = rng.choice(OBJECT_CODA) if n is None else n
    last = max((i for i, e in enumerate(events) if e.actor == t), default=-1)
    if n == 0 or last < 0:
        return list(events)
    tail = len(events) - last - 1
    for attempt in range(6):
        # the last attempt tells the coda after every event (the three cannot meet then)
        slots = sorted(rng.randrange(tail + 1) for _ in range(n)) if attempt < 5 else [tail] * n
        got = _with_coda(st, events, (s1, s2, t), last, slots, rng)
        if got is not None:
            return got
    return list(events)  # never: the last attempt cannot fail


def _with_coda(st: NaturalSetting, events: Sequence[Event], key: tuple[str, str, str],
               last: int, slots: Sequence[int], rng: random.Random) -> list[Event] | None:
    """``events`` with a move of ``T`` before tail event ``slots[j]`` (``slots`` sorted;
    the tail: the events after index ``last``; a slot past it, after every event), or
    ``None`` when the three would meet again."""
    s1, s2, t = key
    pos = {s1: st.hub, s2: st.hub, t: st.hub}
    out: list[Event] = []
    pending = list(slots)

    def carry(upto: int) -> None:  # T's coda moves placed before tail event ``upto``
        while pending and pending[0] <= upto:
            pending.pop(0)
            both = pos[s1] if pos[s1] == pos[s2] else None
            dest = rng.choice([x for x in st.locations if x not in (pos[t], both)])
            out.append(Event(out[-1].time + 1, "enter", t, dest, pos[t]))
            pos[t] = dest

    for i, e in enumerate(events):
        if i > last:
            carry(i - last - 1)
        shift = len(out) - i  # the coda moves told so far
        out.append(dataclasses.replace(e, time=e.time + shift) if shift else e)
        if e.actor in pos and e.action == "enter":
            pos[e.actor] = e.location
            if i > last and pos[s1] == pos[s2] == pos[t]:
                return None
    carry(len(events))
    return out


def _object_text(st: NaturalSetting, characters: Sequence[str], objects: Sequence[str],
                 events: Sequence[Event], lo: int, hi: int, rng: random.Random,
                 target: str, key: Sequence[str] = ()
                 ) -> tuple[list[str], tuple[str, ...], tuple[Event, ...]]:
    """The same events told with objects for the characters, carried by people.

    Each move is one sentence, a person carrying the object to the place ("A porter takes
    the red ball to the ditch."), with a short sentence ("Time passes.") after every
    :data:`MAX_MOVE_RUN` of them; after the story's events ``target``'s object is carried
    on (:func:`object_coda`). When that does not fit ``hi`` words (a tight cell), the
    objects of filler characters are left out whole, those with the most moves first, then
    the coda is drawn anew a move shorter, until it fits: the key characters (``key``,
    ``(S1, S2, T)``) and every move of a told object stay, so the world-model answer (it
    reads only the key characters' moves up to ``T``'s first move after their meeting) is
    unchanged. Place notes pad the story to ``lo`` words, spread so that no more than
    :data:`MAX_MOVE_RUN` move sentences follow each other. Two remarks at the end, room
    allowing, name ``target``'s object beside the places it was taken to least ("A porter
    thinks of taking the cup to the cave, but leaves it where it is.").

    Returns
    -------
    (list of str, tuple of str, tuple of Event)
        The sentences, the characters whose objects it tells, and the moves it tells.
    """
    names = dict(zip(characters, objects, strict=False))
    ph = Phrases(st, rng)
    movers = ph.movers()
    breaks = list(OBJECT_BREAKS)
    n_moves = Counter(e.actor for e in events)
    fillers = sorted((c for c in characters if c not in key),
                     key=lambda c: (-n_moves[c], characters.index(c)))
    told = list(characters)
    told_events = object_coda(st, events, key, rng) if key else list(events)
    coda = len(told_events) - len(events)
    while True:
        kept = [e for e in told_events if e.actor in told]
        intro = f"{_cap(listing([names[c] for c in told]))} are in {st.text(st.hub)}."
        sents: list[str] = []
        for e in kept:
            for _attempt in range(12):  # no near-repeat of one of the last ten sentences
                x = ph.object_move(rng.choice(movers), names[e.actor], e.location)
                if not any(near_duplicate(x, y) for y in sents[-10:]):
                    break
            sents.append(x)
        n_breaks = max(0, (len(sents) - 1) // MAX_MOVE_RUN)
        words = len(intro.split()) + sum(len(x.split()) for x in sents) \
            + n_breaks * max(len(b.split()) for b in breaks)
        if words <= hi:
            break
        dropped = next((c for c in fillers if c in told), None)
        if dropped is not None:
            told.remove(dropped)
            continue
        if coda:  # a coda one move shorter, drawn anew
            coda -= 1
            told_events = object_coda(st, events, key, rng, coda)
            continue
        raise ValueError(f"the events told with objects need {words} words, more than "
                             f"{hi}")
        told.remove(dropped)
    out = [intro]
    words = len(intro.split()) + sum(len(x.split()) for x in sents)
    for j, x in enumerate(sents):
        if j and j % MAX_MOVE_RUN == 0:
            b = rng.choice([b for b in breaks if b not in out[-10:]] or breaks)
            out.append(b)
            words += len(b.split())
        out.append(x)
    # remarks name T's object beside places it is not taken to
    x = names[target]
    near = {p: sum(1 for e in kept if e.actor == target and e.location == p)
            for p in st.locations}
    for form in rng.sample(OBJECT_REMARKS, 2):
        loc = min(st.locations, key=lambda p: (near[p], rng.random()))
        near[loc] += 1
        s = form.format(p=rng.choice(movers), x=x, l=st.text(loc))
        if words + len(s.split()) <= hi:
            out.append(s)
            words += len(s.split())
    return (pad_object_sentences(out, st, [names[c] for c in told], lo, hi, ph), tuple(told),
            tuple(kept))


def pad_object_sentences(sents: Sequence[str], st: NaturalSetting, objects: Sequence[str],
                         lo: int, hi: int, ph: Phrases) -> list[str]:
    """``sents`` (an object telling) with place notes and remarks about ``objects`` that
    move nothing inserted until it has ``lo`` … ``hi`` words: first where they break the
    longest run of move sentences (:data:`MAX_MOVE_RUN` or more), then anywhere after the
    opening; no sentence is told twice nor nearly repeats one within ten."""
    rng, movers = ph.rng, ph.movers()
    out = list(sents)
    words = sum(len(x.split()) for x in out)
    tries = 0
    said = set(out)
    while words < lo and tries < 5000:
        tries += 1
        if rng.random() < 0.5:
            s = ph.note(rng.choice(st.locations))
        else:  # a remark about a thing and a place that moves nothing
            s = rng.choice(OBJECT_REMARKS).format(p=rng.choice(movers),
                                                  x=rng.choice(objects),
                                                  l=st.text(rng.choice(st.locations)))
        if s in said:
            continue
        if words + len(s.split()) > hi:
            continue
        runs = _longest_gap(out)
        at = runs if runs is not None else rng.randrange(1, len(out) + 1)
        if any(near_duplicate(s, x) for x in out[max(0, at - 10):at + 10]):
            continue
        op = opener(s)
        if op is not None and op in map(opener, out[max(0, at - OPENER_MEMORY):at + OPENER_MEMORY]):
            continue
        out.insert(at, s)
        said.add(s)
        words += len(s.split())
    if words < lo:
        raise ValueError(f"could not pad the object story to {lo} words")
    return out


def _longest_gap(sents: Sequence[str]) -> int | None:
    """Where to break the longest run of move sentences (``None``: no run is too long)."""
    best_len, best_at, run, start = 0, None, 0, 1
    for i in range(1, len(sents)):
        if not sents[i].startswith(ALL_MOVERS):
            run = 0
            continue
        if run == 0:
            start = i
        run += 1
        if run > best_len:
            best_len, best_at = run, start + run // 2
    return best_at if best_len >= MAX_MOVE_RUN else None


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]
