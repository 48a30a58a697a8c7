"""Report on an evaluation log: the page a researcher sends a colleague after an evaluation.

``tomstats report LOG --out report.html`` (``LOG`` a runner ``.jsonl`` log, or a ``.csv`` /
``.tsv`` / ``.parquet`` table with one row per question) shows, in order:

1. the log: LLMs, questions, answers, errors by reason;
2. accuracy by context length and ToM order per LLM (the simulation paper's Figure 2) with
   Wilson intervals, as a figure and a table (:func:`tomstats.analysis.summary.summarize`);
3. paired scores and baselines: beside every LLM, the reality tracker (the target's true
   final place) and the previous place (the target's place before its last move), scored on
   the same questions; and, when the log's items carry a ``pair_id``, the paired accuracy
   (a story's question right only when its true- and false-belief versions both are) of the
   LLMs and the baselines per cell with Wilson intervals and the units' chance level
   (:mod:`tomstats.analysis.paired`);
4. the two-way ANOVA context length × ToM order per LLM and pooled, with η², partial η²,
   ω², partial ω² and generalized η², with noncentral-F intervals of η² and partial η² (with
   ``--n-boot N``: cluster-bootstrap intervals of all five)
   (:func:`tomstats.analysis.log_anova.log_anova`);
5. which ToM orders differ at each context length: the pairwise differences of the cell
   means with Tukey intervals (emmeans' simple effects on the ANOVA's reference model,
   :mod:`tomstats.analysis.contrasts`), as a figure and a table;
6. context length within stories and the ToM effect adjusted for context length: the ToM-order
   effect on accuracy at equal context length with an interval across stories
   (:func:`tomstats.analysis.ladders.adjusted_tom_effect`) and, when the log has length
   ladders (stories told at several lengths), the within-story length effect per ToM order
   (:func:`tomstats.analysis.ladders.length_effects`) and the repeated-measures ANOVA with the
   story as its unit (``tomstats anova --unit story``);
7. StorySim's error taxonomy per cell (first common location, recency, refusal/unparseable,
   other), as a stacked-bar figure and a table;
8. the exact ``tomstats fit`` command that fits the GLMM next, and the report command after it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats._version import __version__
from tomstats.analysis.log_anova import DEFAULT_INTERVAL, anova_notes, log_anova
from tomstats.analysis.row_anova import EFFECT_SIZES
from tomstats.analysis.summary import ERROR_COLUMNS, outcome, summarize
from tomstats.analysis.table import TABLE_FORMATS, load_table, table_suffix
from tomstats.report._document import (
    Document,
    Image,
    Section,
    Table,
    Text,
    check_output,
    figure_png,
    write_document,
)

__all__ = ["LOG_SUFFIXES", "fit_command", "is_log", "log_document", "write_log_report"]

#: File suffixes read as an evaluation log by ``tomstats report``: those of every reader
#: (:data:`tomstats.analysis.table.TABLE_FORMATS`) but ``.json``, which names a Laplace fit here.
LOG_SUFFIXES = tuple(s for s in TABLE_FORMATS if s != ".json")

#: Section titles, in order (the HTML and the Markdown forms share them).
SECTIONS = ("The log", "Accuracy by context length and ToM order",
            "Paired scores and baselines", "ANOVA: context length × ToM order",
            "Which ToM orders differ", "Context length within stories", "Error taxonomy",
            "Next: fit the GLMM")

#: The baselines shown beside every LLM: name → the log column holding its answer
#: (:mod:`tomstats.evaluate.baselines`).
BASELINES = {"reality tracker": "last_location", "previous place": "previous_location"}
#: Columns the paired section reads when the log has them.
_PAIRED_READ = ("pair_id", "answer", "last_location", "previous_location", "n_candidates",
                "belief_status", "sample")

_ORDER_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e")
_TAX_LABELS = {"n_correct": "correct", "first_common_location": "first common location",
               "recency": "recency (last location)",
               "refusal_unparseable": "refusal / unparseable", "other": "other location",
               "n_errors": "no answer (error)"}
_TAX_COLORS = {"n_correct": "#1a7f37", "first_common_location": "#d95f02",
               "recency": "#7570b3", "refusal_unparseable": "#9a6700", "other": "#8c959f",
               "n_errors": "#cf222e"}
_ES_LABELS = {"eta2": "η²", "partial_eta2": "partial η²", "omega2": "ω²",
              "partial_omega2": "partial ω²", "generalized_eta2": "generalized η²"}


def is_log(path: str | os.PathLike[str]) -> bool:
    """Whether ``tomstats report`` reads ``path`` as an evaluation log (by its suffix)."""
    return table_suffix(path) in LOG_SUFFIXES


def _order_label(t: Any) -> str:
    try:
        return f"order {int(t)}" if float(t) == int(t) else f"order {t}"
    except (TypeError, ValueError):
        return f"order {t}"


def fig_accuracy(cells: pd.DataFrame, group: str | None) -> Figure:
    """Accuracy by context length (log axis when positive) and ToM order, one panel per group.

    ``cells`` is :func:`tomstats.analysis.summary.summarize`'s table; error bars are its Wilson
    intervals; cells without answers are left out. The orders are drawn side by side at each
    context length (shifted by :func:`_dodge`) so that their intervals do not overlap.
    """
    groups = list(pd.unique(cells[group])) if group else [None]
    ncol = min(len(groups), 3)
    nrow = -(-len(groups) // ncol)
    fig = Figure(figsize=(4.4 * ncol + 0.6, 3.6 * nrow + 0.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False).ravel())
    numeric = pd.to_numeric(cells["context_words"], errors="coerce")
    if numeric.notna().all():
        position = dict(zip(cells["context_words"], numeric, strict=True))
        contexts = np.sort(numeric.unique())
        labels = [f"{v:,.0f}" if float(v).is_integer() else f"{v:g}" for v in contexts]
        log_x = len(contexts) > 1 and contexts.min() > 0
    else:  # a categorical stand-in for context (e.g. a prompt variant): evenly spaced
        levels = sorted(pd.unique(cells["context_words"]), key=str)
        position = {v: float(i) for i, v in enumerate(levels)}
        contexts, labels, log_x = np.arange(len(levels), dtype=float), list(map(str, levels)), False
    for ax, g in zip(axes, groups, strict=False):
        sub = cells if g is None else cells[cells[group] == g]
        orders = sorted(pd.unique(sub["tom_order"]))
        for i, t in enumerate(orders):
            d = sub[(sub["tom_order"] == t) & (sub["n_answered"] > 0)]
            d = d.sort_values("context_words")
            if d.empty:
                continue
            x = _dodge(np.array([position[v] for v in d["context_words"]], dtype=float),
                       i, len(orders), contexts, log_x)
            acc = d["accuracy"].to_numpy(dtype=float)
            err = np.vstack([acc - d["ci_low"].to_numpy(dtype=float),
                             d["ci_high"].to_numpy(dtype=float) - acc])
            ax.errorbar(x, acc, yerr=np.clip(err, 0, None), fmt="o-", capsize=4,
                        color=_ORDER_COLORS[i % len(_ORDER_COLORS)], label=_order_label(t))
        if log_x:
            ax.set_xscale("log")
        ax.set_xticks(contexts, labels)
        ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.set_xlabel("Context length (words" + (", log scale)" if log_x else ")"))
        ax.set_ylabel("Accuracy")
        ax.set_title(str(g) if g is not None else "all questions", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8, loc="upper right")
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    return fig


def _dodge(x: np.ndarray, i: int, k: int, ticks: np.ndarray, log_x: bool) -> np.ndarray:
    r"""Shift series ``i`` of ``k`` sideways by :math:`(i - (k-1)/2)\,w/k`, where :math:`w` is
    0.4 times the smallest gap between neighbouring ``ticks`` (on the log scale when
    ``log_x``: the shift multiplies ``x`` by :math:`e^{\text{shift}}`)."""
    t = np.log(ticks) if log_x else np.asarray(ticks, dtype=float)
    gap = float(np.min(np.diff(t))) if len(t) > 1 else 1.0
    shift = (i - (k - 1) / 2) * 0.4 * gap / max(k, 1)
    return x * np.exp(shift) if log_x else x + shift


def fig_taxonomy(cells: pd.DataFrame, group: str | None) -> Figure:
    """Share of each answer category (correct, the four errors, no answer) per cell."""
    groups = list(pd.unique(cells[group])) if group else [None]
    parts = ["n_correct", *ERROR_COLUMNS, "n_errors"]
    fig = Figure(figsize=(9.0, 2.8 * len(groups) + 0.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(groups), 1, squeeze=False).ravel())
    for ax, g in zip(axes, groups, strict=True):
        sub = cells if g is None else cells[cells[group] == g]
        sub = sub.sort_values(["tom_order", "context_words"])
        x = np.arange(len(sub))
        total = sub["n"].to_numpy(dtype=float)
        bottom = np.zeros(len(sub))
        for c in parts:
            share = sub[c].astype("Float64").fillna(0).to_numpy(dtype=float) / total
            ax.bar(x, share, bottom=bottom, color=_TAX_COLORS[c], label=_TAX_LABELS[c],
                   edgecolor="white", linewidth=0.4)
            bottom += share
        ax.set_xticks(x, [f"{c:g}\n{_order_label(t)}" if isinstance(c, (int, float, np.number))
                          else f"{c}\n{_order_label(t)}"
                          for c, t in zip(sub["context_words"], sub["tom_order"], strict=True)],
                      fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_ylabel("Share of questions")
        ax.set_title(str(g) if g is not None else "all questions", fontsize=10)
    axes[0].legend(frameon=False, fontsize=8, ncol=3, loc="lower left",
                   bbox_to_anchor=(0, 1.12))
    return fig


def _accuracy_table(cells: pd.DataFrame, group: str | None,
                    empty: str = "answered") -> pd.DataFrame:
    """Rows: group × ToM order; columns: context lengths; cells ``0.250 [0.112, 0.469]``
    (``— (0 of n answered)`` without answers; ``empty`` words the count)."""
    def cell(r: pd.Series) -> str:
        if r["n_answered"] == 0:
            return f"— (0 of {int(r['n'])} {empty})"
        return f"{r['accuracy']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

    d = cells.assign(value=[cell(r) for _, r in cells.iterrows()])
    index = [group, "tom_order"] if group else ["tom_order"]
    wide = d.pivot(index=index, columns="context_words", values="value")
    wide.columns = [f"{c:g} words" if isinstance(c, (int, float, np.number)) else str(c)
                    for c in wide.columns]
    return wide.reset_index()


def baseline_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of each baseline beside each LLM, and why a baseline is missing.

    For every LLM (``model``; one responder when the log has no such column) and baseline of
    :data:`BASELINES` whose answer the log records, a copy of that LLM's questions with
    ``model`` = ``"LLM · baseline"``, ``status`` ``"ok"`` and ``correct`` = 1 when the
    baseline's answer is the gold ``answer``: the baseline scored on exactly the questions the
    LLM was asked. A question whose baseline answer is unknown (``None``) is left out of that
    baseline's rows.
    """
    missing: dict[str, str] = {}
    if "answer" not in df.columns:
        return df.iloc[:0], dict.fromkeys(BASELINES, "the log has no gold answer column")
    models = df["model"] if "model" in df.columns else pd.Series("—", index=df.index)
    parts = []
    for name, col in BASELINES.items():
        if col not in df.columns or df[col].isna().all():
            missing[name] = (f"the log does not record {col}"
                             + (" (the items carry no events, or a runner before it was "
                                "recorded)" if col == "previous_location" else ""))
            continue
        known = df[col].notna().to_numpy()
        rows = df.loc[known].copy()
        rows["model"] = [f"{m} · {name}" for m in models[known]]
        rows["correct"] = (rows[col].astype(str) == rows["answer"].astype(str)).astype("int64")
        if "status" in rows.columns:
            rows["status"] = "ok"
        parts.append(rows)
    return (pd.concat(parts, ignore_index=True) if parts else df.iloc[:0]), missing


