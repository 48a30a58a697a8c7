"""Fit, save, load and predict: the user-facing half of :mod:`tomstats.glmm`.

``fit`` goes formula/``"structural"`` → spec (:mod:`tomstats.glmm.spec`) → numeric design
(:mod:`tomstats.glmm.data`) → backend (:mod:`tomstats.glmm.numpyro_backend` or
:mod:`tomstats.glmm.pymc_backend`) → one ArviZ ``InferenceData`` whose layout does not
depend on the backend (``backend="laplace"`` instead returns a maximum-likelihood
:class:`~tomstats.glmm.lme_result.LaplaceFit`, saved as JSON; see :mod:`tomstats.glmm.lme`):

=======================  =================================================================
group                    content
=======================  =================================================================
posterior                parameters (see the spec classes for names) with dims ``llm``,
                         ``item``, ``coef``, group and ``<key>_effect`` dims; parameters
                         held ``fixed`` are constants of the spec, not posterior variables
posterior_predictive     ``y`` replicated per observation (dim ``obs``)
log_likelihood           ``y`` pointwise log-likelihood (dim ``obs``), float32
sample_stats             ``diverging``, ``energy``, ``lp``, ``n_steps``, ``tree_depth``,
                         ``reached_max_treedepth``, ``acceptance_rate``, ``step_size``
observed_data            ``y`` successes per observation
constant_data            ``obs_trials`` (obs), ``row_obs`` (row → obs) and the data columns
                         the model read, one value per data row (dim ``row``)
=======================  =================================================================

Attributes (root and posterior) record the provenance: ``tomstats_glmm_format``,
``model``, ``spec`` (JSON), ``priors`` (JSON), ``data_hash`` (SHA-256 of the columns
used), ``backend``, ``sampler`` (JSON), ``seed``, ``versions`` (JSON), ``created_at``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tomstats._io import atomic_path, ensure_writable_file
from tomstats._validate import check_type
from tomstats.glmm.data import (
    ModelData,
    build_design,
    formula_matrices,
    prepare_data,
    structural_columns,
)
from tomstats.glmm.fit_file import FORMAT_KEY as _FORMAT_KEY
from tomstats.glmm.fit_file import FORMAT_VERSION, read_netcdf_fit
from tomstats.glmm.fit_file import fit_dims as _dims
from tomstats.glmm.fit_file import netcdf_engine as _netcdf_engine
from tomstats.glmm.provenance import data_hash, package_versions, used_columns
from tomstats.glmm.spec import FormulaSpec, StructuralSpec, spec_from_json

if TYPE_CHECKING:  # annotations only: the backends' stacks load when a fit runs
    import xarray as xr
    from arviz import InferenceData

    from tomstats.glmm.lme_result import LaplaceFit

__all__ = ["BACKENDS", "SAMPLER_BACKENDS", "FORMAT_VERSION", "MAX_TREE_DEPTH", "fit", "save_fit",
           "load_fit", "predict", "fit_spec", "training_data", "structural_param_draws"]

#: The samplers (Bayesian posterior as ArviZ ``InferenceData``).
SAMPLER_BACKENDS = ("numpyro", "pymc", "pymc-numpyro")
#: Every backend of :func:`fit`: the samplers and ``"laplace"`` (maximum likelihood,
#: :class:`~tomstats.glmm.lme_result.LaplaceFit`).
BACKENDS = SAMPLER_BACKENDS + ("laplace",)
#: Options of :func:`fit` that configure a sampler; ``backend="laplace"`` rejects values
#: other than their defaults (``progress`` is ignored).
_SAMPLER_OPTIONS = ("chains", "draws", "tune", "seed", "target_accept", "chain_method",
                    "max_tree_depth", "cores", "log_likelihood", "posterior_predictive",
                    "dense_mass")
#: Largest NUTS tree depth a fit accepts: a tree of depth d takes up to 2**d - 1 gradient
#: evaluations per draw, so depth 15 already allows 32767 (a run of days on a real log);
#: NumPyro and PyMC default to 10, and Stan caps its default at 10 too.
MAX_TREE_DEPTH = 15
_PREDICT_CHUNK = 2_000_000  # draws × rows evaluated at once by predict()


def _check_int(name: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be an integer from {lo} to {hi}, got {v!r}")
    return int(v)


def _column_array(s: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=np.int8)
    if pd.api.types.is_numeric_dtype(s):
        return s.to_numpy()
    return np.asarray(s.astype(str).to_numpy(dtype=object), dtype=str)


def _coords(md: ModelData, n_rows: int) -> dict[str, Any]:
    coords: dict[str, Any] = {k: list(v) for k, v in md.coords.items()}
    for k in list(md.coords):
        if k.endswith("_effect"):
            coords[k + "2"] = list(md.coords[k])
    coords["obs"] = np.arange(md.n_obs)
    coords["row"] = np.arange(n_rows)
    return coords


def _assemble(
    spec: StructuralSpec | FormulaSpec,
    md: ModelData,
    df: pd.DataFrame,
    res: Mapping[str, Any],
    attrs: dict[str, Any],
) -> Any:
    import arviz as az
    import xarray as xr

    coords = _coords(md, len(df))
    dims = _dims(spec)
    post = {k: v for k, v in res["posterior"].items()}
    posterior = az.dict_to_dataset(post, coords=coords, dims=dims, attrs=attrs)
    groups: dict[str, xr.Dataset] = {
        "posterior": posterior,
        "sample_stats": az.dict_to_dataset(res["sample_stats"]),
    }
    if res.get("log_likelihood") is not None:
        groups["log_likelihood"] = az.dict_to_dataset(
            {"y": np.asarray(res["log_likelihood"], dtype=np.float32)}, coords=coords,
            dims={"y": ["obs"]})
    if res.get("y_rep") is not None:
        big = md.trials is not None and int(md.trials.max()) > 127
        groups["posterior_predictive"] = az.dict_to_dataset(
            {"y": np.asarray(res["y_rep"]).astype(np.int32 if big else np.int8)},
            coords=coords, dims={"y": ["obs"]})
    groups["observed_data"] = xr.Dataset({"y": ("obs", md.y)}, coords={"obs": coords["obs"]})
    trials = np.ones(md.n_obs, dtype=np.int64) if md.trials is None else md.trials
    const: dict[str, Any] = {"obs_trials": ("obs", trials), "row_obs": ("row", md.row_obs)}
    for c in used_columns(spec, df):
        const[f"data_{c}"] = ("row", _column_array(df[c]))
    groups["constant_data"] = xr.Dataset(const, coords={"obs": coords["obs"],
                                                        "row": coords["row"]})
    for g in groups.values():
        g.attrs.setdefault("created_at", attrs["created_at"])
    return az.InferenceData(attrs=dict(attrs), **groups)


def fit(
    data: pd.DataFrame,
    model: str = "structural",
    backend: str = "numpyro",
    *,
    chains: int = 4,
    draws: int = 1000,
    tune: int = 1000,
    seed: int = 0,
    target_accept: float = 0.9,
    family: str | None = None,
    progress: bool = True,
    columns: Mapping[str, str] | None = None,
    chain_method: str = "vectorized",
    max_tree_depth: int = 10,
    cores: int | None = None,
    log_likelihood: bool = True,
    posterior_predictive: bool = True,
    dense_mass: bool | str = "auto",
    **spec_options: Any,
) -> InferenceData | LaplaceFit:
    """Fit a Bayesian GLMM (or, with ``backend="laplace"``, a maximum-likelihood GLMM) to
    per-question (or binomial) outcomes.

    Parameters
    ----------
    data : pandas.DataFrame
        Long data, one row per question (``correct`` 0/1) or per item with counts
        (``successes``, ``trials``); other standard columns ``model``, ``item``,
        ``tom_order``, ``context_words`` (see :mod:`tomstats.glmm.data`).
    model : str
        ``"structural"`` (equation (1), :class:`~tomstats.glmm.spec.StructuralSpec`) or an
        lme4-style formula such as ``"correct ~ tom_order * log_context + (1 | model) +
        (1 | item)"`` (:class:`~tomstats.glmm.spec.FormulaSpec`); binomial responses are
        written ``"successes | trials(n) ~ ..."``.
    backend : {"numpyro", "pymc", "pymc-numpyro", "laplace"}
        NumPyro NUTS (default), PyMC's NUTS, NumPyro's NUTS on the PyMC model, or
        ``"laplace"``: maximum likelihood by the Laplace approximation (lme4's ``glmer``;
        :func:`~tomstats.glmm.lme.fit_lme`), for formula models with any lme4
        random-effects terms (intercepts, slopes, ``||``, nested, crossed) or none, and
        ``cbind()`` responses. ``"laplace"`` takes no sampler options: the
        ones below from ``chains`` to ``dense_mass`` (``seed`` included) must keep their
        defaults (else ``ValueError``), ``progress`` is ignored, priors and
        ``noncentered`` are refused; it takes ``max_iter``, ``tol``, ``se``
        (``"hessian"``/``"conditional"``), ``max_inner`` and ``engine`` (``"auto"``:
        the interpreted NumPy solver up to 1,000 random effects, no JAX imported; else
        ``"numpy"`` or ``"jax"``; :func:`~tomstats.glmm.lme.choose_engine`) as keyword
        options.
    chains, draws, tune : int
        Chains, kept draws per chain, warm-up iterations per chain.
    seed : int
        Seed of the sampler (same seed, same machine → same draws).
    target_accept : float
        NUTS target acceptance probability in (0, 1).
    family : {"bernoulli", "binomial"}, optional
        Default: binomial when the data have ``successes``/``trials`` (or the formula has
        ``trials()``), else Bernoulli.
    progress : bool
        Show the sampler's progress bar.
    columns : mapping, optional
        ``{standard_name: your_column}`` renaming (e.g. ``{"correct": "is_correct"}``).
    chain_method : {"vectorized", "parallel", "sequential"}
        How NumPyro runs the chains (``"parallel"`` needs one JAX device per chain).
    max_tree_depth : int
        NUTS maximum tree depth of the draws (both backends). The ``numpyro`` backend caps
        the warm-up's trees at depth ``min(6, max_tree_depth)``
        (:data:`tomstats.glmm._nuts.WARMUP_TREE_DEPTH`; recorded as the sampler's
        ``warmup_max_tree_depth``): early warm-up trajectories under the unit metric are
        long and soon discarded.
    cores : int, optional
        CPU cores the chains may use at once. ``numpyro`` (``chain_method="vectorized"``):
        on a CPU each chain is a compiled program of its own, run in its own thread, up
        to ``cores`` at once (default: every usable CPU); ``cores`` never changes the
        draws (on an accelerator the chains are one vectorised program; recorded as the
        sampler's ``chain_groups``). ``pymc``: processes for PyMC's own sampler
        (default 1).
    log_likelihood, posterior_predictive : bool
        Store the pointwise log-likelihood / replicated outcomes.
    dense_mass : {"auto", True, False}
        Mass matrix of the ``numpyro`` backend's NUTS. ``"auto"``: dense over the global
        regression coefficients, diagonal over the scales and random effects
        (:func:`~tomstats.glmm.numpyro_backend.dense_block`; all diagonal with fewer than
        200 warm-up iterations); ``True``: dense over all;
        ``False``: diagonal (the PyMC backends always adapt a diagonal one). The compiled
        sampler is kept on disk between runs (see the GLMM guide, "Speed"; set
        ``TOMSTATS_JAX_CACHE=off`` to switch that off).
    **spec_options
        Options of the spec (structural: ``item_effects`` ("auto": when items repeat),
        ``hierarchical`` ("auto": pool the capabilities when there are >= 5 LLMs),
        ``random_slopes``, ``noncentered``, ``fixed``, ``priors``, ``alpha_scale``,
        ``delta_scale``, ``aggregate`` ("auto": when it halves the observations);
        formula: ``priors``, ``noncentered``, ``center``, ``aggregate``, ``trials``).

    Returns
    -------
    arviz.InferenceData or LaplaceFit
        Samplers: see the module docstring for its groups and provenance attributes. A
        :class:`~tomstats.glmm.diagnostics.DiagnosticsWarning` is issued when any sampler
        diagnostic fails (:func:`~tomstats.glmm.diagnostics.check_diagnostics`).
        ``backend="laplace"``: a :class:`~tomstats.glmm.lme_result.LaplaceFit`, the one
        result type of every formula (a
        :class:`~tomstats.glmm.lme_result.LaplaceConvergenceWarning`, a
        ``DiagnosticsWarning``, when it did not converge).

    Raises
    ------
    TypeError
        An argument of the wrong type (``data`` not a DataFrame, ``model`` not a string,
        ``columns`` not a mapping, ...), naming the argument.
    ValueError
        Bad data or options, before any sampling, naming the column and value: among
        others an outcome without variance (every answer correct, or every one wrong), a
        categorical term (``C(x)`` or a text column) with one level in the data, a grouping
        factor with one level, the structural model without several ToM orders or
        context lengths. Messages that give advice name options as keywords of this
        function (the command line re-words them as flags; see
        :mod:`tomstats.glmm._hints`). If ``data.attrs`` holds ``errored_questions`` (from
        :func:`~tomstats.glmm.data.read_table`), it is recorded in the fit's provenance.
    """
    check_type(data, pd.DataFrame, "data",
               "a pandas DataFrame (read a log file with tomstats.glmm.read_table(path))")
    check_type(model, str, "model", "'structural' or an lme4-style formula string")
    check_type(backend, str, "backend")
    if columns is not None:
        check_type(columns, Mapping, "columns", "a mapping {standard_name: your_column}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "laplace":
        import inspect

        # the maximum-likelihood engine, imported when asked for
        from tomstats.glmm.lme import fit_lme

        given = dict(chains=chains, draws=draws, tune=tune, seed=seed,
                     target_accept=target_accept, chain_method=chain_method,
                     max_tree_depth=max_tree_depth, cores=cores, log_likelihood=log_likelihood,
                     posterior_predictive=posterior_predictive, dense_mass=dense_mass)
        defaults = inspect.signature(fit).parameters
        changed = [k for k in _SAMPLER_OPTIONS if given[k] != defaults[k].default]
        if changed:
            raise ValueError(f"backend='laplace' is a deterministic maximum-likelihood fit; "
                             f"the sampler option(s) {changed} do not apply (leave them at "
                             f"their defaults or choose a sampler backend)")
        return fit_lme(data, model, family=family, columns=columns, **spec_options)
    chains = _check_int("chains", chains, 1)
    draws = _check_int("draws", draws, 1)
    tune = _check_int("tune", tune, 0)
    seed = _check_int("seed", seed, 0)
    max_tree_depth = _check_int("max_tree_depth", max_tree_depth, 1, MAX_TREE_DEPTH)
    if not (isinstance(target_accept, (int, float)) and 0.0 < target_accept < 1.0):
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept!r}")
    if dense_mass not in ("auto", True, False):
        raise ValueError(f"dense_mass must be 'auto', True or False, got {dense_mass!r}")
    if chain_method not in ("vectorized", "parallel", "sequential"):
        raise ValueError(f"chain_method must be 'vectorized', 'parallel' or 'sequential', "
                         f"got {chain_method!r}")
    if cores is not None:
        cores = _check_int("cores", cores, 1)
    from tomstats.glmm._nuts import chain_groups, tree_depths

    groups = chain_groups(chains) if backend == "numpyro" and chain_method == "vectorized" \
        else None
    df = prepare_data(data, columns).reset_index(drop=True)
    spec, md = build_design(model, df, family=family, **spec_options)
    kw = dict(chains=chains, draws=draws, tune=tune, seed=seed, target_accept=target_accept,
              progress=progress, max_tree_depth=max_tree_depth, log_likelihood=log_likelihood,
              posterior_predictive=posterior_predictive, chain_method=chain_method)
    if backend == "numpyro":
        # one sampler's stack (NumPyro or PyMC), imported when it is used
        from tomstats.glmm import numpyro_backend

        res = numpyro_backend.sample(spec, md, dense_mass=dense_mass, cores=cores, **kw)
    else:
        from tomstats.glmm import pymc_backend

        res = pymc_backend.sample(spec, md, sampler="pymc" if backend == "pymc" else "numpyro",
                                  cores=cores, **kw)
    used = used_columns(spec, df)
    spec_d = spec.to_dict()
    sampler = {"chains": chains, "draws": draws, "tune": tune,
               "target_accept": target_accept, "max_tree_depth": max_tree_depth,
               "warmup_max_tree_depth": (tree_depths(max_tree_depth)[0]
                                         if backend == "numpyro" else max_tree_depth),
               "dense_mass": dense_mass if backend == "numpyro" else False,
               "chain_groups": groups, "cores": cores}
    if backend != "pymc":  # PyMC's own sampler runs chains as processes (``cores``)
        sampler["chain_method"] = chain_method
    attrs = {
        _FORMAT_KEY: FORMAT_VERSION,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "model": "structural" if isinstance(spec, StructuralSpec) else spec.formula,
        "model_kind": spec.kind,
        "spec": json.dumps(spec_d, sort_keys=True),
        "priors": json.dumps(spec_d["priors"], sort_keys=True),
        "family": spec.family,
        "likelihood": md.likelihood,
        "aggregated": int(spec.aggregate),
        "n_rows": len(df),
        "n_obs": md.n_obs,
        "data_columns": json.dumps(used),
        "column_mapping": json.dumps(dict(columns or {}), sort_keys=True),
        "data_hash": data_hash(df, used),
        "backend": backend,
        "sampler": json.dumps(sampler, sort_keys=True),
        "max_tree_depth": max_tree_depth,
        "seed": seed,
        "versions": json.dumps(package_versions(backend), sort_keys=True),
    }
    errored = data.attrs.get("errored_questions")
    if isinstance(errored, Mapping):
        # questions of the log that ended in an error, and what read_table did with them
        attrs["errored_questions"] = json.dumps(dict(errored), sort_keys=True)
    paired = data.attrs.get("paired")
    if isinstance(paired, Mapping):  # one row per paired unit (tomstats.glmm.paired_table)
        attrs["paired_units"] = json.dumps(dict(paired), sort_keys=True)
    idata = _assemble(spec, md, df, res, attrs)
    from tomstats.glmm.diagnostics import DiagnosticsWarning, check_diagnostics

    report = check_diagnostics(idata)
    if not report.passed:
        warnings.warn("tomstats.glmm.fit: " + report.message(), DiagnosticsWarning,
                      stacklevel=2)
    return idata


def check_fit_type(idata: Any, name: str = "idata") -> None:
    """``TypeError`` naming ``name`` unless ``idata`` is an ArviZ InferenceData."""
    import arviz as az

    check_type(idata, az.InferenceData, name,
               "an arviz.InferenceData from tomstats.glmm.fit or load_fit (load a saved fit "
               "with tomstats.glmm.load_fit(path))")


def fit_spec(idata: Any) -> StructuralSpec | FormulaSpec:
    """The spec a fit was made with (from its ``spec`` attribute)."""
    check_fit_type(idata)
    attrs = dict(idata.posterior.attrs)
    if _FORMAT_KEY not in attrs:
        raise ValueError("this InferenceData was not made by tomstats.glmm.fit (no "
                         f"{_FORMAT_KEY!r} attribute)")
    return spec_from_json(attrs["spec"])


def training_data(idata: Any) -> pd.DataFrame:
    """The data columns the fit read, one row per data row (from ``constant_data``)."""
    check_fit_type(idata)
    cd = idata.constant_data
    cols = {k[5:]: cd[k].to_numpy() for k in cd.data_vars if k.startswith("data_")}
    return pd.DataFrame(cols)


def save_fit(idata: Any, path: str | os.PathLike[str]) -> Path:
    """Write a fit to netCDF atomically (temporary file, then rename); return the path."""
    check_fit_type(idata)
    check_type(path, (str, os.PathLike), "path")
    p = ensure_writable_file(path, field="path")
    posterior = getattr(idata, "posterior", None)
    if _FORMAT_KEY not in getattr(posterior, "attrs", {}):
        raise ValueError("save_fit expects an InferenceData made by tomstats.glmm.fit")
    with atomic_path(p) as tmp:
        idata.to_netcdf(str(tmp), engine=_netcdf_engine())
    return p


def load_fit(path: str | os.PathLike[str]) -> Any:
    """Read a fit written by :func:`save_fit`, checked whole by the one fit reader
    (:func:`tomstats.glmm.fit_file.read_netcdf_fit`).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not readable netCDF, or is not a tomstats GLMM fit (foreign file,
        missing posterior, unknown format version, a variable of the wrong dimensions or not
        finite, ...): one line naming the file and what is wrong.
    """
    check_type(path, (str, os.PathLike), "path")
    return read_netcdf_fit(path)


# --------------------------------------------------------------------------- predict


def _flat(post: xr.Dataset, name: str, idx: np.ndarray) -> np.ndarray:
    v = post[name].to_numpy()
    return v.reshape((-1,) + v.shape[2:])[idx]


def _codes(values: np.ndarray, levels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes of ``values`` in ``levels``; unknown values get codes after the known ones."""
    lookup = {v: i for i, v in enumerate(levels)}
    new: list[str] = []
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values.astype(str)):
        if v not in lookup:
            lookup[v] = len(levels) + len(new)
            new.append(v)
        codes[i] = lookup[v]
    return codes, new


