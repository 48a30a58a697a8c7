r"""Simulation-based power and assurance: how many questions, stories and LLMs a study needs.

:func:`power` simulates a study many times with the simulator of equation (1)
(:func:`tomstats.simulation.simulator.item_counts` and
:func:`tomstats.model.cell_probabilities`), runs the planned analysis on every simulated data
set, and reports the share of data sets in which the tested effect is significant at level
:math:`a` — the power — for each value of one design dimension (questions per cell, stories per
cell, number of LLMs) or parameter (α, γ, δ, σ).

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

The tests are described in :mod:`tomstats.planning.analyses`.

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

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr
from tqdm.auto import tqdm

from tomstats import _distributed
from tomstats._guards import check_footprint
from tomstats._validate import closest_hint
from tomstats._version import __version__
from tomstats.analysis.intervals import wilson_interval
from tomstats.design import Design
from tomstats.model import Params
from tomstats.planning.analyses import PlannedTest, decide
from tomstats.planning.plan import CurvePlan, curve_variants, plan_curve
from tomstats.planning.result import PowerFailureError, PowerResult, as_number
from tomstats.planning.studies import (
    CELLS_PER_CHUNK,
    FITS_PER_CHUNK,
    StudySize,
    per_item,
    study_program,
)
from tomstats.simulation.posterior_sweep import posterior_draws
from tomstats.simulation.simulator import make_key
from tomstats.simulation.study import ALONG, PowerSpec, StudyConfig, load_study

__all__ = ["posterior_parameters", "power"]

#: Largest share of failed fits of a test at any value before :func:`power` stops.
_MAX_FAIL = 0.01


# ---------------------------------------------------------------------------------------
# the study's parameters, per simulated study
# ---------------------------------------------------------------------------------------


def _theta(base: Params, capability: np.ndarray, posterior: Any, setting: StudySize,
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


def _load_posterior(posterior: Any, draws: int) -> tuple[Any, dict[str, Any]]:
    is_path = isinstance(posterior, str | os.PathLike)
    name = str(posterior) if is_path else "posterior"
    if is_path:
        p = Path(posterior)
        if not p.is_file():
            raise FileNotFoundError(f"posterior: file {str(p)!r} does not exist")
        # the GLMM stack (ArviZ, netCDF) is imported only when a fit is given
        from tomstats.glmm import load_fit

        try:
            posterior = load_fit(p)
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"posterior: {str(p)!r} is not a tomstats fit ({exc})") from exc
    pdraws = posterior_draws(posterior, draws=draws, name=name)
    source = {"file": name, **pdraws.source, "llm": pdraws.llm,
              "draws_used": pdraws.n_draws, "draws_available": pdraws.n_available}
    if is_path:  # which file, byte for byte
        source["file_sha256"] = hashlib.sha256(Path(name).read_bytes()).hexdigest()
    return pdraws, source


def posterior_parameters(pdraws: Any) -> dict[str, dict[str, Any]]:
    r"""What an assurance run simulated from: per parameter of equation (1) and for the
    LLMs' capabilities, the mean over the thinned draws (and LLMs) -- the plug-in value --, the
    sd, the 2.5 % and 97.5 % quantiles over draws :math:`s` of the LLM-averaged value
    :math:`\bar\theta_s = L^{-1}\sum_j \theta_{sj}`, and the mean per LLM."""
    out: dict[str, dict[str, Any]] = {}
    fields = {f: np.asarray(getattr(pdraws.params, f), dtype=float)
              for f in ("alpha", "gamma", "delta", "sigma")}
    fields["capability"] = np.asarray(pdraws.capability, dtype=float)
    for f, v in fields.items():  # (draw, llm)
        avg = v.mean(1)
        out[f] = {"mean": float(v.mean()), "sd": float(avg.std(ddof=1)) if avg.size > 1
                  else 0.0, "q2.5": float(np.quantile(avg, 0.025)),
                  "q97.5": float(np.quantile(avg, 0.975)),
                  "per_llm": {str(n): float(m) for n, m in zip(pdraws.llm, v.mean(0),
                                                                  strict=True)}}
    return out


def _params_attrs(base: Params, pdraws: Any) -> dict[str, str]:
    """The parameters a curve really used: the study's, or a posterior's means and draws."""
    if pdraws is None:
        return {"params": json.dumps(base.to_dict()), "params_source": "study",
                "posterior_params": json.dumps(None)}
    post = posterior_parameters(pdraws)
    return {"params": json.dumps({f: post[f]["mean"] for f in ("alpha", "gamma", "delta",
                                                               "sigma")}),
            "params_source": "posterior means (plug-in); assurance: every draw",
            "posterior_params": json.dumps(post)}


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
    story_design: str | None = None,
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
        ``{dimension: values}``, one dimension of :data:`tomstats.simulation.study.ALONG`, e.g.
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
    items_per_cell, story_design, n_llms, capability_sd, path, correction
        See :class:`tomstats.simulation.study.PowerSpec`.
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
                                   target=target, items_per_cell=items_per_cell,
                                   story_design=story_design, n_llms=n_llms,
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
    plans = [plan_curve(c, s_, pdraws, fixed) for c, s_, fixed in curve_variants(cfg, spec)]
    if spec.by is not None:  # name the curve on its progress bar
        plans = [dataclasses.replace(
                     p, label=f"power {spec.by}={as_number(v)} ({i + 1}/{len(plans)})")
                 for i, (p, v) in enumerate(zip(plans, spec.by_values, strict=True))]
    check_footprint(sum((p.footprint for p in plans[1:]), plans[0].footprint),
                    allow_large=allow_large)
    results = [_execute(p, source, allow_failures, keep_data, progress) for p in plans]
    if spec.by is None:
        return PowerResult(results[0])
    ds = xr.concat(results, dim=pd.Index(list(spec.by_values), name="by_value"),
                   combine_attrs="override")
    # the settings of the whole run, not of its first curve
    ds.attrs.update(by=spec.by, by_values=json.dumps([as_number(v) for v in spec.by_values]),
                    items_per_cell=json.dumps(spec.items_per_cell),
                    n_llms=json.dumps(spec.n_llms), **_params_attrs(cfg.params, pdraws),
                    design=json.dumps(cfg.design.to_dict()),
                    seconds=float(sum(r.attrs["seconds"] for r in results)))
    if spec.by in ("items_per_cell", "n_llms"):
        ds.attrs[spec.by] = json.dumps(None)
    return PowerResult(ds)


def _execute(plan: CurvePlan, source: Any, allow_failures: bool, keep_data: bool,
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
    ds.attrs.update(
        along=spec.along, alpha=spec.alpha, replicates=int(spec.replicates),
        seed=int(spec.seed), target=spec.target, path=spec.path, correction=spec.correction,
        tests=json.dumps(list(spec.tests)), items_per_cell=json.dumps(spec.items_per_cell),
        story_design=spec.story_design,
        n_llms=json.dumps(spec.n_llms), capability_sd=plan.cap_sd,
        **_params_attrs(base, plan.pdraws), design=json.dumps(design.to_dict()),
        posterior=json.dumps(source, default=str), tomstats_version=__version__,
        seconds=time.perf_counter() - t0,
        equation="logit p = beta0*m - alpha*c*ln(1+c/500) - gamma*t - delta*c*t + eps",
    )
    return ds


def _kept_data(spec: PowerSpec, tests: tuple[PlannedTest, ...], design: Design,
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


#: Rough first-run compilation time (s) of one study program, by its slowest analysis.
_COMPILE_SECONDS = {"anova": 3, "rm-anova": 5, "glm": 8, "glmm": 15}
_COMPILED: set[tuple[int, int]] = set()


def _announce_compilation(run: Any, chunk: int, tests: Sequence[PlannedTest],
                          bar: Any) -> None:
    """Say so on the progress bar's stream before a program is compiled for a new shape
    (the bar stands still meanwhile); each shape is compiled once per process."""
    if (id(run), chunk) in _COMPILED:
        return
    _COMPILED.add((id(run), chunk))
    seconds = max(_COMPILE_SECONDS.get(t.analysis, 5) for t in tests)
    bar.write(f"compiling the study program, about {seconds} s, once per shape", file=bar.fp)


def _simulate_all(spec: PowerSpec, tests: tuple[PlannedTest, ...], design: Design,
                  settings: list[StudySize], kinds: list[tuple[str, Any]], base: Params,
                  capability: np.ndarray, cap_sd: float, allow_failures: bool,
                  progress: bool | None, fixed: Mapping[str, float] | None = None,
                  desc: str = "power") -> dict[tuple[int, int, str], Any]:
    """Run every (kind, value): {(kind, value, test): (reject, ok, estimate)} and
    {(kind, value, "successes"): counts}."""
    key = make_key(int(spec.seed))
    R = int(spec.replicates)
    out: dict[tuple[int, int, str], tuple[np.ndarray, ...]] = {}
    total = R * len(settings) * len(kinds)
    # a multi-process run: each process simulates its share [lo, hi) of the R studies (study
    # r keeps key r and parameters r), then the statistics are gathered (docs/cluster.md)
    lo, hi = _distributed.share(R)
    scale = R / max(hi - lo, 1)
    progress = _distributed.progress_allowed(progress)
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
                run = study_program(design, st, tests, spec.path)
                per_study = st.n_llms * design.shape[0] * design.shape[1] * (
                    st.items or st.n if per_item(st, tests)
                    else 1)
                chunk = max(1, min(R, CELLS_PER_CHUNK // max(per_study, 1)))
                if any(t.analysis not in ("anova", "rm-anova") for t in tests):
                    # model fits are data-dependent loops: XLA's CPU runtime has been seen to
                    # stall for good on very large vmapped batches of them, so keep each
                    # dispatch moderate (the cost per study is the same)
                    chunk = min(chunk, FITS_PER_CHUNK)
                keys = jax.random.split(jax.random.fold_in(key, vi), R)
                if not bar.disable:
                    _announce_compilation(run, chunk, tests, bar)
                parts = []
                for s in range(lo, hi, chunk):
                    # every chunk has the same size (the last one padded with repeats of its
                    # last study, dropped after), so one compiled program serves them all
                    idx = np.minimum(np.arange(s, s + chunk), hi - 1)
                    th_sl = {f: jnp.asarray(v[idx], jnp.float64) for f, v in th.items()}
                    res = jax.device_get(run(keys[idx], th_sl, jnp.asarray(float(st.n))))
                    parts.append({k: v[: min(chunk, hi - s)] for k, v in res.items()})
                    bar.update(min(round(min(chunk, hi - s) * scale), total - bar.n))
                stat = _distributed.gather_rows(
                    {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                    if parts else {}, R)
                out[(ki, vi, "successes")] = stat["successes"]
                for t in tests:
                    rej, ok, est = decide(t, stat, spec.alpha, st.n, design.shape, st.n_llms,
                                           spec.correction)
                    n_fail = int((~ok).sum())
                    if n_fail > _MAX_FAIL * ok.size and not allow_failures:
                        raise PowerFailureError(
                            f"{n_fail} of {ok.size} fits of test {t.name!r} failed at "
                            f"{spec.along} = {as_number(value)} ({100 * n_fail / ok.size:.1f} %, "
                            f"more than {100 * _MAX_FAIL:.0f} %): power among the others would "
                            "be biased. Failed fits are never counted as 'not significant'. "
                            "Pass allow_failures=True (--allow-failures) to report power among "
                            "the valid fits, or change the design (more questions per cell).")
                    out[(ki, vi, t.name)] = (rej, ok, est)
    return out


def _dataset(spec: PowerSpec, tests: tuple[PlannedTest, ...], design: Design,
             settings: list[StudySize], kinds: list[tuple[str, Any]],
             stats: Mapping[tuple[int, int, str], tuple[np.ndarray, ...]], pdraws: Any,
             capability: np.ndarray) -> xr.Dataset:
    K, V, T = len(kinds), len(settings), len(tests)
    shape = (K, V, T)
    arr = {k: np.full(shape, np.nan) for k in ("power", "estimate", "n_fits", "n_failed",
                                               "n_rejected")}
    fixed = spec.n_llms is None and spec.along != "n_llms"
    llm = (list(pdraws.llm) if pdraws is not None else
           [f"m={as_number(m)}" for m in capability]) if fixed else []
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


