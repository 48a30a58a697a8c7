"""The evaluation table: one reader of logs and tables, the ``--map`` renaming and the
``--query`` row filter, shared by ``summarize``, ``anova``, ``fit`` and ``report``.

:func:`read_evaluation` reads the runner's JSON Lines log (errors kept) or a CSV/TSV/parquet
table with one row per question; :func:`load_table` reads, filters (:func:`apply_query`, on the
file's own column names) and renames (:func:`apply_mapping`, ``{standard name: your column}``);
:func:`add_selection_arguments` and :func:`parse_mapping` are the command-line side of the
last two.
"""

from __future__ import annotations

import argparse
import codecs
import io
import os
import tempfile
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tomstats._expr import Query, parse_query, query_mask
from tomstats._validate import (
    check_input_size,
    closest_hint,
    closest_name,
    decode_text,
    read_input_bytes,
    show_value,
)
from tomstats.design import MAX_CONTEXT_WORDS

__all__ = ["MAP_NAMES", "POOLED", "STAND_INS", "TABLE_FORMATS", "add_selection_arguments",
           "apply_mapping", "apply_query", "by_columns", "outcome",
           "load_table", "parse_mapping", "read_evaluation", "require_column", "table_suffix",
           "used_columns"]


#: Suffixes of an evaluation log or table and the format each is read as (``.gz``: gzip).
#: Every command that reads one (``summarize``, ``anova``, ``fit``, ``report``) accepts these.
TABLE_FORMATS: dict[str, str] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".jsonl.gz": "jsonl",
    ".csv": "csv", ".csv.gz": "csv", ".tsv": "tsv", ".tsv.gz": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
}


def table_suffix(path: str | os.PathLike[str]) -> str:
    """The suffix that names a table's format: ``.csv``, or ``.csv.gz`` for a gzip file."""
    p = Path(path)
    return "".join(p.suffixes[-2:]).lower() if p.suffix.lower() == ".gz" else p.suffix.lower()


def _raw(p: Path) -> bytes:
    """The file's bytes, decompressed when its name ends in ``.gz``: read in pieces, within the
    memory budget and refused at the first NUL byte
    (:func:`tomstats._validate.read_input_bytes`)."""
    return read_input_bytes(p, gzip=p.suffix.lower() == ".gz")


def _read_log(p: Path, usecols: frozenset[str] | None) -> pd.DataFrame:
    """:func:`tomstats.evaluate.read_log` (errors kept) of a plain or gzip-compressed log,
    only the ``usecols`` of its columns (all with ``None``); a plain log is read as a stream
    (:func:`tomstats.analysis.log_stream.read_log_stream`)."""
    from tomstats.analysis.log_stream import read_log_stream
    from tomstats.evaluate.log import COLUMNS, read_log

    keep = None if usecols is None else [c for c in COLUMNS if c in usecols]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the callers count and report error records
        if p.suffix.lower() != ".gz":
            return read_log_stream(p, keep)
        text = decode_text(_raw(p), p)
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / p.name[: -len(".gz")]
            plain.write_text(text, encoding="utf-8")
            try:
                df = read_log(plain, errors="keep")
            except ValueError as exc:  # name the file the user gave, not the copy
                raise ValueError(str(exc).replace(str(plain), str(p))) from None
        return df if keep is None else df[keep]


