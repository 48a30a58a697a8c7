"""What every section of the fit report reads: :class:`FitContext`, readable parameter names,
the prior of each reported parameter (one mapping, :func:`prior_key`), draws and intervals.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from tomstats.glmm.diagnostics import INTERVAL_PROB

__all__ = [
    "INTERVAL_PROB",
    "MAX_ELEMENTS",
    "FitContext",
    "Param",
    "build_context",
    "hdi",
    "hdi_columns",
    "interval_note",
    "param_label",
    "prior_key",
    "prior_text",
    "quiet_arviz",
    "term_label",
]

#: Variables with more elements than this per draw (per-item effects) are summarised in the
#: diagnostics and the random-effects section but left out of the parameter table and plots.
MAX_ELEMENTS = 12

_GREEK = {"alpha": "α", "gamma": "γ", "delta": "δ", "sigma_item": "σ item",
          "capability": "capability", "capability_mu": "μ capability",
          "capability_sd": "SD of capabilities", "sd_gamma_llm": "SD of per-LLM γ",
          "gamma_llm": "γ", "alpha_llm": "α", "item_effect": "item effect"}


@dataclass(frozen=True)
class Param:
    """One scalar element of a posterior variable: ``var[coords]`` and its readable label."""

    var: str
    coords: tuple[str, ...]
    label: str
    key: str  # ``var[c1,c2]`` (ArviZ-style), unique per element

    def draws(self, ds: xr.Dataset) -> np.ndarray:
        """Draws ``(chain, draw)`` of this element in ``ds`` (posterior or prior group)."""
        da = ds[self.var]
        other = [d for d in da.dims if d not in ("chain", "draw")]
        sel = {d: c for d, c in zip(other, self.coords, strict=True)}
        return np.asarray(da.sel(sel).transpose("chain", "draw").values, dtype=float)


def _internal(name: str) -> bool:
    """Reparametrisation internals (``*_z``, ``*_scaled``, ``z_*``, ``L_*``): not results."""
    return name.endswith(("_z", "_scaled", "_dev")) or name.startswith(("z_", "L_"))


_TREATMENT = re.compile(r"\[T\.([^\]]*)\]")


def term_label(term: str) -> str:
    """A model-matrix column as bambi names it: treatment coding's ``[T.level]`` becomes
    ``[level]`` (``prompt_variant[T.spaced]`` → ``prompt_variant[spaced]``)."""
    return _TREATMENT.sub(r"[\1]", term)


def _effect_words(eff: str) -> str:
    return "intercepts" if eff in ("Intercept", "1") else f"slopes on {term_label(eff)}"


def param_label(var: str, coords: Sequence[str] = ()) -> str:
    """Readable name of ``var[coords]``: ``beta[fb]`` → ``β fb``,
    ``beta[g[T.b]]`` → ``β g[b]``, ``sd_model[Intercept]`` → ``SD of model intercepts``,
    ``alpha`` → ``α``."""
    c = [str(x) for x in coords]
    if var == "beta":
        return "β " + ", ".join(map(term_label, c))
    if var == "beta_c":
        return "β " + ", ".join(map(term_label, c)) + " (centred predictors)"
    if var.startswith("sd_") and var[3:] not in ("gamma_llm",) and len(c) == 1:
        return f"SD of {var[3:]} {_effect_words(c[0])}"
    if var.startswith("corr_") and len(c) == 2:
        return f"corr of {var[5:]} effects {c[0]}, {c[1]}"
    if var.startswith("re_"):
        return f"{var[3:]} {c[0]}" + (f": {term_label(c[1])}" if len(c) > 1
                                      and c[1] != "Intercept" else "")
    name = _GREEK.get(var, var)
    return name + (" " + ", ".join(c) if c else "")


def _num(v: Any) -> float:
    return float(v)


def prior_text(d: dict[str, Any]) -> str:
    """A prior's distribution in words: ``Normal(0, 2.5)``, ``Half-normal(1)``."""
    kind = d.get("dist")
    try:
        if kind == "normal":
            return f"Normal({_num(d['loc']):.4g}, {_num(d['scale']):.4g})"
        if kind == "half_normal":
            return f"Half-normal({_num(d['scale']):.4g})"
        if kind == "student_t":
            return (f"Student-t(df={_num(d['df']):.4g}, {_num(d['loc']):.4g}, "
                    f"{_num(d['scale']):.4g})")
        if kind == "half_student_t":
            return f"Half-Student-t(df={_num(d['df']):.4g}, {_num(d['scale']):.4g})"
        if kind == "exponential":
            return f"Exponential(rate={_num(d['rate']):.4g})"
        if kind == "lkj":
            return f"LKJ(η={_num(d['eta']):.4g})"
    except (KeyError, TypeError, ValueError):
        pass
    return json.dumps(d, sort_keys=True)


