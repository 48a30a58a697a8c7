r"""Paired scoring: a story's question counts as right only when every version of it is.

Items that share a non-empty ``pair_id`` (:attr:`tomstats.stories.items.Item.pair_id`) are the
versions of one story's question that differ only in the belief status: the true-belief and
the false-belief telling of the same story. A **unit** is one responder's answers to one
pair at one ToM order: the rows that share (``model``, ``pair_id``, ``tom_order``, and
``sample`` when the data have it). It is scored

.. math::

    y_u = \prod_{v \in u} y_v \qquad (1 \text{ when every version is answered right}),

so a responder that answers without tracking beliefs cannot score: a *reality tracker* (the
target's true final place) is right on the true-belief version and wrong on the false-belief
one, so it scores 0 on every unit; a *previous-place* rule is right on (some) false-belief
versions and wrong on their true-belief twins. The chance level of a unit is the product of
its versions' chance levels, :math:`c_u = \prod_{v \in u} 1/m_v` with :math:`m_v` the number
of candidate places of version :math:`v` (column ``n_candidates``; missing: unknown).

**Incomplete units are dropped, and counted.** A unit is complete when it holds at least two
versions, every one answered (a runner error record or a missing ``correct`` is no answer),
and — when the data have ``belief_status`` — both a ``"true"`` and a ``"false"`` version.
Anything less (a version lost to an error, a ``--query`` that kept one version, a log cut
short) cannot be scored as a pair: such units are left out and counted per reason
(``attrs["n_incomplete"]``, ``attrs["incomplete_by_reason"]``; :func:`paired_summary` also per
cell); ``incomplete="raise"`` refuses them instead. Rows with an empty ``pair_id`` (unpaired
items: items of format ``tomstats.items/1`` and ``/2``, logs of older runners) and rows whose
``belief_status`` is ``"none"`` (reality and world-model questions of a paired story ask no
belief) are not units and are counted in ``attrs["n_unpaired_rows"]``.
Data without any paired row are refused with a message that says why.

Within a unit, ``context_words`` must be one value (the versions are one story told at one
length); a unit holding the same ``item_id`` twice is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import show_value
from tomstats.analysis.intervals import wilson_interval
from tomstats.analysis.table import (
    apply_mapping,
    by_columns,
    outcome,
    read_evaluation,
    require_column,
)

__all__ = ["INCOMPLETE_POLICIES", "PAIRED_COLUMNS", "PAIRED_SUMMARY_COLUMNS", "incomplete_note",
           "paired_summary", "paired_units", "unit_keys"]

#: What :func:`paired_units` does with units that cannot be scored as a pair.
INCOMPLETE_POLICIES = ("drop", "raise")
#: Columns the paired scores read when the data have them (besides the cell factors).
PAIRED_COLUMNS = ("pair_id", "sample", "belief_status", "item_id", "n_candidates", "status")
#: Count and interval columns of :func:`paired_summary` (after the grouping columns).
PAIRED_SUMMARY_COLUMNS = ("n_units", "n_correct", "accuracy", "ci_low", "ci_high", "chance",
                          "n_incomplete")
#: Columns carried onto the units when they hold one value in every unit.
_CARRIED = ("setting", "generator", "question_type", "n_characters", "agents", "target")
#: Reasons a unit is incomplete, as counted in ``attrs["incomplete_by_reason"]``.
_REASONS = ("a version without an answer", "a belief status missing",
            "one version only")
_CELL = ("context_words", "tom_order")


def _status_words(col: pd.Series) -> pd.Series:
    """``belief_status`` as lower-case words, ``"none"`` where missing (a CSV reader turns the
    words true/false into booleans)."""
    return col.astype("string").fillna("none").str.lower()


def unit_keys(df: pd.DataFrame, group: Sequence[str] | None = None) -> list[str]:
    """The columns that identify a unit: ``group`` (default ``model`` when the data have it),
    ``pair_id``, ``tom_order`` and ``sample`` when present."""
    if group is None:
        group = ["model"] if "model" in df.columns else []
    return [*group, "pair_id", "tom_order", *(["sample"] if "sample" in df.columns else [])]


def _all_units(df: pd.DataFrame, dv: str, group: Sequence[str] | None,
               keep: Sequence[str]) -> tuple[pd.DataFrame, int]:
    """Every unit of ``df`` (complete or not, column ``reason``: ``""`` when complete) and the
    number of unpaired rows."""
    require_column(df, "pair_id", "paired scoring")
    for c in _CELL:
        require_column(df, c, "cell factor")
    keys = unit_keys(df, group)
    for c in [*keys, *keep]:
        require_column(df, c, "paired scoring")
    pid = df["pair_id"]
    paired = (pid.notna() & pid.astype("string").fillna("").str.len().gt(0)).to_numpy()
    if "belief_status" in df.columns:  # reality and world-model questions are not versions
        paired &= _status_words(df["belief_status"]).ne("none").to_numpy()
    n_unpaired = int((~paired).sum())
    if not paired.any():
        raise ValueError("paired scoring: no belief question has a pair_id (every pair_id "
                         "is empty, or only reality and world-model questions have one); "
                         "paired scores need items whose true- and false-belief versions "
                         "share a pair_id (item format tomstats.items/3 from a generator that "
                         "pairs its stories, evaluated by this version of the runner)")
    y = outcome(df, dv)
    answered = y.notna().to_numpy().copy()
    if "status" in df.columns:
        answered &= df["status"].astype("string").fillna("ok").ne("error").to_numpy()
    cols = list(dict.fromkeys([*keys, *_CELL, *keep]))
    work = df.loc[paired, cols].copy()
    work["pair_id"] = work["pair_id"].astype(str)
    for c in cols:
        na = work[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"paired scoring: column {c!r} has a missing value in row "
                             f"{int(work.index[np.argmax(na)])}")
    work["_answered"] = answered[paired]
    work["_right"] = answered[paired] & (y.to_numpy()[paired] == 1.0)
    if "item_id" in df.columns:
        dup = work.assign(_item=df.loc[paired, "item_id"].to_numpy()).duplicated(
            [*keys, "_item"])
        if dup.any():
            r = work.loc[dup.to_numpy()].iloc[0]
            raise ValueError(f"paired scoring: item_id {show_value(df.loc[r.name, 'item_id'])} "
                             f"appears twice in the unit pair_id={r['pair_id']!r}, "
                             f"tom_order={show_value(r['tom_order'])} (row {int(r.name)})")
    status = (_status_words(df.loc[paired, "belief_status"]).to_numpy()
              if "belief_status" in df.columns else None)
    if status is not None:
        work["_true"], work["_false"] = status == "true", status == "false"
    chance_known = "n_candidates" in df.columns
    if chance_known:
        m = pd.to_numeric(df.loc[paired, "n_candidates"], errors="coerce").to_numpy(float)
        work["_logc"] = np.where(m >= 1, -np.log(np.where(m >= 1, m, 1.0)), np.nan)
        work["_cnan"] = np.isnan(work["_logc"].to_numpy())
    g = work.groupby(keys, sort=True, dropna=False)
    agg: dict[str, Any] = {"n_versions": ("_answered", "size"),
                           "n_answered": ("_answered", "sum"), "n_right": ("_right", "sum")}
    if status is not None:
        agg.update(has_true=("_true", "any"), has_false=("_false", "any"))
    if chance_known:
        agg.update(_logc=("_logc", "sum"), _cnan=("_cnan", "any"))
    varying = [c for c in [*_CELL, *keep] if c not in keys]
    for c in varying:
        agg[f"_n_{c}"] = (c, "nunique")
        agg[c] = (c, "first")
    units = g.agg(**agg).reset_index()
    for c in varying:
        bad = units[f"_n_{c}"].to_numpy() > 1
        if bad.any():
            r = units.loc[bad].iloc[0]
            why = (" (the versions of a pair are one story told at one length)"
                   if c == "context_words" else "")
            raise ValueError(f"paired scoring: the versions of pair_id={r['pair_id']!r}, "
                             f"tom_order={show_value(r['tom_order'])} differ in {c!r}{why}")
    reason = np.full(len(units), "", dtype=object)
    if status is not None:
        reason[~(units["has_true"] & units["has_false"]).to_numpy()] = _REASONS[1]
    reason[units["n_versions"].to_numpy() < 2] = _REASONS[2]
    reason[units["n_answered"].to_numpy() < units["n_versions"].to_numpy()] = _REASONS[0]
    units["reason"] = reason
    units[dv] = (units["n_right"] == units["n_versions"]).astype("int64")
    units["chance"] = (np.exp(units["_logc"]).where(~units["_cnan"].astype(bool))
                       if chance_known else np.nan)
    units["story_id"] = units["item_id"] = units["pair_id"]
    carried = [c for c in _CARRIED if c in df.columns and c not in cols]
    if carried:
        extra = df.loc[paired, carried].assign(
            **{k: work[k].to_numpy() for k in keys}).groupby(keys, sort=True, dropna=False)
        same = extra.nunique(dropna=False).le(1).all()
        first = extra.first().reset_index()
        for c in carried:
            if same[c]:
                units[c] = first[c].to_numpy()
    units = units.drop(columns=[c for c in units.columns if c.startswith("_")
                                or c in ("has_true", "has_false", "n_right")])
    return units, n_unpaired


def paired_units(data: str | os.PathLike[str] | pd.DataFrame, *, dv: str = "correct",
                 group: Sequence[str] | None = None, keep: Sequence[str] = (),
                 columns: Mapping[str, str] | None = None,
                 incomplete: str = "drop") -> pd.DataFrame:
    r"""One row per complete unit (responder × pair × ToM order [× sample]), scored paired.

    Parameters
    ----------
    data : path or pandas.DataFrame
        An evaluation log or table, one row per question, with ``pair_id``, ``correct``,
        ``context_words`` and ``tom_order`` (see :func:`tomstats.analysis.table.read_evaluation`).
    dv : str, default ``"correct"``
        The 0/1 outcome of a question.
    group : sequence of str, optional
        The responder's columns (default ``["model"]`` when the data have it): a unit never
        mixes two responders' answers.
    keep : sequence of str
        Further columns to carry onto the units; each must hold one value within every unit.
    columns : mapping, optional
        ``{standard name: your column}`` (``--map``).
    incomplete : {"drop", "raise"}
        Units that cannot be scored as a pair (see the module docstring): left out and
        counted, or refused (``ValueError`` naming one and the count).

    Returns
    -------
    pandas.DataFrame
        The unit's keys, ``context_words``, the ``keep`` columns, ``n_versions``,
        ``n_answered``, ``dv`` (:math:`\prod_v y_v`), ``chance``
        (:math:`\prod_v 1/m_v`, NaN when ``n_candidates`` is unknown), ``story_id`` and
        ``item_id`` (both the ``pair_id``: the unit's story, the cluster of the ANOVA's
        intervals and the GLMM's item), and the covariates among ``setting``,
        ``generator``, ``question_type``, ``n_characters``, ``agents`` and ``target`` that
        hold one value within every unit. ``attrs``: ``n_units``, ``n_incomplete``,
        ``incomplete_by_reason``, ``n_unpaired_rows``, ``n_rows`` (the rows read).
    """
    if incomplete not in INCOMPLETE_POLICIES:
        raise ValueError(f"incomplete must be one of {list(INCOMPLETE_POLICIES)}, got "
                         f"{incomplete!r}")
    df = apply_mapping(read_evaluation(data), columns)
    units, n_unpaired = _all_units(df, dv, group, list(keep))
    bad = units["reason"].ne("").to_numpy()
    reasons = {r: int(v) for r, v in units.loc[bad, "reason"].value_counts().items()}
    if bad.any() and incomplete == "raise":
        r = units.loc[bad].iloc[0]
        raise ValueError(f"paired scoring: {int(bad.sum())} of {len(units)} units are "
                         f"incomplete, e.g. pair_id={r['pair_id']!r}, "
                         f"tom_order={show_value(r['tom_order'])}: {r['reason']}")
    out = units.loc[~bad].drop(columns="reason").reset_index(drop=True)
    if len(out) == 0:
        raise ValueError(f"paired scoring: none of the {len(units)} units is complete ("
                         + ", ".join(f"{v} with {k}" for k, v in reasons.items())
                         + "); a unit needs every version of its pair answered")
    out.attrs.update(n_units=len(out), n_incomplete=int(bad.sum()),
                     incomplete_by_reason=reasons, n_unpaired_rows=n_unpaired,
                     n_rows=len(df))
    return out


def incomplete_note(attrs: Mapping[str, Any]) -> str:
    """The sentence on the units left out and the unpaired rows (for the commands)."""
    parts = [f"{attrs['n_units']} paired units"]
    if attrs.get("n_incomplete"):
        parts.append(f"{attrs['n_incomplete']} incomplete unit(s) left out ("
                     + ", ".join(f"{v} with {k}" for k, v in
                                 attrs["incomplete_by_reason"].items()) + ")")
    if attrs.get("n_unpaired_rows"):
        parts.append(f"{attrs['n_unpaired_rows']} unpaired question(s) not scored")
    return "; ".join(parts)


def paired_summary(data: str | os.PathLike[str] | pd.DataFrame, *,
                   by: str | Sequence[str] | None = None,
                   columns: Mapping[str, str] | None = None, level: float = 0.95,
                   dv: str = "correct") -> pd.DataFrame:
    r"""Paired accuracy per group × context length × ToM order, with Wilson intervals.

    The units are :func:`paired_units`'s (per ``model`` when the data have it, whatever
    ``by``); ``by`` (default ``"model"`` when present; ``[]`` pools) groups them.

    Returns
    -------
    pandas.DataFrame
        The grouping columns, ``context_words``, ``tom_order``, then
        :data:`PAIRED_SUMMARY_COLUMNS`: complete units, units right, their share
        :math:`\hat\pi` with its Wilson interval at ``level``, the mean chance level of the
        units :math:`\bar c = \frac1n\sum_u \prod_{v\in u} 1/m_v` (NaN when unknown) and the
        incomplete units of the cell, left out. ``attrs`` as :func:`paired_units`'s.
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    df = apply_mapping(read_evaluation(data), columns)
    keys = [*by_columns(df, by), *_CELL]
    group = ["model"] if "model" in df.columns else []
    units, n_unpaired = _all_units(df, dv, group, [k for k in keys if k not in _CELL])
    bad = units["reason"].ne("")
    if not (~bad).any():
        paired_units(df, dv=dv, group=group)  # raises the message that says why
    units["_ok"] = (~bad).astype(int)
    units["_right"] = units[dv].where(~bad, 0)
    units["_chance"] = units["chance"].where(~bad)
    units["_bad"] = bad.astype(int)
    out = units.groupby(keys, sort=True, dropna=False).agg(
        n_units=("_ok", "sum"), n_correct=("_right", "sum"),
        chance=("_chance", "mean"), n_incomplete=("_bad", "sum")).reset_index()
    k = out["n_correct"].to_numpy(dtype=float)
    n = out["n_units"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["accuracy"] = np.where(n > 0, k / np.where(n > 0, n, 1), np.nan)
    out["ci_low"], out["ci_high"] = wilson_interval(k, n, level)
    out = out[[*keys, *PAIRED_SUMMARY_COLUMNS]]
    reasons = {r: int(v) for r, v in units.loc[bad, "reason"].value_counts().items()}
    out.attrs.update(n_units=int(n.sum()), n_incomplete=int(bad.sum()),
                     incomplete_by_reason=reasons, n_unpaired_rows=n_unpaired,
                     n_rows=len(df), level=float(level))
    return out
