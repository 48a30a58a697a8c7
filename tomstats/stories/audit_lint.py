r"""Text lint of the item audit: what a careful reader rejects, counted per story.

Prose is part of the instrument: a defect a careful reader notices is noise a model is
scored on. :func:`lint_story` counts, in one story of a setting, the defects of
:data:`LINT_CHECKS` (every one a precise, testable rule):

``a_before_vowel``
    The article "a" before a word that starts with a vowel letter ("a orange"), except
    words whose vowel sounds as a consonant (:data:`VOWEL_EXCEPTIONS`: "a user", "a one").
``stacked_adverbials``
    A sentence with two or more manner or time adverbials, an adverbial being a
    comma-delimited segment of the sentence that is one of :data:`ADVERBIALS` (the
    generator's adverbials and sentence openers): "This afternoon, Bob fixes a loose
    button, soon afterwards."
``tense_clash``
    A sentence that opens with a present-time marker (:data:`PRESENT_MARKERS`: "Right
    now, …", "All the while, …") whose main clause holds a past or perfect form. The main
    clause is the text after the marker, without comma-delimited adverbials
    (:data:`ADVERBIALS`), up to the first quotation mark or subordinator (:data:`SUBORDINATORS`:
    ``that``, ``whether``, ``about``, …); a past or perfect form is ``was``, ``were``,
    ``had``, ``did``, a word of :data:`IRREGULAR_PAST`, or ``has``/``have`` followed by a
    word ending in ``-ed``. "Right now, Hank has heard that …", "All the while, the support
    call was scheduled weeks ago.", "Today, Alice once lost a glove …" are clashes; "Right
    now, Bob remembers a party long ago." is not.
``near_duplicate``
    A sentence whose set of lower-case words, its comma-delimited adverbials
    (:data:`ADVERBIALS`) left out, has a Jaccard index of at least
    :data:`NEAR_DUPLICATE_JACCARD` with one of the :data:`NEAR_DUPLICATE_WINDOW` sentences
    before it (verbatim repeats included): "The quarry echoes when anyone speaks.
    Apparently, the quarry echoes when anyone speaks." and "Just then, Dan recalls a long
    story. Later on, Dan recalls a long story." (the same words once the openers are out: 1).
``foreign_words``
    A word of another setting's sentence bank, or another setting's place name, in a story
    of this setting (:func:`foreign_vocabulary`): walls, pens or weekend tidying in a
    conference call; repainting in a field.
``move_runs``
    A run of more than :data:`MAX_MOVE_RUN` consecutive sentences that are all told moves
    (:mod:`tomstats.stories.audit_parse`): a stretch of bare moves instead of a story.
``repeated_opener``
    A sentence that opens with the same manner or time phrase (:data:`ADVERBIALS`) as one
    of the :data:`OPENER_WINDOW` sentences before it: "Meanwhile, Bob naps. Meanwhile, Dan
    reads."
``contradiction``
    A description or remark about a place that cannot be true beside one told earlier of
    the same place (:data:`tomstats.stories.narrative.CLASHES`: "The lounge smells of fresh
    bread." and "The lounge still smells of fresh paint."), or a description that singles
    a place out told of a second place (:data:`tomstats.stories.narrative.ONE_PLACE`: "the
    tidiest place in the house"). A sentence is read as a template of the setting once its
    manner phrases are dropped, its place written ``{l}`` and its first word, a name,
    ``{a}``.
``timed_description``
    A description of a place (a state, not an event) opened by a manner or time phrase
    other than :data:`tomstats.stories.narrative.STATIC_OPENERS`: "In the meantime, the
    lounge has a creaky wooden floor."
``misfit_place``
    A move, description or remark about the hub in a form that fits the setting's other
    places only (:func:`tomstats.stories.narrative.place_templates`): "Bob climbs down
    into the field.", "The field is deeper than it looks.", "The lobby runs late as usual."

The audit sums the counts per (setting, length) and fails each check on any count above 0.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from tomstats.stories.audit_parse import StoryParse
from tomstats.stories.narrative import MANNER_PHRASES, opener, without_manner

__all__ = ["ADVERBIALS", "CURATED_FOREIGN", "IRREGULAR_PAST", "LINT_CHECKS", "MAX_MOVE_RUN",
           "NEAR_DUPLICATE_JACCARD", "NEAR_DUPLICATE_WINDOW", "OPENER_WINDOW", "PRESENT_MARKERS",
           "SUBORDINATORS", "VOWEL_EXCEPTIONS", "foreign_vocabulary", "lint_story"]

#: The lint checks, in the order they are reported.
LINT_CHECKS = ("a_before_vowel", "stacked_adverbials", "tense_clash", "near_duplicate",
               "foreign_words", "move_runs", "repeated_opener", "contradiction",
               "timed_description", "misfit_place")
#: How many sentences before a sentence are compared with its opener.
OPENER_WINDOW = 3

#: Word beginnings after which "a" is right although the word starts with a vowel letter.
VOWEL_EXCEPTIONS = ("uni", "use", "usu", "uti", "uto", "ure", "eu", "one", "once", "ewe")

#: Manner and time adverbials and sentence openers of the first design generator. The lint
#: adds :data:`tomstats.stories.narrative.MANNER_PHRASES` and the strings of tuples that
#: :mod:`tomstats.stories.narrative` names ``*ADVERBIALS*`` or ``*OPENERS*``.
ADVERBIALS = (
    "after a while", "without a word", "humming a tune", "a little later", "after lunch",
    "with a yawn", "in no particular hurry", "checking the time", "with a cup of tea",
    "before anyone can say anything", "still smiling", "rubbing their eyes",
    "on second thought", "soon afterwards", "quite suddenly", "with a sigh",
    "whistling softly", "as the clock strikes", "half an hour later", "without looking back",
    "carrying a notebook", "deep in thought", "at last", "a few minutes later",
    "meanwhile", "by now", "as usual", "for once", "just then", "today", "at this hour",
    "oddly enough", "as always", "right now", "in the meantime", "once again",
    "this afternoon", "even so", "all the while", "of course", "somehow", "apparently",
    "still", "later on")

#: Openers that set the narration in the present moment.
PRESENT_MARKERS = ("right now", "at this hour", "all the while", "this afternoon", "today",
                   "at the moment", "just now", "meanwhile", "in the meantime")

#: Words that end a main clause (the tense of what follows is free).
SUBORDINATORS = ("that", "whether", "if", "who", "which", "when", "where", "because",
                 "about", "how", "why", "while")

#: Past tense and past participle forms that do not end in ``-ed``.
IRREGULAR_PAST = ("heard", "dreamt", "lost", "saw", "seen", "went", "gone", "came",
                  "been", "done", "made", "got", "forgot", "found", "left", "kept",
                  "brought", "bought", "told", "dug", "spun", "taken", "written",
                  "eaten", "ran", "spent", "slept")

#: Jaccard index of word sets from which two sentences are near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.8
#: How many earlier sentences a sentence is compared with.
NEAR_DUPLICATE_WINDOW = 10
#: Longest allowed run of consecutive move sentences.
MAX_MOVE_RUN = 6

#: Words a careful reader rejects in a setting whatever its sentence banks say (the
#: physical world in a conference call; indoor upkeep in a field; call vocabulary in a
#: house), compared after :func:`_norm`.
CURATED_FOREIGN: dict[str, tuple[str, ...]] = {
    "calls": ("wall", "floor", "ceiling", "door", "curtain", "rug", "carpet", "lamp", "pen",
              "pencil", "weekend", "tidy", "tidied", "tidying", "paint", "painted",
              "repainted", "haunted", "dust", "draught", "heating", "flower", "glove",
              "furniture", "sofa", "shelf", "cupboard", "wallpaper"),
    "field": ("repainted", "painted", "paint", "wallpaper", "ceiling", "curtain", "rug",
              "carpet", "lamp", "heating", "tidy", "tidied", "tidying", "furniture", "sofa",
              "shelf", "cupboard", "microphone", "mute", "agenda", "slide"),
    "rooms": ("microphone", "mute", "agenda", "spreadsheet", "dial"),
}

_STOP = frozenset("""a an the and or but if then than so of in on at to into onto over
under for from with without by about after before as is are was were be been being has
have had do does did not no nor it its this that these those there here he she they them
their his her we you i my your our me us who whom which what when where why how all any
some every each one two three few more most much many other another such only own same
just also very too quite still again ever never now up down out off away back once while
until long little big small old new first last next around across through between
somewhere anyone someone nobody everyone nothing something time day can will would could
should may might must shall let lot bit half whole side way part end edge top bottom use
used said see seen head make move play run wait waiting year people full high open fall
stand standing step rest single lit bright above along barely soft tall deeper hidden
shared drop slip hang grow circle faint faded drawn halfway collected service everything
anything usual today always""".split())

_WORDS = re.compile(r"[a-z][a-z'-]*")


def _norm(w: str) -> str:
    """A word as compared: lower case, no possessive, a plural ``s`` dropped."""
    w = w.lower().removesuffix("'s")
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def _tokens(text: str) -> set[str]:
    text = re.sub(r"\{[^}]*\}", " ", text.lower())
    return {_norm(w) for w in _WORDS.findall(text)}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


@lru_cache(maxsize=8)
def _vocabularies() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]],
                             dict[str, tuple[str, ...]]]:
    """Per setting: its bank's words, its forbidden words, the other settings' places."""
    from tomstats.stories import narrative

    settings = narrative.NATURAL_SETTINGS
    owned_ids: set[int] = set()
    banks: dict[str, set[str]] = {}
    place_words: set[str] = set()
    for name, st in settings.items():
        words: set[str] = set()
        for f in dataclasses.fields(st):
            if f.name in ("name", "instructions"):
                continue
            value = getattr(st, f.name)
            owned_ids.add(id(value))
            for s in _strings(value):
                words |= _tokens(s)
        banks[name] = words
        for loc in st.locations:
            place_words |= _tokens(loc)
    shared: set[str] = set()
    for attr, value in vars(narrative).items():
        if attr.startswith("__") or id(value) in owned_ids:
            continue
        for s in _strings(value):
            shared |= _tokens(s)
    forbidden, places = {}, {}
    for name in settings:
        others = set().union(*(banks[o] for o in settings if o != name))
        derived = others - banks[name] - shared - _STOP - place_words
        curated = {_norm(w) for w in CURATED_FOREIGN.get(name, ())} - banks[name]
        forbidden[name] = frozenset(derived | curated)
        mine = {loc.lower() for loc in settings[name].locations}
        places[name] = tuple(sorted({loc.lower().replace("_", " ")
                                     for o in settings if o != name
                                     for loc in settings[o].locations} - mine))
    return ({k: frozenset(v) for k, v in banks.items()}, forbidden, places)


def foreign_vocabulary(setting: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The words (as compared: lower case, plural ``s`` dropped) and the place names a
    story of ``setting`` must not use; empty for a setting :mod:`~tomstats.stories.\
narrative` does not define.

    The words are those of the other settings' sentence banks (every text field but the
    name and the instructions of their :class:`~tomstats.stories.narrative.NaturalSetting`)
    that are neither in this setting's bank, nor in a sentence form
    :mod:`~tomstats.stories.narrative` shares between settings (a module-level text no
    setting holds), nor in a short list of function words, nor in a place name; plus
    :data:`CURATED_FOREIGN`, less this setting's bank. The places are the other settings'
    place names.
    """
    _banks, forbidden, places = _vocabularies()
    return forbidden.get(setting, frozenset()), places.get(setting, ())