class _HalfT:
    def __init__(self, df: float, scale: float) -> None:
        from scipy import stats

        self._t = stats.t(df, 0.0, scale)

    def pdf(self, v: np.ndarray) -> np.ndarray:
        return np.where(v > 0, 2 * self._t.pdf(v), 0.0)


def _pdf(d: dict[str, Any], scale: float = 1.0) -> Callable[[np.ndarray], np.ndarray] | None:
    """Density of ``scale · X`` for ``X`` with the prior ``d`` (``None`` if unsupported)."""
    from scipy import stats

    kind = d.get("dist")
    try:
        if kind == "normal":
            dist: Any = stats.norm(d["loc"], d["scale"])
        elif kind == "half_normal":
            dist = stats.halfnorm(scale=d["scale"])
        elif kind == "student_t":
            dist = stats.t(d["df"], d["loc"], d["scale"])
        elif kind == "half_student_t":
            dist = _HalfT(d["df"], d["scale"])
        elif kind == "exponential":
            dist = stats.expon(scale=1 / d["rate"])
        else:
            return None
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return lambda v: dist.pdf(np.asarray(v, dtype=float) / scale) / scale


def _lkj_marginal(d: dict[str, Any], dim: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """Density of one correlation under LKJ(η) in ``dim`` dimensions: :math:`(r + 1)/2 \\sim
    \\mathrm{Beta}(a, a)`, :math:`a = η - 1 + dim/2` (Lewandowski, Kurowicka & Joe 2009)."""
    from scipy import stats

    try:
        a = float(d["eta"]) - 1 + dim / 2
    except (KeyError, TypeError, ValueError):
        return None
    if a <= 0:
        return None
    dist = stats.beta(a, a)
    return lambda v: dist.pdf((np.asarray(v, dtype=float) + 1) / 2) / 2


@contextlib.contextmanager
def quiet_arviz() -> Iterator[None]:
    """Silence ArviZ's matplotlib deprecation chatter (not the user's concern)."""
    from matplotlib import MatplotlibDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
        yield


def hdi(draws: np.ndarray, prob: float = INTERVAL_PROB) -> tuple[float, float]:
    """Highest-density interval of 1-d ``draws`` (ArviZ's :func:`arviz.hdi`)."""
    x = np.asarray(draws, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    if x.size < 3 or np.ptp(x) == 0:
        return float(x.min()), float(x.max())
    lo, hi = az.hdi(x, hdi_prob=prob)
    return float(lo), float(hi)


def hdi_columns(draws: np.ndarray, prob: float = INTERVAL_PROB) -> tuple[np.ndarray, np.ndarray]:
    """HDI of every column of ``draws`` (``(S, k)``): lower and upper arrays of length k."""
    lo, hi = zip(*(hdi(draws[:, j], prob) for j in range(draws.shape[1])), strict=True) \
        if draws.shape[1] else ((), ())
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def interval_note(prob: float = INTERVAL_PROB) -> str:
    """The page's one statement of its interval convention."""
    pct = f"{100 * prob:g} %"
    return (f"Intervals on this page: {pct} highest-density intervals (HDI) of the posterior "
            f"or posterior predictive draws; observed proportions carry {pct} Jeffreys "
            "intervals.")


def _attrs(idata: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for group in ("posterior", "sample_stats", "observed_data"):
        if group in idata.groups():
            for k, v in getattr(idata, group).attrs.items():
                attrs.setdefault(str(k), v)
    for k, v in dict(getattr(idata, "attrs", {}) or {}).items():
        attrs.setdefault(str(k), v)
    return attrs


def _json(v: Any) -> Any:
    try:
        return json.loads(str(v))
    except (json.JSONDecodeError, TypeError):
        return None


@dataclass(frozen=True)
class FitContext:
    """A fit and what the sections derive from it (computed once, on first use).

    Attributes
    ----------
    idata : arviz.InferenceData
        The fit.
    name : str
        Shown in the subtitle and hints (usually the file name).
    sweep_draws : int
        Posterior draws of a structural fit's calibrated sweep (0: left out).
    prob : float
        Interval probability (:data:`INTERVAL_PROB`).
    """

    idata: Any
    name: str = "fit"
    sweep_draws: int = 50
    prob: float = INTERVAL_PROB
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def attrs(self) -> dict[str, Any]:
        """Attributes of the posterior, sample_stats, observed_data groups and the root."""
        return _attrs(self.idata)

    @cached_property
    def is_glmm(self) -> bool:
        """Written by :func:`tomstats.glmm.fit` (its format attribute and constant_data)."""
        return ("tomstats_glmm_format" in self.idata.posterior.attrs
                and "constant_data" in self.idata.groups())

    @cached_property
    def spec(self) -> dict[str, Any]:
        """The fit's spec as a dict (``{}`` when it has none)."""
        s = _json(self.attrs.get("spec", "{}"))
        return s if isinstance(s, dict) else {}

    @cached_property
    def kind(self) -> str:
        """``"formula"``, ``"structural"`` (also a foreign fit with α/γ/capability) or
        ``"other"``."""
        k = self.spec.get("kind") or self.attrs.get("model_kind")
        if k in ("formula", "structural"):
            return str(k)
        post = self.idata.posterior
        if "beta" in post.data_vars:
            return "formula"
        if {"gamma", "capability"} & set(post.data_vars):
            return "structural"
        return "other"

    @cached_property
    def priors(self) -> dict[str, dict[str, Any]]:
        """Priors of the spec, ``{key: {"dist": ..., ...}}``."""
        p = self.spec.get("priors")
        return {str(k): v for k, v in p.items() if isinstance(v, dict)} \
            if isinstance(p, dict) else {}

    @cached_property
    def var_names(self) -> list[str]:
        """Posterior variables reported in tables and plots (≤ :data:`MAX_ELEMENTS` each,
        no reparametrisation internals; ``beta_c`` only for its centred intercept)."""
        out = []
        for name, da in self.idata.posterior.data_vars.items():
            if _internal(str(name)) or str(name).startswith("re_"):
                continue
            if _size(da) <= MAX_ELEMENTS:
                out.append(str(name))
        return out

    @cached_property
    def left_out(self) -> dict[str, int]:
        """Variables not tabulated, with their element counts (correctly counted)."""
        return {str(n): _size(da) for n, da in self.idata.posterior.data_vars.items()
                if str(n) not in self.var_names}

    @cached_property
    def params(self) -> list[Param]:
        """Scalar elements of :attr:`var_names`, with readable labels. Of ``beta_c`` only the
        intercept is kept (its slopes equal ``beta``'s)."""
        out: list[Param] = []
        post = self.idata.posterior
        for v in self.var_names:
            da = post[v]
            other = [d for d in da.dims if d not in ("chain", "draw")]
            if not other:
                out.append(Param(v, (), param_label(v), v))
                continue
            values = [list(map(str, post[d].values)) if d in post.coords
                      else [str(i) for i in range(da.sizes[d])] for d in other]
            for combo in _product(values):
                if v == "beta_c" and (combo[0] != "Intercept" or not self.centred):
                    continue
                if v.startswith("corr_") and combo[0] >= combo[1]:
                    continue  # diagonal and lower triangle repeat the upper one
                out.append(Param(v, combo, param_label(v, combo), f"{v}[{','.join(combo)}]"))
        return out

    @cached_property
    def centred(self) -> bool:
        """Whether ``beta_c`` differs from ``beta`` (centred predictors with an intercept)."""
        post = self.idata.posterior
        if "beta_c" not in post.data_vars or "beta" not in post.data_vars:
            return False
        return not np.allclose(post["beta_c"].values, post["beta"].values)

    def param_prior(self, p: Param) -> tuple[str, Callable[[np.ndarray], np.ndarray]] | None:
        """``(prior key, density)`` of a reported element, or ``None`` if it has no prior of
        its own (see :func:`prior_key`)."""
        key = prior_key(p.var, p.coords, self.kind, self.priors, centred=self.centred,
                        hierarchical="capability_mu" in self.idata.posterior,
                        scales=self.spec)
        if key is None:
            return None
        name, scale = key
        if name.startswith("lkj_"):
            d = int(self.idata.posterior[p.var].shape[-1])
            pdf = _lkj_marginal(self.priors[name], d)
        else:
            pdf = _pdf(self.priors[name], scale)
        return None if pdf is None else (name, pdf)

    def prior_draws(self, p: Param) -> np.ndarray | None:
        """Draws of ``p`` in the ``prior`` group, when the fit has one with that variable."""
        if "prior" not in self.idata.groups() or p.var not in self.idata.prior:
            return None
        try:
            return p.draws(self.idata.prior).ravel()
        except (KeyError, ValueError):
            return None

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """Compute ``make()`` once per context (shared by sections: predictions, checks)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def prior_key(var: str, coords: Sequence[str], kind: str, priors: dict[str, Any], *,
              centred: bool = True, hierarchical: bool = True,
              scales: dict[str, Any] | None = None) -> tuple[str, float] | None:
    """The spec prior that applies to posterior element ``var[coords]``, with its scale.

    The one place where posterior names meet prior keys. Formula fits: ``beta[x]`` ←
    ``x`` (else the default slope prior ``beta``); the intercept prior ``Intercept`` is on
    the intercept at the predictors' means, ``beta_c[Intercept]`` when the predictors are
    centred (then ``beta[Intercept]`` has no prior of its own) and ``beta[Intercept]``
    otherwise; ``sd_<key>[effect]`` ← ``sd_<key>``. Structural fits: a prior on
    ``x_scaled`` with the spec's ``x_scale`` s applies to ``x = s · x_scaled`` (density
    :math:`f(v/s)/s`), ``capability[j]`` ← ``capability_mu`` when not hierarchical.

    Returns
    -------
    (key, scale) or None
        ``None`` when the element has no prior of its own (a derived quantity).
    """
    c = [str(x) for x in coords]

    def has(k: str) -> bool:
        return k in priors

    if kind == "formula":
        if var in ("beta", "beta_c") and c:
            if c[0] == "Intercept":
                if var == "beta" and centred:
                    return None
                return ("Intercept", 1.0) if has("Intercept") else None
            if has(c[0]):
                return c[0], 1.0
            return ("beta", 1.0) if has("beta") else None
        if var.startswith("sd_") and has(var):
            return var, 1.0
        if var.startswith("corr_") and has(f"lkj_{var[5:]}"):
            return f"lkj_{var[5:]}", 1.0
        return None
    if has(var):
        return var, 1.0
    scale = (scales or {}).get(f"{var}_scale")
    if has(f"{var}_scaled") and isinstance(scale, (int, float)) and scale > 0:
        return f"{var}_scaled", float(scale)
    if var == "capability" and not hierarchical and has("capability_mu"):
        return "capability_mu", 1.0
    return None


def _size(da: xr.DataArray) -> int:
    return int(np.prod([n for d, n in da.sizes.items() if d not in ("chain", "draw")]))


def _product(values: list[list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return [tuple(x) for x in itertools.product(*values)]


def build_context(idata: Any, name: str = "fit", sweep_draws: int = 50) -> FitContext:
    """A :class:`FitContext` for ``idata``."""
    return FitContext(idata, name, sweep_draws)


def frame_or_none(rows: list[dict[str, Any]]) -> pd.DataFrame | None:
    """A DataFrame of ``rows`` or ``None`` when there are none."""
    return pd.DataFrame(rows) if rows else None
