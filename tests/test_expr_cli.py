"""No query or formula runs code, from the command line (issue: code execution, items 1-3).

The commands are those of the security report: ``--query`` in ``summarize``, ``anova``, ``fit``
and ``report``; ``fit --model`` with Python inside ``I()``; and a fit file whose stored formula
was edited, opened by ``report``. Each must exit 2 with one line and leave the marker file
(written by the shell command in the attack) unwritten. ``--map`` typos in the standard names
get the closest name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _tables import small_table as _table

from tomstats.cli import main


def _one_error_line(capsys, command: str) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert err[0].startswith(f"tomstats {command}: error: "), err
    return err[0]


SYSTEM = "id > PWNED"
QUERY_ATTACKS = {
    "summarize": f"tom_order >= (@os.system('{SYSTEM}') * 0)",
    "anova": f"tom_order >= (@pd.io.common.os.system('{SYSTEM}') * 0)",
    "fit": f"tom_order >= (@pd.io.common.os.system('{SYSTEM}') * 0)",
    "report": f"tom_order >= (@pd.io.common.os.system('{SYSTEM}') * 0)",
}
OUT = {"summarize": [], "anova": [], "fit": ["--out", "f.nc"], "report": ["--out", "r.html"]}


@pytest.mark.parametrize("command", list(QUERY_ATTACKS))
def test_query_attack_is_refused_in_every_command(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    rc = main([command, "t.csv", "--query", QUERY_ATTACKS[command], *OUT[command]])
    line = _one_error_line(capsys, command)
    assert rc == 2
    assert "'@' (a reference to a Python variable) is not allowed" in line
    assert not (tmp_path / "PWNED").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.parametrize("query", [
    "tom_order >= __import__('os').system('id > PWNED') * 0",
    "tom_order.__class__.__init__.__globals__['os'].system('id > PWNED') == 0",
    "tom_order >= (lambda: __import__('os').system('id > PWNED'))() * 0",
])
def test_other_query_attacks_are_refused(tmp_path, monkeypatch, capsys, query):
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    rc = main(["summarize", "t.csv", "--query", query])
    _one_error_line(capsys, "summarize")
    assert rc == 2 and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("command", ["summarize", "anova"])
def test_a_query_that_is_not_a_condition_is_refused(tmp_path, monkeypatch, capsys, command):
    """``--query tom_order`` selected rows by label before; now it is bad input."""
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    rc = main([command, "t.csv", "--query", "tom_order"])
    line = _one_error_line(capsys, command)
    assert rc == 2
    assert "--query 'tom_order': the query must be a condition, e.g. \"tom_order >= 1\"" in line


def test_a_valid_query_selects_the_same_rows_as_pandas(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    df = pd.read_csv(_table(tmp_path / "t.csv"))
    query = "model in ['a', 'c'] and `context_words` > 200 | tom_order == 0"
    rc = main(["summarize", "t.csv", "--query", query, "--by", "none", "--out", "s.csv"])
    assert rc == 0, capsys.readouterr().err
    cells = pd.read_csv(tmp_path / "s.csv")
    ref = df.query(query.replace("`", ""), engine="python")
    assert int(cells["n"].sum()) == len(ref)
    assert int(cells["n_correct"].sum()) == int(ref["correct"].sum())


FORMULA_ATTACKS = [
    f"correct ~ tom_order + I(pd.io.common.os.system('{SYSTEM}') * 0) + (1|model)",
    f"correct ~ tom_order + I(__import__('os').system('{SYSTEM}') * 0) + (1|model)",
    f"correct ~ tom_order + np.lib.npyio.os.system('{SYSTEM}') + (1|model)",
    f"correct ~ C(model, levels=[__import__('os').system('{SYSTEM}')]) + (1|model)",
]


@pytest.mark.parametrize("backend", ["numpyro", "laplace"])
@pytest.mark.parametrize("formula", FORMULA_ATTACKS)
def test_fit_model_attack_is_refused(tmp_path, monkeypatch, capsys, formula, backend):
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    out = "f.nc" if backend == "numpyro" else "f.json"
    rc = main(["fit", "t.csv", "--model", formula, "--backend", backend, "--out", out])
    line = _one_error_line(capsys, "fit")
    assert rc == 2
    assert "formula" in line
    assert not (tmp_path / "PWNED").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


# --------------------------------------------------------------------------- fit files

FORMULA = "correct ~ tom_order + (1 | model)"


@pytest.fixture(scope="module")
def small_fit(tmp_path_factory) -> Path:
    """The smallest real formula fit: two short chains on the table above."""
    d = tmp_path_factory.mktemp("fit")
    _table(d / "t.csv")
    rc = main(["fit", str(d / "t.csv"), "--model", FORMULA, "--chains", "2", "--draws", "30",
               "--tune", "30", "--seed", "1", "--cores", "1", "--no-progress",
               "--allow-warnings", "--out", str(d / "fit.nc")])
    assert rc == 0
    return d / "fit.nc"


def _edit_spec(src: Path, dest: Path, change) -> Path:
    """Copy a fit with its stored spec (``posterior.attrs['spec']``) changed by ``change``."""
    from tomstats.glmm import load_fit, save_fit

    idata = load_fit(src)
    spec = json.loads(idata.posterior.attrs["spec"])
    change(spec)
    idata.posterior.attrs["spec"] = json.dumps(spec, sort_keys=True)
    save_fit(idata, dest)
    return dest


STORED = f"I(pd.io.common.os.system('{SYSTEM}') * 0)"
EDITS = {
    "fixed": lambda s: s.update(fixed=f"tom_order + {STORED}"),
    "formula": lambda s: s.update(formula=f"correct ~ {STORED} + (1 | model)"),
    "random_expr": lambda s: s["random"][0].update(expr=f"1 + {STORED}"),
    "random_group": lambda s: s["random"][0].update(group="__import__('os')"),
    "response": lambda s: s.update(response="correct.__class__"),
}


def test_the_unedited_fit_opens(small_fit, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["report", str(small_fit), "--out", "r.html"])
    assert rc == 0, capsys.readouterr().err
    assert (tmp_path / "r.html").is_file()


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_fit_file_with_an_edited_formula_runs_nothing(small_fit, tmp_path, monkeypatch,
                                                        capsys, edit):
    from tomstats.glmm import fit_spec, load_fit

    monkeypatch.chdir(tmp_path)
    bad = _edit_spec(small_fit, tmp_path / "edited.nc", EDITS[edit])
    rc = main(["report", str(bad), "--out", "r.html"])
    line = _one_error_line(capsys, "report")
    assert rc == 2
    assert "stored" in line
    assert not (tmp_path / "PWNED").exists()
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(ValueError, match="stored"):
        fit_spec(load_fit(bad))
    assert not (tmp_path / "PWNED").exists()


# --------------------------------------------------------------------------- --map typos


@pytest.mark.parametrize(("command", "extra"), [
    ("summarize", []), ("anova", []), ("fit", ["--out", "f.nc"]),
    ("report", ["--out", "r.html"]),
])
def test_a_typo_in_a_map_standard_name_is_refused(tmp_path, monkeypatch, capsys, command,
                                                  extra):
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    with pytest.raises(SystemExit) as info:  # refused while the command line is parsed
        main([command, "t.csv", "--map", "model=model,tom_ordr=tom_order", *extra])
    line = _one_error_line(capsys, command)
    assert info.value.code == 2
    # the pair the right way round: --map STANDARD=COLUMN
    assert "--map tom_ordr=tom_order: 'tom_ordr' is not a standard name (did you mean " \
           "--map tom_order=tom_ordr?" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_map_of_standard_names_still_works(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    df = pd.read_csv(_table(tmp_path / "t.csv")).rename(columns={"tom_order": "order"})
    df.to_csv("t.csv", index=False)
    rc = main(["summarize", "t.csv", "--map", "tom_order=order", "--by", "none",
               "--out", "s.csv"])
    assert rc == 0, capsys.readouterr().err
    assert int(pd.read_csv("s.csv")["n"].sum()) == len(df)


def test_a_laplace_fit_with_an_edited_formula_is_refused(tmp_path, monkeypatch, capsys):
    """The maximum-likelihood fit's JSON stores its formula too: re-checked when read."""
    monkeypatch.chdir(tmp_path)
    _table(tmp_path / "t.csv")
    assert main(["fit", "t.csv", "--model", FORMULA, "--backend", "laplace",
                 "--out", "f.json"]) == 0
    assert main(["report", "f.json", "--out", "ok.html"]) == 0
    capsys.readouterr()
    d = json.loads((tmp_path / "f.json").read_text())
    d["formula"] = f"correct ~ {STORED} + (1 | model)"
    (tmp_path / "edited.json").write_text(json.dumps(d))
    rc = main(["report", "edited.json", "--out", "r.html"])
    line = _one_error_line(capsys, "report")
    assert rc == 2 and "the fit file's stored formula" in line
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "PWNED").exists()


