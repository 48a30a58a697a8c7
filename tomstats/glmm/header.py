"""The header of a Bayesian fit, as lme4's and bambi's summaries open: what was fitted to what.

:func:`fit_header` states the model (the structural equation (1) or the formula), the family
and link, the rows and likelihood terms, each grouping factor with its number of levels, the
priors that apply to this fit (:func:`applicable_priors`: a prior on a parameter the fit does
not have, such as the population sd of capabilities in a non-hierarchical fit, is left out)
and the sampler settings. ``tomstats fit`` prints it above the posterior table.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["applicable_priors", "fit_header", "structural_equation"]


def structural_equation(item_effects: bool) -> str:
    """Equation (1) in words, for the header of a structural fit: ``logit p = β0·m[llm] −
    α·c·ln(1 + c/500) − γ·t − δ·c·t``, with ``+ u[item]`` only when the fit has item
    effects."""
    item = " + u[item]" if item_effects else ""
    return (f"logit p = β0·m[llm] − α·c·ln(1 + c/500) − γ·t − δ·c·t{item} (c context words, "
            f"t ToM order, β0 = ln(0.85/0.15))")


def _spec(idata: Any) -> dict[str, Any]:
    try:
        return dict(json.loads(str(idata.posterior.attrs["spec"])))
    except (KeyError, TypeError, ValueError):
        return {}


def applicable_priors(idata: Any) -> dict[str, dict[str, Any]]:
    """The spec's priors (``{key: distribution dict}``) that apply to a parameter of this fit.

    Structural fits: a prior applies when the posterior has the variable of its name
    (``gamma``, ``alpha_scaled``, ``sigma_item``, ``capability_sd`` …), and ``capability_mu``
    also when capabilities are independent (then it is each capability's prior). Formula
    fits: ``Intercept`` and each named coefficient's prior when the coefficient exists, the
    default slope prior ``beta`` when some slope has no prior of its own, ``sd_<key>`` and
    ``lkj_<key>`` when the fit has that random term's sd and correlations.
    """
    post = idata.posterior
    spec = _spec(idata)
    priors = dict(spec.get("priors") or {})
    names = set(map(str, post.data_vars))
    if spec.get("kind") == "formula":
        coefs = ([str(c) for c in post.coords["coef"].values] if "coef" in post.coords
                 else [])
        slopes = [c for c in coefs if c != "Intercept"]

        def applies(k: str) -> bool:
            if k == "Intercept" or k in coefs:
                return k in coefs
            if k == "beta":
                return any(c not in priors for c in slopes)
            if k.startswith("sd_"):
                return k in names
            if k.startswith("lkj_"):
                return f"corr_{k[4:]}" in names
            return False
    else:
        def applies(k: str) -> bool:
            return (k in names or (k.endswith("_scaled") and k[:-7] in names)
                    or (k == "capability_mu" and "capability" in names))
    return {k: v for k, v in priors.items() if applies(k)}


def _prior_text(d: dict[str, Any]) -> str:
    from tomstats.glmm.spec import Prior

    try:
        return str(Prior.from_dict(d))
    except (KeyError, TypeError, ValueError):
        return json.dumps(d, sort_keys=True)


def _levels(idata: Any, group: str) -> int | None:
    cd = idata.constant_data if "constant_data" in idata.groups() else None
    cols = group.split(":")
    if cd is None or any(f"data_{c}" not in cd for c in cols):
        return None
    keys = list(zip(*(np.asarray(cd[f"data_{c}"].values).astype(str) for c in cols),
                    strict=True))
    return len(set(keys))


def _groups(idata: Any, spec: dict[str, Any]) -> list[tuple[str, int | None]]:
    post = idata.posterior
    if spec.get("kind") == "formula":
        return [(str(t["group"]), _levels(idata, str(t["group"])))
                for t in spec.get("random") or []]
    mapping = json.loads(str(post.attrs.get("column_mapping", "{}")) or "{}")
    out = []
    if "llm" in post.coords:
        out.append((mapping.get("model", "model"), int(post.sizes["llm"])))
    if spec.get("item_effects", True) and "item" in post.coords:
        out.append((mapping.get("item", "item"), int(post.sizes["item"])))
    return out


def fit_header(idata: Any) -> str:
    """The lines ``tomstats fit`` prints before the posterior table (see the module)."""
    post = idata.posterior
    attrs = dict(post.attrs)
    spec = _spec(idata)
    backend = str(attrs.get("backend", "?"))
    lines = [f"Bayesian GLMM fit by NUTS [{backend}] (tomstats)"]
    if spec.get("kind") == "formula":
        lines.append(f" Formula: {attrs.get('model', spec.get('formula', '?'))}")
    else:
        hier = "hierarchical" if spec.get("hierarchical", True) and "capability_mu" in post \
            else "independent"
        fixed = spec.get("fixed") or {}
        held = f"; held fixed: {', '.join(f'{k} = {v:g}' for k, v in fixed.items())}" \
            if fixed else ""
        items = "sigma_item" in post or "item_effect" in post
        lines.append(f"   Model: structural, equation (1): {structural_equation(items)}; "
                     f"{hier} capabilities{held}")
    lines.append(f"  Family: {attrs.get('family', '?')} (logit link)")
    n_rows, n_obs = attrs.get("n_rows"), attrs.get("n_obs")
    agg = " (rows aggregated into binomial cells)" if int(attrs.get("aggregated", 0)) else ""
    lines.append(f"    Rows: {n_rows} (likelihood terms: {n_obs}){agg}")
    groups = _groups(idata, spec)
    if groups:
        lines.append("  Groups: " + "; ".join(
            f"{g}, {n if n is not None else '?'} levels" for g, n in groups))
    pri = applicable_priors(idata)
    if pri:
        lines.append("  Priors:")
        lines += [f"    {k} ~ {_prior_text(d)}" for k, d in sorted(pri.items())]
    try:
        s = json.loads(str(attrs.get("sampler", "{}")))
        lines.append(f" Sampler: {s['chains']} chain(s) × {s['draws']} draws after "
                     f"{s['tune']} warm-up, target_accept {s['target_accept']:g}, seed "
                     f"{attrs.get('seed', '?')}")
    except (KeyError, TypeError, ValueError):
        pass
    return "\n".join(lines)
