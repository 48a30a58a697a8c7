"""Between- against within-story designs (tomstats.planning.story_designs): the comparison is
the two power runs it names, the questions, LLM calls and stories follow the formulas (checked
on curves made by hand), the command line prints and writes it, and bad input is refused by
name before any simulation. The GLMM comparison the planning page shows is checked in the
slow set (tests/test_docs_examples.py); these tests use the ANOVA, whose programs compile in
seconds."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tomstats
from tomstats.design import CONTEXT, TOM, Design, Factor
from tomstats.model import Params
from tomstats.planning.result import PowerResult
from tomstats.planning.story_designs import (
    COMPARISON_SUMMARY,
    COMPARISON_TABLE,
    StoryDesignComparison,
    _needs,
    compare_story_designs,
    format_comparison,
)
from tomstats.simulation.study import PowerSpec, StudyConfig

#: A small study: 3 lengths × 2 orders, 3 LLMs; strong context effect, story sd 1.
SMALL = StudyConfig(design=Design((Factor(CONTEXT, (200.0, 1000.0, 5000.0)),
                                   Factor(TOM, (0.0, 1.0))), 10, (0.8, 1.0, 1.2)),
                    params=Params(alpha=1.5e-4, gamma=1.0, delta=1e-4, sigma=1.0))
#: One size: each study size of a within-story design compiles its own simulation.
KW = dict(values=[6], tests=["anova:context_length"], replicates=40, seed=3)


def test_the_comparison_is_the_two_power_runs():
    """Every curve is the one tomstats.power gives for that study and story design with the
    same settings and seed."""
    other = StudyConfig(design=SMALL.design, params=SMALL.params.replace(sigma=0.2))
    cmp = compare_story_designs({"strong": SMALL, "weak": other}, progress=False, **KW)
    assert set(cmp.curves["study"]) == {"strong", "weak"}
    for (label, cfg) in (("strong", SMALL), ("weak", other)):
        for design in ("between", "within"):
            ref = tomstats.power(cfg, along={"questions_per_cell": KW["values"]},
                                 tests=KW["tests"], replicates=40, seed=3,
                                 story_design=design, progress=False).frame()
            got = cmp.curves[(cmp.curves["study"] == label)
                             & (cmp.curves["story_design"] == design)]
            np.testing.assert_array_equal(got["power"].to_numpy(), ref["power"].to_numpy())
            np.testing.assert_array_equal(got["ci_low"].to_numpy(), ref["ci_low"].to_numpy())
            assert got["questions_per_cell"].tolist() == KW["values"]
    assert cmp.studies["weak"]["params"]["sigma"] == 0.2
    assert cmp.settings["replicates"] == 40 and cmp.settings["values"] == KW["values"]


def _result(powers: dict[str, list[float]], values: list[float]) -> PowerResult:
    """A PowerResult with the given power per test (kind plug-in) and target 0.8."""
    tests = list(powers)
    p = np.array([[powers[t][i] for t in tests] for i in range(len(values))])[None]
    ds = xr.Dataset({"power": (("kind", "value", "test"), p),
                     "ci_low": (("kind", "value", "test"), p - 0.05),
                     "ci_high": (("kind", "value", "test"), p + 0.05)},
                    coords={"kind": ["plug-in"], "value": values, "test": tests},
                    attrs={"target": 0.8, "along": "questions_per_cell"})
    return PowerResult(ds)


def test_needs_follow_the_formulas():
    """On hand-made curves: n* = ceil of the linear interpolation at 80 %, Q = C·T·n*,
    calls = L·C·T·n*, stories C·T·n* (between) or T·n* (within), the ratio of n*."""
    values = [10.0, 20.0, 40.0]
    between = _result({"a": [0.5, 0.7, 0.9], "b": [0.85, 0.9, 1.0], "c": [0.1, 0.2, 0.3]},
                      values)
    within = _result({"a": [0.6, 0.85, 0.95], "b": [0.9, 1.0, 1.0], "c": [0.1, 0.5, 0.79]},
                     values)
    cfg = StudyConfig()  # 5 lengths × 3 orders, 5 LLMs
    spec = PowerSpec(along="questions_per_cell", values=tuple(values), tests=("a", "b", "c"))
    needs = _needs({("s", "between"): between, ("s", "within"): within}, {"s": cfg}, spec)
    row = {(r.test, r.story_design): r for r in needs.itertuples(index=False)}
    # a: between 20 + 20·(0.8 − 0.7)/(0.9 − 0.7) = 30; within 10 + 10·0.2/0.25 = 18
    assert row[("a", "between")].interpolated == pytest.approx(30.0)
    assert row[("a", "within")].interpolated == pytest.approx(18.0)
    assert row[("a", "between")].questions_per_cell == 30
    assert row[("a", "within")].questions_per_cell == 18
    assert row[("a", "between")].questions_per_llm == 15 * 30
    assert row[("a", "between")].llm_calls == 5 * 15 * 30
    assert row[("a", "between")].stories == 15 * 30
    assert row[("a", "within")].stories == 3 * 18
    assert row[("a", "within")].calls_vs_between == pytest.approx(18 / 30)
    # b: reached at the smallest value by both ("or fewer"); c: by neither
    assert row[("b", "between")].or_fewer and row[("b", "between")].questions_per_cell == 10
    assert not row[("c", "within")].reached
    assert pd.isna(row[("c", "within")].llm_calls)
    # the same rounding up when the interpolation is not whole: 10 + 10·0.05/0.15 = 13.33 → 14
    within2 = _result({"a": [0.75, 0.9, 0.95], "b": [1, 1, 1], "c": [1, 1, 1]}, values)
    n2 = _needs({("s", "between"): between, ("s", "within"): within2}, {"s": cfg}, spec)
    assert n2.iloc[1]["questions_per_cell"] == 14


def test_stories_follow_items_per_cell_when_given():
    values = [10.0, 20.0]
    res = _result({"a": [0.5, 0.9]}, values)
    spec = PowerSpec(along="questions_per_cell", values=tuple(values), tests=("a",),
                     items_per_cell=4)
    needs = _needs({("s", "between"): res, ("s", "within"): res}, {"s": StudyConfig()}, spec)
    assert needs["stories"].tolist() == [15 * 4, 3 * 4]


def test_printed_table_reads_the_result():
    values = [10.0, 20.0, 40.0]
    between = _result({"a": [0.5, 0.7, 0.9], "c": [0.1, 0.2, 0.3]}, values)
    within = _result({"a": [0.6, 0.85, 0.95], "c": [0.1, 0.5, 0.79]}, values)
    cfg = StudyConfig()
    spec = PowerSpec(along="questions_per_cell", values=tuple(values), tests=("a", "c"))
    needs = _needs({("s", "between"): between, ("s", "within"): within}, {"s": cfg}, spec)
    curves = pd.concat([
        pd.DataFrame({"study": "s", "story_design": d, "questions_per_cell": v, "test": t,
                      "power": r.data["power"].sel(kind="plug-in", value=v, test=t).item(),
                      "ci_low": 0.0, "ci_high": 0.1}, index=[0])
        for d, r in (("between", between), ("within", within)) for v in values
        for t in ("a", "c")], ignore_index=True)
    cmp = StoryDesignComparison(curves, needs, {"s": {
        "params": cfg.params.to_dict(), "capability": [1.0], "n_llms": 5,
        "capabilities_drawn": False, "capability_sd": None, "cells": [5, 3]}},
        {"values": [10, 20, 40], "tests": ["a", "c"], "replicates": 100, "seed": 0,
         "alpha": 0.05, "target": 0.8})
    text = format_comparison(cmp)
    lines = {tuple(line.split()[:3]): line for line in text.splitlines()}
    a_between = lines[("s", "a", "between")].split()
    assert a_between[3:8] == ["0.50", "/", "0.70", "/", "0.90"]
    assert a_between[8:] == ["30", "450", "2,250", "450"]
    assert lines[("s", "a", "within")].split()[8:] == ["18", "270", "1,350", "54", "0.60"]
    assert lines[("s", "c", "within")].split()[8:] == [">", "40", "—", "—", "—", "—"]
    assert "100 simulated studies per value and design, seed 0, level 0.05" in text
    assert "±0.05 to ±0.05" in text


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="two studies are labelled 'power'"):
        compare_story_designs(["simulations/power.toml", "other/power.toml"], values=[4])
    with pytest.raises(ValueError, match=r"items_per_cell \(6\) must not exceed the smallest "
                                         r"questions_per_cell \(4\)"):
        compare_story_designs(SMALL, values=[4, 8], items_per_cell=6)
    with pytest.raises(ValueError, match="values must be a non-empty sequence"):
        compare_story_designs(SMALL, values=[])
    with pytest.raises(ValueError, match="varies 'n_llms', not questions_per_cell"):
        compare_story_designs(StudyConfig(power=PowerSpec(along="n_llms", values=(3, 5))))
    with pytest.raises(TypeError, match=r"studies\['x'\] must be a StudyConfig"):
        compare_story_designs({"x": 3}, values=[4])
    with pytest.raises(ValueError, match="tests: unknown test 'anova:contxt'"):
        compare_story_designs(SMALL, values=[4], tests=["anova:contxt"])


def test_command_line_prints_and_writes_the_comparison(tmp_path, repo_root, capsys):
    from tomstats.cli import main

    toml = tmp_path / "small.toml"
    toml.write_text(
        "[design]\nquestions_per_cell = 10\ncapability = [0.8, 1.0, 1.2]\n"
        "[[design.factors]]\nname = 'context_length'\nlevels = [200, 1000, 5000]\n"
        "[[design.factors]]\nname = 'tom_order'\nlevels = [0, 1]\n"
        "[parameters]\nalpha = 1.5e-4\ngamma = 1.0\ndelta = 1e-4\nsigma = 1.0\n",
        encoding="utf-8")
    out = tmp_path / "cmp"
    rc = main(["power", str(toml), "--compare-story-designs", "--along",
               "questions_per_cell=6", "--test", "anova:context_length", "--replicates",
               "40", "--seed", "3", "--out", str(out), "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [COMPARISON_TABLE, COMPARISON_SUMMARY]
    df = pd.read_csv(out / COMPARISON_TABLE)
    ref = compare_story_designs({"small": toml}, progress=False, **KW)
    np.testing.assert_array_equal(df["power"].to_numpy(), ref.curves["power"].to_numpy())
    doc = json.loads((out / COMPARISON_SUMMARY).read_text(encoding="utf-8"))
    assert [n["story_design"] for n in doc["needs"]] == ["between", "within"]
    assert doc["studies"]["small"]["cells"] == [3, 2]
    assert re.search(r"^small\s+anova:context_length\s+within\s", printed, flags=re.M)
    assert "wrote 2 files to" in printed
    for extra, message in ((["--story-design", "within"], "--story-design"),
                           (["--by", "n_llms=3,5"], "--by does not apply"),
                           (["--along", "n_llms=3,5"], "varies the questions per cell")):
        bad = tmp_path / "bad"
        rc = main(["power", str(toml), "--compare-story-designs", "--out", str(bad),
                   *extra])
        assert rc == 2, extra
        assert message in capsys.readouterr().err
        assert not bad.exists() or not any(bad.iterdir())
    rc = main(["power", "--from-fit", "fit.json", "--compare-story-designs", "--out",
               str(tmp_path / "x")])
    assert rc == 2
    assert "--compare-story-designs does not apply with --from-fit" in capsys.readouterr().err


def test_shipped_calibration_is_the_smollm2_fit_of_the_docs(repo_root):
    """simulations/smollm2-calibrated.toml holds the posterior means of the SmolLM2 fit whose
    table docs/glmm-real-data.md prints (tests/test_docs_fit_tables.py checks that table
    against a new fit): each within 0.15 posterior sd, the tolerance of that check."""
    import tomllib

    cal = tomllib.loads((repo_root / "simulations" / "smollm2-calibrated.toml")
                        .read_text(encoding="utf-8"))
    page = (repo_root / "docs" / "glmm-real-data.md").read_text(encoding="utf-8")
    table = page.split("<!-- begin: table written by docs/fit_tables.py smollm2", 1)[1]
    table = table.split("<!-- end:", 1)[0]
    shown = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and re.fullmatch(r"−?\d[\d.]*(e[−-]?\d+)?", cells[1]):
            shown[cells[0].split()[0]] = tuple(float(c.replace("−", "-")) for c in cells[1:3])
    assert set(shown) == {"γ", "α", "δ", "capability", "σ"}, shown
    params = cal["parameters"]
    got = {"γ": params["gamma"], "α": params["alpha"], "δ": params["delta"],
           "σ": params["sigma"], "capability": cal["design"]["capability"][0]}
    for name, (mean, sd) in shown.items():
        assert abs(got[name] - mean) <= 0.15 * sd, (name, got[name], mean, sd)
    assert cal["meta"]["calibration"]["llms"] == ["smollm2-local"]
    assert cal["meta"]["calibration"]["source"]["model"] == "structural"
    cfg = tomstats.load_study(repo_root / "simulations" / "smollm2-calibrated.toml")
    assert cfg.params.sigma == params["sigma"] and cfg.design.shape == (5, 3)
