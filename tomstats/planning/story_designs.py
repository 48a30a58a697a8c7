r"""Between-story or within-story design: the questions and LLM calls each needs for a power.

A **between-story** design draws a new story for every context length: :math:`C T I` stories
with effects :math:`\varepsilon_{cti}`, so a length contrast is also a contrast between
stories. A **within-story** design (length ladders) tells story :math:`i` of order :math:`t`
at all :math:`C` lengths with one effect :math:`\varepsilon_{ti}` (:math:`T I` stories), and
a model with ``(1 | story)`` estimates the context effect within stories
(:class:`tomstats.simulation.study.PowerSpec`'s ``story_design``). Both ask the same questions
per cell, so the LLM calls differ only through the questions per cell each needs.

:func:`compare_story_designs` runs :func:`tomstats.planning.run.power` along
``questions_per_cell`` once per study (parameter set) and story design, with the same tests,
seed and number of simulated studies, and reads off, per test:

- the power :math:`\hat\pi_d(n) = r/N` at each number of questions per cell :math:`n` (with
  its 95 % Wilson interval, :func:`tomstats.analysis.intervals.wilson_interval`);
- :math:`n^*_d`, the questions per cell needed for the target power :math:`\pi^*`: the
  linear interpolation between the last value :math:`n_{k-1}` below the target and the first
  :math:`n_k` at or above it,
  :math:`\tilde n = n_{k-1} + (n_k - n_{k-1})\,\frac{\pi^* - \hat\pi(n_{k-1})}{\hat\pi(n_k) -
  \hat\pi(n_{k-1})}`, rounded up, :math:`n^* = \lceil\tilde n\rceil`
  (:meth:`tomstats.planning.result.PowerResult.targets`); :math:`n^* = n_1` when the smallest
  value already reaches it ("or fewer"), none when no value does;
- the cost at :math:`n^*`: questions per LLM :math:`Q = C T n^*`, LLM calls per study
  :math:`L C T n^*` (one call per question and LLM), and the stories to write, :math:`C T I`
  (between) or :math:`T I` (within), with :math:`I` the stories per cell (``items_per_cell``,
  or :math:`n^*`: one question per story);
- for the within-story design, the ratio of its LLM calls to the between-story design's,
  :math:`n^*_\text{within} / n^*_\text{between}`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tomstats._io import ensure_writable_dir, staged_files
from tomstats.design import Design
from tomstats.planning.plan import capability_spread
from tomstats.planning.result import PowerResult, as_number
from tomstats.simulation.study import STORY_DESIGNS, PowerSpec, StudyConfig, load_study

__all__ = ["COMPARISON_SUMMARY", "COMPARISON_TABLE", "StoryDesignComparison",
           "compare_story_designs"]

#: The files :meth:`StoryDesignComparison.write` writes.
COMPARISON_TABLE = "story_designs.csv"
COMPARISON_SUMMARY = "story_designs.json"


@dataclass(frozen=True)
class StoryDesignComparison:
    """Result of :func:`compare_story_designs`.

    Attributes
    ----------
    curves : pandas.DataFrame
        One row per (study, story design, value, test): ``power``, ``ci_low``, ``ci_high``
        (95 % Wilson), ``n_fits``, ``n_failed``, ``n_rejected``.
    needs : pandas.DataFrame
        One row per (study, test, story design): ``reached``, ``interpolated``
        (:math:`\\tilde n`), ``questions_per_cell`` (:math:`n^*`), ``or_fewer`` (reached at
        the smallest value), ``questions_per_llm``, ``llm_calls``, ``stories`` and
        ``calls_vs_between`` (within-story rows); missing values where the target is not
        reached.
    studies : dict
        Per study label: its parameters, capabilities, LLMs and cells.
    settings : dict
        Values, tests, simulated studies per value, seed, level, target, ``n_llms``,
        ``items_per_cell`` and the seconds the run took.
    """

    curves: pd.DataFrame
    needs: pd.DataFrame
    studies: dict[str, dict[str, Any]]
    settings: dict[str, Any]

    def __str__(self) -> str:
        """The table of :func:`format_comparison`."""
        return format_comparison(self)

    def __repr__(self) -> str:
        s = self.settings
        return (f"StoryDesignComparison({len(self.studies)} studies × 2 story designs, "
                f"questions_per_cell {list(s['values'])}, tests {', '.join(s['tests'])}, "
                f"{s['replicates']} studies per value)")

    def write(self, out: str | os.PathLike[str]) -> list[Path]:
        """Write :data:`COMPARISON_TABLE` (:attr:`curves`) and :data:`COMPARISON_SUMMARY`
        (settings, studies, needs) into the folder ``out``, each file staged and moved in
        whole."""
        out = ensure_writable_dir(out)
        with staged_files(out) as staged:
            self.curves.to_csv(staged.stage / COMPARISON_TABLE, index=False)
            needs = [{k: _plain(v) for k, v in r.items()}
                     for r in self.needs.to_dict(orient="records")]
            doc = {"settings": self.settings, "studies": self.studies, "needs": needs}
            (staged.stage / COMPARISON_SUMMARY).write_text(
                json.dumps(doc, indent=2, default=_plain) + "\n", encoding="utf-8")
        return staged.written


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _as_studies(studies: Any) -> dict[str, StudyConfig]:
    """``{label: StudyConfig}`` from one study, a sequence of them or a mapping; paths are
    labelled by their file name without the suffix, the rest ``study 1``, ``study 2``…"""
    if studies is None:
        studies = [StudyConfig()]
    if isinstance(studies, StudyConfig | Design | str | os.PathLike):
        studies = [studies]
    if isinstance(studies, Mapping):
        items = [(str(k), v) for k, v in studies.items()]
    elif isinstance(studies, Sequence):
        items = [(Path(v).stem if isinstance(v, str | os.PathLike) else f"study {i + 1}", v)
                 for i, v in enumerate(studies)]
    else:
        raise TypeError(f"studies must be a StudyConfig, a Design, a simulation TOML path, "
                        f"or a sequence or mapping of them, got {type(studies).__name__}")
    if not items:
        raise ValueError("studies: give at least one study")
    labels = [label for label, _ in items]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"studies: two studies are labelled {twice[0]!r}; give a mapping "
                         "{label: study} with distinct labels")
    out: dict[str, StudyConfig] = {}
    for label, v in items:
        if isinstance(v, str | os.PathLike):
            v = load_study(v)
        elif isinstance(v, Design):
            v = StudyConfig(design=v)
        elif not isinstance(v, StudyConfig):
            raise TypeError(f"studies[{label!r}] must be a StudyConfig, a Design or a "
                            f"simulation TOML path, got {type(v).__name__}")
        out[label] = v
    return out


def _study_record(cfg: StudyConfig, spec: PowerSpec) -> dict[str, Any]:
    """What a study simulated: equation (1)'s parameters, the LLMs and the cells."""
    cap = np.asarray(cfg.design.capability, dtype=float)
    n_c, n_t = cfg.design.shape
    drawn = spec.n_llms is not None
    sd = capability_spread(spec, cap)  # what power() draws the capabilities with
    return {"params": cfg.params.to_dict(), "capability": [float(c) for c in cap],
            "n_llms": int(spec.n_llms) if drawn else int(cap.size),
            "capabilities_drawn": drawn, "capability_sd": sd if drawn else None,
            "cells": [int(n_c), int(n_t)]}


