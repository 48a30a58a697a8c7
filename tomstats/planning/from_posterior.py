r"""Posterior draws of a Bayesian formula fit as parameter sets for :mod:`.from_fit`.

A Bayesian fit of a formula GLMM (``tomstats fit LOG --model FORMULA --backend
numpyro|pymc``, an ArviZ ``InferenceData``) stores per draw :math:`s` the fixed effects
``beta`` (dim ``coef``), each term's standard deviations ``sd_<key>`` and, for a correlated
term with several effects, its correlation matrix ``corr_<key>``. Each draw becomes the
parameters of lme4's parametrisation used by the Laplace path:

.. math::

    \Sigma_k^{(s)} = D_k^{(s)} C_k^{(s)} D_k^{(s)},\quad
    T_k^{(s)} = D_k^{(s)} \operatorname{chol}(C_k^{(s)}),\quad
    \theta^{(s)} = \bigl(T_k^{(s)}\bigr)_{\text{lower triangle, column-major}}

(:math:`D_k` the diagonal of the SDs; :math:`C_k = I` for ``||`` terms and single effects),
so that :math:`T_k^{(s)}T_k^{(s)\top} = \Sigma_k^{(s)}`. The design, coefficient names and
terms come from a Laplace fit of the same formula to the same log (which also shows that
the Laplace path can refit the model), whose data hash must be the posterior's; its
:math:`\beta` and :math:`\theta` are replaced by the posterior medians (where refits start).
Nothing in the file is run: the stored formula is re-read by the formula checker
(:func:`tomstats.glmm.spec.spec_from_json`) before anything is built from it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tomstats.glmm._hints import InputError

__all__ = ["FitDraws", "fit_formula", "is_posterior", "posterior_fit", "stored_mapping"]

#: What a structural fit is pointed to.
_STRUCTURAL = "tomstats power CONFIG --posterior {name}"


@dataclass(frozen=True)
class FitDraws:
    """Parameter sets of a posterior, in the Laplace fit's order.

    Attributes
    ----------
    beta : ndarray, shape (S, p)
        Fixed effects per draw (columns: the fit's ``coef_names``).
    theta : ndarray, shape (S, m)
        :math:`\\theta` per draw, term by term in lme4's order.
    source : dict
        Provenance: file, model, data hash, backend, seed, ``draws_available``,
        ``draws_used``, ``failed_checks`` (and ``file_sha256`` when named by its path).
    """

    beta: np.ndarray
    theta: np.ndarray
    source: Mapping[str, Any]

    @property
    def n_draws(self) -> int:
        """:math:`S`."""
        return int(self.beta.shape[0])

    def __repr__(self) -> str:
        """One line: draws, coefficients, the file they come from."""
        from tomstats._printable import summary_line

        return summary_line(self, f"{self.n_draws} draws of {self.beta.shape[1]} coefficients "
                            f"and {self.theta.shape[1]} theta", f"from {self.source.get('file')}",
                            full=False)

    def factors(self, terms: Any) -> list[np.ndarray]:
        """:math:`T_k^{(s)}` of each term, shape ``(S, d_k, d_k)``."""
        out, o = [], 0
        for t in terms:
            out.append(t.factor(self.theta[:, o:o + t.n_theta]))
            o += t.n_theta
        return out


def is_posterior(fit: Any) -> bool:
    """Whether ``fit`` is a Bayesian fit (an ``InferenceData`` with a posterior)."""
    return type(fit).__name__ == "InferenceData" or hasattr(fit, "posterior")


def _spec(idata: Any, name: str) -> Any:
    """The formula spec of ``idata`` (its stored formula re-checked), or a one-line refusal."""
    from tomstats.glmm.fitting import fit_spec
    from tomstats.glmm.spec import StructuralSpec

    try:
        spec = fit_spec(idata)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"{name}: not a tomstats Bayesian fit ({exc})") from exc
    if isinstance(spec, StructuralSpec):
        raise InputError(f"{name}: the structural model of equation (1) is not a formula GLMM "
                         f"and cannot be refitted by the Laplace path; its assurance is "
                         f"'{_STRUCTURAL.format(name=name)}'")
    return spec


def fit_formula(idata: Any, name: str = "the fit") -> str:
    """The formula of a Bayesian formula fit, checked by the formula checker.

    Raises
    ------
    InputError
        Not a tomstats fit, or a fit of the structural model.
    """
    return str(_spec(idata, name).formula)


def stored_mapping(idata: Any, name: str = "the fit") -> dict[str, str]:
    """The column mapping (``{standard_name: your_column}``) a Bayesian fit stored."""
    text = idata.posterior.attrs.get("column_mapping", "{}")
    try:
        m = json.loads(str(text))
    except ValueError as exc:
        raise InputError(f"{name}: its stored column mapping is not JSON ({exc})") from exc
    if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in m.items()):
        raise InputError(f"{name}: its stored column mapping must map names to names, got "
                         f"{str(text)[:80]!r}")
    return m


def _laplace_structure(spec: Any, data: pd.DataFrame, columns: Mapping[str, str],
                       stored_hash: str, name: str) -> Any:
    """The Laplace fit of the posterior's formula to ``data`` (design, names, terms)."""
    from tomstats.glmm.lme import fit_lme

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ml = fit_lme(data, spec.formula, family=spec.family, columns=columns or None)
    except ValueError as exc:  # InputError included
        raise InputError(f"{name}: the Laplace path cannot refit its model "
                         f"{spec.formula!r} to this log: {exc}") from exc
    if stored_hash and ml.data_hash != stored_hash:
        who = name if name == "the fit" else f"the fit {name}"
        raise InputError(f"data: not the data {who} of {spec.formula!r} was made from "
                         f"(its data hash differs); pass the same log, with the same "
                         f"selection")
    return ml


def _flat(post: Any, var: str, name: str) -> np.ndarray:
    if var not in post:
        raise InputError(f"{name}: the posterior lacks {var!r}; not a formula fit of "
                         f"tomstats.glmm.fit (or damaged)")
    v = np.asarray(post[var].to_numpy(), dtype=np.float64)
    v = v.reshape((-1,) + v.shape[2:])
    if not np.all(np.isfinite(v)):
        raise InputError(f"{name}: the posterior draws of {var!r} are not all finite")
    return v


def _names(post: Any, dim: str) -> list[str]:
    from tomstats.glmm.lme import _effect_name

    return [_effect_name(str(c)) for c in post.coords[dim].values]


def _order(have: list[str], want: tuple[str, ...], what: str, name: str) -> list[int]:
    """Positions in ``have`` of the names ``want`` (the same set, or a refusal)."""
    if sorted(have) != sorted(want) or len(set(have)) != len(have):
        raise InputError(f"{name}: its {what} {have} are not the Laplace fit's {list(want)} "
                         f"of the same formula and log")
    return [have.index(w) for w in want]


def _theta_draws(post: Any, spec: Any, ml: Any, name: str) -> np.ndarray:
    """:math:`\\theta^{(s)}` of every draw (module docstring)."""
    if len(spec.random) != len(ml.terms):
        raise InputError(f"{name}: {len(spec.random)} random-effects terms, the Laplace fit "
                         f"of the same formula {len(ml.terms)}")
    parts = []
    for rt, t in zip(spec.random, ml.terms, strict=True):
        if rt.group != t.group:
            raise InputError(f"{name}: random term of {rt.group!r} where the Laplace fit has "
                             f"{t.group!r}")
        sd = _flat(post, f"sd_{rt.key}", name)
        idx = _order(_names(post, f"{rt.key}_effect"), t.effects, f"effects of {t.label}",
                     name)
        sd = sd[:, idx]
        if np.any(sd < 0):
            raise InputError(f"{name}: negative standard deviations in 'sd_{rt.key}'")
        if t.correlated and t.d > 1:
            C = _flat(post, f"corr_{rt.key}", name)[:, idx][:, :, idx]
            C = 0.5 * (C + np.swapaxes(C, 1, 2))
            C[:, np.arange(t.d), np.arange(t.d)] = 1.0
            try:
                L = np.linalg.cholesky(C)
            except np.linalg.LinAlgError as exc:
                raise InputError(f"{name}: a draw of 'corr_{rt.key}' is not a positive "
                                 f"definite correlation matrix") from exc
            T = sd[:, :, None] * L
        else:
            T = sd[:, :, None] * np.eye(t.d)[None]
        parts.append(np.stack([T[:, i, j] for i, j in t.theta_index()], axis=1))
    return np.concatenate(parts, axis=1) if parts else np.zeros((0, 0))


def posterior_fit(idata: Any, data: pd.DataFrame | None = None,
                  columns: Mapping[str, str] | None = None, *, draws: int | None = None,
                  allow_warnings: bool = False, name: str = "the fit") -> tuple[Any, FitDraws]:
    """A Bayesian formula fit as a Laplace fit (structure, posterior medians) and its draws.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit of :func:`tomstats.glmm.fit` with a formula model.
    data : pandas.DataFrame, optional
        The log fitted (default: the data the fit stored); checked by the fit's data hash.
    columns : mapping, optional
        ``{standard_name: your_column}`` (default: the mapping the fit stored).
    draws : int, optional
        Draws used, thinned evenly (default: all).
    allow_warnings : bool
        Use a fit that failed its own checks (:mod:`tomstats.glmm.verdict`).
    name : str
        How the fit is named in messages and provenance (its path: the file's SHA-256 is
        recorded too).

    Returns
    -------
    (LaplaceFit, FitDraws)

    Raises
    ------
    InputError
        A structural fit, a formula the Laplace path cannot refit, another log, malformed
        draws (one line each).
    ValueError
        The fit failed its own checks and ``allow_warnings`` is false.
    """
    from tomstats.glmm.fitting import training_data
    from tomstats.glmm.verdict import require_sound_fit
    from tomstats.simulation.posterior_sweep import thin_index

    if draws is not None and (isinstance(draws, bool) or not isinstance(
            draws, (int, np.integer)) or draws < 1):
        raise InputError(f"draws must be an integer >= 1, got {draws!r}")
    spec = _spec(idata, name)
    failed = require_sound_fit(idata, allow_warnings=allow_warnings, name=name,
                               field="--from-fit")
    post = idata.posterior
    stored = str(post.attrs.get("data_hash", ""))
    if data is None:
        data, cols = training_data(idata), {}
    else:
        cols = stored_mapping(idata, name) if columns is None else dict(columns)
    ml = _laplace_structure(spec, data, cols, stored, name)
    beta = _flat(post, "beta", name)
    beta = beta[:, _order(_names(post, "coef"), ml.coef_names, "coefficients", name)]
    theta = _theta_draws(post, spec, ml, name)
    n_all = beta.shape[0]
    idx = thin_index(n_all, n_all if draws is None else int(draws))
    beta, theta = beta[idx], theta[idx]
    centre = dataclasses.replace(ml, beta=np.median(beta, axis=0),
                                 theta=np.median(theta, axis=0))
    attrs = dict(post.attrs)
    source = {"file": name, "model": spec.formula, "data_hash": stored,
              **{k: (attrs[k].item() if hasattr(attrs.get(k), "item") else attrs.get(k))
                 for k in ("backend", "seed", "created_at")},
              "draws_available": int(n_all), "draws_used": int(len(idx)),
              "failed_checks": list(failed)}
    if Path(name).is_file():  # named by its path: the file itself, as power --posterior
        source["file_sha256"] = hashlib.sha256(Path(name).read_bytes()).hexdigest()
    return centre, FitDraws(beta=beta, theta=theta, source=source)
