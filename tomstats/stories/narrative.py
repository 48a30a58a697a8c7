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

import dataclasses
import functools
import random
import re
from collections.abc import Iterable, Sequence
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
    object_instructions : str
        The rules of the object story (people carry objects; objects see nothing).
    object_names : tuple of str
        Names of the objects that stand for the characters in the object story (empty:
        :data:`~tomstats.stories.settings.OBJECT_NAMES`).
    vocabulary : tuple of str
        Every sentence form of the setting's own banks (actions, remarks, dialogue,
        descriptions, fills, manner phrases, object moves): what its stories may say.
    hub_moves : tuple of str
        Templates of a move into the hub (empty: ``moves``): one climbs *down into* a
        quarry but walks *back out into* the field.
    hub_notes : tuple of str
        Descriptions of the hub (empty: ``place_notes``): a field has no bottom to hold
        rainwater, a lobby no agenda.
    """

    name: str
    hub: str
    places: tuple[str, ...]
    moves: tuple[str, ...]
    place_notes: tuple[str, ...]
    intro: str
    same_place: str
    instructions: str
    object_instructions: str = ""
    object_names: tuple[str, ...] = ()
    vocabulary: tuple[str, ...] = ()
    hub_moves: tuple[str, ...] = ()
    hub_notes: tuple[str, ...] = ()

    def moves_into(self, location: str) -> tuple[str, ...]:
        """The move templates that fit entering ``location``."""
        return self.hub_moves if location == self.hub and self.hub_moves else self.moves

    def notes_of(self, location: str) -> tuple[str, ...]:
        """The description templates that fit ``location``."""
        return self.hub_notes if location == self.hub and self.hub_notes else self.place_notes

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

_OBJECT_RULES = ("Note that all {things} start in {hub}. {Things} never move by themselves: "
                 "people carry them, and a {thing} stays where it was last put. Any place "
                 "can be reached directly from any other. Talking or thinking about a place "
                 "moves nothing there. There is enough information to answer every question.")

#: Object names of the object stories (short, so that a 200-word story holds its moves;
#: none is a word of the setting's place notes).
_THINGS = ("the ball", "the box", "the cup", "the book", "the hat", "the bag", "the key",
           "the scarf", "the pen", "the shoe", "the coin", "the spoon", "the jar", "the kite",
           "the pot", "the drum", "the bell", "the fork", "the glove", "the brush", "the comb",
           "the dice", "the whistle", "the candle", "the plate", "the ring")
_CALL_OBJECTS = ("the chart", "the memo", "the photo", "the invoice", "the logo",
                 "the contract", "the form", "the report", "the survey", "the manual",
                 "the rota", "the poster", "the advert", "the plan", "the list", "the draft",
                 "the quote", "the receipt", "the schedule", "the ticket", "the summary",
                 "the minutes", "the notice", "the brochure", "the timeline", "the checklist")

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
#: Moves into the hub where the places' verbs do not fit it (one climbs down into a
#: quarry, not into the field; one goes back to the lobby, not on it).
_HUB_MOVES_FIELD = (
    "{a} climbs back up to {l}.", "{a} walks back out into {l}.", "{a} heads back to {l}.",
    "{a} makes their way back to {l}.", "{a} wanders back into {l}.")
_HUB_MOVES_CALLS = (
    "{a} goes back to {l}.", "{a} returns to {l}.", "{a} drops back into {l}.",
    "{a} switches back to {l}.", "{a} heads back to {l}.")

_NOTES_ROOMS = (
    "{L} smells of fresh bread.", "{L} has a creaky wooden floor.",
    "The curtains in {l} are drawn halfway.", "A clock ticks somewhere in {l}.",
    "{L} is warmer than the rest of the house.", "Sunlight falls across {l}.",
    "There is a pile of old newspapers in {l}.", "{L} has pale blue walls.",
    "A faint draught runs through {l}.", "The lamp in {l} flickers now and then.",
    "{L} is cluttered with cardboard boxes.", "A radio plays quietly in {l}.",
    "A spider's web hangs in one corner of {l}.", "{L} still smells of fresh paint.",
    "A window stands open in {l}.", "The wallpaper in {l} is peeling at the edges.",
    "{L} is lit by a single bulb.", "There is a faded rug on the floor of {l}.",
    "A vase of wilting tulips stands in {l}.", "{L} echoes a little.",
    "The heating in {l} rattles from time to time.", "Old photographs hang on the walls of {l}.",
    "{L} is the tidiest place in the house.", "A pile of laundry waits in {l}.")
_NOTES_FIELD = (
    "{L} is damp and smells of moss.", "Roots hang down over {l}.",
    "{L} is deeper than it looks.", "A cold wind blows over {l}.",
    "Rainwater stands at the bottom of {l}.", "{L} is half hidden by tall grass.",
    "Crows circle high above {l}.", "The earth around {l} is soft after the rain.",
    "{L} echoes when anyone speaks.", "Nettles grow along the edge of {l}.",
    "{L} is older than the farm itself.", "Sunlight barely reaches {l}.")
_HUB_NOTES_FIELD = (
    "A cold wind blows over {l}.", "Crows circle high above {l}.",
    "The earth of {l} is soft after the rain.", "Nettles grow along the edge of {l}.",
    "The grass in {l} is knee-high.", "{L} slopes gently down towards the farm.",
    "Sheep graze at the far end of {l}.", "A fence runs along one side of {l}.")
_NOTES_CALLS = (
    "{L} has a shared screen full of spreadsheets.", "{L} runs late as usual.",
    "The audio in {l} crackles now and then.", "{L} has its own chat window.",
    "Someone in {l} never mutes their microphone.", "{L} is booked for a whole hour.",
    "The agenda of {l} is very long.", "{L} uses a bright green background.",
    "The host of {l} speaks very fast.", "{L} keeps a recording of everything said.",
    "A slide deck is being shared in {l}.", "{L} has more people than usual today.")
_HUB_NOTES_CALLS = (
    "The audio in {l} crackles now and then.", "{L} has its own chat window.",
    "Someone in {l} never mutes their microphone.", "{L} uses a bright green background.",
    "{L} has more people than usual today.", "{L} plays soft music while people wait.",
    "{L} lists the calls of the day.", "{L} shows a clock counting down to the hour.")

NATURAL_SETTINGS: dict[str, NaturalSetting] = {
    "rooms": NaturalSetting(
        "rooms", "hallway", ("kitchen", "library", "bedroom", "lounge", "cellar"),
        _MOVES_ROOMS, _NOTES_ROOMS, "{names} are in {hub}.", "the same room",
        _RULES.format(hub="the hallway", unit="room", units="rooms", sense="see"),
        _OBJECT_RULES.format(hub="the hallway", thing="thing", things="things",
                             Things="Things"), _THINGS),
    "field": NaturalSetting(
        "field", "field", ("old well", "ditch", "burrow", "cave", "quarry"),
        _MOVES_FIELD, _NOTES_FIELD, "{names} are standing in {hub}.", "the same place",
        _RULES.format(hub="the field", unit="place", units="places", sense="see"),
        _OBJECT_RULES.format(hub="the field", thing="thing", things="things",
                             Things="Things"), _THINGS,
        hub_moves=_HUB_MOVES_FIELD, hub_notes=_HUB_NOTES_FIELD),
    "calls": NaturalSetting(
        "calls", "lobby", ("budget call", "design call", "sales call", "hiring call",
                           "support call"),
        _MOVES_CALLS, _NOTES_CALLS, "{names} are waiting in {hub} of the conference "
        "service.", "the same call",
        _RULES.format(hub="the lobby", unit="call", units="calls", sense="hear"),
        _OBJECT_RULES.format(hub="the lobby", thing="document", things="documents",
                             Things="Documents"), _CALL_OBJECTS,
        hub_moves=_HUB_MOVES_CALLS, hub_notes=_HUB_NOTES_CALLS),
}


def natural_setting(name: str) -> NaturalSetting:
    """The natural setting called ``name``; ``ValueError`` names the valid ones."""
    try:
        return NATURAL_SETTINGS[name]
    except KeyError:
        raise ValueError(f"setting must be one of {sorted(NATURAL_SETTINGS)}, "
                         f"got {name!r}") from None


# ---------------------------------------------------------------- sentence pools
#
# Every pool is written per setting (a call has no walls, pens or weekend tidying; a field
# has no repainting), in the present tense, and holds at most one manner or time phrase:
# a sentence gets an opener ("Meanwhile, …") *or* an adverbial ("…, with a sigh."), never
# both (:meth:`Phrases._manner`).

#: Manner or time phrases a person's action may take (one at most per sentence).
_ADVERBIALS: dict[str, tuple[str, ...]] = {
    "rooms": ("after a while", "without a word", "humming a tune", "a little later",
              "with a yawn", "in no particular hurry", "with a cup of tea", "still smiling",
              "rubbing their eyes", "on second thought", "soon afterwards", "with a sigh",
              "whistling softly", "without looking back", "carrying a notebook", "at last",
              "a few minutes later", "quite suddenly", "right away"),
    "field": ("after a while", "without a word", "humming a tune", "a little later",
              "in no particular hurry", "still smiling", "with muddy boots",
              "on second thought", "soon afterwards", "with a sigh", "whistling softly",
              "without looking back", "shading their eyes", "at last", "a few minutes later",
              "quite suddenly", "stepping over a root", "with the wind at their back",
              "right away"),
    "calls": ("after a while", "without a word", "a little later", "in no particular hurry",
              "still smiling", "on second thought", "soon afterwards", "with a sigh",
              "at last", "a few minutes later", "quite suddenly", "camera off",
              "with their headset on", "right on time", "a minute late"),
}

#: The adverbials that fit a move only ("Bob yawns, a minute late" does not).
_MOVE_ADVERBIALS = frozenset(("without looking back", "stepping over a root", "right on time",
                              "a minute late"))

#: Openers of a sentence (present-tense narration; one manner phrase at most; none that
#: asks for a contrast or a repetition the story did not tell: "Even so", "Once again").
_OPENERS = ("Meanwhile", "As usual", "For once", "Just then", "Oddly enough", "As always",
            "In the meantime", "Of course", "Apparently", "Later on", "After a moment",
            "Before long")
#: The openers that fit a description of a place, which tells a state, not an event
#: ("In the meantime, the lounge has a wooden floor" does not).
STATIC_OPENERS = ("Oddly enough", "As always", "Of course", "Apparently")
#: A sentence takes no manner or time phrase of the last this many sentences told.
OPENER_MEMORY = 4

_ACTIONS: dict[str, tuple[str, ...]] = {
    "rooms": (
        "sits down for a moment", "stretches both arms", "yawns loudly", "checks the time",
        "laughs at a joke", "ties a loose shoelace", "hums an old song", "rubs their hands",
        "looks at the ceiling", "sneezes twice", "scribbles a note", "reads a text message",
        "folds a piece of paper", "drinks some water", "leans against the wall",
        "cleans their glasses", "counts quietly to ten", "adjusts their scarf",
        "closes their eyes for a second", "flips through a diary",
        "brushes some dust off a sleeve", "straightens their collar", "rolls up their sleeves",
        "peels an orange", "glances at a watch", "scratches their chin",
        "writes something on the back of a receipt", "looks out of the window",
        "cracks their knuckles", "blows on their cold hands", "leafs through a magazine",
        "fixes a loose button", "sorts some coins into piles", "rereads an old letter",
        "draws a little sketch", "checks a shopping list", "shrugs", "takes a deep breath"),
    "field": (
        "kneels in the grass", "shades their eyes against the sun", "zips up their jacket",
        "picks a blade of grass", "stamps the mud off their boots", "looks up at the clouds",
        "sits down on a flat stone", "ties a loose shoelace", "pulls on a pair of gloves",
        "takes a deep breath of fresh air", "brushes a burr off a sleeve", "checks the sky",
        "drinks from a flask", "rubs their cold hands", "whistles for a moment",
        "leans on a walking stick", "counts the crows on the fence", "pulls up their hood",
        "scratches their chin", "sneezes twice", "shrugs", "stretches both arms",
        "peels an orange", "listens to the birds", "wipes the rain off their face",
        "squints at the horizon", "pockets a smooth pebble", "tightens a backpack strap",
        "yawns loudly"),
    "calls": (
        "unmutes their microphone", "adjusts their headset", "turns on their camera",
        "types a quick message in the chat", "sips coffee in front of the screen",
        "nods at the screen", "shares a short document", "scrolls through the slides",
        "raises a virtual hand", "checks the time", "takes a few notes", "clears their throat",
        "waves at the camera", "turns the volume up", "blurs their background",
        "stretches both arms", "yawns behind their hand", "rereads the agenda",
        "pins a video", "reacts with a thumbs-up", "checks their calendar",
        "opens the meeting notes", "looks away from the screen for a moment", "shrugs",
        "fixes a lagging connection", "types something and deletes it again"),
}

_SHORT: dict[str, tuple[str, ...]] = {
    "rooms": ("shrugs", "nods", "yawns", "smiles", "sighs", "waits", "laughs", "coughs"),
    "field": ("shrugs", "nods", "yawns", "smiles", "sighs", "waits", "shivers", "laughs"),
    "calls": ("nods", "waits", "smiles", "sighs", "types", "listens", "laughs", "unmutes"),
}

_OBJECTS: dict[str, tuple[str, ...]] = {
    "rooms": ("a cup", "an umbrella", "a newspaper", "a torch", "a spoon", "a red notebook",
              "a pair of gloves", "a small radio", "a bag of apples", "a map", "a pencil",
              "a set of keys", "a blue mug", "a paperback", "a tin of biscuits", "a scarf"),
    "field": ("a torch", "a map", "a coil of rope", "a flask", "a walking stick",
              "a pair of gloves", "a compass", "a bag of apples", "a trowel", "a pebble",
              "a pine cone", "a tin of biscuits"),
    "calls": ("the agenda", "the team document", "the budget sheet", "the slide deck",
              "the chat log", "the meeting notes", "the project plan", "a spreadsheet"),
}
_HANDLING: dict[str, tuple[str, ...]] = {
    "rooms": ("picks up {o}", "puts down {o}", "turns {o} over in their hands",
              "looks closely at {o}", "wipes {o} with a cloth", "finds {o} in a pocket",
              "sets {o} aside"),
    "field": ("picks up {o}", "puts down {o}", "looks closely at {o}",
              "finds {o} in a pocket", "wipes the mud off {o}", "packs {o} away"),
    "calls": ("opens {o}", "scrolls through {o}", "edits {o}", "shares {o} on screen",
              "closes {o}", "downloads {o}"),
}

_LINES: dict[str, tuple[str, ...]] = {
    "rooms": ("I think it will rain later", "That was a long morning",
              "I could do with a coffee", "What a strange day", "I forgot to call my sister",
              "Let's not be late this time", "I'm starving", "I haven't slept much",
              "That reminds me of a story", "We should plan the trip",
              "My phone is almost dead", "I like your jacket", "This week is going so fast",
              "I need a holiday", "My cousin is visiting next week"),
    "field": ("The ground is soft today", "I think it will rain later",
              "What a view from up here", "My boots are soaked", "Listen to those crows",
              "It's colder than it looks", "We should head back before dark",
              "I love the smell of wet grass", "Mind the nettles", "I could walk all day",
              "The wind is picking up", "I'm starving"),
    "calls": ("You're on mute", "I can hear you fine now", "Your screen is frozen",
              "Let's keep this short", "I have another meeting at four",
              "Sorry, my connection dropped", "I'll send the notes afterwards",
              "Can everyone see the slides", "That's a good point",
              "I need another coffee before the next one", "Let's pick this up tomorrow",
              "Let's meet again next week"),
}
_QUESTIONS: dict[str, tuple[str, ...]] = {
    "rooms": ("Have you seen my glasses", "Did you finish the report",
              "Do you know what time it is", "Is anyone else cold", "Who left the lights on",
              "Have you read that book", "Shall we have lunch together",
              "Are you going to the concert", "Can I borrow a pen"),
    "field": ("Do you know the way back", "Is it going to rain", "Did you bring the map",
              "Can you hear the river", "Are your boots dry", "Shall we rest for a minute",
              "Have you seen the crows"),
    "calls": ("Can you hear me", "Can you see my screen", "Is my camera on",
              "Did you finish the report",
              "Did you get the invite", "Who is taking the notes",
              "Should we record this", "Can you share the link"),
}
_SAY = ('"{line}," {a} says to {b}.', '{a} tells {b}: "{line}."',
        '"{line}," {a} remarks to {b}.', '{b} nods when {a} says: "{line}."')
_ASK = ('{a} asks {b}: "{q}?"', '{a} wants to know from {b}: "{q}?"',
        '{a} turns to {b}: "{q}?"')

_ABOUT: dict[str, tuple[str, ...]] = {
    "rooms": (
        "{a} says that {l} is always too cold.", "{a} remembers a party in {l} long ago.",
        "{a} wonders whether anyone tidies {l}.", "{a} mentions that {l} needs a new lamp.",
        "{a} talks about the first time they saw {l}.", "{a} thinks about {l} for a moment.",
        "{a} asks nobody in particular who looks after {l}.",
        "{a} says that a friend once got lost near {l}.", "{a} recalls a long story about {l}.",
        "{a} jokes that {l} must be haunted.", "{a} writes a note about {l} in a diary.",
        "{a} thinks that {l} would look nicer with fresh flowers.",
        "{a} hears that {l} is going to be repainted.", "{a} asks whether {l} is free on Friday.",
        "{a} says that {l} always smells a little odd.",
        "{a} complains that {l} is too noisy in the mornings.",
        "{a} plans to tidy {l} at the weekend."),
    "field": (
        "{a} says that {l} floods every spring.", "{a} remembers a picnic near {l}.",
        "{a} wonders how deep {l} really is.", "{a} thinks about {l} for a moment.",
        "{a} says that a friend once got lost near {l}.", "{a} recalls a long story about {l}.",
        "{a} jokes that {l} must be haunted.", "{a} says that foxes sometimes sleep in {l}.",
        "{a} wonders who first dug {l}.", "{a} thinks that {l} is the quietest spot around.",
        "{a} mentions that {l} is muddy after the rain.",
        "{a} asks nobody in particular who first found {l}.",
        "{a} says that {l} is full of nettles in summer."),
    "calls": (
        "{a} says that {l} always runs over time.", "{a} thinks that {l} could be shorter.",
        "{a} wonders who scheduled {l}.", "{a} jokes that nobody ever listens in {l}.",
        "{a} mentions that {l} has too many people.", "{a} thinks about {l} for a moment.",
        "{a} asks whether {l} is recorded.", "{a} writes a note about {l} in the chat.",
        "{a} complains that the sound in {l} is poor.",
        "{a} says that {l} starts too early.", "{a} wonders whether {l} needs an agenda.",
        "{a} asks nobody in particular who hosts {l}.",
        "{a} remembers the first meeting of {l}, years ago."),
}
#: Remarks about the hub where the places' remarks do not fit it (nobody digs a field or
#: schedules a lobby); a setting without an entry uses its ``_ABOUT`` for the hub too.
_HUB_ABOUT: dict[str, tuple[str, ...]] = {
    "field": (
        "{a} says that {l} floods every spring.", "{a} remembers a picnic in {l}.",
        "{a} thinks about {l} for a moment.", "{a} says that a friend once got lost near {l}.",
        "{a} recalls a long story about {l}.", "{a} says that foxes cross {l} at night.",
        "{a} mentions that {l} is muddy after the rain.",
        "{a} asks nobody in particular who owns {l}.",
        "{a} says that {l} is full of nettles in summer."),
    "calls": (
        "{a} thinks about {l} for a moment.", "{a} says that {l} is always crowded.",
        "{a} wonders who set up {l}.", "{a} jokes that everyone waits too long in {l}.",
        "{a} asks nobody in particular who runs {l}.",
        "{a} complains that the sound in {l} is poor.",
        "{a} mentions that {l} has too many people."),
}

#: Descriptions and remarks (templates) that cannot both be true of one place: a story
#: that told one of a pair about a place tells the other about another place only.
CLASHES: dict[str, tuple[tuple[str, str], ...]] = {
    "rooms": tuple((a, b) for a, bs in (
        ("{L} smells of fresh bread.", ("{L} still smells of fresh paint.",
                                        "{a} says that {l} always smells a little odd.")),
        ("Sunlight falls across {l}.", ("{L} is lit by a single bulb.",)),
        ("{L} is lit by a single bulb.", ("The lamp in {l} flickers now and then.",)),
        ("{L} is warmer than the rest of the house.", (
            "A faint draught runs through {l}.", "A window stands open in {l}.",
            "{a} says that {l} is always too cold.")),
        ("{L} is the tidiest place in the house.", (
            "{L} is cluttered with cardboard boxes.",
            "There is a pile of old newspapers in {l}.", "A pile of laundry waits in {l}.",
            "A spider's web hangs in one corner of {l}.",
            "{a} wonders whether anyone tidies {l}.", "{a} plans to tidy {l} at the weekend.")),
        ("{L} has pale blue walls.", ("The wallpaper in {l} is peeling at the edges.",)),
        ("{L} still smells of fresh paint.", (
            "The wallpaper in {l} is peeling at the edges.",
            "{a} hears that {l} is going to be repainted.")),
    ) for b in bs),
    "field": (
        ("{L} echoes when anyone speaks.", "{a} thinks that {l} is the quietest spot around."),
        ("Sunlight barely reaches {l}.", "{L} is half hidden by tall grass."),
    ),
    "calls": (
        ("{L} has a shared screen full of spreadsheets.",
         "A slide deck is being shared in {l}."),
        ("The agenda of {l} is very long.", "{a} wonders whether {l} needs an agenda."),
        ("{L} keeps a recording of everything said.", "{a} asks whether {l} is recorded."),
    ),
}
#: Descriptions that single a place out ("the tidiest place in the house"): a story tells
#: each of one place at most.
ONE_PLACE: frozenset[str] = frozenset((
    "{L} is warmer than the rest of the house.", "{L} is the tidiest place in the house.",
    "{a} thinks that {l} is the quietest spot around."))

_LOOKS: dict[str, tuple[str, ...]] = {
    "rooms": ("{a} wears a {c} coat.", "{a} has short {h} hair.", "{a} carries a {c} bag.",
              "{a} is wearing {c} slippers today.", "{a} has a {c} scarf around their neck.",
              "{a} speaks in a quiet voice.", "{a} looks tired but cheerful.",
              "{a} has a small scar on one hand.", "{a} wears round glasses.",
              "{a} keeps a {c} pencil behind one ear.", "{a} wears a {c} jumper.",
              "{a} has {b} eyebrows and a loud laugh.", "{a} walks with a slight limp."),
    "field": ("{a} wears a {c} raincoat.", "{a} has short {h} hair.",
              "{a} carries a {c} backpack.", "{a} is wearing {c} boots today.",
              "{a} has a {c} scarf around their neck.", "{a} looks tired but cheerful.",
              "{a} wears a {c} woolly hat.", "{a} has {b} eyebrows and a loud laugh.",
              "{a} walks with a slight limp."),
    "calls": ("{a} has a {c} background on screen.", "{a} has short {h} hair.",
              "{a} wears a {c} headset.", "{a} speaks in a quiet voice.",
              "{a} looks tired but cheerful.", "{a} wears round glasses.",
              "{a} has a {c} mug next to the keyboard.", "{a} has {b} eyebrows and a loud laugh.",
              "{a} has a bookshelf behind them on camera."),
}
_COLOURS = ("green", "red", "grey", "yellow", "navy", "brown", "white", "black", "orange",
            "purple")
_HAIR = ("dark", "fair", "curly", "grey", "red", "straight", "wavy")
_BROWS = ("dark", "fair", "grey", "red", "thick", "bushy")

_FILLS: dict[str, tuple[str, ...]] = {
    "rooms": ("It is quiet.", "Nothing much happens.", "Time passes slowly.",
              "The afternoon wears on.", "Somewhere a dog barks.", "A door bangs in the wind.",
              "It starts to drizzle outside.", "The light is fading a little now.",
              "For a while nobody says anything at all.",
              "Outside, a car goes past and then everything is still again.",
              "The day goes on much as days usually do, with nobody in any particular "
              "hurry."),
    "field": ("It is quiet.", "Nothing much happens.", "Time passes slowly.",
              "The afternoon wears on.", "Somewhere a dog barks.", "A gust bends the grass.",
              "It starts to drizzle.", "The light is fading a little now.",
              "For a while nobody says anything at all.",
              "Far away, a tractor rumbles and then everything is still again.",
              "The day goes on much as days usually do, with nobody in any particular "
              "hurry."),
    "calls": ("It is quiet.", "Nothing much happens.", "Time passes slowly.",
              "The afternoon wears on.", "A notification pings.", "Someone's audio echoes.",
              "The connection stutters for a second.", "The chat stays silent for a while.",
              "For a while nobody says anything at all.",
              "A reminder pops up on every screen and then everything is still again.",
              "The day goes on much as working days usually do, with one call after "
              "another."),
}

_JOINS = ("{a} joins {b}.", "{a} goes over to join {b}.", "{a} comes to join {b}.",
          "{a} goes to be with {b}.")
_JOINS_CALLS = ("{a} joins {b}.", "{a} switches over to join {b}.", "{a} comes to join {b}.",
                "{a} dials in to join {b}.")

#: Moves of the object story: a person carries an object ({p} person, {x} object).
_OBJ_MOVES = ("{p} carries {x} to {l}.", "{p} takes {x} to {l}.", "{p} brings {x} to {l}.",
              "{p} moves {x} to {l}.", "{p} brings {x} over to {l}.")
_OBJ_MOVES_CALLS = ("{p} sends {x} to {l}.", "{p} posts {x} to {l}.", "{p} moves {x} to {l}.",
                    "{p} forwards {x} to {l}.", "{p} uploads {x} to {l}.")
#: Remarks of the object story that name a thing and a place without moving it.
OBJECT_REMARKS = ("{p} thinks of taking {x} to {l}, but leaves it where it is.",
                  "{p} wonders whether {x} would be useful in {l}.",
                  "{p} asks who last wanted {x} in {l}.")

#: Short sentences that break a run of moves in an object story (every setting).
OBJECT_BREAKS = ("All is quiet.", "Time passes.", "Nothing stirs.", "A minute passes.")

#: Movers of the object story (no character of a design story bears these names).
MOVERS = ("A porter", "The caretaker", "A helper", "The janitor", "A neighbour")
_MOVERS_FIELD = ("A farmhand", "The shepherd", "A hiker", "The farmer", "A ranger")
_MOVERS_CALLS = ("The host", "The organiser", "An assistant", "A moderator", "The admin")
#: Every carrier of an object story.
ALL_MOVERS = (*MOVERS, *_MOVERS_FIELD, *_MOVERS_CALLS)

_VOWEL = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")


def articles(s: str) -> str:
    """``s`` with "a" turned into "an" before a vowel ("a orange" → "an orange")."""
    return _VOWEL.sub(lambda m: m.group(1) + "n ", s)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _bank(setting: NaturalSetting) -> str:
    return setting.name if setting.name in _ACTIONS else "rooms"


@dataclass
class Phrases:
    """Sentence maker for one story (the random stream is the story's).

    ``objects=False`` leaves out object handling (a story woven into a host text names no
    object the host could also name). Sentences come from the setting's own banks, in the
    present tense, with one manner or time phrase at most, "an" before a vowel.
    """

    setting: NaturalSetting
    rng: random.Random
    objects: bool = True

    def __post_init__(self) -> None:
        self.bank = _bank(self.setting)
        self._recent: list[frozenset[str]] = []  # manner phrases of the last sentences
        self._told: dict[str, set[str]] = {}  # place → description templates told of it
        self._owner: dict[str, str] = {}  # a one-place template → its place
        self._remarks: set[tuple[str, str]] = set()  # (actor, template): remarks, looks
        clashes: dict[str, set[str]] = {}
        for a, b in CLASHES.get(self.bank, ()):
            clashes.setdefault(a, set()).add(b)
            clashes.setdefault(b, set()).add(a)
        self._clashes = clashes

    def told(self, sentence: str) -> None:
        """Note a sentence the story tells: its manner phrases are not used again in the
        next :data:`OPENER_MEMORY` sentences."""
        low = sentence.lower().rstrip(".!? ")
        segs = [seg.strip() for seg in low.split(",")] if "," in low else []
        self._recent = [*self._recent[1 - OPENER_MEMORY:],
                        frozenset(x for x in segs if x in MANNER_PHRASES)]

    def recall(self, sentences: Sequence[str]) -> None:
        """Forget the sentences noted so far but the last :data:`OPENER_MEMORY` of
        ``sentences`` (the story's sentences after some were taken back)."""
        self._recent = []
        for s in sentences[-OPENER_MEMORY:]:
            self.told(s)

    def _phrase(self, pool: Sequence[str]) -> str | None:
        """One of ``pool`` that none of the last :data:`OPENER_MEMORY` sentences told uses
        (``None`` when every one was used)."""
        used = frozenset().union(*self._recent)
        fresh = [x for x in pool if x.lower() not in used]
        return self.rng.choice(fresh) if fresh else None

    def _fitting(self, pool: Sequence[str], loc: str) -> list[str]:
        """The templates of ``pool`` whose telling of ``loc`` contradicts nothing told: not
        a one-place template owned by another place, none clashing with what ``loc`` was
        told (one pass over the pool: the telling's hottest loop)."""
        told, owner, clashes = self._told.get(loc), self._owner, self._clashes
        if not told and not owner:
            return list(pool)
        return [x for x in pool if owner.get(x, loc) == loc
                and not (told and x in clashes and not clashes[x].isdisjoint(told))]

    def _describe(self, pool: Sequence[str], loc: str, actor: str | None = None) -> str:
        """A template of ``pool`` that fits what was told of ``loc`` (and, for a remark of
        ``actor``, one it has not made of another place), recorded as told."""
        fits = self._fitting(pool, loc)
        if actor is not None:
            fits = [x for x in fits if (actor, x) not in self._remarks] or fits
        x = self.rng.choice(fits or pool)
        if actor is not None:
            self._remarks.add((actor, x))
        self._told.setdefault(loc, set()).add(x)
        if x in ONE_PLACE:
            self._owner.setdefault(x, loc)
        return x

    def where(self, loc: str) -> str:
        """The place as written."""
        return self.setting.text(loc)

    def _manner(self, s: str, *, p: float, name_first: bool, opener: bool = True) -> str:
        """``s`` with probability ``p`` given one manner phrase: an opener or an adverbial
        (``opener=False``: a move, which takes no opener but may take the adverbials of a
        move only)."""
        rng = self.rng
        if rng.random() >= p:
            return s
        if opener and rng.random() < 0.5:
            head = s if name_first else s[:1].lower() + s[1:]
            op = self._phrase(_OPENERS)
            return s if op is None else f"{op}, {head}"
        pool = _ADVERBIALS[self.bank]
        adv = self._phrase(pool if not opener else
                           [x for x in pool if x not in _MOVE_ADVERBIALS])
        if adv is None:
            return s
        if rng.random() < 0.4:
            head = s if name_first else s[:1].lower() + s[1:]
            return f"{_cap(adv)}, {head}"
        return f"{s[:-1]}, {adv}."

    def move(self, actor: str, loc: str, *, plain: bool = False) -> str:
        """A sentence telling that ``actor`` enters ``loc``."""
        s = self.rng.choice(self.setting.moves_into(loc)).format(a=actor, l=self.where(loc))
        return s if plain else self._manner(s, p=0.75, name_first=True, opener=False)

    def joins(self, actor: str, hosts: Sequence[str]) -> str:
        """``actor`` goes to where ``hosts`` (all in one place) are, the place unnamed."""
        forms = _JOINS_CALLS if self.bank == "calls" else _JOINS
        return self.rng.choice(forms).format(a=actor, b=listing(hosts))

    def object_move(self, mover: str, name: str, loc: str) -> str:
        """``mover`` moves the object ``name`` to ``loc`` (no manner phrase: plain)."""
        forms = _OBJ_MOVES_CALLS if self.bank == "calls" else _OBJ_MOVES
        return self.rng.choice(forms).format(p=mover, x=name, l=self.where(loc))

    def movers(self) -> tuple[str, ...]:
        """Who carries the objects of the object story in this setting."""
        return {"field": _MOVERS_FIELD, "calls": _MOVERS_CALLS}.get(self.bank, MOVERS)

    def note(self, loc: str) -> str:
        """A short description of a place."""
        where = self.where(loc)
        s = self._describe(self.setting.notes_of(loc), loc).format(l=where, L=_cap(where))
        op = self._phrase(STATIC_OPENERS) if self.rng.random() < 0.4 else None
        return s if op is None else f"{op}, {s[:1].lower() + s[1:]}"

    def action(self, actor: str) -> str:
        """A non-moving action (naming no place)."""
        rng = self.rng
        if rng.random() < 0.5 or not self.objects:
            s = f"{actor} {rng.choice(_ACTIONS[self.bank])}."
        else:
            o = rng.choice(_OBJECTS[self.bank])
            s = f"{actor} {rng.choice(_HANDLING[self.bank]).format(o=o)}."
        return articles(self._manner(s, p=0.6, name_first=True))

    def short(self, actor: str) -> str:
        """A two-word action ("Bob nods."), to break a run of moves in a short story."""
        return f"{actor} {self.rng.choice(_SHORT[self.bank])}."

    def looks(self, actor: str) -> str:
        """A short description of a person, none told of them before (a person's hair or
        coat has one colour in a story)."""
        rng = self.rng
        pool = _LOOKS[self.bank]
        form = rng.choice([x for x in pool if (actor, x) not in self._remarks] or pool)
        self._remarks.add((actor, form))
        return articles(form.format(a=actor, c=rng.choice(_COLOURS), h=rng.choice(_HAIR),
                                    b=rng.choice(_BROWS)))

    def dialogue(self, a: str, b: str) -> str:
        """``a`` says something (about no place) to ``b``; both share a place."""
        rng = self.rng
        if rng.random() < 0.35:
            return rng.choice(_ASK).format(a=a, b=b, q=rng.choice(_QUESTIONS[self.bank]))
        return rng.choice(_SAY).format(a=a, b=b, line=rng.choice(_LINES[self.bank]))

    def about(self, actor: str, loc: str) -> str:
        """``actor`` talks or thinks about ``loc`` (which does not place ``actor`` there)."""
        pool = _HUB_ABOUT.get(self.bank, ()) if loc == self.setting.hub else ()
        s = self._describe(pool or _ABOUT[self.bank], loc, actor).format(
            a=actor, l=self.where(loc))
        op = self._phrase(_OPENERS) if self.rng.random() < 0.4 else None
        return s if op is None else f"{op}, {s}"

    def fill(self, lo: int, hi: int) -> str | None:
        """A sentence of ``lo … hi`` words that names no one and no place, if one exists."""
        fits = [s for s in _FILLS[self.bank] if lo <= len(s.split()) <= hi]
        return self.rng.choice(fits) if fits else None


_PUNCT = str.maketrans({c: " " for c in '.,:;!?"()'})


#: The manner and time phrases of :data:`_OPENERS` and :data:`_ADVERBIALS`, lower case.
MANNER_PHRASES: frozenset[str] = frozenset(
    [p.lower() for p in _OPENERS] + [p for bank in _ADVERBIALS.values() for p in bank])


def without_manner(sentence: str, phrases: frozenset[str] = MANNER_PHRASES) -> str:
    """``sentence`` in lower case without its comma-delimited segments that are one of
    ``phrases`` ("Later on, Dan naps." and "Dan naps, with a sigh." both give "dan naps").
    """
    low = sentence.lower()
    if "," not in low:
        return low
    body = low.rstrip(".!? ")
    return ",".join(seg for seg in body.split(",") if seg.strip() not in phrases)


def opener(sentence: str, phrases: frozenset[str] = MANNER_PHRASES) -> str | None:
    """The manner or time phrase that opens ``sentence`` ("Meanwhile, Bob naps." →
    ``"meanwhile"``), lower case, or ``None``."""
    head, comma, _rest = sentence.partition(", ")
    low = head.lower()
    return low if comma and low in phrases else None


def place_templates(setting: NaturalSetting) -> dict[str, tuple[str, ...]]:
    """The templates of sentences about one place of ``setting`` (moves, descriptions,
    remarks), by the locations they fit (``"hub"``, ``"places"``), and its descriptions
    (``"descriptions"``: they tell a state, and take only :data:`STATIC_OPENERS`)."""
    bank = _bank(setting)
    remarks = _ABOUT[bank]
    return {"places": (*setting.moves, *setting.place_notes, *remarks),
            "hub": (*setting.moves_into(setting.hub), *setting.notes_of(setting.hub),
                    *(_HUB_ABOUT.get(bank) or remarks)),
            "descriptions": (*setting.place_notes, *setting.hub_notes)}


@functools.lru_cache(maxsize=1 << 16)
def word_set(s: str) -> frozenset[str]:
    """The lower-cased words of a sentence, punctuation and manner phrases dropped
    (:func:`without_manner`): two tellings of one remark that differ only in their opener
    ("Just then, …" / "Later on, …") have one word set (cached: a story's sentences are
    checked against the ten before them, and remarks recur across stories)."""
    return frozenset(without_manner(s).translate(_PUNCT).split())


def near_duplicate(a: str | frozenset[str], b: str | frozenset[str],
                   threshold: float = 0.8) -> bool:
    """Whether two sentences share most of their words (Jaccard index of their lower-cased
    word sets ``|A ∩ B| / |A ∪ B| >= threshold``); sentences or their :func:`word_set`."""
    wa = word_set(a) if isinstance(a, str) else a
    wb = word_set(b) if isinstance(b, str) else b
    if not wa or not wb:
        return False
    return len(wa & wb) >= threshold * len(wa | wb)


def nearly_in(w: frozenset[str], sets: Iterable[frozenset[str]]) -> bool:
    """Whether the word set ``w`` nearly repeats one of ``sets``: Jaccard index
    :math:`|A \\cap B| / |A \\cup B| \\ge 0.8`, as :func:`near_duplicate` (the index is at
    most :math:`\\min(|A|, |B|) / \\max(|A|, |B|)`, so sets of unlike sizes are skipped)."""
    n = len(w)
    lo = 0.8 * n
    for x in sets:
        m = len(x)
        if lo <= m and 0.8 * m <= n:
            both = len(w & x)
            if both >= 0.8 * (n + m - both):
                return True
    return False


def _vocabulary(bank: str) -> tuple[str, ...]:
    """Every sentence form of a setting's banks (see :attr:`NaturalSetting.vocabulary`)."""
    pools = (_ADVERBIALS, _ACTIONS, _SHORT, _OBJECTS, _HANDLING, _LINES, _QUESTIONS, _ABOUT,
             _LOOKS, _FILLS)
    out = [x for pool in pools for x in pool[bank]] + list(_HUB_ABOUT.get(bank, ()))
    movers = {"field": _MOVERS_FIELD, "calls": _MOVERS_CALLS}.get(bank, MOVERS)
    forms = _OBJ_MOVES_CALLS if bank == "calls" else _OBJ_MOVES
    return (*out, *movers, *forms, *OBJECT_REMARKS)


for _name, _st in list(NATURAL_SETTINGS.items()):
    NATURAL_SETTINGS[_name] = dataclasses.replace(_st, vocabulary=_vocabulary(_name))

#: Object move forms with their carrier written out ("A porter carries {x} to {l}."), as a
#: reader of the object stories meets them.
OBJECT_MOVES = tuple(dict.fromkeys(f.format(p=m, x="{x}", l="{l}") for m in ALL_MOVERS
                                   for f in (*_OBJ_MOVES, *_OBJ_MOVES_CALLS)))


def listing(names: Sequence[str]) -> str:
    """``"A, B and C"``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
