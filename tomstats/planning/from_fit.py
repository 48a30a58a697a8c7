r"""Power for the model a user fitted: simulate from a Laplace fit and refit (simr's
``powerSim``, ``powerCurve`` and ``extend`` for a ``glmer`` fit).

Each simulated study keeps the fit's design (its rows, predictors, grouping levels and
trials), possibly extended, and draws new random effects and outcomes from the fitted
model, with fixed effects optionally set by the user (``set_effects``, e.g. the smallest
effect of interest):

.. math::

    b_{k,j} = T_k u_{k,j},\quad u_{k,j} \sim N(0, I_{d_k}),\qquad
    y_i \sim \operatorname{Binomial}\Bigl(n_i,\ \operatorname{logit}^{-1}\bigl(x_i^\top\beta
        + \textstyle\sum_k z_{ik}^\top b_{k,g_k(i)}\bigr)\Bigr),

with :math:`T_k` the fitted relative covariance factors (:math:`\Sigma_k = T_kT_k^\top`).
Every study is refitted (the same formula, Laplace, :func:`tomstats.glmm.lme_fit.lme_fit_arrays`
with ``sequential=True``: one compiled program fits a chunk of studies one after another) and
the term is tested at level :math:`a`:

- ``"wald"``: one column: reject when :math:`|\hat\beta_j/\mathrm{se}_j| > z_{1-a/2}`;
  several columns :math:`S` (a factor): reject when
  :math:`\hat\beta_S^\top V_S^{-1}\hat\beta_S > \chi^2_{|S|, 1-a}`;
- ``"lrt"``: reject when :math:`2(\ell_1 - \ell_0) > \chi^2_{|S|, 1-a}`, :math:`\ell_0` the
  refit without the columns :math:`S` (simr's ``fixed(x, "lr")`` / ``fcompare``);
- ``compare``: the LRT against a reduced model the user writes, nested in the fit's (its
  fixed effects, varying effects and correlations a subset): :math:`\ell_0` its refit,
  :math:`\chi^2_{d, 1-a}` with :math:`d` the difference in parameter counts (fixed effects
  and :math:`\theta`, lme4's ``npar``), conservative where a variance is tested at 0.

Power is the share of rejections among the studies whose fits converged, with a 95 %
Wilson interval; the type I error is the same share for studies simulated with the tested
columns set to 0 (with ``compare``: what the reduced model drops set to 0, its fixed
effects and the rows, columns and correlations of :math:`\Sigma_k`), reported beside it.
Fits that did not converge (or gave no finite standard error) are counted as failed, never
as "not significant"; singular full fits (lme4's ``isSingular``: a diagonal element of some
:math:`T_k` below :math:`10^{-4}`) are counted and kept. A design point stops early, after
a chunk, when more than ``max_failed`` of its studies so far failed.

From a Bayesian fit of a formula model (:func:`tomstats.glmm.fit`), each study first takes
one posterior draw at random (:mod:`tomstats.planning.from_posterior`: its :math:`\beta`,
and its SDs and correlations as :math:`T_k`) and is then simulated and refitted as above;
the share of rejections is the assurance (power averaged over the posterior).

Dimensions (``along`` and ``by``, ``{name: values}``):

- a grouping factor ``g`` (a data column of a random-effects term): its number of levels.
  New levels copy the rows of the existing levels in turn (level :math:`q + i` copies level
  :math:`i \bmod q`) under new labels, as simr's ``extend(along = "g")``; their random
  effects are drawn like all others. Fewer levels than fitted keep the first ones;
- ``rows_per_<g>``: rows per level of ``g``: each level's rows, cycled (simr's
  ``extend(within = "g")``);
- a coefficient name: the value it is simulated with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tomstats import _distributed
from tomstats._validate import check_probabilities
from tomstats.glmm._hints import InputError
from tomstats.planning.from_posterior import is_posterior, posterior_fit

__all__ = ["FitPowerResult", "power_from_fit", "simulate_outcomes", "term_columns",
           "load_laplace_fit", "load_power_fit", "lrt_statistics", "FIT_TESTS",
           "ROWS_PREFIX", "default_cores"]

#: Tests of :func:`power_from_fit`.
FIT_TESTS = ("wald", "lrt")
#: ``along``/``by`` name prefix for rows per level of a grouping factor.
ROWS_PREFIX = "rows_per_"
#: Rough seconds per refit and observation (one CPU core), for the size guard.
_SECONDS_PER_OBS = 2e-5


# --------------------------------------------------------------------------- design


@dataclass(frozen=True)
class _Arrays:
    """The numeric design of one design point (see :mod:`tomstats.glmm.lme`)."""

    X: np.ndarray          # uncentred fixed design (n_obs, p)
    Xc: np.ndarray         # centred fixed design
    intercept: int | None
    trials: np.ndarray | None
    Zs: tuple[np.ndarray, ...]
    gs: tuple[np.ndarray, ...]
    shapes: tuple[Any, ...]
    coef_names: tuple[str, ...]
    n_rows: int
    levels: tuple[int, ...]
    terms: tuple[tuple[str, tuple[str, ...], bool], ...] = ()  # (group, effects, correlated)


def _prepare(fit: Any, data: pd.DataFrame | None,
             columns: Mapping[str, str] | None) -> tuple[str, pd.DataFrame]:
    """The formula and data frame as the fit read them (standard columns, ``cbind``
    rewritten as ``k | trials(n)``)."""
    from tomstats.glmm.data import prepare_data
    from tomstats.glmm.lme import CBIND_TRIALS, rewrite_cbind

    if data is None:
        des = getattr(fit, "design", None)
        if des is None:
            raise InputError("power from a fit needs the data it was fitted to: pass data "
                             "(the log, --data LOG); a fit read from JSON carries none")
        return rewrite_cbind(fit.formula, des.train.drop(columns=[CBIND_TRIALS],
                                                         errors="ignore"))
    if not isinstance(data, pd.DataFrame):
        raise InputError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    return rewrite_cbind(fit.formula, prepare_data(data, columns).reset_index(drop=True))


_NOT_THE_DATA = ("data: not the data the fit of {formula!r} was made from (its data hash "
                 "differs); pass the same log, with the same selection")


def _check_data_hash(fit: Any, formula: str, df: pd.DataFrame) -> None:
    """Refuse ``df`` when the columns the formula reads do not have the fit's data hash
    (before the design is built; data that lack a column are left to the design's message)."""
    if not _hash_agrees(formula, fit.family, fit.data_hash, df):
        raise InputError(_NOT_THE_DATA.format(formula=fit.formula))


def _hash_agrees(formula: str, family: str | None, stored: str, df: pd.DataFrame) -> bool:
    """Whether the columns of ``df`` a fit of ``formula`` reads have the data hash
    ``stored`` (true too when ``df`` lacks one of them: the design's message says which)."""
    from tomstats.glmm.provenance import data_hash, used_columns
    from tomstats.glmm.spec import FormulaSpec, parse_formula

    response, trials, fixed, random = parse_formula(formula)
    spec = FormulaSpec(formula=formula, response=response, trials=trials,
                       family=family or ("binomial" if trials else "bernoulli"), fixed=fixed,
                       random=random, aggregate=False)
    try:
        cols = used_columns(spec, df)
    except ValueError:
        return True
    return not all(c in df.columns for c in cols) or data_hash(df, cols) == stored


def _arrays(fit: Any, formula: str, df: pd.DataFrame, *, check_hash: bool,
            aggregate: bool | str = "auto", same_coefs: bool = True) -> _Arrays:
    """Build and check the design of ``formula`` (the fit's, or the model refitted) on
    ``df``."""
    from tomstats._expr import check_formula
    from tomstats.glmm.data import build_design
    from tomstats.glmm.lme import _check_terms, _effect_name
    from tomstats.glmm.lme_fit import TermShape
    from tomstats.glmm.provenance import data_hash, used_columns

    check_formula(formula)
    if check_hash and fit.data_hash:
        # first: other data fail the design's own checks too (a single level of a grouping
        # factor, a missing level), and those would hide that they are not the fit's data
        _check_data_hash(fit, formula, df)
    spec, md = build_design(formula, df, family=fit.family, aggregate=aggregate, center=True)
    _check_terms(spec, md, len(df))
    if check_hash and fit.data_hash and data_hash(df, used_columns(spec, df)) != fit.data_hash:
        raise InputError(_NOT_THE_DATA.format(formula=fit.formula))
    names = tuple(_effect_name(c) for c in md.coords["coef"])
    if same_coefs and names != tuple(fit.coef_names):
        raise InputError(f"the design has the coefficients {list(names)}, the fit "
                         f"{list(fit.coef_names)}: a level of a categorical predictor is "
                         f"missing there; keep more levels or rows")
    shapes = tuple(TermShape(d=len(md.coords[f"{t.key}_effect"]), q=len(md.coords[t.dim]),
                             correlated=bool(t.correlated)) for t in spec.random)
    Xc = np.asarray(md.arrays["X"], dtype=np.float64)
    mean = np.asarray(md.arrays["X_mean"], dtype=np.float64)
    X = Xc + mean[None, :]
    if md.intercept is not None:
        X[:, md.intercept] = 1.0
    return _Arrays(X=X, Xc=Xc, intercept=md.intercept,
                   trials=None if md.trials is None else md.trials.astype(np.float64),
                   Zs=tuple(np.asarray(md.arrays[f"Z_{t.key}"], np.float64)
                            for t in spec.random),
                   gs=tuple(np.asarray(md.arrays[f"g_{t.key}"], np.int32)
                            for t in spec.random),
                   shapes=shapes, coef_names=names, n_rows=len(df),
                   levels=tuple(s.q for s in shapes),
                   terms=tuple((t.group, tuple(_effect_name(e) for e in
                                               md.coords[f"{t.key}_effect"]),
                                bool(t.correlated)) for t in spec.random))


def _factors(fit: Any) -> list[str]:
    """Data columns that group a random-effects term (``a:b`` gives ``a`` and ``b``)."""
    return list(dict.fromkeys(p for t in fit.terms for p in t.group.split(":")))


def _extend(df: pd.DataFrame, factor: str, n_levels: int) -> pd.DataFrame:
    """``n_levels`` levels of ``factor``: new ones copy the existing levels' rows in turn."""
    labels = df[factor].astype(str)
    levels = sorted(set(labels))
    q = len(levels)
    if n_levels <= q:
        return df[labels.isin(levels[:n_levels])].reset_index(drop=True)
    parts = [df]
    taken = set(levels)
    for i in range(q, n_levels):
        src = levels[(i - q) % q]
        new = f"{src}~{i}"
        while new in taken:
            new += "'"
        taken.add(new)
        block = df[labels == src].copy()
        block[factor] = new
        parts.append(block)
    return pd.concat(parts, ignore_index=True)


def _rows_per_level(df: pd.DataFrame, factor: str, n: int) -> pd.DataFrame:
    """Each level of ``factor`` with ``n`` rows: its own rows, cycled."""
    idx = []
    for _, rows in df.groupby(df[factor].astype(str), sort=True).indices.items():
        idx.append(np.asarray(rows)[np.arange(n) % len(rows)])
    return df.iloc[np.concatenate(idx)].reset_index(drop=True)


def term_columns(coef_names: Sequence[str], term: str) -> list[int]:
    """Columns of a coefficient name or of a formula term (``cue`` or ``belief:cue``: the
    columns of that main effect or interaction, whatever its levels' names).

    Raises
    ------
    InputError
        When nothing matches (the valid names listed).
    """
    if term in coef_names:
        return [list(coef_names).index(term)]
    want = sorted(term.replace(" ", "").split(":"))
    out = []
    for j, name in enumerate(coef_names):
        parts = name.split(":")
        if len(parts) != len(want):
            continue
        bases = sorted(p.split("[", 1)[0] for p in parts)
        if bases == want:
            out.append(j)
    if not out:
        raise InputError(f"term {term!r}: no coefficient or formula term of that name in the "
                         f"fit (its coefficients: {', '.join(coef_names)})")
    return out


# --------------------------------------------------------------------------- simulation


def _beta(fit: Any, set_effects: Mapping[str, float] | None) -> np.ndarray:
    beta = np.array(fit.beta, dtype=float)
    for name, value in (set_effects or {}).items():
        if name not in fit.coef_names:
            raise InputError(f"set {name}={value}: no coefficient {name!r} in the fit (its "
                             f"coefficients: {', '.join(fit.coef_names)})")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                or not math.isfinite(value):
            raise InputError(f"set {name}: the value must be a finite number, got {value!r}")
        beta[list(fit.coef_names).index(name)] = float(value)
    return beta


def _simulate(fit: Any, a: _Arrays, beta: np.ndarray, n_sims: int,
              rng: np.random.Generator, factors: Sequence[np.ndarray] | None = None
              ) -> np.ndarray:
    """Outcomes of ``n_sims`` studies; ``factors``: the :math:`T_k` (default the fit's).

    ``beta`` of shape ``(p,)`` and factors ``(d, d)`` are shared by every study; of shape
    ``(n_sims, p)`` and ``(n_sims, d, d)`` they are each study's (a posterior draw each)."""
    if beta.ndim == 1:
        eta = np.broadcast_to(a.X @ beta, (n_sims, a.X.shape[0])).copy()
    else:
        eta = beta @ a.X.T
    factors = fit.factors() if factors is None else factors
    for T, Z, g, s in zip(factors, a.Zs, a.gs, a.shapes, strict=True):
        u = rng.standard_normal((n_sims, s.q, s.d))
        b = u @ T.T if T.ndim == 2 else u @ np.swapaxes(T, 1, 2)
        eta += np.einsum("nd,snd->sn", Z, b[:, g, :])
    n = np.ones(a.X.shape[0], np.int64) if a.trials is None else a.trials.astype(np.int64)
    with np.errstate(over="ignore"):  # exp(710) is inf: p = 0, as it should be
        p = check_probabilities(1.0 / (1.0 + np.exp(-eta)), "simulated studies")
    return rng.binomial(n[None, :], p).astype(np.float64)


def simulate_outcomes(fit: Any, n_sims: int, seed: int = 0,
                      set_effects: Mapping[str, float] | None = None, *,
                      data: pd.DataFrame | None = None) -> np.ndarray:
    """Successes of ``n_sims`` studies simulated from ``fit`` on its own design (module
    docstring), shape ``(n_sims, n_obs)``; ``data``: the log fitted (needed for a fit read
    from JSON)."""
    _check_fit(fit)
    a = _arrays(fit, *_prepare(fit, data, None), check_hash=data is not None)
    return _simulate(fit, a, _beta(fit, set_effects), int(n_sims), np.random.default_rng(seed))


# --------------------------------------------------------------------------- refits


#: Studies refitted one after another by one call of :func:`lrt_statistics` (its parts do
#: not depend on the number of cores; :func:`power_from_fit` refits a chunk a call).
_PART = 25


def default_cores() -> int:
    """Refits run side by side by default on the usable CPUs on a CPU backend, and one at a
    time on an accelerator (where one program already fills the device)."""
    import jax

    from tomstats._cpus import usable_cpus

    return usable_cpus() if jax.default_backend() == "cpu" else 1


def _refit(a: _Arrays, X: np.ndarray, ys: np.ndarray, theta: np.ndarray | None,
           eta: np.ndarray, cores: int = 1, part: int | None = None) -> Any:
    """Fits of every study (rows of ``ys``) with design ``X``, started at ``theta`` and the
    fixed effects closest to the linear predictor ``eta`` (least squares).

    The studies are split into parts of ``part`` studies (default: ``cores`` equal parts;
    the last study repeated to fill the last part, so one compiled shape serves all), each
    fitted one after another by the same compiled program, on ``cores`` threads: XLA runs
    the calls side by side on the CPU's cores. A study's refit starts from the Hessian of
    the refit before it in its part (:func:`tomstats.glmm.lme_fit.lme_fit_arrays`,
    ``sequential``), so the split is a part of the result (to ~1e-6 in the estimates): a
    caller whose split must not depend on the machine fixes ``part``."""
    import jax

    from tomstats.glmm.lme_fit import lme_fit_arrays, theta_start

    beta0 = np.linalg.lstsq(X, eta, rcond=None)[0]
    theta = theta_start(a.shapes) if theta is None else theta

    def fit(part: np.ndarray) -> Any:
        with jax.enable_x64(True):  # (a thread-local setting: entered in each thread)
            r = lme_fit_arrays(X, part, a.trials, a.Zs, a.gs, a.shapes, sequential=True,
                               start=(theta, beta0))
            return jax.tree_util.tree_map(np.asarray, r)

    n = ys.shape[0]
    cores = max(1, min(int(cores), n))
    size = min(int(part), n) if part else -(-n // cores)
    k = -(-n // size)
    if k == 1:
        return fit(ys)
    from concurrent.futures import ThreadPoolExecutor

    padded = np.concatenate([ys, np.repeat(ys[-1:], size * k - n, axis=0)])
    with ThreadPoolExecutor(min(cores, k)) as pool:
        parts = list(pool.map(fit, np.split(padded, k)))
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x)[:n], *parts)


def _refit_spread(a: _Arrays, X: np.ndarray, ys: np.ndarray, theta: np.ndarray | None,
                  eta: np.ndarray, parts: int = 1, cores: int | None = None) -> Any:
    """:func:`_refit` of every study (rows of ``ys``, ``parts`` equal blocks). In a
    multi-process run (docs/cluster.md) each process refits its contiguous share of the
    blocks, ``cores`` blocks side by side at a time (the same compiled shape as one process
    uses), then the fits are gathered in study order. Each study's fit does not depend on the
    split, so neither does the result."""
    if _distributed.workers() == 1:
        return _refit(a, X, ys, theta, eta, parts)
    import jax

    if ys.shape[0] % parts:  # blocks of unequal size: one study a block
        parts = ys.shape[0]
    size = ys.shape[0] // parts
    lo, hi = _distributed.share(parts)
    step = max(1, int(cores or 1))
    local = [_refit(a, X, ys[b * size:min(b + step, hi) * size], theta, eta, min(step, hi - b))
             for b in range(lo, hi, step)]
    got = [p for part in _distributed.allgather_object(local) for p in part]
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *got)


