"""Planning a power run: the study sizes of every curve, checked and sized before it starts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tomstats._guards import Footprint
from tomstats.design import Design
from tomstats.model import Params
from tomstats.planning.analyses import PlannedTest, parse_test
from tomstats.planning.studies import CELLS_PER_CHUNK, StudySize, per_item
from tomstats.simulation.study import PowerSpec, StudyConfig

__all__ = ["CurvePlan", "capability_spread", "curve_variants", "plan_curve", "power_footprint"]


@dataclass(frozen=True)
class CurvePlan:
    """Everything one curve along ``spec.along`` needs, checked before any simulation."""

    cfg: StudyConfig
    spec: PowerSpec
    tests: tuple[PlannedTest, ...]
    settings: tuple[StudySize, ...]
    kinds: tuple[tuple[str, Any], ...]
    capability: np.ndarray
    cap_sd: float
    fixed: Mapping[str, float]
    pdraws: Any
    footprint: Footprint
    label: str = "power"


def curve_variants(cfg: StudyConfig, spec: PowerSpec
              ) -> list[tuple[StudyConfig, PowerSpec, dict[str, float]]]:
    """One (study, spec, fixed parameters) per value of ``spec.by`` (the pair itself without
    ``by``): the curve at that value is what a run with that setting and the same seed gives.
    A parameter set by ``by`` is also fixed over posterior draws (as ``along`` does)."""
    if spec.by is None:
        return [(cfg, spec, {})]
    out = []
    for v in spec.by_values:
        c, s_, fixed = cfg, dataclasses.replace(spec, by=None, by_values=()), {}
        if spec.by == "questions_per_cell":
            c = dataclasses.replace(cfg, design=cfg.design.with_(n_per_cell=int(v)))
        elif spec.by in ("items_per_cell", "n_llms"):
            s_ = dataclasses.replace(s_, **{spec.by: int(v)})
        else:
            c = dataclasses.replace(cfg, params=cfg.params.replace(**{spec.by: float(v)}))
            fixed = {spec.by: float(v)}
        out.append((c, s_, fixed))
    return out


def plan_curve(cfg: StudyConfig, spec: PowerSpec, pdraws: Any, fixed: Mapping[str, float]
          ) -> CurvePlan:
    """Check one curve's design and tests and estimate its size (no simulation)."""
    parsed = tuple(parse_test(t) for t in spec.tests)
    design = cfg.design
    capability = np.asarray(design.capability, dtype=float)
    cap_sd = capability_spread(spec, capability)
    n_fit = None if pdraws is None else len(pdraws.llm)
    settings = tuple(study_size(spec, design, v, n_fit) for v in spec.values)
    check_design(parsed, design, settings)
    kinds: list[tuple[str, Any]] = [("plug-in", None)]
    if pdraws is not None:
        mean = Params(*(np.asarray(getattr(pdraws.params, f)).mean(0) for f in
                        ("alpha", "gamma", "delta", "sigma")))
        kinds = [("plug-in", (Params(*(np.asarray(getattr(mean, f))[None] for f in
                                       ("alpha", "gamma", "delta", "sigma"))),
                              pdraws.capability.mean(0)[None])),
                 ("assurance", (pdraws.params, pdraws.capability))]
    fp = power_footprint(spec, parsed, design, settings, len(kinds))
    return CurvePlan(cfg, spec, parsed, settings, tuple(kinds), capability, cap_sd, fixed, pdraws,
                 fp)


def capability_spread(spec: PowerSpec, capability: np.ndarray) -> float:
    """:math:`s_m`, the sd of the capabilities drawn per study when ``n_llms`` is set:
    ``spec.capability_sd``, else the sd of the design's levels (``ddof=1``), else 0.15 for a
    design with one level."""
    if spec.capability_sd is not None:
        return float(spec.capability_sd)
    return float(np.std(capability, ddof=1)) if capability.size > 1 else 0.15


