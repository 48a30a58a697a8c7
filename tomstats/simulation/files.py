"""The files of a simulation folder, named once: what ``tomstats reproduce``/``simulate`` and a
calibrated sweep write, their columns, and the readers that check them.

A ``tomstats reproduce`` (or ``tomstats simulate CONFIG``) folder holds :data:`TABLE1`,
:data:`DECOMPOSITION`, :data:`CELLS`, :data:`SENSITIVITY` and :data:`SUMMARY`
(:data:`SIMULATION_FILES`); a calibrated sweep (``--posterior FIT.nc``) holds
:data:`DECOMPOSITION_POSTERIOR`, :data:`DOMINANCE_POSTERIOR` and :data:`SUMMARY`
(:data:`POSTERIOR_FILES`). :func:`read_simulation_dir` and :func:`read_posterior_dir` read
them, checking each table's columns with :func:`require_columns`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "CELLS", "CELLS_COLUMNS", "DECOMPOSITION", "DECOMPOSITION_COLUMNS",
    "DECOMPOSITION_POSTERIOR", "DOMINANCE_POSTERIOR", "POSTERIOR_DECOMPOSITION_COLUMNS",
    "POSTERIOR_DOMINANCE_COLUMNS", "POSTERIOR_FILES", "SENSITIVITY", "SENSITIVITY_COLUMNS",
    "SIMULATION_FILES", "SUMMARY", "TABLE1", "TABLE1_COLUMNS", "read_posterior_dir",
    "read_simulation_dir", "require_columns",
]

TABLE1 = "table1.csv"
DECOMPOSITION = "decomposition.csv"
CELLS = "cells.csv"
SENSITIVITY = "sensitivity.csv"
SUMMARY = "summary.json"
DECOMPOSITION_POSTERIOR = "decomposition_posterior.csv"
DOMINANCE_POSTERIOR = "dominance_posterior.csv"
#: Files a ``tomstats reproduce`` or ``tomstats simulate CONFIG`` folder holds.
SIMULATION_FILES = (TABLE1, DECOMPOSITION, CELLS, SENSITIVITY, SUMMARY)
#: Files ``tomstats simulate CONFIG --posterior FIT.nc --out DIR`` writes.
POSTERIOR_FILES = (DECOMPOSITION_POSTERIOR, DOMINANCE_POSTERIOR, SUMMARY)

TABLE1_COLUMNS = ("factor", "pct_total", "sd_pct", "eta2", "partial_eta2", "F")


CELLS_COLUMNS = ("capability", "context_length", "tom_order", "accuracy", "ci_low", "ci_high")


DECOMPOSITION_COLUMNS = ("capability", "factor", "pct_total", "pct_total_low",
                         "pct_total_high")


SENSITIVITY_COLUMNS = ("gamma", "alpha", "tom_share", "tom_share_low", "tom_share_high",
                       "dominant")


POSTERIOR_DECOMPOSITION_COLUMNS = ("llm", "source", "eta2_mean", "eta2_low", "eta2_high")


POSTERIOR_DOMINANCE_COLUMNS = ("gamma", "alpha", "tom_share_mean", "tom_share_low",
                               "tom_share_high", "p_dominant")






#: Columns holding labels rather than numbers.
_TEXT_COLUMNS = ("factor", "llm", "source", "kind", "along", "test")


def require_columns(df: Any, columns: Iterable[str], name: str) -> pd.DataFrame:
    """Check ``df`` is a non-empty DataFrame holding ``columns`` (numeric where needed)."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; has {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{name}: table has no rows")
    for c in columns:
        if c in _TEXT_COLUMNS:
            continue
        values = pd.to_numeric(df[c], errors="coerce")
        bad = df[c][values.isna() & df[c].notna()]
        if len(bad):
            raise ValueError(f"{name}: column {c!r} must be numeric, got {bad.iloc[0]!r}")
    return df


def read_simulation_dir(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``tomstats reproduce`` folder.

    Returns
    -------
    dict
        ``table1``, ``decomposition``, ``cells``, ``sensitivity`` (DataFrames) and
        ``summary`` (the parsed ``summary.json``).

    Raises
    ------
    ValueError
        If ``out_dir`` is not a folder, or lacks one of the files ``reproduce`` writes, or a
        file cannot be parsed; the message names the folder and the file.
    """
    d = Path(out_dir)
    if not d.is_dir():
        raise ValueError(f"simulation folder {str(d)!r} does not exist or is not a folder")
    missing = [f for f in SIMULATION_FILES if not (d / f).is_file()]
    if len(missing) == len(SIMULATION_FILES):
        raise ValueError(f"simulation folder {str(d)!r} is not a tomstats reproduce output: "
                         f"none of {list(SIMULATION_FILES)} is there (nor a calibrated "
                         f"sweep's {list(POSTERIOR_FILES[:2])})")
    if missing:
        raise ValueError(f"simulation folder {str(d)!r} is incomplete: missing {missing}")
    out: dict[str, Any] = {}
    for f in SIMULATION_FILES[:-1]:
        try:
            out[f.removesuffix(".csv")] = pd.read_csv(d / f)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"simulation folder {str(d)!r}: cannot read {f}: {exc}") from exc
    try:
        summary = json.loads((d / SUMMARY).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"simulation folder {str(d)!r}: summary.json is not JSON: {exc}") from exc
    if not isinstance(summary, dict):
        raise ValueError(f"simulation folder {str(d)!r}: summary.json must hold an object")
    out["summary"] = summary
    require_columns(out["table1"], TABLE1_COLUMNS, TABLE1)
    require_columns(out["decomposition"], DECOMPOSITION_COLUMNS, DECOMPOSITION)
    require_columns(out["cells"], CELLS_COLUMNS, CELLS)
    require_columns(out["sensitivity"], SENSITIVITY_COLUMNS, SENSITIVITY)
    return out


def read_posterior_dir(
    out_dir: str | os.PathLike[str],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Read a calibrated sweep folder (``tomstats simulate CONFIG --posterior FIT.nc``).

    Returns
    -------
    decomposition, dominance : pandas.DataFrame
        ``decomposition_posterior.csv`` and ``dominance_posterior.csv``.
    summary : dict
        The parsed ``summary.json``.

    Raises
    ------
    ValueError
        If a file is missing or unreadable or lacks the columns the figures need; the
        message names the folder and the file.
    """
    d = Path(out_dir)
    if not d.is_dir():
        raise ValueError(f"calibrated sweep folder {str(d)!r} does not exist or is not a "
                         "folder")
    missing = [f for f in POSTERIOR_FILES if not (d / f).is_file()]
    if missing:
        raise ValueError(f"calibrated sweep folder {str(d)!r} is incomplete: missing {missing}")
    tables = []
    for f, cols in zip(POSTERIOR_FILES[:2], (POSTERIOR_DECOMPOSITION_COLUMNS,
                                             POSTERIOR_DOMINANCE_COLUMNS), strict=True):
        try:
            df = pd.read_csv(d / f)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"calibrated sweep folder {str(d)!r}: cannot read {f}: "
                             f"{exc}") from exc
        tables.append(require_columns(df, cols, f))
    try:
        summary = json.loads((d / SUMMARY).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"calibrated sweep folder {str(d)!r}: summary.json is not JSON: "
                         f"{exc}") from exc
    if not isinstance(summary, dict):
        raise ValueError(f"calibrated sweep folder {str(d)!r}: summary.json must hold an "
                         "object")
    return tables[0], tables[1], summary
