r"""What a model can read off a story: sentences, place mentions and *told* moves.

The item audit (:mod:`tomstats.stories.audit`) answers questions from the text alone. This
module parses a story once (:func:`parse_story`, cached by text and candidate places) into

- its sentences (split after ``.``, ``!`` or ``?``, a closing quote kept), with offsets;
- the candidate places each sentence names (whole words, ``_`` read as a space), in order;
- its **told moves**: sentences of a move sentence form — ``"Alice walks into the
  library."``, ``"After lunch, Bob heads to the kitchen, humming."``, ``"The silver key is
  moved to the ditch."`` — with their actor and destination, and **joins** (``"Alice joins
  Bob and Carol."``: a move whose place is not named).

A move sentence form is a template with ``{a}`` (or ``{x}``/``{X}``, an object) for the
actor, ``{l}`` for the place and ``{b}`` for the joined characters, optionally after one
leading ``"Adverbial, "`` and before one trailing ``", adverbial"``. The forms are
:data:`FIRST_ROUND_FORMS` (those of the first design generator, so old item files still
parse), every form :mod:`tomstats.stories.narrative` defines (each setting's ``moves`` and
every module-level tuple of templates whose name contains ``MOVES`` or ``JOINS``) and the
forms of the storyboard stories (:mod:`tomstats.stories.settings`; :func:`move_forms`).
Remarks about a place (``"Alice says that the library is cold"``) are not moves: they match
no form. :func:`ItemParse.coverage` compares the told moves with the item's recorded
events, so that a generator with a new move wording that this parser
does not know is caught by the audit instead of silently escaping the told-move rules.

:class:`ItemParse` binds a parsed story to one item's questioned characters — ``T`` (the
target as written), ``S1`` and ``S2`` (the question's chain of agents; for the
world-model questions the pair asked about) — and is what every audit rule reads.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tomstats.stories.items import Item

__all__ = ["FIRST_ROUND_FORMS", "MAX_MOVE_CHARS", "ItemParse", "Move", "StoryParse",
           "item_parse",
           "location_pattern", "mode", "move_forms", "parse_story", "sentence_spans",
           "sentences", "target_text"]

_SPLIT = re.compile(r'(?<=[.!?])(["”]?)\s+')
#: Longest sentence (characters) tried against the move forms.
MAX_MOVE_CHARS = 300

#: The move and join sentence forms of the first design generator (kept so that its item
#: files, and the fixture the tests audit, still parse if the generator's forms change).
FIRST_ROUND_FORMS = (
    "{a} walks into {l}.", "{a} goes into {l}.", "{a} heads to {l}.",
    "{a} wanders over to {l}.", "{a} steps into {l}.", "{a} makes their way to {l}.",
    "{a} slips into {l}.", "{a} moves on to {l}.",
    "{a} climbs down into {l}.", "{a} crawls over to {l}.", "{a} scrambles into {l}.",
    "{a} walks over to {l}.", "{a} heads for {l}.", "{a} clambers across to {l}.",
    "{a} drops down into {l}.",
    "{a} joins {l}.", "{a} dials into {l}.", "{a} switches over to {l}.",
    "{a} connects to {l}.", "{a} hops on {l}.", "{a} clicks through to {l}.",
    "{a} logs into {l}.",
    "{a} joins {b}.", "{a} goes over to join {b}.", "{a} comes to join {b}.",
    "{a} goes to be with {b}.",
    "{X} is now in {l}.", "{X} is moved to {l}.", "Someone carries {x} to {l}.",
    "{X} ends up in {l}.", "{X} is taken over to {l}.", "Somebody brings {x} into {l}.",
    "{X} is put down in {l}.", "{X} gets carried across to {l}.", "{X} is left in {l}.")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text`` (see :func:`sentences`)."""
    # A split ends a sentence after its closing quote and starts the next after all the
    # whitespace, so only the first and the last piece can have whitespace to strip (or be
    # empty): a piece between two splits starts on a non-space and ends on ``.!?"”``.
    spans, start = [], 0
    for m in _SPLIT.finditer(text):
        spans.append((start, m.end(1)))
        start = m.end()
    spans.append((start, len(text)))
    for k in (0, -1) if len(spans) > 1 else (0,):
        a, b = spans[k]
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        spans[k] = (a + lead, a + lead + len(seg.strip()))
    return [(a, b) for a, b in spans if b > a]