def _paired_blocks(df: pd.DataFrame, level: float) -> list[Any]:
    """The paired section: paired accuracy of every LLM and baseline, plain accuracy of the
    baselines beside the LLMs'."""
    from tomstats.analysis.paired import incomplete_note, paired_summary

    base, missing = baseline_rows(df)
    src = df if "model" in df.columns else df.assign(model="—")
    both = pd.concat([src, base], ignore_index=True) if len(base) else src
    blocks: list[Any] = [Text(
        "Two answers that need no belief reasoning are scored beside every LLM, on the same "
        "questions: the reality tracker answers the target's true final place "
        "(last_location); the previous place answers the target's place before its last "
        "move (previous_location, from the items' recorded events). A paired unit is one "
        "story's question told with a true and with a false belief (items sharing a "
        "pair_id); it counts as right only when every version is answered right, so the "
        "reality tracker, right on the true belief and wrong on the false one, scores 0, and "
        "any rule that ignores who saw what scores near 0. The chance level of a unit is the "
        "product of its versions' chance levels (1 / the number of places).")]
    for name, why in missing.items():
        blocks.append(Text(f"No {name} baseline: {why}.", "missing"))
    plain = summarize(both, by=["model"], level=level)
    blocks.append(Table(_accuracy_table(plain, "model"),
                        caption=f"Accuracy per question [{level:.0%} Wilson interval], "
                                "LLMs and baselines"))
    has_pairs = "pair_id" in df.columns and df["pair_id"].fillna("").astype(str).ne("").any()
    if not has_pairs:
        blocks.append(Text("No paired scores: no question of this log carries a pair_id (items "
                           "of format tomstats.items/3 whose true- and false-belief versions "
                           "share one, evaluated by a runner that records it).", "missing"))
        return blocks
    try:
        paired = paired_summary(both, by=["model"], level=level)
    except ValueError as exc:
        blocks.append(Text(f"No paired scores: {' '.join(str(exc).split())}.", "missing"))
        return blocks
    n_llm = paired[~paired["model"].astype(str).str.contains(" · ")]
    shown = paired.rename(columns={"n_units": "n_answered"}).assign(
        n=paired["n_units"] + paired["n_incomplete"])
    blocks.append(Table(_accuracy_table(shown, "model", "units complete"),
                        caption=f"Paired accuracy [{level:.0%} Wilson interval] per cell, LLMs "
                                "and baselines"))
    chance = paired.groupby(["context_words", "tom_order"], sort=True)["chance"].mean()
    if chance.notna().any():
        ch = chance.reset_index()
        ch["chance"] = [("—" if pd.isna(v) else f"{v:.4f}") for v in ch["chance"]]
        blocks.append(Table(ch.rename(columns={"chance": "chance of a paired unit"}),
                            caption="Chance level of a paired unit per cell"))
    units = int(n_llm["n_units"].sum())
    note = incomplete_note({**paired.attrs, "n_units": units,
                            "n_incomplete": int(n_llm["n_incomplete"].sum())})
    blocks.append(Text(f"LLMs: {note}.", "note"))
    return blocks


