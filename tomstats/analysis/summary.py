r"""Accuracy by cell of a real evaluation log, with Wilson intervals and StorySim's error taxonomy.

:func:`summarize` turns an evaluation log — the JSON Lines written by ``tomstats evaluate``
(read with :func:`tomstats.analysis.table.read_evaluation`, errors kept), or any
CSV/parquet/DataFrame with one row per question — into one tidy row per group (by default the
LLM, column ``model``) × context length × ToM order:

==========================  =================================================================
``n``                       questions asked in the cell (answered + errors)
``n_answered``              questions with an answer (``correct`` is 0 or 1)
``n_correct``               answered correctly
``accuracy``                :math:`\hat\pi = k/n_\text{answered}`
``ci_low``, ``ci_high``     Wilson score interval of :math:`\hat\pi` at ``level``
                            (:func:`tomstats.analysis.intervals.wilson_interval`)
``n_errors``                questions without an answer: runner error records (``status =
                            "error"``: context overflow, failed request) or a missing
                            ``correct`` in a table
``first_common_location``   wrong answers naming the first location the agents shared
``recency``                 wrong answers naming the target's last location (StorySim's
                            recency error; category ``last_location`` in the log)
``refusal_unparseable``     answers that name no location: refusals and unparseable text
``other``                   wrong answers naming another location (or with no category)
==========================  =================================================================

The four taxonomy columns count wrong answers, so
``n_correct + first_common_location + recency + refusal_unparseable + other = n_answered``.
They come from the log's ``error_category`` column (:mod:`tomstats.stories.taxonomy`); a table
without that column gets missing values (``<NA>``) there.

Column names follow ``tomstats fit``: ``correct``, ``model``, ``tom_order``,
``context_words`` (and ``error_category``); rename other names with ``columns={"correct":
"is_correct", ...}`` (``--map correct=is_correct`` on the command line).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from tomstats.analysis.intervals import wilson_interval
from tomstats.analysis.table import (
    apply_mapping,
    by_columns,
    outcome,
    read_evaluation,
    require_column,
)

__all__ = ["ERROR_COLUMNS", "SUMMARY_COLUMNS", "TAXONOMY", "format_summary", "outcome",
           "summarize"]

#: Log ``error_category`` of a wrong answer → taxonomy column of :func:`summarize`
#: (StorySim's first-common-location, recency, refusal/unparseable and other errors).
TAXONOMY: dict[str, str] = {
    "first_common_location": "first_common_location",
    "last_location": "recency",
    "refusal": "refusal_unparseable",
    "unparseable": "refusal_unparseable",
    "other_location": "other",
}
#: The taxonomy columns, in order.
ERROR_COLUMNS: tuple[str, ...] = ("first_common_location", "recency", "refusal_unparseable",
                                  "other")
#: Count and interval columns of :func:`summarize` (after the grouping columns).
SUMMARY_COLUMNS: tuple[str, ...] = ("n", "n_answered", "n_correct", "accuracy", "ci_low",
                                    "ci_high", "n_errors", *ERROR_COLUMNS)

_CELL = ("context_words", "tom_order")


def _answered(df: pd.DataFrame, y: pd.Series) -> pd.Series:
    """Rows with an answer: ``correct`` present and, in a runner log, ``status == "ok"``."""
    ok = y.notna()
    if "status" in df.columns:
        ok &= df["status"].astype("string").fillna("ok").ne("error").to_numpy()
    return ok


# --------------------------------------------------------------------------- summary


def summarize(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    columns: Mapping[str, str] | None = None,
    level: float = 0.95,
    paired: bool = False,
) -> pd.DataFrame:
    r"""Accuracy per group × context length × ToM order with Wilson intervals and error taxonomy.

    Parameters
    ----------
    data : path or pandas.DataFrame
        An evaluation log (``.jsonl`` from ``tomstats evaluate``), a ``.csv``/``.parquet``
        table or a DataFrame with one row per question (see :func:`read_evaluation`).
    by : str or sequence of str, optional
        Grouping columns before the cell factors; default ``"model"`` when the data have that
        column (one row per LLM × cell), else none. ``[]`` pools every row of a cell.
    columns : mapping, optional
        ``{standard name: your column}`` (the ``--map`` convention of ``tomstats fit``).
    level : float, default 0.95
        Coverage of the Wilson interval

        .. math::

            \frac{\hat\pi + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat\pi(1-\hat\pi)}{n}
            + \frac{z^2}{4n^2}}}{1 + z^2/n},\qquad z = \Phi^{-1}\!\left(\tfrac{1+\text{level}}
            {2}\right),

        with :math:`n` the answered questions
        (:func:`tomstats.analysis.intervals.wilson_interval`; NaN for a cell without answers).
    paired : bool, default False
        Score paired units instead of questions: a (model, ``pair_id``, ToM order) unit is
        right only when every version of the pair (its true- and false-belief telling) is;
        the table is then :func:`tomstats.analysis.paired.paired_summary`'s (units, paired
        accuracy with its Wilson interval, the units' chance level, incomplete units left out).

    Returns
    -------
    pandas.DataFrame
        The grouping columns, ``context_words``, ``tom_order``, then :data:`SUMMARY_COLUMNS`
        (see the module docstring), sorted. ``attrs["errors_by_reason"]`` counts the error
        records by ``error_category`` (e.g. ``{"context_overflow": 60}``).

    Raises
    ------
    ValueError
        A missing column (with the closest name), a non-numeric or non-0/1 ``correct``, a
        ``level`` outside (0, 1).

    Examples
    --------
    >>> from tomstats.analysis.summary import summarize
    >>> df = pd.DataFrame({"model": "m", "context_words": [200] * 4, "tom_order": [0, 0, 1, 1],
    ...                    "correct": [1, 0, 1, None]})
    >>> summarize(df)[["tom_order", "n", "n_answered", "n_correct", "n_errors"]]
       tom_order  n  n_answered  n_correct  n_errors
    0          0  2           2          1         0
    1          1  2           1          1         1
    """
    if paired:
        from tomstats.analysis.paired import paired_summary

        return paired_summary(data, by=by, columns=columns, level=level)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    df = apply_mapping(read_evaluation(data), columns)
    for c in _CELL:
        require_column(df, c, "cell factor")
        na = df[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"column {c!r} has a missing value in row {int(np.argmax(na))}")
    keys = [*by_columns(df, by), *_CELL]
    for c in keys:
        na = df[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"column {c!r} has a missing value in row {int(np.argmax(na))}")
    y = outcome(df, "correct")
    answered = _answered(df, y)
    has_tax = "error_category" in df.columns
    cat = (df["error_category"].astype("string") if has_tax
           else pd.Series(pd.NA, index=df.index, dtype="string"))
    wrong = answered & y.eq(0.0)
    work = pd.DataFrame({k: df[k] for k in keys})
    work["n"] = 1
    work["n_answered"] = answered.astype(int)
    work["n_correct"] = (answered & y.eq(1.0)).astype(int)
    work["n_errors"] = (~answered).astype(int)
    tax = cat.map(TAXONOMY).fillna("other")
    for c in ERROR_COLUMNS:
        work[c] = (wrong & tax.eq(c)).astype(int)
    counts = ["n", "n_answered", "n_correct", "n_errors", *ERROR_COLUMNS]
    out = work.groupby(keys, sort=True, dropna=False)[counts].sum().reset_index()
    k = out["n_correct"].to_numpy(dtype=float)
    n = out["n_answered"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["accuracy"] = np.where(n > 0, k / np.where(n > 0, n, 1), np.nan)
    lo, hi = wilson_interval(k, n, level)
    out["ci_low"], out["ci_high"] = lo, hi
    if not has_tax:
        for c in ERROR_COLUMNS:
            out[c] = pd.array([pd.NA] * len(out), dtype="Int64")
    out = out[[*keys, *SUMMARY_COLUMNS]]
    reasons = cat[~answered].fillna("missing correct").value_counts()
    out.attrs["errors_by_reason"] = {str(r): int(v) for r, v in reasons.items()}
    out.attrs["level"] = float(level)
    return out


def format_summary(table: pd.DataFrame) -> str:
    """The summary as a printable table: accuracy and interval to three decimals."""
    show = table.copy()
    for c in ("accuracy", "ci_low", "ci_high"):
        show[c] = [("—" if pd.isna(v) else f"{v:.3f}") for v in show[c]]
    if "chance" in show.columns:
        show["chance"] = [("—" if pd.isna(v) else f"{v:.4f}") for v in show["chance"]]
    return show.to_string(index=False, na_rep="—")
