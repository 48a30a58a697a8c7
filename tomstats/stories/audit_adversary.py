r"""The learned adversary of the item audit: a ranker of candidate places on text features.

A fixed list of rules certifies only what its authors thought of. The adversary learns
which text features point at the gold answer: for every item :math:`i` and candidate place
:math:`c` it computes a feature vector :math:`x_{ic}` (:data:`FEATURES`, read from the
parsed story only: mentions of ``c``, told moves of each questioned character into ``c``,
co-mentions; never the item's metadata), and fits a **conditional logit** (a multinomial
logistic ranker over the candidates of each item)

.. math::

    P(c \mid i) = \frac{\exp(w^\top x_{ic})}{\sum_{c'} \exp(w^\top x_{ic'})}, \qquad
    \hat w = \arg\min_w \; -\sum_i \log P(y_i \mid i) + \frac{\lambda}{2} \lVert w \rVert^2

on standardised features by Newton's method (gradient
:math:`\sum_i \sum_c x_{ic} (P(c \mid i) - [c = y_i]) + \lambda w`, Hessian
:math:`\sum_i X_i^\top (\mathrm{diag}\,p_i - p_i p_i^\top) X_i + \lambda I`, step halving
until the objective falls); the objective is strictly convex, so the fit is unique and
deterministic. It guesses the candidate of highest score.

**Cross-fitted by story.** Stories (``metadata["story_id"]``, else the story text; the two
versions of a story that share a ``pair_id`` count as one story, :func:`fold_units`) are
dealt into :data:`N_FOLDS` folds at random (seeded); an item is scored only by the model
fitted on the other folds, so by a model that never saw its story. Models are fitted per
question kind (order 0, 1, 2, each world-model question type), pooling settings and
lengths, in two variants:

- **blind**: one model per question kind, without the belief status — the shortcut a
  model could take, since a model sees the question (hence its kind) but must infer the
  status;
- **given status**: one model per (question kind, belief status). Reported only: the
  belief status is exactly what a model has to infer from the story, so a guess that
  knows it is not a shortcut available to the model; it shows how much the text says
  *once the hard part is done*.

Accuracies are reported per (setting, order, belief status); the audit checks the blind
variant on every false-belief pool (see :mod:`tomstats.stories.audit`).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tomstats.stories.audit_parse import ItemParse, StoryParse

__all__ = ["FEATURES", "LAMBDA", "N_FOLDS", "AdversaryResult", "candidate_features",
           "cross_fit", "fit_ranker", "fold_units", "pack_features", "story_key"]

#: Folds of the cross-fitting (by story).
N_FOLDS = 5
#: L2 penalty of the ranker (on standardised features).
LAMBDA = 1.0

_ROLE_FEATURES = ("dest_count", "dest_last1", "dest_last2", "dest_last3", "dest_first",
                  "dest_most", "dest_least", "dest_pos_last", "comention_count",
                  "comention_most", "join_mention", "last1_x_moves", "last2_x_moves",
                  "last3_x_moves", "last1_x_tail", "last2_x_tail", "last1_x_joined",
                  "last2_x_joined")
_STORY_FEATURES = ("mentions", "mention_share", "first_pos", "last_pos", "story_last",
                   "opening", "most_mentioned", "least_mentioned", "move_mentions",
                   "remark_mentions", "late_mentions", "early_mentions", "never_named")
#: The features of a candidate: per questioned character (``T_…``, ``S1_…``, ``S2_…``;
#: zero when the question lacks the character) and of the story.
FEATURES = tuple(f"{r}_{f}" for r in ("T", "S1", "S2") for f in _ROLE_FEATURES) \
    + _STORY_FEATURES


def story_key(p: ItemParse) -> str:
    """The story an item belongs to: ``metadata["story_id"]``, else its text."""
    sid = p.item.metadata.get("story_id")
    return str(sid) if sid else p.item.story


def fold_units(parses: Sequence[ItemParse]) -> list[str]:
    """The unit of cross-fitting of each item: its story, joined with every story that
    shares a ``pair_id`` with it (the true- and false-belief versions of one story tell the
    same cast, places and events, so a model trained on one version has seen the other).

    The unit is the smallest :func:`story_key` of the connected component of stories linked
    by shared pair ids (union-find).
    """
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    keys = [story_key(p) for p in parses]
    first_of_pair: dict[str, str] = {}
    for p, k in zip(parses, keys, strict=True):
        find(k)
        pid = getattr(p.item, "pair_id", "")
        if pid:
            other = first_of_pair.setdefault(pid, k)
            a, b = find(k), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [find(k) for k in keys]


def candidate_features(p: ItemParse) -> np.ndarray:
    """The ``(candidates, features)`` matrix of one item (columns: :data:`FEATURES`).

    Blocks are cached on the parsed story (per character name, and per story).
    """
    blocks = [_role_block(p.story, p.roles[r]) if r in p.roles
              else np.zeros((len(p.story.candidates), len(_ROLE_FEATURES)))
              for r in ("T", "S1", "S2")]
    return np.concatenate([*blocks, _story_block(p.story)], axis=1)


def _block_frame(story: StoryParse, names: Sequence[str]
                 ) -> tuple[dict[str, int], int, dict[str, int], np.ndarray]:
    """What a feature block is built on: the candidates' row index, the number of
    sentences (at least 1), the features' column index and a zero matrix."""
    cands = story.candidates
    return ({c: j for j, c in enumerate(cands)}, max(story.n_sentences, 1),
            {f: k for k, f in enumerate(names)}, np.zeros((len(cands), len(names))))


