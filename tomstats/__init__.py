"""tomstats: separate theory-of-mind order from context length in LLM evaluations.

Stages (each a module with a small public surface re-exported here):

- :mod:`tomstats.model` — equation (1), its parameters and expected cell accuracies;
- :mod:`tomstats.design` — factorial designs (the paper's 5×3 by default);
- :mod:`tomstats.simulate` — the JAX simulator (exact counts and per-question draws);
- :mod:`tomstats.anova` — two-way ANOVA with η², partial η², F, from rows or cell counts;
- :mod:`tomstats.sensitivity` — the 7×7 γ × α sensitivity grid;
- :mod:`tomstats.calibration` — default parameters fitted to the paper's printed numbers;
- :mod:`tomstats.stories`, :mod:`tomstats.evaluate`, :mod:`tomstats.glmm`,
  :mod:`tomstats.report` — story generator, runner, GLMMs, reports.
"""

from __future__ import annotations

__version__ = "0.1.0"

from tomstats.design import Design, Factor, load_design, paper_design
from tomstats.model import (
    BETA0,
    Params,
    cell_probabilities,
    context_load,
    expected_accuracy,
    linear_predictor,
)

__all__ = [
    "__version__",
    "BETA0",
    "Design",
    "Factor",
    "Params",
    "cell_probabilities",
    "context_load",
    "expected_accuracy",
    "linear_predictor",
    "load_design",
    "paper_design",
]
