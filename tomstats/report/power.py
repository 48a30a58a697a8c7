"""Report on a ``tomstats power`` output folder.

As simr and G*Power do, the page states its assumptions first: the design (context lengths,
ToM orders, questions and stories per cell, LLMs and their capabilities), the effect sizes
(equation (1)'s α, γ, δ, σ, or the posterior they were drawn from), the significance level,
the sphericity correction and the fit used. Then the findings: the smallest value reaching the
target power ("10 or fewer" where the smallest value tried already does), the power curve, the
power per LLM when the LLMs differ, and a warning on the repeated-measures ANOVA tests when
the stories share a difficulty (σ > 0), whose type I error grows with the number of LLMs
(docs/planning.md, "But the stories are a sample too").
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tomstats.planning.result import POWER_DATA, POWER_SUMMARY, POWER_TABLE
from tomstats.report._document import Document, Image, Section, Table, Text, figure_png

__all__ = ["assumptions_blocks", "power_dir", "power_document", "power_section",
           "rm_anova_warning", "target_label"]

_PARAMS = ("alpha", "gamma", "delta", "sigma")
_SYMBOL = {"alpha": "α (context decay)", "gamma": "γ (ToM order)",
           "delta": "δ (context × order)", "sigma": "σ (story sd)",
           "capability": "capability (mean over LLMs)"}


def power_dir(sim_dir: str | os.PathLike[str]) -> Path | None:
    """The folder of a ``tomstats power`` run: ``sim_dir`` itself or its ``power/``."""
    for d in (Path(sim_dir), Path(sim_dir) / "power"):
        if (d / POWER_TABLE).is_file():
            return d
    return None


def _summary(d: Path) -> dict[str, Any]:
    f = d / POWER_SUMMARY
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}


def target_label(value: Any, smallest: Any) -> str:
    """``"10 or fewer"`` when the target is met at the smallest value tried (the curve says
    nothing about smaller ones), ``"not reached"`` for ``None``, else the value."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "not reached"
    v = float(value)
    text = str(int(v)) if v.is_integer() else f"{v:g}"
    return f"{text} or fewer" if smallest is not None and v <= float(smallest) else text


