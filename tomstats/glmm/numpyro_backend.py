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

__all__ = ["structural_model", "formula_model", "model_function", "sample", "to_jax",
           "dense_block", "latent_sites", "DENSE_SITE_MAX", "DENSE_MIN_TUNE", "DENSE_BLOCK_MAX"]

#: Largest latent site (elements) that joins the dense mass-matrix block.
DENSE_SITE_MAX = 32
#: Largest dense block (elements); beyond it the mass matrix stays diagonal.
DENSE_BLOCK_MAX = 128


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


def latent_sites(spec: StructuralSpec | FormulaSpec, data: Mapping[str, Any]
                 ) -> dict[str, tuple[int, bool]]:
    """Every latent (sampled, unobserved) site of the model, in the order the model samples
    them: its number of elements and whether its support is the whole real line (not a
    scale or a correlation matrix). Shapes only: the model is traced abstractly
    (:func:`jax.eval_shape`), nothing is compiled or run."""
    from numpyro import handlers
    from numpyro.distributions import constraints

    model = model_function(spec)
    real: dict[str, bool] = {}

    def sites(key: Any) -> dict[str, Any]:
        tr = handlers.trace(handlers.seed(model, key)).get_trace(spec, data, y=None)
        out = {}
        for k, v in tr.items():
            if v["type"] == "sample" and not v["is_observed"] and k != "y":
                out[k] = v["value"]
                support = v["fn"].support
                real[k] = support in (constraints.real, constraints.real_vector)
        return out

    shapes = jax.eval_shape(sites, jax.random.PRNGKey(0))
    return {k: (int(np.prod(v.shape)), real[k]) for k, v in shapes.items()}


def _is_random_effect(site: str, spec: StructuralSpec | FormulaSpec,
                      data: Mapping[str, Any]) -> bool:
    """Whether a latent site holds random effects (scaled by a sampled sd: a funnel), centred
    or not: ``item_z``, ``capability_z``, ``alpha_llm_dev``, ``z_model``, ``re_item``, ...;
    and the capabilities when they are pooled and centred."""
    if site.endswith(("_z", "_dev")) or site.startswith(("z_", "re_")):
        return True
    if site in ("item_effect", "gamma_llm"):
        return True
    return (site == "capability" and isinstance(spec, StructuralSpec)
            and spec.hierarchical and data.get("n_llm", 1) > 1)


def dense_block(spec: StructuralSpec | FormulaSpec, data: Mapping[str, Any]) -> tuple[str, ...]:
    r"""Latent sites that share a dense block of NUTS's mass matrix (``dense_mass="auto"``).

    Every real-valued site with at most :data:`DENSE_SITE_MAX` elements that is not a
    random effect: the regression coefficients (unpooled capabilities or their population
    mean, :math:`\tilde\alpha`, :math:`\gamma`, :math:`\tilde\delta`; a formula's fixed
    effects). The regressors of equation (1) are not centred (:math:`c\ln(1+c/500)`, :math:`t` and
    :math:`ct` all grow with the cells), so these coefficients are strongly correlated a
    posteriori (0.6–0.8 on one LLM's log), which a diagonal mass matrix cannot follow. Scale
    parameters and random effects keep the diagonal part: their geometry is a funnel, where
    one dense metric adapted over the whole warm-up makes NUTS diverge (seen with four
    pooled capabilities). Empty (all diagonal) when the block would have fewer than two
    or more than :data:`DENSE_BLOCK_MAX` elements; its cost per leapfrog step is
    :math:`O(d^2)` for :math:`d` elements.
    """
    sites = latent_sites(spec, data)
    block = tuple(k for k, (n, real) in sites.items()
                  if real and n <= DENSE_SITE_MAX and not _is_random_effect(k, spec, data))
    if not 2 <= sum(sites[k][0] for k in block) <= DENSE_BLOCK_MAX:
        return ()
    return block


#: Fewest warm-up iterations for which ``dense_mass="auto"`` adapts a dense block.
DENSE_MIN_TUNE = 200


def _dense_setting(spec: StructuralSpec | FormulaSpec, data: Mapping[str, Any],
                   dense_mass: bool | str, tune: int) -> Any:
    """NumPyro's ``dense_mass`` argument for :func:`sample`'s ``dense_mass``: ``"auto"`` is
    diagonal below :data:`DENSE_MIN_TUNE` warm-up iterations (too few draws to estimate a
    covariance), else :func:`dense_block`."""
    if dense_mass == "auto":
        if tune < DENSE_MIN_TUNE:
            return False
        block = dense_block(spec, data)
        return [block] if block else False
    return bool(dense_mass)


def _stats(extra: Mapping[str, Any], max_tree_depth: int) -> dict[str, np.ndarray]:
    """ArviZ's sample statistics from NumPyro's per-transition fields."""
    n_steps = np.asarray(extra["num_steps"]).astype(np.int64)
    return {
        "diverging": np.asarray(extra["diverging"]).astype(bool),
        "energy": np.asarray(extra["energy"]).astype(float),
        "lp": -np.asarray(extra["potential_energy"]).astype(float),
        "n_steps": n_steps,
        "tree_depth": (np.floor(np.log2(np.maximum(n_steps, 1))) + 1).astype(np.int64),
        "reached_max_treedepth": n_steps >= 2**max_tree_depth - 1,
        "acceptance_rate": np.asarray(extra["accept_prob"]).astype(float),
        "step_size": np.asarray(extra["step_size"]).astype(float),
    }


