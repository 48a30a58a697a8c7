"""Parameter recovery of the structural GLMM: coverage of 50 % and 95 % posterior intervals.

Each dataset is simulated from equation (1), :func:`tomstats.model.linear_predictor` (the
one definition the simulator and both GLMM backends use), with the structure the fitted
model assumes: ``n_llm`` LLMs answer the same items of the paper's 5 × 3 design (context
200–5000 words × ToM order 0/1/2, ``n_per_cell`` items a cell), each item has one logit
intercept :math:`\\varepsilon_k\\sim N(0,\\sigma^2)` shared by every LLM (the simulator's
``simulate_questions(latent=True, shared_items=True)`` layout), and

.. math::

    y_{jk}\\sim\\operatorname{Bernoulli}\\big(\\operatorname{logit}^{-1}(\\beta_0 m_j
        - \\alpha c_k\\ln(1+c_k/500) - \\gamma t_k - \\delta c_k t_k + \\varepsilon_k)\\big).

The structural model is then fitted with its default priors and ``hierarchical="auto"``
(independent capabilities :math:`m_j\\sim N(1,1)` below 5 LLMs, pooled from 5 on), so the
fitted model *is* the data-generating model. The true parameters come from ``--truth``:

``prior`` (default)
    drawn from the fitted model's own priors (:class:`tomstats.glmm.StructuralSpec`
    defaults, read from the spec). This is simulation-based calibration: for a correct
    sampler, the central ``q`` interval covers the truth with probability exactly ``q``
    averaged over datasets, so 95 % intervals must cover in 95 % ± MC error of datasets.
``paper-range``
    drawn uniformly from the ranges the paper studies: γ ∈ [0.3, 2.4] and α ∈ [2e-5, 2e-4]
    (its 7 × 7 sensitivity grid), δ ∈ [0, 4.65e-4] (0 to twice the paper's), σ ∈
    [0.3, 1.0], capabilities ∈ [0.7, 1.3] (its five levels). A frequentist check at
    realistic values: nominal coverage is expected only approximately (the priors are
    weakly informative, not flat).
``paper``
    fixed at :data:`tomstats.simulation.paper.PAPER_PARAMS` with capabilities evenly spaced in
    [0.8, 1.2]: coverage at one point of the parameter space.

The Monte Carlo standard error of a coverage estimate from ``n`` datasets is
:math:`\\sqrt{0.95\\cdot0.05/n}` (3.1 points at n = 50, 1.5 at n = 200).

Sampling uses NumPyro's NUTS kernel on :func:`tomstats.glmm.numpyro_backend.structural_model`
(the model function :func:`tomstats.glmm.fit` samples), with the data passed as arguments
of one compiled program, so all datasets of one shape share a single compilation (a fresh
``fit`` call recompiles, ~10–20 s a dataset); warm-up adapts the step size and a diagonal
mass matrix as in ``fit``, chains start uniformly in (−2, 2) on the unconstrained scale
(NumPyro's default). ``--via-fit`` fits each dataset with :func:`tomstats.glmm.fit`
instead (slow; for spot checks).

Resumable: each dataset's result is written to ``OUT/datasets/ds_#####.json`` (atomically)
and skipped on a rerun, so the study can be run in chunks::

    python benchmarks/glmm_recovery.py --n-datasets 200 --out out/recovery
    python benchmarks/glmm_recovery.py --summary-only --out out/recovery

The summary (``OUT/coverage.csv``, ``OUT/summary.json``, printed table) covers every
dataset found in ``OUT/datasets``. With ``--write-docs`` its Markdown table (:data:`COLUMNS`,
one row a parameter) also goes into docs/glmm-real-data.md between this script's markers for
the part named by the folder (``--out out/recovery_v2/prior`` → ``[prior]``), with the
command, machine and date (``benchmarks/_docs.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _docs

#: Number of LLMs (crossed with the items) per dataset.
N_LLM = 3
#: Questions per design cell (5 × 3 cells → 15·n items, 15·n·N_LLM rows).
N_PER_CELL = 6
PARAM_NAMES = ("alpha", "gamma", "delta", "sigma")
TRUTH_MODES = ("prior", "paper-range", "paper")
#: Uniform ranges of ``--truth paper-range``.
PAPER_RANGES = {"alpha": (2e-5, 2e-4), "gamma": (0.3, 2.4), "delta": (0.0, 4.65e-4),
                "sigma": (0.3, 1.0), "capability": (0.7, 1.3)}


def _draw(prior: Any, rng: np.random.Generator, size: int | None = None) -> Any:
    """One draw (or ``size``) from a backend-neutral :class:`tomstats.glmm.Prior`."""
    p = dict(prior.params)
    if prior.dist == "normal":
        return rng.normal(p["loc"], p["scale"], size)
    if prior.dist == "half_normal":
        return np.abs(rng.normal(0.0, p["scale"], size))
    if prior.dist == "student_t":
        return p["loc"] + p["scale"] * rng.standard_t(p["df"], size)
    if prior.dist == "half_student_t":
        return np.abs(p["scale"] * rng.standard_t(p["df"], size))
    if prior.dist == "exponential":
        return rng.exponential(1.0 / p["rate"], size)
    raise ValueError(f"cannot draw from prior {prior}")


def draw_truth(mode: str, rng: np.random.Generator, n_llm: int = N_LLM) -> dict[str, Any]:
    """True ``alpha, gamma, delta, sigma`` and ``capability`` (array of ``n_llm``)."""
    if mode == "prior":
        from tomstats.glmm import StructuralSpec
        from tomstats.glmm.data import HIERARCHY_MIN_LLMS

        spec = StructuralSpec()  # the defaults the fit uses
        pr = spec.prior
        if n_llm >= HIERARCHY_MIN_LLMS:   # hierarchical="auto" pools from 5 LLMs
            mu, sd = _draw(pr("capability_mu"), rng), _draw(pr("capability_sd"), rng)
            cap = mu + sd * rng.standard_normal(n_llm)
        else:
            cap = _draw(pr("capability_mu"), rng, n_llm)
        return {"alpha": spec.alpha_scale * float(_draw(pr("alpha_scaled"), rng)),
                "gamma": float(_draw(pr("gamma"), rng)),
                "delta": spec.delta_scale * float(_draw(pr("delta_scaled"), rng)),
                "sigma": float(_draw(pr("sigma_item"), rng)), "capability": np.asarray(cap)}
    if mode == "paper-range":
        u = {k: v for k, v in PAPER_RANGES.items() if k != "capability"}
        out: dict[str, Any] = {k: float(rng.uniform(*v)) for k, v in u.items()}
        out["capability"] = rng.uniform(*PAPER_RANGES["capability"], n_llm)
        return out
    if mode == "paper":
        from tomstats.simulation.paper import PAPER_PARAMS

        out = {k: float(getattr(PAPER_PARAMS, k)) for k in PARAM_NAMES}
        out["capability"] = np.linspace(0.8, 1.2, n_llm) if n_llm > 1 else np.ones(1)
        return out
    raise ValueError(f"truth must be one of {TRUTH_MODES}, got {mode!r}")


def simulate_dataset(index: int, *, truth: str = "prior", n_per_cell: int = N_PER_CELL,
                     n_llm: int = N_LLM,
                     seed: int = 20240) -> tuple[pd.DataFrame, dict[str, float]]:
    """Dataset ``index`` (seeded by ``(seed, index)``) in the GLMM's standard columns.

    Returns the long frame (``model``, ``item``, ``tom_order``, ``context_words``,
    ``correct``, and the latent ``eta``) and the true values keyed as in the posterior
    (``capability[m<j>]``).
    """
    from tomstats.design import paper_design
    from tomstats.model import Params, linear_predictor

    rng = np.random.default_rng([seed, index])
    tr = draw_truth(truth, rng, n_llm)
    design = paper_design()
    ctx = np.asarray(design.context, dtype=float)
    tom = np.asarray(design.tom, dtype=float)
    C, T, Q, J = ctx.size, tom.size, n_per_cell, n_llm
    eps = tr["sigma"] * rng.standard_normal((C, T, Q))           # one per item, shared
    params = Params(alpha=tr["alpha"], gamma=tr["gamma"], delta=tr["delta"], sigma=tr["sigma"])
    eta = np.asarray(linear_predictor(params, ctx[None, :, None, None], tom[None, None, :, None],
                                      tr["capability"][:, None, None, None], eps[None]),
                     dtype=float)                                 # (J, C, T, Q)
    y = rng.random(eta.shape) < 1.0 / (1.0 + np.exp(-eta))
    j, c, t, q = np.indices((J, C, T, Q)).reshape(4, -1)
    df = pd.DataFrame({
        "model": [f"m{i}" for i in j],
        "item": [f"c{a}t{b}q{d}" for a, b, d in zip(c, t, q, strict=True)],
        "tom_order": tom[t].astype(int),
        "context_words": ctx[c],
        "correct": y.reshape(-1).astype(np.int8),
        "eta": eta.reshape(-1),
    })
    out = {k: float(tr[k]) for k in PARAM_NAMES}
    out.update({f"capability[m{i}]": float(v) for i, v in enumerate(tr["capability"])})
    return df, out


# --------------------------------------------------------------------------- sampler

_RUNNERS: dict[Any, Callable[..., Any]] = {}


def _runner(spec: Any, data: Mapping[str, Any], n_obs: int, *, chains: int, draws: int,
            tune: int, target_accept: float, max_tree_depth: int) -> Callable[..., Any]:
    """A compiled ``run(keys, arrays, y)``: NUTS chains on the structural model.

    ``data`` is :func:`tomstats.glmm.numpyro_backend.to_jax` output; its integer sizes are
    baked in, its arrays are arguments, so new datasets of the same shape reuse the
    compiled program.
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    from tomstats.glmm.numpyro_backend import model_function

    static = {k: v for k, v in data.items() if not hasattr(v, "shape")}
    arrays = {k: v for k, v in data.items() if hasattr(v, "shape")}
    shapes = tuple(sorted((k, tuple(v.shape), str(v.dtype)) for k, v in arrays.items()))
    key = (spec, tuple(sorted(static.items(), key=lambda kv: kv[0])), shapes, n_obs, chains,
           draws, tune, target_accept, max_tree_depth)
    if key in _RUNNERS:
        return _RUNNERS[key]
    model_fn = model_function(spec)

    def model(arrs: Mapping[str, Any], y: Any = None) -> None:
        model_fn(spec, {**arrs, **static}, y)

    y0 = jnp.zeros(n_obs, dtype=jnp.int32)
    info, pe_gen, post_gen, _ = initialize_model(jax.random.PRNGKey(0), model,
                                                 model_args=(arrays, y0), dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=pe_gen, algo="NUTS")
    leaves0, tree = jax.tree.flatten(info.z)

    def one_chain(rng_key: Any, arrs: Mapping[str, Any], y: Any) -> Any:
        k_init, k_run = jax.random.split(rng_key)
        ks = jax.random.split(k_init, len(leaves0))
        z0 = jax.tree.unflatten(tree, [jax.random.uniform(k, jnp.shape(v), minval=-2.0,
                                                          maxval=2.0)
                                       for k, v in zip(ks, leaves0, strict=True)])
        state = init_kernel(z0, num_warmup=tune, target_accept_prob=target_accept,
                            max_tree_depth=max_tree_depth, model_args=(arrs, y), rng_key=k_run)

        def step(st: Any, _: Any) -> Any:
            st = sample_kernel(st, model_args=(arrs, y))
            return st, (st.z, st.diverging, st.num_steps, st.energy, st.adapt_state.step_size)

        _, (z, div, n_steps, energy, step_size) = jax.lax.scan(step, state, None,
                                                               length=tune + draws)
        z = jax.tree.map(lambda v: v[tune:], z)
        post = jax.vmap(post_gen(arrs, y))(z)
        return post, div[tune:], n_steps[tune:], energy[tune:], step_size[tune:]

    run = jax.jit(jax.vmap(one_chain, in_axes=(0, None, None)))
    _RUNNERS.clear()  # keep one compiled program (datasets of a study share one shape)
    _RUNNERS[key] = run
    return run