def _anova_display(table: pd.DataFrame, group: str | None) -> pd.DataFrame:
    cols = ([group] if group else []) + ["source", "DF", "F", "p"]
    show = table[[c for c in cols if c in table.columns]].copy()
    for c in EFFECT_SIZES:
        if c not in table.columns:
            continue
        if f"{c}_low" in table.columns:
            show[_ES_LABELS[c]] = [
                "—" if pd.isna(v) else f"{v:.4f}" if pd.isna(lo) and pd.isna(hi)
                else f"{v:.4f} [{lo:.4f}, {hi:.4f}]"
                for v, lo, hi in zip(table[c], table[f"{c}_low"], table[f"{c}_high"],
                                     strict=True)]
        else:
            show[_ES_LABELS[c]] = table[c].astype(float)
    return show


def _adjusted_blocks(df: pd.DataFrame, group: str | None, level: float) -> list[Any]:
    """The ToM effect adjusted for context length: its text and table (or why not)."""
    from tomstats.analysis.ladders import adjusted_tom_effect

    try:
        adj = adjusted_tom_effect(df, by=group, level=level)
    except ValueError as exc:
        return [Text(f"No adjusted ToM effect: {' '.join(str(exc).split())}.", "missing")]
    unit = adj.attrs["cluster"]
    text = (
        "The ToM effect adjusted for context length: the difference in accuracy between each "
        "ToM order and the lowest at equal context length, from the least-squares fit of "
        f"{adj.attrs['formula']} (length as a factor"
        + (", the LLMs as a factor in the pooled rows" if "C(model)" in adj.attrs["formula"]
           else "") + f"), with {level:.0%} intervals from the {unit or 'row'} clusters "
        "(cluster-robust CR1 standard errors, t on clusters − 1 df). In a complete length "
        "ladder (every story at every length and order) it is the mean over stories of the "
        "story's own order contrast at each length: length blocked by story. 'unadjusted' is "
        "the plain difference of the orders' accuracies, which a log whose higher orders sit "
        "at other lengths confounds with length.")
    show = adj[[*([group] if group else []), "tom_order", "reference"]].copy()
    show["adjusted effect"] = [f"{e:+.3f} [{lo:+.3f}, {hi:+.3f}]" for e, lo, hi in
                               zip(adj["estimate"], adj["ci_low"], adj["ci_high"], strict=True)]
    show["p"] = [f"{v:.3g}" for v in adj["p"]]
    show["unadjusted"] = [f"{v:+.3f}" for v in adj["unadjusted"]]
    show[f"{unit or 'row'} clusters"] = adj["n_clusters"]
    return [Text(text), Table(show, caption="ToM effect adjusted for context length "
                                            f"[{level:.0%} interval] (accuracy difference)")]


