"""NumPyro backend: the structural and formula GLMMs as plain model functions + NUTS.

The models follow numpyro's convention: a model is a function of the data that samples
every unknown with ``numpyro.sample``; with ``y=None`` it simulates, with ``y`` given it
conditions. Inference (:func:`sample`) is separate. Both models are non-centred unless the
spec says otherwise; priors come from the spec (:mod:`tomstats.glmm.spec`), exactly as in
:mod:`tomstats.glmm.pymc_backend`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from tomstats.glmm._predictor import formula_eta, structural_eta
from tomstats.glmm.data import ModelData
from tomstats.glmm.spec import FormulaSpec, Prior, StructuralSpec

__all__ = ["structural_model", "formula_model", "model_function", "sample", "to_jax"]


def _dist(prior: Prior) -> dist.Distribution:
    """NumPyro distribution of a backend-neutral :class:`Prior`."""
    p = dict(prior.params)
    if prior.dist == "normal":
        return dist.Normal(p["loc"], p["scale"])
    if prior.dist == "half_normal":
        return dist.HalfNormal(p["scale"])
    if prior.dist == "student_t":
        return dist.StudentT(p["df"], p["loc"], p["scale"])
    if prior.dist == "half_student_t":
        return dist.FoldedDistribution(dist.StudentT(p["df"], 0.0, p["scale"]))
    if prior.dist == "exponential":
        return dist.Exponential(p["rate"])
    raise ValueError(f"prior {prior} cannot be used for a scalar parameter")


def _vec(prior: Prior, n: int) -> dist.Distribution:
    return _dist(prior).expand([n]).to_event(1)


def _std_normal(*shape: int) -> dist.Distribution:
    return dist.Normal(0.0, 1.0).expand(list(shape)).to_event(len(shape))


def _likelihood(eta: Any, data: Mapping[str, Any], y: Any) -> None:
    with numpyro.plate("obs", eta.shape[-1]):
        if data.get("trials") is None:
            numpyro.sample("y", dist.BernoulliLogits(eta), obs=y)
        else:
            numpyro.sample("y", dist.BinomialLogits(eta, total_count=data["trials"]), obs=y)


def structural_model(spec: StructuralSpec, data: Mapping[str, Any], y: Any = None) -> None:
    """Equation (1) as a GLMM (see :class:`~tomstats.glmm.spec.StructuralSpec` for the
    formulas and priors). ``data`` holds ``context``, ``tom``, ``llm``, ``item``,
    ``trials`` (or None) and the level counts ``n_llm``, ``n_item``."""
    nc = "capability" in spec.noncentered
    n_llm = data["n_llm"]
    p: dict[str, Any] = {}
    if n_llm > 1 and spec.hierarchical:
        mu = numpyro.sample("capability_mu", _dist(spec.prior("capability_mu")))
        sd = numpyro.sample("capability_sd", _dist(spec.prior("capability_sd")))
        if nc:
            z = numpyro.sample("capability_z", _std_normal(n_llm))
            p["capability"] = numpyro.deterministic("capability", mu + sd * z)
        else:
            p["capability"] = numpyro.sample(
                "capability", dist.Normal(mu, sd).expand([n_llm]).to_event(1))
    else:
        p["capability"] = numpyro.sample("capability", _vec(spec.prior("capability_mu"), n_llm))
    fixed = dict(spec.fixed)
    for name, scale in (("alpha", spec.alpha_scale), ("gamma", None),
                        ("delta", spec.delta_scale)):
        if name in fixed:  # a constant, not a random variable: not in the posterior
            p[name] = jnp.asarray(fixed[name])
        elif scale is None:
            p[name] = numpyro.sample(name, _dist(spec.prior(name)))
        else:
            raw = numpyro.sample(f"{name}_scaled", _dist(spec.prior(f"{name}_scaled")))
            p[name] = numpyro.deterministic(name, raw * scale)
    nc = "slopes" in spec.noncentered
    if "tom_order" in spec.random_slopes:
        sd = numpyro.sample("sd_gamma_llm", _dist(spec.prior("sd_gamma_llm")))
        if nc:
            z = numpyro.sample("gamma_llm_z", _std_normal(n_llm))
            p["gamma_llm"] = numpyro.deterministic("gamma_llm", p["gamma"] + sd * z)
        else:
            p["gamma_llm"] = numpyro.sample(
                "gamma_llm", dist.Normal(p["gamma"], sd).expand([n_llm]).to_event(1))
    if "context" in spec.random_slopes:
        sd = numpyro.sample("sd_alpha_llm_scaled", _dist(spec.prior("sd_alpha_llm_scaled")))
        if nc:
            z = numpyro.sample("alpha_llm_z", _std_normal(n_llm))
            dev = sd * z
        else:
            dev = numpyro.sample("alpha_llm_dev", dist.Normal(0.0, sd).expand([n_llm]).to_event(1))
        p["alpha_llm"] = numpyro.deterministic("alpha_llm", p["alpha"] + spec.alpha_scale * dev)
    nc = "item" in spec.noncentered
    if spec.item_effects:
        n_item = data["n_item"]
        sigma = numpyro.sample("sigma_item", _dist(spec.prior("sigma_item")))
        if nc:
            z = numpyro.sample("item_z", _std_normal(n_item))
            p["item_effect"] = numpyro.deterministic("item_effect", sigma * z)
        else:
            p["item_effect"] = numpyro.sample(
                "item_effect", dist.Normal(0.0, sigma).expand([n_item]).to_event(1))
    eta = structural_eta(p, data)
    _likelihood(eta, data, y)


def formula_model(spec: FormulaSpec, data: Mapping[str, Any], y: Any = None) -> None:
    """An lme4-style GLMM (see :class:`~tomstats.glmm.spec.FormulaSpec`). ``data`` holds the
    centred design ``X``, ``X_mean``, prior vectors ``beta_loc``/``beta_scale``, per term
    ``Z_<key>``, ``g_<key>``, ``n_<key>`` (levels), and ``trials`` (or None)."""
    beta_c = numpyro.sample("beta_c", dist.Normal(data["beta_loc"], data["beta_scale"])
                            .to_event(1))
    i0 = data["intercept"]
    if i0 is None:
        numpyro.deterministic("beta", beta_c)
    else:
        numpyro.deterministic("beta", beta_c.at[i0].add(-(data["X_mean"] @ beta_c)))
    terms = []
    for t in spec.random:
        nc = t.key in spec.noncentered
        Z, g = data[f"Z_{t.key}"], data[f"g_{t.key}"]
        G, d = data[f"n_{t.key}"], Z.shape[1]
        sd = numpyro.sample(f"sd_{t.key}", _vec(spec.prior(f"sd_{t.key}"), d))
        if t.correlated and d > 1:
            eta_lkj = spec.prior(f"lkj_{t.key}")["eta"]
            L = numpyro.sample(f"L_{t.key}", dist.LKJCholesky(d, eta_lkj))
            chol = sd[:, None] * L
            numpyro.deterministic(f"corr_{t.key}", L @ L.T)
            if nc:
                z = numpyro.sample(f"z_{t.key}", _std_normal(G, d))
                b = numpyro.deterministic(f"re_{t.key}", z @ chol.T)
            else:
                b = numpyro.sample(f"re_{t.key}", dist.MultivariateNormal(
                    jnp.zeros(d), scale_tril=chol).expand([G]).to_event(1))
        elif nc:
            z = numpyro.sample(f"z_{t.key}", _std_normal(G, d))
            b = numpyro.deterministic(f"re_{t.key}", z * sd)
        else:
            b = numpyro.sample(f"re_{t.key}",
                               dist.Normal(0.0, sd).expand([G, d]).to_event(2))
        terms.append((b, g, Z))
    eta = formula_eta(data["X"], beta_c, terms)
    _likelihood(eta, data, y)


def model_function(spec: StructuralSpec | FormulaSpec) -> Any:
    """The NumPyro model function of a spec."""
    return structural_model if isinstance(spec, StructuralSpec) else formula_model


def to_jax(spec: StructuralSpec | FormulaSpec, md: ModelData) -> dict[str, Any]:
    """The ``data`` argument of the model functions (JAX arrays + static sizes)."""
    out: dict[str, Any] = {"trials": None if md.trials is None else jnp.asarray(md.trials)}
    for k, v in md.arrays.items():
        out[k] = jnp.asarray(v)
    if isinstance(spec, StructuralSpec):
        out["n_llm"] = len(md.coords["llm"])
        out["n_item"] = len(md.coords.get("item", []))
    else:
        out["intercept"] = md.intercept
        names = md.coords["coef"]
        pri = [spec.prior("Intercept") if i == md.intercept else spec.prior(n)
               for i, n in enumerate(names)]
        out["beta_loc"] = jnp.asarray([p["loc"] for p in pri])
        out["beta_scale"] = jnp.asarray([p["scale"] for p in pri])
        for t in spec.random:
            out[f"n_{t.key}"] = len(md.coords[t.dim])
    return out


def sample(
    spec: StructuralSpec | FormulaSpec,
    md: ModelData,
    *,
    chains: int,
    draws: int,
    tune: int,
    seed: int,
    target_accept: float,
    progress: bool,
    chain_method: str = "vectorized",
    max_tree_depth: int = 10,
    log_likelihood: bool = True,
    posterior_predictive: bool = True,
) -> dict[str, Any]:
    """Run NUTS; return NumPy arrays with leading (chain, draw) axes.

    Returns
    -------
    dict
        ``posterior`` (name → array), ``sample_stats`` (ArviZ names: ``diverging``,
        ``energy``, ``lp``, ``n_steps``, ``tree_depth``, ``reached_max_treedepth``,
        ``acceptance_rate``, ``step_size``), ``log_likelihood`` and ``y_rep`` (arrays of
        shape (chain, draw, n_obs) or None).
    """
    from numpyro.infer import MCMC, NUTS, Predictive
    from numpyro.infer import log_likelihood as np_loglik

    model = model_function(spec)
    data = to_jax(spec, md)
    y = jnp.asarray(md.y)
    kernel = NUTS(model, target_accept_prob=target_accept, max_tree_depth=max_tree_depth)
    mcmc = MCMC(kernel, num_warmup=tune, num_samples=draws, num_chains=chains,
                chain_method=chain_method, progress_bar=progress)
    key, key_pp = jax.random.split(jax.random.PRNGKey(seed))
    mcmc.run(key, spec, data, y=y, extra_fields=("diverging", "num_steps", "energy",
                                                 "potential_energy", "accept_prob",
                                                 "adapt_state.step_size"))
    samples = mcmc.get_samples(group_by_chain=True)
    extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    n_steps = extra["num_steps"].astype(np.int64)
    stats = {
        "diverging": extra["diverging"].astype(bool),
        "energy": extra["energy"].astype(float),
        "lp": -extra["potential_energy"].astype(float),
        "n_steps": n_steps,
        "tree_depth": (np.floor(np.log2(np.maximum(n_steps, 1))) + 1).astype(np.int64),
        "reached_max_treedepth": n_steps >= 2**max_tree_depth - 1,
        "acceptance_rate": extra["accept_prob"].astype(float),
        "step_size": extra["adapt_state.step_size"].astype(float),
    }
    posterior = {k: np.asarray(v) for k, v in samples.items()}
    ll = None
    if log_likelihood:
        ll = np.asarray(np_loglik(model, samples, spec, data, y=y, batch_ndims=2)["y"])
    y_rep = None
    if posterior_predictive:
        pred = Predictive(model, posterior_samples=samples, batch_ndims=2, return_sites=["y"])
        y_rep = np.asarray(pred(key_pp, spec, data, y=None)["y"])
    return {"posterior": posterior, "sample_stats": stats, "log_likelihood": ll, "y_rep": y_rep}
