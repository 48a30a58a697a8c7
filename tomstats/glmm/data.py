"""Data for the GLMMs: standard columns, validation, and the numeric design of a spec.

Standard columns (rename yours with ``columns={"correct": "is_correct", ...}``):

==================  ========================================================================
``correct``         0/1 outcome of one question (Bernoulli)
``successes``       number correct out of ``trials`` (binomial)
``trials``          number of tries of the row (binomial)
``model``           the language model (LLM) that answered
``item``            the item (question/story) id; ``item_id`` is accepted for it
``story``           the story a question is asked about; ``story_id`` is accepted for it. In
                    a log with length ladders a story is told at every context length, so
                    ``(1 | story)`` is crossed with length and order (and with the LLMs)
``tom_order``       ToM order (0 = world-model / factual control, 1, 2, ...)
``context_words``   context length in words
``log_context``     added: :math:`\\ln(\\text{context\\_words})`
==================  ========================================================================

:func:`build_design` turns a spec and a validated data frame into :class:`ModelData`, the
plain NumPy arrays both backends read. Identical rows can be summed into binomial cells
(``aggregate``): rows with equal covariates and equal group memberships share one success
probability, so the binomial likelihood of the sums equals the Bernoulli likelihood of
the rows up to a constant.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tomstats._expr import FORMULA_CONTEXT, Query, check_formula, check_terms, expand_terms
from tomstats._guards import Footprint, check_footprint
from tomstats._validate import check_keys, check_type, closest_hint, closest_name
from tomstats.analysis.table import STAND_INS, read_evaluation, used_columns
from tomstats.glmm._hints import InputError, column_hint, hint, option_hint
from tomstats.glmm.spec import FormulaSpec, StructuralSpec, half_normal, lkj, normal, parse_formula

__all__ = [
    "STANDARD_COLUMNS",
    "ModelData",
    "prepare_data",
    "read_table",
    "paired_table",
    "build_design",
    "fit_columns",
    "formula_matrices",
    "design_columns",
    "design_footprint",
    "group_codes",
    "formula_variables",
    "response_arrays",
]

#: ``hierarchical="auto"`` pools the capabilities when the data have at least this many LLMs.
HIERARCHY_MIN_LLMS = 5
#: The structural model estimates α and δ only when the longest context is at least this
#: many times the shortest (the paper's design spans 200–5000 words, a factor of 25).
CONTEXT_MIN_RATIO = 1.5

STANDARD_COLUMNS = ("correct", "successes", "trials", "model", "item", "story", "tom_order",
                    "context_words")


#: What :func:`read_table` does with questions that ended in an error (no answer).
ERROR_POLICIES = ("drop", "keep")


def read_table(path: str | os.PathLike[str], *, errors: str = "drop",
               paired: bool = False) -> pd.DataFrame:
    """Read an evaluation log: the runner's JSON Lines, CSV or parquet (by suffix).

    The reader is :func:`tomstats.analysis.table.read_evaluation` (JSON Lines through
    :func:`tomstats.evaluate.read_log`, one row per question), as for ``tomstats summarize``.

    Parameters
    ----------
    path : path-like
        A suffix of :data:`tomstats.analysis.table.TABLE_FORMATS`: ``.jsonl`` (the runner's
        log), ``.csv``, ``.tsv`` or ``.parquet``, or gzip-compressed ``.jsonl.gz``,
        ``.csv.gz``, ``.tsv.gz``.
    errors : {"drop", "keep"}
        Questions that ended in an error (a record with ``status == "error"``: no answer
        after the retry budget, e.g. a prompt longer than the model's context window):
        ``"drop"`` leaves them out (with a warning that counts them); ``"keep"`` keeps them
        scored as incorrect (``correct = 0``: the model gave no correct answer). The count
        and the policy are kept in ``df.attrs["errored_questions"]`` and recorded in the
        provenance of a fit made from the frame.
    paired : bool, default False
        One binary row per paired unit instead of per question (:func:`paired_table`).
    """
    df = _read_table(path, errors)
    if paired:
        df = paired_table(df, errors=errors)
    info = df.attrs.get("errored_questions") or {}
    if info.get("n") and info.get("policy") == "drop":
        warnings.warn(f"{path}: dropped {info['n']} question(s) that ended in an error (no "
                      f"answer); pass errors='keep' to score them as incorrect", stacklevel=2)
    return df


def _read_table(path: str | os.PathLike[str], errors: str = "drop", *,
                model: str | None = None, columns: Mapping[str, str] | None = None,
                query: Query | None = None, paired: bool = False) -> pd.DataFrame:
    """:func:`read_table` without the warning (the command line prints its own note).

    With ``model`` (and the fit's ``columns`` mapping and ``query``), only the file's columns
    that fit reads (:func:`fit_columns`) are read.
    """
    check_type(path, (str, os.PathLike), "path", "a path to an evaluation log")
    if errors not in ERROR_POLICIES:
        raise ValueError(f"errors must be 'drop' or 'keep', got {errors!r}")
    if model is None:
        return _apply_error_policy(read_evaluation(path), errors)
    needed, optional = fit_columns(model)
    if paired:
        from tomstats.analysis.paired import PAIRED_COLUMNS

        needed = [*needed, "pair_id", "tom_order", "context_words"]
        optional = [*optional, *PAIRED_COLUMNS]
    usecols, maybe = used_columns(columns, query, needed, optional)
    return _apply_error_policy(read_evaluation(path, usecols, maybe), errors)


def paired_table(df: pd.DataFrame, columns: Mapping[str, str] | None = None, *,
                 errors: str = "drop") -> pd.DataFrame:
    r"""One binary row per paired unit, for a GLMM of paired outcomes.

    A unit (:func:`tomstats.analysis.paired.paired_units`) is one LLM's answers to the
    versions of one story's question that share a ``pair_id`` (its true- and false-belief
    telling) at one ToM order; ``correct`` is 1 only when every version is right,
    :math:`y_u = \prod_{v\in u} y_v`. The rows keep the cell covariates (``context_words``,
    ``tom_order``), ``model``, and ``item`` = the ``pair_id`` (the story: the random effect
    of ``(1 | item)``). ``columns`` (``--map``) is applied first; the frame returned has the
    standard names. With ``errors="drop"`` (the questions that ended in an error already
    left out) a unit that lost a version is incomplete and left out; with ``"keep"`` an
    errored version counts as wrong and its unit is scored. ``attrs["paired"]`` records the
    units and those left out (kept in the fit's provenance).
    """
    from tomstats.analysis.paired import paired_units
    from tomstats.analysis.table import apply_mapping

    attrs = dict(df.attrs)
    src = apply_mapping(df, columns)
    if errors == "keep" and "status" in src.columns:
        src = src.drop(columns="status")  # errored versions were scored 0: answered
    units = paired_units(src)
    units["item"] = units["pair_id"]
    info = {k: units.attrs[k] for k in ("n_units", "n_incomplete", "incomplete_by_reason",
                                        "n_unpaired_rows")}
    units.attrs = {**attrs, "paired": info}
    return units


def fit_columns(model: str) -> tuple[list[str], list[str]]:
    """The standard columns a fit of ``model`` reads: ``(needed, optional)``, as
    :func:`tomstats.analysis.table.used_columns` takes them.

    A formula's variables (``log_context`` is made from ``context_words`` when the data lack
    it; ``item`` from ``item_id`` and ``story`` from ``story_id``: all optional), else the
    structural model's covariates; optional: the outcome's forms, ``model``, ``item`` and
    ``status`` (the error policy).
    """
    optional = ["correct", "successes", "trials", "model", "item", "status"]
    if "~" not in model:
        return ["tom_order", "context_words"], optional
    names = ["context_words" if v == "log_context" else v
             for v in check_formula(model).variables]
    stories = ["story"] if "story" in names else []
    return ([v for v in dict.fromkeys(names) if v not in STAND_INS],
            [*optional, *stories, "log_context"])


def _apply_error_policy(df: pd.DataFrame, errors: str) -> pd.DataFrame:
    """Drop errored questions or keep them scored 0 (see :func:`read_table`)."""
    if "status" not in df.columns:
        return df
    bad = (df["status"].astype(str) == "error").to_numpy()
    n = int(bad.sum())
    attrs = dict(df.attrs)
    if n and errors == "drop":
        df = df.loc[~bad].reset_index(drop=True)
    elif n and "correct" in df.columns:
        df = df.copy()
        df.loc[bad, "correct"] = 0
    if n and "correct" in df.columns and df["correct"].notna().all():
        df["correct"] = df["correct"].astype("int64")
    if n and len(df) == 0:
        raise InputError(f"every question of the log ended in an error (no answer): nothing "
                         f"to fit; {hint('pass errors=' + repr('keep'), 'pass --errors keep')} "
                         f"to score them as incorrect")
    df.attrs.update(attrs)
    df.attrs["errored_questions"] = {"n": n, "policy": errors}
    return df


def prepare_data(
    data: pd.DataFrame,
    columns: Mapping[str, str] | None = None,
    *,
    successes: str | None = None,
    trials: str | None = None,
) -> pd.DataFrame:
    """Return a copy of ``data`` with the standard column names (see module docstring).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per question (or per item with binomial counts).
    columns : mapping, optional
        ``{standard_name: your_column}``, e.g. ``{"correct": "is_correct",
        "model": "run_dir"}``.
    successes, trials : str, optional
        Columns holding binomial counts (copied to ``successes`` / ``trials``).
    """
    check_type(data, pd.DataFrame, "data",
               "a pandas DataFrame (read a log file with tomstats.glmm.read_table(path))")
    if columns is not None:
        check_type(columns, Mapping, "columns", "a mapping {standard_name: your_column}")
    df = data.copy()
    mapping = dict(columns or {})
    if successes is not None:
        mapping["successes"] = successes
    if trials is not None:
        mapping["trials"] = trials
    own = list(map(str, data.columns))
    for std, src in mapping.items():
        if src not in df.columns:
            given = hint(f"columns={{{std!r}: {src!r}}}", f"--map {std}={src}")
            raise InputError(f"column mapping {given}: "
                             f"column {src!r} is not in the data"
                             f"{_near(str(src), own)} (columns: {', '.join(own)})")
    derived: dict[str, str] = {}
    for std, src in mapping.items():
        if std != src:
            df[std] = data[src]
            derived[std] = f"mapped from {src!r}"
    for std, stand_in in STAND_INS.items():
        if std not in df.columns and stand_in in df.columns:
            df[std] = df[stand_in]
            derived[std] = f"copied from {stand_in!r}"
    if "context_words" in df.columns and "log_context" not in df.columns:
        c = pd.to_numeric(df["context_words"], errors="coerce")
        with np.errstate(divide="ignore", invalid="ignore"):
            df["log_context"] = np.where(c > 0, np.log(c.where(c > 0, 1.0)), np.nan)
        derived["log_context"] = "ln(context_words)"
    df.attrs = {k: v for k, v in data.attrs.items() if k not in ("source_columns", "derived")}
    df.attrs["source_columns"] = own
    df.attrs["derived"] = derived
    return df


def describe_columns(df: pd.DataFrame) -> str:
    """The columns a user can name: their own, then those tomstats added (for messages).

    Only the data's own columns are listed as such, so a message never claims the user's
    file has a column (such as ``item`` or ``log_context``) that tomstats derived.
    """
    own = df.attrs.get("source_columns")
    if own is None:
        return f"columns: {', '.join(map(str, df.columns))}"
    derived = df.attrs.get("derived") or {}
    text = f"your columns: {', '.join(own)}"
    if derived:
        text += "; also available: " + ", ".join(f"{k} ({v})" for k, v in derived.items())
    return text


def _missing_message(missing: Sequence[str], df: pd.DataFrame) -> str:
    """``"'itme' (did you mean 'item'?)"`` for each missing column."""
    names = [*(df.attrs.get("source_columns") or map(str, df.columns)),
             *(df.attrs.get("derived") or {})]
    return ", ".join(f"{c!r}{_near(c, names)}" for c in missing)


def _rename_advice(missing: Sequence[str], df: pd.DataFrame) -> str:
    """How to give the missing columns: ``--map correct=Correct`` (the right way round) for
    one standard name with a close column, the general form for several; a name of the
    user's own can be renamed with ``columns=`` in Python, while on the command line (whose
    ``--map`` renames to standard names only) it is to be spelled as the data do."""
    std = [c for c in missing if c in STANDARD_COLUMNS]
    if not std:  # the Python API's columns= renames any column, --map standard names only
        return hint("rename yours with columns={...}", "write the name as the data spell it")
    if len(std) > 1:
        return f"rename yours with {column_hint()}"
    names = [*(df.attrs.get("source_columns") or map(str, df.columns))]
    return f"rename yours with {column_hint(std[0], closest_name(std[0], names))}"


def _near(name: str, known: Sequence[str]) -> str:
    h = closest_hint(name, known)
    return h if "did you mean" in h else ""


# --------------------------------------------------------------------------- validation


def _first_rows(mask: np.ndarray, k: int = 3) -> list[int]:
    return [int(i) for i in np.flatnonzero(mask)[:k]]


def _require(df: pd.DataFrame, cols: Sequence[str], why: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        names = [*(df.attrs.get("source_columns") or map(str, df.columns))]
        how = (column_hint(missing[0], closest_name(missing[0], names)) if len(missing) == 1
               else column_hint())
        raise InputError(f"{why}: column(s) {_missing_message(missing, df)} not in the data "
                         f"({describe_columns(df)}); rename yours with {how}")


def _no_nan(df: pd.DataFrame, cols: Sequence[str]) -> None:
    for c in cols:
        na = df[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"column {c!r} has {int(na.sum())} missing value(s) (NaN), e.g. "
                             f"rows {_first_rows(na)}; drop or fill them before fitting")


def _numeric(df: pd.DataFrame, col: str) -> np.ndarray:
    try:
        return pd.to_numeric(df[col], errors="raise").to_numpy(dtype=float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"column {col!r} must be numeric: {exc}") from exc


def response_arrays(
    df: pd.DataFrame, response: str, trials: str | None, family: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """Validated outcome (and trials) as int arrays; errors name the column and rows."""
    cols = [response] + ([trials] if trials else [])
    _require(df, cols, f"{family} outcome")
    _no_nan(df, cols)
    if family == "bernoulli":
        col = df[response]
        if col.dtype == bool:
            return col.to_numpy(dtype=np.int64), None
        y = _numeric(df, response)
        bad = ~np.isin(y, (0.0, 1.0))
        if bad.any():
            vals = sorted(set(np.unique(y[bad]).tolist()))[:5]
            raise InputError(
                f"column {response!r} must be 0/1 for a Bernoulli outcome; found {vals} in rows "
                f"{_first_rows(bad)}; for counts use "
                + hint("family='binomial' with a trials column",
                       "--successes COLUMN --trials COLUMN"))
        return y.astype(np.int64), None
    assert trials is not None
    y = _numeric(df, response)
    n = _numeric(df, trials)
    for name, v in ((response, y), (trials, n)):
        bad = (v != np.round(v)) | (v < 0)
        if bad.any():
            raise ValueError(f"column {name!r} must hold non-negative integers; found "
                             f"{v[bad][:3].tolist()} in rows {_first_rows(bad)}")
    bad = n < 1
    if bad.any():
        raise ValueError(f"column {trials!r} (trials) must be >= 1; found {n[bad][:3].tolist()} "
                         f"in rows {_first_rows(bad)}")
    bad = y > n
    if bad.any():
        i = _first_rows(bad)
        raise ValueError(f"successes > trials: column {response!r} exceeds {trials!r} in "
                         f"{int(bad.sum())} row(s), e.g. rows {i} ({y[i[0]]:g} > {n[i[0]]:g})")
    return y.astype(np.int64), n.astype(np.int64)


def group_codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes and sorted string levels of a grouping column."""
    s = values.astype(str).to_numpy(dtype=object)
    levels = sorted(set(s.tolist()))
    lookup = {v: i for i, v in enumerate(levels)}
    return np.array([lookup[v] for v in s], dtype=np.int64), levels