def compare_story_designs(
    studies: Any = None,
    *,
    values: Sequence[int] | None = None,
    tests: Sequence[str] | str | None = None,
    alpha: float | None = None,
    replicates: int | None = None,
    seed: int | None = None,
    target: float | None = None,
    n_llms: int | None = None,
    items_per_cell: int | None = None,
    allow_failures: bool = False,
    progress: bool | None = None,
    allow_large: bool = False,
) -> StoryDesignComparison:
    """Power, questions per cell and LLM calls of a between- and a within-story design.

    For each study and each story design (``"between"``, ``"within"``),
    :func:`tomstats.power` simulates ``replicates`` studies at each number of questions per
    cell in ``values`` and runs ``tests``; the needed questions per cell :math:`n^*` (linear
    interpolation of the power curve at ``target``, rounded up) and its costs follow as the
    module docstring states. The compiled study programs depend only on the study sizes, so
    studies with the same design and number of LLMs share them.

    Parameters
    ----------
    studies : StudyConfig, Design, path, or a sequence or mapping of them, optional
        The parameter sets (default: the package's study). A mapping gives the labels; a
        path is labelled by its file name without suffix.
    values : sequence of int, optional
        Questions per cell and LLM (default: the first study's ``[power]`` values when its
        ``along`` is ``questions_per_cell``).
    tests, alpha, replicates, seed, target, n_llms, items_per_cell
        As for :func:`tomstats.power`; default: the first study's ``[power]`` table, used for
        every study. The GLMM tests (``glmm-wald:alpha`` for the context effect,
        ``glmm-wald:delta`` for the interaction) are the ones that model the stories.
    allow_failures, progress, allow_large
        As for :func:`tomstats.power`.

    Returns
    -------
    StoryDesignComparison

    Raises
    ------
    ValueError
        Bad input, naming the argument and value, before any simulation.
    """
    cfgs = _as_studies(studies)
    first = next(iter(cfgs.values())).power
    if values is None:
        if first.along != "questions_per_cell":
            raise ValueError(f"values: the first study's [power] table varies {first.along!r}, "
                             "not questions_per_cell; give values (questions per cell)")
        values = first.values
    if isinstance(values, str) or not isinstance(values, Sequence) or not len(values):
        raise ValueError(f"values must be a non-empty sequence of questions per cell, got "
                         f"{values!r}")
    spec = dataclasses.replace(first, by=None, by_values=()).replace(
        along="questions_per_cell", values=tuple(values), tests=tests, alpha=alpha,
        replicates=replicates, seed=seed, target=target, n_llms=n_llms,
        items_per_cell=items_per_cell)
    if spec.items_per_cell is not None and spec.items_per_cell > min(spec.values):
        raise ValueError(f"items_per_cell ({spec.items_per_cell}) must not exceed the smallest "
                         f"questions_per_cell ({as_number(min(spec.values))})")
    t0 = time.perf_counter()
    results = {(label, d): _curve(cfg, spec, d, allow_failures, progress, allow_large)
               for label, cfg in cfgs.items() for d in STORY_DESIGNS}
    curves = pd.concat([_curve_rows(r, label, d) for (label, d), r in results.items()],
                       ignore_index=True)
    needs = _needs(results, cfgs, spec)
    settings = {"values": [as_number(v) for v in spec.values], "tests": list(spec.tests),
                "replicates": int(spec.replicates), "seed": int(spec.seed),
                "alpha": float(spec.alpha), "target": float(spec.target),
                "n_llms": spec.n_llms, "items_per_cell": spec.items_per_cell,
                "seconds": time.perf_counter() - t0}
    return StoryDesignComparison(curves, needs,
                                 {k: _study_record(c, spec) for k, c in cfgs.items()},
                                 settings)


