"""tomstats: separate theory-of-mind order from context length in LLM evaluations.

Stages, in the order of the pipeline (each a module or package with a small public surface):

- :mod:`tomstats.model` — equation (1), its parameters and expected cell accuracies;
- :mod:`tomstats.design` — factorial designs (the paper's 5×3 by default);
- :mod:`tomstats.stories` — story items (context length × ToM order) with verified answers;
- :mod:`tomstats.evaluate` — the runner that puts items to a language model;
- :mod:`tomstats.analysis` — the evaluation table, Wilson intervals, accuracy per cell, the
  ANOVA of rows (n-way, repeated measures) and the ``summarize``/``anova`` commands;
- :mod:`tomstats.glmm` — Bayesian and maximum-likelihood GLMMs of an evaluation log;
- :mod:`tomstats.simulation` — the paper's parameters, the JAX simulator, the ANOVA of cell
  counts, the γ × α sensitivity grid, study files, posterior sweeps, figures and the paper
  in one call;
- :mod:`tomstats.planning` — simulation-based power and assurance;
- :mod:`tomstats.report` — HTML/Markdown reports.

The main names are reachable here (``tomstats.simulate(...)``, ``tomstats.power(...)``,
``tomstats.anova(...)``, ``tomstats.sensitivity(...)`` are functions). Nothing is imported
until it is first used (:pep:`562`), so ``import tomstats`` and the command line start
without JAX, SciPy or pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

from tomstats._version import __version__

#: Public name -> module that defines it (imported on first use).
_NAMES: dict[str, str] = {
    "BETA0": "tomstats.model",
    "Params": "tomstats.model",
    "cell_probabilities": "tomstats.model",
    "context_load": "tomstats.model",
    "expected_accuracy": "tomstats.model",
    "linear_predictor": "tomstats.model",
    "Design": "tomstats.design",
    "Factor": "tomstats.design",
    "load_design": "tomstats.design",
    "paper_design": "tomstats.design",
    "build_design_items": "tomstats.stories",
    "read_log": "tomstats.evaluate",
    "anova": "tomstats.analysis.row_anova",
    "log_anova": "tomstats.analysis.log_anova",
    "summarize": "tomstats.analysis.summary",
    "load_fit": "tomstats.glmm",
    "PAPER_PARAMS": "tomstats.simulation.paper",
    "fit_paper_parameters": "tomstats.simulation.paper",
    "AnovaArrays": "tomstats.simulation.count_anova",
    "anova_from_counts": "tomstats.simulation.count_anova",
    "systematic_share": "tomstats.simulation.count_anova",
    "expected_cells": "tomstats.simulation.simulator",
    "simulate": "tomstats.simulation.simulator",
    "simulate_questions": "tomstats.simulation.simulator",
    "sensitivity": "tomstats.simulation.sensitivity_grid",
    "PowerSpec": "tomstats.simulation.study",
    "StudyConfig": "tomstats.simulation.study",
    "load_study": "tomstats.simulation.study",
    "run_study": "tomstats.simulation.reproduce",
    "write_study": "tomstats.simulation.reproduce",
    "PowerResult": "tomstats.planning.result",
    "power": "tomstats.planning.run",
    "power_from_fit": "tomstats.planning.from_fit",
}
#: The stages, imported as modules on first use (``tomstats.glmm.fit(...)``).
_STAGES = ("model", "design", "stories", "evaluate", "analysis", "glmm", "simulation",
           "planning", "report")


def __getattr__(name: str) -> Any:
    """Import a public name's module (or a stage) when the name is first used."""
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _STAGES:
        value = importlib.import_module(f"tomstats.{name}")
    else:
        raise AttributeError(f"module 'tomstats' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """The public API only: the names of :data:`__all__` and the stages."""
    return sorted({"__version__", *_NAMES, *_STAGES})


__all__ = ["__version__", *sorted(_NAMES)]
