r"""Simulation-based power and assurance: how many questions, stories and LLMs a study needs.

:func:`power` simulates a study many times with the simulator of equation (1)
(:func:`tomstats.simulate.item_counts` and :func:`tomstats.model.cell_probabilities`), runs the
planned analysis on every simulated data set, and reports the share of data sets in which the
tested effect is significant at level :math:`a` — the power — for each value of one design
dimension (questions per cell, stories per cell, number of LLMs) or parameter (α, γ, δ, σ).

**The data of one simulated study.** LLMs :math:`j = 1..L` with capabilities :math:`m_j` (the
design's capability levels, or drawn from :math:`N(\bar m, s_m^2)` per study when ``n_llms``
is given) answer the same items: every design cell :math:`(c, t)` has :math:`I` items
(stories), each with an item effect :math:`\varepsilon_{cti}\sim N(0, \sigma^2)` shared by
its questions and by all LLMs, and :math:`n` questions dealt round-robin to the items. Each
answer is correct with probability :math:`\operatorname{expit}(\eta_{jcti})`, with
:math:`\eta` equation (1) (:func:`tomstats.model.linear_predictor`). With one question per
item (the default, ``items_per_cell=None``) this is the paper's model, and one LLM's cell
counts are exactly :math:`\operatorname{Binomial}(n, \bar p_{ct})`; those are drawn directly
(``path="exact"``) or question by question (``path="bernoulli"``).

**The tests** (``tests``; each a string ``"<analysis>:<term>"``):

``anova:tom_order``, ``anova:context_length``, ``anova:interaction``
    The paper's two-way ANOVA (type II SS, :func:`tomstats.anova.anova_from_counts`) of one
    LLM's binary answers: reject when :math:`F > F_{1-a}(df_X, N - CT)`. Run on every LLM;
    power is the rejection rate over LLMs and studies (``power_by_llm`` per LLM). Estimate:
    partial :math:`\eta^2`.
``rm-anova:tom_order``, ``rm-anova:context_length``, ``rm-anova:interaction``
    The repeated-measures ANOVA across LLMs: the LLMs are the subjects, context × order the
    within factors, the dependent variable each LLM's accuracy per cell :math:`k_{jct}/n`.
    With :math:`M_E` orthonormal contrasts of effect :math:`E` over the :math:`CT` cells
    (:math:`d_E` columns) and :math:`Z = Y M_E` (one row per LLM),
    :math:`SS_E = L\,\lVert\bar z\rVert^2`,
    :math:`SS_{E\times S} = \operatorname{tr} W` with :math:`W = (Z - \bar z)^\top(Z -
    \bar z)`, :math:`F = \frac{SS_E/d_E}{SS_{E\times S}/(d_E(L-1))}`, and the
    Greenhouse–Geisser :math:`\hat\varepsilon = \operatorname{tr}(W)^2 / (d_E
    \operatorname{tr}(W^2))`: reject when the GG-corrected
    :math:`P(F_{\hat\varepsilon d_E,\, \hat\varepsilon d_E (L-1)} > F) < a` (as afex's
    ``aov_car`` and :func:`tomstats.anova.anova` with ``within=``); with fewer LLMs than
    :math:`d_E + 1` the error matrix is singular, no correction can be estimated and the
    uncorrected F test is used, as the analysis reports only it. ``correction="HF"`` uses
    the Huynh–Feldt :math:`\min(1, \tilde\varepsilon)` instead, ``"none"`` the uncorrected
    test. One test per study; it
    needs at least 2 LLMs. Estimate: partial :math:`\eta^2 = SS_E/(SS_E + SS_{E\times
    S})`. The stories are fixed in this analysis: when they carry effects shared by all
    LLMs (:math:`\sigma > 0`), a cell's stories shift every LLM's accuracy alike and the
    test's type I error grows with the number of LLMs and falls with the number of stories
    (the "language-as-fixed-effect fallacy"); the GLMM tests, with ``(1 | item)``, do not.
    Like the GLMM tests, it is run on studies simulated story by story, every story answered
    by every LLM (:func:`tomstats.simulate.item_counts`; one question per story unless
    ``items_per_cell`` is given).
``glm-wald:<p>``, ``glm-lrt:<p>`` with :math:`p\in\{\alpha,\gamma,\delta\}`
    Logistic regression of one LLM's answers on equation (1)'s predictors,
    :math:`\operatorname{logit} P = b_0 + b_1 c\ln(1+c/500) + b_2 t + b_3 c t`, fitted by
    Newton's method (:func:`tomstats.glm.logistic_fit`) on the cell counts (identical to the
    fit on one row per question). Wald: :math:`|b/\mathrm{se}| > z_{1-a/2}`; likelihood
    ratio: :math:`2(\ell_\text{full} - \ell_\text{without})>\chi^2_{1,1-a}`. Estimate:
    :math:`\hat\alpha = -b_1`, :math:`\hat\gamma = -b_2`, :math:`\hat\delta = -b_3` (marginal
    over items, hence attenuated towards 0 when :math:`\sigma > 0`).
``glm-lrt:interaction``
    Likelihood ratio of the saturated model (one probability per cell) against the additive
    factor model ``C(context) + C(tom)``, :math:`(C-1)(T-1)` df. Estimate: the mean statistic.
``glmm-wald:<p>``, ``glmm-lrt:<p>``
    The same fixed effects plus crossed random intercepts ``(1 | llm) + (1 | item)``, fitted
    by maximum likelihood with the Laplace approximation (:mod:`tomstats.glmm.laplace`, as
    lme4's ``glmer``), on all LLMs together.

**Failures are not rejections.** A fit that fails (non-finite F, a logistic fit that does not
converge, e.g. under separation) is counted in ``n_failed`` and left out of the power. When
more than 1 % of the fits of any test at any value fail, :func:`power` stops with
:class:`PowerFailureError` unless ``allow_failures=True``.

**Monte Carlo error.** The power :math:`\hat\pi = r / N` (rejections over valid fits) comes
with a 95 % Wilson interval
:math:`\frac{\hat\pi + z^2/2N \pm z\sqrt{\hat\pi(1-\hat\pi)/N + z^2/4N^2}}{1 + z^2/N}`.

**Assurance.** With ``posterior=`` a structural fit (:func:`tomstats.glmm.fit`,
``model="structural"``), each simulated study draws its parameters and its LLMs'
capabilities from one posterior draw (study :math:`r` uses draw :math:`r \bmod S`), so the
curve is the expected power given what the fit learned, :math:`E_{\theta\mid y}[\pi(\theta)]`;
the plug-in power at the posterior means is reported beside it (coordinate ``kind``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import scipy.stats
import xarray as xr
from jax import lax
from tqdm.auto import tqdm

from tomstats._guards import Footprint, check_footprint
from tomstats._io import (
    add_out_arguments,
    ensure_writable_dir,
    prepare_out_dir,
    replaced_dir,
    staged_files,
)
from tomstats._validate import closest_hint
from tomstats.anova import anova_from_counts
from tomstats.design import Design
from tomstats.model import Params, cell_probabilities, context_load
from tomstats.simulate import bernoulli_counts, item_counts, item_trials, make_key
from tomstats.study import ALONG, PowerSpec, StudyConfig, load_study

__all__ = [
    "TESTS",
    "PowerFailureError",
    "PowerResult",
    "power",
    "power_footprint",
    "wilson_interval",
    "add_power_arguments",
    "run_power",
]

_ANOVA_TERMS = ("context_length", "tom_order", "interaction")  # order of anova_from_counts
_COEF = {"alpha": 1, "gamma": 2, "delta": 3}
#: Column scales of the logistic design (context terms in thousands of words).
_SCALE = np.array([1.0, 1e-3, 1.0, 1e-3])
#: Every test :func:`power` knows.
TESTS: tuple[str, ...] = (
    *(f"anova:{t}" for t in ("tom_order", "context_length", "interaction")),
    *(f"rm-anova:{t}" for t in ("tom_order", "context_length", "interaction")),
    *(f"glm-{m}:{p}" for m in ("wald", "lrt") for p in _COEF),
    "glm-lrt:interaction",
    *(f"glmm-{m}:{p}" for m in ("wald", "lrt") for p in _COEF),
)
_MAX_FAIL = 0.01
_CELLS_PER_CHUNK = 2**21  # simulated (LLM × item) counts held per compiled call
_FITS_PER_CHUNK = 200  # simulated studies per compiled call when the tests fit models


class PowerFailureError(ValueError):
    """More than 1 % of the fits of a test failed; power among the rest would be biased."""


@dataclass(frozen=True)
class _Test:
    name: str
    analysis: str  # anova | rm-anova | glm | glmm
    method: str  # F | wald | lrt
    term: str


def _parse_test(name: str) -> _Test:
    if not isinstance(name, str) or name not in TESTS:
        raise ValueError(f"tests: unknown test {name!r}{closest_hint(str(name), TESTS)}")
    head, term = name.split(":")
    if head in ("anova", "rm-anova"):
        return _Test(name, head, "F", term)
    analysis, method = head.split("-")
    return _Test(name, analysis, method, term)


def wilson_interval(k: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval for a binomial proportion :math:`k/n`.

    .. math::

        \frac{\hat\pi + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat\pi(1-\hat\pi)}{n}
        + \frac{z^2}{4n^2}}}{1 + z^2/n},\qquad z = \Phi^{-1}\!\left(\tfrac{1+\text{level}}{2}
        \right)

    NaN where :math:`n = 0`.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    z = scipy.stats.norm.ppf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = np.where(k == 0, 0.0, np.clip(centre - half, 0, 1))
    hi = np.where(k == n, 1.0, np.clip(centre + half, 0, 1))
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


# ---------------------------------------------------------------------------------------
# one value of the varied dimension: what is simulated
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    """The sizes of one simulated study."""

    n: int  # questions per cell and LLM
    items: int | None  # items per cell (None: one per question)
    n_llms: int


def _design_matrices(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Equation (1)'s predictors per cell (C·T, 4) and the additive factor design."""
    c, t = np.meshgrid(design.context, design.tom, indexing="ij")
    c, t = c.ravel(), t.ravel()
    x = np.column_stack([np.ones_like(c), np.asarray(context_load(c)), t, c * t]) * _SCALE
    n_c, n_t = design.shape
    ci, ti = np.meshgrid(np.arange(n_c), np.arange(n_t), indexing="ij")
    add = np.column_stack([np.ones(c.size)]
                          + [(ci.ravel() == i).astype(float) for i in range(1, n_c)]
                          + [(ti.ravel() == j).astype(float) for j in range(1, n_t)])
    return x, add


