"""Last section: model, data and provenance — data summary, sampling settings and the fit's
attributes in readable form (JSON expanded, settings meaningless for the backend dropped)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from tomstats.report._document import Section, Table, Text
from tomstats.report.sections._cells import cell_columns
from tomstats.report.sections._context import FitContext
from tomstats.report.sections._ppc import ppc_data

__all__ = ["data_summary", "provenance_table", "sampler_table", "section"]

TITLE = "Model, data and provenance"
_HIDDEN = {"spec", "priors", "arviz_version", "arviz_inference_library",
           "arviz_inference_library_version", "inference_library",
           "inference_library_version"}
#: Sampler settings that mean nothing for a backend (``chain_method`` is NumPyro's).
_NOT_FOR = {"pymc": ("chain_method", "chain_groups", "dense_mass", "warmup_max_tree_depth")}


def _glmm_data_summary(ctx: FitContext) -> pd.DataFrame:
    from tomstats.glmm import training_data

    idata = ctx.idata
    df = training_data(idata)
    rows = [("data rows", f"{len(df):,}")]
    n_obs = idata.observed_data["y"].size if "observed_data" in idata.groups() else None
    if n_obs is not None and n_obs != len(df):
        rows.append(("observations after aggregation", f"{n_obs:,}"))
    if "correct" in df:
        rows.append(("accuracy", f"{df['correct'].mean():.3f}"))
    elif {"successes", "trials"} <= set(df.columns):
        rows.append(("questions (trials)", f"{int(df['trials'].sum()):,}"))
        rows.append(("accuracy", f"{df['successes'].sum() / df['trials'].sum():.3f}"))
    if "model" in df:
        names = [str(m) for m in pd.unique(df["model"])]
        shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
        rows.append(("LLMs", f"{len(names)} ({shown})"))
    if "item" in df:
        rows.append(("items", f"{df['item'].nunique():,}"))
    cells = [c for c in ("context_words", "tom_order") if c in df]
    if ctx.kind == "formula":  # the cells the design-cell check uses (fb × implicit, …)
        cells = [c for c in cell_columns(ctx, df) if c != "model"]
    if cells:
        rows.append((f"design cells ({' × '.join(cells)})",
                     str(len(df[cells].drop_duplicates()))))
    return pd.DataFrame(rows, columns=["quantity", "value"])


def data_summary(ctx: FitContext) -> pd.DataFrame:
    """Rows, accuracy, LLMs, items and design cells of the fit's data."""
    if ctx.is_glmm:
        return _glmm_data_summary(ctx)
    idata = ctx.idata
    if "observed_data" not in idata.groups() or not idata.observed_data.data_vars:
        return pd.DataFrame({"quantity": ["rows"], "value": ["— (no observed_data group)"]})
    name = str(next(iter(idata.observed_data.data_vars)))
    y = np.asarray(idata.observed_data[name].values).ravel()
    rows = [("outcome", name), ("rows", f"{y.size:,}"), ("accuracy", f"{np.mean(y):.3f}")]
    d = ppc_data(ctx)
    design = d.design if not isinstance(d, str) else pd.DataFrame()
    const = idata.constant_data if "constant_data" in idata.groups() else None
    if "model" in design:
        rows.append(("LLMs", str(design["model"].nunique())))
    for nm in ("item", "item_id", "item_idx"):
        if const is not None and nm in const and const[nm].size == y.size:
            rows.append(("items", str(len(np.unique(const[nm].values)))))
            break
    if {"context_words", "tom_order"} <= set(design.columns):
        rows.append(("design cells (context × ToM)",
                     str(len(design[["context_words", "tom_order"]].drop_duplicates()))))
    return pd.DataFrame(rows, columns=["quantity", "value"])


def sampler_table(ctx: FitContext) -> pd.DataFrame:
    """Chains, draws and the groups the file holds."""
    post = ctx.idata.posterior
    rows = [("chains", int(post.sizes["chain"])), ("draws per chain", int(post.sizes["draw"])),
            ("groups", ", ".join(sorted(ctx.idata.groups())))]
    return pd.DataFrame(rows, columns=["setting", "value"])


def _show(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 300 else s[:300] + " …"


def provenance_table(ctx: FitContext) -> pd.DataFrame:
    """The fit's attributes, one row each; JSON settings expanded into ``sampler.x`` rows
    (null entries and settings meaningless for the backend left out), versions on one line,
    spec and priors left to the prior table."""
    attrs = ctx.attrs
    backend = str(attrs.get("backend", ""))
    drop = _NOT_FOR.get(backend, ())
    rows = []
    for key in sorted(attrs):
        if key in _HIDDEN:
            continue
        value = attrs[key]
        parsed = None
        if isinstance(value, str) and value[:1] in "{[":
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = None
        if key == "versions" and isinstance(parsed, dict):
            rows.append((key, ", ".join(f"{k} {v}" for k, v in sorted(parsed.items()))))
        elif isinstance(parsed, dict) and parsed:
            for k, v in sorted(parsed.items()):
                if v is None or (key == "sampler" and k in drop):
                    continue
                rows.append((f"{key}.{k}", _show(v)))
        elif isinstance(parsed, list):
            rows.append((key, ", ".join(map(str, parsed)) or "—"))
        elif isinstance(parsed, dict):
            continue  # an empty mapping (no column renaming): nothing to say
        else:
            rows.append((key, _show(value)))
    return pd.DataFrame(rows, columns=["attribute", "value"])


def _is_tomstats_fit(attrs: dict[str, Any]) -> bool:
    return any("tomstats" in k.lower() or "tomstats" in str(v).lower()[:200]
               for k, v in attrs.items())


def section(ctx: FitContext) -> Section:
    """Data summary, sampling and provenance (the end of the page)."""
    blocks: list = []
    if not _is_tomstats_fit(ctx.attrs):
        blocks.append(Text("This file carries no tomstats provenance attributes: it was not "
                           "written by tomstats.glmm.save_fit, so model, data hash and "
                           "versions are unknown.", "missing"))
    blocks += [Table(data_summary(ctx), caption="Data"),
               Table(sampler_table(ctx), caption="Sampling"),
               Table(provenance_table(ctx), caption="Fit attributes (provenance)")]
    return Section(TITLE, tuple(blocks))