def sentences(text: str) -> list[str]:
    """Split a story into sentences (after ``.``, ``!`` or ``?``, a closing quote kept)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def location_pattern(candidates: Sequence[str]) -> tuple[re.Pattern[str], dict[str, str]]:
    """A regex of every written form of the candidates, and form (lower case) → candidate.

    Forms: the candidate and the candidate with ``_`` read as a space; whole words only.
    """
    forms: dict[str, str] = {}
    for c in candidates:
        for f in {c, c.replace("_", " ")}:
            forms[f.lower()] = c
    alts = sorted((f for f in forms if f), key=len, reverse=True)
    if not alts:  # no candidates: a pattern that never matches
        return re.compile(r"(?!x)x"), forms
    pat = re.compile(r"(?<![\w])(" + "|".join(map(re.escape, alts)) + r")(?![\w])", re.I)
    return pat, forms


def mode(names: Iterable[str]) -> str:
    """Most frequent name; ties go to the one that occurs last (``""`` when empty)."""
    counts: Counter[str] = Counter()
    last: dict[str, int] = {}
    for i, x in enumerate(names):
        counts[x] += 1
        last[x] = i
    if not counts:
        return ""
    return max(counts, key=lambda x: (counts[x], last[x]))


def move_forms() -> tuple[str, ...]:
    """Every move and join sentence form the parser knows (see the module docstring)."""
    from tomstats.stories import narrative, settings

    forms = list(FIRST_ROUND_FORMS)
    for sst in settings.SETTINGS.values():  # the storyboard stories' forms
        forms += [*sst.to_place, *sst.to_hub]
    forms += list(settings.OBJECT_TEMPLATES)
    for st in narrative.NATURAL_SETTINGS.values():
        forms += [*st.moves, *st.hub_moves]
    for name, value in sorted(vars(narrative).items()):
        if ("MOVES" in name.upper() or "JOINS" in name.upper()) and isinstance(value, tuple) \
                and all(isinstance(v, str) for v in value):
            forms += list(value)
    ok = [f for f in forms if "{l}" in f or "{b}" in f]
    return tuple(dict.fromkeys(ok))


@dataclass(frozen=True)
class Move:
    """One told move: sentence index, actor (lower case, no leading "the"), destination
    (a candidate; ``None`` for a join) and the joined characters."""

    sentence: int
    actor: str
    place: str | None
    hosts: tuple[str, ...] = ()


def _key(name: str) -> str:
    """The form actors are compared in: lower case, without a leading ``the``."""
    s = name.strip().lower()
    return s[4:] if s.startswith("the ") else s


_ACTOR = r"((?:[Tt]he )?[A-Za-z][\w'-]*(?: [a-z][\w'-]*){0,2})"
_HOSTS = r"([A-Z][\w'-]*(?:(?:, | and )[A-Z][\w'-]*)*)"


@dataclass(frozen=True)
class _Branch:
    """The regex of the move forms that share a kind and a head: group 1 the actor, group
    2 the place (``move``) or the joined names (``join``); ``needs``: the head without its
    first letter (which an adverbial may lower-case), a text every match contains."""

    kind: str
    regex: re.Pattern[str]
    needs: str


def _inner_words(text: str) -> list[str]:
    """The words of ``text`` with a space on both sides (a sentence that contains ``text``
    has each of them as a whole whitespace-separated word)."""
    parts = text.split(" ")
    return [w for w in parts[1:-1] if w]


@lru_cache(maxsize=64)
def _move_regexes(forms: tuple[str, ...], place_alt: str
                  ) -> tuple[tuple[_Branch, ...], dict[str, tuple[int, ...]]]:
    """One :class:`_Branch` per (kind, text before the actor) of the forms, and an index:
    word → the branches that can match only a sentence with that word.

    A form is ``HEAD {a} MID {l}`` (or ``{b}``); forms that share a kind and a head share a
    regex whose middle part is the alternation of their ``MID`` texts. A branch is indexed
    under the last inner word of its head when the head has one, else under the first word
    of each of its ``MID`` texts (a match contains one of them). A sentence is tried
    against the branches in this order, skipping those it cannot match
    (:func:`_match_move`).
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for f in forms:
        body = f[:-1] if f.endswith(".") else f
        m = re.fullmatch(r"(.*?)\{[axX]\}(.*?)\{([lb])\}", body)
        if m is None:
            continue
        head, mid, slot = m.groups()
        groups.setdefault(("move" if slot == "l" else "join", head), []).append(mid)
    out = []
    index: dict[str, list[int]] = {}
    for i, ((kind, head), mids) in enumerate(groups.items()):
        lit = re.escape(head)
        if head[:1].isalpha():  # a form may start a sentence or follow an adverbial
            lit = f"[{head[0].upper()}{head[0].lower()}]" + re.escape(head[1:])
        uniq = sorted(set(mids), key=len, reverse=True)
        mid_alt = "|".join(re.escape(x) for x in uniq)
        slot = rf"((?i:the )?(?i:{place_alt}))" if kind == "move" else _HOSTS
        # (the adverbial holds no comma: it can only end at the first ", ", possessively)
        out.append(_Branch(kind, re.compile(rf'^(?:[^,"]++, )?{lit}{_ACTOR}(?:{mid_alt})'
                                            rf'{slot}(?:, [^"]+)?\.$'), head[1:]))
        keys = _inner_words(head[1:])[-1:] or [(_inner_words(x) or [""])[0] for x in uniq]
        for w in dict.fromkeys(keys):
            index.setdefault(w, []).append(i)
    return tuple(out), {w: tuple(v) for w, v in index.items()}


