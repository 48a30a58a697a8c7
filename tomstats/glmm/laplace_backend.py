"""Names of the random-intercept Laplace backend of earlier versions, kept for old callers.

Every maximum-likelihood fit now goes through one engine: :func:`tomstats.glmm.lme.fit_lme`
(what ``tomstats.glmm.fit(..., backend="laplace")`` calls) on the one solver
:func:`tomstats.glmm.lme_fit.lme_fit_arrays`, and returns the one result type
:class:`tomstats.glmm.lme_result.LaplaceFit` (random intercepts, slopes, ``||``, nested and
crossed terms alike). :func:`fit_laplace` is that call under its old name (deprecated); the
other names here are the result module's.
"""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd

from tomstats.glmm.lme_result import (
    SINGULAR_MESSAGE,
    LaplaceConvergenceWarning,
    LaplaceFit,
    LaplaceSeparationWarning,
)

__all__ = ["LaplaceFit", "LaplaceConvergenceWarning", "LaplaceSeparationWarning", "fit_laplace",
           "LAPLACE_OPTIONS", "SINGULAR_MESSAGE"]

#: Options of :func:`fit_laplace` passed on to the solver.
LAPLACE_OPTIONS = ("max_iter", "tol", "se", "max_inner")


def fit_laplace(data: pd.DataFrame, model: str, **options: Any) -> LaplaceFit:
    """Deprecated: :func:`tomstats.glmm.fit` with ``backend="laplace"`` (or
    :func:`tomstats.glmm.lme.fit_lme`), which this calls, fits every formula, random
    intercepts or not, and returns the same :class:`LaplaceFit`."""
    from tomstats.glmm.lme import fit_lme

    warnings.warn("tomstats.glmm.laplace_backend.fit_laplace is deprecated: use "
                  "tomstats.glmm.fit(df, formula, backend='laplace')", DeprecationWarning,
                  stacklevel=2)
    return fit_lme(data, model, **options)
