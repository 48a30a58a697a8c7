"""PyMC backend: the same GLMMs as :mod:`tomstats.glmm.numpyro_backend`, built in PyMC.

:func:`build_model` returns a ``pm.Model`` from a spec and a design; the structural model
calls :func:`tomstats.model.linear_predictor` on PyTensor tensors (through
:func:`tomstats.glmm._predictor.structural_eta`), so both backends share equation (1).
:func:`sample` runs PyMC's own NUTS (``sampler="pymc"``) or NumPyro's NUTS on the PyMC
graph compiled to JAX (``sampler="numpyro"``, i.e. ``pm.sample(nuts_sampler="numpyro")``).

Correlated random effects use ``pm.LKJCholeskyCov`` with ``sd_dist`` = the spec's scale
prior: it implies the same joint prior as NumPyro's ``sd ~ prior``, ``L ~ LKJCholesky``
(independent standard deviations and an LKJ correlation matrix), in another
parametrisation; the reported ``sd_<key>``, ``corr_<key>`` and ``re_<key>`` agree.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tomstats.glmm._predictor import formula_eta, structural_eta
from tomstats.glmm.data import ModelData
from tomstats.glmm.spec import FormulaSpec, Prior, StructuralSpec

__all__ = ["build_model", "sample"]


def _rv(name: str, prior: Prior, dims: Any = None, shape: Any = None) -> Any:
    """A PyMC random variable with the distribution of a backend-neutral :class:`Prior`."""
    import pymc as pm

    p = dict(prior.params)
    kw: dict[str, Any] = {"dims": dims} if dims is not None else {}
    if shape is not None:
        kw["shape"] = shape
    if name is None:  # a .dist() for LKJCholeskyCov
        kw.pop("dims", None)
        ctor = {"normal": lambda: pm.Normal.dist(p.get("loc"), p.get("scale"), **kw),
                "half_normal": lambda: pm.HalfNormal.dist(p.get("scale"), **kw),
                "half_student_t": lambda: pm.HalfStudentT.dist(p.get("df"), p.get("scale"), **kw),
                "exponential": lambda: pm.Exponential.dist(p.get("rate"), **kw),
                "student_t": lambda: pm.StudentT.dist(p.get("df"), p.get("loc"), p.get("scale"),
                                                      **kw)}
        return ctor[prior.dist]()
    if prior.dist == "normal":
        return pm.Normal(name, p["loc"], p["scale"], **kw)
    if prior.dist == "half_normal":
        return pm.HalfNormal(name, p["scale"], **kw)
    if prior.dist == "student_t":
        return pm.StudentT(name, p["df"], p["loc"], p["scale"], **kw)
    if prior.dist == "half_student_t":
        return pm.HalfStudentT(name, p["df"], p["scale"], **kw)
    if prior.dist == "exponential":
        return pm.Exponential(name, p["rate"], **kw)
    raise ValueError(f"prior {prior} cannot be used for parameter {name!r}")


def _likelihood(eta: Any, md: ModelData) -> None:
    import pymc as pm

    if md.trials is None:
        pm.Bernoulli("y", logit_p=eta, observed=md.y, dims="obs")
    else:
        pm.Binomial("y", n=md.trials, logit_p=eta, observed=md.y, dims="obs")


def _coords(md: ModelData) -> dict[str, Any]:
    coords: dict[str, Any] = {k: list(v) for k, v in md.coords.items()}
    coords["obs"] = np.arange(md.n_obs)
    for k in list(md.coords):
        if k.endswith("_effect"):
            coords[k + "2"] = list(md.coords[k])
    return coords


def _structural(spec: StructuralSpec, md: ModelData) -> Any:
    import pymc as pm
    import pytensor.tensor as pt

    nc = "capability" in spec.noncentered
    a = {"context": pt.as_tensor_variable(md.arrays["context"]),
         "tom": pt.as_tensor_variable(md.arrays["tom"]),
         "llm": md.arrays["llm"]}
    if "item" in md.arrays:
        a["item"] = md.arrays["item"]
    n_llm = len(md.coords["llm"])
    with pm.Model(coords=_coords(md)) as model:
        p: dict[str, Any] = {}
        if n_llm > 1 and spec.hierarchical:
            mu = _rv("capability_mu", spec.prior("capability_mu"))
            sd = _rv("capability_sd", spec.prior("capability_sd"))
            if nc:
                z = pm.Normal("capability_z", 0.0, 1.0, dims="llm")
                p["capability"] = pm.Deterministic("capability", mu + sd * z, dims="llm")
            else:
                p["capability"] = pm.Normal("capability", mu, sd, dims="llm")
        else:
            p["capability"] = _rv("capability", spec.prior("capability_mu"), dims="llm")
        fixed = dict(spec.fixed)
        for name, scale in (("alpha", spec.alpha_scale), ("gamma", None),
                            ("delta", spec.delta_scale)):
            if name in fixed:  # a constant, not a random variable: not in the posterior
                p[name] = pt.as_tensor_variable(np.float64(fixed[name]))
            elif scale is None:
                p[name] = _rv(name, spec.prior(name))
            else:
                raw = _rv(f"{name}_scaled", spec.prior(f"{name}_scaled"))
                p[name] = pm.Deterministic(name, raw * scale)
        nc = "slopes" in spec.noncentered
        if "tom_order" in spec.random_slopes:
            sd = _rv("sd_gamma_llm", spec.prior("sd_gamma_llm"))
            if nc:
                z = pm.Normal("gamma_llm_z", 0.0, 1.0, dims="llm")
                p["gamma_llm"] = pm.Deterministic("gamma_llm", p["gamma"] + sd * z, dims="llm")
            else:
                p["gamma_llm"] = pm.Normal("gamma_llm", p["gamma"], sd, dims="llm")
        if "context" in spec.random_slopes:
            sd = _rv("sd_alpha_llm_scaled", spec.prior("sd_alpha_llm_scaled"))
            if nc:
                dev = sd * pm.Normal("alpha_llm_z", 0.0, 1.0, dims="llm")
            else:
                dev = pm.Normal("alpha_llm_dev", 0.0, sd, dims="llm")
            p["alpha_llm"] = pm.Deterministic("alpha_llm", p["alpha"] + spec.alpha_scale * dev,
                                              dims="llm")
        nc = "item" in spec.noncentered
        if spec.item_effects:
            sigma = _rv("sigma_item", spec.prior("sigma_item"))
            if nc:
                z = pm.Normal("item_z", 0.0, 1.0, dims="item")
                p["item_effect"] = pm.Deterministic("item_effect", sigma * z, dims="item")
            else:
                p["item_effect"] = pm.Normal("item_effect", 0.0, sigma, dims="item")
        _likelihood(structural_eta(p, a), md)
    return model


def _formula(spec: FormulaSpec, md: ModelData) -> Any:
    import pymc as pm
    import pytensor.tensor as pt

    names = md.coords["coef"]
    pri = [spec.prior("Intercept") if i == md.intercept else spec.prior(n)
           for i, n in enumerate(names)]
    with pm.Model(coords=_coords(md)) as model:
        beta_c = pm.Normal("beta_c", np.array([q["loc"] for q in pri]),
                           np.array([q["scale"] for q in pri]), dims="coef")
        if md.intercept is None:
            pm.Deterministic("beta", beta_c, dims="coef")
        else:
            i0 = md.intercept
            shift = pt.dot(pt.as_tensor_variable(md.arrays["X_mean"]), beta_c)
            pm.Deterministic("beta", pt.set_subtensor(beta_c[i0], beta_c[i0] - shift),
                             dims="coef")
        terms = []
        for t in spec.random:
            nc = t.key in spec.noncentered
            Z = pt.as_tensor_variable(md.arrays[f"Z_{t.key}"])
            g = md.arrays[f"g_{t.key}"]
            eff = f"{t.key}_effect"
            d = md.arrays[f"Z_{t.key}"].shape[1]
            sd_prior = spec.prior(f"sd_{t.key}")
            if t.correlated and d > 1:
                chol, corr, sd = pm.LKJCholeskyCov(
                    f"chol_{t.key}", n=d, eta=spec.prior(f"lkj_{t.key}")["eta"],
                    sd_dist=_rv(None, sd_prior, shape=d), compute_corr=True,
                    store_in_trace=False)
                pm.Deterministic(f"sd_{t.key}", sd, dims=eff)
                pm.Deterministic(f"corr_{t.key}", corr, dims=(eff, eff + "2"))
                if nc:
                    z = pm.Normal(f"z_{t.key}", 0.0, 1.0, dims=(t.dim, eff))
                    b = pm.Deterministic(f"re_{t.key}", pt.dot(z, chol.T), dims=(t.dim, eff))
                else:
                    b = pm.MvNormal(f"re_{t.key}", mu=np.zeros(d), chol=chol,
                                    dims=(t.dim, eff))
            else:
                sd = _rv(f"sd_{t.key}", sd_prior, dims=eff)
                if nc:
                    z = pm.Normal(f"z_{t.key}", 0.0, 1.0, dims=(t.dim, eff))
                    b = pm.Deterministic(f"re_{t.key}", z * sd, dims=(t.dim, eff))
                else:
                    b = pm.Normal(f"re_{t.key}", 0.0, sd, dims=(t.dim, eff))
            terms.append((b, g, Z))
        X = pt.as_tensor_variable(md.arrays["X"])
        _likelihood(formula_eta(X, beta_c, terms), md)
    return model


def build_model(spec: StructuralSpec | FormulaSpec, md: ModelData) -> Any:
    """The ``pm.Model`` of a spec and design."""
    return _structural(spec, md) if isinstance(spec, StructuralSpec) else _formula(spec, md)


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
    sampler: str = "pymc",
    cores: int | None = None,
    chain_method: str = "vectorized",
    max_tree_depth: int = 10,
    log_likelihood: bool = True,
    posterior_predictive: bool = True,
) -> dict[str, Any]:
    """Sample with PyMC (``sampler="pymc"``) or NumPyro on the PyMC graph (``"numpyro"``).

    Returns the same dictionary as :func:`tomstats.glmm.numpyro_backend.sample`.
    """
    import jax
    import pymc as pm

    model = build_model(spec, md)
    x64 = bool(jax.config.jax_enable_x64)
    # importing PyMC's JAX bridge also rewrites XLA_FLAGS (100 host devices) for this process
    # and every process it starts later: restored below, so that nothing started after a fit
    # (a tomstats command, a test's child process) sees 100 CPU devices
    xla_flags = os.environ.get("XLA_FLAGS")
    try:
        with model:
            if sampler == "pymc":
                idata = pm.sample(
                    draws=draws, tune=tune, chains=chains, cores=cores or 1, random_seed=seed,
                    target_accept=target_accept, progressbar=progress,
                    compute_convergence_checks=False, return_inferencedata=True,
                    idata_kwargs={"log_likelihood": log_likelihood},
                    nuts={"max_treedepth": max_tree_depth})
            elif sampler == "numpyro":
                from tomstats._compile_cache import enable_compilation_cache

                enable_compilation_cache()
                # importing PyMC's JAX bridge switches JAX to 64-bit; restored below.
                idata = pm.sample(
                    draws=draws, tune=tune, chains=chains, random_seed=seed,
                    target_accept=target_accept, progressbar=progress, nuts_sampler="numpyro",
                    compute_convergence_checks=False,
                    idata_kwargs={"log_likelihood": log_likelihood},
                    nuts_sampler_kwargs={
                        "chain_method": chain_method,
                        "nuts_kwargs": {"max_tree_depth": max_tree_depth}})
            else:
                raise ValueError(f"PyMC sampler must be 'pymc' or 'numpyro', got {sampler!r}")
            y_rep = None
            if posterior_predictive:
                pp = pm.sample_posterior_predictive(idata, var_names=["y"],
                                                    random_seed=seed + 1, progressbar=False)
                y_rep = pp.posterior_predictive["y"].to_numpy()
    finally:
        jax.config.update("jax_enable_x64", x64)
        if xla_flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = xla_flags
    post = {k: v.to_numpy() for k, v in idata.posterior.data_vars.items()}
    ss = idata.sample_stats
    stats: dict[str, np.ndarray] = {}
    for name in ("diverging", "energy", "lp", "n_steps", "tree_depth", "acceptance_rate",
                 "step_size", "reached_max_treedepth"):
        if name in ss:
            stats[name] = ss[name].to_numpy()
    if "reached_max_treedepth" not in stats:
        stats["reached_max_treedepth"] = stats["n_steps"] >= 2**max_tree_depth - 1
    stats["diverging"] = stats["diverging"].astype(bool)
    ll = idata.log_likelihood["y"].to_numpy() if log_likelihood else None
    return {"posterior": post, "sample_stats": stats, "log_likelihood": ll, "y_rep": y_rep}
