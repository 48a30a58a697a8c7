"""The item format: version 3 carries ``pair_id``; versions 1 and 2 still read, unpaired."""

from __future__ import annotations

import json

import pytest

from tomstats.stories.items import ITEM_FORMAT, READABLE_FORMATS, Item, read_items, write_items


def _item(**kw) -> Item:
    base = {"item_id": "s1-q1", "story": "Anne is in the kitchen.", "question": "Where is Anne?",
            "answer": "kitchen", "question_type": "tom", "tom_order": 1, "context_words": 200,
            "n_words": 5, "candidates": ("kitchen", "hall"), "agents": ("Sally",),
            "target": "Anne", "last_location": "kitchen", "belief_status": "true"}
    return Item(**{**base, **kw})


def test_format_3_writes_and_reads_pair_id(tmp_path) -> None:
    assert ITEM_FORMAT == "tomstats.items/3"
    assert READABLE_FORMATS == ("tomstats.items/1", "tomstats.items/2", "tomstats.items/3")
    items = [_item(pair_id="story-7/q1"),
             _item(item_id="s1-q2", answer="hall", belief_status="false", pair_id="story-7/q1"),
             _item(item_id="s1-q3")]
    path = write_items(tmp_path / "items.jsonl", items)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["format"] for r in recs] == [ITEM_FORMAT] * 3
    assert [r["pair_id"] for r in recs] == ["story-7/q1", "story-7/q1", ""]
    assert read_items(path) == items


@pytest.mark.parametrize("old", ["tomstats.items/1", "tomstats.items/2"])
def test_older_formats_read_as_unpaired(tmp_path, old) -> None:
    rec = _item(answer="hall").to_dict()
    rec.pop("pair_id")
    rec["format"] = old
    if old == "tomstats.items/1":
        rec.pop("belief_status")
        rec.pop("same_as")
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    (item,) = read_items(path)
    assert item.pair_id == ""
    # version 1 derives the status (answer != reality: false); version 2 keeps the stored one
    assert item.belief_status == ("false" if old.endswith("/1") else "true")


def test_pair_id_must_be_a_string(tmp_path) -> None:
    rec = _item().to_dict()
    rec["pair_id"] = 7
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: item 's1-q1': field 'pair_id' must be "
                                         r"a string, got 7"):
        read_items(path)


def test_pair_id_is_refused_in_an_older_format(tmp_path) -> None:
    rec = {**_item(pair_id="p").to_dict(), "format": "tomstats.items/2"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="field 'pair_id' exists from format "
                                         "'tomstats.items/3' on"):
        read_items(path)