#: Blocks per process in each round of a multi-process run, per core (fewer exchanges).
_ROUND_BLOCKS = 4


def _reduced_design(a: _Arrays, cols: list[int]) -> np.ndarray:
    keep = [c for c in range(a.X.shape[1]) if c not in cols]
    Xr = a.X[:, keep]
    if a.intercept is not None and a.intercept not in cols:
        k = keep.index(a.intercept)
        mean = Xr.mean(axis=0)
        mean[k] = 0.0
        Xr = Xr - mean[None, :]
    return Xr


@dataclass(frozen=True)
class _Reduced:
    """The reduced model of a likelihood-ratio test on one design point: its random-effects
    design (``arrays``: the full model's when ``same_random``) and fixed design ``X``
    (centred columns of the full design)."""

    arrays: _Arrays
    X: np.ndarray
    same_random: bool


@dataclass(frozen=True)
class _Structure:
    """What a model estimates, for :func:`tomstats.glmm.lme_result.nesting_problem`."""

    coef_names: tuple[str, ...]
    terms: tuple[Any, ...]


@dataclass(frozen=True)
class _Comparison:
    """A reduced model written by the user (``compare``), checked against the fit."""

    formula: str                  # as given
    rewritten: str                # cbind() rewritten
    dropped: tuple[int, ...]      # the fit's fixed-effect columns it drops
    df: int                       # difference in parameter counts (lme4's npar)
    same_random: bool             # the fit's random-effects terms, unchanged
    boundary: bool                # drops a variance (tested at 0, on the boundary)
    structure: _Structure
    what: str                     # what it drops, in words