def _group_series(df: pd.DataFrame, group: str) -> pd.Series:
    parts = group.split(":")
    if len(parts) == 1:
        return df[parts[0]].astype(str)
    out = df[parts[0]].astype(str)
    for p in parts[1:]:
        out = out + ":" + df[p].astype(str)
    return out


# --------------------------------------------------------------------------- model data


@dataclass(frozen=True)
class ModelData:
    """The numeric design of one model, shared by both backends.

    Attributes
    ----------
    y : ndarray of int, shape (n_obs,)
        Successes per observation (0/1 for Bernoulli rows).
    trials : ndarray of int or None
        Trials per observation; ``None`` means Bernoulli observations.
    arrays : dict of str to ndarray
        Structural: ``context``, ``tom``, ``llm`` (int), ``item`` (int, if item effects).
        Formula: ``X`` (n_obs, p) centred design, ``X_mean`` (p,), for each random term
        ``Z_<key>`` (n_obs, d) and ``g_<key>`` (n_obs,) group codes.
    coords : dict of str to list
        Levels: ``llm``, ``item``; ``coef``; per term its group ``dim`` and ``<key>_effect``.
    row_obs : ndarray of int, shape (n_rows,)
        Observation index of each data row (identity unless aggregated).
    intercept : int or None
        Index of the intercept column of ``X`` (formula models).
    """

    y: np.ndarray
    trials: np.ndarray | None
    arrays: dict[str, np.ndarray]
    coords: dict[str, list[str]]
    row_obs: np.ndarray
    intercept: int | None = None

    @property
    def n_obs(self) -> int:
        """Number of observations the likelihood sees."""
        return int(self.y.shape[0])

    @property
    def likelihood(self) -> str:
        """``"bernoulli"`` or ``"binomial"`` (of the observations, after aggregation)."""
        return "bernoulli" if self.trials is None else "binomial"