def study_size(spec: PowerSpec, design: Design, value: float, n_fit_llms: int | None
             ) -> StudySize:
    n = int(design.n_per_cell.flat[0])
    items = spec.items_per_cell
    n_llms = spec.n_llms or (n_fit_llms if n_fit_llms is not None else len(design.capability))
    if spec.along == "questions_per_cell":
        n = int(value)
    elif spec.along == "items_per_cell":
        items = int(value)
    elif spec.along == "n_llms":
        n_llms = int(value)
    if items is not None and items > n:
        raise ValueError(f"items_per_cell ({items}) must not exceed questions_per_cell ({n}): "
                         "every item (story) needs at least one question")
    return StudySize(n=n, items=None if items == n else items, n_llms=n_llms,
                     within_story=spec.story_design == "within")


def check_design(tests: Sequence[PlannedTest], design: Design,
                 settings: Sequence[StudySize]) -> None:
    n_c, n_t = design.shape
    if not design.balanced:
        raise ValueError("power needs a balanced design (questions_per_cell a single number); "
                         "unbalanced designs are not supported yet")
    for t in tests:
        if n_c < 2 or n_t < 2:
            raise ValueError(f"test {t.name!r} needs at least 2 context lengths and 2 ToM orders "
                             f"in the design, got {n_c} × {n_t}")
        if t.analysis == "anova" and min(s.n for s in settings) < 2:
            raise ValueError(f"test {t.name!r}: questions_per_cell must be >= 2 (one question a "
                             "cell leaves the ANOVA no residual degrees of freedom)")
        if t.analysis == "rm-anova" and min(s.n_llms for s in settings) < 2:
            raise ValueError(f"test {t.name!r} has the LLMs as subjects: it needs at least 2 "
                             f"LLMs, got {min(s.n_llms for s in settings)} (set n_llms or more "
                             "capability levels)")
        if t.analysis == "glmm" and min(s.n_llms for s in settings) < 2:
            raise ValueError(f"test {t.name!r} fits (1 | llm): it needs at least 2 LLMs, got "
                             f"{min(s.n_llms for s in settings)} (set n_llms or more capability "
                             "levels)")


# rough single-core costs for the size guard (about 5-10x above what a 2-CPU machine measures)
_SECONDS_PER_STUDY = {"anova": 5e-5, "glm": 5e-4, "glmm": 0.05}


_SECONDS_PER_ROW = {"anova": 3e-8, "glm": 3e-8, "glmm": 5e-6}


def power_footprint(spec: PowerSpec, tests: Sequence[Any], design: Design,
                    settings: Sequence[StudySize], n_kinds: int = 1) -> Footprint:
    r"""Memory and time of a power run, estimated before it starts.

    A study of setting :math:`s` has :math:`r_s = L_s \cdot C \cdot q_s` rows (LLMs × cells ×
    items or questions per cell; one row per cell and LLM when only the per-LLM ANOVA and GLM
    tests run on the exact path). Studies are dispatched in chunks of at most 2^21 rows (200
    studies when models are fitted), so memory is about
    :math:`160\,\max_s \max(r_s, \text{chunk rows})` bytes; time is
    :math:`R \cdot K \sum_s (a + b\, r_s)` with per-study and per-row costs :math:`a, b` of the
    slowest analysis (ANOVA, GLM or GLMM).
    """
    analyses = {t.analysis for t in tests}
    slowest = "glmm" if "glmm" in analyses else "glm" if "glm" in analyses else "anova"
    cells = design.shape[0] * design.shape[1]
    rows, seconds = 0.0, 0.0
    for st in settings:
        per_row = per_item(st, tests) or spec.path != "exact"
        r = float(st.n_llms) * cells * (float(st.items or st.n) if per_row else 1.0)
        rows = max(rows, r)
        seconds += _SECONDS_PER_STUDY[slowest] + _SECONDS_PER_ROW[slowest] * r
    seconds *= float(spec.replicates) * n_kinds
    chunk_rows = max(rows, min(float(spec.replicates) * rows, float(CELLS_PER_CHUNK)))
    detail = (f"{int(spec.replicates):,} studies × {len(settings)} value(s) of {spec.along}, "
              f"up to {int(rows):,} rows per study, {slowest.upper()} tests")
    return Footprint("power run", 160.0 * chunk_rows, seconds, detail)
