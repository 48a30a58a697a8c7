"""``tomstats summarize`` and ``tomstats anova``: the classical analysis of a real evaluation log.

``tomstats summarize LOG`` prints the accuracy per LLM × context length × ToM order with Wilson
intervals, the questions and errors per cell and StorySim's error taxonomy
(:func:`tomstats.analysis.summary.summarize`); ``--out cells.csv`` writes the same table. When
the log has length ladders (stories told at several lengths) it also prints the within-story
length effect per ToM order (:func:`tomstats.analysis.ladders.length_effects`).

``tomstats anova LOG`` prints the simulation paper's Table 1 for a real log
(:func:`tomstats.analysis.log_anova.log_anova`): the two-way ANOVA context length × ToM order
of the binary outcome with η², partial η², ω², partial ω² and generalized η², pooled over the
LLMs and, with ``--by model``, per LLM; ``--ci 0.95`` adds noncentral-F intervals of η² and
partial η² (``--interval bca`` or ``--n-boot N``: cluster-bootstrap intervals of all five);
``--within``/``--subject`` give the repeated-measures form (LLMs as subjects); ``--unit story``
the one of a log with length ladders (each story told at every length is a subject, context
length and ToM order within it).

Both read the runner's JSON Lines log or any CSV/parquet table with one row per question;
columns with other names are renamed with ``--map STANDARD=COLUMN`` as in ``tomstats fit``.
Bad input (an unknown column, a factor with one level, an empty cell, a missing or non-numeric
outcome, a factor named twice, a file that is not UTF-8, an existing ``--out`` without
``--force``) is refused before any work with one line naming the column and the value.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tomstats._args import count_arg, seed_arg
from tomstats._io import atomic_write_text, prepare_out_file
from tomstats.analysis.ladders import format_length_effects, length_effects, story_layout
from tomstats.analysis.paired import PAIRED_COLUMNS, incomplete_note
from tomstats.analysis.row_anova import INTERVALS
from tomstats.analysis.summary import format_summary, summarize
from tomstats.analysis.table import add_selection_arguments, load_table, parse_mapping

__all__ = ["add_anova_arguments", "add_summarize_arguments", "run_anova", "run_summarize"]


def add_summarize_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats summarize``."""
    p.add_argument("log", help="evaluation log: the runner's JSONL, or a CSV/parquet table "
                               "with one row per question")
    p.add_argument("--by", nargs="+", metavar="COL", default=None,
                   help="grouping columns before context × order (default: model, when the "
                        "log has it); 'none' pools all rows of a cell")
    add_selection_arguments(p, ("correct", "model", "tom_order", "context_words",
                                "error_category", "story_id"))
    p.add_argument("--level", type=float, default=0.95,
                   help="coverage of the Wilson intervals (default 0.95)")
    _add_paired_argument(p)
    p.add_argument("--out", metavar="CSV", help="also write the table as CSV (atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def _add_paired_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--paired", action="store_true",
                   help="score paired units: a (model, pair_id, ToM order) unit is right only "
                        "when every version of the pair (its true- and false-belief telling) "
                        "is; incomplete units are left out and counted")


def _by_arg(by: Sequence[str] | None) -> list[str] | None:
    if by is None:
        return None
    if [b.lower() for b in by] == ["none"]:
        return []
    return list(by)


def run_summarize(args: argparse.Namespace) -> int:
    """Run ``tomstats summarize``: read, map, count per cell, print, write ``--out``."""
    out = prepare_out_file(args.out, force=args.force) if args.out else None
    columns = parse_mapping(args.map)
    by = _by_arg(args.by)
    paired = getattr(args, "paired", False)
    df = load_table(args.log, columns, args.query,
                    needed=["correct", "context_words", "tom_order", *(by or []),
                            *(["pair_id"] if paired else [])],
                    optional=["status", "error_category", "story_id",
                              *(["model"] if by is None or paired else []),
                              *(PAIRED_COLUMNS if paired else ())])
    table = summarize(df, by=by, level=args.level, paired=paired)
    print(format_summary(table))
    if paired:
        print(f"{incomplete_note(table.attrs)}; a unit is right when every version is; "
              f"{args.level:.0%} Wilson intervals; chance: the mean over the units of the "
              "product of the versions' chance levels")
        if out is not None:
            atomic_write_text(out, table.to_csv(index=False))
            print(f"wrote {out}")
        return 0
    reasons = table.attrs.get("errors_by_reason", {})
    n_err = int(table["n_errors"].sum())
    print(f"{int(table['n'].sum())} questions, {int(table['n_answered'].sum())} answered, "
          f"{int(table['n_correct'].sum())} correct, {n_err} without an answer"
          + (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})" if n_err else "")
          + f"; {args.level:.0%} Wilson intervals")
    if "story_id" in df.columns and story_layout(df).has_ladders:
        print()
        print(format_length_effects(length_effects(df, by=by, level=args.level)))
    if out is not None:
        atomic_write_text(out, table.to_csv(index=False))
        print(f"wrote {out}")
    return 0


