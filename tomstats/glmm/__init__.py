"""Bayesian GLMMs for ToM evaluations: equation (1) as a structural GLMM, lme4-style formula
GLMMs, two sampler backends (NumPyro, PyMC) and a maximum-likelihood one (Laplace, as
lme4's ``glmer``), diagnostics, posterior predictive checks.

Typical use (``df`` one row per question with ``correct``, ``model``, ``item``,
``tom_order``, ``context_words``)::

    idata = fit(df, model="structural", backend="numpyro")
    idata = fit(df, "correct ~ tom_order * log_context + (1 | model) + (1 | item)")
    ml = fit(df, "correct ~ tom_order + (1 | model) + (1 | item)", backend="laplace")
    print(ml)                             # lme4-like summary; ml.fixef(), ml.VarCorr()
    save_fit(idata, "fit.nc")
    idata = load_fit("fit.nc")
    p = predict(idata, new_rows)          # posterior draws of P(correct)

Layout: :mod:`~tomstats.glmm.spec` (backend-neutral specs and priors),
:mod:`~tomstats.glmm.data` (columns, validation, design), one file per backend
(:mod:`~tomstats.glmm.numpyro_backend`, :mod:`~tomstats.glmm.pymc_backend`; maximum
likelihood: :mod:`~tomstats.glmm.lme` on the solvers :mod:`~tomstats.glmm.lme_numpy`
(interpreted, a single fit's default) and :mod:`~tomstats.glmm.lme_fit` (JAX), its result
:mod:`~tomstats.glmm.lme_result`),
:mod:`~tomstats.glmm.fitting` (fit/save/load/predict), :mod:`~tomstats.glmm.diagnostics`,
:mod:`~tomstats.glmm.ppc` (calibration, separation, cell accuracy),
:mod:`~tomstats.glmm.compare` (the LOO/WAIC comparison of fits),
:mod:`~tomstats.glmm.calibrate` (posterior → simulator parameters).

Nothing is imported until it is first used (:pep:`562`): ``tomstats fit --help`` and a
Laplace fit come without ArviZ, xarray and the samplers, and a Laplace fit on the
interpreted solver without JAX.
"""


from __future__ import annotations

from tomstats._lazy import lazy_face

__getattr__, __dir__, __all__ = lazy_face(__name__, {
    "BACKENDS": "tomstats.glmm.fitting",
    "DEFAULT_STRUCTURAL_PRIORS": "tomstats.glmm.spec",
    "DiagnosticCheck": "tomstats.glmm.diagnostics",
    "DiagnosticsReport": "tomstats.glmm.diagnostics",
    "DiagnosticsWarning": "tomstats.glmm.diagnostics",
    "FormulaSpec": "tomstats.glmm.spec",
    "LaplaceConvergenceWarning": "tomstats.glmm.lme_result",
    "LaplaceFit": "tomstats.glmm.lme_result",
    "Prior": "tomstats.glmm.spec",
    "RandomTerm": "tomstats.glmm.spec",
    "STANDARD_COLUMNS": "tomstats.glmm.data",
    "StructuralSpec": "tomstats.glmm.spec",
    "accuracy_by_cell": "tomstats.glmm.ppc",
    "calibration_curve": "tomstats.glmm.ppc",
    "check_diagnostics": "tomstats.glmm.diagnostics",
    "compare_fits": ("tomstats.glmm.compare", "compare"),
    "convergence": "tomstats.glmm.rhat_ess",
    "ess_bulk": "tomstats.glmm.rhat_ess",
    "ess_tail": "tomstats.glmm.rhat_ess",
    "exponential": "tomstats.glmm.spec",
    "fit": "tomstats.glmm.fitting",
    "fit_spec": "tomstats.glmm.fitting",
    "half_normal": "tomstats.glmm.spec",
    "half_student_t": "tomstats.glmm.spec",
    "lkj": "tomstats.glmm.spec",
    "load_fit": "tomstats.glmm.fitting",
    "normal": "tomstats.glmm.spec",
    "parse_formula": "tomstats.glmm.spec",
    "posterior_params": "tomstats.glmm.calibrate",
    "posterior_summary": "tomstats.glmm.calibrate",
    "predict": "tomstats.glmm.fitting",
    "paired_table": "tomstats.glmm.data",
    "prepare_data": "tomstats.glmm.data",
    "read_table": "tomstats.glmm.data",
    "rhat_rank": "tomstats.glmm.rhat_ess",
    "save_fit": "tomstats.glmm.fitting",
    "separation_data": "tomstats.glmm.ppc",
    "student_t": "tomstats.glmm.spec",
    "training_data": "tomstats.glmm.fitting",
})
