"""Whether a fit passed its own checks, and the one refusal of a fit that did not.

A sampler fit's verdict is :func:`tomstats.glmm.diagnostics.check_diagnostics` of its draws
and sampler statistics (divergences, tree depth, E-BFMI, R-hat, ESS): it is computed from the
saved netCDF itself, so a file written with ``tomstats fit --allow-warnings`` (or by an older
version) gets the same verdict as at fit time. A Laplace fit's verdict is its ``converged``
flag. Every command that builds on a fit (``calibrate``, ``simulate --posterior``, ``power
--posterior``, the report of a calibrated sweep) asks :func:`require_sound_fit`: a fit that
failed is refused as bad input (exit 2, naming the failed checks) unless the user passes
``--allow-warnings``, and what is built on it records :func:`failed_checks` so that its
report can say so at the top.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

__all__ = ["failed_checks", "failed_checks_note", "load_sound_fit", "require_sound_fit"]


def failed_checks(fit: Any) -> tuple[str, ...]:
    """Names of the checks a fit failed (empty when it passed).

    Parameters
    ----------
    fit : arviz.InferenceData or tomstats.glmm.LaplaceFit
        A sampler fit (its checks: ``divergences``, ``tree_depth``, ``ebfmi``, ``rhat``,
        ``ess_bulk``, ``ess_tail``) or a Laplace fit (``convergence``).
    """
    from tomstats.glmm.lme_result import LaplaceFit

    if isinstance(fit, LaplaceFit):
        return () if fit.converged else ("convergence",)
    from tomstats.glmm.diagnostics import check_diagnostics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant draws: 0/0 in R-hat
        report = check_diagnostics(fit)
    return tuple(c.name for c in report.failed)


def failed_checks_note(failed: tuple[str, ...] | list[str], name: str = "the fit") -> str:
    """The sentence a report puts at its top when built on a fit that failed its checks."""
    return (f"{name} failed its own checks ({', '.join(failed)}); its estimates may be "
            f"unreliable, and so is everything built on them (used with --allow-warnings)")


def require_sound_fit(fit: Any, *, allow_warnings: bool, name: str = "the fit",
                      field: str = "--posterior") -> tuple[str, ...]:
    """Refuse a fit that failed its own checks unless ``allow_warnings``.

    Parameters
    ----------
    fit : arviz.InferenceData or tomstats.glmm.LaplaceFit
    allow_warnings : bool
        Accept a failed fit (``--allow-warnings``); the failed checks are returned so that
        the caller records them.
    name : str
        How the fit is named in the message (its path).
    field : str
        The argument that gave the fit.

    Returns
    -------
    tuple of str
        The failed checks (empty when the fit passed).

    Raises
    ------
    ValueError
        The fit failed a check and ``allow_warnings`` is false; the message names the checks.
    """
    failed = failed_checks(fit)
    if failed and not allow_warnings:
        raise ValueError(
            f"{field} {name}: the fit failed its own checks ({', '.join(failed)}) when it was "
            f"made, so its estimates may be unreliable; refit as `tomstats fit` advised (more "
            f"tuning and draws), or pass --allow-warnings to use it anyway")
    return failed


def load_sound_fit(path: str | os.PathLike[str], *, allow_warnings: bool,
                   field: str = "--posterior") -> tuple[Any, tuple[str, ...]]:
    """:func:`tomstats.glmm.load_fit` and :func:`require_sound_fit` in one step.

    Returns
    -------
    (arviz.InferenceData, tuple of str)
        The fit and the checks it failed (empty unless ``allow_warnings``).
    """
    from tomstats.glmm.fitting import load_fit

    idata = load_fit(path)
    return idata, require_sound_fit(idata, allow_warnings=allow_warnings, name=str(path),
                                    field=field)
