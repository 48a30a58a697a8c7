"""Items as a pandas DataFrame: one row per question (long format)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tomstats.stories.items import Item

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["items_frame"]


def items_frame(items: Iterable[Item], *, metadata: bool = False) -> pd.DataFrame:
    """One row per item with every :class:`Item` field as a column.

    Parameters
    ----------
    items : iterable of Item
    metadata : bool
        Keep the ``metadata`` column (event logs, storyboards: large); by default only
        ``story_id`` is lifted out of it.

    Returns
    -------
    pandas.DataFrame
        ``candidates`` and ``agents`` as tuples; ``story_id`` groups the questions asked
        about one story.
    """
    import pandas as pd

    rows = []
    for it in items:
        d = it.to_dict()
        d.pop("format")
        d["candidates"], d["agents"] = it.candidates, it.agents
        meta = d.pop("metadata")
        d["story_id"] = meta.get("story_id", it.item_id)
        if metadata:
            d["metadata"] = meta
        rows.append(d)
    return pd.DataFrame(rows)