def _role_block(story: StoryParse, name: str) -> np.ndarray:
    key = ("adv_role", name.lower())
    got = story._cache.get(key)
    if got is not None:
        return got  # type: ignore[return-value]
    idx, n_s, col, x = _block_frame(story, _ROLE_FEATURES)
    moves = story.moves_of(name)
    dests = story.dests_of(name)
    counts = Counter(dests)
    for c, k in counts.items():
        x[idx[c], col["dest_count"]] = np.log1p(k)
    n_moves = np.log1p(len(moves))
    tail = 1 - (moves[-1].sentence + 1) / n_s if moves else 0.0
    joined = float(bool(moves) and moves[-1].place is None)
    for k in (1, 2, 3):
        if len(dests) >= k:
            j = idx[dests[-k]]
            x[j, col[f"dest_last{k}"]] = 1.0
            x[j, col[f"last{k}_x_moves"]] = n_moves
            if k < 3:
                x[j, col[f"last{k}_x_tail"]] = tail
                x[j, col[f"last{k}_x_joined"]] = joined
    if dests:
        x[idx[dests[0]], col["dest_first"]] = 1.0
        top, low = max(counts.values()), min(counts.values())
        for c, k in counts.items():
            x[idx[c], col["dest_most"]] = float(k == top)
            x[idx[c], col["dest_least"]] = float(k == low)
    for m in moves:
        if m.place is not None:
            x[idx[m.place], col["dest_pos_last"]] = (m.sentence + 1) / n_s
    co = Counter(story.comentions_of(name))
    if co:
        top = max(co.values())
        for c, k in co.items():
            x[idx[c], col["comention_count"]] = np.log1p(k)
            x[idx[c], col["comention_most"]] = float(k == top)
    key_name = name.lower().removeprefix("the ")
    for m in story.moves:  # places named where others join this character's group
        if m.place is None and key_name in m.hosts:
            for c in story.places[m.sentence]:
                x[idx[c], col["join_mention"]] += 1.0
    story._cache[key] = x
    return x