def read_evaluation(source: str | os.PathLike[str] | pd.DataFrame,
                    usecols: Collection[str] | None = None,
                    optional: Collection[str] = ()) -> pd.DataFrame:
    """Read an evaluation log or table into a DataFrame, one row per question, errors kept.

    Parameters
    ----------
    source : path or pandas.DataFrame
        A suffix of :data:`TABLE_FORMATS`: ``.jsonl`` (also ``.ndjson``, ``.json``; the
        runner's log: :func:`tomstats.evaluate.read_log` with ``errors="keep"``, so error
        records are rows with ``correct`` missing and ``status = "error"``), ``.csv`` or
        ``.tsv`` (UTF-8) or ``.parquet``; ``.jsonl.gz``, ``.csv.gz`` and ``.tsv.gz`` are read
        through gzip. A DataFrame is copied.
    usecols : collection of str, optional
        Read only these columns and those of ``optional`` the file has (memory then grows
        with the columns a command uses, not with the file's); a file that lacks one of
        ``usecols`` is read whole, so that the command's message about it can name the
        closest column. All columns by default; a log's records are checked whole either way.
    optional : collection of str
        Columns read with ``usecols`` when the file has them.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        A malformed log, a file that is not UTF-8 (naming line and column), an unknown suffix.
    """
    if isinstance(source, pd.DataFrame):
        return source.copy()
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path or a pandas DataFrame, got "
                        f"{type(source).__name__}")
    p = Path(source)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation log {str(p)!r} does not exist"
                                + (" (it is a folder)" if p.is_dir() else ""))
    if usecols is not None:
        # context_words always (when there): a table's values are checked on reading
        wanted = frozenset(usecols) | frozenset(optional) | {"context_words"}
        df = _read_file(p, wanted)
        if set(usecols) <= set(df.columns):
            return df
        del df  # a column is missing: the whole file, for the command's message
    return _read_file(p, None)


def _read_file(p: Path, usecols: frozenset[str] | None) -> pd.DataFrame:
    """:func:`read_evaluation` of the file ``p``: ``usecols`` of its columns, or all."""
    suffix = table_suffix(p)
    kind = TABLE_FORMATS.get(suffix)
    if kind == "jsonl":
        return _read_log(p, usecols)
    if kind in ("csv", "tsv"):
        raw = _raw(p)
        text = decode_text(raw, p)  # a file that is not UTF-8: line and column named
        sep = "," if kind == "csv" else "\t"
        _check_header(text, sep, p)
        # the bytes, not the text, go to the parser (a text buffer holds 4 bytes a character)
        buffer = io.StringIO(text) if raw.startswith(codecs.BOM_UTF8) else io.BytesIO(raw)
        del text
        if usecols is not None and not _rows_fit_header(raw, sep):
            usecols = None  # only the whole read refuses a row longer than the header
        try:
            df = pd.read_csv(buffer, sep=sep, encoding="utf-8",
                             usecols=None if usecols is None else usecols.__contains__)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise ValueError(f"{p}: cannot read as {kind}: "
                             f"{' '.join(str(exc).split())}") from None
        if df.shape[1] == 0:
            return df  # none of usecols is in the file: read_evaluation reads it whole
        if len(df) == 0:
            raise ValueError(f"{p}: the table has a header but no rows (one row per question "
                             "is expected)")
        check_context_words(df, str(p))
        return df
    if kind == "parquet":
        try:
            import pyarrow  # noqa: F401 - pandas' parquet engine
        except ImportError:
            raise ValueError(f"{p}: reading .parquet needs pyarrow, which tomstats does not "
                             "install by default: pip install 'tomstats[parquet]' (or save "
                             "the table as .csv)") from None
        check_input_size(p, p.stat().st_size)
        try:
            df = pd.read_parquet(p)  # all columns: the schema is not read apart
        except (OSError, ValueError) as exc:
            raise ValueError(f"{p}: cannot read as parquet: {' '.join(str(exc).split())}"
                             ) from None
        check_context_words(df, str(p))
        return df
    raise ValueError(f"{p}: unknown format {suffix or '(no suffix)'!r}; expected an evaluation "
                     f"log or table: {', '.join(TABLE_FORMATS)}")


def _rows_fit_header(raw: bytes, sep: str, block: int = 1 << 25) -> bool:
    """Whether no line of the table ``raw`` holds more separators than its first line, the
    file holding no quote (``"``) either.

    pandas refuses a row with more fields than the header only when it reads every column;
    reading some of them (``usecols``) it drops the extra fields without a word. Counted with
    NumPy, a block of lines at a time; ``False`` (read every column) when unsure.
    """
    if b'"' in raw:
        return False
    s = sep.encode()
    end = raw.find(b"\n")
    limit = (raw if end < 0 else raw[:end]).count(s)
    data = np.frombuffer(raw, dtype=np.uint8)
    start = 0
    while start < len(raw):
        stop = raw.find(b"\n", min(start + block, len(raw)))
        stop = len(raw) if stop < 0 else stop + 1
        chunk = data[start:stop]
        ends = np.append(np.flatnonzero(chunk == ord("\n")), len(chunk))
        per_line = np.diff(np.searchsorted(np.flatnonzero(chunk == s[0]), ends), prepend=0)
        if per_line.max() > limit:
            return False
        start = stop
    return True