def _match_move(s: str, branches: Sequence[_Branch], index: dict[str, tuple[int, ...]]
                ) -> tuple[_Branch, re.Match[str]] | None:
    """The first branch (in order) that matches the sentence ``s``, and its match (only
    the branches indexed under a word of ``s`` are tried, see :func:`_move_regexes`)."""
    tried = sorted({i for w in {"", *s.split()} for i in index.get(w, ())})
    for i in tried:
        br = branches[i]
        if br.needs in s:
            m = br.regex.match(s)
            if m is not None:
                return br, m
    return None


@dataclass(frozen=True)
class StoryParse:
    """A parsed story (see the module docstring); :func:`parse_story` builds it."""

    text: str
    spans: tuple[tuple[int, int], ...]
    places: tuple[tuple[str, ...], ...]
    moves: tuple[Move, ...]
    candidates: tuple[str, ...]
    _cache: dict[object, object] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_sentences(self) -> int:
        """Number of sentences."""
        return len(self.spans)

    def named(self, name: str) -> tuple[int, ...]:
        """Indices of the sentences that name ``name`` (whole words, any case)."""
        key = ("named", _key(name))
        got = self._cache.get(key)
        if got is None:
            got = ()
            if key[1]:
                starts = self._starts()
                pat = re.compile(rf"(?<![\w]){re.escape(key[1])}(?![\w])", re.I)
                hits = {bisect.bisect_right(starts, m.start()) - 1
                        for m in pat.finditer(self.text)}
                got = tuple(sorted(i for i in hits if i >= 0))
            self._cache[key] = got
        return got  # type: ignore[return-value]

    def _starts(self) -> list[int]:
        got = self._cache.get("starts")
        if got is None:
            got = self._cache["starts"] = [a for a, _b in self.spans]
        return got  # type: ignore[return-value]

    def moves_of(self, name: str) -> tuple[Move, ...]:
        """The told moves of ``name`` (joins included), in story order."""
        key = ("moves", _key(name))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = tuple(m for m in self.moves if m.actor == key[1])
        return got  # type: ignore[return-value]

    def dests_of(self, name: str) -> tuple[str, ...]:
        """The places ``name`` is told moving into, in order (joins name none)."""
        key = ("dests", _key(name))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = tuple(m.place for m in self.moves_of(name)
                                           if m.place is not None)
        return got  # type: ignore[return-value]

    def comentions_of(self, name: str) -> tuple[str, ...]:
        """The places named in the sentences that name ``name``, in order."""
        key = ("co", _key(name))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = tuple(x for i in self.named(name)
                                           for x in self.places[i])
        return got  # type: ignore[return-value]

    @property
    def flat(self) -> tuple[str, ...]:
        """Every place mention of the story, in order."""
        got = self._cache.get("flat")
        if got is None:
            got = self._cache["flat"] = tuple(x for row in self.places for x in row)
        return got  # type: ignore[return-value]

    def mention_counts(self) -> Counter[str]:
        """How often each candidate is named in the story (zero counts included)."""
        c: Counter[str] = Counter(dict.fromkeys(self.candidates, 0))
        c.update(self.flat)
        return c


