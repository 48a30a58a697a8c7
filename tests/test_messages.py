"""The messages a user meets after a slip, one table row each: what the command must say, and
what it used to say instead (issue 33, part 6).

Every row runs the command line in this process (``tomstats.cli.main``), so the Laplace fits
share one compilation; a row passes when the exit status is the expected one, every wanted
phrase is in the output and no unwanted one is.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from _tables import small_table

from tomstats.cli import main

FORMULA = "correct ~ tom_order + (1 | model) + (1 | item)"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The small table, variants of it, and a Laplace fit of it (singular: its LLMs differ
    too little for a model variance)."""
    d = tmp_path_factory.mktemp("messages")
    small = small_table(d / "small.csv")
    df = pd.read_csv(small)
    df[df["model"] == "a"].to_csv(d / "one_llm.csv", index=False)  # another log, one LLM
    df.rename(columns={"correct": "Correct"}).to_csv(d / "capital.csv", index=False)
    shutil.copy(small, d / "table.jsonl")  # a CSV named as a log
    fit = d / "fit.json"
    assert main(["fit", str(small), "--model", FORMULA, "--backend", "laplace",
                 "--out", str(fit)]) == 0
    shutil.copy(fit, d / "fit_json.nc")  # the JSON under a netCDF name
    return {"small": small, "one_llm": d / "one_llm.csv", "capital": d / "capital.csv",
            "jsonl": d / "table.jsonl", "fit": fit, "fit_nc": d / "fit_json.nc", "dir": d}


@dataclass(frozen=True)
class Case:
    """A command line (``{name}`` fields filled from :func:`files`), its exit status, what
    its output must hold and what it must not."""

    argv: tuple[str, ...]
    code: int
    wanted: tuple[str, ...]
    unwanted: tuple[str, ...] = field(default=())
    #: the Laplace fit comes back as not converged (a fit that stops at its iteration limit
    #: would compile its solver anew; this keeps the one compilation of the module)
    unconverged: bool = False


CASES = {
    # calibrate reads a structural sampler fit; a Laplace JSON went to the netCDF library
    "calibrate-laplace-json": Case(
        ("calibrate", "{fit}", "--out", "{dir}/p.toml"), 2,
        ("needs a structural sampler fit", "--model structural"), ("NetCDF", "Errno")),
    "calibrate-laplace-json-named-nc": Case(
        ("calibrate", "{fit_nc}", "--out", "{dir}/p.toml"), 2,
        ("needs a structural sampler fit",), ("NetCDF", "Errno")),
    # another log: the data hash first, not what the other log lacks for the design
    "power-from-fit-other-log": Case(
        ("power", "--from-fit", "{fit}", "--data", "{one_llm}", "--term", "tom_order",
         "--out", "{dir}/power"), 2,
        ("data hash differs", "one_llm.csv"), ("single level",)),
    # a CSV table named .jsonl
    "csv-named-jsonl": Case(
        ("summarize", "{jsonl}"), 2, ("not a JSON record", "name the file .csv")),
    # --map is STANDARD=COLUMN; the suggestion for a pair written the other way round is the
    # pair the right way round
    "map-reversed": Case(
        ("anova", "{capital}", "--map", "Correct=correct"), 2,
        ("did you mean --map correct=Correct?",), ("did you mean 'correct'?",)),
    "map-standard-name-typo": Case(
        ("summarize", "{capital}", "--map", "corect=Correct"), 2,
        ("did you mean --map correct=Correct?",)),
    "missing-standard-column": Case(
        ("summarize", "{capital}"), 2,
        ("did you mean 'Correct'?", "--map correct=Correct"), ("--map correct=COLUMN",)),
    "factor-typo": Case(
        ("anova", "{small}", "--between", "tom_ordr"), 2,
        ("did you mean 'tom_order'?",), ("--map tom_ordr",)),
    "formula-standard-column": Case(
        ("fit", "{capital}", "--model", "correct ~ tom_order + (1 | model)", "--backend",
         "laplace", "--out", "{dir}/x.json"), 2, ("--map correct=Correct",),
        ("STANDARD=COLUMN",)),
    # the result is written: exit 4 is a warning, not an error
    "exit-4-is-a-warning": Case(
        ("fit", "{small}", "--model", FORMULA, "--backend", "laplace", "--out",
         "{dir}/unconverged.json"), 4,
        ("tomstats fit: warning: the Laplace fit did not converge", "exit 4",
         "--allow-warnings"), ("tomstats fit: error",), unconverged=True),
    "exit-0-with-allow-warnings": Case(
        ("fit", "{small}", "--model", FORMULA, "--backend", "laplace", "--allow-warnings",
         "--out", "{dir}/unconverged2.json"), 0, ("tomstats fit: warning:", "exit 0"),
        ("tomstats fit: error",), unconverged=True),
    # a singular fit's advice names the command, not a Python function (the advice of a fit
    # with random slopes: tests/glmm/test_glmm_lme.py::test_summary_prints_as_glmer)
    "singular-intercepts": Case(
        ("fit", "{small}", "--model", FORMULA, "--backend", "laplace", "--out",
         "{dir}/s1.json"), 0, ("boundary (singular) fit", "tomstats compare"), ("lme_anova",)),
}


@pytest.mark.parametrize("name", CASES)
def test_message(name: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    if case.unconverged:
        import tomstats.glmm.cli as fit_cli

        real = fit_cli.fit
        monkeypatch.setattr(fit_cli, "fit", lambda *a, **k: dataclasses.replace(
            real(*a, **k), converged=False, iterations=1))
    capsys.readouterr()
    try:
        code = main([a.format(**{k: str(v) for k, v in files.items()}) for a in case.argv])
    except SystemExit as exc:  # refused while the command line is parsed
        code = exc.code
    out, err = capsys.readouterr()
    text = out + err
    assert code == case.code, text
    for w in case.wanted:
        assert w in text, (w, text)
    for u in case.unwanted:
        assert u not in text, (u, text)


@pytest.mark.parametrize("items, shown", [(True, True), (False, False)])
def test_structural_model_line_names_item_effects_only_when_fitted(items: bool,
                                                                   shown: bool) -> None:
    """``+ u[item]`` in the model line of a structural fit only when it has item effects."""
    from _report_data import make_fit

    from tomstats.glmm.header import fit_header

    idata = make_fit(chains=1, draws=20, groups=())
    if not items:
        idata.posterior = idata.posterior.drop_vars("sigma_item")
    line = next(x for x in fit_header(idata).splitlines() if "Model: structural" in x)
    assert ("+ u[item]" in line) is shown, line
    assert "logit p = β0·m[llm] − α·c·ln(1 + c/500) − γ·t − δ·c·t" in line
