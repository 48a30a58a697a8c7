"""``tomstats anova --within`` prints the repeated-measures table as afex does (issue 33,
part 2): the corrected df and p lead, then MSE, F and generalized η²; the correction is
selectable (``--correction GG|HF|none``); the CSV has whole-number DF and no empty ``note``.

The reference is ``tests/reference/afex_nice.R`` (afex's ``anova(..., correction, MSE =
TRUE)`` and ``nice()`` of two logs of binary answers with the LLMs as subjects, one within
design and one mixed design): run afresh when ``Rscript`` with afex is installed, else the
committed ``tests/reference/afex_nice.json`` (same script, same seeds, the logs included).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import r_reference

from tomstats.cli import main

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
SCRIPT, COMMITTED = REFERENCE / "afex_nice.R", REFERENCE / "afex_nice.json"
RTOL = 1e-9
# afex's anova() column -> the column of tomstats anova --out
COLUMNS = {"num_df": "DF_corrected", "den_df": "DF_error_corrected", "MSE": "MSE", "F": "F",
           "ges": "generalized_eta2", "p": "p_corrected"}
LOGS = [d["name"] for d in json.loads(COMMITTED.read_text())["logs"]]


@functools.cache
def _reference(tmp: str) -> tuple[dict[str, Any], str]:
    return r_reference(SCRIPT, COMMITTED, ("afex", "jsonlite"), Path(tmp), timeout=600)


@pytest.fixture(scope="module")
def afex(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ref, source = _reference(str(tmp_path_factory.mktemp("afex_nice")))
    print(f"\nafex reference: {source}; afex {ref['afex']}, {ref['R']}")
    return ref


def _run(log: dict[str, Any], correction: str, tmp: Path,
         capsys: pytest.CaptureFixture[str]) -> tuple[str, pd.DataFrame]:
    csv, out = tmp / f"{log['name']}.csv", tmp / f"{log['name']}-{correction}-anova.csv"
    csv.write_text(log["csv"] + "\n", encoding="utf-8")
    argv = ["anova", str(csv), "--within", *log["within"], "--subject", "model",
            "--ss-type", str(log["type"]), "--correction", correction, "--out", str(out)]
    if log["between"]:
        argv += ["--between", *log["between"]]
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out, pd.read_csv(out)


@pytest.mark.parametrize("correction", ["GG", "HF", "none"])
@pytest.mark.parametrize("name", LOGS)
def test_table_matches_afex(afex, name: str, correction: str, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    log = next(d for d in afex["logs"] if d["name"] == name)
    want = next(t for t in log["tables"] if t["correction"] == correction)
    printed, table = _run(log, correction, tmp_path, capsys)
    table = table.set_index("source")
    assert sorted(table.index) == sorted(r["source"] for r in want["rows"])
    for r in want["rows"]:
        for theirs, ours in COLUMNS.items():
            assert table.loc[r["source"], ours] == pytest.approx(r[theirs], rel=RTOL), (
                r["source"], theirs)
    # the printed table leads with afex's columns; df printed as afex's nice() prints it
    lines = printed.splitlines()
    tag = "" if correction == "none" else f" ({correction})"
    header = next(ln for ln in lines if ln.lstrip().startswith("source"))
    assert " ".join(header.split()).startswith(f"source df{tag} MSE F ges p{tag} "), header
    for nice in want["nice"]:
        row = next(ln for ln in lines if ln.split()[0] == nice["Effect"])
        assert f" {nice['df']} " in row, (nice, row)
        p_shown = float(row.split()[6])  # source, "num,", "den", MSE, F, ges, p
        p_afex = next(r["p"] for r in want["rows"] if r["source"] == nice["Effect"])
        assert p_shown == pytest.approx(p_afex, rel=5e-3)
    # the CSV: whole-number DF, and no note column when no row has a note
    assert str(table["DF"].dtype).startswith("int") and "note" not in table.columns


def test_observed_factor_as_afex(afex, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``--observed family``: generalized η² as afex's ``observed = "family"`` gives it (the
    family's variance counted as error); F and p do not change."""
    log = next(d for d in afex["logs"] if d["between"])
    _, plain = _run(log, "GG", tmp_path, capsys)
    out = tmp_path / "observed.csv"
    assert main(["anova", str(tmp_path / f"{log['name']}.csv"), "--within", *log["within"],
                 "--between", "family", "--subject", "model", "--ss-type", str(log["type"]),
                 "--observed", "family", "--out", str(out)]) == 0
    assert "with family observed" in capsys.readouterr().out
    obs = pd.read_csv(out).set_index("source")
    for source, ges in log["ges_observed"].items():
        assert obs.loc[source, "generalized_eta2"] == pytest.approx(ges, rel=RTOL), source
    assert (obs["generalized_eta2"].to_numpy() < plain["generalized_eta2"].to_numpy()).any()
    pd.testing.assert_series_equal(obs["F"].reset_index(drop=True), plain["F"])
