"""Posterior tables of docs pages, made from the fits that the pages' own commands write.

Each table in :data:`TABLES` lies in its page between two markers::

    <!-- begin: table written by docs/fit_tables.py KEY (do not edit by hand) -->
    ...
    <!-- end: table written by docs/fit_tables.py KEY -->

and is made from the fit file that a ``tomstats fit … --out FILE`` command of the same page
writes (the command is taken from the page, so the page's command is the one run):

    python docs/fit_tables.py docs/glmm-real-data.md                 # refit, rewrite tables
    python docs/fit_tables.py docs/glmm-real-data.md --only smollm2  # one table
    python docs/fit_tables.py docs/glmm-real-data.md --fits DIR       # reuse fits in DIR
    python docs/fit_tables.py docs/glmm-real-data.md --check          # exit 1 if stale

The commands run in a scratch folder that sees the repository's ``data/``, ``models/``,
``simulations/`` and ``../shared`` (as ``docs/update_examples.py`` does), or in ``--fits DIR``
where a fit already there is reused. ``--check`` compares the page's numbers with the fit's
within Monte Carlo tolerances (means and interval ends within 0.15 posterior sd, sds within
10 %, bulk ESS within 30 %, R-hat to 0.01), so a fit repeated on another machine, whose
draws may differ in the last bits, still agrees, and a changed log, model or sampler does
not.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import update_examples as ue  # noqa: E402

MINUS = "\u2212"


@dataclasses.dataclass(frozen=True)
class Row:
    """One parameter: its label on the page, the posterior variable (``name`` or
    ``name[dim=value]``) and how its numbers are written (``"f3"``: three decimals,
    ``"e1"``: 2.1e-4)."""

    label: str
    var: str
    fmt: str = "f3"


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: the fit file its command writes, its rows, and its interval: ``"hdi"`` (95 %
    highest-density, ArviZ) or ``"eti"`` (2.5 and 97.5 % quantiles); ``diagnostics`` adds
    bulk ESS and R-hat columns."""

    key: str
    fit: str
    rows: tuple[Row, ...]
    interval: str = "hdi"
    diagnostics: bool = True

    @property
    def columns(self) -> tuple[str, ...]:
        iv = "95 % HDI" if self.interval == "hdi" else "95 % interval (2.5–97.5 %)"
        return ("parameter", "mean", "sd", iv) + (("bulk ESS", "R-hat")
                                                   if self.diagnostics else ())


#: The tables of docs/glmm-real-data.md.
TABLES = (
    Table("triplets-formula", "triplets_formula.nc", (
        Row("`tom_order` (logit per order)", "beta[coef=tom_order]"),
        Row("sd of story intercepts", "sd_item"),
        Row("sd of model intercepts", "sd_model"),
    )),
    Table("triplets-structural", "triplets_structural.nc", (
        Row("γ (logit per ToM order)", "gamma"),
        Row("σ (story sd)", "sigma_item"),
        *(Row(f"capability m, {name}", f"capability[llm={name}]") for name in (
            "DeepSeek-R1", "Llama-3.2-3B-Instruct-Turbo", "Llama-3.3-70B-Instruct-Turbo",
            "Meta-Llama-3.1-405B-Instruct-Turbo", "Meta-Llama-3.1-70B-Instruct-Turbo",
            "Meta-Llama-3.1-8B-Instruct-Turbo", "QwQ-32B-Preview", "gpt-4")),
    )),
    Table("chartom", "chartom.nc", (
        Row("context (logit per 1000 tokens)", "beta[coef=I(context_len / 1000)]"),
        Row("Chinese vs English", "beta[coef=language[T.zh]]"),
        Row("emotion vs belief", "beta[coef=tom_dimension[T.emotion]]"),
        Row("intention vs belief", "beta[coef=tom_dimension[T.intention]]"),
        Row("sd of per-model context slopes", "sd_model[model_effect=I(context_len / 1000)]"),
    )),
    Table("mislead", "mislead.nc", (
        Row("mislead distance (logit per 10 events)", "beta[coef=I(condition / 10)]"),
        Row("`tom_order` (1 vs 0, as labelled per file)", "beta[coef=tom_order]"),
        Row("sd of model intercepts (2 models)", "sd_model"),
    )),
    Table("tombench", "tombench.nc", (
        Row("story length, logit per 100 words", "beta[coef=I(story_words_en / 100)]"),
        Row("sd of the model-run intercepts", "sd_run_dir"),
    ), interval="eti"),
    Table("smollm2", "smollm2.nc", (
        Row("γ (logit per ToM order)", "gamma"),
        Row("α (per word, × c ln(1 + c/500))", "alpha", "e1"),
        Row("δ (per word per order)", "delta", "e1"),
        Row("capability m", "capability"),
        Row("σ (story sd)", "sigma_item"),
    ), interval="eti"),
)