def _glm_stats(tests: Sequence[_Test], x: np.ndarray, add: np.ndarray, y: jax.Array,
               n: jax.Array) -> dict[str, jax.Array]:
    """Per-LLM logistic fits of the cell counts ``y`` (L, C·T) with trials ``n``."""
    from tomstats.glm import logistic_fit, saturated_loglik

    out: dict[str, jax.Array] = {}
    x = jnp.asarray(x, dtype=y.dtype)
    full = jax.vmap(lambda yy: logistic_fit(x, yy, n))(y)
    out.update(glm_beta=full.beta, glm_se=full.se, glm_ok=full.converged)
    for term in sorted({t.term for t in tests if t.method == "lrt" and t.term in _COEF}):
        keep = [i for i in range(x.shape[1]) if i != _COEF[term]]
        red = jax.vmap(lambda yy, k=keep: logistic_fit(x[:, k], yy, n))(y)
        out[f"glm_lrt_{term}"] = 2.0 * (full.loglik - red.loglik)
        out[f"glm_lrt_{term}_ok"] = full.converged & red.converged
    if any(t.term == "interaction" for t in tests if t.analysis == "glm"):
        a = jnp.asarray(add, dtype=y.dtype)
        red = jax.vmap(lambda yy: logistic_fit(a, yy, n))(y)
        sat = jax.vmap(lambda yy: saturated_loglik(yy, n))(y)
        out["glm_lrt_interaction"] = 2.0 * (sat - red.loglik)
        out["glm_lrt_interaction_ok"] = red.converged
    return out


def _huynh_feldt(gg: np.ndarray, d: int, dfe: int) -> np.ndarray:
    r"""Huynh–Feldt :math:`\min(1, \tilde\varepsilon)` from the Greenhouse–Geisser
    :math:`\hat\varepsilon` of an effect with :math:`d` df and :math:`\nu` error df per
    contrast (car's formula, as :func:`tomstats.anova.anova`):
    :math:`\tilde\varepsilon = \frac{(\nu + 1) d\hat\varepsilon - 2}{d(\nu - d\hat
    \varepsilon)}`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        hf = ((dfe + 1) * d * gg - 2) / (d * (dfe - d * gg))
    return np.minimum(1.0, np.where(np.isnan(gg) | (hf >= 0), hf, np.inf))


def _orthonormal(levels: int) -> np.ndarray:
    """Orthonormal contrasts over ``levels`` levels (columns orthogonal to 1), (levels, -1)."""
    q, _ = np.linalg.qr(np.hstack([np.ones((levels, 1)), np.eye(levels)[:, :-1]]))
    return q[:, 1:]


def _rm_contrasts(n_c: int, n_t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthonormal contrasts of context, order and their interaction over the cells (c, t)
    flattened in C order, in the order of ``_ANOVA_TERMS``."""
    hc, ht = _orthonormal(n_c), _orthonormal(n_t)
    mean_c, mean_t = np.full((n_c, 1), n_c ** -0.5), np.full((n_t, 1), n_t ** -0.5)
    return np.kron(hc, mean_t), np.kron(mean_c, ht), np.kron(hc, ht)


def _rm_anova_stats(acc: jax.Array, contrasts: Sequence[np.ndarray]) -> dict[str, jax.Array]:
    """Within-LLM F, Greenhouse–Geisser ε and partial η² of the three effects (module
    docstring) from the accuracies ``acc`` (L, C, T) of one study."""
    n_l = acc.shape[0]
    y = acc.reshape(n_l, -1)
    f, eps, peta = [], [], []
    for m in contrasts:
        z = y @ jnp.asarray(m, dtype=y.dtype)
        zbar = z.mean(0)
        dev = z - zbar
        w = dev.T @ dev
        d = m.shape[1]
        ss_e, ss_err = n_l * jnp.sum(zbar * zbar), jnp.trace(w)
        f.append((ss_e / d) / (ss_err / (d * (n_l - 1))))
        eps.append(ss_err ** 2 / (d * jnp.sum(w * w)))
        peta.append(ss_e / (ss_e + ss_err))
    return {"rm_F": jnp.stack(f), "rm_eps": jnp.stack(eps), "rm_peta": jnp.stack(peta)}


