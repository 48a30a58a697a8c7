"""The three StorySim settings, each with its own location graph, templates and questions.

- ``"rooms"``: rooms off a hallway (everyone starts in the hallway; rooms ``room_1`` …
  open onto the hallway and onto their neighbours in a ring);
- ``"field"``: a field with holes (everyone starts in the field; holes are entered from
  and left to the field only);
- ``"calls"``: conference calls (everyone starts in the lobby; calls are joined from the
  lobby, and a participant may switch to a neighbouring call directly).

Every sentence template renders one ``enter`` event; several templates of different
lengths say the same thing, which lets :mod:`tomstats.stories.render` hit a word target
without changing what happens. The first template of each list is the plain one used for
the critical (ToM-relevant) events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CHARACTERS", "OBJECT_NAMES", "SETTINGS", "Setting", "get_setting", "make_setting"]

#: Character names (StorySim's eight first, then more for larger casts).
CHARACTERS = ("Alice", "Bob", "Charlie", "Danny", "Edward", "Frank", "Georgia", "Hank",
              "Irene", "Jake", "Kate", "Liam", "Maria", "Nora", "Oscar", "Paul", "Quinn",
              "Rosa", "Sam", "Tina", "Uma", "Victor", "Wendy", "Xavier", "Yara", "Zoe")

#: Inanimate stand-ins for characters (StorySim's WM-Inanimate prompt).
OBJECT_NAMES = ("the red ball", "the blue box", "the green cup", "the yellow book",
                "the black hat", "the white vase", "the brown bag", "the silver key",
                "the orange scarf", "the purple pen", "the grey lamp", "the pink shoe",
                "the gold coin", "the wooden spoon", "the glass jar", "the paper kite",
                "the clay pot", "the metal tin", "the rubber duck", "the tin drum",
                "the wool sock", "the stone egg", "the toy car", "the cork mat",
                "the straw hat", "the linen towel")

#: Templates for inanimate entities (``{x}``: object, ``{l}``: location text).
OBJECT_TEMPLATES = ("{X} is moved to {l}.", "Someone moves {x} to {l}.",
                    "{X} is carried into {l}.", "Then {x} is taken to {l}.",
                    "After that, {x} is carried into {l}.",
                    "A moment later, someone takes {x} to {l}.")


@dataclass(frozen=True)
class Setting:
    """A StorySim setting: location graph, display names, templates and question words.

    Parameters
    ----------
    name : str
    hub : str
        Where every character starts.
    places : tuple of str
        The other locations.
    edges : tuple of (str, str)
        Directed edges of the location graph.
    display : mapping location -> str
        How a location is written in the story ("the hallway", "room_1").
    to_place : tuple of str
        Templates for entering a place (``{a}`` actor, ``{l}`` location text).
    to_hub : tuple of str
        Templates for entering the hub.
    intro : str
        Opening sentence (``{names}``, ``{hub}``).
    same_place : str
        Phrase for the WM questions ("the same room").
    instructions : str
        The setting's rules, worded after StorySim's prompt 1, for the runner's prompt.
    """

    name: str
    hub: str
    places: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    display: Mapping[str, str] = field(default_factory=dict)
    to_place: tuple[str, ...] = ()
    to_hub: tuple[str, ...] = ()
    intro: str = "{names} are in {hub}."
    same_place: str = "the same place"
    instructions: str = ""

    @property
    def locations(self) -> tuple[str, ...]:
        """All locations, hub first."""
        return (self.hub, *self.places)

    def text(self, location: str) -> str:
        """How ``location`` is written in the story."""
        return self.display.get(location, location)

    def templates(self, location: str) -> tuple[str, ...]:
        """Sentence templates for entering ``location``."""
        return self.to_hub if location == self.hub else self.to_place


def _ring(places: tuple[str, ...]) -> list[tuple[str, str]]:
    k = len(places)
    if k < 3:
        return []
    return [e for i in range(k) for e in ((places[i], places[(i + 1) % k]),
                                          (places[(i + 1) % k], places[i]))]


def _star(hub: str, places: tuple[str, ...]) -> list[tuple[str, str]]:
    return [e for p in places for e in ((hub, p), (p, hub))]


_RULES = ("Note that all characters start in {hub}. Characters in the same location can see "
          "where each other go when someone leaves. If characters are in different "
          "locations, they cannot see each other. There is enough information to answer "
          "every question.")


def make_setting(name: str, n_places: int = 5) -> Setting:
    """Build one of the three settings with ``n_places`` non-hub locations.

    Parameters
    ----------
    name : {"rooms", "field", "calls"}
    n_places : int
        Number of rooms / holes / calls (at least 3).
    """
    if name not in ("rooms", "field", "calls"):
        raise ValueError(f"setting must be one of 'rooms', 'field', 'calls', got {name!r}")
    if not isinstance(n_places, int) or n_places < 3:
        raise ValueError(f"n_places must be an integer ≥ 3, got {n_places!r}")
    if name == "rooms":
        places = tuple(f"room_{i}" for i in range(1, n_places + 1))
        return Setting(
            "rooms", "hallway", places, tuple(_star("hallway", places) + _ring(places)),
            {"hallway": "the hallway"},
            ("{a} enters {l}.", "{a} walks into {l}.", "Then {a} goes into {l}.",
             "After that, {a} walks into {l}.", "A moment later, {a} walks into {l}.",
             "Some time after that, {a} goes into {l}."),
            ("{a} enters {l}.", "{a} walks out into {l}.", "Then {a} goes back to {l}.",
             "After that, {a} walks out into {l}.", "A moment later, {a} steps out into {l}.",
             "Some time after that, {a} goes back to {l}."),
            "{names} are in {hub}.", "the same room", _RULES.format(hub="the hallway"))
    if name == "field":
        places = tuple(f"hole_{i}" for i in range(1, n_places + 1))
        return Setting(
            "field", "field", places, tuple(_star("field", places)), {"field": "the field"},
            ("{a} enters {l}.", "{a} jumps into {l}.", "Then {a} climbs into {l}.",
             "After that, {a} jumps into {l}.", "A moment later, {a} climbs down into {l}.",
             "Some time after that, {a} jumps down into {l}."),
            ("{a} enters {l}.", "{a} climbs out into {l}.", "Then {a} climbs back into {l}.",
             "After that, {a} climbs out into {l}.", "A moment later, {a} climbs up into {l}.",
             "Some time after that, {a} climbs back into {l}."),
            "{names} are standing in {hub}.", "the same hole", _RULES.format(hub="the field"))
    places = tuple(f"call_{i}" for i in range(1, n_places + 1))
    return Setting(
        "calls", "lobby", places, tuple(_star("lobby", places) + _ring(places)),
        {"lobby": "the lobby"},
        ("{a} joins {l}.", "{a} dials into {l}.", "Then {a} joins {l}.",
         "After that, {a} dials into {l}.", "A moment later, {a} connects to {l}.",
         "Some time after that, {a} dials into {l}."),
        ("{a} enters {l}.", "{a} goes back to {l}.", "Then {a} returns to {l}.",
         "After that, {a} goes back to {l}.", "A moment later, {a} drops back to {l}.",
         "Some time after that, {a} returns to {l}."),
        "{names} are waiting in {hub} of the conference service.", "the same call",
        _RULES.format(hub="the lobby").replace("see where each other go", "hear where each "
                                               "other go"))


#: The three settings with five non-hub locations each.
SETTINGS: dict[str, Setting] = {n: make_setting(n) for n in ("rooms", "field", "calls")}


def get_setting(name: str) -> Setting:
    """The default setting called ``name``; ``ValueError`` names the valid ones."""
    try:
        return SETTINGS[name]
    except KeyError:
        raise ValueError(f"setting must be one of {sorted(SETTINGS)}, got {name!r}") from None