_A_VOWEL = re.compile(r"(?<![\w'])[Aa] ([AEIOUaeiou][\w'-]*)")


def _adverbial_count(sentence: str, vocab: frozenset[str]) -> int:
    """Comma-delimited segments of ``sentence`` (lower case) that are adverbials."""
    body = sentence.rstrip(".!?")
    return sum(seg.strip() in vocab for seg in body.split(","))


def _tense_clash(sentence: str, irregular: frozenset[str], vocab: frozenset[str]) -> bool:
    low = sentence.lower().rstrip(".!?")
    head = next((m for m in PRESENT_MARKERS if low.startswith(m + ", ")), None)
    if head is None:
        return False
    rest = ",".join(seg for seg in low[len(head) + 2:].split(",")
                    if seg.strip() not in vocab)
    main = re.split(r'["“”]|\b(?:' + "|".join(SUBORDINATORS) + r")\b", rest, maxsplit=1)[0]
    words = _WORDS.findall(main)
    for i, w in enumerate(words):
        if w in ("was", "were", "had", "did") or w in irregular:
            return True
        if w in ("has", "have") and i + 1 < len(words) and words[i + 1].endswith("ed"):
            return True
    return False


def _narrative_extra(kind: str) -> tuple[str, ...]:
    from tomstats.stories import narrative

    out: list[str] = []
    for attr, value in vars(narrative).items():
        if kind in attr.upper():
            out += [s.lower() for s in _strings(value) if "{" not in s]
    return tuple(out)