def _comparison(fit: Any, compare: str, formula: str, df0: pd.DataFrame) -> _Comparison:
    """Check that ``compare`` is a model nested in the fit's (same response; fixed effects,
    varying effects and correlations a subset, by name, with the same columns in the
    data) and count its parameters.

    Raises
    ------
    InputError
        Anything else, in one line.
    """
    from tomstats._expr import ExpressionError, check_formula
    from tomstats.glmm.lme import rewrite_cbind
    from tomstats.glmm.lme_result import LmeTerm, fit_structure, nesting_problem

    if not isinstance(compare, str):
        raise InputError(f"compare must be a formula string, got {type(compare).__name__}")
    head = f"compare {compare[:120]!r}"
    try:  # hostile input: the formula language first, before anything reads it
        check_formula(compare, "compare")
    except ExpressionError as exc:
        raise InputError(str(exc)) from exc
    rewritten = rewrite_cbind(compare, df0)[0]
    mine, theirs = check_formula(rewritten, "compare"), check_formula(formula)
    if (mine.response, mine.trials, mine.failures) != (theirs.response, theirs.trials,
                                                          theirs.failures):
        raise InputError(f"{head}: models {compare.split('~')[0].strip()!r}, the fit "
                         f"{fit.formula.split('~')[0].strip()!r}; a likelihood-ratio test "
                         f"needs the same response")
    red = _arrays(fit, rewritten, df0, check_hash=False, aggregate=False, same_coefs=False)
    full = _arrays(fit, formula, df0, check_hash=False, aggregate=False)
    small = _Structure(red.coef_names, tuple(
        LmeTerm(group=g, effects=e, correlated=c, levels=()) for g, e, c in red.terms))
    why = nesting_problem(small, fit)
    if why:
        raise InputError(f"{head}: not nested in the fit's {fit.formula!r}, which lacks {why}; "
                         f"the reduced model must drop fixed effects, random effects or "
                         f"correlations of the fit's")
    keep = [list(fit.coef_names).index(n) for n in red.coef_names]
    if not np.allclose(red.X, full.X[:, keep], rtol=1e-12, atol=1e-12):
        raise InputError(f"{head}: its columns {list(red.coef_names)} are coded otherwise than "
                         f"the fit's of the same names; write it with the fit's terms")
    n_red = len(keep) + sum(s.n_theta for s in red.shapes)
    n_full = full.X.shape[1] + sum(s.n_theta for s in full.shapes)
    if n_full - n_red <= 0:
        raise InputError(f"{head}: the same parameters as the fit ({n_full}); nothing to test: "
                         f"drop a fixed effect, random effect or correlation")
    dropped = tuple(j for j in range(len(fit.coef_names)) if j not in keep)
    _, eff_s, pairs_s = fit_structure(small)
    _, eff_b, pairs_b = fit_structure(fit)
    lost = {g: sorted(e - eff_s.get(g, set())) for g, e in eff_b.items()}
    what = [f"fixed {', '.join(fit.coef_names[j] for j in dropped)}"] if dropped else []
    what += [f"random {', '.join(e)} | {g}" for g, e in lost.items() if e]
    gone = sorted(pairs_b - pairs_s)
    if gone:
        what.append("correlation " + ", ".join(f"{a}~{b} | {g}" for g, a, b in gone))
    return _Comparison(formula=compare, rewritten=rewritten, dropped=dropped,
                       df=n_full - n_red, same_random=red.terms == full.terms,
                       boundary=any(lost.values()), structure=small, what="; ".join(what))


def _reduced(fit: Any, comp: _Comparison | None, a: _Arrays, cols: Sequence[int],
             df: pd.DataFrame) -> _Reduced:
    """The reduced model on design ``a`` (built on the rows ``df``): the fit without the
    columns ``cols`` (``comp`` None), or ``comp``."""
    if comp is None or comp.same_random:
        return _Reduced(a, _reduced_design(a, list(cols)), True)
    red = _arrays(fit, comp.rewritten, df, check_hash=False, aggregate=False,
                  same_coefs=False)
    return _Reduced(red, _reduced_design(a, list(comp.dropped)), False)


