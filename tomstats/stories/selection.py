r"""Adversarial storyboard selection: of several tellings of a story, keep those that leave
the audit's learned adversary and rules least to find, over the whole item set.

ExploreToM keeps the stories a model fails on. The design generator does the same with the
item audit's own adversary (:mod:`tomstats.stories.audit_adversary`) and rules
(:mod:`tomstats.stories.audit_rules`): every pair of stories (one true- and one
false-belief version) is told ``k`` times — the same scenario, cast, places and join
status of the belief answers; each later telling with its own random stream (the moves of
the characters before and around the critical block, the filler, the sentences that move
no one), the number of ``T``'s unseen moves shifted and the other join places drawn anew
(:func:`tomstats.stories.items_design.build_design_items`) — and one telling is kept. The
choice is made on text only, by the ranker the audit fits, cross-fitted by pair, and by
the audit's rules, on the pools the audit checks (question kind and belief status; the
pairs of one call are one setting's):

1. the pairs are dealt into :data:`N_FOLDS` folds at random (seeded); for each question
   kind :math:`q` that has false-belief items (order 1, order 2) and each fold :math:`f`,
   the *blind* ranker (:func:`~tomstats.stories.audit_adversary.fit_ranker`, no belief
   status, as the audit fits it) is fitted on every telling of every pair outside
   :math:`f`, true- and false-belief items together; telling :math:`v` of pair :math:`j`
   in :math:`f` gets the adversary term

   .. math::

       a_{jv} = a \sum_{q} \sum_{i \in \mathrm{false}(j, v, q)} P_{q,-f}(y_i \mid i),

   the probability the held-out ranker gives the gold answer of each false-belief item
   of the telling, summed, with weight :math:`a` = :data:`ADVERSARY_WEIGHT`;
2. every telling adds to each *check* :math:`k` — a pool :math:`g` (question kind, belief
   status) with a rule :math:`r` the audit checks on it — its hits :math:`h_{jvk}`, the
   items of the telling in :math:`g` whose gold answer :math:`r` gives;
3. the kept tellings :math:`v_j` minimise

   .. math::

       F(v) = \sum_j a_{j v_j} + \frac{b}{2} \sum_k n_k \max\Bigl(0,
       \frac{1}{n_k}\sum_j h_{j v_j k} - c_k\Bigr)^2,

   :math:`n_k` the items of the pool, :math:`c_k` its chance (the mean of
   :math:`1/|\text{candidates}|`), :math:`b` = :data:`RULE_WEIGHT`: a hit of rule
   :math:`r` on pool :math:`g` costs about :math:`b` times the rule's excess over chance
   on the kept items, so only a share above chance costs, and the larger the excess, the
   more (a rule at chance is left alone: no rule is pushed below chance, which would
   point away from the gold answer);
4. for the steps of a length ladder (``metadata["ladder"]``) every pool and ranker is also
   taken per length, as :func:`~tomstats.stories.audit.audit_by_length` audits them: the
   question kind :math:`q` in steps 1–2 is then also (kind, length) — a ranker fitted on
   one length's items gives each of that length's false-belief items a second term of
   :math:`a_{jv}`, and each (kind, belief status, length) with a rule is a check of its
   own beside the pooled one — so a telling whose shortest step gives its answer away
   costs, even when the longer steps hide it;
5. :math:`F` is minimised by coordinate descent: from the first telling of every pair,
   the pairs are visited in a seeded random order, each switched to its telling of least
   :math:`F` given the others (ties keep the current one, then the first), until a sweep
   changes nothing (at most :data:`MAX_SWEEPS` sweeps).

Nothing that the audit balances by design changes: the scenario (hence the belief
statuses and the order-2 answers that equal simpler ones), the places (the gold balance)
and which belief answers are join places (the share of answers reached only through
joins) are the same in every telling. Each item records the selection in
``metadata["selection"]``: ``{"tellings": k, "kept": v, "score": s}``, ``s`` the kept
telling's own cost, :math:`a_{j v_j} + b \sum_k e_k\, h_{j v_j k}` with :math:`e_k` the
check's final excess over chance (0 at or below chance).

The final audit fits its adversary anew on the kept items, so a pattern the selection
leaves behind is still found: the selection lowers what the ranker can read off the
gold answer, the audit measures what is left. The rules are fixed functions, fitted to
nothing: a rule's share on the kept items is what that rule scores on them.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tomstats.stories.audit_adversary import candidate_features, fit_ranker, pack_features
from tomstats.stories.audit_parse import item_parse
from tomstats.stories.audit_rules import RULES, Rule
from tomstats.stories.items import Item

__all__ = ["ADVERSARY_WEIGHT", "MAX_SWEEPS", "N_FOLDS", "RULE_WEIGHT", "Reading", "read_item",
           "select_tellings"]

#: Folds of the cross-fitting of the selection (by pair).
N_FOLDS = 5
#: Weight of the adversary's checks beside the rules'.
ADVERSARY_WEIGHT = 4.0
#: Weight of the rules' checks beside the adversary's.
RULE_WEIGHT = 4.0
#: At most this many sweeps of the coordinate descent.
MAX_SWEEPS = 20


def _kind(it: Item) -> str:
    return f"tom{it.tom_order}" if it.question_type in ("tom", "reality") \
        else it.question_type


def _scopes(it: Item) -> tuple[str, ...]:
    """The scopes of the audit that read ``it``: pooled over lengths, and for a step of a
    length ladder also its own length (:func:`tomstats.stories.audit.audit_by_length`
    audits each length alone)."""
    return ("all", str(it.context_words)) if it.metadata.get("ladder") else ("all",)


@dataclass(frozen=True)
class Reading:
    """What the selection reads of one item's text: the adversary's candidate features
    (``None`` when the gold answer is no candidate) and each checked rule's answer."""

    features: np.ndarray | None
    answers: tuple[tuple[str, str], ...]