@lru_cache(maxsize=1)
def _adverbial_vocab() -> frozenset[str]:
    return frozenset(ADVERBIALS) | MANNER_PHRASES | frozenset(_narrative_extra("ADVERBIAL")) \
        | frozenset(_narrative_extra("OPENER"))


@lru_cache(maxsize=8)
def _place_regex(setting: str) -> re.Pattern[str] | None:
    places = foreign_vocabulary(setting)[1]
    if not places:
        return None
    alt = "|".join(re.escape(p) for p in sorted(places, key=len, reverse=True))
    return re.compile(rf"(?<![\w])(?:{alt})(?![\w])")


_NORM: dict[str, str] = {}


def lint_story(parse: StoryParse, setting: str,
               found: Counter[str] | None = None) -> dict[str, int]:
    """Count the defects of :data:`LINT_CHECKS` in one parsed story of ``setting``.

    ``found``, when given, collects the foreign words and places met (for the report).
    """
    text = parse.text
    low_text = text.lower()
    counts = dict.fromkeys(LINT_CHECKS, 0)
    counts["a_before_vowel"] = sum(
        not m.group(1).lower().startswith(VOWEL_EXCEPTIONS) for m in _A_VOWEL.finditer(text))
    vocab = _adverbial_vocab()
    irregular = frozenset(IRREGULAR_PAST)
    words, _places = foreign_vocabulary(setting)
    sents = [low_text[a:b] for a, b in parse.spans]
    for low in sents:
        if "," in low:
            if _adverbial_count(low, vocab) >= 2:
                counts["stacked_adverbials"] += 1
            if low.split(",", 1)[0] in PRESENT_MARKERS and _tense_clash(low, irregular, vocab):
                counts["tense_clash"] += 1
    counts["near_duplicate"] = _near_duplicates(
        [_WORDS.findall(without_manner(low, vocab)) for low in sents])
    bad: list[str] = []
    for w, k in Counter(w for low in sents for w in _WORDS.findall(low)).items():
        n = _NORM.get(w)
        if n is None:
            n = _NORM[w] = _norm(w)
        if n in words:
            bad += [n] * k
    rx = _place_regex(setting)
    if rx is not None:
        bad += rx.findall(low_text)
    counts["foreign_words"] = len(bad)
    if found is not None:
        found.update(bad)
    counts["move_runs"] = _long_runs(sorted({m.sentence for m in parse.moves}))
    openers = [opener(low, vocab) for low in sents]
    counts["repeated_opener"] = sum(
        op is not None and op in openers[max(0, i - OPENER_WINDOW):i]
        for i, op in enumerate(openers))
    (counts["contradiction"], counts["timed_description"],
     counts["misfit_place"]) = _place_sentences(parse, sents, openers, setting, vocab)
    return counts


