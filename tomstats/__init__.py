"""tomstats: separate theory-of-mind order from context length in LLM evaluations.

Stages (each a module with a small public surface; the main names are re-exported here):

- :mod:`tomstats.model` — equation (1), its parameters and expected cell accuracies;
- :mod:`tomstats.design` — factorial designs (the paper's 5×3 by default);
- :mod:`tomstats.simulate` — the JAX simulator (exact counts and per-question draws);
- :mod:`tomstats.anova` — two-way ANOVA with η², partial η², F, from rows or cell counts;
- :mod:`tomstats.sensitivity` — the 7×7 γ × α sensitivity grid;
- :mod:`tomstats.calibration` — default parameters fitted to the paper's printed numbers;
- :mod:`tomstats.study` — simulation TOML files (:class:`StudyConfig`, :class:`PowerSpec`);
- :mod:`tomstats.reproduce` — the paper in one call;
- :mod:`tomstats.power` — simulation-based power and assurance (``tomstats.power(...)``);
- :mod:`tomstats.stories`, :mod:`tomstats.evaluate`, :mod:`tomstats.glmm`,
  :mod:`tomstats.report`, :mod:`tomstats.figures` — story generator, runner, GLMMs,
  reports and figures (imported on first use: ``tomstats.glmm.fit(...)``).

Note that ``tomstats.anova``, ``tomstats.simulate``, ``tomstats.sensitivity`` and
``tomstats.power`` are the functions; their modules are imported with
``from tomstats.anova import ...``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from tomstats.anova import AnovaArrays, anova_from_counts, systematic_share  # noqa: E402
from tomstats.anova import anova as _anova  # noqa: E402
from tomstats.calibration import PAPER_PARAMS, fit_paper_parameters  # noqa: E402
from tomstats.design import Design, Factor, load_design, paper_design  # noqa: E402
from tomstats.model import (  # noqa: E402
    BETA0,
    Params,
    cell_probabilities,
    context_load,
    expected_accuracy,
    linear_predictor,
)
from tomstats.power import PowerResult  # noqa: E402
from tomstats.power import power as _power  # noqa: E402
from tomstats.reproduce import run_study, write_study  # noqa: E402
from tomstats.sensitivity import sensitivity as _sensitivity  # noqa: E402
from tomstats.simulate import expected_cells, simulate_questions  # noqa: E402
from tomstats.simulate import simulate as _simulate  # noqa: E402
from tomstats.study import PowerSpec, StudyConfig, load_study  # noqa: E402

anova = _anova
power = _power
simulate = _simulate
sensitivity = _sensitivity

_LAZY = ("stories", "evaluate", "glmm", "report", "figures", "posterior_sweep")
_LAZY_NAMES = {"read_log": "tomstats.evaluate", "load_fit": "tomstats.glmm",
               "build_design_items": "tomstats.stories"}


def __getattr__(name: str) -> Any:
    """Import the heavier stages (PyMC, llama-cpp, matplotlib) only when first used."""
    if name in _LAZY:
        return importlib.import_module(f"tomstats.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module 'tomstats' has no attribute {name!r}")


__all__ = [
    "__version__",
    "BETA0",
    "PAPER_PARAMS",
    "AnovaArrays",
    "Design",
    "Factor",
    "Params",
    "PowerResult",
    "PowerSpec",
    "StudyConfig",
    "anova",
    "anova_from_counts",
    "build_design_items",
    "cell_probabilities",
    "context_load",
    "expected_accuracy",
    "expected_cells",
    "fit_paper_parameters",
    "linear_predictor",
    "load_design",
    "load_fit",
    "load_study",
    "paper_design",
    "power",
    "read_log",
    "run_study",
    "sensitivity",
    "simulate",
    "simulate_questions",
    "systematic_share",
    "write_study",
]