def sample_posterior(df: pd.DataFrame, *, chains: int, draws: int, tune: int, seed: int,
                     target_accept: float = 0.9, max_tree_depth: int = 10) -> Any:
    """Fit the structural model (``fit``'s defaults) with the compiled NUTS runner.

    Returns an ``arviz.InferenceData`` with ``posterior`` (dims ``llm``, ``item``) and
    ``sample_stats`` (``diverging``, ``energy``, ``n_steps``, ``tree_depth``,
    ``reached_max_treedepth``, ``step_size``), enough for
    :func:`tomstats.glmm.check_diagnostics`.
    """
    import arviz as az
    import jax

    from tomstats.glmm.data import build_design, prepare_data
    from tomstats.glmm.numpyro_backend import to_jax

    spec, md = build_design("structural", prepare_data(df).reset_index(drop=True))
    data = to_jax(spec, md)
    run = _runner(spec, data, md.n_obs, chains=chains, draws=draws, tune=tune,
                  target_accept=target_accept, max_tree_depth=max_tree_depth)
    arrays = {k: v for k, v in data.items() if hasattr(v, "shape")}
    keys = jax.random.split(jax.random.PRNGKey(seed), chains)
    post, div, n_steps, energy, step_size = jax.device_get(
        run(keys, arrays, np.asarray(md.y, dtype=np.int32)))
    n_steps = np.asarray(n_steps, dtype=np.int64)
    stats = {"diverging": np.asarray(div, dtype=bool), "energy": np.asarray(energy, float),
             "n_steps": n_steps,
             "tree_depth": (np.floor(np.log2(np.maximum(n_steps, 1))) + 1).astype(np.int64),
             "reached_max_treedepth": n_steps >= 2**max_tree_depth - 1,
             "step_size": np.asarray(step_size, float)}
    dims = {"capability": ["llm"], "item_z": ["item"], "item_effect": ["item"]}
    idata = az.from_dict(posterior={k: np.asarray(v) for k, v in post.items()},
                         sample_stats=stats, coords=dict(md.coords), dims=dims)
    idata.attrs["max_tree_depth"] = max_tree_depth
    return idata


