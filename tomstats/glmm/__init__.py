"""Bayesian GLMMs for ToM evaluations: equation (1) as a structural GLMM, lme4-style formula
GLMMs, two sampler backends (NumPyro, PyMC) and a maximum-likelihood one (Laplace, as
lme4's ``glmer``), diagnostics, posterior predictive checks.

Typical use (``df`` one row per question with ``correct``, ``model``, ``item``,
``tom_order``, ``context_words``)::

    idata = fit(df, model="structural", backend="numpyro")
    idata = fit(df, "correct ~ tom_order * log_context + (1 | model) + (1 | item)")
    ml = fit(df, "correct ~ tom_order + (1 | model) + (1 | item)", backend="laplace")
    print(ml)                             # lme4-like summary; ml.summary() is a DataFrame
    save_fit(idata, "fit.nc")
    idata = load_fit("fit.nc")
    p = predict(idata, new_rows)          # posterior draws of P(correct)

Layout: :mod:`~tomstats.glmm.spec` (backend-neutral specs and priors),
:mod:`~tomstats.glmm.data` (columns, validation, design), one file per backend
(:mod:`~tomstats.glmm.numpyro_backend`, :mod:`~tomstats.glmm.pymc_backend`,
:mod:`~tomstats.glmm.laplace_backend`),
:mod:`~tomstats.glmm.fitting` (fit/save/load/predict), :mod:`~tomstats.glmm.diagnostics`,
:mod:`~tomstats.glmm.ppc` (calibration, separation, cell accuracy),
:mod:`~tomstats.glmm.compare` (the LOO/WAIC comparison of fits),
:mod:`~tomstats.glmm.calibrate` (posterior → simulator parameters).
"""

from __future__ import annotations

from tomstats.glmm.calibrate import posterior_params, posterior_summary
from tomstats.glmm.compare import compare as compare_fits
from tomstats.glmm.data import STANDARD_COLUMNS, prepare_data, read_table
from tomstats.glmm.diagnostics import (
    DiagnosticCheck,
    DiagnosticsReport,
    DiagnosticsWarning,
    check_diagnostics,
)
from tomstats.glmm.fitting import (
    BACKENDS,
    fit,
    fit_spec,
    load_fit,
    predict,
    save_fit,
    training_data,
)
from tomstats.glmm.laplace_backend import LaplaceConvergenceWarning, LaplaceFit
from tomstats.glmm.ppc import accuracy_by_cell, calibration_curve, separation_data
from tomstats.glmm.rhat_ess import convergence, ess_bulk, ess_tail, rhat_rank
from tomstats.glmm.spec import (
    DEFAULT_STRUCTURAL_PRIORS,
    FormulaSpec,
    Prior,
    RandomTerm,
    StructuralSpec,
    exponential,
    half_normal,
    half_student_t,
    lkj,
    normal,
    parse_formula,
    student_t,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_STRUCTURAL_PRIORS",
    "STANDARD_COLUMNS",
    "DiagnosticCheck",
    "DiagnosticsReport",
    "DiagnosticsWarning",
    "FormulaSpec",
    "LaplaceConvergenceWarning",
    "LaplaceFit",
    "Prior",
    "RandomTerm",
    "StructuralSpec",
    "accuracy_by_cell",
    "calibration_curve",
    "check_diagnostics",
    "compare_fits",
    "convergence",
    "ess_bulk",
    "ess_tail",
    "exponential",
    "fit",
    "fit_spec",
    "half_normal",
    "half_student_t",
    "lkj",
    "load_fit",
    "normal",
    "parse_formula",
    "posterior_params",
    "posterior_summary",
    "predict",
    "prepare_data",
    "read_table",
    "rhat_rank",
    "save_fit",
    "separation_data",
    "student_t",
    "training_data",
]
