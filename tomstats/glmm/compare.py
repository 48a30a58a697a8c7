"""LOO model comparison of GLMM fits: :func:`compare` and ``tomstats compare``.

::

    tomstats compare FIT1.nc FIT2.nc [...] [--out table.csv] [--plot compare.png] [--force]
    tomstats compare items=with_items.nc plain=no_items.nc     # NAME=PATH names the rows

Every fit of :func:`tomstats.glmm.fit` stores the pointwise log-likelihood of its
observations (group ``log_likelihood``, variable ``y``, one value per observation and
draw). :func:`compare` checks that the fits saw the same observations and ranks them by
PSIS-LOO with :func:`arviz.compare`:

.. math::

    \\widehat{\\mathrm{elpd}}_{\\mathrm{loo}} = \\sum_{i=1}^{n}
        \\log \\frac{\\sum_s w_i^{(s)} p(y_i \\mid \\theta^{(s)})}{\\sum_s w_i^{(s)}},

with Pareto-smoothed importance weights :math:`w_i^{(s)}`; ``p_loo`` is the effective
number of parameters, ``elpd_diff`` the difference to the best fit and ``dse`` its
standard error, ``weight`` the stacking weight, and ``warning`` is true when some
observation has a Pareto :math:`\\hat k` above ArviZ's threshold
(:math:`\\min(1 - 1/\\log_{10} S, 0.7)` for :math:`S` draws): the LOO estimate of that
fit is then unreliable. Higher ``elpd_loo`` is better.

Exit status of ``tomstats compare``: 0 done; 4 the table is printed (and written) but a
fit has a Pareto-k warning (unless ``--allow-warnings``); 2 bad input (fewer than two
fits, a fit without log-likelihood, fits of different data, duplicate names, an existing
``--out``/``--plot`` without ``--force``), nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tomstats._io import atomic_path, atomic_write_text, prepare_out_file
from tomstats._validate import check_type
from tomstats.cli import EXIT_WARNINGS
from tomstats.glmm._hints import InputError, cli_syntax, hint, option_hint
from tomstats.glmm.fitting import load_fit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLUMNS", "PLOT_SUFFIXES", "add_compare_arguments", "compare", "fig_compare",
           "fit_names", "run_compare"]

#: Columns of the comparison table, in the order printed.
COLUMNS = ("rank", "elpd_loo", "p_loo", "elpd_diff", "se", "dse", "weight", "warning")
#: Image formats of ``--plot``.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _n_obs(idata: Any) -> int:
    ll = idata.log_likelihood
    var = "y" if "y" in ll else next(iter(ll.data_vars))
    return int(np.prod([n for d, n in ll[var].sizes.items() if d not in ("chain", "draw")]))


def compare(fits: Mapping[str, Any], *, scale: str = "log", ic: str = "loo") -> pd.DataFrame:
    """Rank fits of the same observations by PSIS-LOO (or WAIC) with :func:`arviz.compare`.

    The one comparison of fits in the package (``tomstats compare`` and
    ``tomstats.glmm.compare_fits`` are this function).

    Parameters
    ----------
    fits : mapping of str to arviz.InferenceData
        At least two fits (from :func:`tomstats.glmm.fit` or :func:`~tomstats.glmm.load_fit`)
        with a ``log_likelihood`` group, made on the same observations.
    scale : {"log", "negative_log", "deviance"}
        Scale of the table (``"log"``: higher ``elpd_loo`` is better).
    ic : {"loo", "waic"}
        The criterion: PSIS-LOO (default) or WAIC.

    Returns
    -------
    pandas.DataFrame
        :func:`arviz.compare`'s table, one row per fit, best first: ``rank``,
        ``elpd_loo``, ``p_loo``, ``elpd_diff``, ``weight``, ``se``, ``dse``, ``warning``,
        ``scale``.

    Raises
    ------
    TypeError
        ``fits`` is not a mapping, or one of its values is not an InferenceData.
    ValueError
        Fewer than two fits; a fit without ``log_likelihood``; fits whose observations
        differ (another data set, a query, or another aggregation of the rows).
    """
    import arviz as az

    check_type(fits, Mapping, "fits", "a mapping {name: InferenceData}")
    if len(fits) < 2:
        raise ValueError(f"a LOO comparison needs at least two fits, got {len(fits)}")
    ref_name: str | None = None
    ref: np.ndarray | None = None
    for name, idata in fits.items():
        check_type(idata, az.InferenceData, f"fits[{name!r}]", "an arviz.InferenceData")
        if "log_likelihood" not in idata.groups() or not idata.log_likelihood.data_vars:
            raise InputError(
                f"fit {name!r} has no pointwise log-likelihood (group 'log_likelihood'), so "
                f"its LOO cannot be computed; refit it with "
                + hint("log_likelihood=True", "'tomstats fit' (which always stores it)"))
        n = _n_obs(idata)
        y = (idata.observed_data["y"].to_numpy() if "observed_data" in idata.groups()
             and "y" in idata.observed_data else None)
        if ref_name is None:
            ref_name, ref, ref_n = name, y, n
            continue
        if n != ref_n:
            raise InputError(
                f"fits {ref_name!r} and {name!r} were made on different data: {ref_n} vs {n} "
                f"observations; LOO compares fits of the same observations (same log, same "
                f"query, and the same aggregation: fit both with "
                f"{option_hint('aggregate', False)})")
        if ref is not None and y is not None and not np.array_equal(
                np.asarray(ref).ravel(), np.asarray(y).ravel()):
            raise ValueError(
                f"fits {ref_name!r} and {name!r} were made on different data: both have {n} "
                f"observations but their outcomes differ; LOO compares fits of the same "
                f"observations")
    if scale not in ("log", "negative_log", "deviance"):
        raise ValueError(f"scale must be 'log', 'negative_log' or 'deviance', got {scale!r}")
    if ic not in ("loo", "waic"):
        raise ValueError(f"ic must be 'loo' or 'waic', got {ic!r}")
    import warnings

    with warnings.catch_warnings():
        # the Pareto-k warning is the table's ``warning`` column, reported by the caller
        warnings.filterwarnings("ignore", message=".*shape parameter of Pareto.*")
        return az.compare(dict(fits), ic=ic, scale=scale, var_name=_var_name(fits))


def _var_name(fits: Mapping[str, Any]) -> str | None:
    """``"y"`` when every fit stores it (tomstats fits do), else ArviZ's default."""
    return "y" if all("y" in f.log_likelihood for f in fits.values()) else None