def _new_effects(
    rng: np.random.Generator, sd: np.ndarray, n_new: int, how: str, chol: np.ndarray | None
) -> np.ndarray:
    """(S, n_new, d) effects for unseen levels: N(0, Σ) draws or zeros."""
    S, d = sd.shape
    if n_new == 0 or how == "zero":
        return np.zeros((S, n_new, d))
    z = rng.standard_normal((S, n_new, d))
    if chol is None:
        return z * sd[:, None, :]
    return np.einsum("snd,sed->sne", z, chol)


def predict(
    idata: Any,
    new_data: pd.DataFrame | None = None,
    *,
    new_levels: str = "sample",
    seed: int = 0,
    columns: Mapping[str, str] | None = None,
    max_draws: int | None = None,
) -> xr.DataArray:
    r"""Posterior draws of the success probability :math:`p = \operatorname{logit}^{-1}\eta`.

    Parameters
    ----------
    idata : InferenceData
        A fit from :func:`fit` or :func:`load_fit`.
    new_data : DataFrame, optional
        Rows to predict (standard or mapped columns; the outcome is not needed). Default:
        the fit's own data rows.
    new_levels : {"sample", "zero"}
        LLMs, items or groups not seen in the fit: ``"sample"`` draws their effects from
        the fitted population (:math:`m_{new}\sim N(\mu_m, \tau_m)`, :math:`u_{new}\sim
        N(0,\sigma_{item})`, :math:`b_{new}\sim N(0, \Sigma)`), one per draw, which gives
        the predictive probability for a new LLM/item; ``"zero"`` uses the population mean
        (:math:`\mu_m`, :math:`u=0`, :math:`b=0`), which gives the typical item.
    seed : int
        Seed of the new-level draws.
    columns : mapping, optional
        Column renaming for ``new_data`` as in :func:`fit`.
    max_draws : int, optional
        Thin the posterior to at most this many draws (evenly spaced).

    Returns
    -------
    xarray.DataArray
        Dims ``(sample, row)``: posterior draw (chains concatenated) × data row.
    """
    if new_levels not in ("sample", "zero"):
        raise ValueError(f"new_levels must be 'sample' or 'zero', got {new_levels!r}")
    if new_data is not None:
        check_type(new_data, pd.DataFrame, "new_data", "a pandas DataFrame (or None)")
    spec = fit_spec(idata)
    train = training_data(idata)
    df = train if new_data is None else prepare_data(new_data, columns).reset_index(drop=True)
    post = idata.posterior
    S_all = post.sizes["chain"] * post.sizes["draw"]
    idx = np.arange(S_all)
    if max_draws is not None and max_draws < S_all:
        idx = np.unique(np.linspace(0, S_all - 1, int(max_draws)).round().astype(int))
    rng = np.random.default_rng(seed)
    chunk = max(1, _PREDICT_CHUNK // max(len(df), 1))  # bound memory: draws × rows per block
    parts = []
    for start in range(0, idx.size, chunk):
        sub = idx[start:start + chunk]
        if isinstance(spec, StructuralSpec):
            parts.append(_structural_eta_draws(spec, post, sub, df, new_levels, rng))
        else:
            parts.append(_formula_eta_draws(spec, post, sub, train, df, new_levels, rng))
    eta = np.concatenate(parts, axis=0)
    p = 1.0 / (1.0 + np.exp(-eta))
    import xarray as xr  # lazy: a Laplace fit and ``fit --help`` do without it

    return xr.DataArray(p, dims=("sample", "row"),
                        coords={"sample": idx, "row": np.arange(len(df))}, name="p")


def structural_param_draws(
    post: xr.Dataset, spec: StructuralSpec, name: str, idx: np.ndarray | None = None
) -> np.ndarray:
    """Draws (chains concatenated) of ``alpha``, ``gamma`` or ``delta``: from the posterior,
    or the constant of ``spec.fixed`` (fixed parameters are not stored in the posterior)."""
    fixed = dict(spec.fixed)
    n = post.sizes["chain"] * post.sizes["draw"]
    if name in post:
        v = post[name].to_numpy().reshape(n)
    elif name in fixed:
        v = np.full(n, fixed[name])
    else:
        raise ValueError(f"the fit has neither posterior draws nor a fixed value of {name!r}")
    return v if idx is None else v[idx]


def _structural_eta_draws(
    spec: StructuralSpec, post: xr.Dataset, idx: np.ndarray, df: pd.DataFrame, how: str,
    rng: np.random.Generator,
) -> np.ndarray:
    from tomstats.glmm._predictor import structural_eta

    cov = structural_columns(df)
    llm_levels = list(map(str, post["capability"].coords["llm"].values))
    if "model" in df.columns:
        llm, new_llm = _codes(df["model"].to_numpy(), llm_levels)
    elif len(llm_levels) == 1:
        llm, new_llm = np.zeros(len(df), dtype=np.int64), []
    else:
        raise ValueError(f"new data need a 'model' column: the fit has {len(llm_levels)} LLMs")
    if new_llm and "capability_mu" not in post:
        raise ValueError(f"the fit has no population of LLMs (one LLM, or "
                         f"hierarchical=False); it cannot predict for new LLM(s) {new_llm[:3]}")
    S = idx.size
    p: dict[str, Any] = {k: structural_param_draws(post, spec, k, idx)[:, None]
                         for k in ("alpha", "gamma", "delta")}
    cap = _flat(post, "capability", idx)
    if new_llm:
        mu, sd = _flat(post, "capability_mu", idx), _flat(post, "capability_sd", idx)
        extra = mu[:, None] + _new_effects(rng, sd[:, None], len(new_llm), how, None)[..., 0]
        cap = np.concatenate([cap, extra], axis=1)
    p["capability"] = cap
    if "gamma_llm" in post:
        g = _flat(post, "gamma_llm", idx)
        if new_llm:
            sd = _flat(post, "sd_gamma_llm", idx)[:, None]
            g = np.concatenate([g, p["gamma"] + _new_effects(rng, sd, len(new_llm), how,
                                                             None)[..., 0]], axis=1)
        p["gamma_llm"] = g
    if "alpha_llm" in post:
        a = _flat(post, "alpha_llm", idx)
        if new_llm:
            sd = spec.alpha_scale * _flat(post, "sd_alpha_llm_scaled", idx)[:, None]
            a = np.concatenate([a, p["alpha"] + _new_effects(rng, sd, len(new_llm), how,
                                                             None)[..., 0]], axis=1)
        p["alpha_llm"] = a
    data: dict[str, Any] = {"context": cov["context"], "tom": cov["tom"], "llm": llm}
    if spec.item_effects:
        levels = list(map(str, post["item_effect"].coords["item"].values))
        if "item" in df.columns:
            item, new_items = _codes(df["item"].to_numpy(), levels)
        else:
            item = np.arange(len(df)) + len(levels)
            new_items = [f"new_{i}" for i in range(len(df))]
        eff = _flat(post, "item_effect", idx)
        sd = _flat(post, "sigma_item", idx)[:, None]
        eff = np.concatenate([eff, _new_effects(rng, sd, len(new_items), how, None)[..., 0]],
                             axis=1)
        p["item_effect"] = eff
        data["item"] = item
    assert S == cap.shape[0]
    return np.asarray(structural_eta(p, data), dtype=float)


def _formula_eta_draws(
    spec: FormulaSpec, post: xr.Dataset, idx: np.ndarray, train: pd.DataFrame,
    df: pd.DataFrame, how: str, rng: np.random.Generator,
) -> np.ndarray:
    X, _ = formula_matrices(spec.fixed, train, df, what="fixed part")
    beta = _flat(post, "beta", idx)
    eta = beta @ X.T
    for t in spec.random:
        Z, _ = formula_matrices(t.expr, train, df, what=f"random term {t.label}")
        levels = list(map(str, post[f"re_{t.key}"].coords[t.dim].values))
        parts = t.group.split(":")
        missing = [c for c in parts if c not in df.columns]
        if missing:
            raise ValueError(f"new data lack the grouping column(s) {missing} of {t.label}")
        gs = df[parts[0]].astype(str)
        for c in parts[1:]:
            gs = gs + ":" + df[c].astype(str)
        g, new = _codes(gs.to_numpy(), levels)
        b = _flat(post, f"re_{t.key}", idx)
        if new:
            sd = _flat(post, f"sd_{t.key}", idx)
            chol = None
            if f"corr_{t.key}" in post:
                corr = _flat(post, f"corr_{t.key}", idx)
                chol = sd[:, :, None] * np.linalg.cholesky(corr)
            b = np.concatenate([b, _new_effects(rng, sd, len(new), how, chol)], axis=1)
        eta = eta + np.einsum("nd,snd->sn", Z, b[:, g, :])
    return eta