@dataclasses.dataclass(frozen=True)
class _Templates:
    """A setting's place templates by their key (lower case, no final stop), those that do
    not fit its hub, its descriptions, the hub, the clashing templates of each template,
    the one-place templates and the openers a description takes."""

    keys: dict[str, str]
    misfit: frozenset[str]
    descriptions: frozenset[str]
    hub: str
    clashes: dict[str, frozenset[str]]
    one_place: frozenset[str]
    static: frozenset[str]


@lru_cache(maxsize=8)
def _templates(setting: str) -> _Templates | None:
    """The place templates of ``setting`` (``None``: :mod:`~tomstats.stories.narrative`
    does not define it)."""
    from tomstats.stories import narrative

    st = narrative.NATURAL_SETTINGS.get(setting)
    if st is None:
        return None
    fits = narrative.place_templates(st)
    clashes: dict[str, set[str]] = {}
    for a, b in narrative.CLASHES.get(setting, ()):
        clashes.setdefault(a, set()).add(b)
        clashes.setdefault(b, set()).add(a)
    return _Templates({t.lower().rstrip("."): t for t in (*fits["places"], *fits["hub"])},
                      frozenset(fits["places"]) - frozenset(fits["hub"]),
                      frozenset(fits["descriptions"]), st.hub,
                      {k: frozenset(v) for k, v in clashes.items()}, narrative.ONE_PLACE,
                      frozenset(x.lower() for x in narrative.STATIC_OPENERS))