def _null_factors(fit: Any, comp: _Comparison,
                  factors: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    r""":math:`T_k` of the null: :math:`\Sigma_k = T_kT_k^\top` (``factors``, default the
    fit's; stacked ``(S, d, d)`` for posterior draws) with the rows and columns of the
    varying effects ``comp`` drops, and the correlations it drops, set to 0;
    :math:`T_k = V\Lambda^{1/2}` from :math:`\Sigma_k = V\Lambda V^\top`."""
    from tomstats.glmm.lme_result import fit_structure

    _, eff, pairs = fit_structure(comp.structure)
    out = []
    for t, T in zip(fit.terms, fit.factors() if factors is None else factors, strict=True):
        M = np.array(T @ np.swapaxes(T, -1, -2), dtype=float)
        for i, ei in enumerate(t.effects):
            for j, ej in enumerate(t.effects):
                kept = ei in eff.get(t.group, set()) and ej in eff.get(t.group, set())
                if not kept or (i != j and (t.group, min(ei, ej), max(ei, ej)) not in pairs):
                    M[..., i, j] = 0.0
        w, V = np.linalg.eigh(M)
        out.append(V * np.sqrt(np.clip(w, 0.0, None))[..., None, :])
    return out


def _lrt(a: _Arrays, reduced: _Reduced, ys: np.ndarray, full: Any, theta0: np.ndarray | None,
         eta: np.ndarray, cores: int = 1, per_process: int | None = None,
         part: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`2(\ell_1 - \ell_0)` of each study and whether the reduced fit converged
    (``cores`` blocks; ``per_process``: the cores of each process of a multi-process run;
    ``part``: in one process, parts of this many studies, :func:`_refit`)."""
    theta = theta0 if reduced.same_random else None
    red = _refit(reduced.arrays, reduced.X, ys, theta, eta, cores, part) if part else \
        _refit_spread(reduced.arrays, reduced.X, ys, theta, eta, cores, per_process)
    return 2.0 * (full.loglik - red.loglik), red.converged


def lrt_statistics(fit: Any, compare: str, outcomes: np.ndarray, *,
                   data: pd.DataFrame | None = None) -> np.ndarray:
    r"""Likelihood-ratio statistics :math:`2(\ell_1 - \ell_0)` of studies: the fit's model
    (:math:`\ell_1`) and the reduced model ``compare`` (:math:`\ell_0`) refitted to each
    row of ``outcomes`` (successes per observation of the fit's design, as
    :func:`simulate_outcomes` gives them; per data row when ``compare`` changes the random
    effects of an aggregated fit) as :func:`power_from_fit` refits them; NaN where a fit
    failed.

    Raises
    ------
    InputError
        ``compare`` not nested in the fit, or outcomes of another shape.
    """
    _check_fit(fit)
    formula, df0 = _prepare(fit, data, None)
    comp = _comparison(fit, compare, formula, df0)
    a = _arrays(fit, formula, df0, check_hash=data is not None,
                aggregate="auto" if comp.same_random else False)
    ys = np.atleast_2d(np.asarray(outcomes, dtype=np.float64))
    if ys.ndim != 2 or ys.shape[1] != a.X.shape[0]:
        raise InputError(f"outcomes: shape {ys.shape}, expected (studies, {a.X.shape[0]}) "
                         f"(one row per study, one column per observation of the fit)")
    eta = a.X @ np.asarray(fit.beta, dtype=float)
    cores = default_cores()
    # parts of a fixed size: the refits do not depend on the machine's cores
    full = _refit(a, a.Xc, ys, fit.theta, eta, cores, _PART)
    stat, red_ok = _lrt(a, _reduced(fit, comp, a, (), df0), ys, full, fit.theta, eta,
                        cores, part=_PART)
    return np.where(full.converged & red_ok, stat, np.nan)


def _to_user(a: _Arrays, r: Any) -> tuple[np.ndarray, np.ndarray]:
    """Centred estimates -> the user's columns: :math:`\\beta = A\\beta_c`,
    :math:`V = AV_cA^\\top`."""
    A = np.eye(a.X.shape[1])
    if a.intercept is not None:
        mean = (a.X - a.Xc).mean(axis=0)
        A[a.intercept] -= mean
        A[a.intercept, a.intercept] = 1.0
    return r.beta @ A.T, np.einsum("ij,sjk,lk->sil", A, r.cov, A)


def _singular(shapes: Sequence[Any], theta: np.ndarray) -> np.ndarray:
    from tomstats.glmm.lme_result import SINGULAR_TOL

    diag, o = [], 0
    for s in shapes:
        for t, (i, j) in enumerate(s.theta_index()):
            if i == j:
                diag.append(o + t)
        o += s.n_theta
    return np.any(theta[:, diag] < SINGULAR_TOL, axis=1)


@dataclass(frozen=True)
class _PointDraws:
    """Per-study parameters of a design point from posterior draws: each study takes the
    draw ``rng.integers(S)``."""

    beta: np.ndarray                   # (S, p), the point's set columns already set
    factors: tuple[np.ndarray, ...]    # T_k of each draw, (S, d, d)
    rng: np.random.Generator

    def take(self, m: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """The parameters of the next ``m`` studies."""
        idx = self.rng.integers(0, self.beta.shape[0], size=m)
        return self.beta[idx], [F[idx] for F in self.factors]


@dataclass
class _Tally:
    done: int = 0
    valid: int = 0
    rejected: int = 0
    failed: int = 0
    singular: int = 0
    estimates: list[float] = field(default_factory=list)
    stopped: bool = False


def _run_point(fit: Any, sim: _Arrays, a: _Arrays, beta: np.ndarray, cols: list[int],
               test: str, alpha: float, n_sims: int, rng: np.random.Generator, chunk: int,
               max_failed: float, bar: Any, reduced: _Reduced | None = None,
               df: int | None = None, factors: Sequence[np.ndarray] | None = None,
               draws: _PointDraws | None = None, cores: int = 1) -> _Tally:
    """Simulate with design ``sim`` (the fit's; random effects from ``factors``, default the
    fit's; with ``draws`` each study's parameters are a posterior draw), refit with design
    ``a`` (the same, or the model refitted on the same rows); the LRT against ``reduced``
    (default: ``a`` without ``cols``) on ``df`` (default ``len(cols)``) degrees of
    freedom. ``beta`` and the fit's :math:`\theta` start the refits."""
    from scipy.stats import chi2

    eta = sim.X @ beta
    theta0 = fit.theta if a is sim else None

    crit = float(chi2.ppf(1.0 - alpha, len(cols) if df is None else df))
    if test == "lrt" and reduced is None:
        reduced = _Reduced(a, _reduced_design(a, cols), True)
    tally = _Tally()
    todo = n_sims
    while todo > 0:
        # up to ``cores`` blocks of ``chunk`` studies, simulated one block after another
        # from the same stream (so the studies do not depend on ``cores``), refitted side by
        # side, one block a core; a last partial block is padded with repeats of its last
        # study (one compiled shape)
        sizes, blocks = [], []
        n_proc = _distributed.workers()  # several processes: more blocks a round, each
        per_round = cores if n_proc == 1 else cores * n_proc * _ROUND_BLOCKS  # `cores` at once
        while len(sizes) < per_round and todo > 0:
            m = min(chunk, todo)
            todo -= m
            if draws is None:
                ys = _simulate(fit, sim, beta, m, rng, factors)
            else:
                bs, fs = draws.take(m)
                ys = _simulate(fit, sim, bs, m, rng, fs)
            if m < chunk:
                ys = np.concatenate([ys, np.repeat(ys[-1:], chunk - m, axis=0)])
            sizes.append(m)
            blocks.append(ys)
        ys = np.concatenate(blocks)
        # one chunk a part (a refit starts from the Hessian of the one before it in its
        # part): the refits depend neither on the number of cores nor of processes
        full = _refit_spread(a, a.Xc, ys, theta0, eta, len(blocks), cores)
        b, V = _to_user(a, full)
        ok = full.converged & np.all(np.isfinite(full.se), axis=1)
        if test == "wald":
            bs = b[:, cols]
            Vs = V[:, cols][:, :, cols]
            with np.errstate(all="ignore"):
                stat = np.einsum("si,si->s", bs, np.linalg.solve(Vs, bs[..., None])[..., 0])
        else:
            assert reduced is not None
            stat, red_ok = _lrt(a, reduced, ys, full, theta0, eta, len(blocks), cores)
            ok = ok & red_ok
        ok = ok & np.isfinite(stat)
        singular = _singular(a.shapes, full.theta)
        for k, m in enumerate(sizes):  # block by block: the early stop as with one core
            rows = slice(k * chunk, k * chunk + m)
            okb = ok[rows]
            tally.done += m
            tally.valid += int(okb.sum())
            tally.failed += int((~okb).sum())
            tally.rejected += int(((stat[rows] > crit) & okb).sum())
            tally.singular += int((singular[rows] & okb).sum())
            if cols:
                tally.estimates += b[rows][okb][:, cols[0]].tolist()
            bar.update(m)
            if tally.failed > max_failed * tally.done and tally.done < n_sims:
                tally.stopped = True
                bar.update(n_sims - tally.done)
                return tally
    return tally


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class FitPowerResult:
    """Result of :func:`power_from_fit`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per design point: the ``by`` and ``along`` values (columns named after
        them), ``n_rows`` and ``n_obs`` of the simulated design, then for the studies
        simulated at the effect (``power``, ``ci_low``, ``ci_high``, ``n_sims``,
        ``n_valid``, ``n_failed``, ``n_singular``, ``estimate`` (mean of the first tested
        coefficient), ``stopped_early``) and with the tested columns at 0 (the same with
        the prefix ``null_``; ``null_power`` is the type I error).
    formula : str
        The model refitted and tested (the fit's, or ``refit``).
    term, test : str
    columns : tuple of str
        The coefficients tested.
    effects : dict
        The coefficients set by the user (``set_effects``).
    along, by : str or None
    alpha, target : float
    seed, n_sims : int
    seconds : float
    refits : int
        Model fits run (full and reduced).
    compare : str or None
        The reduced model of ``compare`` (``term`` then says what it drops).
    df : int or None
        Degrees of freedom of the likelihood-ratio test.
    boundary : bool
        The test sets a variance to 0 (its p-value is conservative).
    kind : {"power", "assurance"}
        Assurance (from a Bayesian fit's posterior draws): the table's column ``power`` is
        then named ``assurance``.
    posterior : dict or None
        Provenance of the posterior (file, model, data hash, draws available and used,
        failed checks).
    fitted : dict
        The value each tested coefficient was simulated with (the fit's, or ``set_effects``'s;
        a posterior's median for assurance).
    interval : {"wilson", "clopper-pearson"}
        The 95 % interval of ``ci_low``/``ci_high``.
    run : dict
        Where it ran: processes, devices, this process's devices, backend
        (:func:`tomstats._distributed.provenance`).
    """

    table: pd.DataFrame
    formula: str
    term: str
    test: str
    columns: tuple[str, ...]
    effects: dict[str, float]
    along: str | None
    by: str | None
    alpha: float
    target: float
    seed: int
    n_sims: int
    seconds: float
    refits: int
    compare: str | None = None
    df: int | None = None
    boundary: bool = False
    kind: str = "power"
    posterior: Mapping[str, Any] | None = None
    fitted: Mapping[str, float] = field(default_factory=dict)
    interval: str = "wilson"
    run: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line: the test, the design points and the power range; ``print()`` shows the
        table."""
        from tomstats._printable import summary_line

        col = self.table[self.kind] if self.kind in self.table else self.table.get("power")
        span = "" if col is None or not len(col) else (
            f"{self.kind} {100 * float(col.min()):.1f}–{100 * float(col.max()):.1f} %"
            if len(col) > 1 else f"{self.kind} {100 * float(col.iloc[0]):.1f} %")
        what = (f"{self.test} test of {self.term}" if self.compare is None else
                f"lrt against {self.compare}")
        return summary_line(self, what, f"{len(self.table)} design point(s)", span,
                            f"{self.n_sims} studies per point, seed {self.seed}")

    def __str__(self) -> str:
        if self.compare is None:
            what = f"{self.test} test of {self.term} ({', '.join(self.columns)})"
        else:
            what = (f"lrt test against {self.compare} ({self.term}; chi-square on {self.df} "
                    f"df)")
        ci = "Clopper–Pearson" if self.interval == "clopper-pearson" else "Wilson"
        head = (f"{self.kind} of the {what} at level {self.alpha:g}, "
                f"{self.n_sims} studies per point, seed {self.seed}, 95 % {ci} intervals; "
                f"fit: {self.formula}")
        if self.posterior is not None:
            p = self.posterior
            head += (f"\nassurance: each study's parameters one of {p['draws_used']} posterior "
                     f"draws of {p['file']} (of {p['draws_available']}), drawn at random; "
                     f"type I error with the tested columns at 0 in every draw")
            if p.get("failed_checks"):
                from tomstats.glmm.verdict import failed_checks_note

                head += "\nnote: " + failed_checks_note(p["failed_checks"], str(p["file"]))
        if self.boundary:
            head += ("\nnote: dropped variance components are tested at 0, the boundary of "
                     "their range, where the chi-square p-value is conservative (as in lme4)")
        if self.effects:
            head += "\nset: " + ", ".join(f"{k} = {v:g}" for k, v in self.effects.items())
        observed = {k: v for k, v in self.fitted.items()
                    if k not in self.effects and k not in (self.along, self.by)}
        if self.kind == "power" and observed:
            # simr's convention: say which effect size the power is for, and warn when it is
            # the one estimated from the data
            head += ("\neffect size: " + ", ".join(f"{k} = {v:.4g}" for k, v in
                                                    observed.items())
                     + " (the fitted value). Power at the effect observed in the pilot is not "
                       "a planning answer (simr warns of an 'observed power' calculation): "
                       "give the smallest effect of interest with --set NAME=VALUE")
        head += ("\nfailed, singular: refits of the studies simulated at the effect + of "
                 "those with the tested columns at 0 (power run + type I run)")
        rows = []
        dims = [d for d in (self.by, self.along) if d]
        for _, r in self.table.iterrows():
            line = "  ".join(f"{d} = {_num(r[d])}" for d in dims)
            line += (f"{'  ' if dims else ''}{self.kind} {100 * r[self.kind]:5.1f} % "
                     f"[{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]  ")
            if r["null_n_sims"]:
                line += (f"type I error {100 * r['null_power']:4.1f} % "
                         f"[{100 * r['null_ci_low']:.1f}, {100 * r['null_ci_high']:.1f}]  ")
            line += (f"failed {int(r['n_failed'])} + {int(r['null_n_failed'])}  "
                     f"singular {int(r['n_singular'])} + {int(r['null_n_singular'])}")
            if r["stopped_early"] or r["null_stopped_early"]:
                line += "  STOPPED EARLY: too many failed fits"
            rows.append(line)
        return "\n".join([head, *rows])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (non-finite numbers as ``None``)."""
        def clean(v: Any) -> Any:
            if isinstance(v, (float, np.floating)):
                return float(v) if math.isfinite(v) else None
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, np.bool_):
                return bool(v)
            return v

        return {"format": "tomstats-power-from-fit", "kind": self.kind,
                "posterior": None if self.posterior is None else dict(self.posterior),
                "formula": self.formula,
                "term": self.term, "test": self.test, "columns": list(self.columns),
                "effects": self.effects, "along": self.along, "by": self.by,
                "alpha": self.alpha, "target": self.target, "seed": self.seed,
                "n_sims": self.n_sims, "seconds": self.seconds, "refits": self.refits,
                "compare": self.compare, "df": self.df, "boundary": self.boundary,
                "fitted": dict(self.fitted), "interval": self.interval, "run": dict(self.run),
                "rows": [{k: clean(v) for k, v in r.items()}
                         for r in self.table.to_dict(orient="records")]}

    def curve(self) -> pd.DataFrame:
        """The table as power curves (the columns of
        :data:`tomstats.planning.figure.POWER_COLUMNS`, plus ``by``/``by_value`` with a
        second dimension): the power (or assurance) of the test and its type I error, each
        with its interval, along ``along``."""
        if self.along is None:
            raise ValueError("a power curve needs a dimension: give along")
        what = self.term if self.compare is None else f"lrt against {self.compare}"
        parts = []
        for prefix, test in (("", f"{self.test}: {what}"), ("null_", "type I error")):
            if not self.table[f"{prefix}n_sims"].any():
                continue
            part = pd.DataFrame({
                "kind": "plug-in" if self.kind == "power" else "assurance",
                "along": self.along, "value": self.table[self.along].astype(float),
                "test": test, "power": self.table[f"{prefix}{self.kind}" if not prefix
                                                  else "null_power"],
                "ci_low": self.table[f"{prefix}ci_low"],
                "ci_high": self.table[f"{prefix}ci_high"]})
            if self.by is not None:
                part["by"], part["by_value"] = self.by, self.table[self.by].astype(float)
            parts.append(part)
        return pd.concat(parts, ignore_index=True)

    def write(self, folder: Any, figure: bool = False) -> list[Any]:
        """Write ``power.csv`` and ``power.json`` into ``folder`` and, with ``figure`` and an
        ``along`` dimension, the curve ``power.png`` (as the TOML path draws it, the type I
        error a curve of its own); return the paths."""
        import json
        from pathlib import Path

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        csv = folder / "power.csv"
        self.table.to_csv(csv, index=False)
        js = folder / "power.json"
        js.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n",
                      encoding="utf-8")
        paths = [csv, js]
        if figure and self.along is not None:
            from tomstats.planning.figure import fig_power
            from tomstats.planning.result import POWER_FIGURE
            from tomstats.simulation.figures import save_figure

            paths.append(save_figure(fig_power(self.curve(), self.target),
                                     folder / POWER_FIGURE))
        return paths


