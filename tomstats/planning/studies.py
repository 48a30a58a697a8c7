"""Compiled programs that simulate a batch of studies of one size and analyse each.

One program per design and study size (:class:`StudySize`): it draws every study's counts with
the simulator of equation (1) (story by story when a test pools the LLMs or the stories are
set, :func:`tomstats.simulation.simulator.item_counts`), fits the GLMM tests inside the
program, then runs the count analyses (ANOVA, repeated-measures ANOVA, GLM) of
:mod:`tomstats.planning.analyses` as a second program compiled once for every size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tomstats.design import CONTEXT, TOM, Design, Factor
from tomstats.model import Params, cell_probabilities
from tomstats.planning.analyses import (
    PlannedTest,
    design_matrices,
    glm_stats,
    glmm_stats,
    rm_anova_stats,
    rm_contrasts,
)
from tomstats.simulation.count_anova import anova_from_counts
from tomstats.simulation.simulator import bernoulli_counts, item_counts, item_trials

__all__ = ["CELLS_PER_CHUNK", "FITS_PER_CHUNK", "StudySize", "per_item", "study_program"]


CELLS_PER_CHUNK = 2**21  # simulated (LLM × item) counts held per compiled call


FITS_PER_CHUNK = 200  # simulated studies per compiled call when the tests fit models


@dataclass(frozen=True)
class StudySize:
    """The sizes of one simulated study."""

    n: int  # questions per cell and LLM
    items: int | None  # items per cell (None: one per question)
    n_llms: int
    within_story: bool = False  # length ladders: a story keeps its effect at every length


#: Analyses that pool the LLMs: their data simulate every story, shared by all LLMs (as in a
#: real multi-LLM study, where every LLM answers the same questions).
POOLED = ("rm-anova", "glmm")


def per_item(setting: StudySize, tests: Sequence[PlannedTest]) -> bool:
    """Whether a study is simulated story by story
    (:func:`tomstats.simulation.simulator.item_counts`)."""
    return (setting.items is not None or setting.within_story
            or any(t.analysis in POOLED for t in tests))


def study_program(design: Design, setting: StudySize, tests: tuple[PlannedTest, ...],
            path: str) -> Callable[..., dict[str, jax.Array]]:
    """``(keys, theta, n) -> statistics`` of one study per key (compiled, cached by shape).

    On the exact path without items the questions per cell are an argument, so one program
    serves every value of ``questions_per_cell``.
    """
    if path == "exact" and not per_item(setting, tests):
        setting = StudySize(n=0, items=None, n_llms=setting.n_llms)
    return _compiled(design.context.tobytes(), design.tom.tobytes(), setting, tests, path)


@lru_cache(maxsize=32)
def _compiled(ctx_b: bytes, tom_b: bytes, setting: StudySize, tests: tuple[PlannedTest, ...],
              path: str) -> Callable[..., dict[str, jax.Array]]:
    """The simulation (and GLMM fits) of one study size, then the count analyses.

    The count analyses (ANOVA, repeated-measures ANOVA, GLM) are a separate program of the
    cell counts and the questions per cell, so it is compiled once for every size.
    """
    ctx = np.frombuffer(ctx_b)
    tom = np.frombuffer(tom_b)
    n_c, n_t = ctx.size, tom.size
    x, _ = _matrices(ctx, tom)
    by_item = per_item(setting, tests)
    trials = item_trials(setting.n, setting.items or setting.n) if by_item else None
    glmm = tuple(t for t in tests if t.analysis == "glmm")

    def one(key: jax.Array, th: Mapping[str, jax.Array], n: jax.Array) -> dict[str, jax.Array]:
        params = Params(th["alpha"], th["gamma"], th["delta"], th["sigma"][0])
        dtype = th["capability"].dtype
        out: dict[str, jax.Array] = {}
        if by_item:
            k_items = item_counts(key, params, jnp.asarray(ctx, dtype), jnp.asarray(tom, dtype),
                                  th["capability"], trials,
                                  within_story=setting.within_story)
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
            out.update(glmm_stats(glmm, x, k_items, trials,
                                  within_story=setting.within_story))
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
def _count_analyses(ctx_b: bytes, tom_b: bytes, tests: tuple[PlannedTest, ...]
                    ) -> Callable[..., dict[str, jax.Array]]:
    """``(counts (R, L, C, T), n) -> statistics`` of the ANOVA, RM-ANOVA and GLM tests."""
    ctx = np.frombuffer(ctx_b)
    tom = np.frombuffer(tom_b)
    n_c, n_t = ctx.size, tom.size
    x, add = _matrices(ctx, tom)
    rm = rm_contrasts(n_c, n_t)
    analyses = {t.analysis for t in tests}
    glm = [t for t in tests if t.analysis == "glm"]

    def one(counts: jax.Array, n: jax.Array) -> dict[str, jax.Array]:
        out: dict[str, jax.Array] = {}
        if "anova" in analyses:
            tab = anova_from_counts(counts, n, balanced=True, p_values=False, check=False)
            out["anova_F"] = tab.F[..., :3]
            out["anova_peta"] = tab.partial_eta2[..., :3]
        if "rm-anova" in analyses:
            out.update(rm_anova_stats(counts / n, rm))
        if glm:
            out.update(glm_stats(glm, x, add, counts.reshape(counts.shape[0], n_c * n_t), n))
        return out

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _matrices(ctx: np.ndarray, tom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = Design((Factor(CONTEXT, tuple(ctx)), Factor(TOM, tuple(tom))), 1, (1.0,))
    return design_matrices(d)
