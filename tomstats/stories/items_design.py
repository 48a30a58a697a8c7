"""The real 5×3 design: context length in words × ToM order, ``n`` items per cell.

One *story* per (context length, replicate) is told by :mod:`tomstats.stories.plot`: a
belief scenario (who sees which of ``T``'s moves) inside a whole story in a natural
setting (:mod:`tomstats.stories.narrative`), at the target length ±2 %. Each story is
asked at every requested order, so that order and length are crossed within stories:
order 0 "Where is T?", order 1 "Where does S1 think T is?", order 2 "Where does S1 think
S2 thinks T is?", and optionally the world-model questions. Within each context length the
scenarios cycle (:data:`~tomstats.stories.plot.CYCLE`: half true beliefs at orders 1 and 2,
order-2 answers that differ from every simpler question's in 8 stories of 24) and each
pair of stories takes the order of the locations, of several drawn, whose answers have
been each question's answer least often so far in its length (:func:`_balanced_places`),
so each location is each answer about equally often in every cell. With ``within_story``
a story is drawn once per replicate and told at every context length instead (a length
ladder, :mod:`tomstats.stories.ladder`). Gold answers always come from the belief
tracker — its integer-coded form :mod:`tomstats.stories.coded_tracker`, which gives the
answers of the readable :func:`tomstats.stories.beliefs.belief` and
:func:`tomstats.stories.questions.wm_answer` (tested) — and are cross-checked against
the scenario's expected answers.

:func:`design_storyboard` is the storyboard of the first (format-1) design, StorySim's
second-order storyboard with filler from the other characters; the storyboard engine's
tests still use it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import sys
from collections.abc import Iterable, Sequence

from tomstats.stories.items import Item
from tomstats.stories.ladder import ANCHORS, grow_story, words_after_block
from tomstats.stories.narrative import NaturalSetting, listing, natural_setting
from tomstats.stories.plot import (
    EXTRA_UNSEEN,
    P_JOIN_PLACE,
    SCENARIOS,
    PlotStory,
    cycle_scenario,
    tell_story,
    tracker_answers,
)
from tomstats.stories.questions import first_common_location, tom_question, wm_question
from tomstats.stories.render import (
    word_count,
)
from tomstats.stories.selection import N_FOLDS, Reading, read_item, select_tellings
from tomstats.stories.settings import CHARACTERS, OBJECT_NAMES, Setting
from tomstats.stories.storyboard import (
    Storyboard,
    cross_paths,
    exclusive_random,
    move,
)
from tomstats.stories.weaving import check_host, host_sentences, weave
from tomstats.stories.world import World

__all__ = ["DEFAULT_CONTEXTS", "DEFAULT_ORDERS", "QUESTION_TYPES", "build_design_items",
           "derive_seed", "design_storyboard", "plot_items"]

#: The paper's context lengths (words) and ToM orders.
DEFAULT_CONTEXTS = (200, 500, 1000, 2000, 5000)
DEFAULT_ORDERS = (0, 1, 2)
#: Extra question types a story can also be asked (world-model controls, order 0).
QUESTION_TYPES = ("tom", "wm_human", "wm_object")


#: Random orders of the locations a pair of stories chooses its places from
#: (:func:`_balanced_places`).
PLACE_DRAWS = 64


def derive_seed(*parts: object) -> int:
    """A stable 63-bit seed from any parts (same parts → same seed, on any machine)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def design_storyboard(setting: Setting, characters: Sequence[str], n: int, *,
                      mislead_distance: int, critical_start: int,
                      rng: random.Random) -> Storyboard:
    """The second-order storyboard with filler from non-key characters only.

    ``critical_start`` is the step at which the first key character enters ``L1``; the
    critical block lasts ``mislead_distance + 5`` steps.
    """
    s1, s2, t = rng.sample(list(characters), 3)
    l1 = rng.choice([p for p in setting.places if (setting.hub, p) in setting.edges])
    nb = {a: [b for x, b in setting.edges if x == a] for a in setting.locations}
    l2 = rng.choice(sorted(x for x in nb[l1] if x != l1))
    l3 = rng.choice(sorted(x for x in nb[l2] if x not in (l1, l2)))
    arrivals = rng.sample([s1, s2, t], 3)
    c, m, key = critical_start, mislead_distance, (s1, s2, t)
    events = (exclusive_random(key, 0, c), move(arrivals[0], l1, c),
              move(arrivals[1], l1, c + 1), cross_paths(arrivals, l1, c + 2),
              move(t, l2, c + 3), cross_paths((t, s2), l2, c + 4),
              exclusive_random(key, c + 5, c + 4 + m), move(t, l3, c + 4 + m),
              exclusive_random(key, c + 5 + m, n))
    return Storyboard(tuple(characters), setting.locations, setting.edges, events, n,
                      setting.hub, setting=setting.name, name="second_order_design",
                      roles={"S1": s1, "S2": s2, "T": t, "L1": l1, "L2": l2, "L3": l3})