def _glmm_stats(tests: Sequence[_Test], x: np.ndarray, k_items: jax.Array,
                trials: np.ndarray) -> dict[str, jax.Array]:
    """Crossed-intercept GLMM (1 | llm) + (1 | item) of one study's item counts (L,C,T,I)."""
    from tomstats.glmm.laplace import laplace_fit

    n_l, n_c, n_t, n_i = k_items.shape
    xr_ = np.repeat(x, n_i, axis=0)  # rows of one LLM: (cell, item)
    X = jnp.asarray(np.tile(xr_, (n_l, 1)), dtype=k_items.dtype)
    item = np.tile(np.arange(n_c * n_t * n_i), n_l)
    llm = np.repeat(np.arange(n_l), n_c * n_t * n_i)
    groups = jnp.asarray(np.column_stack([item, llm]))
    levels = (n_c * n_t * n_i, n_l)
    tr = jnp.asarray(np.tile(trials, n_l * n_c * n_t), dtype=k_items.dtype)
    y = k_items.reshape(-1)
    full = laplace_fit(X, y, tr, groups, levels)
    out = {"glmm_beta": full.beta, "glmm_se": full.se,
           "glmm_ok": full.converged & jnp.all(jnp.isfinite(full.se))}
    for term in sorted({t.term for t in tests if t.method == "lrt"}):
        keep = [i for i in range(x.shape[1]) if i != _COEF[term]]
        red = laplace_fit(X[:, keep], y, tr, groups, levels)
        out[f"glmm_lrt_{term}"] = 2.0 * (full.loglik - red.loglik)
        out[f"glmm_lrt_{term}_ok"] = full.converged & red.converged
    return out


#: Analyses that pool the LLMs: their data simulate every story, shared by all LLMs (as in a
#: real multi-LLM study, where every LLM answers the same questions).
_POOLED = ("rm-anova", "glmm")


def _per_item(setting: _Setting, tests: Sequence[_Test]) -> bool:
    """Whether a study is simulated story by story (:func:`tomstats.simulate.item_counts`)."""
    return setting.items is not None or any(t.analysis in _POOLED for t in tests)


def _kernel(design: Design, setting: _Setting, tests: tuple[_Test, ...],
            path: str) -> Callable[..., dict[str, jax.Array]]:
    """``(keys, theta, n) -> statistics`` of one study per key (compiled, cached by shape).

    On the exact path without items the questions per cell are an argument, so one program
    serves every value of ``questions_per_cell``.
    """
    if path == "exact" and not _per_item(setting, tests):
        setting = _Setting(n=0, items=None, n_llms=setting.n_llms)
    return _compiled(design.context.tobytes(), design.tom.tobytes(), setting, tests, path)


@lru_cache(maxsize=32)
def _compiled(ctx_b: bytes, tom_b: bytes, setting: _Setting, tests: tuple[_Test, ...],
              path: str) -> Callable[..., dict[str, jax.Array]]:
    """The simulation (and GLMM fits) of one study size, then the count analyses.

    The count analyses (ANOVA, repeated-measures ANOVA, GLM) are a separate program of the
    cell counts and the questions per cell, so it is compiled once for every size.
    """
    ctx = np.frombuffer(ctx_b)
    tom = np.frombuffer(tom_b)
    n_c, n_t = ctx.size, tom.size
    x, _ = _matrices(ctx, tom)
    per_item = _per_item(setting, tests)
    trials = item_trials(setting.n, setting.items or setting.n) if per_item else None
    glmm = tuple(t for t in tests if t.analysis == "glmm")

    def one(key: jax.Array, th: Mapping[str, jax.Array], n: jax.Array) -> dict[str, jax.Array]:
        params = Params(th["alpha"], th["gamma"], th["delta"], th["sigma"][0])
        dtype = th["capability"].dtype
        out: dict[str, jax.Array] = {}
        if per_item:
            k_items = item_counts(key, params, jnp.asarray(ctx, dtype), jnp.asarray(tom, dtype),
                                  th["capability"], trials)
            counts = k_items.sum(-1)
        else:
            per_llm = Params(*(jnp.asarray(v)[:, None, None] for v in (
                th["alpha"], th["gamma"], th["delta"], th["sigma"])))
            p = cell_probabilities(per_llm, jnp.asarray(ctx, dtype)[:, None],
                                   jnp.asarray(tom, dtype)[None, :],
                                   th["capability"][:, None, None])
            if path == "exact":
                counts = jax.random.binomial(key, n, p).astype(dtype)
            else:
                counts = bernoulli_counts(key, p, np.full((n_c, n_t), setting.n)).astype(dtype)
        out["successes"] = counts
        if glmm:
            out.update(_glmm_stats(glmm, x, k_items, trials))
        return out

    @jax.jit
    def simulate(keys: jax.Array, theta: Mapping[str, jax.Array], n: jax.Array
                 ) -> dict[str, jax.Array]:
        if glmm:
            # one GLMM fit after another inside the compiled program: each stops at its own
            # convergence (a vmapped while-loop runs every study until the slowest is done)
            return lax.map(lambda a: one(a[0], a[1], n), (keys, theta))
        return jax.vmap(one, in_axes=(0, 0, None))(keys, theta, n)

    analyse = _count_analyses(ctx_b, tom_b, tuple(t for t in tests if t.analysis != "glmm"))

    def run(keys: jax.Array, theta: Mapping[str, jax.Array], n: jax.Array
            ) -> dict[str, jax.Array]:
        out = simulate(keys, theta, n)
        return {**out, **analyse(out["successes"], n)}

    return run