def _num(v: Any) -> str:
    return f"{int(v)}" if float(v).is_integer() else f"{float(v):g}"


# --------------------------------------------------------------------------- entry


def _check_fit(fit: Any) -> None:
    from tomstats.glmm.lme_result import LaplaceFit

    if isinstance(fit, LaplaceFit) and fit.terms:
        return
    name = type(fit).__name__
    if isinstance(fit, LaplaceFit):
        raise InputError(f"power from a fit needs a Laplace fit with random-effects terms; "
                         f"{fit.formula!r} has none (a logistic regression)")
    if is_posterior(fit):
        raise InputError("this needs a maximum-likelihood (Laplace) fit with random-effects "
                         "terms (tomstats fit --backend laplace, a .json); a Bayesian fit "
                         "gives assurance over its posterior draws through power_from_fit "
                         "(tomstats power --from-fit FIT.nc)")
    raise InputError(f"power from a fit needs a Laplace fit with random-effects terms "
                     f"(tomstats.glmm.lme.fit_lme, or a .json of tomstats fit --backend "
                     f"laplace), got {name}")


def _read_log(log: Any, formula: str, columns: Mapping[str, str] | None = None
              ) -> pd.DataFrame:
    """The columns of ``log`` a fit of ``formula`` reads, as ``tomstats fit`` read them
    (:func:`tomstats.glmm.data.fit_columns`; so the data hash is the fit's)."""
    from tomstats.glmm.data import _read_table

    return _read_table(log, errors="drop", model=formula, columns=columns)


