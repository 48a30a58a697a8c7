"""``tomstats contrasts``: which ToM orders differ, at which context lengths, by how much.

``tomstats contrasts LOG`` prints the marginal means of the ``--specs`` factors (within each
``--by`` level) and their contrasts — pairwise comparisons (Tukey by default), polynomial
trends (``--method poly``), interaction contrasts (``--interaction``) or the simple effects
of each factor within the others (``--simple``) — on the reference model of the log's ANOVA
(:func:`tomstats.analysis.contrasts.anova_grid`, the design options of ``tomstats anova``).
With ``--fit FIT`` the reference model is a GLMM of the same log instead: a
maximum-likelihood fit's JSON (:func:`tomstats.glmm.contrasts.fit_grid`; ``--scale`` picks
probabilities or logits and odds ratios) or a sampler fit's netCDF (posterior medians,
highest-density intervals and the probability of direction,
:func:`tomstats.glmm.contrasts.posterior_contrasts`).

The command lives with the GLMM stage because it reads GLMM fits; the ANOVA side is
:mod:`tomstats.analysis.contrasts` (the analysis stage never imports this one).
"""

from __future__ import annotations

import argparse
from typing import Any

import pandas as pd

from tomstats._io import atomic_write_text, prepare_out_file
from tomstats.analysis.marginal import ADJUSTMENTS, METHODS
from tomstats.analysis.table import add_selection_arguments, parse_mapping

__all__ = ["add_contrasts_arguments", "run_contrasts"]