def begin_marker(key: str) -> str:
    return f"<!-- begin: table written by docs/fit_tables.py {key} (do not edit by hand) -->"


def end_marker(key: str) -> str:
    return f"<!-- end: table written by docs/fit_tables.py {key} -->"


def fit_command(text: str, fit: str) -> list[str]:
    """The page's ``tomstats fit`` command that writes ``fit`` (continuation lines joined)."""
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("$ tomstats fit "):
                words = shlex.split(line.removeprefix("$ "))
                if "--out" in words and words[words.index("--out") + 1] == fit:
                    return words
    raise SystemExit(f"no `tomstats fit … --out {fit}` command on the page")


def _draws(idata, var: str):  # noqa: ANN001, ANN202 - an InferenceData, a DataArray
    m = re.fullmatch(r"(\w+)(?:\[(\w+)=(.+)\])?", var)
    x = idata.posterior[m.group(1)]
    if m.group(2):
        x = x.sel({m.group(2): m.group(3)})
    extra = [d for d in x.dims if d not in ("chain", "draw")]
    if extra:  # one element: the only LLM's capability, say
        if x.size != x.sizes["chain"] * x.sizes["draw"]:
            raise SystemExit(f"{var} has dims {extra}: name one element, e.g. {var}[dim=value]")
        x = x.squeeze(extra, drop=True)
    return x


def summary(table: Table, fit: Path) -> list[dict[str, float]]:
    """Mean, sd, interval, bulk ESS and R-hat of each row's parameter."""
    import arviz as az
    import numpy as np

    idata = az.from_netcdf(fit)
    out = []
    for row in table.rows:
        x = _draws(idata, row.var)
        flat = np.asarray(x).ravel()
        if table.interval == "hdi":
            lo, hi = (float(v) for v in np.asarray(az.hdi(x, hdi_prob=0.95)[x.name]))
        else:
            lo, hi = (float(v) for v in np.quantile(flat, [0.025, 0.975]))
        out.append({"mean": float(flat.mean()), "sd": float(flat.std(ddof=1)), "low": lo,
                    "high": hi, "ess": float(az.ess(x, method="bulk")[x.name]),
                    "rhat": float(az.rhat(x)[x.name])})
    return out


def number(x: float, fmt: str) -> str:
    """As the page writes it: three decimals (three significant digits when |x| ≥ 1) or
    ``2.1e-4``, with a true minus sign in front of a negative number."""
    if fmt == "e1":
        mant, exp = f"{abs(x):.1e}".split("e")
        text = "0" if x == 0 else f"{mant}e{int(exp)}"
    else:
        text = f"{abs(x):.3f}" if abs(x) < 1 else f"{abs(x):.3g}"
    return (MINUS if x < 0 and text.strip("0.") else "") + text