def _story_anova_table(table: pd.DataFrame, group: str | None) -> pd.DataFrame:
    """The story-unit ANOVA as the page shows it: Greenhouse–Geisser df and p, as afex."""
    show = table[[c for c in ([group] if group else []) + ["source"]]].copy()
    show["df (GG)"] = [f"{a:.2f}, {b:.2f}" for a, b in
                       zip(table["DF_corrected"], table["DF_error_corrected"], strict=True)]
    show["F"] = table["F"].astype(float)
    show["p (GG)"] = table["p_corrected"].astype(float)
    show["generalized η²"] = table["generalized_eta2"].astype(float)
    show["partial η²"] = table["partial_eta2"].astype(float)
    return show


def _within_story_blocks(df: pd.DataFrame, group: str | None, level: float) -> list[Any]:
    """The section on context length within stories: the adjusted ToM effect, then (with
    ladders) the within-story length effect and the ANOVA with the story as its unit."""
    from tomstats.analysis.ladders import STORY, length_effects, story_layout

    blocks = _adjusted_blocks(df, group, level)
    if STORY not in df.columns or not story_layout(df).has_ladders:
        blocks.append(Text(
            "No length ladders: " + ("the log has no story_id column" if STORY not in df.columns
                                     else "each story is told at one context length")
            + ", so the effect of length cannot be read within stories. A log whose items "
            "tell the same story at every length (sharing a story_id) gets the within-story "
            "length effect and the ANOVA with the story as its unit here.", "missing"))
        return blocks
    layout = story_layout(df)
    eff = length_effects(df, by=[group] if group else [], level=level)
    lo, hi = eff.attrs["shortest"], eff.attrs["longest"]
    show = eff[[*([group] if group else []), "tom_order", "n_stories"]].copy()
    show[f"accuracy at {lo:g} words"] = eff["acc_shortest"].astype(float)
    show[f"accuracy at {hi:g} words"] = eff["acc_longest"].astype(float)
    show["difference"] = [("—" if pd.isna(d) else f"{d:+.3f}" if pd.isna(a)
                           else f"{d:+.3f} [{a:+.3f}, {b:+.3f}]")
                          for d, a, b in zip(eff["difference"], eff["ci_low"], eff["ci_high"],
                                             strict=True)]
    show["p"] = eff["p"].astype(float)
    blocks += [
        Text(f"Length ladders: {layout.n_ladders} of {layout.n_stories} stories are told at "
             f"two or more context lengths ({layout.n_complete} at every length). The "
             f"within-story length effect compares each story with itself: its accuracy at "
             f"{hi:g} words minus at {lo:g} words, per ToM order, averaged over the stories "
             f"told at both, with a {level:.0%} t interval across stories (the story's "
             "difficulty cancels)."),
        Table(show, caption=f"Within-story length effect [{level:.0%} interval]",
              float_format="{:.3f}"),
    ]
    try:
        tab = log_anova(df, unit="story", by=group)
    except ValueError as exc:
        blocks.append(Text("No ANOVA with the story as its unit: "
                           f"{' '.join(str(exc).split())}.", "missing"))
        return blocks
    design = ", ".join([f"{f} within stories" for f in tab.attrs["within"]]
                       + [f"{f} between stories" for f in tab.attrs["between"]])
    blocks += [
        Text(f"Repeated-measures ANOVA with the story as its unit ({tab.attrs['n_subjects']} "
             f"stories; {design}; a story's score in a cell is the mean of its answered "
             "questions there; Greenhouse–Geisser corrected df and p, as afex prints them; "
             "tomstats anova LOG --unit story)."),
        Table(_story_anova_table(tab, group), caption="ANOVA with the story as its unit",
              float_format="{:.4g}"),
    ]
    blocks += [Text(n[0].upper() + n[1:], "note") for n in anova_notes(tab)]
    return blocks


