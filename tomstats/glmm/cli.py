"""``tomstats fit`` and ``tomstats calibrate``.

::

    tomstats fit LOG --model structural|"<formula>" --backend numpyro|pymc|pymc-numpyro \\
        --chains 4 --draws 1000 --out fit.nc [--force] [--seed S] \\
        [--map correct=is_correct,...] [--trials COL --successes COL] \\
        [--query "quality_flag != 'failed_run'"] [--errors drop|keep] [--allow-warnings] \\
        [--option item_effects=false --option 'fixed={"alpha": 0, "delta": 0}']
    tomstats fit LOG --model "correct ~ x + (1 | model) + (1 | item)" --backend laplace \\
        --out fit.json [--option se=conditional --option max_iter=200 --option engine=jax]
    tomstats calibrate fit.nc --out params.toml|params.json [--prob 0.95] [--force]

Exit status: 0 done; 4 the fit is written but its sampler diagnostics failed (or the
Laplace fit did not converge) and ``--allow-warnings`` was not given (re-running the same
command gives the same fit: change the settings it advises); 2 bad input (nothing written);
3 internal error. Every hint printed names a flag of this command
(:func:`tomstats.glmm._hints.cli_syntax`), never a Python keyword.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any

from tomstats._args import int_arg, seed_arg
from tomstats._cli_options import add_progress_argument, progress_wanted
from tomstats._expr import check_formula, parse_query
from tomstats._guards import Footprint, check_footprint
from tomstats._io import prepare_out_file
from tomstats.analysis.table import add_selection_arguments, apply_query, parse_mapping
from tomstats.cli import written_with_warnings
from tomstats.glmm._hints import cli_syntax
from tomstats.glmm.data import ERROR_POLICIES, _read_table, paired_table
from tomstats.glmm.fitting import BACKENDS, MAX_TREE_DEPTH, fit

# Lazy, each where it is used: ``fit --help`` and a Laplace fit need none of them. The
# samplers' tables and checks (ArviZ brings matplotlib and numba, ~1.5 s), the netCDF writer
# (xarray) and ``calibrate`` (the simulator's parameters, JAX) load for those commands only.

__all__ = ["add_fit_arguments", "run_fit", "add_calibrate_arguments", "run_calibrate",
           "parse_options"]


#: Spec options that are plain booleans (``aggregate`` and ``noncentered`` take more and are
#: checked by the spec).
BOOL_OPTIONS = ("item_effects", "hierarchical", "center", "correlated")
#: Words a boolean ``--option`` may be (case-insensitive).
_BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def parse_options(items: list[str] | None) -> dict[str, Any]:
    """``["item_effects=false", "fixed={\\"alpha\\": 0}"]`` → spec options (JSON values).

    A boolean option (:data:`BOOL_OPTIONS`) must be ``true``/``false``, ``yes``/``no`` or
    ``1``/``0``: ``item_effects=maybe`` is refused (it used to count as true).
    """
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--option: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if k in BOOL_OPTIONS and v.strip().lower() in _BOOL_WORDS:
            out[k] = _BOOL_WORDS[v.strip().lower()]
            continue
        try:
            out[k] = json.loads(v)
        except (json.JSONDecodeError, RecursionError):
            out[k] = v
        if k in BOOL_OPTIONS:
            raise ValueError(f"--option {k}={v}: expected true or false (also yes/no, 1/0)")
    return out


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats fit``."""
    p.add_argument("log", help="evaluation log: runner JSONL, CSV or parquet")
    p.add_argument("--model", default="structural",
                   help="'structural' (equation (1)) or an lme4-style formula, e.g. "
                        "\"correct ~ tom_order * log_context + (1 | model) + (1 | item)\"")
    p.add_argument("--backend", default="numpyro", choices=BACKENDS,
                   help="a NUTS sampler (Bayesian; default numpyro) or 'laplace' (maximum "
                        "likelihood as lme4's glmer: random intercepts, slopes, '||', nested "
                        "and crossed terms, cbind(); no sampler options; writes JSON). A "
                        "laplace fit runs interpreted (NumPy: no JAX to import or compile, "
                        "the faster start for one fit) up to 1,000 random effects, compiled "
                        "(JAX) above; --option engine=numpy|jax chooses")
    p.add_argument("--chains", type=int, default=4, help="Markov chains (default 4)")
    p.add_argument("--draws", type=int, default=1000,
                   help=f"draws per chain after tuning (at least {MIN_DRAWS}; default 1000)")
    p.add_argument("--tune", type=int, default=1000,
                   help="warm-up (tuning) draws per chain, discarded (default 1000)")
    p.add_argument("--seed", type=seed_arg, default=0,
                   help="random seed of the sampler (the same seed, the same draws; default 0)")
    p.add_argument("--cores", type=int, default=None,
                   help="CPU cores the chains may use at once (numpyro: one chain a thread, "
                        "default all usable CPUs; pymc: processes, default 1); never "
                        "changes the numpyro draws")
    p.add_argument("--target-accept", type=float, default=0.9,
                   help="NUTS target acceptance probability, in (0, 1): higher takes smaller "
                        "steps, fewer divergences, slower draws (default 0.9)")
    p.add_argument("--max-tree-depth", type=int_arg(1, MAX_TREE_DEPTH, " (a tree of depth d "
                                                   "takes up to 2**d - 1 gradients a draw)"),
                   default=10, help=f"NUTS maximum tree depth of the draws, 1 to "
                                    f"{MAX_TREE_DEPTH} (default 10)")
    p.add_argument("--family", choices=("bernoulli", "binomial"), default=None,
                   help="outcome family (default: from the columns: bernoulli with a "
                        "'correct' column, binomial with 'successes' and 'trials')")
    p.add_argument("--anova", choices=("II", "III", "none"), default=None,
                   help="--backend laplace: the joint Wald chi-square test of each "
                        "fixed-effect term printed after the summary, as car::Anova's "
                        "type II (default) or III (III depends on the contrasts: use "
                        "C(f, Sum)), or none")
    add_selection_arguments(p, ("correct", "successes", "trials", "model", "item", "story",
                                "tom_order", "context_words"), as_in_fit=False)
    p.add_argument("--trials", metavar="COL", help="column of binomial trials")
    p.add_argument("--successes", metavar="COL", help="column of binomial successes")
    p.add_argument("--errors", choices=ERROR_POLICIES, default="drop",
                   help="questions of the log that ended in an error (no answer, e.g. a "
                        "prompt longer than the context window): 'drop' leaves them out "
                        "(default; a note counts them), 'keep' scores them as incorrect; "
                        "recorded in the fit's provenance")
    p.add_argument("--paired", action="store_true",
                   help="fit paired outcomes: one binary row per LLM x pair_id x ToM order, "
                        "correct only when every version of the pair (its true- and "
                        "false-belief telling) is; item = the pair; incomplete units left out")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="spec option (JSON value), e.g. item_effects=false, "
                        "random_slopes='[\"tom_order\"]', aggregate=false")
    p.add_argument("--out", required=True,
                   help="output file, written atomically: netCDF for the samplers, .json for "
                        "--backend laplace; an existing file is refused unless --force")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--allow-large", action="store_true",
                   help="run even when the size guard estimates more memory than is available "
                        "or more than a day (chains × draws, and the pointwise "
                        "log-likelihood kept for LOO)")
    p.add_argument("--allow-warnings", action="store_true",
                   help="exit 0 even when sampler diagnostics fail (or the Laplace fit does "
                        "not converge); the warning is still printed")
    add_progress_argument(p, "the sampler's progress bar")