@lru_cache(maxsize=32)
def _count_analyses(ctx_b: bytes, tom_b: bytes, tests: tuple[_Test, ...]
                    ) -> Callable[..., dict[str, jax.Array]]:
    """``(counts (R, L, C, T), n) -> statistics`` of the ANOVA, RM-ANOVA and GLM tests."""
    ctx = np.frombuffer(ctx_b)
    tom = np.frombuffer(tom_b)
    n_c, n_t = ctx.size, tom.size
    x, add = _matrices(ctx, tom)
    rm = _rm_contrasts(n_c, n_t)
    analyses = {t.analysis for t in tests}
    glm = [t for t in tests if t.analysis == "glm"]

    def one(counts: jax.Array, n: jax.Array) -> dict[str, jax.Array]:
        out: dict[str, jax.Array] = {}
        if "anova" in analyses:
            tab = anova_from_counts(counts, n, balanced=True, p_values=False, check=False)
            out["anova_F"] = tab.F[..., :3]
            out["anova_peta"] = tab.partial_eta2[..., :3]
        if "rm-anova" in analyses:
            out.update(_rm_anova_stats(counts / n, rm))
        if glm:
            out.update(_glm_stats(glm, x, add, counts.reshape(counts.shape[0], n_c * n_t), n))
        return out

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _matrices(ctx: np.ndarray, tom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from tomstats.design import CONTEXT, TOM, Factor

    d = Design((Factor(CONTEXT, tuple(ctx)), Factor(TOM, tuple(tom))), 1, (1.0,))
    return _design_matrices(d)


# ---------------------------------------------------------------------------------------
# decisions, failures and summaries on the host
# ---------------------------------------------------------------------------------------


def _decide(test: _Test, st: Mapping[str, np.ndarray], alpha: float, n: int,
            cells: tuple[int, int], n_llms: int, correction: str = "GG"
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reject, ok, estimate) arrays for one test; shape (R, L) or (R,)."""
    n_c, n_t = cells
    if test.analysis == "rm-anova":
        j = _ANOVA_TERMS.index(test.term)
        d = (n_c - 1, n_t - 1, (n_c - 1) * (n_t - 1))[j]
        f, eps = st["rm_F"][..., j], st["rm_eps"][..., j]
        if n_llms - 1 < d or correction == "none":
            # too few LLMs to estimate ε: the uncorrected test, as anova() reports
            eps = np.ones_like(f)
        elif correction == "HF":
            eps = _huynh_feldt(eps, d, n_llms - 1)
        ok = np.isfinite(f) & np.isfinite(eps)
        with np.errstate(invalid="ignore"):
            p = scipy.stats.f.sf(f, eps * d, eps * d * (n_llms - 1))
        return ok & (p < alpha), ok, st["rm_peta"][..., j]
    if test.analysis == "anova":
        j = _ANOVA_TERMS.index(test.term)
        df1 = (n_c - 1, n_t - 1, (n_c - 1) * (n_t - 1))[j]
        crit = scipy.stats.f.isf(alpha, df1, n * n_c * n_t - n_c * n_t)
        f = st["anova_F"][..., j]
        ok = np.isfinite(f)
        return ok & (f > crit), ok, st["anova_peta"][..., j]
    pre = test.analysis
    if test.term == "interaction":
        stat = st["glm_lrt_interaction"]
        ok = st["glm_lrt_interaction_ok"] & np.isfinite(stat)
        crit = scipy.stats.chi2.isf(alpha, (n_c - 1) * (n_t - 1))
        return ok & (stat > crit), ok, stat
    i = _COEF[test.term]
    est = -st[f"{pre}_beta"][..., i] * _SCALE[i]
    if test.method == "wald":
        z = st[f"{pre}_beta"][..., i] / st[f"{pre}_se"][..., i]
        ok = st[f"{pre}_ok"] & np.isfinite(z)
        return ok & (np.abs(z) > scipy.stats.norm.isf(alpha / 2)), ok, est
    stat = st[f"{pre}_lrt_{test.term}"]
    ok = st[f"{pre}_lrt_{test.term}_ok"] & np.isfinite(stat)
    return ok & (stat > scipy.stats.chi2.isf(alpha, 1)), ok, est


@dataclass(frozen=True)
class PowerResult:
    """Result of :func:`power`.

    Attributes
    ----------
    data : xarray.Dataset
        Variables ``power``, ``ci_low``, ``ci_high`` (95 % Wilson), ``estimate`` (mean over
        valid fits), ``n_fits``, ``n_failed``, ``n_rejected`` over ``(kind, value, test)``
        (``(kind, by_value, value, test)`` with a second dimension ``by``);
        ``power_by_llm`` over ``(kind, value, test, llm)`` for the per-LLM tests when the
        LLMs have fixed capabilities. Attributes record the settings and provenance.
    """

    data: xr.Dataset

    @property
    def along(self) -> str:
        """The varied dimension."""
        return str(self.data.attrs["along"])

    @property
    def by(self) -> str | None:
        """The second dimension (``None`` for a single curve per test)."""
        by = self.data.attrs.get("by")
        return None if by is None else str(by)

    def frame(self) -> pd.DataFrame:
        """One row per (kind, [by value,] value, test): the tidy view of :attr:`data`."""
        cols = ["power", "ci_low", "ci_high", "estimate", "n_fits", "n_failed", "n_rejected"]
        df = self.data[cols].to_dataframe().reset_index()
        df.insert(1, "along", self.along)
        for c in ("n_fits", "n_failed", "n_rejected"):
            df[c] = df[c].astype(int)
        if self.by is None:
            return df[["kind", "along", "value", "test", *cols]]
        df.insert(1, "by", self.by)
        df = df.sort_values(["kind", "by_value", "value"], kind="stable")
        return df[["kind", "by", "by_value", "along", "value", "test", *cols]].reset_index(
            drop=True)

    def targets(self, target: float | None = None) -> list[dict[str, Any]]:
        """Smallest value of the varied dimension that reaches ``target`` power, per test.

        For each (kind, test), scanning the values in ascending order: ``value`` is the first
        whose power estimate is at least ``target``; ``value_optimistic`` the first whose
        Wilson upper bound is (the Monte Carlo error cannot exclude it); ``value_sure`` the
        first whose lower bound is; ``interpolated`` the linear interpolation between the
        last value below and the first at or above the target. ``None`` where not reached.
        """
        target = float(self.data.attrs["target"] if target is None else target)
        if not 0 < target < 1:
            raise ValueError(f"target must be in (0, 1), got {target!r}")
        if self.by is not None:
            return [{"by": self.by, "by_value": _num(b), **t}
                    for b in self.data["by_value"].to_numpy()
                    for t in PowerResult(self.data.sel(by_value=b).drop_vars("by_value")
                                         .assign_attrs(by=None)).targets(target)]
        out = []
        ds = self.data.sortby("value")
        values = ds["value"].to_numpy()
        for kind in ds["kind"].to_numpy():
            for test in ds["test"].to_numpy():
                sub = ds.sel(kind=kind, test=test)
                pw, lo, hi = (sub[v].to_numpy() for v in ("power", "ci_low", "ci_high"))

                def first(mask: np.ndarray) -> float | None:
                    idx = np.flatnonzero(mask)
                    return _num(values[idx[0]]) if idx.size else None

                val = first(pw >= target)
                interp = None
                if val is not None:
                    k = int(np.flatnonzero(pw >= target)[0])
                    interp = _num(values[k])
                    if k > 0 and pw[k - 1] < target:
                        w = (target - pw[k - 1]) / (pw[k] - pw[k - 1])
                        interp = float(values[k - 1] + w * (values[k] - values[k - 1]))
                out.append({"kind": str(kind), "test": str(test), "target": target,
                            "reached": val is not None, "value": val,
                            "value_optimistic": first(hi >= target),
                            "value_sure": first(lo >= target), "interpolated": interp,
                            "power_at_value": None if val is None else
                            float(pw[values == val][0])})
        return out


def _num(v: Any) -> float | int:
    f = float(v)
    return int(f) if f.is_integer() else f


# ---------------------------------------------------------------------------------------
# the study's parameters, per simulated study
# ---------------------------------------------------------------------------------------


def _theta(base: Params, capability: np.ndarray, posterior: Any, setting: _Setting,
           spec: PowerSpec, cap_sd: float, value: float, rng: np.random.Generator,
           replicates: int) -> dict[str, np.ndarray]:
    """Per study r and LLM j: α, γ, δ, σ, m, each of shape (R, L)."""
    L, R = setting.n_llms, replicates
    if posterior is None:
        th = {f: np.full((R, L), float(getattr(base, f))) for f in ("alpha", "gamma", "delta",
                                                                      "sigma")}
        if spec.n_llms is None and spec.along != "n_llms":
            th["capability"] = np.broadcast_to(capability, (R, L)).copy()
        else:
            th["capability"] = rng.normal(capability.mean(), cap_sd, size=(R, L))
    else:
        pp, cap = posterior  # Params of (S, Lfit) arrays, (S, Lfit)
        s = np.arange(R) % cap.shape[0]
        if spec.n_llms is None and spec.along != "n_llms":
            th = {f: np.asarray(getattr(pp, f))[s] for f in ("alpha", "gamma", "delta",
                                                               "sigma")}
            th["capability"] = cap[s]
        else:
            th = {f: np.repeat(np.asarray(getattr(pp, f))[s].mean(1, keepdims=True), L, 1)
                  for f in ("alpha", "gamma", "delta", "sigma")}
            th["capability"] = rng.normal(cap[s].mean(1, keepdims=True),
                                          cap[s].std(1, ddof=1, keepdims=True) if
                                          cap.shape[1] > 1 else cap_sd, size=(R, L))
    if spec.along in ("alpha", "gamma", "delta", "sigma"):
        th[spec.along] = np.full((R, L), float(value))
    return th


def _setting(spec: PowerSpec, design: Design, value: float, n_fit_llms: int | None
             ) -> _Setting:
    n = int(design.n_per_cell.flat[0])
    items = spec.items_per_cell
    n_llms = spec.n_llms or (n_fit_llms if n_fit_llms is not None else len(design.capability))
    if spec.along == "questions_per_cell":
        n = int(value)
    elif spec.along == "items_per_cell":
        items = int(value)
    elif spec.along == "n_llms":
        n_llms = int(value)
    if items is not None and items > n:
        raise ValueError(f"items_per_cell ({items}) must not exceed questions_per_cell ({n}): "
                         "every item (story) needs at least one question")
    return _Setting(n=n, items=None if items == n else items, n_llms=n_llms)


def _check_design(tests: Sequence[_Test], design: Design, settings: Sequence[_Setting]) -> None:
    n_c, n_t = design.shape
    if not design.balanced:
        raise ValueError("power needs a balanced design (questions_per_cell a single number); "
                         "unbalanced designs are not supported yet")
    for t in tests:
        if n_c < 2 or n_t < 2:
            raise ValueError(f"test {t.name!r} needs at least 2 context lengths and 2 ToM orders "
                             f"in the design, got {n_c} × {n_t}")
        if t.analysis == "anova" and min(s.n for s in settings) < 2:
            raise ValueError(f"test {t.name!r}: questions_per_cell must be >= 2 (one question a "
                             "cell leaves the ANOVA no residual degrees of freedom)")
        if t.analysis == "rm-anova" and min(s.n_llms for s in settings) < 2:
            raise ValueError(f"test {t.name!r} has the LLMs as subjects: it needs at least 2 "
                             f"LLMs, got {min(s.n_llms for s in settings)} (set n_llms or more "
                             "capability levels)")
        if t.analysis == "glmm" and min(s.n_llms for s in settings) < 2:
            raise ValueError(f"test {t.name!r} fits (1 | llm): it needs at least 2 LLMs, got "
                             f"{min(s.n_llms for s in settings)} (set n_llms or more capability "
                             "levels)")


def _load_posterior(posterior: Any, draws: int) -> tuple[Any, dict[str, Any]]:
    from tomstats.posterior_sweep import posterior_draws

    name = str(posterior) if isinstance(posterior, str | os.PathLike) else "posterior"
    if isinstance(posterior, str | os.PathLike):
        p = Path(posterior)
        if not p.is_file():
            raise FileNotFoundError(f"posterior: file {str(p)!r} does not exist")
        from tomstats.glmm import load_fit

        try:
            posterior = load_fit(p)
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"posterior: {str(p)!r} is not a tomstats fit ({exc})") from exc
    pdraws = posterior_draws(posterior, draws=draws, name=name)
    return pdraws, {"file": name, **pdraws.source, "llm": pdraws.llm,
                    "draws_used": pdraws.n_draws, "draws_available": pdraws.n_available}


# ---------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------


def _as_study(study: Any, params: Params | None) -> StudyConfig:
    if isinstance(study, StudyConfig):
        cfg = study
    elif isinstance(study, str | os.PathLike):
        cfg = load_study(study)
    elif isinstance(study, Design):
        cfg = StudyConfig(design=study)
    else:
        raise TypeError(f"study must be a StudyConfig, a Design or a simulation TOML path, got "
                        f"{type(study).__name__}")
    if params is not None:
        if not isinstance(params, Params):
            raise TypeError(f"params must be a tomstats.Params, got {type(params).__name__}")
        cfg = StudyConfig(**{**{k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                             "params": params.validate()})
    return cfg


def power(
    study: StudyConfig | Design | str | os.PathLike[str] = None,  # type: ignore[assignment]
    params: Params | None = None,
    *,
    along: Mapping[str, Sequence[float]] | None = None,
    by: Mapping[str, Sequence[float]] | None = None,
    tests: Sequence[str] | str | None = None,
    alpha: float | None = None,
    replicates: int | None = None,
    seed: int | None = None,
    target: float | None = None,
    items_per_cell: int | None = None,
    n_llms: int | None = None,
    questions_per_cell: int | None = None,
    capability_sd: float | None = None,
    path: str | None = None,
    correction: str | None = None,
    posterior: Any = None,
    draws: int = 200,
    allow_failures: bool = False,
    keep_data: bool = False,
    progress: bool | None = None,
    allow_large: bool = False,
) -> PowerResult:
    """Power (and assurance) of the planned tests along one design dimension or parameter.

    See the module docstring for the simulated data, the tests and the formulas.

    Parameters
    ----------
    study : StudyConfig, Design or path to a simulation TOML, optional
        The design (context × ToM levels, questions per cell, capability levels = LLMs),
        the parameters and the ``[power]`` settings (default: the paper's study).
    params : Params, optional
        Parameters of equation (1) (default: the study's).
    along : mapping, optional
        ``{dimension: values}``, one dimension of :data:`tomstats.study.ALONG`, e.g.
        ``{"questions_per_cell": [20, 50, 100, 200, 500]}`` or ``{"delta": [0, 1e-4]}``.
    by : mapping, optional
        A second dimension, ``{dimension: values}`` (not ``along``'s): the curve is repeated
        at each value, e.g. ``{"n_llms": [3, 5, 8]}`` for the questions per cell needed with
        3, 5 or 8 LLMs. The result gains the dimension ``by_value``; each curve is exactly
        the one a run with that setting and the same seed gives.
    tests : sequence of str, optional
        Tests from :data:`TESTS` (default: the study's ``[power]`` tests).
    alpha : float, optional
        Significance level (default 0.05).
    replicates : int, optional
        Simulated studies per value (default 1000).
    seed : int, optional
        The same seed gives the same curve.
    target : float, optional
        Target power for :meth:`PowerResult.targets` (default 0.8).
    items_per_cell, n_llms, capability_sd, path, correction
        See :class:`tomstats.study.PowerSpec`.
    questions_per_cell : int, optional
        Questions per cell and LLM of every simulated study (default: the design's), when
        ``along`` varies something else.
    posterior : path or InferenceData, optional
        A structural fit: adds the assurance (``kind="assurance"``) beside the plug-in power
        at the posterior means.
    draws : int
        Posterior draws used (thinned evenly).
    allow_failures : bool
        Report power among the valid fits even when more than 1 % of fits fail.
    keep_data : bool
        Also keep every simulated study's cell counts (``successes`` over ``kind, value,
        replicate, llm_index, context_length, tom_order``) and every fit's decision
        (``reject``, ``valid`` over ``kind, value, test, replicate, llm_index``; pooled GLMM
        tests repeat theirs over ``llm_index``). Not with ``along="n_llms"``.
    progress : bool, optional
        Progress bar (default: on a terminal).
    allow_large : bool
        Skip the size guard (:func:`power_footprint`), which otherwise refuses a run needing
        more memory than is available or more than a day, before any simulation.

    Returns
    -------
    PowerResult

    Raises
    ------
    ValueError
        Bad input (naming the argument and value), before any simulation.
    PowerFailureError
        More than 1 % of the fits of a test failed at some value (and not
        ``allow_failures``).

    Examples
    --------
    >>> import tomstats
    >>> res = tomstats.power(along={"questions_per_cell": [10, 40]},
    ...                      tests=["anova:tom_order"], replicates=200, progress=False)
    >>> res.frame()[["value", "power"]].shape
    (2, 2)
    """
    cfg = _as_study(study if study is not None else StudyConfig(), params)
    changes: dict[str, Any] = dict(tests=tests, alpha=alpha, replicates=replicates, seed=seed,
                                   target=target, items_per_cell=items_per_cell, n_llms=n_llms,
                                   capability_sd=capability_sd, path=path,
                                   correction=correction)
    for key, values_key, given in (("along", "values", along), ("by", "by_values", by)):
        if given is None:
            continue
        if not isinstance(given, Mapping) or len(given) != 1:
            raise ValueError(f"{key} must be a mapping with exactly one dimension, e.g. "
                             f"{{'questions_per_cell': [20, 50, 100]}}, got {given!r}")
        (name, values), = given.items()
        if name not in ALONG:
            raise ValueError(f"{key}: unknown dimension {name!r}"
                             + closest_hint(str(name), ALONG))
        changes.update({key: name,
                        values_key: tuple(np.atleast_1d(np.asarray(values)).tolist())})
    spec = cfg.power.replace(**changes)
    if questions_per_cell is not None:
        if isinstance(questions_per_cell, bool) or not isinstance(
                questions_per_cell, int | np.integer) or questions_per_cell < 1:
            raise ValueError("questions_per_cell must be a whole number >= 1, got "
                             f"{questions_per_cell!r}")
        if "questions_per_cell" in (spec.along, spec.by):
            raise ValueError("questions_per_cell: it is a dimension `along` or `by` varies; "
                             "give its values there")
        cfg = dataclasses.replace(cfg, design=cfg.design.with_(
            n_per_cell=int(questions_per_cell)))
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    if keep_data and "n_llms" in (spec.along, spec.by):
        raise ValueError("keep_data=True needs the same number of LLMs at every value; it "
                         "cannot be used when along or by is 'n_llms'")
    pdraws, source = (None, None)
    if posterior is not None:
        pdraws, source = _load_posterior(posterior, draws)
    plans = [_plan(c, s_, pdraws, fixed) for c, s_, fixed in _variants(cfg, spec)]
    if spec.by is not None:  # name the curve on its progress bar
        plans = [dataclasses.replace(p, label=f"power {spec.by}={_num(v)} ({i + 1}/{len(plans)})")
                 for i, (p, v) in enumerate(zip(plans, spec.by_values, strict=True))]
    check_footprint(sum((p.footprint for p in plans[1:]), plans[0].footprint),
                    allow_large=allow_large)
    results = [_execute(p, source, allow_failures, keep_data, progress) for p in plans]
    if spec.by is None:
        return PowerResult(results[0])
    ds = xr.concat(results, dim=pd.Index(list(spec.by_values), name="by_value"),
                   combine_attrs="override")
    # the settings of the whole run, not of its first curve
    ds.attrs.update(by=spec.by, by_values=json.dumps([_num(v) for v in spec.by_values]),
                    items_per_cell=json.dumps(spec.items_per_cell),
                    n_llms=json.dumps(spec.n_llms), params=json.dumps(cfg.params.to_dict()),
                    design=json.dumps(cfg.design.to_dict()),
                    seconds=float(sum(r.attrs["seconds"] for r in results)))
    if spec.by in ("items_per_cell", "n_llms"):
        ds.attrs[spec.by] = json.dumps(None)
    return PowerResult(ds)


@dataclass(frozen=True)
class _Plan:
    """Everything one curve along ``spec.along`` needs, checked before any simulation."""

    cfg: StudyConfig
    spec: PowerSpec
    tests: tuple[_Test, ...]
    settings: tuple[_Setting, ...]
    kinds: tuple[tuple[str, Any], ...]
    capability: np.ndarray
    cap_sd: float
    fixed: Mapping[str, float]
    pdraws: Any
    footprint: Footprint
    label: str = "power"


def _variants(cfg: StudyConfig, spec: PowerSpec
              ) -> list[tuple[StudyConfig, PowerSpec, dict[str, float]]]:
    """One (study, spec, fixed parameters) per value of ``spec.by`` (the pair itself without
    ``by``): the curve at that value is what a run with that setting and the same seed gives.
    A parameter set by ``by`` is also fixed over posterior draws (as ``along`` does)."""
    if spec.by is None:
        return [(cfg, spec, {})]
    out = []
    for v in spec.by_values:
        c, s_, fixed = cfg, dataclasses.replace(spec, by=None, by_values=()), {}
        if spec.by == "questions_per_cell":
            c = dataclasses.replace(cfg, design=cfg.design.with_(n_per_cell=int(v)))
        elif spec.by in ("items_per_cell", "n_llms"):
            s_ = dataclasses.replace(s_, **{spec.by: int(v)})
        else:
            c = dataclasses.replace(cfg, params=cfg.params.replace(**{spec.by: float(v)}))
            fixed = {spec.by: float(v)}
        out.append((c, s_, fixed))
    return out


def _plan(cfg: StudyConfig, spec: PowerSpec, pdraws: Any, fixed: Mapping[str, float]
          ) -> _Plan:
    """Check one curve's design and tests and estimate its size (no simulation)."""
    parsed = tuple(_parse_test(t) for t in spec.tests)
    design = cfg.design
    capability = np.asarray(design.capability, dtype=float)
    cap_sd = spec.capability_sd if spec.capability_sd is not None else (
        float(np.std(capability, ddof=1)) if capability.size > 1 else 0.15)
    n_fit = None if pdraws is None else len(pdraws.llm)
    settings = tuple(_setting(spec, design, v, n_fit) for v in spec.values)
    _check_design(parsed, design, settings)
    kinds: list[tuple[str, Any]] = [("plug-in", None)]
    if pdraws is not None:
        mean = Params(*(np.asarray(getattr(pdraws.params, f)).mean(0) for f in
                        ("alpha", "gamma", "delta", "sigma")))
        kinds = [("plug-in", (Params(*(np.asarray(getattr(mean, f))[None] for f in
                                       ("alpha", "gamma", "delta", "sigma"))),
                              pdraws.capability.mean(0)[None])),
                 ("assurance", (pdraws.params, pdraws.capability))]
    fp = power_footprint(spec, parsed, design, settings, len(kinds))
    return _Plan(cfg, spec, parsed, settings, tuple(kinds), capability, cap_sd, fixed, pdraws,
                 fp)


def _execute(plan: _Plan, source: Any, allow_failures: bool, keep_data: bool,
             progress: bool | None) -> xr.Dataset:
    """Simulate and analyse one planned curve; the Dataset of :class:`PowerResult`."""
    spec, design, base = plan.spec, plan.cfg.design, plan.cfg.params
    kinds = list(plan.kinds)
    t0 = time.perf_counter()
    stats = _simulate_all(spec, plan.tests, design, list(plan.settings), kinds, base,
                          plan.capability, plan.cap_sd, allow_failures, progress, plan.fixed,
                          plan.label)
    ds = _dataset(spec, plan.tests, design, list(plan.settings), kinds, stats,
                  plan.pdraws, plan.capability)
    if keep_data:
        ds = ds.merge(_kept_data(spec, plan.tests, design, kinds, stats))
    from tomstats import __version__

    ds.attrs.update(
        along=spec.along, alpha=spec.alpha, replicates=int(spec.replicates),
        seed=int(spec.seed), target=spec.target, path=spec.path, correction=spec.correction,
        tests=json.dumps(list(spec.tests)), items_per_cell=json.dumps(spec.items_per_cell),
        n_llms=json.dumps(spec.n_llms), capability_sd=plan.cap_sd,
        params=json.dumps(base.to_dict()), design=json.dumps(design.to_dict()),
        posterior=json.dumps(source, default=str), tomstats_version=__version__,
        seconds=time.perf_counter() - t0,
        equation="logit p = beta0*m - alpha*c*ln(1+c/500) - gamma*t - delta*c*t + eps",
    )
    return ds


# rough single-core costs for the size guard (about 5-10x above what a 2-CPU machine measures)
_SECONDS_PER_STUDY = {"anova": 5e-5, "glm": 5e-4, "glmm": 0.05}
_SECONDS_PER_ROW = {"anova": 3e-8, "glm": 3e-8, "glmm": 5e-6}


def power_footprint(spec: PowerSpec, tests: Sequence[Any], design: Design,
                    settings: Sequence[_Setting], n_kinds: int = 1) -> Footprint:
    r"""Memory and time of a power run, estimated before it starts.

    A study of setting :math:`s` has :math:`r_s = L_s \cdot C \cdot q_s` rows (LLMs × cells ×
    items or questions per cell; one row per cell and LLM when only the per-LLM ANOVA and GLM
    tests run on the exact path). Studies are dispatched in chunks of at most 2^21 rows (200
    studies when models are fitted), so memory is about
    :math:`160\,\max_s \max(r_s, \text{chunk rows})` bytes; time is
    :math:`R \cdot K \sum_s (a + b\, r_s)` with per-study and per-row costs :math:`a, b` of the
    slowest analysis (ANOVA, GLM or GLMM).
    """
    analyses = {t.analysis for t in tests}
    slowest = "glmm" if "glmm" in analyses else "glm" if "glm" in analyses else "anova"
    cells = design.shape[0] * design.shape[1]
    rows, seconds = 0.0, 0.0
    for st in settings:
        per_row = _per_item(st, tests) or spec.path != "exact"
        r = float(st.n_llms) * cells * (float(st.items or st.n) if per_row else 1.0)
        rows = max(rows, r)
        seconds += _SECONDS_PER_STUDY[slowest] + _SECONDS_PER_ROW[slowest] * r
    seconds *= float(spec.replicates) * n_kinds
    chunk_rows = max(rows, min(float(spec.replicates) * rows, float(_CELLS_PER_CHUNK)))
    detail = (f"{int(spec.replicates):,} studies × {len(settings)} value(s) of {spec.along}, "
              f"up to {int(rows):,} rows per study, {slowest.upper()} tests")
    return Footprint("power run", 160.0 * chunk_rows, seconds, detail)


def _kept_data(spec: PowerSpec, tests: tuple[_Test, ...], design: Design,
               kinds: list[tuple[str, Any]], stats: Mapping[Any, Any]) -> xr.Dataset:
    """Per-study counts and per-fit decisions (``keep_data=True``)."""
    K, V = len(kinds), len(spec.values)
    succ = np.stack([np.stack([stats[(k, v, "successes")] for v in range(V)])
                     for k in range(K)])
    R, L = succ.shape[2], succ.shape[3]

    def per_fit(i: int) -> np.ndarray:
        return np.stack([np.stack([np.stack([np.broadcast_to(
            np.asarray(stats[(k, v, t.name)][i]).reshape(R, -1), (R, L)) for t in tests])
            for v in range(V)]) for k in range(K)])

    dims = ("kind", "value", "test", "replicate", "llm_index")
    return xr.Dataset({
        "successes": (("kind", "value", "replicate", "llm_index", "context_length",
                       "tom_order"), succ),
        "reject": (dims, per_fit(0)), "valid": (dims, per_fit(1)),
    }, coords={"kind": [k for k, _ in kinds], "value": list(spec.values),
               "test": [t.name for t in tests], "replicate": np.arange(R),
               "llm_index": np.arange(L), "context_length": design.context,
               "tom_order": design.tom})


def _simulate_all(spec: PowerSpec, tests: tuple[_Test, ...], design: Design,
                  settings: list[_Setting], kinds: list[tuple[str, Any]], base: Params,
                  capability: np.ndarray, cap_sd: float, allow_failures: bool,
                  progress: bool | None, fixed: Mapping[str, float] | None = None,
                  desc: str = "power") -> dict[tuple[int, int, str], Any]:
    """Run every (kind, value): {(kind, value, test): (reject, ok, estimate)} and
    {(kind, value, "successes"): counts}."""
    key = make_key(int(spec.seed))
    R = int(spec.replicates)
    out: dict[tuple[int, int, str], tuple[np.ndarray, ...]] = {}
    total = R * len(settings) * len(kinds)
    disable = None if progress is None else not progress
    with tqdm(total=total, desc=desc, unit="study", disable=disable, leave=False) as bar, \
            jax.enable_x64(True):
        for ki, (_kind, post) in enumerate(kinds):
            for vi, (value, st) in enumerate(zip(spec.values, settings, strict=True)):
                rng = np.random.default_rng([int(spec.seed), ki, vi])
                th = _theta(base, capability, post, st, spec, cap_sd, value, rng, R)
                for f, v in (fixed or {}).items():  # a parameter set by `by`
                    th[f] = np.full_like(th[f], v)
                bad = {f: v for f, v in th.items() if not np.all(np.isfinite(v))}
                if bad:
                    raise ValueError(f"non-finite parameters {sorted(bad)}")
                run = _kernel(design, st, tests, spec.path)
                per_study = st.n_llms * design.shape[0] * design.shape[1] * (
                    st.items or st.n if _per_item(st, tests)
                    else 1)
                chunk = max(1, min(R, _CELLS_PER_CHUNK // max(per_study, 1)))
                if any(t.analysis not in ("anova", "rm-anova") for t in tests):
                    # model fits are data-dependent loops: XLA's CPU runtime has been seen to
                    # stall for good on very large vmapped batches of them, so keep each
                    # dispatch moderate (the cost per study is the same)
                    chunk = min(chunk, _FITS_PER_CHUNK)
                keys = jax.random.split(jax.random.fold_in(key, vi), R)
                parts = []
                for s in range(0, R, chunk):
                    # every chunk has the same size (the last one padded with repeats of its
                    # last study, dropped after), so one compiled program serves them all
                    idx = np.minimum(np.arange(s, s + chunk), R - 1)
                    th_sl = {f: jnp.asarray(v[idx], jnp.float64) for f, v in th.items()}
                    res = jax.device_get(run(keys[idx], th_sl, jnp.asarray(float(st.n))))
                    parts.append({k: v[: min(chunk, R - s)] for k, v in res.items()})
                    bar.update(min(chunk, R - s))
                stat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                out[(ki, vi, "successes")] = stat["successes"]
                for t in tests:
                    rej, ok, est = _decide(t, stat, spec.alpha, st.n, design.shape, st.n_llms,
                                           spec.correction)
                    n_fail = int((~ok).sum())
                    if n_fail > _MAX_FAIL * ok.size and not allow_failures:
                        raise PowerFailureError(
                            f"{n_fail} of {ok.size} fits of test {t.name!r} failed at "
                            f"{spec.along} = {_num(value)} ({100 * n_fail / ok.size:.1f} %, "
                            f"more than {100 * _MAX_FAIL:.0f} %): power among the others would "
                            "be biased. Failed fits are never counted as 'not significant'. "
                            "Pass allow_failures=True (--allow-failures) to report power among "
                            "the valid fits, or change the design (more questions per cell).")
                    out[(ki, vi, t.name)] = (rej, ok, est)
    return out


def _dataset(spec: PowerSpec, tests: tuple[_Test, ...], design: Design,
             settings: list[_Setting], kinds: list[tuple[str, Any]],
             stats: Mapping[tuple[int, int, str], tuple[np.ndarray, ...]], pdraws: Any,
             capability: np.ndarray) -> xr.Dataset:
    K, V, T = len(kinds), len(settings), len(tests)
    shape = (K, V, T)
    arr = {k: np.full(shape, np.nan) for k in ("power", "estimate", "n_fits", "n_failed",
                                               "n_rejected")}
    fixed = spec.n_llms is None and spec.along != "n_llms"
    llm = (list(pdraws.llm) if pdraws is not None else
           [f"m={_num(m)}" for m in capability]) if fixed else []
    by_llm = np.full(shape + (len(llm),), np.nan)
    for (ki, vi, name), val in stats.items():
        if name == "successes":
            continue
        rej, ok, est = val
        ti = [t.name for t in tests].index(name)
        n_ok = ok.sum()
        arr["n_fits"][ki, vi, ti] = ok.size
        arr["n_failed"][ki, vi, ti] = ok.size - n_ok
        arr["n_rejected"][ki, vi, ti] = rej.sum()
        arr["power"][ki, vi, ti] = rej.sum() / n_ok if n_ok else np.nan
        arr["estimate"][ki, vi, ti] = float(np.mean(est[ok])) if n_ok else np.nan
        if llm and rej.ndim == 2 and rej.shape[1] == len(llm):
            with np.errstate(invalid="ignore"):
                by_llm[ki, vi, ti] = rej.sum(0) / ok.sum(0)
    lo, hi = wilson_interval(arr["n_rejected"], arr["n_fits"] - arr["n_failed"])
    dims = ("kind", "value", "test")
    data = {k: (dims, v) for k, v in arr.items()}
    data.update(ci_low=(dims, lo), ci_high=(dims, hi))
    coords: dict[str, Any] = {"kind": [k for k, _ in kinds], "value": list(spec.values),
                              "test": [t.name for t in tests]}
    if llm:
        data["power_by_llm"] = (dims + ("llm",), by_llm)
        coords["llm"] = llm
    ds = xr.Dataset(data, coords=coords)
    ds["questions_per_cell"] = ("value", [s.n for s in settings])
    ds["items_per_cell"] = ("value", [s.items or s.n for s in settings])
    ds["n_llms"] = ("value", [s.n_llms for s in settings])
    return ds


# ---------------------------------------------------------------------------------------
# files and command line
# ---------------------------------------------------------------------------------------


def write_power(result: PowerResult, out: str | os.PathLike[str], *,
                figure: bool = True) -> list[Path]:
    """Write ``power.csv``, ``power.nc``, ``summary.json`` and ``power.png`` into ``out``.

    Everything is staged in a temporary folder inside ``out`` and moved in file by file, so
    ``out`` never holds a half-written file.
    """
    out = ensure_writable_dir(out)
    with staged_files(out) as staged:
        stage = staged.stage
        result.frame().to_csv(stage / "power.csv", index=False)
        result.data.to_netcdf(stage / "power.nc", engine="h5netcdf")
        attrs = {k: (json.loads(v) if k in ("tests", "items_per_cell", "n_llms", "by_values",
                                            "params", "design", "posterior") else v)
                 for k, v in result.data.attrs.items()}
        summary = {"settings": _jsonable(attrs), "targets": result.targets(),
                   "power": _jsonable(result.frame().to_dict(orient="records"))}
        (stage / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        if figure:
            from tomstats.figures import fig_power, save_figure

            save_figure(fig_power(result.frame(), float(result.data.attrs["target"])),
                        stage / "power.png")
    return staged.written


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def format_power(result: PowerResult) -> str:
    """A short text table: power (95 % MC interval) per value and test, then the targets."""
    df = result.frame()
    lines = []
    keys = ["kind"] if result.by is None else ["kind", "by_value"]
    for key, sub in df.groupby(keys, sort=False):
        kind, *rest = key if isinstance(key, tuple) else (key,)
        at = f" at {result.by} = {_num(rest[0])}" if rest else ""
        lines.append(f"{kind} power{at}, {result.along} (rows) × test (columns):")
        tab = sub.pivot(index="value", columns="test", values="power")[
            list(dict.fromkeys(sub["test"]))]
        lo = sub.pivot(index="value", columns="test", values="ci_low")
        hi = sub.pivot(index="value", columns="test", values="ci_high")
        width = max(22, *(len(c) + 2 for c in tab.columns))
        lines.append(f"{'':>10}" + "".join(f"{c:>{width}}" for c in tab.columns))
        for v in tab.index:
            cells = "".join(
                f"{f'{tab.loc[v, c]:.3f} [{lo.loc[v, c]:.2f}, {hi.loc[v, c]:.2f}]':>{width}}"
                for c in tab.columns)
            lines.append(f"{_num(v):>10}" + cells)
    for t in result.targets():
        at = f" ({t['by']} = {t['by_value']})" if "by" in t else ""
        if t["reached"]:
            lines.append(f"{t['kind']}{at}: {t['test']} reaches {t['target']:.0%} power at "
                         f"{result.along} = {t['value']} (MC range {t['value_optimistic']}"
                         f"–{t['value_sure'] if t['value_sure'] is not None else '>max'})")
        else:
            lines.append(f"{t['kind']}{at}: {t['test']} does not reach {t['target']:.0%} "
                         f"power within the values tried")
    return "\n".join(lines)


def _parse_along(text: str, flag: str = "--along") -> dict[str, list[float]]:
    if "=" not in text:
        raise ValueError(f"{flag}: expected NAME=V1,V2,..., got {text!r}")
    name, vals = text.split("=", 1)
    try:
        values = [float(v) for v in vals.split(",") if v.strip()]
    except ValueError as exc:
        raise ValueError(f"{flag} {name}: values must be numbers, got {vals!r}") from exc
    return {name.strip(): values}


def add_power_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats power``."""
    p.add_argument("config", help="simulation TOML (e.g. simulations/power.toml); its [power] "
                                  "table gives the defaults of the options below")
    add_out_arguments(p, folder=True, what="output folder", size_guard=True)
    p.add_argument("--along", default=None, metavar="NAME=V1,V2,...",
                   help=f"dimension and values to vary, NAME one of {', '.join(ALONG)}")
    p.add_argument("--by", default=None, metavar="NAME=V1,V2,...",
                   help="a second dimension: the curve along --along is repeated at each "
                        "value, e.g. --along questions_per_cell=10,20,50 --by n_llms=3,5,8")
    p.add_argument("--test", action="append", default=None, metavar="TEST",
                   help=f"test to run (repeatable): {', '.join(TESTS)}")
    p.add_argument("--replicates", type=int, default=None, help="simulated studies per value")
    p.add_argument("--alpha", type=float, default=None, help="significance level")
    p.add_argument("--target", type=float, default=None, help="target power (default 0.8)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--questions-per-cell", type=int, default=None, metavar="N",
                   help="questions per cell and LLM when --along varies something else "
                        "(default: the TOML's questions_per_cell)")
    p.add_argument("--items-per-cell", type=int, default=None,
                   help="stories per cell (default: one per question)")
    p.add_argument("--n-llms", type=int, default=None,
                   help="LLMs with capabilities drawn from N(mean, capability_sd)")
    p.add_argument("--path", default=None, help="'exact' (default) or 'bernoulli'")
    p.add_argument("--correction", default=None, choices=("GG", "HF", "none"),
                   help="sphericity correction of the rm-anova tests (default GG, as afex)")
    p.add_argument("--posterior", default=None,
                   help="structural GLMM fit (netCDF): report assurance beside plug-in power")
    p.add_argument("--draws", type=int, default=200, help="posterior draws used (default 200)")
    p.add_argument("--allow-failures", action="store_true",
                   help="report power among valid fits even when more than 1 %% fail")
    p.add_argument("--no-figure", action="store_true", help="skip power.png")
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")


def run_power(args: argparse.Namespace) -> int:
    """``tomstats power``: a power curve from a simulation TOML (nothing is written when the
    input is refused or the run fails)."""
    if (Path(args.out) / "table1.csv").is_file():
        raise ValueError(f"--out: {args.out!r} holds a simulation run (table1.csv, "
                         "summary.json); write the power run into another folder, e.g. "
                         f"{str(Path(args.out) / 'power')!r}, where `tomstats report "
                         "--simulation` finds it")
    prepare_out_dir(args.out, force=args.force)
    cfg = load_study(args.config)
    result = power(cfg, along=_parse_along(args.along) if args.along else None,
                   by=_parse_along(args.by, "--by") if args.by else None,
                   tests=args.test, alpha=args.alpha, replicates=args.replicates,
                   seed=args.seed, target=args.target, items_per_cell=args.items_per_cell,
                   n_llms=args.n_llms, questions_per_cell=args.questions_per_cell,
                   path=args.path, correction=args.correction, posterior=args.posterior,
                   draws=args.draws, allow_failures=args.allow_failures,
                   progress=False if args.quiet else None, allow_large=args.allow_large)
    with replaced_dir(args.out) as tmp:
        files = write_power(result, tmp, figure=not args.no_figure)
    if not args.quiet:
        print(format_power(result))
        print(f"wrote {len(files)} files to {args.out} "
              f"({result.data.attrs['seconds']:.1f} s)")
    return 0
