"""The learned adversary: the fit against an independent minimiser, cross-fitting that
never scores an item with a model that saw its story, determinism, and verdicts on item
sets whose answer is (or is not) written in the text."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.optimize import minimize

from tomstats.stories import Item
from tomstats.stories import audit_adversary as adv
from tomstats.stories.audit import audit_items
from tomstats.stories.audit_parse import item_parse

PLACES = ("hall", "den", "attic", "porch", "yard", "shed")
NAMES = ("Ann", "Bob", "Cat", "Dan", "Eve")
VERBS = ("walks into", "goes into", "heads to", "steps into")


def reference_nll(w: np.ndarray, x: np.ndarray, y: np.ndarray, lam: float) -> float:
    """Penalised conditional-logit loss, item by item (an independent implementation)."""
    total = 0.0
    for xi, yi in zip(x, y, strict=True):
        s = xi @ w
        total += np.logaddexp.reduce(s) - s[yi]
    return total + 0.5 * lam * float(w @ w)


def test_fit_matches_an_independent_minimiser() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5, 4))
    true = np.array([1.5, -1.0, 0.5, 0.0])
    p = np.exp(x @ true)
    y = np.array([rng.choice(5, p=pi / pi.sum()) for pi in p])
    mask = np.ones((200, 5), dtype=bool)
    w = adv.fit_ranker(x, mask, y, lam=2.0, tol=1e-14)
    ref = minimize(reference_nll, np.zeros(4), args=(x, y, 2.0), method="BFGS",
                   options={"gtol": 1e-9}).x
    np.testing.assert_allclose(w, ref, atol=1e-5)
    # padding candidates are ignored: add a sixth, masked-out candidate with huge features
    xp = np.concatenate([x, np.full((200, 1, 4), 50.0)], axis=1)
    mp = np.concatenate([mask, np.zeros((200, 1), dtype=bool)], axis=1)
    np.testing.assert_allclose(adv.fit_ranker(xp, mp, y, lam=2.0, tol=1e-14), w, atol=1e-8)


def test_held_out_folds_are_never_fitted_on() -> None:
    """Every model is fitted without the fold it scores (item ``i``'s gold candidate is
    ``i``, so the fitted rows can be told)."""
    n = 60
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, n, 2))
    fold = np.arange(n) % 4
    seen: list[set[int]] = []

    def spy(xt, mt, yt, *, lam):
        seen.append({int(v) for v in yt})
        return np.zeros(xt.shape[2])

    guess = adv._cross_fit_group(x, np.ones((n, n), dtype=bool), np.arange(n), fold, 1.0,
                                 fit=spy)
    assert len(seen) == 4 and (guess >= 0).all()
    for k, rows in enumerate(seen):
        assert rows == {i for i in range(n) if i % 4 != k}


def _story(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    """A random story of told moves and remarks; returns its text and the moves."""
    sents = [f"{', '.join(NAMES[:-1])} and {NAMES[-1]} are in the hall."]
    moves = []
    for _ in range(rng.randint(10, 16)):
        who, where = rng.choice(NAMES), rng.choice(PLACES)
        if rng.random() < 0.3:
            sents.append(f"{who} says that the {where} is cold.")
        else:
            sents.append(f"{who} {rng.choice(VERBS)} the {where}.")
            moves.append((who, where))
    return " ".join(sents), moves


def _items(answer_rule: str, n: int = 240, seed: int = 0) -> list[Item]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        text, moves = _story(rng)
        t = rng.choice(NAMES)
        dests = [w for who, w in moves if who == t]
        if len(dests) < 2:
            continue
        gold = dests[-2] if answer_rule == "second_last" else rng.choice(PLACES)
        out.append(Item(item_id=f"s{len(out)}", story=text, question="?", answer=gold,
                        question_type="tom", tom_order=1, context_words=200,
                        n_words=len(text.split()), candidates=PLACES,
                        agents=(rng.choice([x for x in NAMES if x != t]),), target=t,
                        last_location=dests[-1] if gold != dests[-1] else "elsewhere",
                        setting="rooms", belief_status="false",
                        metadata={"story_id": f"story{len(out)}"}))
    return out


def test_a_written_answer_fails_and_a_random_one_does_not() -> None:
    shortcut = audit_items(_items("second_last"), lint=False)
    row = shortcut.pooled[0]
    assert row["adversary_blind"] > 0.9
    assert ("adversary (blind to the belief status)", "rooms order 1 belief false") in {
        (c.name, c.scope) for c in shortcut.failed}
    fair = audit_items(_items("random", seed=1), lint=False)
    assert fair.pooled[0]["adversary_blind"] < fair.pooled[0]["chance"] + 0.10
    assert not [c for c in fair.failed if c.name.startswith("adversary")]


def test_cross_fit_is_deterministic_and_seeded() -> None:
    items = _items("second_last", n=80)
    parses = [item_parse(it) for it in items]
    kinds, statuses = ["1"] * len(items), ["false"] * len(items)
    a = adv.cross_fit(parses, kinds, statuses, seed=3)
    assert a == adv.cross_fit(parses, kinds, statuses, seed=3)
    assert adv.story_key(parses[0]) == "story0"
    with pytest.raises(ValueError, match="folds"):
        adv.cross_fit(parses, kinds, statuses, folds=1)


def test_features_read_the_text() -> None:
    it = Item(item_id="x", story="Ann walks into the den. Ann says that the yard is cold. "
              "Ann heads to the attic.", question="?", answer="den", question_type="tom",
              tom_order=0, context_words=10, n_words=14, candidates=PLACES, target="Ann")
    x = adv.candidate_features(item_parse(it))
    col = {f: k for k, f in enumerate(adv.FEATURES)}
    assert x.shape == (len(PLACES), len(adv.FEATURES))
    assert x[PLACES.index("attic"), col["T_dest_last1"]] == 1.0
    assert x[PLACES.index("den"), col["T_dest_last2"]] == 1.0
    assert x[PLACES.index("yard"), col["T_dest_count"]] == 0.0  # a remark, not a move
    assert x[PLACES.index("yard"), col["remark_mentions"]] > 0
    assert x[PLACES.index("hall"), col["never_named"]] == 1.0
    assert (x[:, col["S1_dest_count"]] == 0).all()  # no S1 in a reality question
