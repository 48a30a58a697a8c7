"""Loaders for real LLM outcome tables → the GLMMs' standard long frame.

Each loader reads one table of real per-item (or aggregate) results of language models on
theory-of-mind questions and returns a :class:`pandas.DataFrame` with the standard columns
of :mod:`tomstats.glmm.data` (``correct`` or ``successes``/``trials``, ``model``, ``item``,
``tom_order``, ``context_words`` where the source has them) plus the source's covariates.
The tables are the ones described in the shared data README (StorySim per-item results from
the repository ngetachew/StorySim, ToMBench results from joel-wu/ToMBench, CharToM-QA's
multiple-choice table from Encyclomen/CharToM-QA); each loader takes the file path (or the
folder holding it).

=======================  =================================================================
loader                   rows → model
=======================  =================================================================
load_storysim_triplets   one model × story × question; ToM order 2 (second-order belief)
                         vs 0 (world-model controls); 8 models crossed with 100 stories;
                         ``failed_run`` rows dropped. Context fixed (~185 words).
load_storysim_mislead    one model × story × question; ``mislead_distance`` (events
                         between the critical event and the end) as covariate.
load_tombench            one model run × item, binomial (``n_correct`` of ``n_tries``);
                         ``context_words`` = English story length (8–164 words).
load_chartom             one model × language × ToM dimension × context window, binomial
                         counts ``k_implied`` of ``n_questions``; ``context_tokens``
                         0/1000/2000 (no words: the windows are counted in tokens).
load_evaluation_log      the runner's JSONL log (e.g. the project's SmolLM2 run);
                         ``item`` = story id (the questions of one story share it).
=======================  =================================================================
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "STORYSIM_FILE",
    "TOMBENCH_FILE",
    "CHARTOM_FILE",
    "load_storysim",
    "load_storysim_triplets",
    "load_storysim_mislead",
    "load_tombench",
    "load_chartom",
    "load_evaluation_log",
]

STORYSIM_FILE = "storysim_items.csv"
TOMBENCH_FILE = "tombench_items.csv"
CHARTOM_FILE = "chartom_mcqa_accuracy.csv"
MISLEAD_EXPERIMENTS = ("mislead_first_order", "mislead_second_order",
                       "mislead_second_order_holes")


def _file(path: str | os.PathLike[str], default_name: str) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / default_name
    if not p.is_file():
        raise FileNotFoundError(f"data file {str(p)!r} does not exist (expected the shared "
                                f"table {default_name!r} or a folder holding it)")
    return p


def _require(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: column(s) {missing} missing; is this the right table? "
                         f"(columns: {list(df.columns)})")


_STORYSIM_COLS = ("experiment", "condition", "model", "item_id", "question_type", "tom_order",
                  "n_words", "correct", "quality_flag")


def load_storysim(path: str | os.PathLike[str], *, drop_failed: bool = True) -> pd.DataFrame:
    """All StorySim rows in the standard columns (``item`` = ``item_id``, the story).

    ``context_words`` = ``n_words`` (story length), ``mislead_distance`` = ``condition`` in
    the mislead experiments (NaN elsewhere), ``n_characters`` = ``condition`` in the
    number-of-characters experiment. Rows with ``quality_flag == "failed_run"`` are dropped
    unless ``drop_failed=False``.
    """
    df = pd.read_csv(_file(path, STORYSIM_FILE))
    _require(df, _STORYSIM_COLS, "StorySim table")
    if drop_failed:
        df = df[df["quality_flag"] != "failed_run"]
    out = pd.DataFrame({
        "experiment": df["experiment"].astype(str),
        "prompt_variant": df["prompt_variant"].fillna("").astype(str),
        "model": df["model"].astype(str),
        "item": df["item_id"].astype(str),
        "question_type": df["question_type"].astype(str),
        "tom_order": df["tom_order"].astype(int),
        "context_words": df["n_words"].astype(float),
        "correct": df["correct"].astype(int),
        "quality_flag": df["quality_flag"].astype(str),
    })
    mis = out["experiment"].isin(MISLEAD_EXPERIMENTS)
    out["mislead_distance"] = np.where(mis, df["condition"], np.nan)
    out["n_characters"] = np.where(out["experiment"] == "number_characters",
                                   df["condition"], np.nan)
    return out.reset_index(drop=True)


def load_storysim_triplets(path: str | os.PathLike[str], *,
                           prompt_variants: Sequence[str] | None = None) -> pd.DataFrame:
    """StorySim triplets: second-order ToM (order 2) vs world-model controls (order 0).

    Eight models crossed with 100 stories (three questions a story: ``tom_2nd_order``,
    ``wm_humans``, ``wm_objects``), prompt variants ``original``, ``spaced``, ``fewshot3``
    (``prompt_variants`` keeps a subset); the failed Llama-3.1-405B ``spaced`` run is
    dropped. Adds ``tom2`` = 1 for the second-order question (= ``tom_order / 2``).
    """
    df = load_storysim(path)
    df = df[df["experiment"] == "triplets"]
    if prompt_variants is not None:
        known = sorted(set(df["prompt_variant"]))
        bad = [v for v in prompt_variants if v not in known]
        if bad:
            raise ValueError(f"prompt_variants: unknown {bad}; known: {known}")
        df = df[df["prompt_variant"].isin(list(prompt_variants))]
    df = df.assign(tom2=(df["tom_order"] == 2).astype(int))
    return df.drop(columns=["mislead_distance", "n_characters"]).reset_index(drop=True)


def load_storysim_mislead(path: str | os.PathLike[str], *,
                          experiments: Sequence[str] = MISLEAD_EXPERIMENTS) -> pd.DataFrame:
    """StorySim mislead experiments (GPT-4 and DeepSeek-R1, 100 stories a distance).

    ``mislead_distance`` (events) is the covariate; ``mislead_10`` = distance / 10. The
    ToM order of a file was inferred from its prompt (see the data README), so order and
    distance are partly confounded within an experiment.
    """
    bad = [e for e in experiments if e not in MISLEAD_EXPERIMENTS]
    if bad or not experiments:
        raise ValueError(f"experiments: unknown {bad or list(experiments)}; choose from "
                         f"{MISLEAD_EXPERIMENTS}")
    df = load_storysim(path)
    df = df[df["experiment"].isin(list(experiments))]
    df = df.assign(mislead_10=df["mislead_distance"] / 10.0)
    return df.drop(columns=["n_characters", "prompt_variant"]).reset_index(drop=True)


def load_tombench(path: str | os.PathLike[str], *,
                  prompt_lang: Sequence[str] | None = None) -> pd.DataFrame:
    """ToMBench items as binomial counts: ``successes`` of ``trials`` tries per run × item.

    ``model`` = ``run_dir`` (one quantised/distilled model run), ``item`` =
    ``task:item_idx`` (items are shared by the runs), ``context_words`` =
    ``story_words_en``, ``story_100`` = words / 100; covariates ``base_model``,
    ``quantization``, ``prompt_lang``, ``task``, ``ability``. No ``tom_order`` column: the
    shared results lack the false-belief tasks, so there is no ToM-order contrast.
    """
    df = pd.read_csv(_file(path, TOMBENCH_FILE))
    _require(df, ("run_dir", "base_model", "quantization", "prompt_lang", "task", "ability",
                  "item_idx", "story_words_en", "n_tries", "n_correct"), "ToMBench table")
    if prompt_lang is not None:
        df = df[df["prompt_lang"].isin(list(prompt_lang))]
        if df.empty:
            raise ValueError(f"prompt_lang={list(prompt_lang)} keeps no rows")
    out = pd.DataFrame({
        "model": df["run_dir"].astype(str),
        "item": df["task"].astype(str) + ":" + df["item_idx"].astype(str),
        "context_words": df["story_words_en"].astype(float),
        "successes": df["n_correct"].astype(int),
        "trials": df["n_tries"].astype(int),
        "base_model": df["base_model"].astype(str),
        "quantization": df["quantization"].astype(str),
        "prompt_lang": df["prompt_lang"].astype(str),
        "task": df["task"].astype(str),
        "ability": df["ability"].astype(str),
    })
    out["story_100"] = out["context_words"] / 100.0
    return out.reset_index(drop=True)


def load_chartom(path: str | os.PathLike[str], *, consistent_only: bool = False,
                 language: Sequence[str] | None = None) -> pd.DataFrame:
    """CharToM-QA multiple-choice aggregates as binomial counts by context window.

    ``successes`` = ``k_implied`` = round(accuracy · n / 100), ``trials`` = ``n_questions``;
    ``context_tokens`` = 0/1000/2000 (the plot window before the question; 0 = no plot
    context) and ``context_k`` = tokens / 1000; covariates ``language``, ``tom_dimension``.
    ``consistent_only`` keeps the 140 of 144 rows whose printed accuracy the implied count
    reproduces. Chance accuracy is 25 % (four options).
    """
    df = pd.read_csv(_file(path, CHARTOM_FILE))
    _require(df, ("language", "model", "tom_dimension", "context_len", "n_questions",
                  "k_implied", "k_consistent", "accuracy_pct"), "CharToM-QA table")
    if consistent_only:
        df = df[df["k_consistent"].astype(int) == 1]
    if language is not None:
        df = df[df["language"].isin(list(language))]
        if df.empty:
            raise ValueError(f"language={list(language)} keeps no rows")
    out = pd.DataFrame({
        "model": df["model"].astype(str),
        "language": df["language"].astype(str),
        "tom_dimension": df["tom_dimension"].astype(str),
        "context_tokens": df["context_len"].astype(int),
        "successes": df["k_implied"].astype(int),
        "trials": df["n_questions"].astype(int),
        "accuracy_pct": df["accuracy_pct"].astype(float),
    })
    out["context_k"] = out["context_tokens"] / 1000.0
    return out.reset_index(drop=True)


def load_evaluation_log(path: str | os.PathLike[str], *, ok_only: bool = True) -> pd.DataFrame:
    """A runner log (JSON Lines) in the standard columns; ``item`` = ``story_id``.

    Rows whose ``status`` is not ``"ok"`` (errors, timeouts) are dropped when ``ok_only``.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"log file {str(p)!r} does not exist")
    df = pd.read_json(p, lines=True)
    _require(df, ("model", "tom_order", "context_words", "correct"), "evaluation log")
    if ok_only and "status" in df.columns:
        df = df[df["status"] == "ok"]
    if df["correct"].isna().any():
        df = df[df["correct"].notna()]
    out = pd.DataFrame({
        "model": df["model"].astype(str),
        "item": (df["story_id"] if "story_id" in df.columns else df["item_id"]).astype(str),
        "question": df["item_id"].astype(str) if "item_id" in df.columns else "",
        "tom_order": df["tom_order"].astype(int),
        "context_words": df["context_words"].astype(float),
        "correct": df["correct"].astype(int),
    })
    for c in ("question_type", "mislead_distance", "n_characters"):
        if c in df.columns:
            out[c] = df[c].to_numpy()
    return out.reset_index(drop=True)
