"""Calibration: a structural fit's posterior → parameters of the simulator.

:func:`posterior_params` returns equation (1)'s parameters as a
:class:`tomstats.model.Params` whose fields are arrays over posterior draws (a JAX pytree:
``jax.vmap`` a simulation over them), plus the capabilities per LLM per draw.
:func:`posterior_summary` and :func:`write_params` give means and intervals for a
parameters file (``tomstats calibrate fit.nc``).

``sigma`` is the posterior of ``sigma_item`` (the per-item logit noise). A fit without
item effects has :math:`\\sigma` = 0: its capabilities then describe the marginal accuracy
of each cell directly, which the simulator reproduces with ``sigma = 0``. Parameters held
fixed in the fit (``fixed={"alpha": 0, "delta": 0}``) are not in the posterior; they enter
as that constant in every draw.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from tomstats._io import atomic_write_text, ensure_writable_file
from tomstats._validate import check_type
from tomstats.design import paper_design
from tomstats.glmm.fitting import fit_spec, structural_param_draws
from tomstats.glmm.spec import StructuralSpec
from tomstats.model import Params

__all__ = ["PARAMS_FORMATS", "params_format", "posterior_params", "posterior_summary",
           "posterior_summary_dict", "write_params"]

#: Formats of :func:`write_params`, by file suffix.
PARAMS_FORMATS = {".toml": "toml", ".json": "json"}


def params_format(path: str | os.PathLike[str], field: str = "path") -> str:
    """``"toml"`` or ``"json"`` from the suffix of ``path``; any other suffix is refused.

    Raises ``ValueError`` naming ``field`` and the suffix (``--out 'p.csv': unknown suffix
    '.csv'; ...``).
    """
    suffix = Path(path).suffix.lower()
    if suffix not in PARAMS_FORMATS:
        raise ValueError(f"{field} {str(path)!r}: unknown suffix {suffix or '(none)'!r}; the "
                         f"parameters file is written as TOML (.toml, a simulation file) or "
                         f"JSON (.json), chosen by the suffix")
    return PARAMS_FORMATS[suffix]


def _flat(post: xr.Dataset, name: str) -> np.ndarray:
    v = post[name].to_numpy()
    return v.reshape((-1,) + v.shape[2:])


def posterior_params(idata: Any) -> tuple[Params, xr.DataArray]:
    """Posterior draws of equation (1)'s parameters from a structural fit.

    Returns
    -------
    params : Params
        ``alpha``, ``gamma``, ``delta``, ``sigma`` as arrays of shape (draw,) (chains
        concatenated); population values (per-LLM slopes, if fitted, are in the posterior
        as ``gamma_llm`` / ``alpha_llm``).
    capability : xarray.DataArray
        Dims ``(draw, llm)``: capability :math:`m_j` of each LLM per draw.
    """
    spec = fit_spec(idata)
    if not isinstance(spec, StructuralSpec):
        raise ValueError(f"calibration needs a structural fit (model='structural'); this fit "
                         f"is a formula model ({idata.posterior.attrs.get('model')!r})")
    post = idata.posterior
    n = post.sizes["chain"] * post.sizes["draw"]
    sigma = _flat(post, "sigma_item") if "sigma_item" in post else np.zeros(n)
    params = Params(sigma=sigma, **{k: structural_param_draws(post, spec, k)
                                    for k in ("alpha", "gamma", "delta")})
    cap = xr.DataArray(_flat(post, "capability"), dims=("draw", "llm"),
                       coords={"draw": np.arange(n),
                               "llm": post["capability"].coords["llm"].values},
                       name="capability")
    return params, cap


def _summ(v: np.ndarray, prob: float) -> dict[str, float]:
    a = (1 - prob) / 2
    with np.errstate(invalid="ignore"):  # non-finite draws: refused by _check_finite
        return {"mean": float(np.mean(v)),
                "sd": float(np.std(v, ddof=1)) if v.size > 1 else 0.0,
                "median": float(np.median(v)), "lower": float(np.quantile(v, a)),
                "upper": float(np.quantile(v, 1 - a))}


def posterior_summary(idata: Any, prob: float = 0.95) -> pd.DataFrame:
    """Means, sds, medians and central ``prob`` intervals of the simulator parameters.

    Returns
    -------
    pandas.DataFrame
        One row per parameter (``alpha``, ``gamma``, ``delta``, ``sigma``) and per LLM's
        capability (``capability[NAME]``), indexed by those names: ``kind`` (``"parameter"``
        or ``"capability"``), ``llm`` (the LLM's name; empty for the parameters), ``mean``,
        ``sd``, ``median``, ``lower``, ``upper`` (the equal-tailed interval holding
        ``prob`` of the draws). ``attrs["interval"]`` is ``prob``, ``attrs["source"]`` the
        fit's provenance; :func:`posterior_summary_dict` gives the same as nested dicts.
    """
    d = posterior_summary_dict(idata, prob)
    rows = [{"name": k, "kind": "parameter", "llm": "", **v} for k, v in d["params"].items()]
    rows += [{"name": f"capability[{k}]", "kind": "capability", "llm": k, **v}
             for k, v in d["capability"].items()]
    df = pd.DataFrame(rows).set_index("name")
    df.index.name = None
    df.attrs.update(interval=d["interval"], source=d["source"])
    return df


def posterior_summary_dict(idata: Any, prob: float = 0.95) -> dict[str, Any]:
    """:func:`posterior_summary` as nested dicts, for JSON and TOML:
    ``{"params": {alpha|gamma|delta|sigma: {...}}, "capability": {llm: {...}},
    "interval": prob, "source": {provenance of the fit}}``.
    """
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 < prob < 1:
        raise ValueError(f"prob must be a number in (0, 1), got {prob!r}")
    params, cap = posterior_params(idata)
    attrs = dict(idata.posterior.attrs)
    return {
        "params": {k: _summ(np.asarray(getattr(params, k)), prob)
                   for k in ("alpha", "gamma", "delta", "sigma")},
        "capability": {str(llm): _summ(cap.sel(llm=llm).to_numpy(), prob)
                       for llm in cap.coords["llm"].values},
        "interval": prob,
        "source": {k: _plain(attrs.get(k)) for k in ("model", "data_hash", "backend", "seed",
                                                     "created_at", "n_rows")},
    }


def _check_finite(summary: dict[str, Any]) -> None:
    """Refuse to write a parameter that is not a finite number (``alpha = inf`` or
    ``sd = nan`` in a simulation file would run, or fail, far from their cause)."""
    for group in ("params", "capability"):
        for name, stats in summary[group].items():
            for stat, v in stats.items():
                if not np.isfinite(v):
                    raise ValueError(f"the posterior's {stat} of "
                                     f"{name if group == 'params' else f'capability[{name}]'} "
                                     f"is {v}, not a finite number: refusing to write it "
                                     f"into a parameters file (is the fit damaged?)")


def _plain(v: Any) -> Any:
    """A netCDF attribute as a plain Python value (``numpy.int64`` → ``int``), for JSON."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


def _toml_data(v: Any) -> Any:
    """``v`` as values a TOML writer takes: ``None`` entries dropped, numpy scalars plain."""
    if isinstance(v, dict):
        return {str(k): _toml_data(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_toml_data(x) for x in v if x is not None]
    return _plain(v)


def write_params(idata: Any, path: str | os.PathLike[str], *, prob: float = 0.95,
                 fmt: str | None = None) -> Path:
    """Write :func:`posterior_summary_dict` as TOML or JSON, atomically.

    The format comes from ``fmt`` or else the suffix of ``path`` (``.toml``: a simulation
    file that ``tomstats simulate`` and :func:`tomstats.simulation.study.load_study` read, with the
    whole summary under ``[meta.calibration]``; ``.json``: the summary). Any other suffix
    without ``fmt`` raises ``ValueError`` before any work.
    """
    check_type(path, (str, os.PathLike), "path")
    if fmt is None:
        fmt = params_format(path)
    elif fmt not in ("toml", "json"):
        raise ValueError(f"fmt must be 'toml' or 'json', got {fmt!r}")
    p = ensure_writable_file(path, field="path")
    summary = posterior_summary_dict(idata, prob)
    _check_finite(summary)
    text = (_simulation_toml(summary) if fmt == "toml"
            else json.dumps(summary, indent=2, sort_keys=True, default=_plain,
                            allow_nan=False) + "\n")
    atomic_write_text(p, text)
    return p


#: The comment above a calibrated simulation file: fixed text, never data.
_HEADER = """\
# Simulator parameters calibrated to a structural GLMM fit (posterior means).
# Run it with: tomstats simulate THIS_FILE --out DIR
# (or the full posterior: tomstats simulate simulations/paper.toml --posterior FIT)
# [design] capability lists the fitted LLMs in the order of [meta.calibration] llms.

"""


def _simulation_toml(summary: dict[str, Any]) -> str:
    """A simulation file (``tomstats simulate FILE``) at the posterior means.

    ``[parameters]`` holds the posterior means of α, γ, δ, σ; ``[design]`` the paper's
    5 × 3 design with one capability level per fitted LLM (its posterior mean); the whole
    :func:`posterior_summary_dict` (sds, medians, intervals, provenance) and the LLM names in the
    order of ``capability`` sit under ``[meta.calibration]``, which the simulation loader
    ignores. Everything that comes from the data (LLM names, provenance) is written by a TOML
    writer as quoted strings or keys, never into a comment, so no name can add a table.
    """
    import tomli_w

    design = paper_design()
    doc = {
        "parameters": {k: v["mean"] for k, v in summary["params"].items()},
        "design": {
            "questions_per_cell": 500,
            "capability": [v["mean"] for v in summary["capability"].values()],
            "factors": [{"name": f.name, "levels": list(f.levels)} for f in design.factors],
        },
        "meta": {"calibration": {**summary, "llms": list(summary["capability"])}},
    }
    return _HEADER + tomli_w.dumps(_toml_data(doc))