def _aggregate(
    keys: np.ndarray, y: np.ndarray, trials: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sum rows with identical ``keys`` rows: (first_row_index, inverse, y_sum, n_sum)."""
    _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    n = np.ones_like(y) if trials is None else trials
    ys = np.bincount(inv, weights=y, minlength=first.size).round().astype(np.int64)
    ns = np.bincount(inv, weights=n, minlength=first.size).round().astype(np.int64)
    return first, inv, ys, ns


def _resolve_aggregate(aggregate: bool | str, keys: np.ndarray) -> bool:
    if aggregate == "auto":
        n_unique = np.unique(keys, axis=0).shape[0]
        return n_unique * 2 <= keys.shape[0]
    if not isinstance(aggregate, bool):
        raise InputError(f"{hint('aggregate', '--option aggregate')} must be "
                         f"{hint(repr(True), 'true')}, {hint(repr(False), 'false')} or "
                         f"{hint(repr('auto'), json.dumps('auto'))}, got {aggregate!r}")
    return aggregate


def structural_columns(df: pd.DataFrame) -> dict[str, Any]:
    """Validated structural covariates: context, tom (float arrays)."""
    _require(df, ["tom_order", "context_words"], "structural model")
    _no_nan(df, ["tom_order", "context_words"])
    tom = _numeric(df, "tom_order")
    ctx = _numeric(df, "context_words")
    bad = tom < 0
    if bad.any():
        raise ValueError(f"column 'tom_order' must be >= 0; found {tom[bad][:3].tolist()} in "
                         f"rows {_first_rows(bad)}")
    bad = ctx <= 0
    if bad.any():
        raise ValueError(f"column 'context_words' must be > 0 words; found "
                         f"{ctx[bad][:3].tolist()} in rows {_first_rows(bad)}")
    return {"context": ctx, "tom": tom}


def build_structural(
    spec_options: Mapping[str, Any], df: pd.DataFrame, family: str | None
) -> tuple[StructuralSpec, ModelData]:
    """Validate ``df`` for the structural model and build its spec and design."""
    opts = dict(spec_options)
    family = _family(df, family, "correct", "successes", "trials")
    response, trials = ("correct", None) if family == "bernoulli" else ("successes", "trials")
    y, n = response_arrays(df, response, trials, family)
    check_outcome_varies(y, n, response, trials)
    cov = structural_columns(df)
    fixed = dict(opts.get("fixed", {}) or {})
    if np.unique(cov["tom"]).size < 2 and "gamma" not in fixed:
        raise InputError(
            f"the structural model needs several ToM orders, but column 'tom_order' has the "
            f"single value {cov['tom'][0]:g}: gamma and delta are not identified. Use a "
            f"formula model, or pass "
            + hint("fixed={'gamma': G, 'delta': D}",
                   "--option 'fixed={\"gamma\": G, \"delta\": D}'")
            + " with values G, D taken from elsewhere")
    c_min, c_max = float(cov["context"].min()), float(cov["context"].max())
    if c_max < CONTEXT_MIN_RATIO * c_min and not {"alpha", "delta"} <= set(fixed):
        what = (f"the single value {c_min:g}" if c_max == c_min else
                f"values from {c_min:g} to {c_max:g} only (max/min = {c_max / c_min:.2f} < "
                f"{CONTEXT_MIN_RATIO:g})")
        raise InputError(
            f"the structural model needs several context lengths that differ clearly, but "
            f"column 'context_words' has {what}: alpha and delta are not identified (over "
            f"so narrow a range the context terms merge into the capability and gamma). Pass "
            f"{option_hint('fixed', {'alpha': 0, 'delta': 0})} to fit the ToM effect alone")
    if "model" in df.columns:
        _no_nan(df, ["model"])
        llm, llm_levels = group_codes(df["model"])
    else:
        llm, llm_levels = np.zeros(len(df), dtype=np.int64), ["model"]
    item_opt = opts.pop("item_effects", "auto")
    has_item = "item" in df.columns
    if item_opt == "auto":
        if has_item:
            _no_nan(df, ["item"])
            item_opt = bool(df["item"].astype(str).duplicated().any())
        else:
            item_opt = False
    elif item_opt and not has_item:
        raise InputError(f"{option_hint('item_effects', True)} needs an 'item' column (or "
                         f"item_id), but the data have none ({describe_columns(df)}); map "
                         f"yours with {column_hint('item')}")
    item_opt = bool(item_opt)
    if item_opt:
        _no_nan(df, ["item"])
        item, item_levels = group_codes(df["item"])
        if len(item_levels) < 2:
            raise InputError(f"grouping factor 'item' has the single level "
                             f"{item_levels[0]!r}; item effects need at least two items (pass "
                             f"{option_hint('item_effects', False)})")
    hier = opts.pop("hierarchical", "auto")
    if hier == "auto":  # a population sd from fewer than 5 LLMs is mostly prior (and a funnel)
        hier = len(llm_levels) >= HIERARCHY_MIN_LLMS
    if not isinstance(hier, bool):
        raise InputError(f"{hint('hierarchical', '--option hierarchical')} must be "
                         f"{hint(repr(True), 'true')}, {hint(repr(False), 'false')} or "
                         f"{hint(repr('auto'), json.dumps('auto'))}, got {hier!r}")
    slopes = tuple(opts.get("random_slopes", ()) or ())
    if slopes and len(llm_levels) < 2:
        raise InputError(f"{option_hint('random_slopes', list(slopes))} need several LLMs, "
                         f"but column 'model' "
                         f"has the single level {llm_levels[0]!r}")
    arrays: dict[str, np.ndarray] = {"context": cov["context"], "tom": cov["tom"], "llm": llm}
    keys = [cov["context"], cov["tom"], llm.astype(float)]
    if item_opt:
        arrays["item"] = item
        keys.append(item.astype(float))
    key_mat = np.column_stack(keys)
    agg = _resolve_aggregate(opts.pop("aggregate", "auto"), key_mat)
    spec = StructuralSpec(family=family, item_effects=item_opt, hierarchical=hier,
                          aggregate=agg, **opts)
    coords: dict[str, list[str]] = {"llm": llm_levels}
    if item_opt:
        coords["item"] = item_levels
    md = _finish(arrays, coords, y, n, key_mat, agg, None)
    return spec, md


def _finish(
    arrays: dict[str, np.ndarray],
    coords: dict[str, list[str]],
    y: np.ndarray,
    n: np.ndarray | None,
    key_mat: np.ndarray,
    agg: bool,
    intercept: int | None,
) -> ModelData:
    if agg:
        first, inv, ys, ns = _aggregate(key_mat, y, n)
        arrays = {k: v[first] for k, v in arrays.items() if k != "X_mean"} | (
            {"X_mean": arrays["X_mean"]} if "X_mean" in arrays else {})
        return ModelData(ys, ns, arrays, coords, inv.astype(np.int64), intercept)
    return ModelData(y, n, arrays, coords, np.arange(y.shape[0], dtype=np.int64), intercept)


def _family(df: pd.DataFrame, family: str | None, response: str, succ: str, trials: str) -> str:
    if family is None:
        if response in df.columns:
            return "bernoulli"
        if succ in df.columns and trials in df.columns:
            return "binomial"
        raise InputError(
            f"no outcome: the data need a {response!r} column (0/1) or {succ!r} and "
            f"{trials!r} columns (binomial counts) ({describe_columns(df)}); map yours with "
            + hint("columns={'correct': ...} (or successes=..., trials=...)",
                   "--map correct=COLUMN (or --successes COLUMN --trials COLUMN)"))
    if family not in ("bernoulli", "binomial"):
        raise ValueError(f"family must be 'bernoulli' or 'binomial', got {family!r}")
    return family


def _required_variables(expr: str, what: str) -> set[str]:
    """Columns a fixed part or random-effect expression reads, after checking it is in the
    formula language (:func:`tomstats._expr.check_terms`; nothing else reaches formulaic)."""
    return set(check_terms(expr, what))


def formula_matrices(
    expr: str, train: pd.DataFrame, new: pd.DataFrame | None = None, what: str = "formula"
) -> tuple[np.ndarray, list[str]]:
    """Design matrix of ``expr`` (formulaic) on ``train``, or on ``new`` with ``train``'s spec.

    Categorical levels and stateful transforms (``center(x)``, ``scale(x)``) are learned
    from ``train``, so predictions use the same coding as the fit. ``expr`` is checked first
    (:func:`tomstats._expr.check_terms`) and formulaic evaluates it with
    :data:`tomstats._expr.FORMULA_CONTEXT` as its only namespace beyond the data.
    """
    import formulaic

    missing = sorted(_required_variables(expr, what) - set(map(str, train.columns)))
    if missing:
        raise InputError(f"{what} {expr!r} names column(s) {_missing_message(missing, train)} "
                         f"that are not in the data ({describe_columns(train)})")
    rows = len(train) if new is None else len(train) + len(new)
    check_footprint(design_footprint(expr, train, rows, what), flag=None)
    try:
        mm = formulaic.model_matrix(expr, train, na_action="raise", context=FORMULA_CONTEXT)
        if new is not None:
            mm = mm.model_spec.get_model_matrix(new, na_action="raise", context=FORMULA_CONTEXT)
    except Exception as exc:
        raise ValueError(f"{what} {expr!r}: {exc}") from exc
    X = np.asarray(mm, dtype=float)
    return X, [str(c) for c in mm.columns]


#: Bytes the formula engine holds per design-matrix cell: its frame of float64 columns and
#: the float64 array made of it.
_DESIGN_CELL_BYTES = 16


def design_columns(expr: str, df: pd.DataFrame, what: str = "formula") -> int:
    r"""An upper bound on the columns of the design matrix of ``expr`` on ``df``, before it is
    built.

    .. math:: \sum_{t} \prod_{f \in t} w_f

    over the terms :math:`t` of ``expr`` (:func:`tomstats._expr.expand_terms`) and the
    intercept (counted even where ``0 +`` removes it), with the width :math:`w_f` of a
    factor: 1 for a numeric column or a transform, the number of levels of a text, boolean or
    categorical column and of ``C(col)`` (of ``levels=[...]`` when given), the degree of
    ``poly``. (Full-rank coding drops a level where an intercept or a
    lower term spans it; the bound keeps them.)
    """
    expansion = expand_terms(expr, what)
    widths: dict[str, int] = {}
    for key, f in expansion.factors.items():
        if f.width is not None:
            widths[key] = f.width
        elif f.column is not None and f.column in df.columns:
            col = df[f.column]
            numeric = (pd.api.types.is_numeric_dtype(col)
                       and not pd.api.types.is_bool_dtype(col)) and f.kind == "column"
            widths[key] = 1 if numeric else max(int(col.nunique(dropna=True)), 1)
        else:
            widths[key] = 1
    total = 0 if frozenset() in expansion.terms else 1  # formulaic's implied intercept
    for term in expansion.terms:
        cols = 1
        for key in term:
            cols *= widths[key]
        total += cols
    return total


def design_footprint(expr: str, df: pd.DataFrame, rows: int, what: str = "formula"
                     ) -> Footprint:
    r"""The memory of the design matrix of ``expr`` for ``rows`` rows of ``df``'s columns:
    :math:`16 \cdot R \cdot C` bytes, :math:`C` from :func:`design_columns` (the formula
    engine's float64 frame and the array made of it), for
    :func:`tomstats._guards.check_footprint` before the formula engine starts."""
    cols = design_columns(expr, df, what)
    return Footprint(f"design matrix of the {what}", float(_DESIGN_CELL_BYTES) * rows * cols,
                     0.0, f"{rows:,} rows × at most {cols:,} columns of {expr!r}")


def formula_variables(spec: FormulaSpec) -> list[str]:
    """Data columns a formula spec reads (response, trials, predictors, groups)."""
    cols = [spec.response] + ([spec.trials] if spec.trials else [])
    cols += sorted(_required_variables(spec.fixed, "fixed part"))
    for t in spec.random:
        cols += sorted(_required_variables(t.expr, f"random term {t.label}"))
        cols += t.group.split(":")
    return list(dict.fromkeys(cols))


def check_outcome_varies(y: np.ndarray, n: np.ndarray | None, response: str,
                         trials: str | None = None) -> None:
    """Refuse an outcome without variance: every question right, or every one wrong.

    A logistic model learns its effects from the contrast between correct and wrong answers;
    with none, the likelihood is flat in every effect, each estimate is its prior, and the
    sampler's diagnostics pass all the same. Raises ``ValueError`` naming the column and its
    single value.
    """
    if y.size == 0:
        return
    if n is None:
        if np.all(y == y[0]):
            what = "correct" if y[0] == 1 else "wrong"
            raise ValueError(
                f"the outcome has no variance: column {response!r} is {int(y[0])} in all "
                f"{y.size} rows (every answer {what}); a logistic model cannot "
                f"estimate any effect from it (each estimate would be its prior). Fit a log "
                f"with both correct and wrong answers")
        return
    if np.all(y == 0) or np.all(y == n):
        value, what = ("0", "wrong") if np.all(y == 0) else (f"equal to {trials!r}", "correct")
        raise ValueError(
            f"the outcome has no variance: column {response!r} is {value} in all {y.size} "
            f"rows (every answer {what}); a logistic model cannot estimate any effect "
            f"from it (each estimate would be its prior). Fit data with both correct and wrong "
            f"answers")


_CALL = re.compile(r"\bC\(\s*([A-Za-z_][A-Za-z0-9_.]*)")


def _call_text(expr: str, start: int) -> str:
    """The text of the call opening at ``start`` (``C(x, Treatment(0))``), parentheses
    balanced."""
    depth = 0
    for i in range(start, len(expr)):
        if expr[i] == "(":
            depth += 1
        elif expr[i] == ")":
            depth -= 1
            if depth == 0:
                return expr[start:i + 1]
    return expr[start:]


def check_categorical_levels(expr: str, df: pd.DataFrame, what: str) -> None:
    """Refuse a categorical term whose column has a single value in the data.

    ``C(x)`` terms, and variables that are text, categorical or boolean (which formulaic
    codes as factors), need at least two levels: with one, the term's columns vanish from
    the design without a word. lme4 refuses such a factor too ("contrasts can be applied
    only to factors with 2 or more levels"). Raises ``ValueError`` naming the term and the
    single value.
    """
    terms: dict[str, str] = {}
    for m in _CALL.finditer(expr):
        terms.setdefault(m.group(1), _call_text(expr, m.start()))
    for var in _required_variables(expr, what):
        if var in df.columns and var not in terms:
            s = df[var]
            if not (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)):
                terms[var] = var
    for var, term in terms.items():
        if var not in df.columns:
            continue
        values = df[var].dropna().unique()
        if len(values) == 1:
            v = values[0]
            shown = f"{v:g}" if isinstance(v, (float, np.floating)) else repr(
                v.item() if hasattr(v, "item") else v)
            raise ValueError(
                f"{what}: the categorical term {term} has a single level in the data (column "
                f"{var!r} is {shown} in all {len(df)} rows); a factor needs at least two levels "
                f"and would be dropped from the model without a word (lme4 refuses it too). "
                f"Remove the term from the formula, or fit data with several levels")


def build_formula(
    formula: str, options: Mapping[str, Any], df: pd.DataFrame, family: str | None
) -> tuple[FormulaSpec, ModelData]:
    """Validate ``df`` for an lme4-style ``formula`` and build its spec and design."""
    opts = dict(options)
    response, trials, fixed, random = parse_formula(formula)
    trials = trials or opts.pop("trials", None)
    if trials is None and family == "binomial" and "trials" in df.columns:
        trials = "trials"
    opts.pop("trials", None)
    fam = "binomial" if trials else (family or "bernoulli")
    if family is not None and family != fam:
        raise InputError(f"{hint(f'family={family!r}', f'--family {family}')} but the "
                         f"formula {formula!r} implies {fam!r}")
    agg_opt = opts.pop("aggregate", "auto")
    spec = FormulaSpec(formula=formula, response=response, trials=trials, family=fam,
                       fixed=fixed, random=random, aggregate=False, **opts)
    missing = [c for c in formula_variables(spec) if c not in df.columns]
    if missing:
        raise InputError(f"formula {formula!r} names column(s) {_missing_message(missing, df)} "
                         f"that are not in the data ({describe_columns(df)}); "
                         f"{_rename_advice(missing, df)}")
    _no_nan(df, formula_variables(spec))
    y, n = response_arrays(df, response, trials, fam)
    check_outcome_varies(y, n, response, trials)
    check_categorical_levels(fixed, df, "fixed part")
    for t in random:
        check_categorical_levels(t.expr, df, f"random term {t.label}")
    X, names = formula_matrices(fixed, df, what="fixed part")
    if not np.all(np.isfinite(X)):
        bad = ~np.isfinite(X).all(axis=1)
        raise ValueError(f"fixed part {fixed!r} gives non-finite values (e.g. log of 0) in rows "
                         f"{_first_rows(bad)}")
    intercept = names.index("Intercept") if "Intercept" in names else None
    mean = np.zeros(X.shape[1])
    if spec.center and intercept is not None:
        mean = X.mean(axis=0)
        mean[intercept] = 0.0
    arrays: dict[str, np.ndarray] = {"X": X - mean, "X_mean": mean}
    coords: dict[str, list[str]] = {"coef": names}
    keys = [X]
    for t in random:
        g, levels = group_codes(_group_series(df, t.group))
        if len(levels) < 2:
            raise ValueError(f"grouping factor {t.group!r} of {t.label} has a single level "
                             f"({levels[0]!r}); a random effect needs at least two levels")
        if t.dim in coords and coords[t.dim] != levels:
            raise ValueError(f"dimension name clash for group {t.group!r}")
        Z, znames = formula_matrices(t.expr, df, what=f"random term {t.label}")
        if Z.shape[1] == 0:
            raise ValueError(f"random term {t.label} has no effects")
        arrays[f"Z_{t.key}"] = Z
        arrays[f"g_{t.key}"] = g
        coords[t.dim] = levels
        coords[f"{t.key}_effect"] = znames
        keys += [Z, g[:, None].astype(float)]
    priors = _formula_priors(spec, X, names, intercept)
    key_mat = np.column_stack(keys)
    agg = _resolve_aggregate(agg_opt, key_mat)
    spec = dataclasses.replace(spec, priors=priors, aggregate=agg)
    md = _finish(arrays, coords, y, n, key_mat, agg, intercept)
    return spec, md


def _formula_priors(spec: FormulaSpec, X: np.ndarray, names: list[str],
                    intercept: int | None) -> tuple:
    given = dict(spec.priors)
    known = {"Intercept", "beta", *names}
    for t in spec.random:
        known |= {f"sd_{t.key}", f"lkj_{t.key}"}
    bad = sorted(set(given) - known)
    if bad:
        raise ValueError(f"priors: unknown name(s) {bad}; known: {sorted(known)}")
    out = {}
    for i, name in enumerate(names):
        if i == intercept:
            out[name] = given.get("Intercept", normal(0.0, 2.5))
            continue
        if name in given:
            out[name] = given[name]
        elif "beta" in given:
            out[name] = given["beta"]
        else:
            sd = float(np.std(X[:, i]))
            out[name] = normal(0.0, 2.5 / sd if sd > 0 else 2.5)
        if out[name].dist != "normal":
            raise ValueError(f"priors[{name!r}]: fixed-effect priors must be normal, got "
                             f"{out[name]}")
    for t in spec.random:
        sd = given.get(f"sd_{t.key}", half_normal(1.0))
        if not sd.positive:
            raise ValueError(f"priors['sd_{t.key}'] must have positive support, got {sd}")
        out[f"sd_{t.key}"] = sd
        if t.correlated:
            lk = given.get(f"lkj_{t.key}", lkj(2.0))
            if lk.dist != "lkj":
                raise ValueError(f"priors['lkj_{t.key}'] must be lkj(eta), got {lk}")
            out[f"lkj_{t.key}"] = lk
    if intercept is not None:
        out["Intercept"] = out.pop(names[intercept])
    return tuple(out.items())


def build_design(
    model: str,
    df: pd.DataFrame,
    *,
    family: str | None = None,
    **options: Any,
) -> tuple[StructuralSpec | FormulaSpec, ModelData]:
    """Validate standardised data and build (spec, design) for ``model``.

    ``model`` is ``"structural"`` or an lme4-style formula; ``options`` are spec options
    (structural: ``item_effects``, ``random_slopes``, ``noncentered``, ``fixed``,
    ``priors``, ``alpha_scale``, ``delta_scale``, ``aggregate``; formula: ``priors``,
    ``noncentered``, ``center``, ``aggregate``, ``trials``).
    """
    check_type(model, str, "model", "'structural' or an lme4-style formula string")
    if len(df) == 0:
        raise ValueError("data has no rows")
    if model == "structural":
        allowed = ["item_effects", "random_slopes", "noncentered", "fixed", "priors",
                   "alpha_scale", "delta_scale", "aggregate", "hierarchical"]
        check_keys(options, allowed, "options of the structural model")
        for name in ("priors", "fixed"):
            if name in options:
                check_type(options[name], Mapping, name, "a mapping {name: value}")
        if "priors" in options:
            options = dict(options, priors=tuple(dict(options["priors"]).items()))
        if "fixed" in options:
            options = dict(options, fixed=tuple(dict(options["fixed"]).items()))
        return build_structural(options, df, family)
    if "~" in model:
        allowed = ["priors", "noncentered", "center", "aggregate", "trials"]
        check_keys(options, allowed, "options of a formula model")
        if "priors" in options:
            check_type(options["priors"], Mapping, "priors", "a mapping {name: Prior}")
            options = dict(options, priors=tuple(dict(options["priors"]).items()))
        return build_formula(model, options, df, family)
    raise ValueError(f"model must be 'structural' or an lme4-style formula "
                     f"'correct ~ ...', got {model!r}")
