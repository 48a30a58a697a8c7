"""The text-only rules of the item audit, kept in a registry a user can add to.

A rule is a function of an :class:`~tomstats.stories.audit_parse.ItemParse` (the story's
sentences, place mentions and told moves, bound to the question's characters) that returns
a candidate place, or ``""`` for no answer. :data:`RULES` maps each rule's name to a
:class:`Rule`; :func:`rule` registers a new one::

    from collections import Counter
    from tomstats.stories.audit_rules import rule

    @rule("t_dest_second_most")
    def t_dest_second_most(p):
        \"\"\"The place T is told walking into second most often.\"\"\"
        ranked = Counter(p.dests("T")).most_common(2)
        return ranked[1][0] if len(ranked) > 1 else ""

and :func:`tomstats.stories.audit.audit_items` scores it beside the others, on every cell,
with the same thresholds (``tomstats stories audit`` too, once the module that registers it
is imported).

**The told-event family.** For each questioned character ``R`` in ``T``, ``S1``, ``S2``
(prefix ``t_``, ``s1_``, ``s2_``; ``S1``/``S2`` exist only when the question has them — an
order-1 question has ``S1``, an order-2 or world-model question both):

- ``R_dest_last1``, ``R_dest_last2``, ``R_dest_last3``: the ``k``-th last place ``R`` is
  *told* walking into (only move sentences count; joins name no place);
- ``R_dest_first``: the first such place;
- ``R_dest_most``, ``R_dest_least``: the most and least frequent told destination (no
  answer when several places share that count);
- ``R_comention``: the place named most often in the sentences that name ``R`` (ties: the
  one named last).

**Story rules.** ``t_last``, ``t_second_last``, ``t_first`` (the place named last in the
last, second-to-last, first sentence that names ``T`` and a place), ``t_near_frequent``
(the place named most often in the sentences that name ``T`` and their neighbours),
``story_last``, ``story_frequent``, ``story_least`` (the last, most and least often named
place of the story; ties of ``story_least``: the candidate listed first), ``opening`` (the
first place named), and ``reality`` (the target's true final place, read from the item: the
one rule that is not text-only, exempt from the thresholds). ``cell_mode`` (the most common
gold answer of the other items of the cell) needs the cell and is computed by the audit.

``t_dest_last1`` is reality tracking read off the text: where ``T`` was last told going.
It is exempt where the gold answer is reality by definition (reality questions and
true-belief items), and checked everywhere else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tomstats.stories.audit_parse import ItemParse, mode

__all__ = ["FAMILY_STATS", "RULES", "ROLES", "Rule", "rule", "rule_answers_of"]

#: The questioned characters of the told-event family (prefixes ``t_``, ``s1_``, ``s2_``).
ROLES = ("T", "S1", "S2")
#: The statistics of the told-event family, in the order the audit reports them.
FAMILY_STATS = ("dest_last1", "dest_last2", "dest_last3", "dest_first", "dest_most",
                "dest_least", "comention")


@dataclass(frozen=True)
class Rule:
    """A registered rule.

    Attributes
    ----------
    name : str
    fn : callable
        ``ItemParse -> place`` (``""``: no answer).
    exempt : bool
        Never checked against the thresholds (``reality``).
    tracks_reality : bool
        Exempt only where the gold answer is reality by definition (order 0 and
        true-belief items).
    role, stat : str
        For the told-event family: the character (``T``, ``S1``, ``S2``) and the statistic;
        ``""`` for other rules.
    """

    name: str
    fn: Callable[[ItemParse], str]
    exempt: bool = False
    tracks_reality: bool = False
    role: str = ""
    stat: str = ""


#: Every rule the audit runs, by name, in the order it reports them.
RULES: dict[str, Rule] = {}


def rule(name: str, *, exempt: bool = False, tracks_reality: bool = False
         ) -> Callable[[Callable[[ItemParse], str]], Callable[[ItemParse], str]]:
    """Register ``fn(parse) -> place`` as the rule ``name`` (a decorator).

    ``ValueError`` when ``name`` is not a lower-case identifier or is registered already
    (an existing rule is never replaced silently).
    """
    if not name.isidentifier() or name != name.lower():
        raise ValueError(f"rule name must be a lower-case identifier, got {name!r}")

    def register(fn: Callable[[ItemParse], str]) -> Callable[[ItemParse], str]:
        if name in RULES or name == "cell_mode":
            raise ValueError(f"rule {name!r} is registered already")
        RULES[name] = Rule(name, fn, exempt, tracks_reality)
        return fn

    return register


def _nth_last(xs: Sequence[str], k: int) -> str:
    return xs[-k] if len(xs) >= k else ""


def _unique(xs: Sequence[str], most: bool) -> str:
    """The most (``most``) or least frequent name, ``""`` when several share the count.

    No tie-break: with every place told once, any order-based tie-break would make the
    rule a copy of the last or first told destination.
    """
    counts = Counter(xs)
    if not counts:
        return ""
    best = max(counts.values()) if most else min(counts.values())
    tied = [x for x, k in counts.items() if k == best]
    return tied[0] if len(tied) == 1 else ""


def _family_answers(p: ItemParse, role: str) -> dict[str, str]:
    """Every statistic of the family for ``role`` (cached per story and character)."""
    name = p.roles.get(role, "")
    key = ("family", name.lower())
    got = p.story._cache.get(key)
    if got is None:
        d = p.story.dests_of(name) if name else ()
        got = {f"dest_last{k}": _nth_last(d, k) for k in (1, 2, 3)}
        got.update(dest_first=d[0] if d else "", dest_most=_unique(d, most=True),
                   dest_least=_unique(d, most=False),
                   comention=mode(p.story.comentions_of(name)) if name else "")
        p.story._cache[key] = got
    return got  # type: ignore[return-value]


def _family(role: str, stat: str) -> Callable[[ItemParse], str]:
    def fn(p: ItemParse) -> str:
        return _family_answers(p, role)[stat] if role in p.roles else ""

    fn.__name__ = f"{role.lower()}_{stat}"
    fn.__doc__ = f"Told-event rule {stat} of {role}."
    return fn


def _t_loc(p: ItemParse) -> Sequence[str]:
    """The place named last in each sentence that names T and a place."""
    got = p.story._cache.get(("t_loc", p.roles.get("T", "")))
    if got is None:
        rows = p.story.places
        got = p.story._cache[("t_loc", p.roles.get("T", ""))] = tuple(
            rows[i][-1] for i in p.story.named(p.roles.get("T", "")) if rows[i])
    return got  # type: ignore[return-value]


def _t_near(p: ItemParse) -> str:
    n = p.story.n_sentences
    near = sorted({j for i in p.story.named(p.roles.get("T", "")) for j in (i - 1, i, i + 1)
                   if 0 <= j < n})
    return mode(x for j in near for x in p.story.places[j])


def _story_least(p: ItemParse) -> str:
    counts = p.story.mention_counts()
    return min(p.story.candidates, key=lambda x: counts[x]) if counts else ""


_BUILTIN: tuple[tuple[str, Callable[[ItemParse], str], dict[str, bool]], ...] = (
    ("t_last", lambda p: _nth_last(_t_loc(p), 1), {}),
    ("t_second_last", lambda p: _nth_last(_t_loc(p), 2), {}),
    ("t_first", lambda p: (_t_loc(p) or ("",))[0], {}),
    ("t_near_frequent", _t_near, {}),
    ("story_last", lambda p: (p.flat or ("",))[-1], {}),
    ("story_frequent", lambda p: mode(p.flat), {}),
    ("opening", lambda p: (p.flat or ("",))[0], {}),
    ("story_least", _story_least, {}),
)

for _name, _fn, _kw in _BUILTIN:
    rule(_name, **_kw)(_fn)
for _role in ROLES:
    for _stat in FAMILY_STATS:
        _n = f"{_role.lower()}_{_stat}"
        RULES[_n] = Rule(_n, _family(_role, _stat),
                         tracks_reality=(_role, _stat) == ("T", "dest_last1"), role=_role,
                         stat=_stat)
rule("reality", exempt=True)(lambda p: p.item.last_location or "")


def rule_answers_of(p: ItemParse, names: list[str] | None = None) -> dict[str, str]:
    """The answer of every registered rule (or of ``names``) on one parsed item."""
    use = list(RULES) if names is None else names
    return {n: RULES[n].fn(p) for n in use}