def _check_design_args(n_per_cell: int, seed: int, contexts: Sequence[int],
                       orders: Sequence[int], n_characters: int, mislead_distance: int,
                       critical_position: float | None, question_types: Sequence[str],
                       true_belief_share: float) -> None:
    def bad_int(x: object, lo: int) -> bool:
        return not isinstance(x, int) or isinstance(x, bool) or x < lo

    if bad_int(n_per_cell, 1):
        raise ValueError(f"n_per_cell must be a positive integer, got {n_per_cell!r}")
    if bad_int(seed, 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not contexts or any(bad_int(c, 1) for c in contexts) or len(set(contexts)) != len(
            contexts):
        raise ValueError(f"contexts must be distinct positive integers (words), got "
                         f"{list(contexts)!r}")
    if not orders or any(o not in DEFAULT_ORDERS for o in orders) or len(set(orders)) != len(
            orders):
        raise ValueError(f"orders must be distinct values among {DEFAULT_ORDERS} (the design "
                         f"story supports ToM orders 0–2), got {list(orders)!r}")
    if bad_int(n_characters, 4) or n_characters > len(CHARACTERS):
        raise ValueError(f"n_characters must be an integer in [4, {len(CHARACTERS)}] (three "
                         f"key characters and at least one for the filler), got "
                         f"{n_characters!r}")
    if bad_int(mislead_distance, 1):
        raise ValueError(f"mislead_distance must be an integer ≥ 1, got {mislead_distance!r}")
    if critical_position is not None and (not isinstance(critical_position, (int, float))
                                          or not 0 <= critical_position <= 1):
        raise ValueError(f"critical_position must be in [0, 1] or None, got "
                         f"{critical_position!r}")
    for q in question_types:
        if q not in QUESTION_TYPES:
            raise ValueError(f"question_types: {q!r} is not one of {QUESTION_TYPES}")
    if not isinstance(true_belief_share, (int, float)) or true_belief_share not in (0, 0.5, 1):
        raise ValueError(f"true_belief_share must be 0, 0.5 or 1, got {true_belief_share!r}")


def _check_ladder_args(within_story: bool, anchor: str, contexts: Sequence[int],
                       host_text: str | None) -> None:
    if not isinstance(within_story, bool):
        raise ValueError(f"within_story must be True or False, got {within_story!r}")
    if anchor not in ANCHORS:
        raise ValueError(f"ladder_anchor must be one of {ANCHORS}, got {anchor!r}")
    if not within_story:
        if anchor != "relative":
            raise ValueError(f"ladder_anchor={anchor!r} needs within_story=True (it places "
                             f"the critical block of a length ladder)")
        return
    if len(contexts) < 2:
        raise ValueError(f"within_story needs two context lengths or more (a ladder tells "
                         f"each story at every length), got contexts={list(contexts)!r}")
    if host_text is not None and anchor != "relative":
        raise ValueError(f"ladder_anchor={anchor!r} cannot be kept with host_text: weaving "
                         f"spreads the story's sentences through the host text itself")


def build_design_items(n_per_cell: int, seed: int,
                       contexts: Sequence[int] = DEFAULT_CONTEXTS,
                       orders: Sequence[int] = DEFAULT_ORDERS, setting: str = "rooms", *,
                       n_characters: int = 8, mislead_distance: int = 10,
                       critical_position: float | None = None,
                       question_types: Sequence[str] = ("tom",),
                       true_belief_share: float = 0.5, host_text: str | None = None,
                       tolerance: float = 0.02, tellings: int = 3,
                       within_story: bool = False, ladder_anchor: str = "relative",
                       progress: bool | None = None, cores: int = 1) -> list[Item]:
    """Build the context-length × ToM-order item set (the paper's 5×3 design, for real).

    Each story is a :mod:`tomstats.stories.plot` story: a belief scenario told inside a
    whole story in a natural setting (:mod:`tomstats.stories.narrative`), asked at every
    requested order. Scenarios cycle within each context length (:data:`~tomstats.stories.\
plot.CYCLE`): half the order-1 and half the order-2 items are true beliefs (stories
    ``2i`` and ``2i + 1`` are one of each, so every even ``n_per_cell`` is balanced exactly
    and every odd one within one story), and the
    order-2 answer differs from every simpler question's answer in 8 stories of 24.

    Parameters
    ----------
    n_per_cell : int
        Stories per context length; each story is asked at every order, so every
        (context, order) cell gets ``n_per_cell`` items.
    seed : int
        Master seed: same seed and arguments → the same items (ids, texts, answers).
    contexts : sequence of int
        Target story lengths in words (achieved within ±``tolerance``).
    orders : sequence of int
        ToM orders among 0 (reality), 1, 2.
    setting : {"rooms", "field", "calls"}
    n_characters : int
        Characters per story (three key characters plus filler characters).
    mislead_distance : int
        Events between S1's last perception of T and T's final move, when S1's belief is
        false (≥ 1).
    critical_position : float or None
        Where the critical block starts among the free words: 0 start, 1 end; ``None``
        (default): drawn uniformly for every story.
    question_types : sequence of str
        ``"tom"`` (the order questions) and optionally ``"wm_human"``, ``"wm_object"``
        (StorySim's world-model controls, order 0, one extra item each per story; the
        object story tells the same events with objects for the characters).
    true_belief_share : {0.5, 0, 1}
        0.5: the balanced scenario cycle; 0: false beliefs only (``ff_*`` scenarios);
        1: true beliefs at both orders only (``tt``).
    host_text : str, optional
        A natural text to weave the stories into (BABILong-style,
        :mod:`tomstats.stories.weaving`): every story is told at the smallest context length,
        without object handling, and spread through consecutive host sentences up to each
        context length. Refused (``ValueError`` naming the word) when it names a character
        or a place of the stories, or an object of the ``wm_object`` telling.
        ``Item.critical_position`` is then ``None`` (``metadata["critical_position_story"]``
        keeps the position within the story).
    tolerance : float
        Relative length tolerance (0.02 = ±2 %).
    tellings : int
        Adversarial storyboard selection (:mod:`tomstats.stories.selection`): every pair
        of stories is told this many times, each telling with its own random stream and
        the same scenario, places, cast and join places, and the telling whose
        false-belief answers the audit's learned adversary (cross-fitted by pair) finds
        least is kept; ``metadata["selection"]`` records it. 1: no selection. With
        ``within_story`` a telling is a whole ladder (both versions at every length) and
        its score is summed over the ladder's steps, so one telling is kept per ladder.
    within_story : bool
        Length ladders (:mod:`tomstats.stories.ladder`): each story is told at every
        length in ``contexts`` — the same characters, places, events, critical block,
        questions and gold answers —, drawn once at the shortest length and grown with
        sentences that move no one. ``n_per_cell`` ladders; the items of a story share
        ``metadata["story_id"]`` (``"{setting}-s{seed}-l{replicate}"``) across lengths
        and record ``metadata["ladder"]``: ``step`` (0 = shortest), ``lengths``,
        ``anchor``, ``position`` (the target share of free words before the block, drawn
        per ladder when ``critical_position`` is ``None``) and ``words_after_block``.
        Needs two lengths or more.
    ladder_anchor : {"relative", "end"}
        ``within_story``: where the grown words go. ``"relative"`` keeps the block's share
        of the free words before it; ``"end"`` keeps the words after the block (the
        shortest step's) and puts every new word before it. Not with ``host_text``
        (weaving places the story's sentences itself).
    progress : bool or None
        Show a progress bar (``None``: only when stderr is a terminal).
    cores : int
        Processes that tell the stories (and read them for the selection): 1 (default)
        tells them in this process; more start worker processes (forked; spawned where
        JAX is loaded or the platform cannot fork, and then a script that calls this needs
        the ``if __name__ == "__main__":`` guard of :mod:`multiprocessing`). The items do
        not depend on ``cores``.

    Returns
    -------
    list of Item
        Ordered by context, story, order; ``item_id`` is
        ``"{setting}-s{seed}-w{context}-r{replicate}-o{order}"`` (a ladder's
        ``"{setting}-s{seed}-w{context}-l{replicate}-o{order}"``).

    Examples
    --------
    >>> items = build_design_items(2, seed=1, contexts=(200,), orders=(0, 1, 2))
    >>> len(items), sorted({it.tom_order for it in items})
    (6, [0, 1, 2])
    >>> all(196 <= it.n_words <= 204 for it in items)
    True
    """
    _check_design_args(n_per_cell, seed, contexts, orders, n_characters, mislead_distance,
                       critical_position, question_types, true_belief_share)
    _check_ladder_args(within_story, ladder_anchor, contexts, host_text)
    if not isinstance(tellings, int) or isinstance(tellings, bool) or tellings < 1:
        raise ValueError(f"tellings must be a positive integer, got {tellings!r}")
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise ValueError(f"cores must be a positive integer, got {cores!r}")
    st = natural_setting(setting)
    need = _min_plot_words(st, n_characters, mislead_distance, "wm_object" in question_types)
    if min(contexts) < need:
        told = " told with objects (wm_object)" if "wm_object" in question_types else ""
        raise ValueError(
            f"contexts: {min(contexts)} words cannot hold the opening sentence and the "
            f"critical events{told} (at least {need} words with mislead distance "
            f"{mislead_distance} and {n_characters} characters)")
    host = None
    if host_text is not None:
        names = [*CHARACTERS[:n_characters], *st.locations]
        if "wm_object" in question_types:
            names += [o.removeprefix("the ") for o in object_names(st, n_characters)]
        check_host(host_text, names)
        host = host_sentences(host_text)
        need = max(contexts) - min(contexts)
        have = sum(len(x.split()) for x in host)
        if have < need * 1.05:
            raise ValueError(f"host_text has {have} words; weaving up to {max(contexts)} "
                             f"words needs about {math.ceil(need * 1.05)}")
    # a length ladder draws its stories once ("ladder" in their seeds) for every length
    keys: Sequence[int | str] = ("ladder",) if within_story else contexts
    jobs = [(c, r) for c in keys for r in range(n_per_cell)]
    extra_q = [q for q in question_types if q != "tom"]
    tom_orders = list(orders) if "tom" in question_types else []
    # per context: how often each place is each question's answer so far (the balance)
    tally: dict[int | str, dict[tuple[str, str], dict[str, int]]] = {}
    pair_places: dict[tuple[int | str, int], list[str]] = {}
    ff_seen: dict[tuple[int | str, str], int] = {}
    groups: dict[tuple[int | str, int], list[dict[str, object]]] = {}
    for context, r in jobs:
        scenario = _scenario(r, true_belief_share)
        # the two versions of a pair (stories 2i, 2i + 1: one true, one false belief at
        # both orders) share their cast, join places, beginning and places
        # (an odd n_per_cell leaves the last story's pair_id with one version: the set
        # stays prefix-stable)
        pair = r // 2
        story_seed = derive_seed(seed, setting, context, "pair", pair)
        if r % 2 == 0:  # (both versions counted, built or not: the set stays prefix-stable)
            pair_places[(context, pair)] = _balanced_places(
                st, random.Random(derive_seed(seed, setting, context, "places", pair)),
                tally.setdefault(context, {}),
                [_scenario(2 * pair + v, true_belief_share) for v in (0, 1)])
        places = pair_places[(context, pair)]
        extra = 0
        sc = SCENARIOS[scenario]
        if "false" in (sc.order1, sc.order2):
            # each length starts the cycle at its own seeded offset, order-1 false beliefs
            # (ff_*, ft) and order-2 only (tf*) each their own
            key = (context, sc.order1)
            j = ff_seen[key] = ff_seen.get(
                key, derive_seed(seed, setting, context, "extra", *key[1:]) % len(EXTRA_UNSEEN)
                if sc.order1 == "true" else
                derive_seed(seed, setting, context, "extra") % len(EXTRA_UNSEEN)) + 1
            extra = EXTRA_UNSEEN[j % len(EXTRA_UNSEEN)]
        crng = random.Random(derive_seed(story_seed, "cast"))
        cast = crng.sample(CHARACTERS[:n_characters], 3)
        joins = _join_places(st, crng, places, scenario, pair % 3 == 0)
        groups.setdefault((context, pair), []).append(dict(
            context=context, r=r, scenario=scenario, story_seed=story_seed, places=places,
            extra=extra, cast=cast, joins=joins, pair=pair,
            varied="false" in (sc.order1, sc.order2)))
    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if progress is None else bool(progress)
    bar = tqdm(total=len(jobs) * tellings, desc="ladders" if within_story else "stories",
               disable=not show, unit="ladder" if within_story else "story")
    tell_kw = dict(seed=seed, setting=setting, n_characters=n_characters, host=host,
                   contexts=contexts, tom_orders=tom_orders, extra_q=extra_q,
                   critical_position=critical_position, mislead_distance=mislead_distance,
                   tolerance=tolerance, paired=true_belief_share == 0.5, anchor=ladder_anchor)
    # the selection reads the told items' text; processes that tell also read
    read = tellings > 1 and len(groups) >= 2 * N_FOLDS
    told_sets: list[list[list[Item]]] = []
    numbers: list[list[int]] = []  # the tellings that fit, per pair
    readings: list[list[list[Reading]]] = []
    plan_groups = list(groups.values())
    with bar:
        for plans, (told, nums, reads, error) in zip(
                plan_groups, _map_groups(plan_groups, tellings, tell_kw, read, cores),
                strict=True):
            bar.update(len(plans) * tellings)
            if error is not None:
                raise error
            told_sets.append(told)
            numbers.append(nums)
            readings.append(reads)
    kept = select_tellings(told_sets, derive_seed(seed, setting, "select"),
                           readings if read else None)
    items: list[Item] = []
    for told, nums, (v, score) in zip(told_sets, numbers, kept, strict=True):
        sel = {"tellings": len(told), "kept": nums[v], "score": round(score, 4)}
        items.extend(dataclasses.replace(it, metadata={**it.metadata, "selection": sel})
                     for it in told[v])
    if within_story:  # by context, then story and order, as the between-story design
        rank = {c: i for i, c in enumerate(contexts)}
        items.sort(key=lambda it: rank[it.context_words])
    return items


GroupResult = tuple[list[list[Item]], list[int], list[list[Reading]], ValueError | None]


def _tell_group(plans: list[dict[str, object]], tellings: int, tell_kw: dict[str, object],
                read: bool) -> GroupResult:
    """Every telling of one pair of stories (or ladder): the item lists of the tellings
    that fit, their numbers, their readings for the selection (``read``) and the error of
    the first telling when it does not fit (later tellings that do not fit are dropped)."""
    st = natural_setting(str(tell_kw["setting"]))
    told: list[list[Item]] = []
    nums: list[int] = []
    for v in range(tellings):
        its: list[Item] = []
        try:
            for plan in plans:
                its.extend(_tell_items(st, plan, v, **tell_kw))  # type: ignore[arg-type]
        except ValueError as exc:
            if v == 0:
                return [], [], [], exc
            continue  # a later telling that does not fit the length is no candidate
        told.append(its)
        nums.append(v)
    reads = [[read_item(it) for it in its] for its in told] if read else []
    return told, nums, reads, None


def _map_groups(plan_groups: list[list[dict[str, object]]], tellings: int,
                tell_kw: dict[str, object], read: bool, cores: int) -> Iterable[GroupResult]:
    """:func:`_tell_group` of every group, in order: in this process (``cores`` 1), or in
    ``cores`` worker processes (forked where the platform can and JAX, whose threads a
    fork must not copy, is not loaded; else spawned). Every telling draws from its own
    seeded stream, so the items do not depend on ``cores``."""
    n = len(plan_groups)
    args = (plan_groups, [tellings] * n, [tell_kw] * n, [read] * n)
    if cores <= 1 or n < 2:
        yield from map(_tell_group, *args)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    fork = "fork" in multiprocessing.get_all_start_methods() and "jax" not in sys.modules
    ctx = multiprocessing.get_context("fork" if fork else "spawn")
    with ProcessPoolExecutor(max_workers=min(cores, len(plan_groups)), mp_context=ctx) as ex:
        yield from ex.map(_tell_group, *args, chunksize=1)


def _tell_items(st: NaturalSetting, plan: dict[str, object], telling: int, *, seed: int,
                setting: str, n_characters: int, host: list[str] | None,
                contexts: Sequence[int], tom_orders: Sequence[int], extra_q: Sequence[str],
                critical_position: float | None, mislead_distance: int, tolerance: float,
                paired: bool, anchor: str = "relative") -> list[Item]:
    """The items of one story of the design, told with the random stream of ``telling``
    (0: the story's own seed and ``plan``'s unseen moves and join places). Every telling
    keeps ``plan``'s scenario, places, cast and the belief answers' join status; a later
    telling shifts the number of ``T``'s unseen moves along
    :data:`~tomstats.stories.plot.EXTRA_UNSEEN` by ``2 * telling`` and draws the other
    join places anew. A ladder's plan (``plan["context"] == "ladder"``) gives the items of
    every step (:func:`_tell_ladder`)."""
    tell_seed, extra, joins = _telling(st, plan, telling)
    kw = dict(seed=seed, setting=setting, n_characters=n_characters, host=host,
              tom_orders=tom_orders, extra_q=extra_q, mislead_distance=mislead_distance,
              tolerance=tolerance, paired=paired)
    if plan["context"] == "ladder":
        return _tell_ladder(st, plan, tell_seed, extra, joins, contexts=contexts,
                            critical_position=critical_position, anchor=anchor, **kw)
    context, r, pair = int(plan["context"]), int(plan["r"]), int(plan["pair"])
    prefix = f"{setting}-s{seed}-w{context}-r{r:04d}"
    told = context if host is None else min(contexts)
    ps = _tell(st, CHARACTERS[:n_characters], str(plan["scenario"]), told, tell_seed,
               places=plan["places"], critical_position=critical_position,
               mislead_distance=mislead_distance, tolerance=tolerance,
               objects="wm_object" in extra_q, handling=host is None,
               extra_unseen=extra, cast=plan["cast"], join_places=joins,
               block_words=plan.get("block_words"), lively=told <= LIVELY_WORDS)
    plan.setdefault("block_words", ps.block_words)  # the other tellings start from it
    meta = {"design_seed": seed, "critical_position_target": critical_position}
    if host is not None:
        meta["critical_position_story"] = ps.critical_position
        ps = _woven(ps, host, context, random.Random(derive_seed(tell_seed, "weave", r)),
                    tolerance)
    return plot_items(ps, st, tom_orders, extra_q, item_prefix=prefix,
                      characters=CHARACTERS[:n_characters], seed=tell_seed,
                      target_words=context, metadata=meta,
                      pair_prefix=f"{setting}-s{seed}-w{context}-p{pair:04d}"
                      if paired else "")


def _telling(st: NaturalSetting, plan: dict[str, object], telling: int
             ) -> tuple[int, int, list[str]]:
    """The seed, the number of ``T``'s unseen moves and the join places of ``telling``."""
    story_seed, pair = int(plan["story_seed"]), int(plan["pair"])
    tell_seed = story_seed if telling == 0 else derive_seed(story_seed, "telling", telling)
    extra, joins = int(plan["extra"]), list(plan["joins"])
    if telling:  # another number of unseen moves, other join places but the answers'
        if plan["varied"]:
            extra = EXTRA_UNSEEN[(EXTRA_UNSEEN.index(extra) + 2 * telling) % len(EXTRA_UNSEEN)]
        joins = _join_places(st, random.Random(derive_seed(story_seed, "joins", telling)),
                             plan["places"], str(plan["scenario"]), pair % 3 == 0)
    return tell_seed, extra, joins


def _woven(ps: PlotStory, host: list[str], context: int, rng: random.Random,
           tolerance: float) -> PlotStory:
    """``ps`` woven into the host text up to ``context`` words (its object telling too)."""
    return dataclasses.replace(
        ps, text=weave(ps.text, host, context, rng, tolerance=tolerance),
        object_text=None if ps.object_text is None else
        weave(ps.object_text, host, context, rng, tolerance=tolerance),
        critical_position=None)


def _tell_ladder(st: NaturalSetting, plan: dict[str, object], tell_seed: int, extra: int,
                 joins: list[str], *, seed: int, setting: str, n_characters: int,
                 host: list[str] | None, contexts: Sequence[int], tom_orders: Sequence[int],
                 extra_q: Sequence[str], critical_position: float | None,
                 mislead_distance: int, tolerance: float, paired: bool,
                 anchor: str) -> list[Item]:
    """The items of one story at every length of its ladder (:mod:`tomstats.stories.\
ladder`): told once at the shortest length, each longer step grown from the one before with
    sentences that move no one (woven into the host text instead, when there is one)."""
    r, pair = int(plan["r"]), int(plan["pair"])
    chars = CHARACTERS[:n_characters]
    objects = "wm_object" in extra_q
    lengths = sorted(contexts)
    pos = critical_position if critical_position is not None else \
        random.Random(derive_seed(tell_seed, "position")).random()
    ps = _tell(st, chars, str(plan["scenario"]), lengths[0], tell_seed,
               places=plan["places"], critical_position=pos,
               mislead_distance=mislead_distance, tolerance=tolerance, objects=objects,
               handling=host is None, extra_unseen=extra, cast=plan["cast"],
               join_places=joins, block_words=plan.get("block_words"), lively=True)
    plan.setdefault("block_words", ps.block_words)
    story_id = f"{setting}-s{seed}-l{r:04d}"
    items: list[Item] = []
    step = ps
    for i, context in enumerate(lengths):
        ladder = {"step": i, "lengths": lengths, "anchor": anchor,
                  "position": round(pos, 4)}
        meta = {"design_seed": seed, "critical_position_target": critical_position,
                "ladder": ladder}
        if host is not None:
            meta["critical_position_story"] = ps.critical_position
            told = _woven(ps, host, context,
                          random.Random(derive_seed(tell_seed, "weave", r, context)), tolerance)
        else:
            if i:
                step = grow_story(step, st, chars, context,
                                  rng=random.Random(derive_seed(tell_seed, "ladder", context)),
                                  anchor=anchor, critical_position=pos, tolerance=tolerance,
                                  objects=object_names(st, n_characters) if objects else None)
            ladder["words_after_block"] = words_after_block(step)
            told = step
        items += plot_items(told, st, tom_orders, extra_q,
                            item_prefix=f"{setting}-s{seed}-w{context}-l{r:04d}",
                            characters=chars, seed=tell_seed, target_words=context,
                            metadata=meta, story_id=story_id,
                            pair_prefix=f"{setting}-s{seed}-w{context}-lp{pair:04d}"
                            if paired else "")
    return items


#: Stories of at most this many words are told ``lively`` (as the shortest step of a length
#: ladder): a short story has no room for beats after the belief block, so without the
#: observers' tail moves an observer's last told destination would answer most of its
#: true-belief questions.
LIVELY_WORDS = 300


def _belief_answers(scenario: str, places: Sequence[str]) -> set[str]:
    """The places of the belief answers (S1's and S1's-about-S2's) of a story."""
    sc = SCENARIOS[scenario]
    return {places[sc.answers["S1"]], places[sc.answers["S1S2"]]}


def _join_places(st: NaturalSetting, rng: random.Random, places: Sequence[str],
                 scenario: str, golds_joined: bool) -> list[str]:
    """The join places of a story: every place but the belief answers with probability
    :data:`~tomstats.stories.plot.P_JOIN_PLACE` (drawn once per pair), the belief answers
    (S1's and S1's-about-S2's) exactly when ``golds_joined`` (pairs 0, 3, 6, … of every
    length), so a belief answer is reached only through joins in the same share of the
    stories of every cell and length (a third, from 6 stories a length on), about as often
    as any other place is a join place."""
    golds = _belief_answers(scenario, places)
    drawn = [x for x in st.locations if rng.random() < P_JOIN_PLACE]
    return sorted({*(x for x in drawn if x not in golds), *(golds if golds_joined else ())})


def _answer_roles(scenario: str) -> list[tuple[tuple[str, str], int]]:
    """The questions of a story of ``scenario`` — reality, order 1 and order 2 (with their
    belief status), the world-model question — and the index of each one's answer among
    the scenario's places."""
    sc = SCENARIOS[scenario]
    return [(("reality", "none"), sc.answers["reality"]), (("S1", sc.order1), sc.answers["S1"]),
            (("S1S2", sc.order2), sc.answers["S1S2"]), (("wm", "none"), sc.answers["wm"])]


def _balanced_places(st: NaturalSetting, rng: random.Random,
                     tally: dict[tuple[str, str], dict[str, int]],
                     scenarios: Sequence[str]) -> list[str]:
    """The places of a pair of stories (``scenarios``, which share them): of
    :data:`PLACE_DRAWS` random orders of the locations, the first that makes the pair's
    answers least frequent so far, and ``tally`` updated.

    ``tally[(question, status)][place]`` counts how often ``place`` has been the answer
    to a question (``reality``, ``S1``, ``S1S2``, ``wm``) with that belief status in the
    context length; the cost of an order is the sum of these counts over the pair's
    answers (both versions, every question). The order is drawn (seeded), so the places'
    roles stay random; choosing the least used places keeps every location about equally
    often each question's answer in every cell, whichever scenarios the cell holds.
    """
    locs = list(st.locations)
    roles = [a for sc in scenarios for a in _answer_roles(sc)]

    def cost(order: list[str]) -> int:
        return sum(tally.get(q, {}).get(order[i], 0) for q, i in roles)

    best = min((rng.sample(locs, len(locs)) for _ in range(PLACE_DRAWS)), key=cost)
    for q, i in roles:
        counts = tally.setdefault(q, {})
        counts[best[i]] = counts.get(best[i], 0) + 1
    return best


def _scenario(r: int, true_belief_share: float) -> str:
    if true_belief_share == 1:
        return "tt"
    if true_belief_share == 0:
        return ("ff_none", "ff_s1", "ff_s2")[r % 3]
    return cycle_scenario(r)


def _min_plot_words(st: NaturalSetting, n_characters: int, mislead: int,
                    objects: bool) -> int:
    """Rough shortest story: the opening, the longest scenario's moves and the tail."""
    names = CHARACTERS[:n_characters]
    intro = len(st.intro.format(names=listing(names), hub=st.text(st.hub)).split())
    moves = 3 + max(len(s.steps) + max(0, mislead - (len(s.steps) - s.seen - 2))
                    * (s.order1 == "false") for s in SCENARIOS.values())
    longest = max(len(st.text(x).split()) for x in st.locations)
    words = intro + (longest + 4) * moves + 20
    if objects:
        onames = object_names(st, n_characters)
        intro_o = len(listing(onames).split()) + 4 + len(st.text(st.hub).split())
        # one clause per move ("…, the blue box to the cave"), several to a sentence
        words = max(words, intro_o + (longest + 3) * moves)
    return words


def object_names(st: NaturalSetting, n: int) -> tuple[str, ...]:
    """The names of the ``n`` objects that stand for the characters in the object story."""
    return (st.object_names or OBJECT_NAMES)[:n]


#: Decor densities of the successive attempts at telling a story: the default first, then
#: fewer sentences that move no one (a long block, or its object telling, fits a short
#: length), each with a fresh random stream.
_DENSITIES = (1.0, 1.0, 0.6, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
#: The same for the shortest step of a length ladder (``lively``): sparser from the start,
#: so that the observers' moves after the block fit.
_LIVELY_DENSITIES = (0.6, 0.6, 0.3, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _tell(st: NaturalSetting, characters: Sequence[str], scenario: str, target: int,
          seed: int, *, critical_position: float | None, mislead_distance: int,
          tolerance: float, objects: bool, places: Sequence[str],
          handling: bool = True, extra_unseen: int = 0, cast: Sequence[str] | None = None,
          join_places: Sequence[str] | None = None,
          block_words: float | None = None, lively: bool = False) -> PlotStory:
    """Tell a story, retrying with other decor densities when it does not fit
    (``block_words``: an estimate of the critical block's words, from another telling)."""
    last: ValueError | None = None
    # a short story that cannot hold T's extra unseen moves gets fewer
    tries = [(a, d, extra_unseen, lively) for a, d in enumerate(_LIVELY_DENSITIES if lively
                                                                   else _DENSITIES)]
    tries += [(a, 0.0, e, lively) for e in range(extra_unseen - 1, -1, -1) for a in range(3)]
    if lively:  # a long block at a short length: the moves of a plain story
        tries += [(a, d, extra_unseen, False) for a, d in enumerate(_DENSITIES)]
        tries += [(a, 0.0, e, False) for e in range(extra_unseen - 1, -1, -1) for a in range(3)]
    for attempt, density, extra, live in tries:
        # (the first tries' streams do not depend on the scenario: the two versions of a
        # pair share their beginning)
        key = (attempt,) if extra == extra_unseen else (attempt, extra)
        rng = random.Random(derive_seed(seed, "plot", *key))
        pos = rng.random() if critical_position is None else float(critical_position)
        kw = dict(critical_position=pos, mislead_distance=mislead_distance,
                  tolerance=tolerance, density=density, places=places, handling=handling,
                  objects=object_names(st, len(characters)) if objects else None,
                  extra_unseen=extra, cast=cast, join_places=join_places, lively=live)
        try:
            ps = tell_story(st, characters, scenario, target, rng=rng,
                            block_words=block_words if attempt == 0 else None, **kw)
            if abs(ps.critical_position - pos) > 0.03:  # once more, with the block's size
                rng = random.Random(derive_seed(seed, "plot", *key, "again"))
                try:
                    again = tell_story(st, characters, scenario, target, rng=rng,
                                       block_words=ps.block_words, **kw)
                except ValueError:
                    return ps
                if abs(again.critical_position - pos) < abs(ps.critical_position - pos):
                    ps = again
            return ps
        except ValueError as exc:
            last = exc
    # many join places (each needs a host sent there first) can make even the barest
    # telling too long for a short length: once more, joining only at the belief answers
    # that the plan joins (the share of answers reached through joins stays as planned)
    golds = _belief_answers(scenario, places)
    kept = [x for x in join_places or () if x in golds]
    if join_places is not None and len(kept) < len(join_places):
        return _tell(st, characters, scenario, target, derive_seed(seed, "fewer joins"),
                     critical_position=critical_position, mislead_distance=mislead_distance,
                     tolerance=tolerance, objects=objects, places=places, handling=handling,
                     extra_unseen=extra_unseen, cast=cast, join_places=kept,
                     block_words=None, lively=lively)
    raise ValueError(f"could not tell a story of {target} words: {last}")


def answer_reach(ps: PlotStory, answer: str | None) -> tuple[str, int]:
    """How the reader reaches ``answer``, a place where the story's target ``T`` was.

    Returns ``(reach, hops)``: ``reach`` is ``"named"`` when some told move of ``T``
    names the place, else ``"joins"`` (``T`` only ever "joins" people there);
    ``hops`` is 0 when named, else the fewest characters whose places must be tracked to
    place one of ``T``'s arrivals there: an arrival told as "T joins H" costs
    ``1 + hops(H's latest arrival there)``, a named arrival (or starting there) 0.
    """
    t = ps.roles["T"]
    events, told = ps.events, ps.told

    def hops(e_index: int, depth: int = 0) -> int:
        hosts = told[e_index] if e_index < len(told) else ()
        if not hosts:
            return 0
        if depth > 20:
            return 99
        loc, best = events[e_index].location, 99
        for h in hosts:
            arr = [e.time for e in events[:e_index] if e.actor == h]
            if not arr or events[arr[-1]].location != loc:
                cost = 0  # still where the story starts (named in the opening)
            else:
                cost = hops(arr[-1], depth + 1)
            best = min(best, 1 + cost)
        return best

    arrivals = [e.time for e in events if e.actor == t and e.location == answer]
    if any(not told[i] for i in arrivals) or not arrivals:
        return "named", 0
    return "joins", min(hops(i) for i in arrivals)


def plot_items(ps: PlotStory, st: NaturalSetting, orders: Iterable[int],
               extra: Sequence[str], *, item_prefix: str, characters: Sequence[str],
               seed: int, target_words: int,
               metadata: dict[str, object] | None = None, pair_prefix: str = "",
               story_id: str | None = None) -> list[Item]:
    """The questions about one told story, answers from the tracker (checked against the
    scenario's); ``metadata["story_id"]`` is ``story_id`` (default ``item_prefix``)."""
    roles = ps.roles
    s1, s2, t = roles["S1"], roles["S2"], roles["T"]
    got = tracker_answers(st, characters, ps.events, roles)
    reality, first, s2_first, second, wm = (got[k] for k in ("reality", "S1", "S2", "S1S2",
                                                             "wm"))
    world = World(tuple(characters), st.locations, st.edges,
                  {c: st.hub for c in characters})
    if got != ps.expected:  # the tracker and the scenario must agree
        raise RuntimeError(f"{item_prefix}: tracker answers {got} != scenario {ps.scenario!r} "
                           f"answers {ps.expected}")
    simpler = {"reality": reality, "S1": first, "S2": s2_first}
    same = "+".join(k for k, v in simpler.items() if v == second) or "none"
    sb = Storyboard(tuple(characters), st.locations, st.edges, (), len(ps.events), st.hub,
                    setting=st.name, name=f"plot_{ps.scenario}", roles=dict(roles))
    n_words = word_count(ps.text)
    meta = {**(metadata or {}), "story_id": story_id or item_prefix, "roles": dict(roles),
            "scenario": ps.scenario, "storyboard": sb.to_dict(),
            "events": [[e.time, e.actor, e.location, e.source] for e in ps.events],
            "critical_span": list(ps.critical_span), "instructions": st.instructions,
            "simpler_answers": simpler, "join_places": list(ps.join_places),
            "extra_unseen": ps.extra_unseen}
    common = dict(context_words=target_words, candidates=st.locations, target=t,
                  last_location=reality, mislead_distance=ps.mislead_distance,
                  n_characters=len(characters), setting=st.name, generator="storysim",
                  seed=seed, critical_position=ps.critical_position)
    answers = {0: reality, 1: first, 2: second}
    status = {0: "none", 1: SCENARIOS[ps.scenario].order1, 2: SCENARIOS[ps.scenario].order2}
    chains = {0: (), 1: (s1,), 2: (s1, s2)}
    items = []
    for order in orders:
        chain = chains[order]
        group = chain + (t,) if chain else (s1, s2, t)
        reach, hops = answer_reach(ps, answers[order])
        items.append(Item(
            item_id=f"{item_prefix}-o{order}", story=ps.text, n_words=n_words,
            question=tom_question(chain, t), answer=str(answers[order]),
            question_type="reality" if order == 0 else "tom", tom_order=order, agents=chain,
            first_common_location=first_common_location(world, ps.events, group),
            metadata={**meta, "question_chain": list(chain), "answer_reach": reach,
                      "reference_hops": hops},
            belief_status=status[order], same_as=same if order == 2 else "",
            pair_id=f"{pair_prefix}-o{order}" if pair_prefix and order >= 1 else "",
            **common))
    fcl = first_common_location(world, ps.events, (s1, s2, t))
    reach, hops = answer_reach(ps, wm)
    for qtype in extra:
        instructions = st.instructions
        if qtype == "wm_object":
            names = dict(zip(characters, object_names(st, len(characters)), strict=True))
            q = wm_question(st, names[s1], names[s2], names[t], inanimate=True)
            text, target_text = str(ps.object_text), names[t].removeprefix("the ")
            q = q[:1].upper() + q[1:]
            instructions = st.object_instructions or instructions
            reach, hops = "named", 0  # the object story names every place
            # the object item records the moves it tells: a tight length tells the objects
            # of some fillers not at all, and T's object is carried on after the story
            # (the answer reads only the key characters' moves up to T's next after the
            # meeting: the tracker reads it again off these events)
            cast = ps.object_cast or tuple(characters)
            told = ps.object_events or tuple(e for e in ps.events if e.actor in cast)
            got = tracker_answers(st, characters, told, roles)["wm"]
            if got != wm:
                raise RuntimeError(f"{item_prefix}: the object telling's world-model answer "
                                   f"{got} != {wm}")
            extra_meta = {"object_names": {c: names[c] for c in cast},
                          "events": [[e.time, e.actor, e.location, e.source] for e in told]}
            final = next((e.location for e in reversed(told) if e.actor == t), reality)
        else:
            q, text, target_text = wm_question(st, s1, s2, t), ps.text, t
            extra_meta, final = {}, reality
        items.append(Item(
            item_id=f"{item_prefix}-{qtype}", story=text, n_words=word_count(text),
            question=q, answer=str(wm), question_type=qtype, tom_order=0, agents=(s1, s2),
            first_common_location=fcl,
            metadata={**meta, "question_chain": [], "target_text": target_text,
                      "instructions": instructions, "answer_reach": reach,
                      "reference_hops": hops, **extra_meta},
            **{**common, "last_location": final}))
    return items
