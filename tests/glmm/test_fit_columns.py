"""``fit`` reads only the columns its model uses (:func:`tomstats.glmm.data.fit_columns`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tomstats._expr import parse_query
from tomstats.glmm.data import _read_table, prepare_data

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "smollm2_storysim_log.jsonl"


@pytest.mark.parametrize("model,uses", [
    ("structural", ["correct", "model", "item", "tom_order", "context_words"]),
    ("correct ~ tom_order * log_context + (1 | model) + (1 | item)",
     ["correct", "model", "item", "tom_order", "log_context"]),
    ("correct ~ n_words + (1 | story_id)", ["correct", "n_words", "story_id"]),
    ("correct ~ tom_order + (1 | story)", ["correct", "tom_order", "story"]),  # from story_id
])
@pytest.mark.parametrize("errors", ["drop", "keep"])
def test_fit_reads_the_columns_it_uses(model: str, uses: list[str], errors: str) -> None:
    whole = prepare_data(_read_table(SHIPPED, errors))
    part = prepare_data(_read_table(SHIPPED, errors, model=model))
    assert {"response", "prompt_hash", "timestamp"}.isdisjoint(part.columns)
    assert len(part.attrs["source_columns"]) < len(whole.attrs["source_columns"])
    pd.testing.assert_frame_equal(part[uses], whole[uses])
    assert part.attrs["errored_questions"] == whole.attrs["errored_questions"]


def test_mapped_and_queried_columns_are_read(tmp_path: Path) -> None:
    df = _read_table(SHIPPED, "keep", model="structural", columns={"item": "story_id"},
                     query=parse_query("n_characters > 0"))
    assert {"story_id", "n_characters", "tom_order", "context_words"} <= set(df.columns)
    assert "item_id" not in df.columns  # the map names the items
