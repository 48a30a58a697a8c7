"""Backend-neutral linear predictors, written with array operators and indexing only.

They take JAX arrays (NumPyro), PyTensor tensors (PyMC) or NumPy arrays (prediction), so
the two backends and :func:`tomstats.glmm.predict` evaluate one definition. The structural
predictor is :func:`tomstats.model.linear_predictor` (equation (1)) itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomstats.model import Params, linear_predictor

__all__ = ["structural_eta", "formula_eta"]


def structural_eta(p: Mapping[str, Any], a: Mapping[str, Any]) -> Any:
    r"""Equation (1) per observation.

    .. math::

        \eta_i = \beta_0 m_{j(i)} - \alpha_{j(i)} c_i\ln(1+c_i/500) - \gamma_{j(i)} t_i
            - \delta c_i t_i + u_{k(i)}

    Parameters
    ----------
    p : mapping
        ``alpha``, ``gamma``, ``delta`` (scalars, or arrays broadcasting against the
        observations), ``capability`` (``[..., n_llm]``), optional ``alpha_llm``,
        ``gamma_llm`` (``[..., n_llm]``) and ``item_effect`` (``[..., n_item]``).
    a : mapping
        ``context``, ``tom`` (per observation), ``llm`` and ``item`` (integer codes).
    """
    llm = a["llm"]
    alpha = p["alpha_llm"][..., llm] if p.get("alpha_llm") is not None else p["alpha"]
    gamma = p["gamma_llm"][..., llm] if p.get("gamma_llm") is not None else p["gamma"]
    eps = p["item_effect"][..., a["item"]] if p.get("item_effect") is not None else 0.0
    params = Params(alpha=alpha, gamma=gamma, delta=p["delta"], sigma=0.0)
    return linear_predictor(params, a["context"], a["tom"], p["capability"][..., llm], eps)


def formula_eta(X: Any, beta: Any, terms: Sequence[tuple[Any, Any, Any]]) -> Any:
    r"""Linear predictor of a formula model, :math:`\eta = X\beta + \sum_k (Z_k \odot
    b_k[g_k])\mathbf 1`.

    Parameters
    ----------
    X : (n, p) array
    beta : (p,) array
    terms : sequence of (b, g, Z)
        Random effects ``b`` (n_levels, d), group codes ``g`` (n,), design ``Z`` (n, d).
    """
    eta = X @ beta
    for b, g, Z in terms:
        eta = eta + (b[g] * Z).sum(axis=-1)
    return eta