def _parse(text: str, candidates: tuple[str, ...], forms: tuple[str, ...]) -> StoryParse:
    spans = sentence_spans(text)
    pat, lforms = location_pattern(candidates)
    starts = [a for a, _b in spans]
    places: list[list[str]] = [[] for _ in spans]
    for m in pat.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0:
            places[i].append(lforms[m.group(1).lower()])
    place_alt = "|".join(re.escape(f) for f in sorted(lforms, key=len, reverse=True) if f)
    branches, index = _move_regexes(forms, place_alt or "(?!x)x")
    moves = []
    for i, (a, b) in enumerate(spans):
        if b - a > MAX_MOVE_CHARS:  # no move sentence is this long; bounds the matching
            continue
        s = text[a:b]
        if not places[i] and " join" not in s and " be with " not in s:
            continue
        got = _match_move(s, branches, index)
        if got is None:
            continue
        br, m = got
        actor, slot = m.group(1), m.group(2)
        if br.kind == "move":
            where = slot.lower()
            if where not in lforms:
                where = where.removeprefix("the ")
            moves.append(Move(i, _key(actor), lforms[where]))
        else:
            hosts = tuple(_key(h) for h in re.split(r", | and ", slot))
            moves.append(Move(i, _key(actor), None, hosts))
    return StoryParse(text, tuple(spans), tuple(tuple(p) for p in places), tuple(moves),
                      candidates)


_CACHE: dict[tuple[str, tuple[str, ...]], StoryParse] = {}


def parse_story(text: str, candidates: Sequence[str]) -> StoryParse:
    """Parse ``text`` (cached: items that share a story are parsed once)."""
    key = (text, tuple(candidates))
    got = _CACHE.get(key)
    if got is None:
        if len(_CACHE) > 20000:
            _CACHE.clear()
        got = _CACHE[key] = _parse(text, tuple(candidates), move_forms())
    return got


def target_text(item: Item) -> str:
    """The question's target as the story writes it."""
    meta = item.metadata
    if meta.get("target_text"):
        return str(meta["target_text"])
    if item.target and re.search(rf"\b{re.escape(item.target)}\b", item.story):
        return item.target
    if item.question_type == "wm_object":  # told with objects: map the name
        return _object_names(item).get(item.target, item.target).removeprefix("the ")
    return item.target


def _object_names(item: Item) -> dict[str, str]:
    """Character → object name of a story told with objects: the item's own
    ``metadata["object_names"]``, else the default names in the storyboard's cast order."""
    from tomstats.stories.settings import OBJECT_NAMES

    recorded = item.metadata.get("object_names")
    if isinstance(recorded, dict):
        return {str(k): str(v) for k, v in recorded.items()}
    chars = item.metadata.get("storyboard", {}).get("characters", [])
    return dict(zip(chars, OBJECT_NAMES, strict=False))


def _role_names(item: Item) -> dict[str, str]:
    """``T``, ``S1``, ``S2`` as the story writes them (only those the question has)."""
    roles = {"T": target_text(item)}
    agents = list(item.agents)
    if item.question_type == "wm_object":
        names = _object_names(item)
        agents = [names.get(a, a).removeprefix("the ") for a in agents]
    for label, name in zip(("S1", "S2"), agents, strict=False):
        roles[label] = name
    return {k: v for k, v in roles.items() if v}


@dataclass(frozen=True)
class ItemParse:
    """A parsed story bound to one item's questioned characters (what a rule reads).

    Attributes
    ----------
    item : Item
    story : StoryParse
    roles : dict
        ``"T"``, ``"S1"``, ``"S2"`` → the name as written (only the roles the question has).
    """

    item: Item
    story: StoryParse
    roles: dict[str, str]

    def moves(self, role: str) -> tuple[Move, ...]:
        """The told moves of ``role`` (joins included); ``()`` when the item lacks it."""
        return self.story.moves_of(self.roles[role]) if role in self.roles else ()

    def dests(self, role: str) -> tuple[str, ...]:
        """The places ``role`` is told moving into, in order (joins name none)."""
        return self.story.dests_of(self.roles[role]) if role in self.roles else ()

    def comentions(self, role: str) -> tuple[str, ...]:
        """The places named in the sentences that name ``role``, in order."""
        return self.story.comentions_of(self.roles[role]) if role in self.roles else ()

    @property
    def flat(self) -> tuple[str, ...]:
        """Every place mention of the story, in order."""
        return self.story.flat

    def coverage(self) -> tuple[int, int] | None:
        """``(told moves parsed, recorded moves into a candidate place)``; ``None`` without
        such recorded events (the comparison the audit's ``move_coverage`` makes)."""
        events = self.item.metadata.get("events")
        if not isinstance(events, list) or not events:
            return None
        cands = set(self.story.candidates)
        enters = 0
        for e in events:
            if isinstance(e, dict):
                enters += e.get("action") == "enter" and e.get("location") in cands
            elif isinstance(e, list | tuple) and len(e) > 2:
                enters += e[2] in cands
        if not enters:
            return None
        return len(self.story.moves), enters


def item_parse(item: Item) -> ItemParse:
    """The :class:`ItemParse` of ``item`` (its story parsed once per text)."""
    return ItemParse(item, parse_story(item.story, item.candidates), _role_names(item))
