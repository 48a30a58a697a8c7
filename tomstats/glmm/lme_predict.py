r"""Predictions of an :class:`~tomstats.glmm.lme_result.LmeFit` (lme4's ``predict.merMod``).

.. math::

    \hat\eta_i = x_i^\top\hat\beta + \sum_k z_{ik}^\top \hat b_{k, g_k(i)},\qquad
    \hat p_i = \operatorname{logit}^{-1}\hat\eta_i,

with :math:`x_i` and :math:`z_{ik}` coded as in the fit (categorical levels and stateful
transforms learned from the fitted data) and :math:`\hat b_{k,g} = 0` for a level the fit
has not seen (lme4's ``allow.new.levels = TRUE``); ``random=False`` leaves every
:math:`\hat b` out (``re.form = NA``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from tomstats.glmm.lme_result import LmeFit

__all__ = ["predict", "level_labels"]


def level_labels(df: pd.DataFrame, group: str) -> np.ndarray:
    """Labels of the grouping factor ``group`` (``"a"`` or ``"a:b"``) per row, as the fit's
    levels spell them (values as text, interaction parts joined by ``:``)."""
    parts = group.split(":")
    out = df[parts[0]].astype(str)
    for p in parts[1:]:
        out = out + ":" + df[p].astype(str)
    return out.to_numpy(dtype=object)


def predict(fit: LmeFit, newdata: pd.DataFrame | None = None, *, random: bool = True,
            type: str = "response") -> np.ndarray:
    """Predicted probabilities (``type="response"``) or logits (``"link"``) per row of
    ``newdata`` (the fitted rows when ``None``). See the module docstring.

    Raises
    ------
    ValueError
        An unknown ``type``, a fit without its data (read from JSON), or ``newdata``
        lacking a column the formula reads.
    """
    from tomstats.glmm.data import formula_matrices

    if type not in ("response", "link"):
        raise ValueError(f"predict: type must be 'response' or 'link', got {type!r}")
    des = fit.design
    if des is None:
        raise ValueError("predict needs the fitted data to code new rows: refit with fit_lme "
                         "(a fit read from JSON has none)")
    spec = des.spec
    data = des.train if newdata is None else newdata
    if not isinstance(data, pd.DataFrame):
        raise ValueError(f"predict: newdata must be a DataFrame, got {type(data).__name__}")
    X, _ = formula_matrices(spec.fixed, des.train, data, what="fixed part")
    eta = X @ fit.beta
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
            bk = fit.b[o: o + term.q * term.d].reshape(term.q, term.d)
            o += term.q * term.d
            contrib = np.sum(Z * bk[np.maximum(idx, 0)], axis=1)
            eta = eta + np.where(idx >= 0, contrib, 0.0)
    if type == "link":
        return eta
    return 1.0 / (1.0 + np.exp(-eta))
