"""Sampler diagnostics that speak up: divergences, tree depth, E-BFMI, R-hat, ESS.

:func:`check_diagnostics` runs every check on an InferenceData and returns a
:class:`DiagnosticsReport`; :func:`tomstats.glmm.fit` warns with
:class:`DiagnosticsWarning` (the report's :meth:`~DiagnosticsReport.message`) when any fails.

==================  ======================================================  =============
check               value                                                   passes when
==================  ======================================================  =============
``divergences``     divergent transitions after warm-up (all chains)        = 0
``tree_depth``      transitions that hit the maximum tree depth             = 0
``ebfmi``           lowest per-chain E-BFMI                                 >= 0.3
``rhat``            largest rank-normalised split R-hat (Vehtari et al.)    <= 1.01
``ess_bulk``        smallest bulk effective sample size                     >= 100/chain
``ess_tail``        smallest tail effective sample size                     >= 100/chain
==================  ======================================================  =============
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tomstats.glmm.rhat_ess import dataset_convergence

__all__ = ["INTERVAL_PROB", "DiagnosticCheck", "DiagnosticsReport", "DiagnosticsWarning",
           "arviz_log_quiet", "check_diagnostics"]

#: Probability of every posterior interval tomstats shows for a fit: a 94 % highest-density
#: interval (ArviZ's default), in ``tomstats fit``'s summary and in the fit report alike.
INTERVAL_PROB = 0.94


@contextlib.contextmanager
def arviz_log_quiet() -> Iterator[None]:
    """Hold back ArviZ's logged warnings (its "Shape validation failed" for one chain): the
    tables of ``tomstats fit`` and the report say what they mean (R-hat n/a with one chain)
    in words of their own. ArviZ's logger is not in :mod:`logging`'s registry, so the level
    is lowered for the block as a whole."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


class DiagnosticsWarning(UserWarning):
    """A fit's sampler diagnostics failed; its estimates may be wrong."""


_ADVICE = {
    "divergences": "raise {target_accept} (e.g. 0.95 or 0.99); keep the non-centred "
                   "parametrisation ({noncentered}); tighter priors on random-effect "
                   "scales help when a group has few observations",
    "tree_depth": "the posterior is badly scaled or strongly correlated: more tuning "
                  "(e.g. {tune}), centre/scale predictors, or raise {max_tree_depth}",
    "ebfmi": "the sampler explores the energy distribution poorly (typically a funnel): use "
             "the non-centred parametrisation ({noncentered}) and more tuning",
    "rhat": "the chains disagree: run more tuning and draws, check for multimodality or "
            "unidentified parameters (e.g. a random effect with too few levels); do not "
            "trust these estimates yet",
    "ess_bulk": "too few effective draws for reliable means: more draws (e.g. {draws}), more "
                "tuning, or reparametrise (non-centred random effects)",
    "ess_tail": "too few effective draws for reliable intervals: more draws (e.g. {draws}), "
                "more tuning, or reparametrise (non-centred random effects)",
}
#: The options the advice names, as Python keywords (:func:`tomstats.glmm.fit`) and as
#: ``tomstats fit`` flags.
_ADVICE_OPTIONS = {
    "python": {"target_accept": "target_accept", "noncentered": "noncentered=True",
               "tune": "tune=2000", "max_tree_depth": "max_tree_depth",
               "draws": "draws=2000"},
    "cli": {"target_accept": "--target-accept", "noncentered": "--option noncentered=true",
            "tune": "--tune 2000", "max_tree_depth": "--max-tree-depth",
            "draws": "--draws 2000"},
}


def advice(name: str, syntax: str = "python") -> str:
    """What to try when check ``name`` fails, naming options in ``syntax`` ("python"/"cli")."""
    return _ADVICE[name].format(**_ADVICE_OPTIONS[syntax])


@dataclass(frozen=True)
class DiagnosticCheck:
    """One diagnostic: its value, threshold, verdict, offending parameters and advice."""

    name: str
    value: float
    threshold: float
    passed: bool
    offending: tuple[str, ...]
    advice: str
    description: str

    def line(self) -> str:
        """One human-readable line."""
        who = ""
        if self.offending:
            shown = ", ".join(self.offending[:8])
            more = f" and {len(self.offending) - 8} more" if len(self.offending) > 8 else ""
            who = f" ({shown}{more})"
        return f"{self.name}: {self.description}{who}"