def _hash_matches(fit: Any, df: pd.DataFrame) -> bool:
    """Whether ``df`` is the data of the Laplace ``fit`` by its data hash."""
    try:
        _arrays(fit, *_prepare(fit, df, None), check_hash=True)
    except InputError:
        return False
    return True


def _log_of(fit: Any, log: Any) -> pd.DataFrame:
    """The log as the Laplace ``fit`` read it: the columns ``tomstats fit`` reads (a fit
    made on the command line), else the whole log when only that has the fit's data hash (a
    fit made in Python on the log's frame, whose hash covers the standard columns it had);
    a log that matches neither is refused later, by the hash check of the design."""
    from tomstats.glmm.data import _read_table

    df = _read_log(log, fit.formula)
    if not fit.data_hash or _hash_matches(fit, df):
        return df
    whole = _read_table(log, errors="drop")
    return whole if _hash_matches(fit, whole) else df


def _not_the_log(log: Any, fit_path: Any) -> str:
    return (f"--data: {str(log)!r} is not the log the fit {str(fit_path)!r} was made from "
            f"(its data hash differs); pass the same log, with the same selection")


def load_laplace_fit(path: Any, log: Any) -> tuple[Any, pd.DataFrame]:
    """A Laplace fit's JSON and the log it was made from, ready for :func:`power_from_fit`.

    A fit in the format written now (``tomstats-lme-fit``) is read as it is; one in the
    random-intercept format of earlier versions (``tomstats-laplace-fit``) is refitted from
    the log with :func:`tomstats.glmm.lme.fit_lme` (the data hash must be the fit's, the
    log-likelihood agree within 1e-3). The log's columns read are those ``tomstats fit``
    reads for the fit's formula, as its data hash was computed.

    Raises
    ------
    InputError
        A Bayesian fit (netCDF: see :func:`load_power_fit`), a file that is not a Laplace
        fit, or a log that is not the one fitted.
    """
    from pathlib import Path

    from tomstats.glmm.fit_file import check_ml_dict, is_netcdf, read_fit_json
    from tomstats.glmm.lme import fit_lme
    from tomstats.glmm.lme_result import LaplaceFit

    p = Path(path)
    if not p.is_file():
        raise InputError(f"--from-fit: {str(p)!r} does not exist")
    if is_netcdf(p):
        _check_fit(_Posterior())
    d = read_fit_json(p, "--from-fit")  # the one fit reader: checked whole
    try:
        fmt = check_ml_dict(d)
    except ValueError as exc:
        raise InputError(f"--from-fit {str(p)!r}: {exc}; write a fit with tomstats fit LOG "
                         f"--model FORMULA --backend laplace") from None
    if fmt == "tomstats-lme-fit":
        fit = LaplaceFit.from_dict(d)
        df = _log_of(fit, log)
        if fit.data_hash and not _hash_matches(fit, df):  # before anything else is read
            raise InputError(_not_the_log(log, p))
        return fit, df
    formula = d["formula"]
    import warnings

    from tomstats.glmm.data import _read_table

    def refit(frame: pd.DataFrame) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_lme(frame, str(formula), family=d.get("family"))

    df = _read_log(log, formula)
    stored_hash = d.get("data_hash")
    if stored_hash and not _hash_agrees(formula, d.get("family"), stored_hash, df) and \
            not _hash_agrees(formula, d.get("family"), stored_hash,
                             _read_table(log, errors="drop")):
        # first: another log may not even fit (a single level of a grouping factor)
        raise InputError(_not_the_log(log, p))
    fit = refit(df)
    if d.get("data_hash") and d.get("data_hash") != fit.data_hash:
        # a fit made in Python on the log's frame: its hash covers the standard columns the
        # frame had (see _log_of)
        whole = _read_table(log, errors="drop")
        if len(whole.columns) > len(df.columns):
            again = refit(whole)
            if again.data_hash == d.get("data_hash"):
                df, fit = whole, again
    stored = d.get("loglik")
    if d.get("data_hash") and d.get("data_hash") != fit.data_hash:
        raise InputError(_not_the_log(log, p))
    if not isinstance(stored, (int, float)) or abs(fit.loglik - stored) > 1e-3 * max(
            1.0, abs(stored)):
        raise InputError(f"--data: {str(log)!r} is not the log the fit {str(p)!r} was made "
                         f"from (log-likelihood {fit.loglik:.4f} refitted, {stored} stored)")
    return fit, df


class _Posterior:
    """Stands for a Bayesian fit in :func:`_check_fit`'s message."""

    posterior = None


def load_power_fit(path: Any, log: Any, *, allow_warnings: bool = False
                   ) -> tuple[Any, pd.DataFrame]:
    """A fit for :func:`power_from_fit` and the log it was made from: a Laplace fit's JSON
    (:func:`load_laplace_fit`), or a Bayesian formula fit's netCDF (assurance; the log's
    columns read with the fit's formula and column mapping).

    Raises
    ------
    InputError
        A structural Bayesian fit (its assurance is ``tomstats power CONFIG
        --posterior``), a file that is neither.
    ValueError
        A Bayesian fit that failed its own checks, unless ``allow_warnings``.
    """
    from pathlib import Path

    from tomstats.glmm.fit_file import is_netcdf, read_netcdf_fit
    from tomstats.glmm.verdict import require_sound_fit
    from tomstats.planning.from_posterior import fit_formula, stored_mapping

    p = Path(path)
    if not p.is_file() or not is_netcdf(p):
        return load_laplace_fit(p, log)
    idata = read_netcdf_fit(p, "--from-fit")
    formula = fit_formula(idata, str(p))
    require_sound_fit(idata, allow_warnings=allow_warnings, name=str(p), field="--from-fit")
    return idata, _read_log(log, formula, stored_mapping(idata, str(p)) or None)


def _dimension(fit: Any, name: str, values: Sequence[float], what: str,
               factors: list[str]) -> tuple[str, list[float]]:
    """Kind of a dimension ('levels', 'rows' or 'effect') and its checked values."""
    vals = list(values)
    if not vals:
        raise InputError(f"{what} {name}: give at least one value")
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(v)):
            raise InputError(f"{what} {name}: values must be finite numbers, got {v!r}")
    if name in fit.coef_names:
        return "effect", [float(v) for v in vals]
    factor = name[len(ROWS_PREFIX):] if name.startswith(ROWS_PREFIX) else name
    if factor in factors:
        lo = 2 if factor == name else 1
        for v in vals:
            if float(v) != int(v) or v < lo:
                raise InputError(f"{what} {name}: values must be whole numbers >= {lo}, "
                                 f"got {v!r}")
        return ("levels" if factor == name else "rows"), [int(v) for v in vals]
    raise InputError(
        f"{what} {name!r}: not a grouping factor of the fit, rows per level of one, nor a "
        f"coefficient; use one of {', '.join(factors)} (levels), "
        f"{', '.join(ROWS_PREFIX + f for f in factors)} (rows per level) or a coefficient: "
        f"{', '.join(fit.coef_names)}")


