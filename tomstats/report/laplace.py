r"""Report on a maximum-likelihood (Laplace) fit: ``tomstats fit LOG --backend laplace``'s JSON.

A Laplace fit (:class:`tomstats.glmm.lme_result.LaplaceFit`) has no draws, so its page is
short, in the order of lme4's ``summary(glmer(...))``: the convergence verdict (the optimiser
met its tolerance; no random-effect SD at the boundary), the fixed effects with Wald tests
(estimate :math:`\hat\beta_j`, standard error, :math:`z = \hat\beta_j/\mathrm{se}_j`,
:math:`p = 2\Phi(-|z|)`, the 95 % Wald interval :math:`\hat\beta_j \mp 1.96\,\mathrm{se}_j`)
with the posterior-free reading of each effect and the joint Wald test of each term (Type II
and III, as ``car::Anova``; :mod:`tomstats.glmm.wald`), the variance components (lme4's
``VarCorr``: the SD of every random effect and the correlations of correlated terms), the
fit statistics (log-likelihood, AIC, BIC, deviance) and the provenance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from tomstats.glmm.fit_file import ML_FORMATS, is_ml_fit
from tomstats.glmm.fit_reader import read_ml_fit
from tomstats.report._document import (
    Check,
    Document,
    Section,
    Table,
    Text,
    Verdict,
    check_output,
    write_document,
)

__all__ = ["FORMATS", "is_laplace_fit", "laplace_document", "load_laplace_fit",
           "term_tests_table", "write_laplace_report"]

#: Coverage of the Wald intervals of the report.
LEVEL = 0.95


#: JSON formats of maximum-likelihood fits (the one written now, and the random-intercept one
#: of earlier versions); owned by :mod:`tomstats.glmm.fit_file`.
FORMATS = ML_FORMATS


def is_laplace_fit(path: str | os.PathLike[str]) -> bool:
    """Whether ``tomstats report`` reads ``path`` as a maximum-likelihood fit's JSON (any
    file that is not netCDF: :func:`tomstats.glmm.fit_file.is_ml_fit`); its format tag and
    every field are checked when it is read."""
    return is_ml_fit(path)


def load_laplace_fit(path: str | os.PathLike[str]) -> Any:
    """A :class:`~tomstats.glmm.lme_result.LaplaceFit` (either JSON format), checked whole by
    the one fit reader (:func:`tomstats.glmm.fit_reader.read_ml_fit`)."""
    return read_ml_fit(path, "FIT")


def _wald(fit: Any, level: float) -> pd.DataFrame:
    """The fit's Wald table (:meth:`~tomstats.glmm.lme_result.LaplaceFit.fixed_effects`)."""
    return fit.fixed_effects(level)


def _random_table(fit: Any) -> pd.DataFrame | None:
    vc = fit.VarCorr()
    return None if vc.empty else vc.rename(columns={"sdcor": "SD or correlation",
                                                    "vcov": "variance or covariance"})


def _singular(fit: Any) -> list[str]:
    return [t.label for t in fit.singular_terms()]


def _verdict(fit: Any) -> Verdict:
    sd_zero = _singular(fit)
    return Verdict("Convergence", (
        Check("optimiser converged", bool(fit.converged), f"{fit.iterations} iteration(s)",
              "tolerance met, finite values",
              "" if fit.converged else "the estimates are unreliable: try --option "
              "max_iter=..., rescaled predictors or simpler random effects"),
        Check("random-effect SDs away from 0", not sd_zero,
              "boundary (singular) fit" if sd_zero else "none at 0", "every SD ≥ 1e-4",
              f"SD ~0 for {', '.join(sd_zero)}: drop that term" if sd_zero else ""),
    ))


def fixed_effects_table(fit: Any, level: float = LEVEL) -> pd.DataFrame:
    """Fixed effects: estimate, SE, z, p, Wald interval and the odds ratio
    :math:`e^{\\hat\\beta}` (from :meth:`LaplaceFit.fixed_effects`)."""
    import numpy as np

    s = _wald(fit, level)
    pct = f"{100 * level:g} %"
    return pd.DataFrame({
        "term": list(s.index), "estimate": s["estimate"].to_numpy(),
        "SE": s["se"].to_numpy(), "z": s["z"].to_numpy(), "p": s["p"].to_numpy(),
        f"{pct} low": s["ci_lower"].to_numpy(), f"{pct} high": s["ci_upper"].to_numpy(),
        "odds ratio": np.exp(s["estimate"].to_numpy()),
    })