def add_contrasts_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats contrasts``."""
    from tomstats.glmm.data import ERROR_POLICIES

    p.add_argument("log", help="evaluation log: the runner's JSONL, or a CSV/parquet table "
                               "with one row per question (with --fit: the log the fit was "
                               "made from)")
    p.add_argument("--fit", metavar="FIT", default=None,
                   help="reference model: a GLMM of this log (tomstats fit --out): a "
                        "maximum-likelihood JSON (--backend laplace) or a sampler netCDF "
                        "(default: none, the cell means of the log's ANOVA)")
    p.add_argument("--specs", nargs="+", metavar="COL", default=["tom_order"],
                   help="the factor(s) whose means are compared (default tom_order)")
    p.add_argument("--by", nargs="+", metavar="COL", default=None,
                   help="compare within each level of these factors: simple effects, e.g. "
                        "--specs tom_order --by context_words (default: none, averaged over "
                        "the other factors)")
    p.add_argument("--method", nargs="+", choices=METHODS, default=["pairwise"],
                   help="pairwise: every difference of two means; poly: orthogonal "
                        "polynomial trends over ordered levels (emmeans' integer "
                        "coefficients); with --interaction one per --specs factor "
                        "(default pairwise)")
    p.add_argument("--interaction", action="store_true",
                   help="interaction contrasts: the --method contrast of each --specs "
                        "factor multiplied, e.g. how the ToM-order difference changes "
                        "between context lengths")
    p.add_argument("--simple", action="store_true",
                   help="simple effects of each --specs factor within every level of the "
                        "others (ToM order within each context length and the reverse)")
    p.add_argument("--adjust", choices=ADJUSTMENTS, default=None,
                   help="multiplicity adjustment within each --by group: tukey (studentized "
                        "range), holm, bonferroni, fdr (Benjamini–Hochberg) or none "
                        "(default: tukey for pairwise comparisons, none otherwise, as "
                        "emmeans)")
    p.add_argument("--level", type=float, default=0.95,
                   help="coverage of the intervals (default 0.95; with a sampler fit: of "
                        "the highest-density intervals)")
    p.add_argument("--scale", choices=("response", "link"), default="response",
                   help="with a GLMM fit: response = probabilities and differences of "
                        "probabilities; link = logits and log odds ratios with odds ratios "
                        "(default response)")
    p.add_argument("--at", action="append", metavar="VAR=V1,V2,...", default=None,
                   help="with a GLMM fit: values of a numeric variable of the formula (a "
                        "grid factor when several), or the levels of a factor to keep "
                        "(default: numeric variables at their means, every level)")
    p.add_argument("--dv", default="correct", help="without --fit: the outcome column "
                                                   "(default correct, 0/1)")
    p.add_argument("--between", nargs="+", metavar="COL", default=None,
                   help="without --fit: between factors, as in tomstats anova (default: "
                        "context_words tom_order)")
    p.add_argument("--within", nargs="+", metavar="COL", default=None,
                   help="without --fit: within (repeated-measures) factors; the reference "
                        "model is then the multivariate model of the subject × cell means "
                        "(default: none)")
    p.add_argument("--subject", metavar="COL", default=None,
                   help="without --fit: the subject column (default model with --within)")
    p.add_argument("--paired", action="store_true",
                   help="without --fit: score paired units, as tomstats anova --paired")
    p.add_argument("--errors", choices=ERROR_POLICIES, default="drop",
                   help="with --fit: questions that ended in an error, as the fit read them "
                        "(default drop)")
    add_selection_arguments(p, ("correct", "model", "tom_order", "context_words", "item"))
    p.add_argument("--out", metavar="CSV",
                   help="also write the contrasts table as CSV (atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def _at(values: list[str] | None) -> dict[str, list[Any]]:
    """``--at VAR=V1,V2`` as ``{VAR: [numbers or text]}``."""
    out: dict[str, list[Any]] = {}
    for item in values or []:
        name, sep, rest = item.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise ValueError(f"--at {item!r}: write VAR=V1,V2,... (e.g. --at "
                             "log_context=5.3,8.5)")
        vals: list[Any] = []
        for v in rest.split(","):
            v = v.strip()
            try:
                num = float(v)
                vals.append(int(num) if num.is_integer() and "." not in v else num)
            except ValueError:
                vals.append(v)
        out[name.strip()] = vals
    return out


def _check_args(args: argparse.Namespace) -> None:
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1), got {args.level}")
    if args.simple and (args.interaction or args.by):
        raise ValueError("--simple compares each --specs factor within the others; it takes "
                         "no --by or --interaction")
    if args.simple and len(args.specs) < 2:
        raise ValueError("--simple needs two or more --specs factors, e.g. --specs tom_order "
                         "context_words")
    if args.fit is None:
        for flag, given in (("--at", args.at), ("--errors", args.errors != "drop")):
            if given:
                raise ValueError(f"{flag} applies with --fit only")
    elif args.within or args.between or args.subject or args.paired or args.dv != "correct":
        raise ValueError("--dv, --between, --within, --subject and --paired describe the "
                         "ANOVA's design; with --fit the fit's formula does")


def _tables(grid: Any, args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame]:
    from tomstats.analysis.marginal import contrasts, emmeans, simple_effects

    means = emmeans(grid, args.specs, args.by, level=args.level, scale=args.scale)
    if args.simple:
        table = simple_effects(grid, args.specs, method=args.method[0], adjust=args.adjust,
                               level=args.level, scale=args.scale)
    else:
        method = args.method if args.interaction else args.method[0]
        table = contrasts(grid, args.specs, args.by, method=method,
                          interaction=args.interaction, adjust=args.adjust, level=args.level,
                          scale=args.scale)
    return means, table


def run_contrasts(args: argparse.Namespace) -> int:
    """Run ``tomstats contrasts``: read, build the reference grid, print means and
    contrasts, write ``--out``."""
    from tomstats.analysis.marginal import describe_contrasts, describe_means, format_table

    _check_args(args)
    out = prepare_out_file(args.out, force=args.force) if args.out else None
    columns = parse_mapping(args.map)
    if args.fit is None:
        grid, head = _anova_grid(args, columns)
    else:
        grid, head = _fit_grid(args, columns)
        if grid is None:  # a sampler fit: posterior summaries
            return _posterior(args, columns, out)
    means, table = _tables(grid, args)
    print(head)
    print(describe_means(means))
    print(format_table(means))
    print()
    print(describe_contrasts(table))
    print(format_table(table))
    if out is not None:
        atomic_write_text(out, table.to_csv(index=False))
        print(f"wrote {out}")
    return 0


def _anova_grid(args: argparse.Namespace, columns: dict[str, str]) -> tuple[Any, str]:
    from tomstats.analysis.contrasts import anova_grid
    from tomstats.analysis.log_anova import DEFAULT_BETWEEN
    from tomstats.analysis.paired import PAIRED_COLUMNS
    from tomstats.analysis.table import load_table

    within = args.within or []
    subject = args.subject or ("model" if within else None)
    between = args.between or ([] if within else list(DEFAULT_BETWEEN))
    df = load_table(args.log, columns, args.query,
                    needed=[args.dv, *between, *within, *([subject] if subject else []),
                            *(["pair_id", "tom_order", "context_words"] if args.paired
                              else [])],
                    optional=["status", *(["model", *PAIRED_COLUMNS] if args.paired
                                          else [])])
    grid = anova_grid(df, dv=args.dv, between=args.between, within=args.within,
                      subject=args.subject, paired=args.paired)
    return grid, f"Reference model: {grid.note}"


def _read_log(args: argparse.Namespace, columns: dict[str, str], formula: str
              ) -> pd.DataFrame:
    """The log as ``tomstats fit`` read it for ``formula``."""
    from tomstats._expr import parse_query
    from tomstats.analysis.table import apply_query
    from tomstats.glmm.data import _read_table

    query = parse_query(args.query) if args.query else None
    df = _read_table(args.log, errors=args.errors, model=formula, columns=columns,
                     query=query)
    return apply_query(df, query)


def _fit_grid(args: argparse.Namespace, columns: dict[str, str]) -> tuple[Any, str]:
    from tomstats.glmm.contrasts import fit_grid
    from tomstats.glmm.fit_reader import read_fit

    fit = read_fit(args.fit, "--fit")
    if not hasattr(fit, "beta"):
        args._idata = fit
        return None, ""
    df = _read_log(args, columns, fit.formula)
    grid = fit_grid(fit, df, at=_at(args.at), columns=columns)
    return grid, f"Reference model: {fit.formula} ({type(fit).__name__}); {grid.note}"


def _posterior(args: argparse.Namespace, columns: dict[str, str], out: Any) -> int:
    from tomstats.analysis.marginal import format_table
    from tomstats.glmm.contrasts import posterior_contrasts

    idata = args._idata
    if args.adjust is not None:
        raise ValueError("--adjust applies to maximum-likelihood and ANOVA contrasts; a "
                         "posterior's intervals need no multiplicity adjustment")
    formula = str(idata.attrs.get("model", ""))
    df = _read_log(args, columns, formula)
    kw = dict(hdi_prob=args.level, scale=args.scale, at=_at(args.at), columns=columns)
    if args.simple:
        raise ValueError("--simple is not available for a sampler fit; use --by")
    means = posterior_contrasts(idata, df, args.specs, args.by, means=True, **kw)
    method = args.method if args.interaction else args.method[0]
    table = posterior_contrasts(idata, df, args.specs, args.by, method=method,
                                interaction=args.interaction, **kw)
    scale = "probabilities" if args.scale == "response" else "logits"
    print(f"Reference model: {formula} (posterior, {means.attrs['n_draws']} draws)")
    print(f"Posterior marginal means ({scale}): medians, {args.level:.0%} highest-density "
          "intervals")
    print(format_table(means))
    print()
    print(f"Posterior contrasts (differences of {scale}): medians, {args.level:.0%} "
          "highest-density intervals, pd = probability of direction")
    print(format_table(table))
    if out is not None:
        atomic_write_text(out, table.to_csv(index=False))
        print(f"wrote {out}")
    return 0