def markdown(table: Table, stats: list[dict[str, float]]) -> str:
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for row, s in zip(table.rows, stats, strict=True):
        cells = [row.label, number(s["mean"], row.fmt), number(s["sd"], row.fmt),
                 f"[{number(s['low'], row.fmt)}, {number(s['high'], row.fmt)}]"]
        if table.diagnostics:
            cells += [f"{s['ess']:,.0f}", f"{s['rhat']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _value(cell: str) -> float:
    return float(cell.replace(MINUS, "-").replace(",", "").strip())


def _half_unit(cell: str) -> float:
    """Half a unit of the last digit a cell shows: ``−1.1e-3`` stands for any number within
    5e-5 of it, ``0.918`` for any within 5e-4, ``6,466`` for any within 0.5."""
    text = cell.replace(MINUS, "-").replace(",", "").strip()
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 0.5 * 10.0 ** (int(exp or 0) - decimals)


def differences(table: Table, shown: str, stats: list[dict[str, float]]) -> list[str]:
    """Where the page's table (``shown``) and the fit disagree beyond Monte Carlo error and
    the rounding of the cell."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in shown.splitlines() if line.startswith("|")]
    if not rows or tuple(rows[0]) != table.columns or len(rows) != len(table.rows) + 2:
        return [f"{table.key}: the table's columns or rows are not the ones written"]
    out = []
    for row, cells, s in zip(table.rows, rows[2:], stats, strict=True):
        if cells[0] != row.label:
            out.append(f"{table.key}: row {cells[0]!r}, expected {row.label!r}")
            continue
        lo, hi = cells[3].strip("[]").split(",")
        checks = [("mean", cells[1], s["mean"], 0.15 * s["sd"]),
                  ("sd", cells[2], s["sd"], 0.10 * s["sd"]),
                  ("low", lo, s["low"], 0.15 * s["sd"]), ("high", hi, s["high"], 0.15 * s["sd"])]
        if table.diagnostics:
            checks += [("bulk ESS", cells[4], s["ess"], 0.30 * s["ess"]),
                       ("R-hat", cells[5], s["rhat"], 0.005)]
        # Monte Carlo error of the fit (a fraction of the posterior sd) plus the rounding of
        # the cell: a number shown to two significant digits cannot be closer than that.
        for what, cell, fit, tol in checks:
            page = _value(cell)
            if abs(page - fit) > tol + _half_unit(cell) + 1e-12:
                out.append(f"{table.key}, {row.label}, {what}: page {page:g}, fit {fit:g}")
    return out


def make_fit(text: str, table: Table, folder: Path) -> Path:
    """The table's fit file in ``folder``: reused if there, else made by the page's command
    (a fit that fails a sampler check exits 4 with the file written: the page says so)."""
    import os
    import subprocess

    path = folder / table.fit
    if not path.exists():
        words = fit_command(text, table.fit)
        env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
        res = subprocess.run([sys.executable, "-m", "tomstats", *words[1:], "--no-progress"],
                             cwd=folder, capture_output=True, text=True, env=env, check=False)
        if res.returncode not in (0, 4) or not path.exists():
            raise RuntimeError(f"{shlex.join(words)} exited {res.returncode}: "
                               f"{res.stderr[-2000:]}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=Path, help="the page, e.g. docs/glmm-real-data.md")
    ap.add_argument("--only", nargs="+", metavar="KEY", help="these tables only")
    ap.add_argument("--fits", type=Path, metavar="DIR",
                    help="run the commands in DIR and reuse fits already there (default: a "
                         "temporary folder)")
    ap.add_argument("--check", action="store_true",
                    help="compare only; exit 1 if a table differs beyond Monte Carlo error")
    args = ap.parse_args(argv)
    text = args.page.read_text(encoding="utf-8")
    tables = [t for t in TABLES if begin_marker(t.key) in text
              and (args.only is None or t.key in args.only)]
    bad: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.fits or ue.scratch_folder(Path(tmp))
        for t in tables:
            stats = summary(t, make_fit(text, t, folder))
            start = text.index(begin_marker(t.key)) + len(begin_marker(t.key))
            end = text.index(end_marker(t.key))
            if args.check:
                bad += differences(t, text[start:end], stats)
            else:
                text = text[:start] + "\n" + markdown(t, stats) + text[end:]
    for b in bad:
        print(b, file=sys.stderr)
    if not args.check:
        tmp_page = args.page.with_suffix(".md.tmp")
        tmp_page.write_text(text, encoding="utf-8")
        tmp_page.replace(args.page)
        print(f"{args.page}: {len(tables)} table(s) written", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
