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

Maximum-likelihood fits (``tomstats fit --backend laplace``, JSON) are compared instead by
likelihood-ratio tests, as lme4's ``anova(m0, m1)`` (:func:`compare_ml`, with
:func:`tomstats.glmm.lme_result.lme_anova`): ordered by their number of parameters
:math:`d`, each fit against the one before, :math:`\\chi^2 = 2(\\ell_1 - \\ell_0)` on
:math:`d_1 - d_0` degrees of freedom, beside AIC :math:`= -2\\ell + 2d`, BIC
:math:`= -2\\ell + d\\ln N` and the deviance :math:`-2\\ell`. The fits must be of the same
data (rows and response) and nested, each a special case of the next (its fixed effects,
varying effects and correlations among the larger model's).

Exit status of ``tomstats compare``: 0 done; 4 the table is printed (and written) but a
fit has a Pareto-k warning, or a maximum-likelihood fit did not converge (unless
``--allow-warnings``); 2 bad input (fewer than two fits, a fit without log-likelihood, fits
of different data, non-nested maximum-likelihood fits, sampler and maximum-likelihood fits
together, duplicate names, an existing ``--out``/``--plot`` without ``--force``), nothing
written.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tomstats._io import atomic_path, atomic_write_text, prepare_out_file
from tomstats._validate import check_type
from tomstats.cli import written_with_warnings
from tomstats.glmm._hints import InputError, cli_syntax, hint, option_hint
from tomstats.glmm.fit_file import ML_FORMATS as _ML_FORMATS
from tomstats.glmm.fit_reader import read_ml_fit
from tomstats.glmm.fitting import load_fit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLUMNS", "ML_FORMATS", "PLOT_SUFFIXES", "add_compare_arguments", "compare",
           "compare_ml", "fig_compare", "fit_names", "load_ml_fit", "run_compare"]

#: Columns of the comparison table, in the order printed.
COLUMNS = ("rank", "elpd_loo", "p_loo", "elpd_diff", "se", "dse", "weight", "warning")
#: Image formats of ``--plot``.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
#: JSON formats of maximum-likelihood fits (random intercepts; lme4's general terms).
ML_FORMATS = _ML_FORMATS


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


# --------------------------------------------------------------------------- ML fits


def load_ml_fit(path: str | os.PathLike[str]) -> Any:
    """A maximum-likelihood fit's JSON (:data:`ML_FORMATS`), checked whole by the one fit
    reader (:func:`tomstats.glmm.fit_reader.read_ml_fit`): a
    :class:`~tomstats.glmm.lme_result.LaplaceFit` (either JSON format).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not one of :data:`ML_FORMATS`, or a field that is wrong (the message names the file,
        the field and the value).
    """
    return read_ml_fit(path)


def compare_ml(fits: Mapping[str, Any]) -> pd.DataFrame:
    """Likelihood-ratio tests of nested maximum-likelihood fits of the same data: lme4's
    ``anova(m0, m1, ...)`` (:func:`tomstats.glmm.lme_result.lme_anova`, rows by number of
    parameters, each tested against the row before).

    Raises
    ------
    ValueError
        Fewer than two fits, fits of different data, or fits that are not nested.
    """
    from tomstats.glmm.lme_result import lme_anova

    check_type(fits, Mapping, "fits", "a mapping {name: maximum-likelihood fit}")
    if len(fits) < 2:
        raise ValueError(f"a likelihood-ratio test needs at least two fits, got {len(fits)}")
    return lme_anova(*fits.values(), names=list(fits))


def _run_compare_ml(args: argparse.Namespace, names: Mapping[str, Path],
                    out: Path | None) -> int:
    """``tomstats compare`` of maximum-likelihood fits: lme4's anova table."""
    from tomstats.glmm.lme_result import fit_structure, format_anova

    fits = {name: load_ml_fit(path) for name, path in names.items()}
    table = compare_ml(fits)
    print("Likelihood-ratio tests of nested Laplace fits (lme4's anova): each row against "
          "the row above")
    print(format_anova(table, {n: f.formula for n, f in fits.items()}))
    varying = [fit_structure(fits[n])[1] for n in table.index]
    if any(a != b for a, b in zip(varying[:-1], varying[1:], strict=True)):
        print("note: added variance components are tested at 0, the boundary of their "
              "range, where the chi-square p-value is conservative (as in lme4)")
    if out is not None:
        atomic_write_text(out, table.to_csv(index_label="fit", lineterminator="\n"))
        print(f"wrote {out}")
    bad = [n for n, f in fits.items() if not f.converged]
    if not bad:
        return 0
    return written_with_warnings(
        "compare", f"the fit(s) {', '.join(bad)} did not converge, so their log-likelihood "
        f"and the tests with them are unreliable", allow_warnings=args.allow_warnings,
        advice="refit them")


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
                   help="fits written by 'tomstats fit' (at least two), as PATH or "
                        "NAME=PATH; the name labels the row (default: the file name). "
                        "netCDF fits of a sampler are ranked by LOO; JSON fits of --backend "
                        "laplace are tested by likelihood ratios, as lme4's anova(m0, m1)")
    p.add_argument("--out", metavar="TABLE.csv",
                   help="write the comparison table as CSV (unrounded)")
    p.add_argument("--plot", metavar="FILE",
                   help="draw ArviZ's comparison plot (.png, .svg or .pdf)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out or --plot file")
    p.add_argument("--allow-warnings", action="store_true",
                   help="exit 0 even when a fit's LOO has a Pareto-k warning (or a "
                        "maximum-likelihood fit did not converge)")


def run_compare(args: argparse.Namespace) -> int:
    """Run ``tomstats compare``: check, load, compare, print, write.

    Returns 0, or 4 (``EXIT_WARNINGS``) when a fit's LOO is unreliable (a high Pareto k) or
    a maximum-likelihood fit did not converge, and ``--allow-warnings`` was not given.
    """
    with cli_syntax():
        return _run_compare(args)


def _run_compare(args: argparse.Namespace) -> int:
    names = fit_names(args.fits)
    ml = [n for n, p in names.items() if p.suffix.lower() == ".json"]
    if ml and len(ml) < len(names):
        other = next(n for n in names if n not in ml)
        raise ValueError(f"fit {ml[0]!r} is a maximum-likelihood fit (JSON) and {other!r} a "
                         f"sampler fit (netCDF); compare fits of one kind: sampler fits by "
                         f"LOO, maximum-likelihood fits by likelihood-ratio tests")
    if len(args.fits) < 2:
        what = "likelihood-ratio test" if ml else "LOO comparison"
        raise ValueError(f"a {what} needs at least two fits, got {len(args.fits)}")
    if ml and args.plot is not None:
        raise ValueError(f"--plot {args.plot!r}: the plot is of a LOO comparison of sampler "
                         f"fits; maximum-likelihood fits are compared by the likelihood-ratio "
                         f"table alone (leave out --plot)")
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
    if ml:
        return _run_compare_ml(args, names, out)
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
    return written_with_warnings(
        "compare", f"the LOO estimate of {', '.join(bad)} is unreliable (some observation has "
        f"a Pareto k above ArviZ's threshold, 0.7 or lower with few draws: an influential "
        f"point)", allow_warnings=args.allow_warnings,
        advice="compare with more draws or a K-fold check")


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