def run_fit(args: argparse.Namespace) -> int:
    """Run ``tomstats fit``: read, map, fit, check, save, print a summary.

    Returns 0, or 1 when the fit is written but its diagnostics failed (unless
    ``--allow-warnings``). Hints in error messages name this command's flags.
    """
    with cli_syntax():
        return _run_fit(args)


#: Posterior variables ``tomstats fit`` tabulates (and every ``sd_*``/``corr_*``).
_SUMMARY_VARS = ("alpha", "gamma", "delta", "sigma_item", "capability", "capability_mu",
                 "capability_sd", "gamma_llm", "alpha_llm", "beta")


def _run_fit(args: argparse.Namespace) -> int:
    out = prepare_out_file(args.out, force=args.force, field="--out")
    if args.backend == "laplace":
        _check_laplace_args(args)
    else:
        _check_sampler_sizes(args)
        _check_no_anova(args)
    columns = parse_mapping(args.map)
    if args.successes:
        columns["successes"] = args.successes
    if args.trials:
        columns["trials"] = args.trials
    options = parse_options(args.option)
    # the query and the formula are checked before the data are read
    query = parse_query(args.query) if args.query else None
    if "~" in args.model:
        check_formula(args.model)
        if args.backend != "laplace" and args.model.split("~", 1)[0].strip().startswith(
                "cbind"):
            raise ValueError(f"--model {args.model[:80]!r}: cbind() is read by --backend "
                             "laplace; for a sampler write the binomial outcome as "
                             "'successes | trials(n) ~ ...'")
    # only the columns the fit reads (the formula's or the structural model's, the mapping's
    # and the query's)
    paired = getattr(args, "paired", False)
    df = _read_table(args.log, errors=args.errors, model=args.model, columns=columns,
                     query=query, paired=paired)
    _note_errors(df, args)
    df = apply_query(df, query)
    if paired:
        from tomstats.analysis.paired import incomplete_note

        df = paired_table(df, columns, errors=args.errors)
        columns = {}  # the units carry the standard names
        print(f"tomstats fit: note: {incomplete_note(df.attrs['paired'])} (a unit is right "
              "when every version of its pair is)", file=sys.stderr)
    if args.backend == "laplace":
        return _run_laplace(args, df, columns, options, out)
    _check_sampler_sizes(args, len(df))
    from tomstats.glmm.diagnostics import DiagnosticsWarning, check_diagnostics
    from tomstats.glmm.fitting import save_fit
    from tomstats.glmm.header import fit_header
    from tomstats.glmm.prior_width import prior_dominated_note

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)  # reported below instead
        idata = fit(df, args.model, args.backend, chains=args.chains, draws=args.draws,
                    tune=args.tune, seed=args.seed, target_accept=args.target_accept,
                    max_tree_depth=args.max_tree_depth, cores=args.cores,
                    family=args.family, progress=progress_wanted(args), columns=columns,
                    **options)
    save_fit(idata, out)
    names = [v for v in idata.posterior.data_vars
             if v in _SUMMARY_VARS or v.startswith(("sd_", "corr_"))] or None
    print(fit_header(idata))
    print(summary_text(idata, names))
    prior_only = prior_dominated_note(idata)
    if prior_only:
        print(f"note: {prior_only}")
    report = check_diagnostics(idata)
    print(f"wrote {out}")
    if report.passed:
        print(report.message())
        return 0
    print(report.message(syntax="cli"), file=sys.stderr)
    what = (f"{len(report.failed)} of {len(report.checks)} sampler diagnostics failed "
            f"({', '.join(c.name for c in report.failed)}); {out} is written but its "
            f"estimates may be unreliable")
    return written_with_warnings("fit", what, allow_warnings=args.allow_warnings,
                                 advice="see the advice above")


