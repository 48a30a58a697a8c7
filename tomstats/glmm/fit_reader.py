"""The one reader of fit files, as objects: :func:`read_fit` (any fit, by its content),
:func:`read_ml_fit` (a maximum-likelihood fit's JSON) and
:func:`tomstats.glmm.fit_file.read_netcdf_fit` (a sampler fit's netCDF). Every fit is checked
whole against the schema of :mod:`tomstats.glmm.fit_file` first; what it checks is listed
there and in ``docs/security.md``.
"""

from __future__ import annotations

import os
from typing import Any

from tomstats.glmm.fit_file import (
    _existing,
    is_netcdf,
    load_ml_dict,
    read_netcdf_fit,
)
from tomstats.glmm.lme_result import LaplaceFit

__all__ = ["read_fit", "read_ml_fit"]


def read_ml_fit(path: str | os.PathLike[str], field: str = "") -> Any:
    """A maximum-likelihood fit's JSON, checked whole
    (:func:`tomstats.glmm.fit_file.load_ml_dict`): a :class:`LaplaceFit` (either JSON
    format: the one written now, or the random-intercept format of earlier versions).

    Raises
    ------
    FileNotFoundError
        No such file.
    FitFileError
        Anything else wrong, one line naming the file, the field and the value.
    """
    _, d = load_ml_dict(path, field)
    return LaplaceFit.from_dict(d)


def read_fit(path: str | os.PathLike[str], field: str = "") -> Any:
    """Any fit file, by its content: :func:`tomstats.glmm.fit_file.read_netcdf_fit` for
    netCDF, else :func:`read_ml_fit`."""
    p = _existing(path, field)
    return read_netcdf_fit(p, field) if is_netcdf(p) else read_ml_fit(p, field)