def read_item(it: Item) -> Reading:
    """The :class:`Reading` of ``it`` (its story parsed as the audit parses it). A process
    that tells stories can read them too, so that the selection parses no text."""
    p = item_parse(it)
    feats = candidate_features(p) if it.answer in it.candidates else None
    return Reading(feats, tuple((r.name, r.fn(p)) for r in _checked_rules(it)))


Readings = Sequence[Sequence[Sequence[Reading]]]


def read_tellings(tellings: Sequence[Sequence[Sequence[Item]]]) -> list[list[list[Reading]]]:
    """:func:`read_item` of every item of every telling, nested as ``tellings``."""
    return [[[read_item(it) for it in its] for its in t] for t in tellings]


def _standardise(x: np.ndarray, mask: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, standard deviations and the kept columns of the real candidate rows."""
    rows = x[mask]
    mu, sd = rows.mean(axis=0), rows.std(axis=0)
    return mu, sd, sd > 1e-9


def select_tellings(tellings: Sequence[Sequence[Sequence[Item]]], seed: int,
                    readings: Readings | None = None) -> list[tuple[int, float]]:
    """Pick one telling per pair (see the module docstring).

    Parameters
    ----------
    tellings : sequence over pairs, of sequences over tellings, of item lists
        ``tellings[j][v]``: every item of telling ``v`` of pair ``j`` (both versions).
    seed : int
        Seeds the folds and the order of the descent.
    readings : nested like ``tellings``, of :class:`Reading`, optional
        The items' readings, when the processes that told them read them too (default:
        read here, :func:`read_tellings`).

    Returns
    -------
    list of (int, float)
        Per pair: the kept telling and its cost :math:`s_j`.
    """
    n_pairs = len(tellings)
    k = max((len(t) for t in tellings), default=1)
    if k <= 1 or n_pairs < 2 * N_FOLDS:
        return [(0, 0.0)] * n_pairs
    rng = random.Random(seed)
    order = list(range(n_pairs))
    rng.shuffle(order)
    fold = np.empty(n_pairs, dtype=int)
    fold[order] = np.arange(n_pairs) % N_FOLDS
    if readings is None:
        readings = read_tellings(tellings)
    adversary = [[0.0] * len(t) for t in tellings]
    for (j, v, _i), p in _adversary_probs(tellings, readings, fold).items():
        adversary[j][v] += ADVERSARY_WEIGHT * p
    counts, size, chance = _rule_counts(tellings, readings)
    kept = _descend(adversary, counts, size, chance, rng)
    excess = np.maximum(0.0, sum(counts[j][v] for j, v in enumerate(kept)) / size - chance)
    return [(v, adversary[j][v] + RULE_WEIGHT * float(counts[j][v] @ excess))
            for j, v in enumerate(kept)]


def _adversary_probs(tellings: Sequence[Sequence[Sequence[Item]]], readings: Readings,
                     fold: np.ndarray) -> dict[tuple[int, int, int], float]:
    """``(pair, telling, item index) -> P(gold)`` of every false-belief item, from the
    blind ranker fitted on the other folds (step 1 of the module docstring)."""
    out: dict[tuple[int, int, int], float] = defaultdict(float)
    groups = {(_kind(it), sc) for t in tellings for v in t for it in v
              if it.belief_status == "false" for sc in _scopes(it)}
    for q, scope in sorted(groups):
        def member(it: Item, q: str = q, scope: str = scope) -> bool:
            return _kind(it) == q and scope in _scopes(it) and it.answer in it.candidates

        train = [(j, it, readings[j][v][i].features) for j, t in enumerate(tellings)
                 for v, its in enumerate(t) for i, it in enumerate(its) if member(it)]
        if len(train) < 20:
            continue
        x, mask = pack_features([f for _j, _it, f in train])
        y = np.array([list(it.candidates).index(it.answer) for _j, it, _f in train])
        tf = np.array([fold[j] for j, _it, _f in train])
        scored: dict[int, list[tuple[int, int, int, Item]]] = defaultdict(list)
        for j, t in enumerate(tellings):
            for v, its in enumerate(t):
                for i, it in enumerate(its):
                    if member(it) and it.belief_status == "false":
                        scored[int(fold[j])].append((j, v, i, it))
        for f in range(N_FOLDS):
            tr = tf != f
            if tr.sum() < 10 or not scored[f]:
                continue
            mu, sd, keep = _standardise(x[tr], mask[tr])
            z = np.where(mask[..., None], (x[..., keep] - mu[keep]) / sd[keep], 0.0)
            w = fit_ranker(z[tr], mask[tr], y[tr])
            for j, v, i, it in scored[f]:
                c = (readings[j][v][i].features[:, keep] - mu[keep]) / sd[keep]
                s = c @ w
                p = np.exp(s - s.max())
                out[(j, v, i)] += float(p[list(it.candidates).index(it.answer)] / p.sum())
    return dict(out)


def _rule_counts(tellings: Sequence[Sequence[Sequence[Item]]], readings: Readings
                 ) -> tuple[list[list[np.ndarray]], np.ndarray, np.ndarray]:
    """Per pair and telling, the hits :math:`h_{jvk}` of every check :math:`k` (a pool and
    a rule the audit checks on it); per check its items :math:`n_k` (from the first
    tellings) and chance :math:`c_k` (step 2 of the module docstring)."""
    Check = tuple[tuple[str, str, str], str]
    rows: list[list[Counter[Check]]] = []
    size: Counter[Check] = Counter()
    chance: dict[Check, float] = defaultdict(float)
    for t, read_t in zip(tellings, readings, strict=True):
        rows.append([])
        for v, its in enumerate(t):
            h: Counter[Check] = Counter()
            for it, reading in zip(its, read_t[v], strict=True):
                for name, answer in reading.answers:
                    hit = answer == it.answer
                    for scope in _scopes(it):
                        key = ((_kind(it), it.belief_status, scope), name)
                        h[key] += hit
                        if v == 0:
                            size[key] += 1
                            chance[key] += 1 / max(len(it.candidates), 1)
            rows[-1].append(h)
    keys = sorted(size)
    n = np.array([size[key] for key in keys], dtype=float)
    c = np.array([chance[key] for key in keys]) / n
    counts = [[np.array([h.get(key, 0) for key in keys], dtype=float) for h in t]
              for t in rows]
    return counts, n, c


def _descend(adversary: list[list[float]], counts: list[list[np.ndarray]],
             size: np.ndarray, chance: np.ndarray, rng: random.Random) -> list[int]:
    """The tellings that minimise :math:`F` by coordinate descent (steps 3 and 5)."""
    def cost(j: int, v: int, rest: np.ndarray) -> float:
        excess = np.maximum(0.0, (rest + counts[j][v]) / size - chance)
        return adversary[j][v] + 0.5 * RULE_WEIGHT * float(size @ excess ** 2)

    kept = [0] * len(counts)
    total = sum(t[0] for t in counts)
    for _sweep in range(MAX_SWEEPS):
        changed = False
        for j in rng.sample(range(len(counts)), len(counts)):
            rest = total - counts[j][kept[j]]
            costs = [cost(j, v, rest) for v in range(len(counts[j]))]
            best = min(range(len(costs)), key=lambda v: (costs[v], v != kept[j], v))
            if best != kept[j]:
                kept[j], changed = best, True
            total = rest + counts[j][kept[j]]
        if not changed:
            break
    return kept


def _checked_rules(it: Item) -> list[Rule]:
    """The registered rules the audit checks on ``it`` (as
    :func:`tomstats.stories.audit._checked`: not exempt, the question has the rule's
    character, reality tracking not where the gold answer is reality)."""
    roles = item_parse(it).roles
    reality = it.tom_order == 0 and it.question_type in ("tom", "reality") \
        or it.belief_status == "true"
    return [r for r in RULES.values() if not r.exempt and (not r.role or r.role in roles)
            and not (r.tracks_reality and reality)]
