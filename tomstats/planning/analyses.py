r"""The planned analyses of a simulated study: test statistics, compiled, and decisions.

**The tests** (``tests``; each a string ``"<analysis>:<term>"``):

``anova:tom_order``, ``anova:context_length``, ``anova:interaction``
    The paper's two-way ANOVA (type II SS,
    :func:`tomstats.simulation.count_anova.anova_from_counts`) of one LLM's binary answers:
    reject when :math:`F > F_{1-a}(df_X, N - CT)`. Run on every LLM; power is the rejection
    rate over LLMs and studies (``power_by_llm`` per LLM). Estimate: partial :math:`\eta^2`.
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
    ``aov_car`` and :func:`tomstats.analysis.row_anova.anova` with ``within=``); with fewer
    LLMs than :math:`d_E + 1` the error matrix is singular, no correction can be estimated and the
    uncorrected F test is used, as the analysis reports only it. ``correction="HF"`` uses
    the Huynh–Feldt :math:`\min(1, \tilde\varepsilon)` instead, ``"none"`` the uncorrected
    test. One test per study; it
    needs at least 2 LLMs. Estimate: partial :math:`\eta^2 = SS_E/(SS_E + SS_{E\times
    S})`. The stories are fixed in this analysis: when they carry effects shared by all
    LLMs (:math:`\sigma > 0`), a cell's stories shift every LLM's accuracy alike and the
    test's type I error grows with the number of LLMs and falls with the number of stories
    (the "language-as-fixed-effect fallacy"); the GLMM tests, with ``(1 | item)``, do not.
    Like the GLMM tests, it is run on studies simulated story by story, every story answered
    by every LLM (:func:`tomstats.simulation.simulator.item_counts`; one question per story unless
    ``items_per_cell`` is given).
``glm-wald:<p>``, ``glm-lrt:<p>`` with :math:`p\in\{\alpha,\gamma,\delta\}`
    Logistic regression of one LLM's answers on equation (1)'s predictors,
    :math:`\operatorname{logit} P = b_0 + b_1 c\ln(1+c/500) + b_2 t + b_3 c t`, fitted by
    Newton's method (:func:`tomstats.glmm.glm.logistic_fit`) on the cell counts (identical to the
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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from tomstats._validate import closest_hint
from tomstats.analysis.row_anova import huynh_feldt, orthonormal_contrasts
from tomstats.design import Design
from tomstats.model import context_load

__all__ = ["ANOVA_TERMS", "TESTS", "PlannedTest", "decide", "parse_test"]


ANOVA_TERMS = ("context_length", "tom_order", "interaction")  # order of anova_from_counts


COEF = {"alpha": 1, "gamma": 2, "delta": 3}


#: Column scales of the logistic design (context terms in thousands of words).
SCALE = np.array([1.0, 1e-3, 1.0, 1e-3])


#: Every test :func:`power` knows.
TESTS: tuple[str, ...] = (
    *(f"anova:{t}" for t in ("tom_order", "context_length", "interaction")),
    *(f"rm-anova:{t}" for t in ("tom_order", "context_length", "interaction")),
    *(f"glm-{m}:{p}" for m in ("wald", "lrt") for p in COEF),
    "glm-lrt:interaction",
    *(f"glmm-{m}:{p}" for m in ("wald", "lrt") for p in COEF),
)


@dataclass(frozen=True)
class PlannedTest:
    name: str
    analysis: str  # anova | rm-anova | glm | glmm
    method: str  # F | wald | lrt
    term: str


def parse_test(name: str) -> PlannedTest:
    if not isinstance(name, str) or name not in TESTS:
        raise ValueError(f"tests: unknown test {name!r}{closest_hint(str(name), TESTS)}")
    head, term = name.split(":")
    if head in ("anova", "rm-anova"):
        return PlannedTest(name, head, "F", term)
    analysis, method = head.split("-")
    return PlannedTest(name, analysis, method, term)


def design_matrices(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Equation (1)'s predictors per cell (C·T, 4) and the additive factor design."""
    c, t = np.meshgrid(design.context, design.tom, indexing="ij")
    c, t = c.ravel(), t.ravel()
    x = np.column_stack([np.ones_like(c), np.asarray(context_load(c)), t, c * t]) * SCALE
    n_c, n_t = design.shape
    ci, ti = np.meshgrid(np.arange(n_c), np.arange(n_t), indexing="ij")
    add = np.column_stack([np.ones(c.size)]
                          + [(ci.ravel() == i).astype(float) for i in range(1, n_c)]
                          + [(ti.ravel() == j).astype(float) for j in range(1, n_t)])
    return x, add


def glm_stats(tests: Sequence[PlannedTest], x: np.ndarray, add: np.ndarray, y: jax.Array,
               n: jax.Array) -> dict[str, jax.Array]:
    """Per-LLM logistic fits of the cell counts ``y`` (L, C·T) with trials ``n``."""
    from tomstats.glmm.glm import logistic_fit, saturated_loglik

    out: dict[str, jax.Array] = {}
    x = jnp.asarray(x, dtype=y.dtype)
    full = jax.vmap(lambda yy: logistic_fit(x, yy, n))(y)
    out.update(glm_beta=full.beta, glm_se=full.se, glm_ok=full.converged)
    for term in sorted({t.term for t in tests if t.method == "lrt" and t.term in COEF}):
        keep = [i for i in range(x.shape[1]) if i != COEF[term]]
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