def _check_header(text: str, sep: str, p: Path) -> None:
    """Refuse a header that names one column twice (pandas would rename the second ``x.1``
    and every command would use the first without a word)."""
    import csv

    first = next(csv.reader(io.StringIO(text.split("\n", 1)[0]), delimiter=sep), [])
    seen: dict[str, int] = {}
    for i, name in enumerate(first, 1):
        if name in seen:
            raise ValueError(f"{p}: column {name!r} appears twice in the header (columns "
                             f"{seen[name]} and {i}); rename one of them")
        seen[name] = i


def check_context_words(df: pd.DataFrame, where: str) -> None:
    """Refuse a numeric ``context_words`` column holding a value that is not finite, negative
    or above :data:`MAX_CONTEXT_WORDS` (``1e308`` words is a typo, and overflows later),
    naming the row and the value."""
    if "context_words" not in df.columns:
        return
    col = pd.to_numeric(df["context_words"], errors="coerce")
    if not pd.api.types.is_numeric_dtype(df["context_words"]):
        return  # not numbers: the commands say so with their own message
    bad = col.notna() & ~col.between(0, MAX_CONTEXT_WORDS)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{where}: context_words must be a finite number of words from 0 to "
                         f"{MAX_CONTEXT_WORDS:.0e}, got {col.iloc[i]:g} in row {i + 1}")


def apply_mapping(df: pd.DataFrame, columns: Mapping[str, str] | None,
                  where: str = "--map") -> pd.DataFrame:
    """Copy ``df`` with ``columns`` (``{standard name: your column}``) renamed to the standard.

    The convention of ``tomstats fit --map`` (:func:`tomstats.analysis.table.parse_mapping`): each
    standard column (``correct``, ``model``, ``item``, ``tom_order``, ``context_words``,
    ``error_category`` …) is filled from the named column. An unknown column raises
    ``ValueError`` with the closest existing name.
    """
    out = df.copy(deep=False)  # new columns only: the data are shared, never changed
    for std, src in (columns or {}).items():
        if src not in df.columns:
            raise ValueError(f"{where} {std}={src}: no column {src!r} in the data"
                             f"{closest_hint(src, map(str, df.columns))}")
        if std != src:
            out[std] = df[src]
            if std == "context_words":
                check_context_words(out, f"{where} {std}={src}")
    if "item" not in out.columns and "item_id" in out.columns:
        out["item"] = out["item_id"]
    return out


def apply_query(df: pd.DataFrame, query: str | Query | None,
                field: str = "--query") -> pd.DataFrame:
    """Rows of ``df`` satisfying ``query``, a condition on its own column names (``attrs``
    kept).

    The query is a small language, never run as Python (:func:`tomstats._expr.query_mask`):
    column names, literals, comparisons, ``in`` a list, ``and``/``or``/``not``, arithmetic and
    a few functions such as ``log``.

    Raises
    ------
    ValueError
        A query outside that language or naming an unknown column (with the closest one),
        one that is not a condition, or one that keeps no rows.
    """
    if not query:
        return df
    attrs = dict(df.attrs)
    text = query.text if isinstance(query, Query) else query
    out = df.loc[query_mask(df, query, field).to_numpy()]
    if len(out) == 0:
        raise ValueError(f"{field} {text!r} keeps no rows")
    out = out.reset_index(drop=True)
    out.attrs.update(attrs)
    return out


#: Value of the ``by`` column on the rows of a pooled table (``tomstats anova --by``, the
#: adjusted ToM effect of :mod:`tomstats.analysis.ladders`).
POOLED = "(pooled)"

#: Standard grouping names and the log's own column that stands in for each when the data
#: lack it (the GLMM's ``item`` and ``story``; :func:`tomstats.glmm.prepare_data`).
STAND_INS: dict[str, str] = {"item": "item_id", "story": "story_id"}