def _one_dim(spec: Mapping[str, Sequence[float]] | None, what: str
             ) -> tuple[str, Sequence[float]] | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or len(spec) != 1:
        raise InputError(f"{what} must be one {{name: values}}, got {spec!r}")
    return next(iter(spec.items()))


def power_from_fit(
    fit: Any,
    term: str | None = None,
    *,
    compare: str | None = None,
    data: pd.DataFrame | None = None,
    columns: Mapping[str, str] | None = None,
    test: str | None = None,
    set_effects: Mapping[str, float] | None = None,
    along: Mapping[str, Sequence[float]] | None = None,
    by: Mapping[str, Sequence[float]] | None = None,
    n_sims: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    target: float = 0.8,
    chunk: int = 25,
    max_failed: float = 0.1,
    type_one: bool = True,
    refit: str | None = None,
    progress: bool | None = None,
    allow_large: bool = False,
    draws: int | None = None,
    allow_warnings: bool = False,
    fit_name: str | None = None,
    cores: int | None = None,
    interval: str = "wilson",
) -> FitPowerResult:
    """Power (and type I error) of a test of ``term``, or of the likelihood-ratio test
    against the reduced model ``compare``, for studies simulated from ``fit``; from a
    Bayesian fit, assurance.

    **Assurance.** With a Bayesian formula fit each study first takes one parameter set
    :math:`(\\beta^{(s)}, \\theta^{(s)})`, :math:`s` drawn uniformly (seeded) from the
    posterior draws (:mod:`tomstats.planning.from_posterior`), with the coefficients of
    ``set_effects``, of an ``along``/``by`` coefficient and (for the type I error) the
    tested ones set in every draw; then it is simulated and refitted as from a Laplace fit.
    The share of rejections estimates the assurance
    :math:`\\int P(\\text{reject}\\mid\\beta, \\theta)\\,p(\\beta, \\theta\\mid y)\\,
    d(\\beta, \\theta)`, each study an independent Bernoulli trial of it (hence the same
    Wilson interval).

    Parameters
    ----------
    fit : LaplaceFit or arviz.InferenceData
        A Laplace fit with random-effects terms (:func:`tomstats.glmm.fit` with
        ``backend="laplace"``, or
        :meth:`~tomstats.glmm.lme_result.LaplaceFit.from_json` of ``tomstats fit --backend
        laplace``'s JSON), or a Bayesian fit of a formula model (:func:`tomstats.glmm.fit`,
        :func:`tomstats.glmm.load_fit`): assurance.
    term : str
        A coefficient (``"x"``, ``"belief[T.true]:cue[T.b]"``) or a formula term
        (``"cue"``, ``"belief:cue"``: all its columns). Give ``term`` or ``compare``.
    compare : str, optional
        A reduced model nested in the fit's (simr's ``fcompare``), e.g.
        ``"y ~ x + (1 | g)"`` for ``"y ~ x + (1 + x | g)"``: the same response, its fixed
        effects, varying effects and correlations among the fit's. The test is the LRT
        :math:`2(\\ell_1 - \\ell_0) > \\chi^2_{d, 1-a}`, :math:`d` the difference in
        parameter counts (fixed effects and :math:`\\theta`, lme4's ``npar``); conservative
        where it drops a variance (tested at 0, on the boundary). The type I error
        simulates from the fit with what ``compare`` drops set to 0 (its fixed effects,
        and the rows, columns and correlations of the random-effects covariances), as the
        test of ``term`` sets its columns to 0.
    data : pandas.DataFrame, optional
        The log the fit was made from (checked by the fit's data hash); needed for a fit
        read from JSON, taken from an in-memory fit otherwise.
    columns : mapping, optional
        ``{standard_name: your_column}`` as given to the fit.
    test : {"wald", "lrt"}, optional
        Default ``"wald"``; ``"lrt"`` (the only one) with ``compare``.
    set_effects : mapping, optional
        ``{coefficient: value}`` to simulate with instead of the fitted values.
    along, by : mapping, optional
        ``{name: values}``: a grouping factor (levels), ``rows_per_<factor>`` or a
        coefficient (module docstring). ``by`` repeats the curve along ``along``.
    n_sims : int
        Studies per design point (and as many with the tested effect at 0).
    seed : int
        Same seed, same result.
    alpha : float
        Level of the test.
    target : float
        Power aimed at (reported only).
    chunk : int
        Studies per block: simulated together, refitted by one compiled call on one core, and
        the step of the progress bar and of the early stop (the result depends on it, not on
        ``cores``).
    max_failed : float
        Share of failed fits after which a design point stops early.
    type_one : bool
        Also simulate every design point with the tested columns at 0 (the ``null_``
        columns of the table, NaN without).
    refit : str, optional
        Formula of the model refitted and tested (default: the fit's), e.g. the fit
        without its random slope, to see what a misspecified analysis does (the rows are
        then not aggregated, so that both designs have the same observations).
    progress : bool, optional
        Progress bar on stderr (None: when stderr is a terminal).
    allow_large : bool
        Skip the size guard.
    draws : int, optional
        With a Bayesian fit: posterior draws sampled from, thinned evenly (default all).
    allow_warnings : bool
        With a Bayesian fit: use it although it failed its own checks (recorded).
    fit_name : str, optional
        How a Bayesian fit is named in messages and provenance (its path).
    cores : int, optional
        Blocks refitted side by side, one thread (core) each (default
        :func:`default_cores`: the usable CPUs on a CPU backend, 1 on an accelerator). The
        result does not depend on it.
    interval : {"wilson", "clopper-pearson"}
        The 95 % interval of power and type I error: Wilson's score interval (default), or
        the Clopper–Pearson ("exact") interval simr reports.

    Returns
    -------
    FitPowerResult
        ``kind`` ``"assurance"`` from a Bayesian fit (its ``posterior`` the provenance).
    """
    import time

    from tqdm.auto import tqdm

    from tomstats._guards import Footprint, check_footprint

    t0 = time.perf_counter()
    bayes = is_posterior(fit)
    if not bayes:
        _check_fit(fit)
        if draws is not None or allow_warnings:
            raise InputError("draws and allow_warnings apply to a Bayesian fit (its posterior "
                             "draws); this is a Laplace fit")
    elif draws is not None and (isinstance(draws, bool) or not isinstance(
            draws, (int, np.integer)) or draws < 1):
        raise InputError(f"draws must be an integer >= 1, got {draws!r}")
    if (term is None) == (compare is None):
        raise InputError("give a term to test or a reduced model to compare with (compare=), "
                         "one of the two")
    if test is None:
        test = "wald" if compare is None else "lrt"
    if test not in FIT_TESTS:
        raise InputError(f"test must be one of {', '.join(FIT_TESTS)}, got {test!r}")
    if compare is not None and test != "lrt":
        raise InputError(f"test {test!r}: a reduced model (compare) is tested by the "
                         f"likelihood ratio, test 'lrt'")
    if interval not in POWER_INTERVALS:
        raise InputError(f"interval must be one of {', '.join(POWER_INTERVALS)}, got "
                         f"{interval!r}")
    if compare is not None and refit is not None:
        raise InputError("compare and refit: give one (compare tests the fit's model against "
                         "a reduced one; refit tests a term in another model)")
    for name, v, lo in (("n_sims", n_sims, 1), ("chunk", chunk, 1), ("seed", seed, 0),
                        ("cores", 1 if cores is None else cores, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
    for name, v in (("alpha", alpha), ("target", target), ("max_failed", max_failed)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            raise InputError(f"{name} must be a number in (0, 1), got {v!r}")
    if compare is None and (not isinstance(term, str) or not term.strip()):
        raise InputError(f"term must be a coefficient or formula term name, got {term!r}")
    if refit is not None and (not isinstance(refit, str) or "~" not in refit):
        raise InputError(f"refit must be an lme4-style formula 'y ~ x + (1 | g)', got "
                         f"{refit!r}")
    post = None
    if bayes:  # the Laplace structure of the posterior's model, at its medians
        fit, post = posterior_fit(fit, data, columns, draws=draws,
                                  allow_warnings=allow_warnings,
                                  name="the fit" if fit_name is None else str(fit_name))
        data, columns = None, None  # the design is the Laplace fit's own, hash checked
    base_beta = _beta(fit, set_effects)
    factors = _factors(fit)
    dims = []
    for what, spec in (("along", along), ("by", by)):
        d = _one_dim(spec, what)
        dims.append(None if d is None else (d[0], *_dimension(fit, d[0], d[1], what,
                                                                factors)))
    if dims[0] and dims[1] and dims[0][0] == dims[1][0]:
        raise InputError(f"by: {dims[1][0]!r} is already the dimension along varies")
    formula, df0 = _prepare(fit, data, columns)
    _arrays(fit, formula, df0, check_hash=data is not None)  # the fitted design, checked first
    comp = None if compare is None else _comparison(fit, compare, formula, df0)
    # the rows as they are where the models refitted differ in their random effects
    agg: bool | str = "auto" if refit is None and (comp is None or comp.same_random) \
        else False
    ana_formula = formula if refit is None else refit
    if refit is not None:
        from tomstats.glmm.lme import rewrite_cbind

        ana_formula = rewrite_cbind(refit, df0)[0]
        ana_names = _arrays(fit, ana_formula, df0, check_hash=False, aggregate=False,
                            same_coefs=False).coef_names
    else:
        ana_names = tuple(fit.coef_names)
    if comp is None:
        assert term is not None
        cols = term_columns(ana_names, term)
    else:
        cols, term = list(comp.dropped), comp.what
    sim_cols = [list(fit.coef_names).index(ana_names[c]) for c in cols
                if ana_names[c] in fit.coef_names]
    null_factors = None if comp is None or comp.same_random else _null_factors(fit, comp)
    set_cols = [list(fit.coef_names).index(k) for k in (set_effects or {})]
    if post is not None:
        draw_factors = post.factors(fit.terms)
        null_draw_factors = draw_factors if null_factors is None else _null_factors(
            fit, comp, draw_factors)  # type: ignore[arg-type]

    def point_draws(beta: np.ndarray, fixed: list[int], null: bool, stream: list[int]
                    ) -> _PointDraws | None:
        """The posterior draws of a design point, the columns ``fixed`` set as in ``beta``."""
        if post is None:
            return None
        bd = post.beta.copy()
        bd[:, fixed] = beta[fixed]
        return _PointDraws(bd, tuple(null_draw_factors if null else draw_factors),
                           np.random.default_rng(stream))

    def point(settings: list[tuple[str, str, Any]]) -> tuple[pd.DataFrame, np.ndarray]:
        df, beta = df0, base_beta.copy()
        for name, kind, v in settings:
            if kind == "levels":
                df = _extend(df, name, int(v))
            elif kind == "rows":
                df = _rows_per_level(df, name[len(ROWS_PREFIX):], int(v))
            else:
                beta[list(fit.coef_names).index(name)] = float(v)
        return df, beta

    axes = [[(d[0], d[1], v) for v in d[2]] if d else [None] for d in (dims[1], dims[0])]
    points = []
    for b_set in axes[0]:  # by outermost, then along
        for a_set in axes[1]:
            settings = [x for x in (b_set, a_set) if x is not None]
            # the design first (levels, rows), then the effects
            df, beta = point(sorted(settings, key=lambda x: x[1] == "effect"))
            sim = _arrays(fit, formula, df, check_hash=False, aggregate=agg)
            a = sim if refit is None else _arrays(fit, ana_formula, df, check_hash=False,
                                                  aggregate=False, same_coefs=False)
            red = _reduced(fit, comp, a, cols, df) if test == "lrt" else None
            points.append((settings, sim, a, beta, red))
    fits_per = 2 if test == "lrt" else 1
    n_fits = len(points) * (1 + bool(type_one)) * int(n_sims) * fits_per
    obs = max(p[2].X.shape[0] for p in points)
    m_theta = max(sum(s.n_theta for s in p[2].shapes) + p[2].X.shape[1] for p in points)
    n_cores = _agreed_cores(default_cores() if cores is None else int(cores))
    check_footprint(Footprint(
        "power from a fit",
        8.0 * 4 * min(int(n_sims), int(chunk) * n_cores) * obs * (1 + m_theta),
        n_fits * obs * _SECONDS_PER_OBS * m_theta,
        f"{len(points)} design point(s) x 2 x {n_sims} studies x {fits_per} fit(s) of up to "
        f"{obs} observations"), allow_large=allow_large)

    rows, null_cache, refits = [], {}, 0
    progress = _distributed.progress_allowed(progress)  # one bar: process 0's
    disable = None if progress is None else not progress
    with tqdm(total=n_fits // fits_per, desc="power from fit", unit="study", disable=disable,
              leave=False) as bar:
        if not bar.disable:
            bar.write("compiling the refit program once per design size (a minute or so)",
                      file=bar.fp)
        lrt_df = None if comp is None else comp.df
        for pi, (settings, sim, a, beta, red) in enumerate(points):
            rng = np.random.default_rng([int(seed), pi, 1])
            fixed = set_cols + [list(fit.coef_names).index(s[0]) for s in settings
                                if s[1] == "effect"]
            alt = _run_point(fit, sim, a, beta, cols, test, alpha, int(n_sims), rng,
                             int(chunk), max_failed, bar, red, lrt_df,
                             draws=point_draws(beta, fixed, False, [int(seed), pi, 3]),
                             cores=n_cores)
            nb = beta.copy()
            nb[sim_cols] = 0.0
            key = (tuple((s[0], s[2]) for s in settings if s[1] != "effect"), nb.tobytes())
            if not type_one:
                null_cache[key] = _Tally()
            elif key not in null_cache:
                nrng = np.random.default_rng([int(seed), pi, 0])
                null_cache[key] = _run_point(
                    fit, sim, a, nb, cols, test, alpha, int(n_sims), nrng, int(chunk),
                    max_failed, bar, red, lrt_df, null_factors,
                    draws=point_draws(nb, fixed + sim_cols, True, [int(seed), pi, 2]),
                    cores=n_cores)
                refits += null_cache[key].done * fits_per
            else:
                bar.update(int(n_sims))  # the same null studies as an earlier point
            null = null_cache[key]
            refits += alt.done * fits_per
            row: dict[str, Any] = {s[0]: s[2] for s in settings}
            row.update(n_rows=a.n_rows, n_obs=a.X.shape[0])
            for prefix, t in (("", alt), ("null_", null)):
                lo, hi = _interval(t.rejected, t.valid, interval)
                row.update({f"{prefix}power": t.rejected / t.valid if t.valid else np.nan,
                            f"{prefix}ci_low": lo, f"{prefix}ci_high": hi,
                            f"{prefix}n_sims": t.done, f"{prefix}n_valid": t.valid,
                            f"{prefix}n_failed": t.failed, f"{prefix}n_singular": t.singular,
                            f"{prefix}estimate": float(np.mean(t.estimates)) if t.estimates
                            else np.nan, f"{prefix}stopped_early": t.stopped})
            rows.append(row)
    table = pd.DataFrame(rows)
    if post is not None:  # the share of rejections is assurance, so named
        table = table.rename(columns={"power": "assurance"})
    return FitPowerResult(
        table=table, formula=fit.formula if refit is None else refit,
        term=term, test=test, columns=tuple(ana_names[c] for c in cols),
        effects={k: float(v) for k, v in (set_effects or {}).items()},
        along=None if dims[0] is None else dims[0][0], by=None if dims[1] is None
        else dims[1][0], alpha=float(alpha), target=float(target), seed=int(seed),
        n_sims=int(n_sims), seconds=time.perf_counter() - t0, refits=refits,
        compare=compare, df=len(cols) if comp is None else comp.df,
        boundary=bool(comp is not None and comp.boundary),
        kind="power" if post is None else "assurance",
        posterior=None if post is None else dict(post.source),
        fitted={str(fit.coef_names[c]): float(base_beta[c]) for c in sim_cols},
        interval=interval, run=_distributed.provenance())


def _agreed_cores(cores: int) -> int:
    """The cores per process every process of a multi-process run uses (their least), so
    all cut the studies into the same blocks; ``cores`` itself with one process."""
    return min(_distributed.allgather_object(int(cores)))


#: Intervals of a power estimate: Wilson's (the default) or Clopper–Pearson's (simr's).
POWER_INTERVALS = ("wilson", "clopper-pearson")


def _interval(k: int, n: int, method: str = "wilson") -> tuple[float, float]:
    """The 95 % interval of ``k`` rejections in ``n`` valid studies."""
    from tomstats.analysis.intervals import clopper_pearson_interval, wilson_interval

    if n == 0:
        return float("nan"), float("nan")
    f = clopper_pearson_interval if method == "clopper-pearson" else wilson_interval
    lo, hi = f(k, n)
    return float(lo), float(hi)
