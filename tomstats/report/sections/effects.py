r"""Is there an effect? The probability of direction of each key effect, and a ROPE statement.

For each key effect :math:`\theta` — of a structural fit :math:`\gamma` (ToM order),
:math:`\alpha` (context length) and :math:`\delta` (their interaction); of a formula fit each
fixed effect but the intercept — the section gives the posterior probabilities
:math:`P(\theta > 0)` and :math:`P(\theta < 0)` (shares of the draws), the probability of
direction :math:`pd = \max\{P(\theta > 0), P(\theta < 0)\}` (Makowski et al. 2019) with what
that direction means for accuracy ("direction uncertain" below :data:`UNCERTAIN`), and,
when the user gives a region of practical equivalence
``--rope NAME=LOW,HIGH`` (or ``NAME=H`` for :math:`[-H, H]`), the share of the posterior
inside it and Kruschke's HDI+ROPE decision: the 94 % HDI entirely outside the ROPE — an
effect of practical size; entirely inside — practically no effect; otherwise undecided.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tomstats.glmm.diagnostics import INTERVAL_PROB
from tomstats.report._document import Section, Table, Text
from tomstats.report.sections._context import hdi

__all__ = ["KeyEffect", "effects_section", "effects_table", "key_effects", "parse_rope"]

TITLE = "Is there an effect?"
#: Below this probability of direction a reading says "direction uncertain".
UNCERTAIN = 0.9

#: Structural parameters: (label, what a positive value does, what a negative value does).
_STRUCTURAL = {
    "gamma": ("γ (ToM order)", "higher ToM order lowers accuracy",
              "higher ToM order raises accuracy"),
    "alpha": ("α (context length, per word)", "longer context lowers accuracy",
              "longer context raises accuracy"),
    "delta": ("δ (context × ToM order)", "the context penalty grows with ToM order",
              "the context penalty shrinks with ToM order"),
}


@dataclass(frozen=True)
class KeyEffect:
    """One key effect: its name (for ``--rope``), label, draws and the meaning of each sign."""

    name: str
    label: str
    draws: np.ndarray
    positive: str
    negative: str


def key_effects(idata: Any) -> list[KeyEffect]:
    """The key effects of a fit (see the module), in a fixed order."""
    post = idata.posterior
    try:
        kind = json.loads(str(post.attrs.get("spec", "{}"))).get("kind")
    except (TypeError, ValueError):
        kind = None
    out = []
    if kind == "formula" or ("beta" in post and "coef" in post.coords):
        for c in (str(v) for v in post.coords["coef"].values):
            if c == "Intercept":
                continue
            d = post["beta"].sel(coef=c).to_numpy().ravel()
            out.append(KeyEffect(c, f"β {c}", d, f"{c} raises the log-odds of a correct answer",
                                 f"{c} lowers the log-odds of a correct answer"))
        return out
    for name, (label, pos, neg) in _STRUCTURAL.items():
        if name in post and post[name].ndim == 2:  # estimated, not held fixed
            out.append(KeyEffect(name, label, post[name].to_numpy().ravel(), pos, neg))
    return out


def parse_rope(specs: Sequence[str] | None) -> dict[str, tuple[float, float]]:
    """``["gamma=-0.1,0.1", "fb=0.2"]`` → ``{"gamma": (-0.1, 0.1), "fb": (-0.2, 0.2)}``.

    Raises
    ------
    ValueError
        A spec without ``=``, a bound that is not a finite number, or low ≥ high.
    """
    out: dict[str, tuple[float, float]] = {}
    for spec in specs or ():
        name, sep, value = str(spec).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--rope {spec!r}: expected NAME=LOW,HIGH or NAME=H (e.g. "
                             f"gamma=-0.1,0.1)")
        try:
            bounds = [float(v) for v in value.split(",")]
        except ValueError:
            raise ValueError(f"--rope {spec!r}: bounds must be numbers") from None
        if len(bounds) == 1:
            bounds = [-abs(bounds[0]), abs(bounds[0])]
        if len(bounds) != 2 or not all(math.isfinite(b) for b in bounds) \
                or bounds[0] >= bounds[1]:
            raise ValueError(f"--rope {spec!r}: expected two finite bounds LOW < HIGH, or one "
                             f"half-width H > 0")
        out[name] = (bounds[0], bounds[1])
    return out


def _decision(lo: float, hi: float, rope: tuple[float, float]) -> str:
    if hi < rope[0] or lo > rope[1]:
        return "HDI outside the ROPE: an effect of practical size"
    if lo >= rope[0] and hi <= rope[1]:
        return "HDI inside the ROPE: practically no effect"
    return "HDI overlaps the ROPE: undecided"


def effects_table(effects: list[KeyEffect],
                  rope: Mapping[str, tuple[float, float]] | None = None) -> pd.DataFrame:
    """One row per key effect: mean, 94 % HDI, P(> 0), P(< 0), the probability of direction
    with its meaning, and (for effects with a ROPE) the share inside it and the decision."""
    rows = []
    for e in effects:
        x = e.draws[np.isfinite(e.draws)]
        p_pos, p_neg = float(np.mean(x > 0)), float(np.mean(x < 0))
        lo, hi = hdi(x)  # the page's one interval: ArviZ's 94 % HDI
        pd_ = max(p_pos, p_neg)
        stmt = e.positive if p_pos >= p_neg else e.negative
        row: dict[str, Any] = {
            "effect": e.label, "mean": float(np.mean(x)), "HDI low": lo, "HDI high": hi,
            "P(> 0)": p_pos, "P(< 0)": p_neg, "pd": pd_,
            "reading": (f"{stmt} (probability {pd_:.3f})" if pd_ >= UNCERTAIN
                        else f"direction uncertain: {stmt} with probability {pd_:.3f} only"),
        }
        if rope:
            r = rope.get(e.name)
            row["ROPE"] = "" if r is None else f"[{r[0]:g}, {r[1]:g}]"
            row["% in ROPE"] = (math.nan if r is None
                                else 100 * float(np.mean((x >= r[0]) & (x <= r[1]))))
            row["decision"] = "" if r is None else _decision(lo, hi, r)
        rows.append(row)
    return pd.DataFrame(rows)


def effects_section(idata: Any, rope: Mapping[str, tuple[float, float]] | None = None
                    ) -> Section:
    """The section (see the module); a ROPE naming no key effect is an error."""
    effects = key_effects(idata)
    names = [e.name for e in effects]
    unknown = sorted(set(rope or {}) - set(names))
    if unknown:
        raise ValueError(f"--rope: {', '.join(map(repr, unknown))} is not a key effect of "
                         f"this fit; choose from {names}")
    if not effects:
        return Section(TITLE, (Text("This fit has no effect to test (intercept only).",
                                    "missing"),))
    from tomstats.glmm.prior_width import prior_dominated_note

    tab = effects_table(effects, rope)
    lines = [f"{r['effect']}: {r['reading']}." for _, r in tab.iterrows()]
    prior_only = prior_dominated_note(idata)
    blocks: list[Any] = [Text(prior_only[0].upper() + prior_only[1:], "warning")] \
        if prior_only else []
    blocks += [
        Text(" ".join(lines), "p"),
        Table(tab, caption=f"Posterior probability of direction (pd) of each key effect, "
                           f"with its posterior mean and {INTERVAL_PROB:.0%} HDI"
                           + ("; ROPE: the region of practical equivalence given with --rope "
                              "and the HDI+ROPE decision (Kruschke)" if rope else ""),
              float_format="{:.3g}"),
    ]
    if not rope:
        blocks.append(Text("A direction is not a size: give a region of practical equivalence "
                           "with --rope NAME=LOW,HIGH (e.g. --rope " f"{names[0]}=-0.1,0.1) to "
                           "ask whether an effect is large enough to matter.", "note"))
    return Section(TITLE, tuple(blocks))