# --------------------------------------------------------------------------- CLI


def fit_names(items: Sequence[str]) -> dict[str, Path]:
    """``["a.nc", "plain=b.nc"]`` → ``{"a": Path("a.nc"), "plain": Path("b.nc")}``.

    A name is ``NAME=PATH``'s ``NAME``, or else the file's stem; two fits with one name are
    refused (name them with ``NAME=PATH``).
    """
    out: dict[str, Path] = {}
    for item in items:
        if "=" in item and not Path(item).exists():
            name, path = (s.strip() for s in item.split("=", 1))
            if not name or not path:
                raise ValueError(f"fit {item!r}: expected PATH or NAME=PATH")
        else:
            name, path = Path(item).stem, item
        if name in out:
            same = Path(path).resolve() == out[name].resolve()
            raise ValueError(
                f"two fits are named {name!r} ({out[name]} and {path})"
                + ("; the same file is given twice" if same else
                   "; name them apart with NAME=PATH, e.g. "
                   f"{name}_a={out[name]} {name}_b={path}"))
        out[name] = Path(path)
    return out


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``tomstats compare``."""
    p.add_argument("fits", nargs="+", metavar="FIT",
                   help="netCDF fits written by 'tomstats fit' (at least two), as PATH or "
                        "NAME=PATH; the name labels the row (default: the file name)")
    p.add_argument("--out", metavar="TABLE.csv",
                   help="write the comparison table as CSV (unrounded)")
    p.add_argument("--plot", metavar="FILE",
                   help="draw ArviZ's comparison plot (.png, .svg or .pdf)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out or --plot file")
    p.add_argument("--allow-warnings", action="store_true",
                   help="exit 0 even when a fit's LOO has a Pareto-k warning")


def run_compare(args: argparse.Namespace) -> int:
    """Run ``tomstats compare``: check, load, compare, print, write.

    Returns 0, or 1 when a fit's LOO is unreliable (a high Pareto k) and
    ``--allow-warnings`` was not given.
    """
    with cli_syntax():
        return _run_compare(args)


def _run_compare(args: argparse.Namespace) -> int:
    if len(args.fits) < 2:
        raise ValueError(f"a LOO comparison needs at least two fits, got {len(args.fits)}")
    names = fit_names(args.fits)
    out = plot = None
    if args.out is not None:
        if Path(args.out).suffix.lower() != ".csv":
            raise ValueError(f"--out {args.out!r}: unknown suffix "
                             f"{Path(args.out).suffix or '(none)'!r}; the table is written as "
                             f"CSV (.csv)")
        out = prepare_out_file(args.out, force=args.force, field="--out")
    if args.plot is not None:
        if Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
            raise ValueError(f"--plot {args.plot!r}: unknown suffix "
                             f"{Path(args.plot).suffix or '(none)'!r}; choose "
                             f"{', '.join(PLOT_SUFFIXES)}")
        plot = prepare_out_file(args.plot, force=args.force, field="--plot")
    if out is not None and plot is not None and out.resolve() == plot.resolve():
        raise ValueError("--out and --plot name the same file")
    fits = {}
    for name, path in names.items():
        fits[name] = load_fit(path)
    table = compare(fits)
    print("LOO comparison (PSIS-LOO, log scale: higher elpd_loo is better; elpd_diff and dse "
          "relative to the best fit)")
    print(format_table(table))
    if out is not None:
        atomic_write_text(out, table.to_csv(index_label="fit", lineterminator="\n"))
        print(f"wrote {out}")
    if plot is not None:
        _write_plot(table, plot)
        print(f"wrote {plot}")
    bad = [str(n) for n, w in table["warning"].items() if bool(w)]
    if not bad:
        return 0
    level = "warning" if args.allow_warnings else "error"
    print(f"tomstats compare: {level}: the LOO estimate of {', '.join(bad)} is unreliable "
          f"(some observation has a Pareto k above ArviZ's threshold, 0.7 or lower with few "
          f"draws: an influential point; compare with more draws or a K-fold check)"
          + (" (exit 0: --allow-warnings)" if args.allow_warnings
             else "; pass --allow-warnings to accept the table"), file=sys.stderr)
    return 0 if args.allow_warnings else EXIT_WARNINGS


def format_table(table: pd.DataFrame) -> str:
    """The comparison table for the terminal: 4 significant digits, weights to 3."""
    def sig(v: Any, d: int) -> str:
        v = float(v)
        return "nan" if not np.isfinite(v) else format(v, f".{d}g")

    shown = pd.DataFrame(index=table.index)
    shown["rank"] = table["rank"].astype(int)
    for c in ("elpd_loo", "p_loo", "elpd_diff", "se", "dse"):
        shown[c] = table[c].map(lambda v: sig(v, 4))
    shown["weight"] = table["weight"].map(lambda v: sig(v, 3))
    shown["warning"] = table["warning"].map(bool)
    return shown.to_string()


def fig_compare(table: pd.DataFrame) -> Figure:
    """ArviZ's comparison plot of ``table`` (:func:`compare`) on a figure of its own (no
    global pyplot state): each fit's elpd_loo with its standard error (open circle) and,
    below every fit but the best, its difference from the best with the standard error of
    the difference, dse (grey triangle), with a legend saying which is which."""
    import arviz as az
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 1.6 + 0.6 * (2 * len(table) - 1)), layout="constrained")
    ax = fig.subplots()
    az.plot_compare(table.copy(), ax=ax, show=False, plot_ic_diff=True, legend=True)
    return fig


def _write_plot(table: pd.DataFrame, path: Path) -> None:
    """:func:`fig_compare` written atomically to ``path``."""
    fig = fig_compare(table)
    with atomic_path(path) as tmp:
        fig.savefig(os.fspath(tmp), format=path.suffix.lower()[1:])
