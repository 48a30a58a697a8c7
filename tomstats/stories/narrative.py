"""Natural worlds and sentence forms for the design stories.

The three StorySim settings (:mod:`tomstats.stories.settings`) keep their ``room_1``-style
graphs for hand-written storyboards. The design item set tells its stories in *natural*
versions of them: places with ordinary names ("the kitchen", "the old well", "the budget
call"), every place reachable from every other (so the hub is never a forced stop), and
many sentence forms:

- moves, in several wordings, with or without an adverbial ("after lunch", "humming");
- non-moving actions (sitting down, opening a window), object handling (picking up a cup),
  short descriptions of places and people, dialogue between characters who share a place,
  and thoughts or remarks about other places.

Only moves change the world; every other sentence leaves the belief tracker's state as it
is, so gold answers still come from the tracker alone. A sentence never says or implies
where a character is *not*, and remarks about a place ("Bob says that the cellar is
cold") never place the speaker there.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NATURAL_SETTINGS", "NaturalSetting", "natural_setting"]


@dataclass(frozen=True)
class NaturalSetting:
    """A setting with natural place names, a complete location graph and sentence forms.

    Parameters
    ----------
    name : {"rooms", "field", "calls"}
    hub : str
        Where everyone starts.
    places : tuple of str
        The other locations.
    moves : tuple of str
        Templates of a move (``{a}`` actor, ``{l}`` place as written).
    place_notes : tuple of str
        Descriptions of a place (``{l}``, ``{L}`` capitalised).
    intro : str
        Opening sentence (``{names}``, ``{hub}``).
    same_place : str
        "the same room" etc., for the world-model questions.
    instructions : str
        The setting's rules for the prompt.
    """

    name: str
    hub: str
    places: tuple[str, ...]
    moves: tuple[str, ...]
    place_notes: tuple[str, ...]
    intro: str
    same_place: str
    instructions: str

    @property
    def locations(self) -> tuple[str, ...]:
        """All locations, hub first."""
        return (self.hub, *self.places)

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        """The complete directed graph: every place can be entered from every other."""
        locs = self.locations
        return tuple((a, b) for a in locs for b in locs if a != b)

    def text(self, location: str) -> str:
        """How ``location`` is written ("the kitchen")."""
        return f"the {location}"


_RULES = ("Note that all characters start in {hub}. Any place can be reached directly from "
          "any other. Characters in the same {unit} {sense} each other and {sense} where "
          "someone goes when they leave; characters in different {units} cannot {sense} "
          "each other. When someone joins or goes to be with others, they go to the {unit} "
          "where those others are. Talking or thinking about a place does not take anyone "
          "there. There is enough information to answer every question.")

_MOVES_ROOMS = (
    "{a} walks into {l}.", "{a} goes into {l}.", "{a} heads to {l}.",
    "{a} wanders over to {l}.", "{a} steps into {l}.", "{a} makes their way to {l}.",
    "{a} slips into {l}.", "{a} moves on to {l}.")
_MOVES_FIELD = (
    "{a} climbs down into {l}.", "{a} crawls over to {l}.", "{a} scrambles into {l}.",
    "{a} walks over to {l}.", "{a} heads for {l}.", "{a} makes their way to {l}.",
    "{a} clambers across to {l}.", "{a} drops down into {l}.")
_MOVES_CALLS = (
    "{a} joins {l}.", "{a} dials into {l}.", "{a} switches over to {l}.",
    "{a} connects to {l}.", "{a} hops on {l}.", "{a} moves on to {l}.",
    "{a} clicks through to {l}.", "{a} logs into {l}.")

_NOTES_ROOMS = (
    "{L} smells of fresh bread.", "{L} has a creaky wooden floor.",
    "The curtains in {l} are drawn halfway.", "A clock ticks somewhere in {l}.",
    "{L} is warmer than the rest of the house.", "Sunlight falls across {l}.",
    "There is a pile of old newspapers in {l}.", "{L} was painted blue last year.",
    "A faint draught runs through {l}.", "The lamp in {l} flickers now and then.",
    "{L} is cluttered with boxes from the move.", "A radio plays quietly in {l}.",
    "A spider has spun a web in one corner of {l}.", "{L} still smells of fresh paint.",
    "Someone has left a window open in {l}.", "The wallpaper in {l} is peeling at the edges.",
    "{L} is lit by a single bulb.", "There is a faded rug on the floor of {l}.",
    "A vase of wilting tulips stands in {l}.", "{L} echoes a little.",
    "The heating in {l} rattles from time to time.", "Old photographs hang on the walls of {l}.",
    "{L} is the tidiest place in the house.", "A pile of laundry waits in {l}.")
_NOTES_FIELD = (
    "{L} is damp and smells of moss.", "Roots hang down over {l}.",
    "{L} is deeper than it looks.", "A cold wind blows over {l}.",
    "Rainwater has collected at the bottom of {l}.", "{L} is half hidden by tall grass.",
    "Crows circle high above {l}.", "The earth around {l} is soft after the rain.",
    "{L} echoes when anyone speaks.", "Nettles grow along the edge of {l}.",
    "{L} was dug out by the farmer's grandfather.", "Sunlight barely reaches {l}.")
_NOTES_CALLS = (
    "{L} has a shared screen full of spreadsheets.", "{L} runs late as usual.",
    "The audio in {l} crackles now and then.", "{L} has its own chat window.",
    "Someone in {l} forgot to mute their microphone.", "{L} was scheduled weeks ago.",
    "The agenda of {l} is very long.", "{L} uses a bright green background.",
    "The host of {l} speaks very fast.", "{L} keeps a recording of everything said.",
    "A slide deck is being shared in {l}.", "{L} has more people than usual today.")

NATURAL_SETTINGS: dict[str, NaturalSetting] = {
    "rooms": NaturalSetting(
        "rooms", "hallway", ("kitchen", "library", "bedroom", "lounge", "cellar"),
        _MOVES_ROOMS, _NOTES_ROOMS, "{names} are in {hub}.", "the same room",
        _RULES.format(hub="the hallway", unit="room", units="rooms", sense="see")),
    "field": NaturalSetting(
        "field", "field", ("old well", "ditch", "burrow", "cave", "quarry"),
        _MOVES_FIELD, _NOTES_FIELD, "{names} are standing in {hub}.", "the same place",
        _RULES.format(hub="the field", unit="place", units="places", sense="see")),
    "calls": NaturalSetting(
        "calls", "lobby", ("budget call", "design call", "sales call", "hiring call",
                           "support call"),
        _MOVES_CALLS, _NOTES_CALLS, "{names} are waiting in {hub} of the conference "
        "service.", "the same call",
        _RULES.format(hub="the lobby", unit="call", units="calls", sense="hear")),
}


def natural_setting(name: str) -> NaturalSetting:
    """The natural setting called ``name``; ``ValueError`` names the valid ones."""
    try:
        return NATURAL_SETTINGS[name]
    except KeyError:
        raise ValueError(f"setting must be one of {sorted(NATURAL_SETTINGS)}, "
                         f"got {name!r}") from None


# ---------------------------------------------------------------- sentence pools

_ADVERBIALS = (
    "after a while", "without a word", "humming a tune", "a little later", "after lunch",
    "with a yawn", "in no particular hurry", "checking the time", "with a cup of tea",
    "before anyone can say anything", "still smiling", "rubbing their eyes",
    "on second thought", "soon afterwards", "quite suddenly", "with a sigh",
    "whistling softly", "as the clock strikes", "half an hour later", "without looking back",
    "carrying a notebook", "deep in thought", "at last", "a few minutes later")

_ACTIONS = (
    "sits down for a moment", "stretches both arms", "yawns loudly", "checks the time",
    "laughs at a joke", "ties a loose shoelace", "hums an old song", "rubs their hands",
    "looks at the ceiling", "sneezes twice", "scribbles a note", "reads a text message",
    "folds a piece of paper", "drinks some water", "leans against the wall",
    "cleans their glasses", "counts quietly to ten", "adjusts their scarf",
    "taps a pencil on their knee", "closes their eyes for a second", "flips through a diary",
    "brushes some dust off a sleeve", "straightens their collar", "whistles a few notes",
    "rolls up their sleeves", "taps their foot to a tune", "peels an orange",
    "hums under their breath", "glances at a watch", "scratches their chin",
    "writes something on the back of a receipt", "sips from a bottle of water",
    "looks out of the window", "cracks their knuckles", "blows on their cold hands",
    "smiles at nothing in particular", "leafs through a magazine", "fixes a loose button",
    "sorts some coins into piles", "rereads an old letter", "draws a little sketch",
    "checks a shopping list", "shrugs", "takes a deep breath")

_OBJECTS = ("a cup", "an umbrella", "a newspaper", "a torch", "a spoon", "a red notebook",
            "a pair of gloves", "a small radio", "a bag of apples", "a map", "a pencil",
            "a set of keys", "a blue mug", "a paperback", "a tin of biscuits", "a scarf")
_HANDLING = ("picks up {o}", "puts down {o}", "turns {o} over in their hands",
             "looks closely at {o}", "wipes {o} with a cloth", "hands {o} to nobody in "
             "particular", "finds {o} in a pocket", "sets {o} aside")

_LINES = ("I think it will rain later", "That was a long morning", "I could do with a coffee",
          "What a strange day", "I forgot to call my sister", "The news this morning was odd",
          "Let's not be late this time", "I'm starving", "I haven't slept much",
          "That reminds me of a story", "We should plan the trip", "My phone is almost dead",
          "I like your jacket", "This week has gone so fast", "I need a holiday",
          "The soup yesterday was excellent", "My cousin is visiting next week")
_QUESTIONS = ("Have you seen my glasses", "Did you finish the report", "Do you know what "
              "time it is", "Is anyone else cold", "Who left the lights on",
              "Have you read that book", "Shall we have lunch together", "Did you hear the "
              "thunder last night", "Are you going to the concert", "Can I borrow a pen")
_SAY = ('"{line}," {a} says to {b}.', '{a} tells {b}: "{line}."',
        '"{line}," {a} remarks to {b}.', '{b} nods when {a} says: "{line}."')
_ASK = ('{a} asks {b}: "{q}?"', '{a} wants to know from {b}: "{q}?"',
        '{a} turns to {b}: "{q}?"')

_ABOUT = ("{a} says that {l} is always too cold.", "{a} remembers a party in {l} long ago.",
          "{a} wonders whether anyone has tidied {l}.", "{a} mentions that {l} needs a new "
          "lamp.", "{a} talks about the first time they saw {l}.",
          "{a} thinks about {l} for a moment.", "{a} asks nobody in particular who "
          "looks after {l}.", "{a} remarks that {l} was busy yesterday.",
          "{a} says that a friend once got lost near {l}.",
          "{a} recalls a long story about {l}.", "{a} jokes that {l} must be haunted.",
          "{a} writes a note about {l} in a diary.", "{a} once lost a glove somewhere near {l}.",
          "{a} thinks that {l} would look nicer with fresh flowers.",
          "{a} has heard that {l} is going to be repainted.",
          "{a} dreamt about {l} last night.", "{a} asks whether {l} is free on Friday.",
          "{a} says that {l} always smells a little odd.",
          "{a} complains that {l} is too noisy in the mornings.",
          "{a} plans to tidy {l} at the weekend.")

_LOOKS = ("{a} wears a {c} coat.", "{a} has short {h} hair.", "{a} carries a {c} bag.",
          "{a} is wearing {c} boots today.", "{a} has a {c} scarf around their neck.",
          "{a} speaks in a quiet voice.", "{a} looks tired but cheerful.",
          "{a} has a small scar on one hand.", "{a} wears round glasses.",
          "{a} keeps a {c} pencil behind one ear.", "{a} wears a {c} woolly hat.",
          "{a} has a {c} umbrella tucked under one arm.", "{a} has {h} eyebrows and a loud laugh.",
          "{a} is the oldest of the group.", "{a} walks with a slight limp.")
_COLOURS = ("green", "red", "grey", "yellow", "navy", "brown", "white", "black", "orange",
            "purple")
_HAIR = ("dark", "fair", "curly", "grey", "red", "straight", "wavy")

_OPENERS = ("Meanwhile", "By now", "As usual", "For once", "Just then", "Today",
            "At this hour", "Oddly enough", "As always", "Right now", "In the meantime",
            "Once again", "This afternoon", "Even so", "All the while", "Of course",
            "Somehow", "Apparently", "Still", "Later on")

_FILLS = ("It is quiet.", "Nothing much happens.", "Time passes slowly.",
          "The afternoon wears on.", "Somewhere a dog barks.", "A door bangs in the wind.",
          "It starts to drizzle outside.", "The light is fading a little now.",
          "For a while nobody says anything at all.",
          "Outside, a car goes past and then everything is still again.",
          "The day goes on much as days usually do, with nobody in any particular hurry.")

_JOINS = ("{a} joins {b}.", "{a} goes over to join {b}.", "{a} comes to join {b}.",
          "{a} goes to be with {b}.")

_OBJ_MOVES = ("{X} is now in {l}.", "{X} is moved to {l}.", "Someone carries {x} to {l}.",
              "{X} ends up in {l}.",
              "{X} is taken over to {l}.", "Somebody brings {x} into {l}.",
              "{X} is put down in {l}.", "{X} gets carried across to {l}.",
              "{X} is left in {l}.")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


@dataclass
class Phrases:
    """Sentence maker for one story (the random stream is the story's).

    ``objects=False`` leaves out object handling (a story woven into a host text names no
    object the host could also name).
    """

    setting: NaturalSetting
    rng: random.Random
    objects: bool = True

    def where(self, loc: str) -> str:
        """The place as written."""
        return self.setting.text(loc)

    def move(self, actor: str, loc: str, *, plain: bool = False) -> str:
        """A sentence telling that ``actor`` enters ``loc``."""
        rng = self.rng
        s = rng.choice(self.setting.moves).format(a=actor, l=self.where(loc))
        if plain or rng.random() < 0.25:
            return s
        adv = rng.choice(_ADVERBIALS)
        if rng.random() < 0.5:
            return f"{_cap(adv)}, {s}"
        return f"{s[:-1]}, {adv}."

    def joins(self, actor: str, hosts: Sequence[str]) -> str:
        """``actor`` goes to where ``hosts`` (all in one place) are, the place unnamed."""
        return self.rng.choice(_JOINS).format(a=actor, b=listing(hosts))

    def object_move(self, name: str, loc: str) -> str:
        """A sentence telling that the object ``name`` is moved to ``loc``."""
        rng = self.rng
        s = rng.choice(_OBJ_MOVES).format(x=name, X=_cap(name), l=self.where(loc))
        if rng.random() < 0.5:
            return s
        return f"{s[:-1]}, {rng.choice(_ADVERBIALS)}."

    def _opener(self, s: str, *, name_first: bool) -> str:
        """``s``, half the time after an opener ("Meanwhile, …")."""
        if self.rng.random() < 0.5:
            return s
        head = s if name_first else s[:1].lower() + s[1:]
        return f"{self.rng.choice(_OPENERS)}, {head}"

    def note(self, loc: str) -> str:
        """A short description of a place."""
        where = self.where(loc)
        s = self.rng.choice(self.setting.place_notes).format(l=where, L=_cap(where))
        return self._opener(s, name_first=False)

    def action(self, actor: str) -> str:
        """A non-moving action (naming no place)."""
        rng = self.rng
        if rng.random() < 0.5 or not self.objects:
            s = f"{actor} {rng.choice(_ACTIONS)}."
        else:
            s = f"{actor} {rng.choice(_HANDLING).format(o=rng.choice(_OBJECTS))}."
        if rng.random() < 0.4:
            s = f"{s[:-1]}, {rng.choice(_ADVERBIALS)}."
        return self._opener(s, name_first=True)

    def looks(self, actor: str) -> str:
        """A short description of a person."""
        rng = self.rng
        return rng.choice(_LOOKS).format(a=actor, c=rng.choice(_COLOURS), h=rng.choice(_HAIR))

    def dialogue(self, a: str, b: str) -> str:
        """``a`` says something (about no place) to ``b``; both share a place."""
        rng = self.rng
        if rng.random() < 0.35:
            return rng.choice(_ASK).format(a=a, b=b, q=rng.choice(_QUESTIONS))
        return rng.choice(_SAY).format(a=a, b=b, line=rng.choice(_LINES))

    def about(self, actor: str, loc: str) -> str:
        """``actor`` talks or thinks about ``loc`` (which does not place ``actor`` there)."""
        s = self.rng.choice(_ABOUT).format(a=actor, l=self.where(loc))
        return self._opener(s, name_first=True)

    def fill(self, lo: int, hi: int) -> str | None:
        """A sentence of ``lo … hi`` words that names no one and no place, if one exists."""
        fits = [s for s in _FILLS if lo <= len(s.split()) <= hi]
        return self.rng.choice(fits) if fits else None


def listing(names: Sequence[str]) -> str:
    """``"A, B and C"``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