def _curve(cfg: StudyConfig, spec: PowerSpec, design: str, allow_failures: bool,
           progress: bool | None, allow_large: bool) -> PowerResult:
    """One power curve: the study's design and parameters with the shared settings."""
    from tomstats.planning.run import power

    study = dataclasses.replace(cfg, power=dataclasses.replace(spec, story_design=design))
    return power(study, allow_failures=allow_failures, progress=progress,
                 allow_large=allow_large)


def _curve_rows(res: PowerResult, label: str, design: str) -> pd.DataFrame:
    df = res.frame()
    df = df[df["kind"] == "plug-in"].drop(columns=["kind", "along", "estimate"])
    df.insert(0, "story_design", design)
    df.insert(0, "study", label)
    return df.rename(columns={"value": "questions_per_cell"})


def _needs(results: Mapping[tuple[str, str], PowerResult], cfgs: Mapping[str, StudyConfig],
           spec: PowerSpec) -> pd.DataFrame:
    """One row per (study, test, design): :math:`n^*` and its costs."""
    smallest = min(spec.values)
    rows = []
    for label, cfg in cfgs.items():
        n_c, n_t = cfg.design.shape
        n_l = spec.n_llms if spec.n_llms is not None else len(cfg.design.capability)
        per_design = {d: {t["test"]: t for t in results[(label, d)].target_records()
                          if t["kind"] == "plug-in"} for d in STORY_DESIGNS}
        for test in spec.tests:
            need: dict[str, int | None] = {}
            for d in STORY_DESIGNS:
                t = per_design[d][test]
                n = None
                if t["reached"]:
                    n = int(math.ceil(float(t["interpolated"]) - 1e-9))
                need[d] = n
                items = spec.items_per_cell if spec.items_per_cell is not None else n
                row = {"study": label, "test": test, "story_design": d,
                       "reached": bool(t["reached"]),
                       "interpolated": None if n is None else float(t["interpolated"]),
                       "questions_per_cell": n,
                       "or_fewer": bool(t["reached"] and t["value"] == smallest),
                       "questions_per_llm": None if n is None else n_c * n_t * n,
                       "llm_calls": None if n is None else n_l * n_c * n_t * n,
                       "stories": None if items is None else
                       (n_c * n_t * items if d == "between" else n_t * items),
                       "calls_vs_between": None}
                if d == "within" and n is not None and need["between"]:
                    row["calls_vs_between"] = n / need["between"]
                rows.append(row)
    return pd.DataFrame(rows)


