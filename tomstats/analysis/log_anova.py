"""The simulation paper's ANOVA table for a real evaluation log (``tomstats anova``).

:func:`log_anova` reads a log or table (:func:`tomstats.analysis.table.read_evaluation`),
leaves out runner error records, checks every factor, cell and subject before any work, and
runs :func:`tomstats.analysis.row_anova.anova` pooled over the LLMs and, with ``by``, per
group: the two-way ANOVA context length × ToM order of the binary outcome with η², partial η²,
ω², partial ω² and generalized η² by default; ``within``/``subject`` give the
repeated-measures form (LLMs as subjects), ``ci`` intervals (noncentral F for η² and partial
η² by default, ``interval="bca"`` the cluster bootstrap for all five).
:func:`format_anova` prints the table.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import show_value
from tomstats.analysis.row_anova import EFFECT_SIZES, anova, check_interval, check_levels
from tomstats.analysis.summary import outcome
from tomstats.analysis.table import apply_mapping, read_evaluation, require_column

__all__ = ["DEFAULT_BETWEEN", "DEFAULT_INTERVAL", "EFFECT_SIZES", "POOLED", "anova_notes",
           "format_anova", "log_anova"]

#: Factors of the default analysis: the paper's two-way design.
DEFAULT_BETWEEN: tuple[str, str] = ("context_words", "tom_order")
#: Value of the ``--by`` column on the rows of the pooled table.
POOLED = "(pooled)"
#: The interval the log tables show by default (``tomstats anova --ci``, the log report):
#: the noncentral-F interval of partial η² and η², with the design effect of the clusters.
#: Chosen by ``benchmarks/bench_eta2_intervals.py`` (docs/anova.md): it covers a true 0 and
#: small and moderate effects, with independent and with clustered rows, where the bootstrap's
#: BCa interval never covers a true 0.
DEFAULT_INTERVAL = "ncf"


# --------------------------------------------------------------------------- shared input


# --------------------------------------------------------------------------- summarize


# --------------------------------------------------------------------------- anova


def _as_list(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _check_design(df: pd.DataFrame, between: list[str], within: list[str],
                  subject: str | None, where: str) -> None:
    """One-level factors (:func:`~tomstats.analysis.row_anova.check_levels`) and empty cells
    (and subjects missing a within cell), named, before any table is computed."""
    factors = between + within
    levels = {f: lv for f, (lv, _codes) in zip(factors, check_levels(df, factors, where),
                                               strict=True)}
    present = set(map(tuple, df[factors].drop_duplicates().itertuples(index=False, name=None)))
    for combo in itertools.product(*(levels[f] for f in factors)):
        if combo not in present:
            cell = ", ".join(f"{f}={show_value(v)}" for f, v in zip(factors, combo, strict=True))
            raise ValueError(f"empty cell: no rows with {cell}{where}; every factor "
                             "combination needs data")
    if within and subject is not None:
        cells = list(itertools.product(*(levels[f] for f in within)))
        for name, sub in df.groupby(subject, sort=True):
            have = set(map(tuple, sub[within].drop_duplicates().itertuples(index=False,
                                                                          name=None)))
            lacking = [c for c in cells if c not in have]
            if lacking:
                cell = ", ".join(f"{f}={show_value(v)}" for f, v in zip(within, lacking[0],
                                                                    strict=True))
                more = (f" (and {len(lacking) - 1} more of the {len(cells)} within cells)"
                        if len(lacking) > 1 else "")
                raise ValueError(f"subject {subject}={show_value(name)} has no rows with {cell}"
                                 f"{more}{where}; a repeated-measures ANOVA needs every "
                                 "subject in every within cell")


def log_anova(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    dv: str = "correct",
    between: str | Sequence[str] | None = None,
    within: str | Sequence[str] | None = None,
    subject: str | None = None,
    by: str | None = None,
    ss_type: int = 2,
    ci: float | None = None,
    n_boot: int = 2000,
    cluster: str | None = None,
    seed: int = 0,
    columns: dict[str, str] | None = None,
    interval: str = DEFAULT_INTERVAL,
    paired: bool = False,
) -> pd.DataFrame:
    """The paper's ANOVA table for an evaluation log: pooled and, with ``by``, per group.

    Parameters
    ----------
    data : path or pandas.DataFrame
        Evaluation log or table, one row per question (see
        :func:`tomstats.analysis.table.read_evaluation`). Runner error records (``status =
        "error"``: no answer) are left out; :func:`tomstats.analysis.summary.summarize` counts them.
    dv : str, default ``"correct"``
        Outcome column; ``"correct"`` must be 0/1 (``binary=True``), others any number.
    between, within : str or sequence of str, optional
        Factors. Without either, ``between = ("context_words", "tom_order")`` (the paper's
        two-way design). With ``within`` (repeated measures on the cell means of each
        subject), ``subject`` defaults to ``"model"``.
    subject : str, optional
        The subject column of a repeated-measures design (the LLM). Without ``within`` the
        rows are averaged per subject first and the between factors compared on those means
        (each subject needs one level of every between factor).
    by : str, optional
        Also one table per value of this column (e.g. ``"model"``), before the pooled one.
    ss_type : {1, 2, 3}
        Type of sums of squares.
    ci : float, optional
        Coverage of the intervals (see ``interval``).
    cluster : str, optional
        The clusters of rows (stories, items): the resampling unit of the bootstrap, and the
        unit of the design effect of the noncentral-F interval; default ``story_id``, else
        ``item_id``/``item`` when the data have it (else rows, taken as independent).
    columns : mapping, optional
        ``{standard name: your column}`` (the ``--map`` convention of ``tomstats fit``).
    interval : {"ncf", "bca"}, default :data:`DEFAULT_INTERVAL` (``"ncf"``)
        With ``ci``: noncentral-F intervals of partial η² (and η² in a between design), no
        bootstrap; or cluster-bootstrap BCa intervals of every effect size (``n_boot``
        resamples of ``cluster``, seeded by ``seed``). See
        :func:`tomstats.analysis.row_anova.anova`.
    paired : bool, default False
        The rows are paired units (:func:`tomstats.analysis.paired.paired_units`: one per
        model × ``pair_id`` × ToM order, right only when every version of the pair is), not
        questions; incomplete units are left out (``attrs["n_incomplete"]`` counts them). The
        default cluster is then the pair.

    Returns
    -------
    pandas.DataFrame
        :func:`tomstats.analysis.row_anova.anova`'s columns; with ``by``, a first column named
        after it holding the group, ``"(pooled)"`` on the pooled table's rows.
    """
    check_interval(interval)
    df = apply_mapping(read_evaluation(data), columns)
    between_l, within_l = _as_list(between), _as_list(within)
    if not between_l and not within_l:
        between_l = list(DEFAULT_BETWEEN)
    subject_default = bool(within_l) and subject is None
    if subject_default:
        subject = "model"
    factors = between_l + within_l
    seen: set[str] = set()
    for f in factors:
        if f in seen:
            where = ("--between and --within" if f in between_l and f in within_l
                     else "--within" if f in within_l else "--between")
            raise ValueError(f"factor {f!r} is named twice ({where})")
        seen.add(f)
    if dv in seen:
        raise ValueError(f"--dv {dv!r} is also a factor")
    for f in factors:
        require_column(df, f, "factor")
    if subject is not None:
        require_column(df, subject, "--subject")
        if subject in seen:
            default = " (the default with --within)" if subject_default else ""
            raise ValueError(f"--subject {subject!r}{default} is also a factor; name the "
                             "subject column with --subject COL")
    if by is not None:
        require_column(df, by, "--by")
        if by in seen or by == dv:
            raise ValueError(f"--by {by!r} is also a factor or the outcome; a table per "
                             f"{by!r} value cannot have it as a factor")
        if by == subject:
            raise ValueError(f"--by {by!r} is also the --subject of the repeated-measures "
                             "design; one table per subject has no subjects to compare")
    require_column(df, dv, "--dv")
    pairing: dict[str, Any] = {}
    if paired:
        from tomstats.analysis.paired import paired_units, unit_keys

        keys = unit_keys(df)
        extra = [c for c in [*factors, *([subject] if subject else []), *([by] if by else []),
                             *([cluster] if cluster else [])]
                 if c not in keys and c not in ("story_id", "item_id", "item")]
        df = paired_units(df, dv=dv, keep=list(dict.fromkeys(extra)))
        pairing = {k: df.attrs[k] for k in ("n_units", "n_incomplete", "incomplete_by_reason",
                                            "n_unpaired_rows")}
    if "status" in df.columns:
        df = df[df["status"].astype("string").fillna("ok").ne("error").to_numpy()]
        df = df.reset_index(drop=True)
        if len(df) == 0:
            raise ValueError("the log holds no answered questions (every record is an error)")
    y = outcome(df, dv, binary=dv == "correct", allow_missing=False)
    df = df.assign(**{dv: y})
    for c in [*factors, *([subject] if subject else []), *([by] if by else [])]:
        na = df[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"column {c!r} has a missing value in row {int(np.argmax(na))}")

    kwargs: dict[str, Any] = {"ss_type": ss_type, "binary": dv == "correct",
                              "within": within_l or None, "subject": subject}
    if ci is not None:
        if isinstance(ci, bool) or not 0 < float(ci) < 1:
            raise ValueError(f"--ci must be in (0, 1), got {ci!r}")
        if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 1:
            raise ValueError(f"--n-boot must be a positive integer, got {n_boot!r}")
        if cluster is None:
            cluster = next((c for c in ("story_id", "item_id", "item") if c in df.columns),
                           None)
        else:
            require_column(df, cluster, "--cluster")
        kwargs.update(ci=float(ci), n_boot=int(n_boot), seed=int(seed), cluster=cluster,
                      interval=interval)
    groups: list[tuple[Any, pd.DataFrame, str]] = []
    if by is not None:
        for value, sub in df.groupby(by, sort=True):
            groups.append((value, sub.reset_index(drop=True), f" (in {by}={show_value(value)})"))
    groups.append((POOLED, df, ""))
    for _value, sub, where in groups:  # every check before any work
        _check_design(sub, between_l, within_l, subject, where)
    tables = []
    for value, sub, where in groups:
        try:
            tab = anova(sub, dv, between_l or None, **kwargs)
        except ValueError as exc:  # the engine's own checks: say which table
            raise ValueError(f"{' '.join(str(exc).split())}{where}") from None
        if by is not None:
            tab.insert(0, by, value if value == POOLED else str(value))
        deff = tab.attrs.get("design_effect")  # the last table's: the pooled one
        tab.attrs = {}
        tables.append(tab)
    out = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    out.attrs.update({"n_rows": len(df), "dv": dv, "between": between_l, "within": within_l,
                      "subject": subject, "by": by, "cluster": kwargs.get("cluster"),
                      "ci": kwargs.get("ci"),
                      "n_boot": kwargs.get("n_boot") if interval == "bca" else None,
                      "interval": interval if ci is not None else None,
                      "design_effect": deff, "paired": bool(paired), **pairing})
    return out


def format_anova(table: pd.DataFrame) -> str:
    """The ANOVA table as text: sources, SS, DF, MS, F, p (as pingouin and statsmodels print
    them) and each effect size (with its interval)."""
    def num(v: Any, fmt: str) -> str:
        return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt.format(v)

    show = pd.DataFrame({"source": table["source"]})
    repeated = "eps_gg" in table.columns  # error DF differs by effect only with within factors
    for c in ("SS", "DF", "MS", "DF_error", "F"):
        if c in table.columns and (c != "DF_error" or repeated):
            show[c] = [num(v, "{:.4g}") for v in table[c]]
    if "p" in table.columns:
        show["p"] = [num(v, "{:.3g}") for v in table["p"]]
    for c in EFFECT_SIZES:
        if c not in table.columns:
            continue
        cells = [num(v, "{:.4f}") for v in table[c]]
        if f"{c}_low" in table.columns:  # no interval on a row (ncf: Residual): the value
            cells = [s if s == "—" or (pd.isna(lo) and pd.isna(hi))
                     else f"{s} [{num(lo, '{:.4f}')}, {num(hi, '{:.4f}')}]"
                     for s, lo, hi in zip(cells, table[f"{c}_low"], table[f"{c}_high"],
                                          strict=True)]
        show[c] = cells
    if repeated and table["eps_gg"].notna().any():  # sphericity: only with within effects
        for c in ("eps_gg", "p_gg", "p_hf", "mauchly_p"):
            show[c] = [num(v, "{:.3g}") for v in table[c]]
    return "\n".join([show.to_string(index=False), *anova_notes(table)])


def anova_notes(table: pd.DataFrame) -> list[str]:
    """One line per distinct ``note`` of an ANOVA table (why F, p or effect sizes are NaN or
    infinite), naming the rows it concerns: their sources ("every row" when it is all of
    them), grouped by the ``--by`` value when the table has several groups."""
    if "note" not in table.columns:
        return []
    by = table.columns[0] if table.columns[0] != "source" else None
    if by is not None and table[by].nunique() < 2:  # one group's table: its rows suffice
        by = None
    keys = table[by].astype(str) if by is not None else pd.Series([""] * len(table))
    sizes = keys.value_counts()
    found: dict[str, dict[str, list[str]]] = {}
    for key, (_, r) in zip(keys, table.iterrows(), strict=True):
        if isinstance(r["note"], str) and r["note"]:
            found.setdefault(r["note"], {}).setdefault(key, []).append(str(r["source"]))
    lines = []
    for note, groups in found.items():
        parts = [("every row" if len(srcs) == sizes[key] else ", ".join(srcs))
                 if not key else f"{by}={key}: "
                 + ("every row" if len(srcs) == sizes[key] else ", ".join(srcs))
                 for key, srcs in groups.items()]
        lines.append(f"note ({'; '.join(parts)}): {note}")
    return lines