#: The standard names ``--map STANDARD=COLUMN`` gives a column of ``summarize``, ``anova`` and
#: ``report`` (their ``--map`` refuses any other name on the left).
MAP_NAMES = ("correct", "model", "tom_order", "context_words")


def require_column(df: pd.DataFrame, col: str, what: str,
                   standard: Collection[str] = MAP_NAMES) -> None:
    """Raise ``ValueError`` naming ``col`` (and the closest column) when it is missing.

    A standard name (in ``standard``) is followed by the mapping that gives it a column, the
    right way round: ``--map correct=is_correct`` (the closest column) or ``--map
    correct=COLUMN``. Any other name is a column of the user's own, so a typo gets only the
    closest column (``--map`` cannot rename it).
    """
    if col in df.columns:
        return
    known = [str(c) for c in df.columns]
    text = f"{what}: no column {col!r} in the data{closest_hint(col, known)}"
    if col in standard:
        text += f"; map yours to it with --map {col}={closest_name(col, known) or 'COLUMN'}"
    raise ValueError(text)


def load_table(path: str | os.PathLike[str] | pd.DataFrame, columns: dict[str, str] | None = None,
               query: str | None = None, *, needed: Collection[str] | None = None,
               optional: Collection[str] = ()) -> pd.DataFrame:
    """Read a log or table (:func:`tomstats.analysis.table.read_evaluation`), filter, rename.

    ``query`` (a condition on the file's own column names, like ``tomstats fit --query``;
    checked before the file is read) is applied before the ``columns`` mapping. With
    ``needed`` (standard names the command uses; ``optional``: those it uses when present),
    only the file's columns behind them are read (:func:`used_columns`).
    """
    checked = parse_query(query) if query else None
    if needed is None:
        df = read_evaluation(path)
    else:
        usecols, maybe = used_columns(columns, checked, needed, optional)
        df = read_evaluation(path, usecols, maybe)
    return apply_mapping(apply_query(df, checked), columns)


def used_columns(columns: Mapping[str, str] | None, query: Query | None,
                 needed: Collection[str], optional: Collection[str] = ()
                 ) -> tuple[set[str], set[str]]:
    """The file's columns a command reads: ``(required, optional)``.

    Required: the columns ``--map`` (``columns``, ``{standard: file column}``) names, the
    query's, and the file's column behind each ``needed`` standard name; optional: those
    behind ``optional`` (and ``item_id`` and ``story_id``, which stand in for a missing
    ``item`` and ``story``).
    """
    m = dict(columns or {})
    req = {m.get(c, c) for c in needed} | set(m.values())
    if query is not None:
        req |= set(query.variables)
    maybe = {m.get(c, c) for c in optional}
    for std, own in STAND_INS.items():
        if std in {*needed, *optional} and std not in m:
            maybe.add(own)
    return req, maybe - req


def parse_mapping(items: list[str] | None,
                  standard: Sequence[str] | None = None) -> dict[str, str]:
    """``["correct=is_correct,model=run_dir", ...]`` → ``{"correct": "is_correct", ...}``.

    With ``standard``, a name left of ``=`` that is not one of them is refused with the
    closest one (a typo would otherwise leave the standard column unmapped without a word).
    """
    out: dict[str, str] = {}
    for item in items or []:
        for pair in item.split(","):
            pair = pair.strip()
            if not pair:
                continue
            if pair.count("=") != 1 or not all(s.strip() for s in pair.split("=")):
                raise ValueError(f"--map: expected STANDARD=COLUMN pairs, got {pair!r}")
            k, v = (s.strip() for s in pair.split("="))
            if standard is not None and k not in standard:
                raise ValueError(f"--map {k}={v}: {k!r} is not a standard name"
                                 f"{_mapping_hint(k, v, standard)}")
            out[k] = v
    return out