def _cell(value: Any, fmt: str = "{:,}") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return fmt.format(value)


def format_comparison(cmp: StoryDesignComparison) -> str:
    """The comparison as a text table: per study, test and story design, the power at each
    number of questions per cell, the questions per cell needed for the target (``≤ n``:
    reached at the smallest value; ``> n``: at none), the questions per LLM, the LLM calls
    per study and the stories to write at that size, and the within-story design's LLM calls
    as a share of the between-story design's; then the studies' parameters and the Monte
    Carlo error."""
    s, cv = cmp.settings, cmp.curves
    values = s["values"]
    head = ["study", "test", "design",
            "power at " + " / ".join(str(v) for v in values), "questions per cell",
            "questions per LLM", "LLM calls", "stories", "calls vs between"]
    rows = []
    for r in cmp.needs.itertuples(index=False):
        sub = cv[(cv["study"] == r.study) & (cv["story_design"] == r.story_design)
                 & (cv["test"] == r.test)].sort_values("questions_per_cell")
        powers = " / ".join(_cell(p, "{:.2f}") for p in sub["power"])
        if not r.reached:
            need = f"> {as_number(max(values))}"
        else:
            need = ("≤ " if r.or_fewer else "") + str(int(r.questions_per_cell))
        ratio = r.calls_vs_between
        rows.append([r.study, r.test, r.story_design, powers, need,
                     _cell(_int(r.questions_per_llm)), _cell(_int(r.llm_calls)),
                     _cell(_int(r.stories)),
                     "" if r.story_design == "between" else _cell(_num(ratio), "{:.2f}")])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    left = 3  # study, test and design left-aligned; the numbers right-aligned

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [f"questions per cell for {s['target']:.0%} power: between-story design (a new story "
           f"at every context length) and within-story design (each story told at every "
           f"length)",
           f"{s['replicates']:,} simulated studies per value and design, seed {s['seed']}, level "
           f"{s['alpha']}; one LLM call per question and LLM",
           line(head)]
    out += [line(row) for row in rows]
    for label, st in cmp.studies.items():
        p = st["params"]
        cap = st["capability"]
        llms = (f"{st['n_llms']} LLMs, capabilities drawn per study from N({np.mean(cap):.3g}, "
                f"{st['capability_sd']:.3g}²)" if st["capabilities_drawn"] else
                f"{st['n_llms']} LLMs, capabilities {', '.join(f'{c:.3g}' for c in cap)}")
        out.append(f"{label}: alpha {p['alpha']:.3g}, gamma {p['gamma']:.3g}, delta "
                   f"{p['delta']:.3g}, sigma {p['sigma']:.3g}; {llms}; "
                   f"{st['cells'][0]} × {st['cells'][1]} cells")
    half = (cv["ci_high"] - cv["ci_low"]) / 2
    out.append(f"95% Monte Carlo intervals of the powers: ±{half.min():.2f} to "
               f"±{half.max():.2f} (Wilson)")
    return "\n".join(out)


def _int(v: Any) -> int | None:
    v = _num(v)
    return None if v is None else int(v)


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if not math.isfinite(f) else f
