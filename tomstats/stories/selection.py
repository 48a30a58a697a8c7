r"""Adversarial storyboard selection: of several tellings of a story, keep the one whose
false-belief answers the audit's learned adversary finds least.

ExploreToM keeps the stories a model fails on. The design generator does the same with the
item audit's own adversary (:mod:`tomstats.stories.audit_adversary`) and rules
(:mod:`tomstats.stories.audit_rules`): every pair of stories (one true- and one
false-belief version) is told ``k`` times — the same scenario, cast, places and join
status of the belief answers; each later telling with its own random stream (the moves of
the characters before and around the critical block, the filler, the sentences that move
no one), the number of ``T``'s unseen moves shifted and the other join places drawn anew
(:func:`tomstats.stories.items_design.build_design_items`) — and one telling is kept. The
choice is made on text only, by the ranker the audit fits, cross-fitted by pair, and by
the audit's rules:

1. the pairs of a design cell set are dealt into :data:`N_FOLDS` folds at random (seeded);
2. for each question kind :math:`q` that has false-belief items (order 1, order 2) and
   each fold :math:`f`, the *blind* ranker (:func:`~tomstats.stories.audit_adversary.\
fit_ranker`, no belief status, as the audit fits it) is fitted on every telling of
   every pair outside :math:`f`, true- and false-belief items together;
3. each telling :math:`v` of a pair :math:`j` in :math:`f` gets the score

   .. math::

       s_{jv} = a \sum_{q} \sum_{i \in \mathrm{false}(j, v, q)} P_{q,-f}(y_i \mid i),

   the probability the held-out ranker gives the gold answer of each false-belief item
   of the telling, summed, with weight :math:`a` = :data:`ADVERSARY_WEIGHT`;
4. to it is added the rule term (:func:`_rule_scores`): for each item of the telling
   (both versions, every question) and each rule the audit checks on it that the item's
   gold answer, the rule's excess over chance on its pool (question kind, belief status)
   among the first tellings;

and the telling of smallest score is kept (ties: the first). Nothing that the audit
balances by design changes: the scenario (hence the belief statuses and the order-2
answers that equal simpler ones), the places (the gold balance) and which belief answers
are join places (the share of answers reached only through joins) are the same in every
telling. Each item records the selection in ``metadata["selection"]``:
``{"tellings": k, "kept": v, "score": s}``.

The final audit fits its adversary anew on the kept items, so a pattern the selection
leaves behind is still found: the selection lowers what the ranker can read off the
gold answer, the audit measures what is left.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from tomstats.stories.audit_adversary import candidate_features, fit_ranker, pack_features
from tomstats.stories.audit_parse import item_parse
from tomstats.stories.audit_rules import RULES, Rule
from tomstats.stories.items import Item

__all__ = ["ADVERSARY_WEIGHT", "N_FOLDS", "select_tellings"]

#: Folds of the cross-fitting of the selection (by pair).
N_FOLDS = 5
#: Weight of the adversary term beside the rule term.
ADVERSARY_WEIGHT = 2.0


def _kind(it: Item) -> str:
    return f"tom{it.tom_order}" if it.question_type in ("tom", "reality") \
        else it.question_type


def _standardise(x: np.ndarray, mask: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, standard deviations and the kept columns of the real candidate rows."""
    rows = x[mask]
    mu, sd = rows.mean(axis=0), rows.std(axis=0)
    return mu, sd, sd > 1e-9