def _mapping_hint(k: str, v: str, standard: Sequence[str]) -> str:
    """What ``--map k=v`` (``k`` not a standard name) was meant to be, written the right way
    round: ``--map STANDARD=COLUMN`` with the standard name on the left (the pair reversed
    when ``v`` is the standard name, else the standard name closest to ``k``)."""
    near = v if v in standard else closest_name(k, standard)
    if near is None:
        return f" (the standard names: {', '.join(standard)}; --map STANDARD=COLUMN)"
    column = k if v in standard else v
    return f" (did you mean --map {near}={column}? it is --map STANDARD=COLUMN)"


class _MapAction(argparse.Action):
    """``--map`` (appending): each value is checked against the command's standard names
    while the command line is parsed, before any work."""

    def __init__(self, *args: Any, standard: Sequence[str] = (), **kwargs: Any) -> None:
        self.standard = tuple(standard)
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        try:
            parse_mapping([values], self.standard)
        except ValueError as exc:
            parser.error(str(exc))
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


def add_selection_arguments(p: argparse.ArgumentParser, standard: Sequence[str],
                            scope: str = "", *, as_in_fit: bool = True) -> None:
    """``--map`` (:func:`parse_mapping`, its standard names checked) and ``--query``
    (:func:`tomstats.analysis.table.apply_query`): the column mapping and row filter shared by
    ``fit``, ``summarize``, ``anova`` and ``report``; ``scope`` prefixes the help text."""
    p.add_argument("--map", action=_MapAction, standard=standard, metavar="STD=COL,...",
                   help=f"{scope}rename columns to the standard names ({', '.join(standard)})"
                        + (", as in tomstats fit" if as_in_fit else ""))
    p.add_argument("--query", metavar="EXPR",
                   help=f"{scope}keep only rows where a condition on the file's own columns "
                        "holds, e.g. \"experiment == 'triplets' and tom_order >= 1\" "
                        "(columns, literals, comparisons, in [...], and/or/not, arithmetic, "
                        "log/exp/sqrt/abs; nothing else)")


def outcome(df: pd.DataFrame, dv: str = "correct", *, binary: bool = True,
            allow_missing: bool = True) -> pd.Series:
    """The outcome column as float (NaN where missing), checked; errors name row and value.

    ``binary`` requires 0/1 (``True``/``False`` read as 1/0); without ``allow_missing`` a
    missing value is an error.
    """
    require_column(df, dv, "outcome")
    col = df[dv]
    if pd.api.types.is_bool_dtype(col):
        col = col.astype("Int64")
    num = pd.to_numeric(col, errors="coerce")
    bad = num.isna() & col.notna()
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise ValueError(f"column {dv!r} must be numeric, found {show_value(col.iloc[i])} in "
                         f"row {i}")
    y = num.astype(float)
    if not allow_missing and y.isna().any():
        i = int(np.argmax(y.isna().to_numpy()))
        raise ValueError(f"column {dv!r} has {int(y.isna().sum())} missing value(s) (NaN), "
                         f"e.g. in row {i}; drop them (unanswered questions are counted by "
                         "tomstats summarize)")
    finite = y.dropna()
    if not np.isfinite(finite.to_numpy()).all():
        i = int(np.argmax(~np.isfinite(y.to_numpy()) & y.notna().to_numpy()))
        raise ValueError(f"column {dv!r} has an infinite value in row {i}")
    if binary:
        wrong = y.notna() & ~y.isin((0.0, 1.0))
        if wrong.any():
            i = int(np.argmax(wrong.to_numpy()))
            raise ValueError(f"column {dv!r} must be 0/1 (correct or not), found "
                             f"{show_value(col.iloc[i])} in row {i}")
    return y


def by_columns(df: pd.DataFrame, by: str | Sequence[str] | None) -> list[str]:
    """The grouping columns of a summary: ``by`` checked (present, not a cell factor, none
    twice); ``None``: ``["model"]`` when the table has it, else none."""
    if by is None:
        return ["model"] if "model" in df.columns else []
    cols = [by] if isinstance(by, str) else list(by)
    for c in cols:
        require_column(df, c, "by")
        if c in ("context_words", "tom_order"):
            raise ValueError(f"by: {c!r} is already a cell factor (context_words × tom_order)")
    if len(set(cols)) != len(cols):
        raise ValueError(f"by names a column twice: {cols}")
    return cols