def fit_dataset(df: pd.DataFrame, truth: dict[str, float], *, chains: int, draws: int,
                tune: int, seed: int, via_fit: bool = False) -> dict[str, Any]:
    """Fit the structural model; per parameter: truth, mean, 50 %/95 % bounds, covered."""
    import arviz as az

    from tomstats.glmm import check_diagnostics, fit

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if via_fit:
            idata = fit(df.drop(columns=["eta"], errors="ignore"), "structural", chains=chains,
                        draws=draws, tune=tune, seed=seed, progress=False,
                        log_likelihood=False, posterior_predictive=False)
        else:
            idata = sample_posterior(df, chains=chains, draws=draws, tune=tune, seed=seed)
    seconds = time.perf_counter() - t0
    post = idata.posterior
    draws_of: dict[str, np.ndarray] = {
        "alpha": post["alpha"].to_numpy().ravel(),
        "gamma": post["gamma"].to_numpy().ravel(),
        "delta": post["delta"].to_numpy().ravel(),
        "sigma": post["sigma_item"].to_numpy().ravel(),
    }
    for llm in post["capability"].coords["llm"].values:
        draws_of[f"capability[{llm}]"] = post["capability"].sel(llm=llm).to_numpy().ravel()
    names = ["alpha_scaled", "gamma", "delta_scaled", "sigma_item", "capability"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summ = az.summary(idata, var_names=names, kind="diagnostics")
        report = check_diagnostics(idata)
    rows = []
    for name, v in draws_of.items():
        q = np.quantile(v, [0.025, 0.25, 0.75, 0.975])
        t = truth[name]
        rows.append({"param": name, "truth": t, "mean": float(v.mean()),
                     "sd": float(v.std(ddof=1)), "q025": float(q[0]), "q25": float(q[1]),
                     "q75": float(q[2]), "q975": float(q[3]),
                     "frac_below": float(np.mean(v < t)),
                     "cover50": bool(q[1] <= t <= q[2]), "cover95": bool(q[0] <= t <= q[3])})
    return {"params": rows, "seconds": seconds,
            "max_rhat": float(summ["r_hat"].max()), "min_ess_bulk": float(summ["ess_bulk"].min()),
            "divergences": int(idata.sample_stats["diverging"].to_numpy().sum()),
            "diagnostics_passed": bool(report.passed),
            "failed_checks": [c.line() for c in report.failed], "n_rows": int(len(df))}


# --------------------------------------------------------------------------- summary


def summarise(out: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Coverage table over every dataset result in ``out/datasets``."""
    files = sorted((out / "datasets").glob("ds_*.json"))
    if not files:
        raise SystemExit(f"no dataset results in {out / 'datasets'}")
    recs = [json.loads(f.read_text()) for f in files]
    rows = [dict(r, dataset=rec["index"]) for rec in recs for r in rec["params"]]
    df = pd.DataFrame(rows)
    df["group"] = np.where(df["param"].str.startswith("capability"), "capability (all LLMs)",
                           df["param"])

    def agg(g: pd.DataFrame) -> pd.Series:
        c95 = g["cover95"].mean()
        return pd.Series({"n": len(g), "cover50": g["cover50"].mean(), "cover95": c95,
                          "mcse95": float(np.sqrt(0.95 * 0.05 / len(g))),
                          "bias": (g["mean"] - g["truth"]).mean(),
                          "mean_width95": (g["q975"] - g["q025"]).mean()})

    table = pd.concat([df.groupby("param").apply(agg, include_groups=False),
                       df[df["group"] != df["param"]].groupby("group")
                       .apply(agg, include_groups=False)])
    settings = [json.dumps(r.get("settings", {}), sort_keys=True) for r in recs]
    summary = {
        "n_datasets": len(recs),
        "indices": [int(r["index"]) for r in recs],
        "seconds_per_fit_mean": float(np.mean([r["seconds"] for r in recs])),
        "max_rhat_worst": float(max(r["max_rhat"] for r in recs)),
        "min_ess_bulk_worst": float(min(r["min_ess_bulk"] for r in recs)),
        "datasets_with_divergences": int(sum(r["divergences"] > 0 for r in recs)),
        "datasets_failing_diagnostics": int(sum(not r["diagnostics_passed"] for r in recs)),
        "settings": json.loads(settings[0]),
        "mixed_settings": len(set(settings)) > 1,
        "coverage": {k: {c: float(v) for c, v in row.items()}
                     for k, row in table.iterrows()},
    }
    return table, summary


SCRIPT = "glmm_recovery.py"
#: The page that holds the tables written with --write-docs (one marked block per folder).
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "glmm-real-data.md"
#: The columns of the --write-docs table.
COLUMNS = ("parameter", "values", "50 % coverage", "95 % coverage", "MC se of 95 %",
           "bias (mean − truth)", "mean 95 % width")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-datasets", type=int, default=200)
    p.add_argument("--start", type=int, default=0, help="first dataset index")
    p.add_argument("--out", default="out/recovery")
    p.add_argument("--truth", choices=TRUTH_MODES, default="prior",
                   help="where the true parameters come from (see the module docstring)")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--n-per-cell", type=int, default=N_PER_CELL)
    p.add_argument("--n-llm", type=int, default=N_LLM)
    p.add_argument("--seed", type=int, default=20240)
    p.add_argument("--via-fit", action="store_true",
                   help="fit with tomstats.glmm.fit (recompiles per dataset; slow)")
    p.add_argument("--summary-only", action="store_true")
    p.add_argument("--write-docs", action="store_true",
                   help="also write the coverage table into docs/glmm-real-data.md, between "
                        "this script's markers for the --out folder's name, with the "
                        "command, machine and date (the datasets must have --n-llm LLMs)")
    return p


def row_keys(args: argparse.Namespace, part: str | None = None) -> list[str]:
    """The first cell of each row of the --write-docs table, in order."""
    if part is not None and part != Path(args.out).name:
        raise ValueError(f"part {part!r} is not the --out folder's name {Path(args.out).name!r}")
    return [*PARAM_NAMES, *(f"capability[m{j}]" for j in range(args.n_llm)),
            "capability (all LLMs)"]


def docs_table(table: pd.DataFrame, summary: Mapping[str, Any], args: argparse.Namespace
               ) -> str:
    """The coverage table in Markdown (rows :func:`row_keys`) and a line of diagnostics.

    Coverage = share of values whose central interval contains the truth; MC se =
    :math:`\\sqrt{0.95\\cdot0.05/n}` over the row's ``n`` values."""
    from _docs import markdown_table

    settings = summary["settings"]
    if summary["mixed_settings"] or settings.get("n_llm") != args.n_llm:
        raise SystemExit(f"--write-docs: the datasets in {args.out} were made with settings "
                         f"{settings} (mixed: {summary['mixed_settings']}); pass the same "
                         f"--n-llm ({settings.get('n_llm')}) and one set of settings")
    rows = [[key, f"{int(r['n']):,}", f"{r['cover50']:.3f}", f"{r['cover95']:.3f}",
             f"{r['mcse95']:.3f}", f"{r['bias']:.3g}", f"{r['mean_width95']:.3g}"]
            for key, r in ((k, table.loc[k]) for k in row_keys(args))]
    note = (f"\n{summary['n_datasets']} datasets (truth `{settings.get('truth')}`, "
            f"{settings.get('chains')} chains × {settings.get('draws')} draws after "
            f"{settings.get('tune')} warm-up, {settings.get('n_llm')} LLMs × "
            f"{settings.get('n_per_cell')} items a cell, seed {settings.get('seed')}); mean fit "
            f"{summary['seconds_per_fit_mean']:.1f} s; worst R-hat "
            f"{summary['max_rhat_worst']:.3f}; datasets with divergences "
            f"{summary['datasets_with_divergences']}; failing any diagnostic "
            f"{summary['datasets_failing_diagnostics']}.\n")
    return markdown_table(COLUMNS, rows) + note


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run (or resume) the recovery study and print the coverage table."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser()
    a = p.parse_args(argv)
    if a.n_datasets < 1 or a.start < 0 or a.n_per_cell < 1 or a.n_llm < 1:
        p.error("--n-datasets, --n-per-cell and --n-llm must be >= 1, --start >= 0")
    out = Path(a.out)
    if a.write_docs:  # before any fit: the page must have the folder's markers
        from _docs import require_markers

        require_markers(SCRIPT, DOCS_PAGE, out.name)
    (out / "datasets").mkdir(parents=True, exist_ok=True)
    from tomstats._io import atomic_write_text

    settings = {"truth": a.truth, "chains": a.chains, "draws": a.draws, "tune": a.tune,
                "n_per_cell": a.n_per_cell, "n_llm": a.n_llm, "seed": a.seed,
                "via_fit": a.via_fit}
    if not a.summary_only:
        for i in range(a.start, a.start + a.n_datasets):
            path = out / "datasets" / f"ds_{i:05d}.json"
            if path.exists():
                continue
            df, truth = simulate_dataset(i, truth=a.truth, n_per_cell=a.n_per_cell,
                                         n_llm=a.n_llm, seed=a.seed)
            res = fit_dataset(df, truth, chains=a.chains, draws=a.draws, tune=a.tune,
                              seed=a.seed + i, via_fit=a.via_fit)
            res.update(index=i, settings=settings, truth=truth)
            atomic_write_text(path, json.dumps(res, indent=1) + "\n")
            print(f"dataset {i}: {res['seconds']:.1f} s, max R-hat {res['max_rhat']:.3f}, "
                  f"95% covered {sum(r['cover95'] for r in res['params'])}/"
                  f"{len(res['params'])}", flush=True)
    table, summary = summarise(out)
    table.to_csv(out / "coverage.csv")
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    with pd.option_context("display.float_format", "{:.4g}".format, "display.width", 120):
        print(table.to_string())
    print(f"{summary['n_datasets']} datasets; mean fit time {summary['seconds_per_fit_mean']:.1f}"
          f" s; worst R-hat {summary['max_rhat_worst']:.3f}; datasets with divergences "
          f"{summary['datasets_with_divergences']}; failing any diagnostic "
          f"{summary['datasets_failing_diagnostics']}")
    if a.write_docs:
        from _docs import write_docs

        write_docs(SCRIPT, argv, docs_table(table, summary, a), page=DOCS_PAGE, part=out.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