def _story_block(story: StoryParse) -> np.ndarray:
    got = story._cache.get("adv_story")
    if got is not None:
        return got  # type: ignore[return-value]
    cands = story.candidates
    idx, n_s, col, x = _block_frame(story, _STORY_FEATURES)
    flat_pos = [(i, c) for i, row in enumerate(story.places) for c in row]
    total = Counter(c for _i, c in flat_pos)
    move_s = {m.sentence for m in story.moves}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, c in flat_pos:
        first.setdefault(c, i)
        last[c] = i
        j = idx[c]
        x[j, col["move_mentions" if i in move_s else "remark_mentions"]] += 1.0
        if i >= 0.8 * n_s:
            x[j, col["late_mentions"]] += 1.0
        if i < 0.2 * n_s:
            x[j, col["early_mentions"]] += 1.0
    n_total = max(sum(total.values()), 1)
    top = max(total.values()) if total else 0
    low = min(total.get(c, 0) for c in cands)
    for c in cands:
        j = idx[c]
        k = total.get(c, 0)
        x[j, col["mentions"]] = np.log1p(k)
        x[j, col["mention_share"]] = k / n_total
        x[j, col["first_pos"]] = (first[c] + 1) / n_s if c in first else 0.0
        x[j, col["last_pos"]] = (last[c] + 1) / n_s if c in last else 0.0
        x[j, col["most_mentioned"]] = float(k == top and k > 0)
        x[j, col["least_mentioned"]] = float(k == low)
        x[j, col["never_named"]] = float(k == 0)
    if flat_pos:
        x[idx[flat_pos[-1][1]], col["story_last"]] = 1.0
        x[idx[flat_pos[0][1]], col["opening"]] = 1.0
    for name in ("move_mentions", "remark_mentions", "late_mentions", "early_mentions"):
        x[:, col[name]] = np.log1p(x[:, col[name]])
    story._cache["adv_story"] = x
    return x


