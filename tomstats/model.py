"""Equation (1) of the simulation paper, defined once.

The latent logit of a correct answer to a question in context-length cell ``c`` (words) and
ToM-order cell ``t``, for a model of capability ``m``, is

.. math::

    \\operatorname{logit} p = \\beta_0 m - \\alpha\\, c \\ln(1 + c/500) - \\gamma t
        - \\delta\\, c\\, t + \\varepsilon, \\qquad
    \\beta_0 = \\ln(0.85/0.15),\\quad \\varepsilon \\sim \\mathcal N(0, \\sigma^2).

:func:`linear_predictor` is the single definition of the right-hand side; the simulator,
the NumPyro GLMM and the PyMC GLMM all call it (it is written with array operators only, so
it works on ``jax.numpy`` arrays, NumPy arrays and PyTensor tensors alike).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "BETA0",
    "CONTEXT_SCALE",
    "Params",
    "context_load",
    "linear_predictor",
    "expected_accuracy",
    "cell_probabilities",
    "gauss_hermite",
]

#: Base logit, :math:`\\beta_0 = \\ln(0.85/0.15)` (85 % accuracy at m = 1, no penalties).
BETA0: float = math.log(0.85 / 0.15)
#: Context length (words) at which the log factor of the context term doubles.
CONTEXT_SCALE: float = 500.0


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Params:
    """Parameters of equation (1).

    Parameters
    ----------
    alpha : float or array
        Context decay rate :math:`\\alpha` (per word, multiplies :math:`c\\ln(1+c/500)`).
    gamma : float or array
        ToM-order penalty :math:`\\gamma` (logit units per order).
    delta : float or array
        Context × ToM interaction :math:`\\delta` (logit units per word per order).
    sigma : float or array
        Standard deviation of the per-question logit noise :math:`\\varepsilon`.

    Notes
    -----
    A JAX pytree: fields may be arrays of any (broadcastable) shape, so a ``Params`` can hold
    a whole grid or a set of posterior draws and pass through ``jit`` and ``vmap``. The
    defaults are :data:`tomstats.simulation.paper.PAPER_PARAMS`, fitted to the numbers the paper
    prints (see :func:`tomstats.simulation.paper.fit_paper_parameters`).
    """

    alpha: Any
    gamma: Any
    delta: Any
    sigma: Any

    def validate(self) -> Params:
        """Raise ``ValueError`` naming the field if any value is NaN/inf or sigma < 0."""
        for f in dataclasses.fields(self):
            v = np.asarray(getattr(self, f.name), dtype=float)
            if not np.all(np.isfinite(v)):
                raise ValueError(f"parameter {f.name!r} must be finite, got {v.tolist()!r}")
        if np.any(np.asarray(self.sigma, dtype=float) < 0):
            raise ValueError(f"parameter 'sigma' must be >= 0, got {np.asarray(self.sigma)!r}")
        return self

    def replace(self, **changes: Any) -> Params:
        """Return a copy with some fields replaced (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Fields as plain Python floats (or nested lists for arrays)."""
        fields = dataclasses.fields(self)
        return {f.name: np.asarray(getattr(self, f.name)).tolist() for f in fields}

    def __repr__(self) -> str:
        """``Params(alpha=7.021e-05, ...)`` for numbers (it evaluates back); for arrays (a
        grid, posterior draws) a table: per field its shape, mean, sd, 2.5 % and 97.5 %
        quantiles over all elements."""
        vals = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if all(np.ndim(v) == 0 for v in vals.values()):
            return "Params(" + ", ".join(f"{k}={_number(v)!r}" for k, v in vals.items()) + ")"
        lines = [f"Params of arrays{'':4}{'shape':>10}{'mean':>12}{'sd':>12}{'2.5 %':>12}"
                 f"{'97.5 %':>12}"]
        for k, v in vals.items():
            try:
                a = np.asarray(v, dtype=float)
            except (TypeError, ValueError):  # a traced or symbolic value
                lines.append(f"{k:<19}{type(v).__name__}")
                continue
            sd = a.std(ddof=1) if a.size > 1 else 0.0
            lines.append(f"{k:<19}{str(a.shape):>10}{a.mean():>12.4g}{sd:>12.4g}"
                         f"{np.quantile(a, 0.025):>12.4g}{np.quantile(a, 0.975):>12.4g}")
        return "\n".join(lines)


def _number(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):  # a traced value (inside jit) shows as itself
        return v


def context_load(context: Any) -> Any:
    """Context term of equation (1) without its rate: :math:`c \\ln(1 + c/500)`."""
    return context * _log1p(context / CONTEXT_SCALE)


def _log1p(x: Any) -> Any:
    # jnp.log1p works on NumPy and JAX arrays; tensors of other libraries (PyTensor) provide
    # their own log1p method-free API, so fall back to the generic ``log(1 + x)`` there.
    if isinstance(x, (int, float, np.ndarray, np.generic, jax.Array)):
        return jnp.log1p(x)
    import importlib

    pt = importlib.import_module("pytensor.tensor")
    return pt.log1p(x)


def _check_params(params: Any) -> None:
    if not isinstance(params, Params):
        raise TypeError(f"params must be a tomstats.Params (e.g. tomstats.Params(alpha=7e-5, "
                        f"gamma=1.2, delta=2e-4, sigma=0.6)), got {type(params).__name__}")


def linear_predictor(
    params: Params,
    context: Any,
    tom: Any,
    capability: Any = 1.0,
    eps: Any = 0.0,
) -> Any:
    """Latent logit of equation (1).

    .. math::

        \\eta = \\beta_0 m - \\alpha\\, c\\ln(1 + c/500) - \\gamma t
            - \\delta\\, c\\, t + \\varepsilon

    Parameters
    ----------
    params : Params
        :math:`\\alpha, \\gamma, \\delta` (``sigma`` is not used here: pass the noise as
        ``eps``).
    context : array_like
        Context length :math:`c` in words.
    tom : array_like
        ToM order :math:`t` (0, 1, 2, …).
    capability : array_like, default 1.0
        Model capability multiplier :math:`m`.
    eps : array_like, default 0.0
        Per-question logit noise :math:`\\varepsilon` (or an item random intercept).

    Returns
    -------
    array
        :math:`\\eta`, broadcast over all arguments.

    Raises
    ------
    TypeError
        ``params`` is not a :class:`Params`.
    """
    _check_params(params)
    return (
        BETA0 * capability
        - params.alpha * context_load(context)
        - params.gamma * tom
        - params.delta * context * tom
        + eps
    )


def gauss_hermite(n_nodes: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for :math:`E[f(Z)]`, :math:`Z\\sim N(0,1)`.

    Returns ``(z, w)`` with :math:`E f(Z) \\approx \\sum_k w_k f(z_k)`, i.e. the physicists'
    Gauss–Hermite rule rescaled: :math:`z_k = \\sqrt2 x_k`, :math:`w_k = h_k/\\sqrt\\pi`.
    """
    if int(n_nodes) < 1:
        raise ValueError(f"n_nodes must be a positive integer, got {n_nodes!r}")
    x, h = np.polynomial.hermite.hermgauss(int(n_nodes))
    return np.sqrt(2.0) * x, h / np.sqrt(np.pi)


_GH_Z, _GH_W = gauss_hermite(48)


def expected_accuracy(mu: Any, sigma: Any) -> jax.Array:
    """Marginal probability of a correct answer, :math:`E[\\sigma(\\mu + \\varepsilon)]`.

    .. math::

        \\bar p(\\mu, \\sigma) = \\int \\operatorname{expit}(\\mu + \\sigma z)\\,\\phi(z)\\,dz
        \\approx \\sum_{k=1}^{48} w_k \\operatorname{expit}(\\mu + \\sigma z_k)

    (48-node Gauss–Hermite; the integrand is smooth, so the rule is accurate to ~1e-12 for
    :math:`\\sigma \\le 3`). With independent per-question :math:`\\varepsilon`, each answer is
    marginally Bernoulli(:math:`\\bar p`) and a cell count is Binomial(n, :math:`\\bar p`).
    """
    mu = jnp.asarray(mu)
    sigma = jnp.asarray(sigma)
    z = jnp.asarray(_GH_Z, dtype=mu.dtype if jnp.issubdtype(mu.dtype, jnp.floating) else None)
    w = jnp.asarray(_GH_W, dtype=z.dtype)
    vals = jax.nn.sigmoid(mu[..., None] + sigma[..., None] * z)
    return jnp.sum(vals * w, axis=-1)


def cell_probabilities(
    params: Params, context: Any, tom: Any, capability: Any = 1.0
) -> jax.Array:
    """Analytic expected accuracy of each design cell: :math:`\\bar p(\\eta_{ct}, \\sigma)`.

    ``context`` and ``tom`` broadcast against each other (pass ``context[:, None]`` and
    ``tom[None, :]`` for a context × ToM table).
    """
    _check_params(params)
    mu = linear_predictor(params, context, tom, capability)
    return expected_accuracy(mu, jnp.broadcast_to(jnp.asarray(params.sigma), jnp.shape(mu)))
