"""The posterior tables of docs/glmm-real-data.md are the fits' of the page's own commands
(``docs/fit_tables.py`` writes them; these tests rerun the commands and compare within Monte
Carlo tolerances), and the calibrated sweep the page prints is the command's output.

The SmolLM2 table comes from the log the repository ships and runs by default (one fit of
240 rows); its calibrated sweep and the tables of the public data sets in ``../shared/data``
need minutes each and are marked slow."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "glmm-real-data.md"


def _tool(name: str):
    if name not in sys.modules:
        sys.path.insert(0, str(REPO / "docs"))
        spec = importlib.util.spec_from_file_location(name, REPO / "docs" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _shown(text: str, key: str, ft) -> str:  # noqa: ANN001 - the fit_tables module
    start = text.index(ft.begin_marker(key)) + len(ft.begin_marker(key))
    return text[start: text.index(ft.end_marker(key))]


_NUM = re.compile(r"-?\d+(?:\.\d+)?")


def _close_outputs(page: str, got: str) -> list[str]:
    """The same lines with numbers replaced by #, and each number within 0.03 + 25 % (a
    calibrated sweep of 100 posterior draws repeated on another machine)."""
    if _NUM.sub("#", page) != _NUM.sub("#", got):
        return [f"the output's text differs:\n{page}\n---\n{got}"]
    return [f"{a} vs {b}" for a, b in zip(_NUM.findall(page), _NUM.findall(got), strict=True)
            if abs(float(a) - float(b)) > 0.03 + 0.25 * abs(float(b))]


def _smollm2(tmp_path):  # noqa: ANN001, ANN202 - the modules, the page, the scratch
    ft, ue = _tool("fit_tables"), _tool("update_examples")
    text = PAGE.read_text(encoding="utf-8")
    scratch = ue.scratch_folder(tmp_path)
    table = next(t for t in ft.TABLES if t.key == "smollm2")
    return ft, ue, text, scratch, table, ft.make_fit(text, table, scratch)


def test_smollm2_table_is_the_commands(tmp_path):
    """The fit of the shipped log (about 30 s): the table within Monte Carlo error."""
    ft, _ue, text, _scratch, table, fit = _smollm2(tmp_path)
    bad = ft.differences(table, _shown(text, "smollm2", ft), ft.summary(table, fit))
    assert not bad, ("docs/glmm-real-data.md's SmolLM2 table is not the fit's; rewrite it "
                     f"with `python docs/fit_tables.py docs/glmm-real-data.md`: {bad}")


@pytest.mark.slow
def test_calibrated_sweep_is_the_commands(tmp_path):
    """The page's calibrated sweep of the same fit (its output within Monte Carlo error)."""
    _ft, ue, text, scratch, _table, _fit = _smollm2(tmp_path)
    (sweep,) = [e for e in ue.examples(text) if e.argv[1] == "simulate"]
    ue.prepare(sweep, text, scratch)  # the fit is there already
    bad = _close_outputs(sweep.output, ue.run(sweep, scratch))
    assert not bad, ("the calibrated sweep's output on docs/glmm-real-data.md is stale; "
                     f"rewrite it with `python docs/update_examples.py "
                     f"docs/glmm-real-data.md`: {bad}")


@pytest.mark.slow
@pytest.mark.parametrize("key", [t for t in ("triplets-formula", "chartom", "mislead",
                                             "tombench", "triplets-structural")])
def test_shared_data_tables_are_the_fits(key, tmp_path):
    ft, ue = _tool("fit_tables"), _tool("update_examples")
    if not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is absent")
    text = PAGE.read_text(encoding="utf-8")
    table = next((t for t in ft.TABLES if t.key == key), None)
    if table is None or ft.begin_marker(key) not in text:
        pytest.fail(f"{key}: no table of docs/fit_tables.py on the page")
    stats = ft.summary(table, ft.make_fit(text, table, ue.scratch_folder(tmp_path)))
    assert not ft.differences(table, _shown(text, key, ft), stats)


def test_the_checker_finds_a_stale_cell_and_formats_as_the_page():
    ft = _tool("fit_tables")
    table = ft.Table("t", "t.nc", (ft.Row("γ", "gamma"), ft.Row("α", "alpha", "e1")))
    stats = [{"mean": 0.597, "sd": 0.361, "low": -0.0951, "high": 1.3267, "ess": 7200.0,
              "rhat": 1.001},
             {"mean": 2.08e-4, "sd": 2.0e-4, "low": -1.9e-4, "high": 6.3e-4, "ess": 7216.0,
              "rhat": 1.0}]
    md = ft.markdown(table, stats)
    assert "| γ | 0.597 | 0.361 | [−0.095, 1.33] | 7,200 | 1.00 |" in md
    assert "| α | 2.1e-4 | 2.0e-4 | [−1.9e-4, 6.3e-4] | 7,216 | 1.00 |" in md
    assert ft.differences(table, md, stats) == []
    stale = md.replace("0.597", "0.700")  # 0.29 posterior sd away
    assert ft.differences(table, stale, stats) == ["t, γ, mean: page 0.7, fit 0.597"]
    assert ft.differences(table, md.replace("| γ |", "| g |"), stats)


def test_a_cell_stands_for_the_numbers_its_digits_round_to():
    """A value shown to two significant digits is checked within its rounding and the Monte
    Carlo tolerance together: −1.1e-3 fits −1.14e-3 (posterior sd 2.5e-4: 3.8e-5 of Monte
    Carlo error and 5e-5 of rounding), −1.3e-3 does not."""
    ft = _tool("fit_tables")
    assert ft._half_unit("−1.1e-3") == pytest.approx(5e-5)
    assert ft._half_unit("0.918") == pytest.approx(5e-4)
    assert ft._half_unit("6,466") == pytest.approx(0.5)
    assert ft._half_unit("1.85") == pytest.approx(5e-3)
    table = ft.Table("t", "t.nc", (ft.Row("δ", "delta", "e1"),))
    stats = [{"mean": -5.9e-4, "sd": 2.5e-4, "low": -1.14159e-3, "high": -1.5e-4,
              "ess": 5648.0, "rhat": 1.0}]
    md = ft.markdown(table, stats)
    assert "[−1.1e-3, −1.5e-4]" in md
    assert ft.differences(table, md, stats) == []
    off = md.replace("[−1.1e-3,", "[−1.3e-3,")
    assert ft.differences(table, off, stats) == ["t, δ, low: page -0.0013, fit -0.00114159"]