def _design_rows(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    design = settings.get("design") or {}
    rows = []
    for f in design.get("factors", []):
        rows.append((str(f.get("name", "?")).replace("_", " ") + " levels",
                     ", ".join(f"{v:g}" for v in f.get("levels", []))))
    if "questions_per_cell" in design:
        varied = "questions_per_cell" in (settings.get("along"), settings.get("by"))
        rows.append(("questions per cell and LLM", "varied (see the results)" if varied
                     else str(design["questions_per_cell"])))
    ipc = settings.get("items_per_cell")
    rows.append(("stories per cell", "one per question" if ipc is None else str(ipc)))
    if settings.get("story_design") == "within":
        rows.append(("stories across lengths", "length ladders: each story told at every "
                                               "context length (one story effect for all)"))
    n_llms = settings.get("n_llms")
    caps = design.get("capability", [])
    if n_llms is None and settings.get("along") != "n_llms" and settings.get("by") != "n_llms":
        fitted = ((settings.get("posterior_params") or {}).get("capability") or {}).get(
            "per_llm")
        caps_text = (", ".join(f"{k} {v:.3g}" for k, v in fitted.items()) + " (the fit's "
                     "posterior means)" if fitted else ", ".join(f"{c:g}" for c in caps))
        rows.append(("LLMs (capabilities)", f"{len(fitted or caps)}: {caps_text}"))
    else:
        sd = settings.get("capability_sd")
        rows.append(("LLMs (capabilities)",
                     f"{'varied' if n_llms is None else n_llms}, capabilities drawn per study "
                     f"from N(mean, sd{'' if sd is None else f' = {sd:.3g}'})"))
    return rows


def _effect_rows(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    params = settings.get("params") or {}
    post = settings.get("posterior_params")
    rows = []
    for f in _PARAMS + (("capability",) if post else ()):
        if post and f in post:
            p = post[f]
            text = (f"{p['mean']:.4g} (posterior mean; 95 % of draws "
                    f"{p['q2.5']:.4g} to {p['q97.5']:.4g})")
        elif f in params:
            text = f"{params[f]:.4g}"
        else:
            continue
        if settings.get("along") == f:
            text += " — varied along the curve"
        elif settings.get("by") == f:
            text += " — varied by the second dimension"
        rows.append((_SYMBOL[f], text))
    return rows


def _fit_rows(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    src = settings.get("posterior")
    if not src:
        return [("fit used", "none: plug-in power at the parameters above")]
    rows = [("fit used", Path(str(src.get("file", "?"))).name)]
    for key, label in (("model", "model"), ("backend", "backend"),
                       ("data_hash", "data hash (SHA-256 of the fitted rows)"),
                       ("file_sha256", "file SHA-256"), ("created_at", "fitted at"),
                       ("n_rows", "rows fitted")):
        if src.get(key) is not None:
            rows.append((label, str(src[key])))
    rows.append(("posterior draws", f"{src.get('draws_used', '?')} of "
                                    f"{src.get('draws_available', '?')} (thinned evenly); "
                                    "assurance: each simulated study uses one draw"))
    return rows


def _test_rows(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    tests = list(settings.get("tests") or [])
    rows = [("tests", ", ".join(tests)),
            ("significance level", str(settings.get("alpha", "?"))),
            ("target power", f"{float(settings.get('target', 0.8)):.0%}"),
            ("simulated studies per value", str(settings.get("replicates", "?"))),
            ("seed", str(settings.get("seed", "?"))),
            ("count path", str(settings.get("path", "?")))]
    if any(t.startswith("rm-anova:") for t in tests):
        rows.append(("sphericity correction (rm-anova)", str(settings.get("correction", "?"))))
    return rows


def assumptions_blocks(settings: Mapping[str, Any]) -> tuple[Table, ...]:
    """The assumptions of a power run, from its ``summary.json`` settings: design, effect
    sizes, tests (level, correction, replicates, seed) and the fit used."""
    def table(rows: list[tuple[str, str]], caption: str) -> Table:
        return Table(pd.DataFrame(rows, columns=["assumption", "value"]), caption=caption)

    return (table(_design_rows(settings), "Design"),
            table(_effect_rows(settings), "Effect sizes: equation (1)'s parameters "
                                          "(logit p = β₀m − α c ln(1 + c/500) − γ t − δ c t "
                                          "+ ε, ε ~ N(0, σ²))"),
            table(_test_rows(settings), "Tests"),
            table(_fit_rows(settings), "Fit used"))


def rm_anova_warning(settings: Mapping[str, Any]) -> Text | None:
    """A warning when ``rm-anova:*`` tests are planned and the stories share a difficulty
    (σ > 0): that test treats the stories as fixed, so its rejections are partly chance
    patterns of hard stories (its type I error grows with the number of LLMs)."""
    tests = [t for t in settings.get("tests") or [] if str(t).startswith("rm-anova:")]
    sigma = (settings.get("params") or {}).get("sigma")
    if not tests or sigma is None or float(sigma) <= 0:
        return None
    return Text(f"The repeated-measures ANOVA tests ({', '.join(tests)}) treat the stories as "
                f"fixed, but here every LLM answers the same stories and a story's difficulty "
                f"(σ = {float(sigma):.3g}) is shared by all of them. Their type I error is "
                "then above the nominal level and grows with the number of LLMs (with σ = 0.6 "
                "and 20 LLMs, about 20 % for the order test and 40 % for the interaction; see "
                "the planning guide, 'But the stories are a sample too'), so part of the "
                "power shown is an artefact. Plan with the GLMM tests (glmm-wald:*, "
                "glmm-lrt:*), which model (1 | story).", "warning")


def _per_llm_table(d: Path) -> Table | None:
    """Power per LLM (per-LLM tests, fixed LLMs) when the LLMs' capabilities differ."""
    nc = d / POWER_DATA
    if not nc.is_file():
        return None
    import xarray as xr

    from tomstats._netcdf import check_netcdf_budget

    check_netcdf_budget(nc, "power result")
    with xr.open_dataset(nc, engine="h5netcdf") as ds:
        if "power_by_llm" not in ds or ds.sizes.get("llm", 0) < 2:
            return None
        df = ds["power_by_llm"].to_dataframe().reset_index()
    df = df.dropna(subset=["power_by_llm"])
    if df.empty:
        return None
    keys = [c for c in ("kind", "by_value", "test", "value") if c in df.columns]
    wide = df.pivot_table(index=keys, columns="llm", values="power_by_llm", sort=False)
    wide.columns = [f"power, LLM {c}" for c in wide.columns]
    return Table(wide.reset_index(), caption="Power per LLM (the per-LLM tests: each LLM "
                                             "analysed alone); the curve above averages them",
                 float_format="{:.3g}")


def power_section(power_dir_: str | os.PathLike[str], *, assumptions: bool = True) -> Section:
    """The smallest sizes reaching the target, the power curve, the per-LLM power and the
    table, with a warning on ``rm-anova`` tests when stories share difficulty; the
    assumptions first unless ``assumptions=False`` (a page that shows them apart)."""
    from tomstats.planning.figure import fig_power

    d = Path(power_dir_)
    df = pd.read_csv(d / POWER_TABLE)
    summary = _summary(d)
    settings = summary.get("settings", {})
    target = float(settings.get("target", 0.8))
    along = str(df["along"].iloc[0]) if len(df) else "value"
    by = str(df["by"].iloc[0]) if "by" in df.columns and len(df) else None
    lines = ("one line per test" if by is None else
             f"one panel per test, one line per {by.replace('_', ' ')}")
    blocks: list[Any] = list(assumptions_blocks(settings)) if assumptions and settings else []
    warning = rm_anova_warning(settings)
    if warning is not None:
        blocks.append(warning)
    by_cols = [] if by is None else ["by_value"]
    targets = summary.get("targets")
    if targets:
        smallest = float(df["value"].min()) if len(df) else None
        tab = pd.DataFrame(targets)[["kind", *by_cols, "test", "value", "value_optimistic",
                                     "value_sure", "interpolated"]]
        for c in ("value", "value_optimistic", "value_sure"):
            tab[c] = [target_label(v, smallest) for v in tab[c]]
        blocks.append(Table(tab.rename(columns={
            "value": f"smallest {along} reaching {target:.0%}", "by_value": by,
            "value_optimistic": "MC optimistic", "value_sure": "MC sure"}),
            caption="Smallest value reaching the target power (first value whose estimate, "
                    "Wilson upper bound, or lower bound reaches it; 'or fewer': already at "
                    "the smallest value tried; 'not reached': not within the values tried)"))
    blocks.append(Image(figure_png(fig_power(df, target)), "power",
                        f"Power by {along.replace('_', ' ')}: {lines}, 95 % Monte Carlo "
                        f"(Wilson) band; dotted: the {target:.0%} target. "
                        f"{settings.get('replicates', '?')} simulated studies per value, "
                        f"significance level {settings.get('alpha', '?')}."))
    per_llm = _per_llm_table(d)
    if per_llm is not None:
        blocks.append(per_llm)
    show = df[["kind", *by_cols, "value", "test", "power", "ci_low", "ci_high", "estimate",
               "n_failed"]].rename(columns={"by_value": by} if by else {})
    blocks.append(Table(show, caption="Power per value and test", float_format="{:.3g}"))
    return Section("Power analysis", tuple(blocks))


def power_document(power_dir_: str | os.PathLike[str]) -> Document:
    """A report for a ``tomstats power`` output folder: assumptions first, then findings."""
    d = Path(power_dir_)
    settings = _summary(d).get("settings", {})
    src = settings.get("posterior")
    fit = f" · fit {Path(str(src.get('file', '?'))).name}" if src else ""
    subtitle = (f"tomstats {settings.get('tomstats_version', '?')} · seed "
                f"{settings.get('seed', '?')} · {settings.get('replicates', '?')} studies per "
                f"value{fit} · folder {d.name}")
    sections = []
    failed = list((src or {}).get("failed_checks") or [])
    if failed:  # an assurance run on a fit that failed its checks (--allow-warnings): first
        from tomstats.glmm.verdict import failed_checks_note

        name = Path(str(src.get("file", "the fit"))).name
        sections.append(Section("", (Text(failed_checks_note(failed, f"The fit {name}"),
                                          "warning"),)))
    if settings:
        sections.append(Section("Assumptions", assumptions_blocks(settings)))
    sections.append(power_section(d, assumptions=False))
    return Document("tomstats power report", subtitle, tuple(sections))
