"""``tomstats fit`` and ``tomstats calibrate``.

::

    tomstats fit LOG --model structural|"<formula>" --backend numpyro|pymc|pymc-numpyro \\
        --chains 4 --draws 1000 --out fit.nc [--seed S] [--map correct=is_correct,...] \\
        [--trials COL --successes COL] [--query "quality_flag != 'failed_run'"] \\
        [--option item_effects=false --option 'fixed={"alpha": 0, "delta": 0}']
    tomstats fit LOG --model "correct ~ x + (1 | model) + (1 | item)" --backend laplace \\
        --out fit.json [--option se=conditional --option max_iter=200]
    tomstats calibrate fit.nc --out params.toml [--prob 0.95]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_fit_arguments", "run_fit", "add_calibrate_arguments", "run_calibrate",
           "parse_mapping", "parse_options"]


def parse_mapping(items: list[str] | None) -> dict[str, str]:
    """``["correct=is_correct,model=run_dir", ...]`` → ``{"correct": "is_correct", ...}``."""
    out: dict[str, str] = {}
    for item in items or []:
        for pair in item.split(","):
            pair = pair.strip()
            if not pair:
                continue
            if pair.count("=") != 1 or not all(s.strip() for s in pair.split("=")):
                raise ValueError(f"--map: expected STANDARD=COLUMN pairs, got {pair!r}")
            k, v = (s.strip() for s in pair.split("="))
            out[k] = v
    return out


def parse_options(items: list[str] | None) -> dict[str, Any]:
    """``["item_effects=false", "fixed={\\"alpha\\": 0}"]`` → spec options (JSON values)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--option: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats fit``."""
    from tomstats.glmm.fit import BACKENDS

    p.add_argument("log", help="evaluation log: runner JSONL, CSV or parquet")
    p.add_argument("--model", default="structural",
                   help="'structural' (equation (1)) or an lme4-style formula, e.g. "
                        "\"correct ~ tom_order * log_context + (1 | model) + (1 | item)\"")
    p.add_argument("--backend", default="numpyro", choices=BACKENDS,
                   help="a NUTS sampler (Bayesian; default numpyro) or 'laplace' (maximum "
                        "likelihood as lme4's glmer; random intercepts only; no sampler "
                        "options)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", type=int, default=None,
                   help="CPU cores the chains may use at once (numpyro: one chain a thread, "
                        "default all usable CPUs; pymc: processes, default 1); never "
                        "changes the numpyro draws")
    p.add_argument("--target-accept", type=float, default=0.9)
    p.add_argument("--family", choices=("bernoulli", "binomial"), default=None)
    p.add_argument("--map", action="append", metavar="STD=COL,...",
                   help="rename columns to the standard names (correct, successes, trials, "
                        "model, item, tom_order, context_words)")
    p.add_argument("--trials", metavar="COL", help="column of binomial trials")
    p.add_argument("--successes", metavar="COL", help="column of binomial successes")
    p.add_argument("--query", metavar="EXPR",
                   help="keep only rows matching a pandas query, e.g. \"experiment == "
                        "'triplets'\"")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="spec option (JSON value), e.g. item_effects=false, "
                        "random_slopes='[\"tom_order\"]', aggregate=false")
    p.add_argument("--out", required=True,
                   help="output file, written atomically: netCDF for the samplers, .json for "
                        "--backend laplace")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run_fit(args: argparse.Namespace) -> int:
    """Run ``tomstats fit``: read, map, fit, check, save, print a summary."""
    import warnings

    import arviz as az

    from tomstats._io import ensure_writable_file
    from tomstats.glmm.data import read_table
    from tomstats.glmm.diagnostics import DiagnosticsWarning, check_diagnostics
    from tomstats.glmm.fit import fit, save_fit

    out = ensure_writable_file(args.out, field="--out")
    if args.backend == "laplace":
        _check_laplace_args(args)
    columns = parse_mapping(args.map)
    if args.successes:
        columns["successes"] = args.successes
    if args.trials:
        columns["trials"] = args.trials
    options = parse_options(args.option)
    df = read_table(args.log)
    if args.query:
        try:
            df = df.query(args.query)
        except Exception as exc:
            raise ValueError(f"--query {args.query!r}: {exc}") from exc
        if len(df) == 0:
            raise ValueError(f"--query {args.query!r} keeps no rows")
    if args.backend == "laplace":
        return _run_laplace(args, df, columns, options, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)  # reported below instead
        idata = fit(df, args.model, args.backend, chains=args.chains, draws=args.draws,
                    tune=args.tune, seed=args.seed, target_accept=args.target_accept,
                    cores=args.cores,
                    family=args.family, progress=not args.no_progress, columns=columns,
                    **options)
    save_fit(idata, out)
    names = [v for v in idata.posterior.data_vars
             if v in ("alpha", "gamma", "delta", "sigma_item", "capability", "capability_mu",
                      "capability_sd", "gamma_llm", "alpha_llm", "beta")
             or v.startswith(("sd_", "corr_"))] or None
    with az.rc_context({"plot.max_subplots": 40}):
        print(az.summary(idata, var_names=names, hdi_prob=0.95).to_string())
    report = check_diagnostics(idata)
    print(report.message(), file=sys.stderr if not report.passed else sys.stdout)
    print(f"wrote {out}")
    return 0


#: ``tomstats fit`` arguments that configure a sampler, with their defaults.
_SAMPLER_ARGS = {"chains": 4, "draws": 1000, "tune": 1000, "seed": 0, "cores": None,
                 "target_accept": 0.9}


def _check_laplace_args(args: argparse.Namespace) -> None:
    """``--backend laplace``: a .json ``--out`` and no sampler arguments (before any work)."""
    if not str(args.out).lower().endswith(".json"):
        raise ValueError(f"--out {args.out!r}: --backend laplace writes JSON; give a path "
                         f"ending in .json (netCDF is for the sampler backends)")
    changed = [f"--{k.replace('_', '-')}" for k, v in _SAMPLER_ARGS.items()
               if getattr(args, k) != v]
    if changed:
        raise ValueError(f"--backend laplace is a deterministic maximum-likelihood fit; the "
                         f"sampler argument(s) {', '.join(changed)} do not apply")


def _run_laplace(args: argparse.Namespace, df: Any, columns: dict[str, str],
                 options: dict[str, Any], out: Any) -> int:
    """Fit by maximum likelihood, write JSON, print an lme4-like summary.

    Exit status 0, or 1 (the JSON is written, its ``converged`` false) when the fit did not
    converge; the last line printed (stderr) says so.
    """
    import warnings

    from tomstats.glmm.fit import fit
    from tomstats.glmm.laplace_backend import LaplaceConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaplaceConvergenceWarning)  # reported below instead
        res = fit(df, args.model, "laplace", family=args.family, columns=columns, **options)
    path = res.to_json(out)
    print(str(res))
    print(f"wrote {path}")
    if not res.converged:
        print(f"tomstats fit: error: the Laplace fit did not converge after {res.iterations} "
              f"iteration(s); {path} records converged=false and its estimates are "
              f"unreliable (try --option max_iter=..., rescaled predictors or simpler "
              f"random effects)", file=sys.stderr)
        return 1
    return 0


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats calibrate``."""
    p.add_argument("fit", help="netCDF written by 'tomstats fit' (structural model)")
    p.add_argument("--out", required=True,
                   help="parameters file: .toml or .json (means, sds and intervals)")
    p.add_argument("--prob", type=float, default=0.95, help="interval probability")


def run_calibrate(args: argparse.Namespace) -> int:
    """Run ``tomstats calibrate``: posterior draws → simulator parameters with intervals."""
    from tomstats._io import ensure_writable_file
    from tomstats.glmm.calibrate import posterior_summary, write_params
    from tomstats.glmm.fit import load_fit

    ensure_writable_file(args.out, field="--out")
    idata = load_fit(args.fit)
    path = write_params(idata, args.out, prob=args.prob)
    s = posterior_summary(idata, args.prob)
    for k, v in s["params"].items():
        print(f"{k:>6} = {v['mean']:.4g}  [{v['lower']:.4g}, {v['upper']:.4g}]")
    for k, v in s["capability"].items():
        print(f"capability[{k}] = {v['mean']:.4g}  [{v['lower']:.4g}, {v['upper']:.4g}]")
    print(f"wrote {path}")
    return 0