def _note_errors(df: Any, args: argparse.Namespace) -> None:
    """One line on stderr about the log's errored questions (none: silent)."""
    info = df.attrs.get("errored_questions") or {}
    n = int(info.get("n", 0))
    if not n:
        return
    if args.errors == "drop":
        print(f"tomstats fit: note: {n} question(s) of {args.log} ended in an error (no "
              f"answer) and are left out; pass --errors keep to score them as incorrect",
              file=sys.stderr)
    else:
        print(f"tomstats fit: note: {n} question(s) of {args.log} ended in an error (no "
              f"answer) and are scored as incorrect (--errors keep)", file=sys.stderr)


def _sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits: 0.000213, not 0.000."""
    if x is None or not math.isfinite(float(x)):
        return "nan"
    return format(float(x), f".{digits}g")


def summary_text(idata: Any, var_names: list[str] | None = None,
                 prob: float | None = None) -> str:
    """The posterior table ``tomstats fit`` prints, to three significant digits.

    Columns: posterior mean, sd, the ``prob`` highest-density interval (default
    :data:`~tomstats.glmm.diagnostics.INTERVAL_PROB`, the fit report's), bulk and tail ESS,
    R-hat. Estimates keep three significant digits, so a small effect (α per word ≈ 2e-4)
    never prints as ``0.000``; a header line states the interval. Of a correlation matrix
    ``corr_*`` only the upper triangle is shown (the diagonal is 1 by construction, the lower
    triangle repeats the upper one).
    """
    import arviz as az
    import pandas as pd

    from tomstats.glmm.diagnostics import INTERVAL_PROB, arviz_log_quiet

    prob = INTERVAL_PROB if prob is None else prob
    with az.rc_context({"plot.max_subplots": 40}), warnings.catch_warnings(), \
            arviz_log_quiet():
        # constant draws (a correlation's diagonal) make ArviZ's R-hat divide 0 by 0
        warnings.simplefilter("ignore", RuntimeWarning)
        tab = az.summary(idata, var_names=var_names, hdi_prob=prob, round_to="none")
    tab = tab.drop(index=[n for n in _redundant_correlations(idata) if n in tab.index])
    lo, hi = tab.columns[2], tab.columns[3]  # hdi_3%, hdi_97%
    one_chain = int(idata.posterior.sizes["chain"]) == 1
    shown = {
        "mean": tab["mean"].map(_sig), "sd": tab["sd"].map(_sig),
        lo: tab[lo].map(_sig), hi: tab[hi].map(_sig),
        "ess_bulk": tab["ess_bulk"].map(lambda v: "nan" if v != v else f"{v:.0f}"),
        "ess_tail": tab["ess_tail"].map(lambda v: "nan" if v != v else f"{v:.0f}"),
        # R-hat compares chains: with one chain it is not defined ("n/a"), not missing
        "r_hat": tab["r_hat"].map(lambda v: "n/a" if one_chain else "nan" if v != v
                                  else f"{v:.3f}"),
    }
    table = pd.DataFrame(shown, index=tab.index)
    head = (f"posterior mean, sd and {prob:.0%} HDI (highest-density interval, columns "
            f"{lo}–{hi}; the fit report uses the same), 3 significant digits")
    return head + "\n" + table.to_string()


def _redundant_correlations(idata: Any) -> set[str]:
    """ArviZ row names of every ``corr_*`` element on or below the diagonal."""
    out: set[str] = set()
    post = idata.posterior
    for name, da in post.data_vars.items():
        dims = [d for d in da.dims if d not in ("chain", "draw")]
        if not str(name).startswith("corr_") or len(dims) != 2:
            continue
        rows = [str(v) for v in (post[dims[0]].values if dims[0] in post.coords
                                 else range(da.sizes[dims[0]]))]
        cols = [str(v) for v in (post[dims[1]].values if dims[1] in post.coords
                                 else range(da.sizes[dims[1]]))]
        out.update(f"{name}[{a}, {b}]" for i, a in enumerate(rows)
                   for k, b in enumerate(cols) if k <= i)
    return out


#: ``tomstats fit`` arguments that configure a sampler, with their defaults.
_SAMPLER_ARGS = {"chains": 4, "draws": 1000, "tune": 1000, "seed": 0, "cores": None,
                 "target_accept": 0.9, "max_tree_depth": 10}


#: Fewest draws per chain the diagnostics (split R-hat, ESS, E-BFMI) can be computed from.
MIN_DRAWS = 4
#: Rough seconds of one NUTS iteration per chain and data row (a 2**5-step tree), and floor.
_SECONDS_PER_ROW_ITER, _SECONDS_PER_ITER = 2e-7, 1e-3


def fit_footprint(chains: int, draws: int, tune: int, n_rows: int = 1,
                  cores: int | None = None) -> Footprint:
    """Memory and time of a sampler fit: the posterior and the pointwise log-likelihood.

    Memory: :math:`8 \\cdot C \\cdot D \\cdot (N + 64)` bytes (the log-likelihood of each of
    the :math:`N` rows kept for LOO, and the parameters); time: :math:`C (D + T)
    \\max(10^{-3}, 2\\times10^{-7} N)` s over the cores.
    """
    c, d, t, n = (max(int(v), 0) for v in (chains, draws, tune, n_rows))
    per_iter = max(_SECONDS_PER_ITER, _SECONDS_PER_ROW_ITER * n)
    return Footprint("fit", 8.0 * c * d * (n + 64), c * (d + t) * per_iter / max(1, cores or 1),
                     f"{c:,} chains × {d:,} draws (+ {t:,} tuning) × {n:,} rows")


def _check_sampler_sizes(args: argparse.Namespace, n_rows: int = 1) -> None:
    """``--chains``/``--draws``/``--tune`` in range and within the size guard (before work, and
    again with the number of rows once the table is read)."""
    for name, v, low in (("--chains", args.chains, 1), ("--draws", args.draws, MIN_DRAWS),
                         ("--tune", args.tune, 0)):
        if v < low:
            raise ValueError(f"{name} must be at least {low}, got {v}"
                             + (" (R-hat, ESS and E-BFMI need several draws per chain)"
                                if name == "--draws" else ""))
    check_footprint(fit_footprint(args.chains, args.draws, args.tune, n_rows, args.cores),
                    allow_large=args.allow_large, flag="--allow-large")


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


def _check_no_anova(args: argparse.Namespace) -> None:
    """``--anova`` belongs to ``--backend laplace`` (a Wald test needs the estimates'
    covariance of a maximum-likelihood fit)."""
    if getattr(args, "anova", None) is not None:
        raise ValueError(f"--anova {args.anova}: the Wald tests per term are printed for "
                         f"--backend laplace (maximum likelihood); a sampler's fit has "
                         f"posterior intervals instead (leave --anova out, or add "
                         f"--backend laplace)")


def _run_laplace(args: argparse.Namespace, df: Any, columns: dict[str, str],
                 options: dict[str, Any], out: Any) -> int:
    """Fit by maximum likelihood, write JSON, print an lme4-like summary.

    Exit status 0, or 1 (the JSON is written, its ``converged`` false) when the fit did not
    converge; the last line printed (stderr) says so.
    """
    from tomstats.glmm.lme_result import LaplaceConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaplaceConvergenceWarning)  # reported below instead
        res = fit(df, args.model, "laplace", family=args.family, columns=columns, **options)
    path = res.to_json(out)
    print(str(res))
    kind = getattr(args, "anova", None) or "II"
    if kind != "none":
        from tomstats.glmm.lme_result import wald_text

        try:
            text = wald_text(res, kind)
        except ValueError as exc:  # a fixed part whose terms the table cannot name
            print(f"tomstats fit: note: no Wald tests per term: {exc}", file=sys.stderr)
            text = ""
        if text:
            print("\n" + text)
    print(f"wrote {path}")
    if not res.converged:
        separated = getattr(res, "separation", ())
        what = (f"the data are separated by {', '.join(separated)} (fitted probabilities "
                f"numerically 0 or 1): their estimates are infinite; {path} records "
                f"converged=false and the separating terms"
                if separated else
                f"the Laplace fit did not converge after {res.iterations} iteration(s); "
                f"{path} records converged=false and its estimates are unreliable")
        advice = ("drop or merge the separating level, or fit with a sampler backend, whose "
                  "priors keep estimates finite" if separated else
                  "try --option max_iter=..., rescaled predictors or simpler random effects")
        return written_with_warnings("fit", what, allow_warnings=args.allow_warnings,
                                     advice=advice)
    return 0


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats calibrate``."""
    p.add_argument("fit", help="netCDF written by 'tomstats fit' (structural model)")
    p.add_argument("--out", required=True,
                   help="parameters file, format by suffix: .toml (a simulation file that "
                        "'tomstats simulate' reads) or .json (means, sds and intervals); an "
                        "existing file is refused unless --force")
    p.add_argument("--prob", type=float, default=0.95,
                   help="probability of the central (equal-tailed) intervals (default 0.95)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--allow-warnings", action="store_true",
                   help="use a fit that failed its own checks (divergences, R-hat, ESS; "
                        "refused otherwise)")


def run_calibrate(args: argparse.Namespace) -> int:
    """Run ``tomstats calibrate``: posterior draws → simulator parameters with intervals."""
    with cli_syntax():
        return _run_calibrate(args)


def _run_calibrate(args: argparse.Namespace) -> int:
    from tomstats.glmm.calibrate import params_format, posterior_summary, write_params
    from tomstats.glmm.verdict import failed_checks_note, load_sound_fit

    params_format(args.out, field="--out")  # the suffix, before any work
    _require_sampler_fit(args.fit)
    if not 0 < args.prob < 1:
        raise ValueError(f"--prob must be in (0, 1), got {args.prob!r}")
    idata, failed = load_sound_fit(args.fit, allow_warnings=args.allow_warnings, field="fit")
    out = prepare_out_file(args.out, force=args.force, field="--out")
    if failed:
        print(f"tomstats calibrate: warning: {failed_checks_note(failed, args.fit)}",
              file=sys.stderr)
    s = posterior_summary(idata, args.prob)
    path = write_params(idata, out, prob=args.prob)
    for name, r in s.iterrows():
        print(f"{name:>6} = {r['mean']:.4g}  [{r['lower']:.4g}, {r['upper']:.4g}]")
    print(f"({args.prob:.0%} central intervals)")
    print(f"wrote {path}")
    return 0


def _require_sampler_fit(path: str) -> None:
    """``calibrate`` reads a structural sampler fit (netCDF): a maximum-likelihood fit's JSON
    (by its ``.json`` suffix or the format it names, whatever its suffix) is refused with
    what to run instead (read as netCDF it gave the netCDF library's ``Unknown file
    format``)."""
    from pathlib import Path

    from tomstats.glmm.fit_file import ML_FORMATS, is_ml_fit

    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return  # the fit reader names what is wrong
    if is_ml_fit(p) or (head.lstrip().startswith(b"{")
                        and any(f'"{f}"'.encode() in head for f in ML_FORMATS)):
        raise ValueError(f"fit {path!r} is a maximum-likelihood (--backend laplace) fit's "
                         f"JSON; calibrate needs a structural sampler fit (netCDF), made with "
                         f"tomstats fit LOG --model structural --out fit.nc")