def _objective(w: np.ndarray, x: np.ndarray, mask: np.ndarray, y: np.ndarray,
               lam: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Penalised negative log-likelihood, its gradient and the probabilities."""
    s = np.where(mask, np.einsum("icd,d->ic", x, w), -np.inf)
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    nll = -float(np.log(np.maximum(p[rows, y], 1e-300)).sum()) + 0.5 * lam * float(w @ w)
    r = p.copy()
    r[rows, y] -= 1.0
    grad = np.einsum("icd,ic->d", x, r) + lam * w
    return nll, grad, p


def fit_ranker(x: np.ndarray, mask: np.ndarray, y: np.ndarray, *, lam: float = LAMBDA,
               max_iter: int = 50, tol: float = 1e-8) -> np.ndarray:
    r"""Fit the penalised conditional logit by Newton's method (see the module docstring).

    Parameters
    ----------
    x : array (items, candidates, features)
        Features (padding rows ignored through ``mask``).
    mask : bool array (items, candidates)
        Which candidates exist.
    y : int array (items,)
        Index of the gold candidate.
    lam : float
        L2 penalty :math:`\lambda` (> 0 makes the objective strictly convex: the minimum
        is unique, whatever the start).
    max_iter, tol : int, float
        Stop after ``max_iter`` steps, or when a step lowers the objective by less than
        ``tol`` times its value.

    Returns
    -------
    array (features,)
        The weights :math:`\hat w`.
    """
    d = x.shape[2]
    w = np.zeros(d)
    f, g, p = _objective(w, x, mask, y, lam)
    eye = lam * np.eye(d)
    for _ in range(max_iter):
        xp = np.einsum("icd,ic->id", x, p)
        xs = (x * np.sqrt(p)[..., None]).reshape(-1, d)
        # einsum, not BLAS: products this small lose to thread start-up on a busy machine
        h = np.einsum("nd,ne->de", xs, xs) - np.einsum("id,ie->de", xp, xp) + eye
        step = np.linalg.solve(h, g)
        t = 1.0
        while True:  # step halving until the objective does not rise
            w_new = w - t * step
            f_new, g_new, p_new = _objective(w_new, x, mask, y, lam)
            if f_new <= f or t < 1e-6:
                break
            t /= 2
        done = f - f_new <= tol * (1 + abs(f))
        w, f, g, p = w_new, f_new, g_new, p_new
        if done:
            break
    return w


@dataclass(frozen=True)
class AdversaryResult:
    """Cross-fitted guesses of the adversary.

    Attributes
    ----------
    blind, given : list of bool
        Per item (in the order given): whether the guess of the blind / status-given model
        equals the gold answer (``False`` where a group is too small to fit).
    folds : int
    """

    blind: list[bool]
    given: list[bool]
    folds: int


def pack_features(feats: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack per-item ``(candidates, features)`` matrices into ``(items, candidates,
    features)``, padding with zero rows, and the mask of real candidates."""
    c = max(f.shape[0] for f in feats)
    x = np.zeros((len(feats), c, feats[0].shape[1]))
    mask = np.zeros((len(feats), c), dtype=bool)
    for i, f in enumerate(feats):
        x[i, :f.shape[0]] = f
        mask[i, :f.shape[0]] = True
    return x, mask


def _cross_fit_group(x: np.ndarray, mask: np.ndarray, y: np.ndarray, fold: np.ndarray,
                     lam: float, fit: Callable[..., np.ndarray] | None = None) -> np.ndarray:
    """Held-out guesses (candidate index; -1 when no model could be fitted).

    Each fold is scored by ``fit`` (default :func:`fit_ranker`) on the other folds, with
    features standardised by the other folds' means and standard deviations.
    """
    fit = fit_ranker if fit is None else fit
    guess = np.full(len(y), -1)
    for k in np.unique(fold):
        train, test = fold != k, fold == k
        if train.sum() < 10:
            continue
        xt = x[train][mask[train]]
        mu, sd = xt.mean(axis=0), xt.std(axis=0)
        keep = sd > 1e-9  # a constant feature ranks nothing (e.g. S2's for order 1)
        z = np.where(mask[..., None], (x[..., keep] - mu[keep]) / sd[keep], 0.0)
        w = fit(z[train], mask[train], y[train], lam=lam)
        s = np.where(mask[test], np.einsum("icd,d->ic", z[test], w), -np.inf)
        guess[test] = s.argmax(axis=1)
    return guess


def cross_fit(parses: Sequence[ItemParse], kinds: Sequence[str], statuses: Sequence[str],
              *, seed: int = 0, folds: int = N_FOLDS, lam: float = LAMBDA) -> AdversaryResult:
    """Cross-fit the blind and the status-given ranker (see the module docstring).

    Items whose gold answer is not a candidate are scored as misses and not fitted on.
    Deterministic for a ``seed``.
    """
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    units = fold_units(parses)
    keys = sorted(set(units))
    rng = random.Random(seed)
    rng.shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    feats = [candidate_features(p) for p in parses]
    gold = [list(p.story.candidates).index(p.item.answer)
            if p.item.answer in p.story.candidates else -1 for p in parses]
    out: dict[str, list[bool]] = {}
    blind_groups: list[set[int]] = []
    for variant in ("blind", "given"):
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, (k, s) in enumerate(zip(kinds, statuses, strict=True)):
            if gold[i] >= 0:
                groups[(k,) if variant == "blind" else (k, s)].append(i)
        hit = [False] * len(parses)
        for members in groups.values():
            if variant == "given" and set(members) in blind_groups:
                for i in members:  # one status in the kind: the blind model is this one
                    hit[i] = out["blind"][i]
                continue
            x, mask = pack_features([feats[i] for i in members])
            y = np.array([gold[i] for i in members])
            fold = np.array([fold_of[units[i]] for i in members])
            guess = _cross_fit_group(x, mask, y, fold, lam)
            for i, gi in zip(members, guess, strict=True):
                hit[i] = bool(gi == gold[i])
        out[variant] = hit
        if variant == "blind":
            blind_groups += [set(m) for m in groups.values()]
    return AdversaryResult(out["blind"], out["given"], folds)
