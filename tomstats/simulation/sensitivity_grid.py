"""The 7×7 sensitivity grid: ToM's share of systematic variance over γ × α.

For each grid point the paper's design is simulated ``replicates`` times at one capability
level (the reference model, m = 1, by default) with the other parameters at their defaults,
and the ToM share :math:`SS_\\text{ToM}/(SS_\\text{ToM}+SS_\\text{context}+SS_\\text{int})`
is computed for every simulated study. A grid point is ToM-dominant when the Monte Carlo
mean share exceeds 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from tomstats.design import Design, paper_design
from tomstats.model import Params
from tomstats.simulation.simulator import simulate

__all__ = ["PAPER_GAMMA", "PAPER_ALPHA", "sensitivity", "sensitivity_table", "grid_values"]

#: The paper's grid: γ ∈ linspace(0.3, 2.4, 7), α ∈ linspace(2e-5, 2e-4, 7).
PAPER_GAMMA = tuple(np.linspace(0.3, 2.4, 7).tolist())
PAPER_ALPHA = tuple(np.linspace(2e-5, 2e-4, 7).tolist())


def grid_values(spec: Any, name: str) -> np.ndarray:
    """Grid values from a list or a ``{start, stop, num}`` table (``numpy.linspace``)."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"start", "stop", "num"})
        if unknown or not {"start", "stop", "num"} <= set(spec):
            raise ValueError(f"[sensitivity].{name}: expected a list or {{start, stop, num}}, "
                             f"got {dict(spec)!r}")
        num = spec["num"]
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise ValueError(f"[sensitivity].{name}.num must be a positive integer, got {num!r}")
        values = np.linspace(float(spec["start"]), float(spec["stop"]), num)
    else:
        values = np.asarray(spec, dtype=float).reshape(-1)
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError(f"[sensitivity].{name}: need finite values, got {values.tolist()}")
    return values


def sensitivity(
    params: Params,
    *,
    design: Design | None = None,
    gamma: Sequence[float] = PAPER_GAMMA,
    alpha: Sequence[float] = PAPER_ALPHA,
    capability: float = 1.0,
    replicates: int = 200,
    seed: int = 0,
    path: str = "exact",
    param_dims: Sequence[str] = (),
    progress: bool | None = None,
    allow_large: bool = False,
) -> xr.Dataset:
    """Simulate the γ × α grid and return per-study ToM shares.

    Parameters
    ----------
    params : Params
        Defaults for the parameters not on the grid (δ, σ); may carry batch axes named by
        ``param_dims`` (e.g. posterior draws).
    design : Design, optional
        Default :func:`tomstats.design.paper_design`; only its cells and questions are used.
    gamma, alpha : sequence of float
        Grid values (default: the paper's 7 × 7).
    capability : float
        Capability level of the simulated model.
    replicates, seed, path, progress, allow_large
        As in :func:`tomstats.simulation.simulator.simulate`.

    Returns
    -------
    xarray.Dataset
        ``tom_share`` (``replicate, *param_dims, gamma, alpha``), the MC ``tom_share_mean``,
        ``tom_share_low``/``tom_share_high`` (2.5 % / 97.5 % quantiles over replicates) and
        ``dominant`` (mean share > 0.5).
    """
    design = (design or paper_design()).with_(capability=(float(capability),))
    sim = simulate(design, params, replicates=replicates, seed=seed, path=path,
                   grid={"gamma": list(gamma), "alpha": list(alpha)},
                   param_dims=param_dims, progress=progress, allow_large=allow_large)
    share = sim["share"].sel(systematic="tom_order", capability=float(capability), drop=True)
    out = xr.Dataset({"tom_share": share})
    out["tom_share_mean"] = share.mean("replicate")
    out["tom_share_low"] = share.quantile(0.025, dim="replicate").drop_vars("quantile")
    out["tom_share_high"] = share.quantile(0.975, dim="replicate").drop_vars("quantile")
    out["dominant"] = out["tom_share_mean"] > 0.5
    out.attrs.update(sim.attrs, capability=float(capability))
    return out


def sensitivity_table(ds: xr.Dataset) -> pd.DataFrame:
    """``gamma, alpha, tom_share, tom_share_low, tom_share_high, dominant`` rows."""
    df = xr.Dataset({
        "tom_share": ds["tom_share_mean"],
        "tom_share_low": ds["tom_share_low"],
        "tom_share_high": ds["tom_share_high"],
        "dominant": ds["dominant"],
    }).to_dataframe().reset_index()
    return df[["gamma", "alpha", "tom_share", "tom_share_low", "tom_share_high", "dominant"]]