def fig_contrasts(table: pd.DataFrame) -> Figure:
    """The ToM-order differences of :func:`_contrast_blocks` as a forest plot: one panel per
    context length (and one averaged over them), a point and its interval per pair."""
    groups = list(pd.unique(table["context_words"]))
    fig = Figure(figsize=(4.2 * min(len(groups), 3) + 0.6,
                          (0.45 * table["contrast"].nunique() + 1.2) * -(-len(groups) // 3)),
                 layout="constrained")
    axes = np.atleast_1d(fig.subplots(-(-len(groups) // 3), min(len(groups), 3), squeeze=False,
                                      sharex=True).ravel())
    for ax, g in zip(axes, groups, strict=False):
        d = table[table["context_words"] == g].iloc[::-1]
        y = np.arange(len(d))
        est = d["estimate"].to_numpy(dtype=float)
        err = np.vstack([est - d["lower"].to_numpy(dtype=float),
                         d["upper"].to_numpy(dtype=float) - est])
        ax.errorbar(est, y, xerr=np.clip(err, 0, None), fmt="o", capsize=3, color="#1b4f72")
        ax.axvline(0.0, color="#8c959f", lw=1, ls="--")
        ax.set_yticks(y, [str(c).replace("tom_order", "") for c in d["contrast"]])
        numeric = str(g).replace(".", "", 1).isdigit()
        ax.set_title("averaged over context lengths" if g == "averaged"
                     else f"{g} words" if numeric else str(g), fontsize=10)
        ax.set_ylabel("ToM orders compared")
        ax.set_xlabel("Difference in accuracy")
        ax.grid(alpha=0.3, axis="x")
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    return fig


def _contrast_blocks(answered: pd.DataFrame, level: float) -> list[Any]:
    """The section on which ToM orders differ: the pairwise differences of the cell means at
    each context length and averaged over them, with Tukey's adjustment
    (:func:`tomstats.analysis.marginal.contrasts` on
    :func:`tomstats.analysis.contrasts.anova_grid`)."""
    from tomstats.analysis.contrasts import anova_grid
    from tomstats.analysis.marginal import contrasts

    try:
        grid = anova_grid(answered)
        within = contrasts(grid, "tom_order", "context_words", level=level)
        overall = contrasts(grid, "tom_order", level=level).assign(context_words="averaged")
    except ValueError as exc:  # a design without contrasts: the rest of the page stands
        return [Text(f"No contrasts for this log: {' '.join(str(exc).split())}.", "missing")]
    table = pd.concat([within, overall], ignore_index=True)
    table["context_words"] = table["context_words"].astype(str)
    show = table[["context_words", "contrast", "estimate", "lower", "upper", "p_adjusted"]]
    return [
        Text("Which ToM orders differ, at which context lengths, and by how much: every pair "
             "of ToM orders compared within each context length (simple effects) and "
             "averaged over the lengths, as differences in accuracy. The reference model is "
             "the ANOVA's (the cell means of the questions pooled over the LLMs, the pooled "
             f"residual standard error on {grid.df:.0f} df); p values and {level:.0%} "
             "intervals are adjusted for the pairs of each row group by Tukey's studentized "
             "range, as R's emmeans does. `tomstats contrasts` gives the other contrasts "
             "(polynomial trends, interactions, the LLMs as subjects, a GLMM's probabilities)."),
        Image(figure_png(fig_contrasts(table)), "contrasts",
              f"Pairwise ToM-order differences in accuracy with {level:.0%} Tukey intervals; "
              "an interval that excludes 0 marks a pair that differs."),
        Table(show, caption="ToM-order differences (tomstats.analysis.contrasts)",
              float_format="{:.4f}"),
    ]


def fit_command(source: str, df: pd.DataFrame, columns: Mapping[str, str] | None = None,
                query: str | None = None) -> list[str]:
    """The ``tomstats fit`` command for this log, as an argument list (for :func:`shlex.join`).

    The structural model (equation (1)) only where the design can identify its parameters:
    context length in words (not a column mapped from a count of characters or tokens) with at
    least 3 distinct lengths, the longest at least 1.5 times the shortest, and at least 2 ToM
    orders; else a formula model with the terms that vary, a random intercept per story
    (``story_id`` when the log has it) and per LLM when there are several.
    """
    cmd = ["tomstats", "fit", str(source)]
    if query:
        cmd += ["--query", query]
    mapping = dict(columns or {})
    if "item" not in mapping and "story_id" in df.columns:
        mapping["item"] = "story_id"
    if mapping:
        cmd += ["--map", ",".join(f"{k}={v}" for k, v in mapping.items())]
    orders = pd.unique(df["tom_order"]) if "tom_order" in df.columns else []
    ctx = pd.to_numeric(df.get("context_words", pd.Series(dtype=float)), errors="coerce")
    varies_c = ctx.notna().any() and ctx.min() > 0 and ctx.max() >= 1.5 * ctx.min()
    source_col = str(mapping.get("context_words", "context_words")).lower()
    in_words = not any(u in source_col for u in ("char", "token", "byte", "letter"))
    identified = in_words and varies_c and ctx.nunique() >= 3 and len(orders) >= 2
    if identified:
        cmd += ["--model", "structural"]
    else:
        terms = [t for t, ok in (("tom_order", len(orders) > 1), ("log_context", varies_c))
                 if ok] or ["1"]
        re_terms = ["(1 | item)"]
        if "model" in df.columns and df["model"].nunique() > 1:
            re_terms.insert(0, "(1 | model)")
        cmd += ["--model", f"correct ~ {' + '.join(terms)} + {' + '.join(re_terms)}"]
    cmd += ["--out", "fit.nc"]
    return cmd


def _log_section(df: pd.DataFrame, cells: pd.DataFrame, source: str) -> Section:
    reasons = cells.attrs.get("errors_by_reason", {})
    rows = [{"quantity": "file", "value": source},
            {"quantity": "questions", "value": str(int(cells["n"].sum()))},
            {"quantity": "answered", "value": str(int(cells["n_answered"].sum()))},
            {"quantity": "correct", "value": str(int(cells["n_correct"].sum()))},
            {"quantity": "without an answer",
             "value": str(int(cells["n_errors"].sum()))
             + (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})" if reasons else "")}]
    if "model" in df.columns:
        rows.insert(1, {"quantity": "LLMs", "value": ", ".join(map(str, pd.unique(df["model"])))})
    for c in ("context_words", "tom_order"):
        rows.append({"quantity": f"levels of {c}",
                     "value": ", ".join(f"{v:g}" if isinstance(v, (float, np.floating))
                                        else str(v) for v in sorted(pd.unique(df[c])))})
    hashes = df.attrs.get("config_hashes")
    if isinstance(hashes, Mapping):
        for m, h in hashes.items():
            rows.append({"quantity": f"configuration hash of {m}", "value": str(h)[:16] + "…"})
    if df.attrs.get("log_format"):
        rows.append({"quantity": "log format", "value": str(df.attrs["log_format"])})
    return Section(SECTIONS[0], (
        Text("One row per question. Accuracy and the ANOVA use the answered questions; "
             "questions without an answer (runner errors such as a prompt longer than the "
             "model's context window) are counted, not scored."),
        Table(pd.DataFrame(rows), caption="Evaluation log"),
    ))


def _interval_words(attrs: Mapping[str, Any], level: float, n_boot: int, seed: int) -> str:
    """The sentence on the effect-size intervals of the ANOVA section."""
    unit = attrs.get("cluster")
    if attrs.get("interval") == "bca":
        return (f"Intervals: {level:.0%} cluster bootstrap, {n_boot} resamples of "
                f"{unit or 'rows'} within cells, seed {seed} (BCa).")
    if attrs.get("interval") == "ncf":
        deff = attrs.get("design_effect")
        how = ("rows taken as independent" if unit is None or deff is None
               else f"one {unit} cluster per cell in the pooled table, see the notes"
               if deff != deff  # NaN: the design effect cannot be estimated
               else f"the F tests divided by the design effect of the {unit} clusters, "
                    f"{deff:.3g} in the pooled table")
        return (f"Intervals: {level:.0%} noncentral-F intervals of η² and partial η² "
                f"(Steiger 2004; {how}); --n-boot N gives cluster-bootstrap intervals of "
                "every effect size instead.")
    return "No intervals (--n-boot 0)."


def _anova_blocks(table: pd.DataFrame, group: str | None, with_ci: bool, level: float,
                  n_boot: int, seed: int) -> list[Any]:
    """The ANOVA section's text (design, effect sizes, intervals) and table."""
    n_used = int(table.attrs["n_rows"])
    es = [c for c in EFFECT_SIZES if c in table.columns]
    anova_text = (
        f"Two-way ANOVA of the binary outcome on context length × ToM order (type 2 sums of "
        f"squares, {n_used} answered questions"
        + (", per LLM and pooled over the LLMs" if group else "") + "). Effect sizes: "
        + ", ".join(_ES_LABELS[c] for c in es) + "; the residual row's η² is the share of "
        "total variance the factors leave unexplained (the paper's residual share). "
        + _interval_words(table.attrs, level, n_boot, seed))
    blocks: list[Any] = [Text(anova_text),
                         Table(_anova_display(table, "model" if group else None),
                               caption="ANOVA table (tomstats.analysis.row_anova)",
                               float_format="{:.4g}")]
    # why a row shows — (NaN) or an infinite F: a constant outcome, no error variance
    blocks += [Text(n[0].upper() + n[1:], "note") for n in anova_notes(table)]
    return blocks


def log_document(
    source: str | os.PathLike[str],
    *,
    columns: Mapping[str, str] | None = None,
    query: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    interval: str = DEFAULT_INTERVAL,
) -> Document:
    """Build the report :class:`~tomstats.report._document.Document` for an evaluation log.

    Parameters
    ----------
    source : path
        The runner's ``.jsonl`` log or a ``.csv``/``.tsv``/``.parquet`` table, one row per
        question, with columns ``correct``, ``context_words``, ``tom_order`` (and ``model``,
        ``error_category`` when present; rename others with ``columns``).
    columns : mapping, optional
        ``{standard name: your column}`` (``tomstats fit --map``).
    query : str, optional
        A pandas query on the file's columns, applied first.
    n_boot : int, default 2000
        Bootstrap resamples of the effect-size intervals with ``interval="bca"`` (0 leaves
        the intervals out, whichever the interval).
    interval : {"ncf", "bca"}, default ``"ncf"``
        The effect-size intervals (:data:`tomstats.analysis.log_anova.DEFAULT_INTERVAL`):
        noncentral F for η² and partial η², or the cluster bootstrap's BCa for every one.
    seed : int, default 0
        Seed of the bootstrap.
    level : float, default 0.95
        Coverage of the Wilson and bootstrap intervals.

    Raises
    ------
    ValueError
        Bad input, as ``tomstats summarize`` / ``tomstats anova`` report it.
    """
    src = str(source)
    # only the columns the page uses (the bootstrap's unit: story_id, else item_id or item)
    df = load_table(source, dict(columns or {}), query,
                    needed=["correct", "context_words", "tom_order"],
                    optional=["model", "status", "error_category", "story_id", "item_id",
                              "item", *_PAIRED_READ])
    group = "model" if "model" in df.columns and df["model"].nunique() > 1 else None
    by = "model" if "model" in df.columns else None
    cells = summarize(df, by=[by] if by else [], level=level)
    with_ci = n_boot > 0
    answered = df[outcome(df, "correct").notna().to_numpy()]  # summarize counts the others
    try:
        table = log_anova(answered, by=group, ci=level if with_ci else None,
                          n_boot=max(int(n_boot), 1), seed=seed, interval=interval)
    except ValueError as exc:  # a design the ANOVA cannot take: the rest of the page stands
        table, why = None, " ".join(str(exc).split())

    acc_blocks: list[Any] = [
        Image(figure_png(fig_accuracy(cells, by)), "accuracy",
              f"Accuracy by context length and ToM order (the simulation paper's Figure 2) "
              f"with {level:.0%} Wilson intervals; one panel per LLM. Cells without answers "
              "are left out."),
        Table(_accuracy_table(cells, by),
              caption=f"Accuracy [{level:.0%} Wilson interval] per cell"),
    ]
    if table is None:
        anova_blocks: list[Any] = [Text(f"No ANOVA for this log: {why}.", "missing")]
    else:
        anova_blocks = _anova_blocks(table, group, with_ci, level, n_boot, seed)

    tax = cells[[*([by] if by else []), "context_words", "tom_order", "n", "n_correct",
                 *ERROR_COLUMNS, "n_errors"]].rename(columns={"n_correct": "correct",
                                                              "n_errors": "no answer"})
    tax = tax.astype(object).where(tax.notna(), None)  # a missing count shows as —
    tax_blocks: list[Any] = [
        Text("StorySim's error taxonomy of the wrong answers: the first location the agents "
             "shared (first common location), the target's last location (recency), no "
             "location named (refusal or unparseable), another location (other)."),
    ]
    if cells[list(ERROR_COLUMNS)].isna().all().all():
        tax_blocks.append(Text("The table has no error_category column, so wrong answers "
                               "cannot be classified (map one with --map "
                               "error_category=COLUMN).", "missing"))
    else:
        tax_blocks.append(Image(figure_png(fig_taxonomy(cells, by)), "taxonomy",
                                "Share of the questions of each cell by answer category."))
    tax_blocks.append(Table(tax, caption="Answers per cell by category (counts)"))

    fit_cmd = fit_command(src, df, columns, query)
    next_rows = pd.DataFrame({
        "step": ["fit the GLMM", "report on the fit"],
        "command": [shlex.join(fit_cmd), "tomstats report fit.nc --out fit.html"]})
    next_blocks = (
        Text("The ANOVA treats every question as independent; the GLMM models the "
             "binary outcome on the logit scale with random effects for stories (and LLMs). "
             "Run:"),
        Table(next_rows, caption="Commands"),
    )
    models = ", ".join(map(str, pd.unique(df["model"]))) if "model" in df.columns else "—"
    subtitle = (f"tomstats {__version__} · {Path(src).name} · {models} · "
                f"{int(cells['n'].sum())} questions")
    sections = (
        _log_section(df, cells, src),
        Section(SECTIONS[1], tuple(acc_blocks)),
        Section(SECTIONS[2], tuple(_paired_blocks(df, level))),
        Section(SECTIONS[3], tuple(anova_blocks)),
        Section(SECTIONS[4], tuple(_contrast_blocks(answered, level))),
        Section(SECTIONS[5], tuple(_within_story_blocks(answered, group, level))),
        Section(SECTIONS[6], tuple(tax_blocks)),
        Section(SECTIONS[7], next_blocks),
    )
    return Document("tomstats evaluation log report", subtitle, sections)


def write_log_report(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    fmt: str = "html",
    **kwargs: Any,
) -> Path:
    """Write the report for an evaluation log as HTML (one file) or Markdown + PNGs.

    ``kwargs`` go to :func:`log_document`. Returns the HTML file or ``out/report.md``.
    """
    check_output(out, fmt)  # fail on a bad --out before any work
    return write_document(log_document(source, **kwargs), out, fmt)