def _effect_sentences(fit: Any, level: float = LEVEL) -> str:
    s = _wald(fit, level)
    parts = []
    for term, r in s.iterrows():
        if term == "(Intercept)":
            continue
        sign = "lowers" if r["estimate"] < 0 else "raises"
        clear = r["ci_lower"] > 0 or r["ci_upper"] < 0
        parts.append(f"{term} {sign} the log-odds of a correct answer by "
                     f"{abs(r['estimate']):.3g} (p = {r['p']:.3g}; the {100 * level:g} % "
                     f"Wald interval {'excludes' if clear else 'includes'} 0)")
    if not parts:
        return "The model has an intercept only."
    return "Is there an effect? " + "; ".join(parts) + "."


def term_tests_table(fit: Any) -> pd.DataFrame | None:
    """Joint Wald tests of each fixed-effect term (``car::Anova``, Type II and Type III side
    by side, the intercept left out; :func:`tomstats.glmm.wald.wald_table`); ``None`` for a
    model with an intercept only."""
    from tomstats.glmm.wald import wald_anova

    two = wald_anova(fit, 2)
    if two.empty:
        return None
    three = wald_anova(fit, 3).reindex(two.index)
    return pd.DataFrame({"term": list(two.index), "df": two["Df"].to_numpy(),
                         "chi² (Type II)": two["Chisq"].to_numpy(),
                         "p (Type II)": two["p"].to_numpy(),
                         "chi² (Type III)": three["Chisq"].to_numpy(),
                         "p (Type III)": three["p"].to_numpy()})


def _term_tests(fit: Any) -> tuple[Table, ...]:
    table = term_tests_table(fit)
    if table is None:
        return ()
    return (Table(table, caption="Joint Wald chi-square test of each term (car::Anova): Type "
                  "II tests a term after the terms that do not contain it; Type III tests it "
                  "alone, which depends on the contrasts (with treatment coding a term inside "
                  "an interaction is tested at the reference level; C(f, Sum) makes it an "
                  "average over levels)"),)


def laplace_document(fit: Any, name: str = "fit") -> Document:
    """The report :class:`~tomstats.report._document.Document` of a Laplace fit."""
    stats = pd.DataFrame({"statistic": ["logLik", "AIC", "BIC", "deviance", "df.resid",
                                        "observations (rows)", "likelihood terms"],
                          "value": [fit.loglik, fit.aic, fit.bic, fit.deviance,
                                    fit.n_rows - fit.n_params, fit.n_rows, fit.n_obs]})
    sections = [
        Section("", (_verdict(fit),)),
        Section("Fixed effects", (
            Text(f"Formula {fit.formula}, family {fit.family} (logit link), maximum "
                 f"likelihood with the Laplace approximation (as lme4's glmer); standard "
                 f"errors: {fit.se_method} method (lme4's vcov()).", "note"),
            Table(fixed_effects_table(fit), caption="Fixed effects with Wald z tests and "
                  f"{100 * LEVEL:g} % Wald intervals (log-odds; odds ratio = exp(estimate))"),
            Text(_effect_sentences(fit), "p"),
            *_term_tests(fit),
        )),
    ]
    vc = _random_table(fit)
    if vc is not None:
        sections.append(Section("Random effects", (
            Table(vc, caption="Variance components (lme4's VarCorr()): the SD of each random "
                              "effect (and the correlations of correlated terms)"),)))
    prov = {"formula": fit.formula, "family": fit.family, "backend": "laplace",
            "aggregated": fit.aggregated, "data_hash": fit.data_hash,
            "created_at": fit.created_at, "versions": dict(fit.versions)}
    sections += [
        Section("Fit statistics", (Table(stats, caption="Likelihood and information "
                                                        "criteria (lme4's definitions)",
                                         float_format="{:.6g}"),)),
        Section("Provenance", (Table(pd.DataFrame({
            "attribute": list(prov),
            "value": [v if isinstance(v, str) else json.dumps(v) for v in prov.values()]}),
            caption="How the fit was made"),)),
    ]
    subtitle = f"{name} · maximum likelihood (Laplace) · {fit.n_rows} rows"
    return Document("tomstats fit report (maximum likelihood)", subtitle, tuple(sections))


def write_laplace_report(fit: str | os.PathLike[str], out: str | os.PathLike[str],
                         fmt: str = "html") -> Path:
    """Write the report of a Laplace fit's JSON as HTML (one file) or Markdown."""
    check_output(out, fmt)
    res = load_laplace_fit(fit)
    return write_document(laplace_document(res, Path(fit).name), out, fmt)
