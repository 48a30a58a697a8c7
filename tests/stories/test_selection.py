"""Adversarial storyboard selection: what it keeps, what it records, what it leaves alone."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

from tomstats.stories import build_design_items
from tomstats.stories.audit_adversary import candidate_features, fit_ranker, pack_features
from tomstats.stories.audit_parse import item_parse
from tomstats.stories.selection import N_FOLDS, select_tellings

KW = dict(contexts=(200, 500), setting="field", question_types=("tom", "wm_human"))


@pytest.fixture(scope="module")
def one_and_three():
    return (build_design_items(12, seed=4, tellings=1, **KW),
            build_design_items(12, seed=4, tellings=3, **KW))


def _by_story(items):
    return {it.metadata["story_id"]: it for it in items if it.question_type == "reality"}


def test_selection_keeps_what_the_design_balances(one_and_three) -> None:
    one, three = one_and_three
    assert all(it.metadata["selection"] == {"tellings": 1, "kept": 0, "score": 0.0}
               for it in one)
    a, b = _by_story(one), _by_story(three)
    assert a.keys() == b.keys()
    for sid, x in a.items():
        y = b[sid]
        for key in ("scenario", "roles"):
            assert x.metadata[key] == y.metadata[key], (sid, key)
    ids = {it.item_id: it for it in one}
    for it in three:  # the same belief answers, reached the same way (named or by joins)
        if it.tom_order >= 1:
            assert it.answer == ids[it.item_id].answer
            assert it.metadata["answer_reach"] == ids[it.item_id].metadata["answer_reach"]
    kept = collections.Counter(it.metadata["selection"]["kept"] for it in three)
    assert set(kept) <= {0, 1, 2} and len(kept) > 1  # some pairs keep another telling
    # the two versions of a pair keep the same telling, and it is the one told
    pairs = collections.defaultdict(set)
    for it in three:
        if it.pair_id:
            pairs[it.pair_id].add((it.metadata["selection"]["kept"], it.seed))
    assert all(len(v) == 1 for v in pairs.values())
    for sid, x in b.items():  # telling 0 is the story of the unselected build
        if x.metadata["selection"]["kept"] == 0:
            assert x.story == a[sid].story
        else:
            assert x.story != a[sid].story


def _lowest(items):
    """Per false-belief item, the candidate a ranker fitted on all items of its order
    rates lowest (not the gold one)."""
    out = {}
    for order in (1, 2):
        its = [it for it in items if it.tom_order == order]
        feats = [candidate_features(item_parse(it)) for it in its]
        x, mask = pack_features(feats)
        rows = x[mask]
        mu, sd = rows.mean(axis=0), rows.std(axis=0)
        keep = sd > 1e-9
        z = np.where(mask[..., None], (x[..., keep] - mu[keep]) / sd[keep], 0.0)
        y = np.array([list(it.candidates).index(it.answer) for it in its])
        w = fit_ranker(z, mask, y)
        for it, zi, mi in zip(its, z, mask, strict=True):
            if it.belief_status == "false":
                s = np.where(mi, zi @ w, np.inf)
                s[list(it.candidates).index(it.answer)] = np.inf
                out[it.item_id] = it.candidates[int(np.argmin(s))]
    return out


def test_select_tellings_keeps_the_telling_the_ranker_finds_least(one_and_three) -> None:
    """Telling 1 of every pair is telling 0 with its false-belief answers moved to the
    place a ranker rates lowest: the held-out ranker of the selection must prefer it."""
    one, _three = one_and_three
    pairs = collections.defaultdict(list)
    for it in one:
        head, r = it.metadata["story_id"].rsplit("-r", 1)
        pairs[(head, int(r) // 2)].append(it)
    groups = [its for its in pairs.values() if any(it.belief_status == "false" for it in its)]
    assert len(groups) >= 2 * N_FOLDS
    same = select_tellings([[its, its] for its in groups], seed=0)
    assert all(v == 0 for v, _s in same)  # a tie keeps the first telling
    low = _lowest(one)
    moved = [[dataclasses.replace(it, answer=low[it.item_id]) if it.item_id in low else it
              for it in its] for its in groups]
    got = select_tellings([[its, alt] for its, alt in zip(groups, moved, strict=True)],
                          seed=0)
    assert sum(v == 1 for v, _s in got) >= 0.8 * len(groups)


def test_tellings_must_be_a_positive_integer() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="tellings"):
            build_design_items(2, seed=0, contexts=(200,), tellings=bad)
