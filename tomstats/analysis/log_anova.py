"""The simulation paper's ANOVA table for a real evaluation log (``tomstats anova``).

:func:`log_anova` reads a log or table (:func:`tomstats.analysis.table.read_evaluation`),
leaves out runner error records, checks every factor, cell and subject before any work, and
runs :func:`tomstats.analysis.row_anova.anova` pooled over the LLMs and, with ``by``, per
group: the two-way ANOVA context length × ToM order of the binary outcome with η², partial η²,
ω², partial ω² and generalized η² by default; ``within``/``subject`` give the
repeated-measures form (LLMs as subjects), ``unit="story"`` the one of a log with length
ladders (each story its own subject, context length and ToM order within it;
:mod:`tomstats.analysis.ladders`), ``ci`` intervals (noncentral F for η² and partial
η² by default, ``interval="bca"`` the cluster bootstrap for all five).
:func:`format_anova` prints the table.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import show_value
from tomstats.analysis.ladders import STORY, check_ladders, story_unit_factors
from tomstats.analysis.row_anova import EFFECT_SIZES, anova, check_interval, check_levels
from tomstats.analysis.summary import outcome
from tomstats.analysis.table import POOLED, apply_mapping, read_evaluation, require_column

__all__ = ["CORRECTIONS", "DEFAULT_BETWEEN", "DEFAULT_INTERVAL", "EFFECT_SIZES", "POOLED",
           "PreparedLog", "UNITS", "anova_notes", "check_design", "format_anova", "format_repeated",
           "log_anova", "prepare_log", "table_for_csv"]

#: Factors of the default analysis: the paper's two-way design.
DEFAULT_BETWEEN: tuple[str, str] = ("context_words", "tom_order")
#: The interval the log tables show by default (``tomstats anova --ci``, the log report):
#: the noncentral-F interval of partial η² and η², with the design effect of the clusters.
#: Chosen by ``benchmarks/bench_eta2_intervals.py`` (docs/anova.md): it covers a true 0 and
#: small and moderate effects, with independent and with clustered rows, where the bootstrap's
#: BCa interval never covers a true 0.
DEFAULT_INTERVAL = "ncf"
#: Sphericity corrections of a repeated-measures table (afex's ``correction``): the
#: Greenhouse–Geisser ε (the default, as afex's), the Huynh–Feldt ε (at most 1) or none.
CORRECTIONS = ("GG", "HF", "none")
#: The units of analysis (``tomstats anova --unit``) and the subject column each stands for:
#: the questions (rows, no subject), the LLMs, or the stories of a log with length ladders.
UNITS: dict[str, str | None] = {"question": None, "model": "model", "story": STORY}
#: Names of the corrections in the printed table.
_CORRECTION_NAMES = {"GG": "Greenhouse–Geisser", "HF": "Huynh–Feldt", "none": "no"}


# --------------------------------------------------------------------------- shared input


# --------------------------------------------------------------------------- summarize


# --------------------------------------------------------------------------- anova


def _as_list(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def check_design(df: pd.DataFrame, between: list[str], within: list[str],
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



@dataclass(frozen=True)
class PreparedLog:
    """A log read for an analysis of factors (:func:`prepare_log`).

    Attributes
    ----------
    data : pandas.DataFrame
        The answered rows (runner error records left out), the outcome as numbers.
    between, within : list of str
        The factors (``between`` defaults to the paper's two-way design).
    subject : str or None
        The subject column (``"model"`` by default with ``within``).
    pairing : dict
        With ``paired``: the counts of :func:`tomstats.analysis.paired.paired_units`.
    """

    data: pd.DataFrame
    between: list[str]
    within: list[str]
    subject: str | None
    pairing: dict[str, Any]


def prepare_log(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    dv: str = "correct",
    between: str | Sequence[str] | None = None,
    within: str | Sequence[str] | None = None,
    subject: str | None = None,
    by: str | None = None,
    cluster: str | None = None,
    columns: dict[str, str] | None = None,
    paired: bool = False,
    unit: str | None = None,
) -> PreparedLog:
    """Read a log for :func:`log_anova` (and the marginal means of
    :mod:`tomstats.analysis.contrasts`): map columns, check every factor, the subject, the
    ``by`` column and the outcome, score paired units, leave out runner error records, and
    refuse missing factor values, naming the column (``unit`` as for :func:`log_anova`: the
    story as the unit sets the subject and the factors). The design's cells are checked by
    :func:`check_design`."""
    df = apply_mapping(read_evaluation(data), columns)
    between_l, within_l = _as_list(between), _as_list(within)
    subject = _unit_subject(df, unit, subject, within_l, paired)
    if unit == "story":
        between_l, within_l = story_unit_factors(df, STORY, between_l, within_l)
    elif unit == "model" and not between_l and not within_l:
        within_l = list(DEFAULT_BETWEEN)
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
    return PreparedLog(df, between_l, within_l, subject, pairing)


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
    observed: str | Sequence[str] | None = None,
    correction: str = "GG",
    unit: str | None = None,
) -> pd.DataFrame:
    r"""The paper's ANOVA table for an evaluation log: pooled and, with ``by``, per group.

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
    observed : str or sequence of str, optional
        Factors that are measured, not manipulated (generalized η², as afex's ``observed``).
    correction : {"GG", "HF", "none"}, default "GG"
        With ``within``: the sphericity correction of the columns afex's table leads with
        (``DF_corrected``, ``DF_error_corrected``, ``MSE``, ``p_corrected``; see below).
    unit : {"question", "model", "story"}, optional
        The unit of analysis, a shorthand for ``subject`` (:data:`UNITS`): ``"question"``
        the rows (the between design; no ``within``); ``"model"`` the LLMs (``within``
        default ``context_words``, ``tom_order``); ``"story"`` the stories (``story_id``) of
        a log with length ladders, each story told at every context length: the rows are
        averaged per story × cell (over the questions and the LLMs of the table) and
        ``context_words`` is within the story, ``tom_order`` within it when every story is
        asked at every order and between stories when each is asked at one
        (:func:`tomstats.analysis.ladders.story_unit_factors`; given ``between``/``within``
        are kept). A log without ladders (each story at one length), a story missing a cell
        and ToM order neither within nor between stories are refused, naming the story and
        the cell (:func:`tomstats.analysis.ladders.check_ladders`).

    Returns
    -------
    pandas.DataFrame
        :func:`tomstats.analysis.row_anova.anova`'s columns; with ``by``, a first column named
        after it holding the group, ``"(pooled)"`` on the pooled table's rows. With
        ``within``, also afex's corrected columns: ``DF_corrected`` :math:`= \varepsilon\,
        df`, ``DF_error_corrected`` :math:`= \varepsilon\, df_{error}`, ``MSE``
        :math:`= SS_{error} / (\varepsilon\, df_{error})` and ``p_corrected`` (``p_gg``,
        ``p_hf`` or ``p``), with :math:`\varepsilon` the ``eps_gg``, the ``eps_hf`` capped
        at 1 or 1 by ``correction``; 1 for an effect of between factors only;
        where ε cannot be estimated (a singular error matrix) the uncorrected values, and the
        row's ``note`` says so. ``attrs["correction"]`` records the choice.
    """
    check_interval(interval)
    if correction not in CORRECTIONS:
        raise ValueError(f"--correction must be one of {', '.join(CORRECTIONS)}, got "
                         f"{correction!r}")
    prep = prepare_log(data, dv=dv, between=between, within=within, subject=subject, by=by,
                       cluster=cluster, columns=columns, paired=paired, unit=unit)
    df, between_l, within_l = prep.data, prep.between, prep.within
    subject, pairing = prep.subject, prep.pairing
    kwargs: dict[str, Any] = {"ss_type": ss_type, "binary": dv == "correct",
                              "within": within_l or None, "subject": subject,
                              "observed": _as_list(observed) or None}
    if ci is not None:
        if isinstance(ci, bool) or not 0 < float(ci) < 1:
            raise ValueError(f"--ci must be in (0, 1), got {ci!r}")
        if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 1:
            raise ValueError(f"--n-boot must be a positive integer, got {n_boot!r}")
        if cluster is None:
            cluster = next((c for c in ("story_id", "item_id", "item")
                            if c in df.columns and c != subject), None)
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
        if unit == "story" and within_l:
            check_ladders(sub, within_l, STORY, where)
        check_design(sub, between_l, within_l, subject, where)
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
    if within_l:
        out = _corrected(out, within_l, correction)
    out.attrs.update({"correction": correction if within_l else None,
                      "observed": _as_list(observed), "n_rows": len(df), "dv": dv,
                      "between": between_l, "within": within_l,
                      "subject": subject, "by": by, "cluster": kwargs.get("cluster"),
                      "ci": kwargs.get("ci"),
                      "n_boot": kwargs.get("n_boot") if interval == "bca" else None,
                      "interval": interval if ci is not None else None,
                      "design_effect": deff, "paired": bool(paired), "unit": unit,
                      "n_subjects": int(df[subject].nunique()) if subject else None,
                      **pairing})
    return out


def _unit_subject(df: pd.DataFrame, unit: str | None, subject: str | None,
                  within: list[str], paired: bool) -> str | None:
    """The subject column ``unit`` stands for, checked against ``subject`` and ``within``."""
    if unit is None:
        return subject
    if unit not in UNITS:
        raise ValueError(f"--unit must be one of {', '.join(UNITS)}, got {unit!r}")
    col = UNITS[unit]
    if subject is not None and subject != col:
        raise ValueError(f"--unit {unit} and --subject {subject!r} both name the subject; "
                         "give one of them")
    if unit == "question" and within:
        raise ValueError("--unit question takes no --within: a repeated-measures design needs "
                         "a subject (--unit model, --unit story or --subject COL)")
    if unit == "story":
        require_column(df, STORY, "--unit story", (STORY,))
        if paired:
            raise ValueError("--unit story with --paired: a paired unit's story is its "
                             "pair_id, one telling at one length, so it has no length ladder; "
                             "analyse paired scores without --unit story")
    return col


def _corrected(table: pd.DataFrame, within: list[str], correction: str) -> pd.DataFrame:
    """The repeated-measures table with afex's corrected columns (see :func:`log_anova`)."""
    out = table.copy()
    rows = out["source"].astype(str)
    has_within = rows.map(lambda s: any(f in within for f in s.split(":"))).to_numpy()
    if correction == "GG":
        eps = out["eps_gg"].to_numpy(dtype=float)
    elif correction == "HF":
        eps = np.minimum(1.0, out["eps_hf"].to_numpy(dtype=float))
    else:
        eps = np.ones(len(out))
    eps = np.where(has_within, eps, 1.0)
    unknown = np.isnan(eps) & out["F"].notna().to_numpy()
    eps = np.where(np.isnan(eps), 1.0, eps)
    p_col = {"GG": "p_gg", "HF": "p_hf", "none": "p"}[correction]
    p = np.where(has_within & ~unknown, out[p_col].to_numpy(dtype=float),
                 out["p"].to_numpy(dtype=float))
    out["DF_corrected"] = out["DF"].to_numpy(dtype=float) * eps
    out["DF_error_corrected"] = out["DF_error"].to_numpy(dtype=float) * eps
    out["MSE"] = out["SS_error"].to_numpy(dtype=float) / out["DF_error_corrected"]
    out["p_corrected"] = p
    if unknown.any() and correction != "none":
        why = (f"no {_CORRECTION_NAMES[correction]} correction: ε cannot be estimated (the "
               f"effect's error matrix is singular: too few subjects for its df); df and p "
               f"uncorrected")
        out["note"] = [why if u and not (isinstance(n, str) and n) else n
                       for u, n in zip(unknown, out["note"], strict=True)]
    return out


def table_for_csv(table: pd.DataFrame) -> pd.DataFrame:
    """The table as ``tomstats anova --out`` writes it: whole-number ``DF``/``DF_error``
    columns as integers (``4``, not ``4.0``) and no ``note`` column when no row has a note."""
    out = table.copy()
    for c in ("DF", "DF_error"):
        if c in out.columns:
            v = pd.to_numeric(out[c], errors="coerce")
            if v.notna().any() and (v.dropna() == v.dropna().round()).all():
                out[c] = v.round().astype("Int64")
    if "note" in out.columns and not out["note"].map(
            lambda n: isinstance(n, str) and bool(n)).any():
        out = out.drop(columns="note")
    return out


def _num(v: Any, fmt: str) -> str:
    return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt.format(v)


def _effect_cells(table: pd.DataFrame, c: str) -> list[str]:
    """An effect size's column: the value, with its interval when the table has one."""
    cells = [_num(v, "{:.4f}") for v in table[c]]
    if f"{c}_low" in table.columns:  # no interval on a row (ncf: Residual): the value
        cells = [s if s == "—" or (pd.isna(lo) and pd.isna(hi))
                 else f"{s} [{_num(lo, '{:.4f}')}, {_num(hi, '{:.4f}')}]"
                 for s, lo, hi in zip(cells, table[f"{c}_low"], table[f"{c}_high"],
                                      strict=True)]
    return cells


def _df_text(v: float) -> str:
    """A degree of freedom as afex prints it: whole numbers as such, others to 2 decimals."""
    if v != v:
        return "—"
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2f}"


def format_repeated(table: pd.DataFrame, correction: str | None = None) -> str:
    """A repeated-measures (or mixed) table as afex prints it, then the rest.

    The leading columns are afex's ``nice()``: ``df`` (numerator, denominator; corrected by
    ``correction``, default the table's ``attrs["correction"]``, else Greenhouse–Geisser;
    whole numbers printed as integers, others to two decimals), ``MSE`` (of the corrected
    error df), ``F``, ``ges`` (generalized η²) and ``p`` (corrected). Then SS, the other
    effect sizes, both ε (Greenhouse–Geisser, Huynh–Feldt as estimated, above 1 possible),
    the uncorrected p and Mauchly's test.
    """
    correction = correction or table.attrs.get("correction") or "GG"
    tag = "" if correction == "none" else f" ({correction})"
    show = pd.DataFrame({"source": table["source"]})
    show[f"df{tag}"] = [f"{_df_text(a)}, {_df_text(b)}" for a, b in
                        zip(table["DF_corrected"], table["DF_error_corrected"], strict=True)]
    show["MSE"] = [_num(v, "{:.4g}") for v in table["MSE"]]
    show["F"] = [_num(v, "{:.4g}") for v in table["F"]]
    show["ges"] = _effect_cells(table, "generalized_eta2")
    show[f"p{tag}"] = [_num(v, "{:.3g}") for v in table["p_corrected"]]
    show["SS"] = [_num(v, "{:.4g}") for v in table["SS"]]
    for c in EFFECT_SIZES:
        if c in table.columns and c != "generalized_eta2":
            show[c] = _effect_cells(table, c)
    if table["eps_gg"].notna().any():
        show["eps_gg"] = [_num(v, "{:.3g}") for v in table["eps_gg"]]
        show["eps_hf"] = [_num(v, "{:.3g}") for v in table["eps_hf"]]
        if correction != "none":
            show["p (none)"] = [_num(v, "{:.3g}") for v in table["p"]]
        show["mauchly_p"] = [_num(v, "{:.3g}") for v in table["mauchly_p"]]
    return "\n".join([show.to_string(index=False), *anova_notes(table)])


def format_anova(table: pd.DataFrame, correction: str | None = None) -> str:
    """The ANOVA table as text: sources, SS, DF, MS, F, p (as pingouin and statsmodels print
    them) and each effect size (with its interval); a repeated-measures table (with afex's
    corrected columns, :func:`log_anova`) as :func:`format_repeated` prints it."""
    if "DF_corrected" in table.columns:
        return format_repeated(table, correction)
    num = _num
    show = pd.DataFrame({"source": table["source"]})
    repeated = "eps_gg" in table.columns  # error DF differs by effect only with within factors
    for c in ("SS", "DF", "MS", "DF_error", "F"):
        if c in table.columns and (c != "DF_error" or repeated):
            show[c] = [num(v, "{:.4g}") for v in table[c]]
    if "p" in table.columns:
        show["p"] = [num(v, "{:.3g}") for v in table["p"]]
    for c in EFFECT_SIZES:
        if c in table.columns:
            show[c] = _effect_cells(table, c)
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