@dataclass(frozen=True)
class DiagnosticsReport:
    """All diagnostic checks of one fit.

    Attributes
    ----------
    checks : tuple of DiagnosticCheck
    chains, draws : int
    """

    checks: tuple[DiagnosticCheck, ...]
    chains: int
    draws: int

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[DiagnosticCheck, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if not c.passed)

    def __getitem__(self, name: str) -> DiagnosticCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_frame(self) -> pd.DataFrame:
        """One row per check: name, value, threshold, passed, offending, advice."""
        return pd.DataFrame([{"check": c.name, "value": c.value, "threshold": c.threshold,
                              "passed": c.passed, "offending": ", ".join(c.offending),
                              "advice": c.advice} for c in self.checks])

    def message(self, syntax: str = "python") -> str:
        """Multi-line summary: each failed check with what to try.

        ``syntax="cli"`` names the options as ``tomstats fit`` flags (``--target-accept``)
        instead of the keywords of :func:`tomstats.glmm.fit` (``target_accept``).
        """
        if self.passed:
            return (f"all sampler diagnostics passed ({self.chains} chains x {self.draws} "
                    f"draws)")
        lines = [f"{len(self.failed)} of {len(self.checks)} sampler diagnostics failed "
                 f"({self.chains} chains x {self.draws} draws); estimates may be unreliable:"]
        for c in self.failed:
            lines.append(f"  - {c.line()}")
            lines.append(f"      try: {advice(c.name, syntax) if c.name in _ADVICE else c.advice}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.message()

    def __repr__(self) -> str:
        """One line: the checks that failed (or that all passed); ``print()`` gives the
        advice."""
        from tomstats._printable import summary_line

        what = ("all passed" if self.passed else
                f"{len(self.failed)} of {len(self.checks)} failed "
                f"({', '.join(c.name for c in self.failed)})")
        return summary_line(self, f"{len(self.checks)} checks, {what}",
                            f"{self.chains} chains x {self.draws} draws")


def _labels(da: object, mask: np.ndarray) -> list[str]:
    """``name[level,...]`` for the entries of a (non-sample) DataArray where mask holds."""
    name = da.name  # type: ignore[attr-defined]
    dims = da.dims  # type: ignore[attr-defined]
    if not dims:
        return [str(name)] if bool(mask) else []
    out = []
    for idx in zip(*np.nonzero(mask), strict=True):
        lab = ",".join(str(da.coords[d].values[i]) if d in da.coords else str(i)  # type: ignore
                       for d, i in zip(dims, idx, strict=True))
        out.append(f"{name}[{lab}]")
    return out


def _sample_vars(posterior: object, var_names: Sequence[str] | None) -> list[str]:
    names = list(posterior.data_vars) if var_names is None else list(var_names)  # type: ignore
    return names


def check_diagnostics(
    idata: object,
    *,
    rhat_max: float = 1.01,
    ess_min_per_chain: float = 100.0,
    ebfmi_min: float = 0.3,
    var_names: Sequence[str] | None = None,
) -> DiagnosticsReport:
    """Run the sampler diagnostics of an InferenceData (see the module table).

    R-hat and ESS cover every posterior variable (or ``var_names``); entries that are
    constant across draws (fixed parameters, the unit diagonal of a correlation matrix)
    are skipped. They are ArviZ's rank-normalised estimators, computed for all entries of
    a variable at once (:mod:`tomstats.glmm.rhat_ess`).

    Returns
    -------
    DiagnosticsReport
    """
    import arviz as az

    post = idata.posterior  # type: ignore[attr-defined]
    ss = idata.sample_stats  # type: ignore[attr-defined]
    chains, draws = int(post.sizes["chain"]), int(post.sizes["draw"])
    checks: list[DiagnosticCheck] = []

    div = int(np.asarray(ss["diverging"]).sum()) if "diverging" in ss else 0
    checks.append(DiagnosticCheck(
        "divergences", float(div), 0.0, div == 0, (), advice("divergences"),
        f"{div} divergent transition(s) after warm-up (threshold 0)"))

    if "reached_max_treedepth" in ss:
        hits = int(np.asarray(ss["reached_max_treedepth"]).sum())
    else:
        hits = 0
    max_depth = idata.attrs.get("max_tree_depth", "?") if hasattr(idata, "attrs") else "?"
    checks.append(DiagnosticCheck(
        "tree_depth", float(hits), 0.0, hits == 0, (), advice("tree_depth"),
        f"{hits} transition(s) hit the maximum tree depth {max_depth} (threshold 0)"))

    if "energy" in ss:
        bfmi = np.atleast_1d(np.asarray(az.bfmi(idata), dtype=float))
        low = tuple(f"chain {i}" for i in np.flatnonzero(bfmi < ebfmi_min))
        worst = float(np.nanmin(bfmi))
        checks.append(DiagnosticCheck(
            "ebfmi", worst, ebfmi_min, bool(worst >= ebfmi_min), low, advice("ebfmi"),
            f"lowest E-BFMI {worst:.3f} (threshold {ebfmi_min})"))

    names = _sample_vars(post, var_names)
    stats = dataset_convergence(post[names])
    rhat, ess_b, ess_t = stats["rhat"], stats["ess_bulk"], stats["ess_tail"]
    ess_min = ess_min_per_chain * chains
    for key, ds, bad_fn, thr, fmt in (
        ("rhat", rhat, lambda v: v > rhat_max, rhat_max, "largest R-hat {v:.4f} (threshold "
         f"{rhat_max})"),
        ("ess_bulk", ess_b, lambda v: v < ess_min, ess_min, "smallest bulk ESS {v:.0f} "
         f"(threshold {ess_min:.0f} = {ess_min_per_chain:.0f} per chain)"),
        ("ess_tail", ess_t, lambda v: v < ess_min, ess_min, "smallest tail ESS {v:.0f} "
         f"(threshold {ess_min:.0f} = {ess_min_per_chain:.0f} per chain)"),
    ):
        worst_vals: list[float] = []
        offending: list[str] = []
        for name in names:
            da = ds[name]
            v = np.asarray(da, dtype=float)
            fin = np.isfinite(v)
            if not fin.any():
                continue
            worst_vals.append(float(np.max(v[fin]) if key == "rhat" else np.min(v[fin])))
            offending += _labels(da, fin & bad_fn(np.where(fin, v, np.nan if key == "rhat"
                                                            else np.inf)))
        if not worst_vals:
            continue
        worst = max(worst_vals) if key == "rhat" else min(worst_vals)
        checks.append(DiagnosticCheck(key, worst, float(thr), not offending, tuple(offending),
                                      advice(key), fmt.format(v=worst)))
    return DiagnosticsReport(tuple(checks), chains, draws)
