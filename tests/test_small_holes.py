"""Small holes of the third security round (issue 31, item 12), one table each: a query on
complex numbers, bootstrap counts bounded without ``--ci``, a bounded NUTS tree depth, the
``__`` check for grouping factors, and refusals that are one clear line (never a NumPy
warning, never NumPy's "p < 0, p > 1 or p contains NaNs"). Duplicate keys in a server's
reply are in ``tests/evaluate/test_security_replies.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _tables import small_table as _table

from tomstats._expr import ExpressionError, check_formula, query_mask
from tomstats.cli import main

ROOT = Path(__file__).resolve().parents[1]



def _one_error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert err[0].startswith(f"tomstats {command}: error: "), err
    return err[0]


COMPLEX_QUERIES = ["(-1) ** 0.5 < tom_order", "tom_order > (-8) ** (1/3)",
                   "(-2.5) ** 1.5 == 0 or tom_order >= 0"]


@pytest.mark.parametrize("query", COMPLEX_QUERIES)
def test_a_query_on_complex_numbers_is_refused(tmp_path: Path, query: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    df = pd.read_csv(_table(tmp_path / "t.csv"))
    with pytest.raises(ExpressionError, match="no real value"):
        query_mask(df, query)
    assert main(["summarize", str(tmp_path / "t.csv"), "--query", query]) == 2
    assert "has no real value" in _one_error_line(capsys, "summarize")


def test_real_powers_still_work(tmp_path: Path) -> None:
    df = pd.read_csv(_table(tmp_path / "t.csv"))
    assert query_mask(df, "tom_order ** 0.5 < 1.2").sum() == 2 * len(df) // 3
    assert query_mask(df, "(-2) ** 2 == 4").all()


N_BOOT = {"-1": "--n-boot must be a non-negative integer, got -1",
          "1e18": "--allow-large", "1000000000000000000": "--allow-large",
          "2.5": "expected a whole number, got '2.5'"}


# (``report`` bounded these already; ``anova`` read them only with --ci)
@pytest.mark.parametrize("command", ["anova"])
@pytest.mark.parametrize("value", list(N_BOOT))
def test_n_boot_is_bounded_without_ci(tmp_path: Path, command: str, value: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    log = _table(tmp_path / "t.csv")
    extra = ["--out", str(tmp_path / "r.html")] if command == "report" else []
    try:
        code = main([command, str(log), "--n-boot", value, *extra])
    except SystemExit as exc:  # a usage error, from the argument parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert N_BOOT[value] in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("depth", ["0", "16", "10000", "1e9"])
def test_max_tree_depth_is_bounded(tmp_path: Path, depth: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tomstats.glmm.fitting import MAX_TREE_DEPTH, fit

    log = _table(tmp_path / "t.csv")
    with pytest.raises(SystemExit) as info:
        main(["fit", str(log), "--max-tree-depth", depth, "--out", str(tmp_path / "f.nc")])
    assert info.value.code == 2
    assert f"from 1 to {MAX_TREE_DEPTH}" in capsys.readouterr().err
    with pytest.raises(ValueError, match="max_tree_depth must be an integer"):
        fit(pd.read_csv(log), max_tree_depth=int(float(depth)))
    assert not (tmp_path / "f.nc").exists()


GROUPS = ["__class__", "model.__class__", "__builtins__:model", "model/__dict__"]


@pytest.mark.parametrize("group", GROUPS)
def test_group_names_get_the_dunder_check(tmp_path: Path, group: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    formula = f"correct ~ tom_order + (1 | {group})"
    with pytest.raises(ExpressionError, match="names starting with '__' are not allowed"):
        check_formula(formula)
    log = _table(tmp_path / "t.csv")
    assert main(["fit", str(log), "--model", formula, "--backend", "laplace", "--out",
                 str(tmp_path / "f.json")]) == 2
    assert "names starting with '__'" in _one_error_line(capsys, "fit")


def test_plain_and_backticked_groups_still_parse() -> None:
    assert check_formula("correct ~ x + (1 | model)").variables
    check_formula("correct ~ x + (1 | `my model`) + (1 | model:item)")


def _nan_fit(tmp_path: Path) -> Path:
    from glmm.test_fit_loader import laplace_dict

    d = laplace_dict()
    d["beta"][1] = float("nan")
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(d))
    return p


def test_refusals_print_one_line_and_no_numpy_warning(tmp_path: Path) -> None:
    """A fit with NaN estimates used to reach NumPy: warnings ("invalid value encountered")
    before the error, or NumPy's own "p < 0, p > 1 or p contains NaNs" as the message."""
    fit = _nan_fit(tmp_path)
    log = _table(tmp_path / "t.csv")
    runs = {
        "report": ["report", str(fit), "--out", str(tmp_path / "r.html")],
        "power": ["power", "--from-fit", str(fit), "--data", str(log), "--term", "fb",
                  "--out", str(tmp_path / "pw")],
    }
    for command, argv in runs.items():
        proc = subprocess.run([sys.executable, "-W", "default", "-m", "tomstats", *argv],
                              capture_output=True, text=True, cwd=ROOT)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2, proc.stderr
        assert len(lines) == 1 and lines[0].startswith(f"tomstats {command}: error:"), lines
        assert "Warning" not in proc.stderr and "p contains NaNs" not in proc.stderr


def test_binomial_draws_are_checked_before_numpy() -> None:
    from tomstats._validate import check_probabilities

    with pytest.raises(ValueError, match="simulated studies: a success probability is nan"):
        check_probabilities(np.array([0.2, np.nan]), "simulated studies")
    with pytest.raises(ValueError, match="is 1.5, not in"):
        check_probabilities([1.5], "x")
    np.testing.assert_array_equal(check_probabilities([0.0, 1.0], "x"), [0.0, 1.0])
