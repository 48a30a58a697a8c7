"""Provenance of a fit: the columns it used, a hash of their values, the package versions.

Every backend of :func:`tomstats.glmm.fit` stores these in the fit's attributes, so a saved fit
names the data and the software that made it.
"""

from __future__ import annotations

import platform
from importlib import metadata

import pandas as pd

from tomstats._io import sha256_text
from tomstats.glmm.data import formula_variables
from tomstats.glmm.spec import FormulaSpec, StructuralSpec

__all__ = ["data_hash", "package_versions", "used_columns"]


def package_versions(backend: str) -> dict[str, str]:
    """Versions of Python and of the packages a fit with ``backend`` runs on."""
    pkgs = ["tomstats", "numpy", "pandas", "xarray", "arviz", "jax", "jaxlib", "numpyro",
            "formulaic"]
    if backend.startswith("pymc"):
        pkgs += ["pymc", "pytensor"]
    out = {"python": platform.python_version()}
    for p in pkgs:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def used_columns(spec: StructuralSpec | FormulaSpec, df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` a fit of ``spec`` reads (and the standard ones present)."""
    if isinstance(spec, FormulaSpec):
        cols = formula_variables(spec)
    else:
        cols = (["correct"] if spec.family == "bernoulli" else ["successes", "trials"])
        cols += ["tom_order", "context_words"]
        cols += [c for c in ("model",) if c in df.columns]
        if spec.item_effects:
            cols.append("item")
    extra = [c for c in ("model", "item", "tom_order", "context_words") if c in df.columns]
    return list(dict.fromkeys(cols + extra))


def data_hash(df: pd.DataFrame, cols: list[str]) -> str:
    """SHA-256 of the columns ``cols`` of ``df`` written as CSV."""
    return sha256_text(df[cols].to_csv(index=False, lineterminator="\n"))
