"""Error taxonomy: reading free-text answers as locations, and classifying them."""

from __future__ import annotations

import pytest

from tomstats.stories.items import Item
from tomstats.stories.taxonomy import (
    ERROR_CATEGORIES,
    classify_answer,
    is_refusal,
    normalize_location,
)

ROOMS = ("hallway", "room_1", "room_2", "room_3", "room_10")


@pytest.mark.parametrize(("text", "expected"), [
    ("room_3", "room_3"),
    ("room 3", "room_3"),
    ("Room 3.", "room_3"),
    ("the Room 3", "room_3"),
    ("ROOM_3", "room_3"),
    ("room3", "room_3"),
    ("room-3", "room_3"),
    ("**room_3**", "room_3"),
    ("room 10", "room_10"),  # not room_1
    ("room 30", None),
    ("the_hallway", "hallway"),
    ("The hallway.", "hallway"),
    ("Bob last saw her in room_1, so he thinks she is in room_2.", "room_2"),
    ("She went to room_1 and then to room_2.\nAnswer: room_1", "room_1"),
    ("Let me think: room_2 ...\n\nFinal answer:\n", "room_2"),  # last line names nothing
    ("", None),
    ("   \n ", None),
    ("bathroom", None),
])
def test_normalize_location(text: str, expected: str | None) -> None:
    assert normalize_location(text, ROOMS) == expected


def item(answer: str, fcl: str | None, last: str | None) -> Item:
    return Item(item_id="x", story="s", question="q", answer=answer, question_type="tom",
                tom_order=1, context_words=200, n_words=200, candidates=ROOMS,
                first_common_location=fcl, last_location=last)


@pytest.mark.parametrize(("answer", "expected"), [
    ("room_2", "correct"),
    ("Room 1", "first_common_location"),
    ("room_3", "last_location"),
    ("the hallway", "other_location"),
    ("There is not enough information to answer.", "refusal"),
    ("It cannot be determined from the story.", "refusal"),
    ("Unknown", "refusal"),
    ("I don't know.", "refusal"),
    ("Purple monkey dishwasher", "unparseable"),
    ("", "unparseable"),
    ("Not enough information?\nroom_2", "correct"),  # a location on the last line wins
])
def test_classify_answer(answer: str, expected: str) -> None:
    it = item("room_2", "room_1", "room_3")
    got = classify_answer(it, answer)
    assert got == expected
    assert got in ERROR_CATEGORIES


def test_precedence_correct_beats_heuristics() -> None:
    # reality questions: the gold answer is the last location; correct wins
    assert classify_answer(item("room_3", "room_1", "room_3"), "room_3") == "correct"
    assert classify_answer(item("room_1", "room_1", "room_3"), "room 1") == "correct"
    # first common location wins over last location when both give the same place
    assert classify_answer(item("room_2", "room_3", "room_3"), "room_3") == \
        "first_common_location"


def test_refusal_phrases() -> None:
    assert is_refusal("Insufficient information")
    assert is_refusal("The story does not say")
    assert not is_refusal("room_2")


def test_bad_answer_type() -> None:
    with pytest.raises(ValueError, match="answer must be a string"):
        normalize_location(None, ROOMS)  # type: ignore[arg-type]


def test_reads_every_gold_label_of_storysim(shared_data) -> None:
    """StorySim's own gold labels ('the_hallway', 'room 3', 'hole_2', …) all normalise."""
    import pandas as pd

    labels = pd.read_csv(shared_data / "storysim_items.csv", usecols=["label"])["label"]
    cands = ("hallway", "field", *(f"room_{i}" for i in range(1, 6)),
             *(f"hole_{i}" for i in range(1, 6)))
    for label in labels.unique():
        got = normalize_location(label, cands)
        assert got is not None
        assert got.replace("_", " ") in label.replace("_", " ")