def select_tellings(tellings: Sequence[Sequence[Sequence[Item]]], seed: int
                    ) -> list[tuple[int, float]]:
    """Pick one telling per pair (see the module docstring).

    Parameters
    ----------
    tellings : sequence over pairs, of sequences over tellings, of item lists
        ``tellings[j][v]``: every item of telling ``v`` of pair ``j`` (both versions).
    seed : int
        Seeds the folds.

    Returns
    -------
    list of (int, float)
        Per pair: the kept telling and its score :math:`s_{jv}`.
    """
    n_pairs = len(tellings)
    k = max((len(t) for t in tellings), default=1)
    if k <= 1 or n_pairs < 2 * N_FOLDS:
        return [(0, 0.0)] * n_pairs
    order = list(range(n_pairs))
    random.Random(seed).shuffle(order)
    fold = np.empty(n_pairs, dtype=int)
    fold[order] = np.arange(n_pairs) % N_FOLDS
    scores = np.zeros((n_pairs, k))
    kinds = {_kind(it) for t in tellings for v in t for it in v if it.belief_status == "false"}
    for q in sorted(kinds):
        train = [(j, it) for j, t in enumerate(tellings) for its in t for it in its
                 if _kind(it) == q and it.answer in it.candidates]
        if len(train) < 20:
            continue
        x, mask = pack_features([candidate_features(item_parse(it)) for _j, it in train])
        y = np.array([list(it.candidates).index(it.answer) for _j, it in train])
        tf = np.array([fold[j] for j, _it in train])
        scored: dict[int, list[tuple[int, int, Item]]] = defaultdict(list)
        for j, t in enumerate(tellings):
            for v, its in enumerate(t):
                for it in its:
                    if _kind(it) == q and it.belief_status == "false" \
                            and it.answer in it.candidates:
                        scored[int(fold[j])].append((j, v, it))
        for f in range(N_FOLDS):
            tr = tf != f
            if tr.sum() < 10 or not scored[f]:
                continue
            mu, sd, keep = _standardise(x[tr], mask[tr])
            z = np.where(mask[..., None], (x[..., keep] - mu[keep]) / sd[keep], 0.0)
            w = fit_ranker(z[tr], mask[tr], y[tr])
            for j, v, it in scored[f]:
                c = (candidate_features(item_parse(it))[:, keep] - mu[keep]) / sd[keep]
                s = c @ w
                p = np.exp(s - s.max())
                scores[j, v] += ADVERSARY_WEIGHT * p[list(it.candidates).index(it.answer)] \
                    / p.sum()
    scores += _rule_scores(tellings)
    return [(int(np.argmin(row[:len(t)])), float(row[:len(t)].min()))
            for row, t in zip(scores, tellings, strict=True)]


def _checked_rules(it: Item) -> list[Rule]:
    """The registered rules the audit checks on ``it`` (as
    :func:`tomstats.stories.audit._checked`: not exempt, the question has the rule's
    character, reality tracking not where the gold answer is reality)."""
    roles = item_parse(it).roles
    reality = it.tom_order == 0 and it.question_type in ("tom", "reality") \
        or it.belief_status == "true"
    return [r for r in RULES.values() if not r.exempt and (not r.role or r.role in roles)
            and not (r.tracks_reality and reality)]


def _rule_scores(tellings: Sequence[Sequence[Sequence[Item]]]) -> np.ndarray:
    r"""The rule term of the selection: per pair and telling,
    :math:`\sum_i \sum_r e_{q(i), r}\,[r(i) = y_i]`, over the telling's items :math:`i`
    and the rules :math:`r` checked on them, where :math:`e_{q, r} = \max(0, h_{q, r} -
    \text{chance}_q)` is how far rule :math:`r` scores above chance on the pool
    :math:`q` (question kind, belief status) of the first tellings."""
    hits: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    chance: dict[tuple[str, str], list[float]] = defaultdict(list)
    answers: list[list[list[tuple[tuple[str, str], dict[str, bool]]]]] = []
    for t in tellings:
        answers.append([])
        for v, its in enumerate(t):
            got = []
            for it in its:
                pool = (_kind(it), it.belief_status)
                p = item_parse(it)
                h = {r.name: r.fn(p) == it.answer for r in _checked_rules(it)}
                got.append((pool, h))
                if v == 0:
                    chance[pool].append(1 / max(len(it.candidates), 1))
                    for name, ok in h.items():
                        hits[pool][name].append(ok)
            answers[-1].append(got)
    excess = {pool: {name: max(0.0, sum(v) / len(v) - sum(chance[pool]) / len(chance[pool]))
                     for name, v in rules.items()} for pool, rules in hits.items()}
    k = max(len(t) for t in tellings)
    out = np.zeros((len(tellings), k))
    for j, t in enumerate(answers):
        for v, got in enumerate(t):
            out[j, v] = sum(excess.get(pool, {}).get(name, 0.0) for pool, h in got
                            for name, ok in h.items() if ok)
    return out