def capped_huynh_feldt(gg: np.ndarray, d: int, dfe: int) -> np.ndarray:
    r"""Huynh–Feldt :math:`\min(1, \tilde\varepsilon)`
    (:func:`tomstats.analysis.row_anova.huynh_feldt`) of an effect with :math:`d` df and
    :math:`\nu` error df per contrast; 1 where :math:`\tilde\varepsilon` is negative."""
    hf = huynh_feldt(gg, d, dfe)
    return np.minimum(1.0, np.where(np.isnan(gg) | (hf >= 0), hf, np.inf))


def rm_contrasts(n_c: int, n_t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthonormal contrasts of context, order and their interaction over the cells (c, t)
    flattened in C order, in the order of ``ANOVA_TERMS``."""
    hc, ht = orthonormal_contrasts(n_c), orthonormal_contrasts(n_t)
    mean_c, mean_t = np.full((n_c, 1), n_c ** -0.5), np.full((n_t, 1), n_t ** -0.5)
    return np.kron(hc, mean_t), np.kron(mean_c, ht), np.kron(hc, ht)


def rm_anova_stats(acc: jax.Array, contrasts: Sequence[np.ndarray]) -> dict[str, jax.Array]:
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


def glmm_stats(tests: Sequence[PlannedTest], x: np.ndarray, k_items: jax.Array,
                trials: np.ndarray, *, within_story: bool = False) -> dict[str, jax.Array]:
    """Crossed-intercept GLMM (1 | llm) + (1 | item) of one study's item counts (L,C,T,I).

    With ``within_story`` an item is a story of a length ladder, one level of ``item`` for
    all its lengths (:math:`T I` levels); otherwise each (length, order, story) is a level of
    its own (:math:`C T I`)."""
    from tomstats.glmm.laplace import laplace_fit

    n_l, n_c, n_t, n_i = k_items.shape
    xr_ = np.repeat(x, n_i, axis=0)  # rows of one LLM: (cell, item)
    X = jnp.asarray(np.tile(xr_, (n_l, 1)), dtype=k_items.dtype)
    cell_item = np.arange(n_c * n_t * n_i)
    if within_story:  # row (c, t, i) belongs to story (t, i)
        cell_item = cell_item % (n_t * n_i)
    item = np.tile(cell_item, n_l)
    llm = np.repeat(np.arange(n_l), n_c * n_t * n_i)
    groups = jnp.asarray(np.column_stack([item, llm]))
    levels = (int(cell_item.max()) + 1, n_l)
    tr = jnp.asarray(np.tile(trials, n_l * n_c * n_t), dtype=k_items.dtype)
    y = k_items.reshape(-1)
    full = laplace_fit(X, y, tr, groups, levels)
    out = {"glmm_beta": full.beta, "glmm_se": full.se,
           "glmm_ok": full.converged & jnp.all(jnp.isfinite(full.se))}
    for term in sorted({t.term for t in tests if t.method == "lrt"}):
        keep = [i for i in range(x.shape[1]) if i != COEF[term]]
        red = laplace_fit(X[:, keep], y, tr, groups, levels)
        out[f"glmm_lrt_{term}"] = 2.0 * (full.loglik - red.loglik)
        out[f"glmm_lrt_{term}_ok"] = full.converged & red.converged
    return out


def decide(test: PlannedTest, st: Mapping[str, np.ndarray], alpha: float, n: int,
            cells: tuple[int, int], n_llms: int, correction: str = "GG"
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reject, ok, estimate) arrays for one test; shape (R, L) or (R,)."""
    n_c, n_t = cells
    if test.analysis == "rm-anova":
        j = ANOVA_TERMS.index(test.term)
        d = (n_c - 1, n_t - 1, (n_c - 1) * (n_t - 1))[j]
        f, eps = st["rm_F"][..., j], st["rm_eps"][..., j]
        if n_llms - 1 < d or correction == "none":
            # too few LLMs to estimate ε: the uncorrected test, as anova() reports
            eps = np.ones_like(f)
        elif correction == "HF":
            eps = capped_huynh_feldt(eps, d, n_llms - 1)
        ok = np.isfinite(f) & np.isfinite(eps)
        with np.errstate(invalid="ignore"):
            p = scipy.stats.f.sf(f, eps * d, eps * d * (n_llms - 1))
        return ok & (p < alpha), ok, st["rm_peta"][..., j]
    if test.analysis == "anova":
        j = ANOVA_TERMS.index(test.term)
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
    i = COEF[test.term]
    est = -st[f"{pre}_beta"][..., i] * SCALE[i]
    if test.method == "wald":
        z = st[f"{pre}_beta"][..., i] / st[f"{pre}_se"][..., i]
        ok = st[f"{pre}_ok"] & np.isfinite(z)
        return ok & (np.abs(z) > scipy.stats.norm.isf(alpha / 2)), ok, est
    stat = st[f"{pre}_lrt_{test.term}"]
    ok = st[f"{pre}_lrt_{test.term}_ok"] & np.isfinite(stat)
    return ok & (stat > scipy.stats.chi2.isf(alpha, 1)), ok, est