def _place_sentences(parse: StoryParse, sents: list[str], openers: list[str | None],
                     setting: str, vocab: frozenset[str]) -> tuple[int, int, int]:
    """The ``contradiction``, ``timed_description`` and ``misfit_place`` counts of a story
    (see the module docstring)."""
    tp = _templates(setting)
    if tp is None:
        return 0, 0, 0
    told: dict[str, set[str]] = {}
    owner: dict[str, str] = {}
    bad = timed = odd = 0
    for low, places, op in zip(sents, parse.places, openers, strict=True):
        if len(set(places)) != 1:
            continue
        place = places[0]
        key = without_manner(low, vocab).strip().rstrip(".!? ")
        key = key.replace("the " + place.replace("_", " ").lower(), "{l}", 1)
        t = tp.keys.get(key)
        if t is None:
            t = tp.keys.get("{a} " + key.partition(" ")[2])
        if t is None:
            continue
        odd += place == tp.hub and t in tp.misfit
        timed += op is not None and t in tp.descriptions and op not in tp.static
        elsewhere = t in tp.one_place and owner.setdefault(t, place) != place
        bad += elsewhere or bool(tp.clashes.get(t, frozenset()) & told.get(place, set()))
        told.setdefault(place, set()).add(t)
    return bad, timed, odd


def _near_duplicates(tokens: list[list[str]]) -> int:
    """Sentences whose word set has a Jaccard index of at least
    :data:`NEAR_DUPLICATE_JACCARD` with one of the :data:`NEAR_DUPLICATE_WINDOW` before.

    A boolean sentence × word matrix ``M``; for each lag ``L``, the intersections of rows
    ``i`` and ``i - L`` are the row sums of ``M[L:] & M[:-L]`` and the unions
    ``|A| + |B| - |A & B|``.
    """
    import numpy as np

    n = len(tokens)
    if n < 2:
        return 0
    flat = [w for ts in tokens for w in ts]
    if not flat:
        return 0
    _uniq, inv = np.unique(np.array(flat), return_inverse=True)
    if n * len(_uniq) > 20_000_000:  # a huge text: compare word sets, in linear memory
        return _near_duplicates_sets([set(ts) for ts in tokens])
    rows = np.repeat(np.arange(n), [len(ts) for ts in tokens])
    m = np.zeros((n, len(_uniq)), dtype=bool)
    m[rows, inv] = True
    size = m.sum(axis=1)
    dup = np.zeros(n, dtype=bool)
    for lag in range(1, min(NEAR_DUPLICATE_WINDOW, n - 1) + 1):
        inter = (m[lag:] & m[:-lag]).sum(axis=1)
        union = size[lag:] + size[:-lag] - inter
        dup[lag:] |= (union > 0) & (inter >= NEAR_DUPLICATE_JACCARD * union)
    return int(dup.sum())


def _near_duplicates_sets(sets: list[set[str]]) -> int:
    """:func:`_near_duplicates` with Python sets (same count, memory linear in the text)."""
    count = 0
    for i, a in enumerate(sets):
        for b in sets[max(0, i - NEAR_DUPLICATE_WINDOW):i]:
            union = len(a | b)
            if union and len(a & b) >= NEAR_DUPLICATE_JACCARD * union:
                count += 1
                break
    return count


def _long_runs(move_sentences: Iterable[int]) -> int:
    """Runs of more than :data:`MAX_MOVE_RUN` consecutive sentence indices."""
    runs, length, prev = 0, 0, None
    for i in move_sentences:
        length = length + 1 if prev is not None and i == prev + 1 else 1
        if length == MAX_MOVE_RUN + 1:
            runs += 1
        prev = i
    return runs
