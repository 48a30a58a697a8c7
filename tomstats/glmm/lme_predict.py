r"""Predictions and simulations of a :class:`~tomstats.glmm.lme_result.LaplaceFit` (lme4's
``predict.merMod`` and ``simulate.merMod``).

.. math::

    \hat\eta_i = x_i^\top\hat\beta + \sum_k z_{ik}^\top \hat b_{k, g_k(i)},\qquad
    \hat p_i = \operatorname{logit}^{-1}\hat\eta_i,

with :math:`x_i` and :math:`z_{ik}` coded as in the fit (categorical levels and stateful
transforms learned from the fitted data) and :math:`\hat b_{k,g} = 0` for a level the fit
has not seen (lme4's ``allow.new.levels = TRUE``); ``random=False`` leaves every
:math:`\hat b` out (``re.form = NA``).

Simulated outcomes (:func:`simulate`) on the fitted rows:
:math:`y^{(s)}_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta^{(s)}_i)`
with :math:`\eta^{(s)}_i = x_i^\top\hat\beta + \sum_k z_{ik}^\top b^{(s)}_{k,g_k(i)}`,
:math:`b^{(s)}_{k,j} = \hat T_k u^{(s)}_{k,j}`, :math:`u^{(s)}_{k,j} \sim N(0, I)` drawn
anew for each simulation (lme4's default, ``use.u = FALSE``), or
:math:`b^{(s)} = \hat b` (``use.u = TRUE``).

(The fit is typed ``Any`` here: this module is imported by the result's methods, and
imports nothing of it, so that the package has no import circle.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["predict", "simulate", "level_labels"]


def level_labels(df: pd.DataFrame, group: str) -> np.ndarray:
    """Labels of the grouping factor ``group`` (``"a"`` or ``"a:b"``) per row, as the fit's
    levels spell them (values as text, interaction parts joined by ``:``)."""
    parts = group.split(":")
    out = df[parts[0]].astype(str)
    for p in parts[1:]:
        out = out + ":" + df[p].astype(str)
    return out.to_numpy(dtype=object)


def predict(fit: Any, newdata: pd.DataFrame | None = None, *, random: bool = True,
            type: str = "response") -> np.ndarray:
    """Predicted probabilities (``type="response"``) or logits (``"link"``) per row of
    ``newdata`` (the fitted rows when ``None``). See the module docstring.

    Raises
    ------
    ValueError
        An unknown ``type``, a fit without its data (read from JSON), or ``newdata``
        lacking a column the formula reads.
    """
    if type not in ("response", "link"):
        raise ValueError(f"predict: type must be 'response' or 'link', got {type!r}")
    des = _design(fit, "predict")
    data = des.train if newdata is None else newdata
    if not isinstance(data, pd.DataFrame):
        raise ValueError(f"predict: newdata must be a DataFrame, got {type(data).__name__}")
    X, parts = _matrices(fit, data, random)
    eta = X @ fit.beta
    for Z, idx, bk in parts:
        contrib = np.sum(Z * bk[np.maximum(idx, 0)], axis=1)
        eta = eta + np.where(idx >= 0, contrib, 0.0)
    if type == "link":
        return eta
    return 1.0 / (1.0 + np.exp(-eta))


def _design(fit: Any, what: str) -> Any:
    if fit.design is None:
        raise ValueError(f"{what} needs the fitted data to code the rows: refit with "
                         f"tomstats.glmm.fit (a fit read from JSON has none)")
    return fit.design


def _matrices(fit: Any, data: pd.DataFrame, random: bool
              ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The fixed design of ``data`` and, per random term (with ``random``), its columns
    :math:`Z_k`, each row's level index among the fitted levels (-1: a new level) and the
    conditional modes (levels × effects)."""
    from tomstats.glmm.data import formula_matrices

    des = fit.design
    spec = des.spec
    X, _ = formula_matrices(spec.fixed, des.train, data, what="fixed part")
    parts = []
    if random:
        o = 0
        for t, term in zip(spec.random, fit.terms, strict=True):
            Z, _ = formula_matrices(t.expr, des.train, data, what=f"random term {t.label}")
            missing = [c for c in term.group.split(":") if c not in data.columns]
            if missing:
                raise ValueError(f"predict: newdata lacks the grouping column(s) {missing} "
                                 f"of {term.label}")
            index = {lv: i for i, lv in enumerate(term.levels)}
            idx = np.array([index.get(v, -1) for v in level_labels(data, term.group)])
            parts.append((Z, idx, fit.b[o: o + term.q * term.d].reshape(term.q, term.d)))
            o += term.q * term.d
    return X, parts


def simulate(fit: Any, nsim: int = 1, seed: int = 0, *, use_u: bool = False) -> np.ndarray:
    """Successes simulated from ``fit`` on its fitted rows, shape ``(nsim, n_rows)`` (module
    docstring; NumPy's generator seeded with ``seed``: the same seed, the same outcomes).

    Raises
    ------
    ValueError
        ``nsim`` not a positive integer, or a fit without its data (read from JSON).
    """
    from tomstats.glmm.data import response_arrays

    if isinstance(nsim, bool) or not isinstance(nsim, (int, np.integer)) or nsim < 1:
        raise ValueError(f"simulate: nsim must be an integer >= 1, got {nsim!r}")
    des = _design(fit, "simulate")
    rng = np.random.default_rng(seed)
    X, parts = _matrices(fit, des.train, True)
    eta = np.broadcast_to(X @ fit.beta, (int(nsim), X.shape[0])).copy()
    for (Z, idx, bk), T in zip(parts, fit.factors(), strict=True):
        if not use_u:
            bk = rng.standard_normal((int(nsim),) + bk.shape) @ T.T
        eta += np.sum(Z * bk[..., idx, :], axis=-1)
    spec = des.spec
    _, trials = response_arrays(des.train, spec.response, spec.trials, spec.family)
    n = np.ones(X.shape[0], np.int64) if trials is None else np.asarray(trials, np.int64)
    with np.errstate(over="ignore"):  # exp(710) is inf: p = 0, as it should be
        p = 1.0 / (1.0 + np.exp(-eta))
    return rng.binomial(n[None, :], p).astype(np.float64)