def add_anova_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats anova``."""
    p.add_argument("log", help="evaluation log: the runner's JSONL, or a CSV/parquet table "
                               "with one row per question")
    p.add_argument("--dv", default="correct", help="outcome column (default correct, 0/1)")
    p.add_argument("--between", nargs="+", metavar="COL", default=None,
                   help="between factors (default: context_words tom_order, the paper's "
                        "two-way design)")
    p.add_argument("--within", nargs="+", metavar="COL", default=None,
                   help="within (repeated-measures) factors, e.g. context_words tom_order with "
                        "the LLMs as subjects")
    p.add_argument("--subject", metavar="COL", default=None,
                   help="subject column of a repeated-measures design (default model with "
                        "--within); without --within, the between factors are compared on "
                        "the means per subject")
    p.add_argument("--unit", choices=("question", "model", "story"), default=None,
                   help="the unit of analysis: question (the rows, the default between "
                        "design), model (the LLMs as subjects, context and order within) or "
                        "story (a log with length ladders: each story_id told at every "
                        "context length is a subject, context and ToM order within it; "
                        "every story needs every cell)")
    p.add_argument("--by", metavar="COL", default=None,
                   help="also one table per value of this column (e.g. model), before the "
                        "pooled one")
    p.add_argument("--ss-type", type=int, choices=(1, 2, 3), default=2,
                   help="type of sums of squares (default 2)")
    p.add_argument("--correction", choices=("GG", "HF", "none"), default="GG",
                   help="with --within: the sphericity correction of the df and p the table "
                        "leads with, as afex prints them (Greenhouse–Geisser, Huynh–Feldt or "
                        "none; default GG); both ε are shown")
    p.add_argument("--observed", nargs="+", metavar="COL", default=None,
                   help="factors that are measured, not manipulated (e.g. an LLM's family): "
                        "generalized η² counts their variance as part of the error, as afex's "
                        "observed (default: none)")
    p.add_argument("--ci", type=float, default=None, metavar="LEVEL",
                   help="intervals of the effect sizes at this level, e.g. 0.95 (see "
                        "--interval)")
    p.add_argument("--interval", choices=INTERVALS, default=None,
                   help="with --ci: ncf = noncentral-F intervals of partial η² and η² with "
                        "the design effect of the --cluster (no bootstrap); bca = "
                        "cluster-bootstrap BCa intervals of every effect size (default: ncf; "
                        "bca when --n-boot is given)")
    p.add_argument("--n-boot", type=count_arg, default=None, metavar="N",
                   help="bootstrap resamples; selects --interval bca unless --interval is "
                        "given (default 2000)")
    p.add_argument("--cluster", metavar="COL", default=None,
                   help="clusters of rows: the bootstrap's resampling unit, the design "
                        "effect's unit (default story_id, else item_id)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--allow-large", action="store_true",
                   help="run a bootstrap even when the size guard estimates more memory than "
                        "is available or more than a day")
    _add_paired_argument(p)
    add_selection_arguments(p, ("correct", "model", "tom_order", "context_words", "story_id"))
    p.add_argument("--out", metavar="CSV", help="also write the table(s) as CSV (atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def _design_effect_words(attrs: dict) -> str:
    """How the noncentral-F intervals took the clusters into account."""
    if attrs["within"] or attrs["subject"]:
        return " (on the subjects' error terms)"
    if not attrs.get("cluster"):
        return " (rows taken as independent: no cluster column)"
    where = " (pooled table)" if attrs.get("by") else ""
    if attrs.get("design_effect") is None:
        return f" (each {attrs['cluster']} value one row: rows taken as independent)"
    if attrs["design_effect"] != attrs["design_effect"]:  # NaN: one cluster per cell
        return f" (one {attrs['cluster']} cluster per cell{where}: see the notes)"
    return (f", design effect of the {attrs['cluster']} clusters "
            f"{attrs['design_effect']:.3g}{where}")


def _story_unit_words(attrs: dict) -> str:
    """The sentence on the stories as the unit of ``tomstats anova --unit story``."""
    roles = [f"{f} within" for f in attrs["within"]] + [f"{f} between stories"
                                                        for f in attrs["between"]]
    return (f"{attrs['n_subjects']} stories ({attrs['subject']}) as the unit, each observed "
            f"in every cell ({', '.join(roles)}); a story's score in a cell is the mean of its "
            "answered questions there, of every LLM in the table")


def run_anova(args: argparse.Namespace) -> int:
    """Run ``tomstats anova``: read, map, check, one table per group and pooled, print, write."""
    # SciPy is imported for the ANOVA only, so that `tomstats summarize` starts without it
    from tomstats.analysis.log_anova import (
        DEFAULT_BETWEEN,
        DEFAULT_INTERVAL,
        format_anova,
        log_anova,
        table_for_csv,
    )
    from tomstats.analysis.sizes import check_bootstrap_size

    interval = args.interval or ("bca" if args.n_boot is not None else DEFAULT_INTERVAL)
    n_boot = 2000 if args.n_boot is None else args.n_boot
    boot = args.ci is not None and interval == "bca"
    if n_boot < 0:
        raise ValueError(f"--n-boot must be a non-negative integer, got {n_boot}")
    if boot or args.n_boot is not None:
        # before the data are read, for the smallest design's cells; a --n-boot given without
        # --ci is bounded too (it is a size like any other)
        check_bootstrap_size(n_boot, allow_large=args.allow_large)
    out = prepare_out_file(args.out, force=args.force) if args.out else None
    within = args.within or []
    unit = getattr(args, "unit", None)
    unit_col = {"model": "model", "story": "story_id"}.get(unit or "")
    subject = args.subject or unit_col or ("model" if within else None)
    cluster = [args.cluster] if args.ci is not None and args.cluster else []
    paired = getattr(args, "paired", False)
    df = load_table(args.log, parse_mapping(args.map), args.query,
                    needed=[args.dv, *(args.between or ([] if within or unit_col
                                                        else DEFAULT_BETWEEN)),
                            *(DEFAULT_BETWEEN if unit_col else []),
                            *within, *([subject] if subject else []),
                            *([args.by] if args.by else []), *cluster,
                            *(["pair_id", "tom_order", "context_words"] if paired else [])],
                    optional=["status", *(["story_id", "item_id", "item"]
                                          if args.ci is not None and not cluster
                                          else []),
                              *(["model", *PAIRED_COLUMNS] if paired else [])])
    n_all = len(df)
    if boot:  # and with the design's cells, before the bootstrap
        factors = [c for c in [*(args.between or DEFAULT_BETWEEN), *(args.within or [])]
                   if c in df.columns]
        n_cells = df.groupby(factors).ngroups if factors else 1
        n_tables = 1 + (df[args.by].nunique() if args.by in df.columns else 0)
        check_bootstrap_size(n_boot, n_cells, n_tables, allow_large=args.allow_large)
    table = log_anova(df, dv=args.dv, between=args.between, within=args.within,
                      subject=args.subject, by=args.by, ss_type=args.ss_type, ci=args.ci,
                      n_boot=n_boot, cluster=args.cluster, seed=args.seed,
                      interval=interval, paired=paired, observed=args.observed,
                      correction=args.correction, unit=unit)
    a = table.attrs
    design = " × ".join(a["between"] + a["within"])
    corrected = ("; df and p corrected for sphericity by "
                 + {"GG": "Greenhouse–Geisser ε", "HF": "Huynh–Feldt ε (at most 1)"}[
                     args.correction] if args.correction != "none" else "")
    observed = (f"; generalized η² with {', '.join(a['observed'])} observed"
                if a.get("observed") else "")
    head = (f"ANOVA of {a['dv']} on {design} (type {args.ss_type} sums of squares"
            + (f", repeated measures within {a['subject']}{corrected}" if a["within"]
               else f", on the mean per {a['subject']}" if a["subject"] else "")
            + (f"; {a['ci']:.0%} cluster-bootstrap intervals, {a['n_boot']} resamples of "
               f"{a['cluster'] or 'rows'}, seed {args.seed}" if a["ci"] and boot
               else f"; {a['ci']:.0%} noncentral-F intervals of partial η²"
               + (" and η²" if not a["within"] else "") + _design_effect_words(a)
               if a["ci"] else "") + observed + ")")
    print(head)
    if unit == "story":
        print(_story_unit_words(a))
    dropped = n_all - a["n_rows"]
    if paired:
        print(f"{incomplete_note(a)} (a unit is right when every version of its pair is)")
    else:
        print(f"{a['n_rows']} questions" + (f" ({dropped} error record(s) without an answer "
                                            "left out)" if dropped else ""))
    if args.by is None:
        print(format_anova(table, args.correction))
    else:
        for value, tab in table.groupby(args.by, sort=False):
            print(f"\n{args.by} = {value}")
            print(format_anova(tab, args.correction))
    if out is not None:
        atomic_write_text(out, table_for_csv(table).to_csv(index=False))
        print(f"wrote {out}")
    return 0
