r"""Which parameters did the data inform? Posterior sd against prior sd, per parameter.

A parameter whose posterior is barely narrower than its prior — posterior sd above
:data:`THRESHOLD` (0.9) times the prior sd — was learned from the prior, not from the data
(a design that cannot identify it: one context length, a "context" that is a count of
characters in a narrow range, a single ToM order). :func:`prior_width` compares the two for
every parameter that has a prior of its own (:func:`tomstats.glmm.header.applicable_priors`);
``tomstats fit`` prints :func:`prior_dominated_note` under its table and the fit report shows
it beside the effects.

Prior sds, from the prior's definition:

=====================  ===============================================================
prior                  sd
=====================  ===============================================================
Normal(μ, s)           :math:`s`
Half-normal(s)         :math:`s\sqrt{1 - 2/\pi}`
Student-t(ν, μ, s)     :math:`s\sqrt{\nu/(\nu-2)}` (ν > 2; else infinite)
Half-Student-t(ν, s)   :math:`\sqrt{s^2\nu/(\nu-2) - m^2}`,
                       :math:`m = 2s\sqrt{\nu/\pi}\,\Gamma(\tfrac{\nu+1}{2})/
                       (\Gamma(\tfrac{\nu}{2})(\nu-1))` (ν > 2)
Exponential(λ)         :math:`1/\lambda`
=====================  ===============================================================
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["THRESHOLD", "prior_dominated_note", "prior_sd", "prior_width"]

#: Posterior sd / prior sd above which a parameter is reported as informed by its prior only.
THRESHOLD = 0.9


def prior_sd(d: dict[str, Any]) -> float:
    """The sd of a prior given as its dictionary (``{"dist": "normal", "loc": 0, "scale": 2}``);
    NaN for a prior without one (LKJ) or an unknown distribution."""
    kind = d.get("dist")
    try:
        if kind == "normal":
            return float(d["scale"])
        if kind == "half_normal":
            return float(d["scale"]) * math.sqrt(1 - 2 / math.pi)
        if kind in ("student_t", "half_student_t"):
            nu, s = float(d["df"]), float(d["scale"])
            if nu <= 2:
                return math.inf
            var = s * s * nu / (nu - 2)
            if kind == "student_t":
                return math.sqrt(var)
            m = (2 * s * math.sqrt(nu / math.pi)
                 * math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / (nu - 1))
            return math.sqrt(var - m * m)
        if kind == "exponential":
            return 1.0 / float(d["rate"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    return math.nan


def _targets(idata: Any, key: str, priors: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """``(label, draws)`` of each posterior element the prior ``key`` applies to."""
    post = idata.posterior
    spec = json.loads(str(post.attrs.get("spec", "{}")) or "{}")

    def elements(var: str, label: str) -> list[tuple[str, np.ndarray]]:
        da = post[var]
        flat = da.to_numpy().reshape(da.sizes["chain"] * da.sizes["draw"], -1)
        if flat.shape[1] == 1:
            return [(label, flat[:, 0])]
        dims = [d for d in da.dims if d not in ("chain", "draw")]
        names = [str(v) for v in post[dims[0]].values] if len(dims) == 1 and dims[0] in \
            post.coords else [str(i) for i in range(flat.shape[1])]
        return [(f"{label}[{n}]", flat[:, i]) for i, n in enumerate(names)]

    if spec.get("kind") == "formula":
        coefs = [str(c) for c in post.coords["coef"].values] if "coef" in post.coords else []

        def beta(c: str) -> list[tuple[str, np.ndarray]]:
            var = "beta_c" if c == "Intercept" and "beta_c" in post else "beta"
            return [(f"β {c}", post[var].sel(coef=c).to_numpy().ravel())]

        if key == "beta":
            return [x for c in coefs if c != "Intercept" and c not in priors for x in beta(c)]
        if key in coefs:
            return beta(key)
        return elements(key, key) if key.startswith("sd_") and key in post else []
    if key in post:
        label = key[:-7] if key.endswith("_scaled") else key  # the same ratio on either scale
        return elements(key, label)
    if key == "capability_mu" and "capability" in post:
        return elements("capability", "capability")
    return []


def prior_width(idata: Any, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per parameter with a prior of its own: ``parameter``, ``prior`` (key),
    ``prior_sd``, ``posterior_sd``, ``ratio`` = posterior sd / prior sd and ``prior_only``
    (ratio > ``threshold``)."""
    from tomstats.glmm.header import applicable_priors

    priors = applicable_priors(idata)
    rows = []
    for key, d in sorted(priors.items()):
        sd0 = prior_sd(d)
        if not math.isfinite(sd0) or sd0 <= 0:
            continue
        for label, x in _targets(idata, key, priors):
            sd1 = float(np.std(x, ddof=1))
            rows.append({"parameter": label, "prior": key, "prior_sd": sd0,
                         "posterior_sd": sd1, "ratio": sd1 / sd0,
                         "prior_only": bool(sd1 / sd0 > threshold)})
    return pd.DataFrame(rows, columns=["parameter", "prior", "prior_sd", "posterior_sd",
                                       "ratio", "prior_only"])


def prior_dominated_note(idata: Any, threshold: float = THRESHOLD) -> str | None:
    """A sentence naming the parameters whose posterior sd exceeds ``threshold`` × the prior
    sd, or ``None`` when the data narrowed every prior."""
    tab = prior_width(idata, threshold)
    flagged = tab[tab["prior_only"]]
    if flagged.empty:
        return None
    shown = ", ".join(f"{r.parameter} ({100 * r.ratio:.0f} %)" for r in flagged.itertuples())
    return (f"the posterior of {shown} is barely narrower than its prior (posterior sd as a "
            f"share of the prior sd; above {100 * threshold:.0f} %): the data say little "
            f"about {'it' if len(flagged) == 1 else 'them'}, and the estimate is the prior's. "
            f"The design may not identify {'it' if len(flagged) == 1 else 'them'} (e.g. too "
            f"few distinct context lengths or ToM orders).")