# --------------------------------------------------------------------------- cbind()


def _binomial_table(path: Path) -> pd.DataFrame:
    """Binomial counts (1-5 trials) of 8 groups x 12 rows with a random slope of x."""
    rng = np.random.default_rng(5)
    rows = []
    for g in range(8):
        b0, b1 = rng.normal(0, 0.7), rng.normal(0, 0.4)
        for _ in range(12):
            x, n = round(float(rng.uniform(-1, 1)), 4), int(rng.integers(1, 6))
            k = int(rng.binomial(n, 1 / (1 + np.exp(-(0.2 + 0.8 * x + b0 + b1 * x)))))
            rows.append({"g": f"g{g}", "x": x, "n": n, "k": k, "f": n - k})
    df = pd.DataFrame(rows)
    df.to_csv(path, index=False)
    return df


@pytest.mark.parametrize("lhs", ["cbind(k, n - k)", "cbind(k, f)"])
def test_fit_takes_lme4s_cbind_response(tmp_path, monkeypatch, capsys, lhs):
    """``fit --backend laplace`` accepts what the API accepts: the fit equals the API's fit of
    the same counts written ``k | trials(n)``."""
    from tomstats.glmm.lme import fit_lme

    monkeypatch.chdir(tmp_path)
    df = _binomial_table(tmp_path / "b.csv")
    rc = main(["fit", "b.csv", "--backend", "laplace", "--model", f"{lhs} ~ x + (1 + x | g)",
               "--out", "f.json"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"Formula: {lhs} ~ x + (1 + x | g)" in out
    saved = json.loads((tmp_path / "f.json").read_text())
    ref = fit_lme(df, "k | trials(n) ~ x + (1 + x | g)")
    assert saved["loglik"] == pytest.approx(ref.loglik, abs=1e-6)
    np.testing.assert_allclose(saved["beta"], ref.beta, atol=1e-6)
    assert saved["family"] == "binomial"


CBIND_ATTACKS = [
    f"cbind(k, __import__('os').system('{SYSTEM}')) ~ x + (1 | g)",
    f"cbind(k, n - pd.io.common.os.system('{SYSTEM}')) ~ x + (1 | g)",
    f"cbind(k, I(__import__('os').system('{SYSTEM}'))) ~ x + (1 | g)",
    f"cbind(k, n - k) ~ x + I(__import__('os').system('{SYSTEM}') * 0) + (1 | g)",
]


@pytest.mark.parametrize("formula", CBIND_ATTACKS)
def test_fit_cbind_attack_is_refused(tmp_path, monkeypatch, capsys, formula):
    monkeypatch.chdir(tmp_path)
    _binomial_table(tmp_path / "b.csv")
    rc = main(["fit", "b.csv", "--model", formula, "--backend", "laplace", "--out", "f.json"])
    line = _one_error_line(capsys, "fit")
    assert rc == 2 and "formula" in line
    assert not (tmp_path / "PWNED").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]