def _sample_mcmc(spec: StructuralSpec | FormulaSpec, md: ModelData, *, chains: int,
                 draws: int, tune: int, seed: int, target_accept: float, progress: bool,
                 chain_method: str, max_tree_depth: int, log_likelihood: bool,
                 posterior_predictive: bool, dense_mass: bool | str) -> dict[str, Any]:
    """``chain_method="parallel"`` or ``"sequential"``: NumPyro's own ``MCMC`` driver."""
    from numpyro.infer import MCMC, NUTS

    model = model_function(spec)
    data = to_jax(spec, md)
    y = jnp.asarray(md.y)
    from tomstats.glmm._nuts import tree_depths

    kernel = NUTS(model, target_accept_prob=target_accept,
                  max_tree_depth=tree_depths(max_tree_depth),
                  dense_mass=_dense_setting(spec, data, dense_mass, tune))
    mcmc = MCMC(kernel, num_warmup=tune, num_samples=draws, num_chains=chains,
                chain_method=chain_method, progress_bar=progress)
    key, key_pp = jax.random.split(jax.random.PRNGKey(seed))
    mcmc.run(key, spec, data, y=y, extra_fields=("diverging", "num_steps", "energy",
                                                 "potential_energy", "accept_prob",
                                                 "adapt_state.step_size"))
    extra = dict(mcmc.get_extra_fields(group_by_chain=True))
    extra["step_size"] = extra.pop("adapt_state.step_size")
    samples = mcmc.get_samples(group_by_chain=True)
    return _finish(model, spec, data, y, samples, _stats(extra, max_tree_depth), key_pp,
                   log_likelihood=log_likelihood, posterior_predictive=posterior_predictive)


def _finish(model: Any, spec: StructuralSpec | FormulaSpec, data: Mapping[str, Any], y: Any,
            samples: Mapping[str, Any], stats: dict[str, np.ndarray], key_pp: Any, *,
            log_likelihood: bool, posterior_predictive: bool) -> dict[str, Any]:
    """Pointwise log-likelihood and replicated outcomes; the backend's result dict."""
    from numpyro.infer import Predictive
    from numpyro.infer import log_likelihood as np_loglik

    posterior = {k: np.asarray(v) for k, v in samples.items()}
    samples = {k: jnp.asarray(v) for k, v in samples.items()}
    ll = None
    if log_likelihood:
        ll = np.asarray(np_loglik(model, samples, spec, data, y=y, batch_ndims=2)["y"])
    y_rep = None
    if posterior_predictive:
        pred = Predictive(model, posterior_samples=samples, batch_ndims=2, return_sites=["y"])
        y_rep = np.asarray(pred(key_pp, spec, data, y=None)["y"])
    return {"posterior": posterior, "sample_stats": stats, "log_likelihood": ll, "y_rep": y_rep}


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
    dense_mass: bool | str = "auto",
    cores: int | None = None,
) -> dict[str, Any]:
    """Run NUTS; return NumPy arrays with leading (chain, draw) axes.

    ``dense_mass``: ``"auto"`` adapts a dense mass matrix over :func:`dense_block` and a
    diagonal one over the rest (all diagonal with fewer than :data:`DENSE_MIN_TUNE`
    warm-up iterations); ``True`` a dense one over every latent site; ``False`` a
    diagonal one (PyMC's default). ``cores``: how many chains (on a CPU; groups
    of chains elsewhere, :func:`tomstats.glmm._nuts.chain_groups`) may advance at once,
    in separate threads (default every usable CPU); it never changes the draws.

    Returns
    -------
    dict
        ``posterior`` (name → array), ``sample_stats`` (ArviZ names: ``diverging``,
        ``energy``, ``lp``, ``n_steps``, ``tree_depth``, ``reached_max_treedepth``,
        ``acceptance_rate``, ``step_size``), ``log_likelihood`` and ``y_rep`` (arrays of
        shape (chain, draw, n_obs) or None).
    """
    from tomstats._compile_cache import enable_compilation_cache
    from tomstats.glmm._nuts import chain_groups, run_chains, runner, usable_cpus

    if chain_method != "vectorized":
        return _sample_mcmc(spec, md, chains=chains, draws=draws, tune=tune, seed=seed,
                            target_accept=target_accept, progress=progress,
                            chain_method=chain_method, max_tree_depth=max_tree_depth,
                            log_likelihood=log_likelihood,
                            posterior_predictive=posterior_predictive, dense_mass=dense_mass)
    enable_compilation_cache()
    model = model_function(spec)
    data = to_jax(spec, md)
    y = jnp.asarray(md.y)
    dense = _dense_setting(spec, data, dense_mass, tune)
    groups = chain_groups(chains)
    run = runner(model, spec, data, y, chains=chains // groups, tune=tune, draws=draws,
                 target_accept=target_accept, max_tree_depth=max_tree_depth, dense=dense)
    key, key_pp = jax.random.split(jax.random.PRNGKey(seed))
    keys = jax.random.split(key, chains)
    samples, extra = run_chains(run, keys, data, y, tune=tune, draws=draws, progress=progress,
                                groups=groups,
                                cores=usable_cpus() if cores is None else cores)
    return _finish(model, spec, data, y, samples, _stats(extra, max_tree_depth), key_pp,
                   log_likelihood=log_likelihood, posterior_predictive=posterior_predictive)
