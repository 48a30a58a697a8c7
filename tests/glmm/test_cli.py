"""``tomstats fit`` / ``calibrate`` as a user meets them: summary digits, the shared interval,
exit codes on failed diagnostics, ``--errors``, ``--force``, hints in command-line syntax,
messages that list the user's own columns, and the refusals of issue 13 (constant outcome,
one-level factor, calibrate's formats, wrong types in the Python API).

The command line runs in process (``tomstats.cli.main``). The SmolLM2 fit uses 2 short
chains: its diagnostics fail on purpose (exit 1), which the exit-code tests need.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shipped import log_with_overflow_errors

import tomstats.glmm as glmm
from tomstats.cli import main

REPO = Path(__file__).resolve().parents[2]
SHORT = ["--chains", "2", "--draws", "100", "--tune", "100", "--seed", "1", "--cores", "1",
         "--no-progress"]


def _stderr_lines(capsys) -> tuple[str, list[str]]:
    cap = capsys.readouterr()
    return cap.out, [ln for ln in cap.err.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def smollm2_log(tmp_path_factory) -> Path:
    """The shipped SmolLM2 log with its 60 5,000-word records as context-overflow errors
    (as the runner writes them), for the tests of ``--errors``."""
    return log_with_overflow_errors(tmp_path_factory.mktemp("log") / "smollm2.jsonl")


@pytest.fixture(scope="module")
def smollm2_run(tmp_path_factory, smollm2_log):
    """``tomstats fit`` on the SmolLM2 log with errors (short chains: diagnostics fail)."""
    import contextlib
    import io

    SMOLLM2 = smollm2_log
    out = tmp_path_factory.mktemp("smollm2") / "fit.nc"
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(["fit", str(SMOLLM2), "--map", "item=story_id", "--model", "structural",
                   *SHORT, "--out", str(out)])
    return rc, so.getvalue(), se.getvalue(), out


# --------------------------------------------------------------------------- fit: summary


def test_smollm2_summary_significant_digits_and_interval(smollm2_run):
    rc, out, err, path = smollm2_run
    idata = glmm.load_fit(path)
    lines = out.splitlines()
    assert lines[0].startswith("Bayesian GLMM fit by NUTS")  # the header comes first
    top = next(i for i, ln in enumerate(lines) if ln.startswith("posterior mean"))
    assert lines[top].startswith("posterior mean, sd and 94% HDI")
    assert glmm.diagnostics.INTERVAL_PROB == 0.94
    assert "hdi_3%" in lines[top + 1] and "hdi_97%" in lines[top + 1]
    row = next(ln for ln in lines if ln.startswith("alpha "))
    mean = float(idata.posterior["alpha"].mean())
    assert abs(mean) > 1e-6  # a real (small) estimate
    shown = row.split()[1]
    assert shown != "0.000" and float(shown) != 0.0
    assert shown == format(mean, ".3g")  # three significant digits
    # the interval printed is the 94 % HDI
    import arviz as az

    lo, hi = az.hdi(idata.posterior["alpha"].to_numpy().ravel(), hdi_prob=0.94)
    assert row.split()[3] == format(lo, ".3g") and row.split()[4] == format(hi, ".3g")


def test_summary_shows_each_correlation_once_and_quietly():
    """A random-slope fit's LKJ correlation matrix: only the upper triangle is printed (the
    diagonal is 1 by construction) and its constant draws raise no NumPy warning."""
    import warnings

    import arviz as az

    from tomstats.glmm.cli import summary_text

    rng = np.random.default_rng(0)
    r = np.tanh(rng.normal(-0.4, 0.2, (2, 100)))
    corr = np.ones((2, 100, 2, 2))
    corr[..., 0, 1] = corr[..., 1, 0] = r
    eff = ["Intercept", "tom_order"]
    idata = az.from_dict(posterior={"corr_model": corr, "beta": rng.normal(size=(2, 100, 1))},
                         dims={"corr_model": ["model_effect", "model_effect_bis"],
                               "beta": ["coef"]},
                         coords={"model_effect": eff, "model_effect_bis": eff,
                                 "coef": ["Intercept"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = summary_text(idata)
    rows = [ln.split()[0] for ln in text.splitlines()[2:]]
    assert sorted(rows) == ["beta[Intercept]", "corr_model[Intercept,"]
    assert format(r.mean(), ".3g") in text


def test_failed_diagnostics_exit_1_unless_allowed(smollm2_run, smollm2_log, tmp_path, capsys):
    SMOLLM2 = smollm2_log
    rc, out, err, path = smollm2_run
    assert rc == 4 and path.is_file()  # the fit is written all the same
    last = err.strip().splitlines()[-1]
    # the fit is written: a warning, not an error
    assert last.startswith("tomstats fit: warning: ") and "sampler diagnostics failed" in last
    assert "exit 4" in last
    assert "--allow-warnings" in last
    assert "Traceback" not in err
    # advice in CLI syntax: flags, not keywords
    assert "--draws 2000" in err and "draws=2000" not in err
    # errored questions: a note in CLI syntax, recorded in the provenance
    assert "60 question(s)" in err and "--errors keep" in err and "errors='keep'" not in err
    idata = glmm.load_fit(path)
    assert json.loads(idata.attrs["errored_questions"]) == {"n": 60, "policy": "drop"}
    assert idata.attrs["n_rows"] == 240
    assert json.loads(idata.attrs["sampler"])["chain_method"] == "vectorized"  # numpyro
    # --allow-warnings: exit 0, the warning still printed last; --force replaces the file
    before = path.stat().st_mtime_ns
    rc = main(["fit", str(SMOLLM2), "--map", "item=story_id", "--model", "structural",
               *SHORT, "--out", str(path), "--force", "--allow-warnings"])
    _, err2 = _stderr_lines(capsys)
    assert rc == 0
    assert err2[-1].startswith("tomstats fit: warning: ") and "diagnostics failed" in err2[-1]
    assert path.stat().st_mtime_ns != before


def test_errors_keep_and_drop(smollm2_log):
    from tomstats.glmm.data import _read_table

    SMOLLM2 = smollm2_log
    drop = _read_table(SMOLLM2, "drop")
    keep = _read_table(SMOLLM2, "keep")
    assert len(drop) == 240 and len(keep) == 300
    assert keep["correct"].dtype == np.int64 and drop["correct"].dtype == np.int64
    errored = keep["status"] == "error"
    assert int(errored.sum()) == 60 and (keep.loc[errored, "correct"] == 0).all()
    assert keep.attrs["errored_questions"] == {"n": 60, "policy": "keep"}
    # the Python API warns in Python syntax
    with pytest.warns(UserWarning, match=r"dropped 60 .*errors='keep'"):
        glmm.read_table(SMOLLM2)
    with pytest.raises(ValueError, match="errors must be"):
        glmm.read_table(SMOLLM2, errors="ignore")


# --------------------------------------------------------------------------- fit: bad input


def _log(tmp_path: Path, **change) -> Path:
    """A small CSV log: 2 LLMs × 3 contexts × 3 orders × 4 items (an item_id column)."""
    rng = np.random.default_rng(0)
    rows = [{"model": m, "item_id": f"s{i}", "context_words": c, "tom_order": t,
             "correct": int(rng.random() < 0.6)}
            for m in ("a", "b") for c in (200, 1000, 5000) for t in (0, 1, 2) for i in range(4)]
    df = pd.DataFrame(rows).assign(**change)
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    return path


BAD = [
    # (log change, extra arguments, expected in the message, not expected in the message)
    ({"context_words": 300}, [],
     """--option 'fixed={"alpha": 0, "delta": 0}'""", "fixed={'alpha'"),
    ({"tom_order": 1}, [], """--option 'fixed={"gamma": G, "delta": D}'""", "fixed={'gamma'"),
    ({}, ["--model", "correct ~ tom_order + (1 | itme)"],
     "'itme' (did you mean 'item'?)", "columns={"),
    ({"correct": 2}, [], "--successes COLUMN --trials COLUMN", "family='binomial'"),
    ({}, ["--map", "model=modle"], "--map model=modle", "columns={"),
    ({}, ["--option", "item_efects=false"], "unknown key 'item_efects' (did you mean "
     "'item_effects'?)", None),
    ({}, ["--option", "item_effects=true", "--map", "item=model", "--query",
          "model == 'a'"], "single level 'a'", "item_effects=False"),
    ({"correct": 1}, [], "no variance: column 'correct' is 1 in all 72 rows", None),
    ({"correct": 0}, ["--model", "correct ~ tom_order + (1 | model)"],
     "no variance: column 'correct' is 0 in all 72 rows", None),
    ({}, ["--model", "correct ~ tom_order + (1 | model)", "--family", "binomial"],
     "--family binomial needs a trials column", "family='binomial'"),
    ({}, ["--option", "aggregate=maybe"], '--option aggregate must be true, false or "auto"',
     "True"),
    ({"tom_order": 2}, ["--model", "correct ~ C(tom_order) + (1 | model)"],
     "the categorical term C(tom_order) has a single level in the data (column 'tom_order' "
     "is 2 in all 72 rows)", None),
    ({}, ["--query", "tom_ordr == 0"], "name 'tom_ordr' is not defined (did you mean "
     "'tom_order'?)", None),
    ({}, ["--query", "tom_order == 7"], "--query 'tom_order == 7' keeps no rows", None),
]


@pytest.mark.parametrize(("change", "extra", "expected", "unexpected"), BAD,
                         ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_in_cli_syntax(tmp_path, capsys, change, extra, expected, unexpected):
    log = _log(tmp_path, **change)
    out = tmp_path / "fit.nc"
    rc = main(["fit", str(log), *SHORT, "--out", str(out), *extra])
    _, err = _stderr_lines(capsys)
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("tomstats fit: error: "), err
    assert expected in err[0]
    if unexpected:
        assert unexpected not in err[0]
    assert not out.exists() and not any(tmp_path.glob(".fit.nc*"))


def test_messages_list_only_the_users_columns(tmp_path, capsys):
    log = _log(tmp_path)
    rc = main(["fit", str(log), "--model", "correct ~ x + (1 | model)", "--out",
               str(tmp_path / "f.nc")])
    _, err = _stderr_lines(capsys)
    assert rc == 2
    own = re.search(r"your columns: ([^;)]*)", err[0]).group(1)
    assert own.split(", ") == ["model", "item_id", "context_words", "tom_order", "correct"]
    # columns tomstats adds are named as such, never as the user's
    assert "also available: item (copied from 'item_id'), log_context" in err[0]


def test_missing_standard_column_hint_names_it(tmp_path, capsys):
    log = _log(tmp_path)
    pd.read_csv(log).rename(columns={"context_words": "n_words"}).to_csv(log, index=False)
    rc = main(["fit", str(log), "--model", "structural", "--out", str(tmp_path / "f.nc")])
    _, err = _stderr_lines(capsys)
    assert rc == 2 and len(err) == 1
    assert "'context_words' (did you mean 'n_words'?)" in err[0]
    assert err[0].endswith("rename yours with --map context_words=n_words")
    assert "columns={" not in err[0]


def test_out_refused_before_fitting_unless_force(tmp_path, capsys):
    log = _log(tmp_path)
    out = tmp_path / "fit.nc"
    out.write_text("precious")
    rc = main(["fit", str(log), "--model", "correct ~ nope", "--out", str(out)])
    _, err = _stderr_lines(capsys)
    # refused before the data are even read (the formula is bad too)
    assert rc == 2 and "already exists; pass --force" in err[0] and len(err) == 1
    assert out.read_text() == "precious"
    rc = main(["fit", str(log), "--model", "correct ~ nope", "--out", str(out), "--force"])
    _, err = _stderr_lines(capsys)
    assert rc == 2 and "'nope'" in err[0] and out.read_text() == "precious"


def test_python_api_keeps_keyword_syntax(tmp_path):
    df = pd.read_csv(_log(tmp_path, context_words=300))
    with pytest.raises(ValueError, match=re.escape("fixed={'alpha': 0, 'delta': 0}")):
        glmm.fit(df, "structural")
    with pytest.raises(ValueError, match=re.escape("columns={...}")):
        glmm.fit(df, "correct ~ x + (1 | model)")


# --------------------------------------------------------------------------- Python API types


def test_wrong_types_name_the_argument(tmp_path):
    df = pd.read_csv(_log(tmp_path))
    with pytest.raises(TypeError, match=r"^data must be a pandas DataFrame.*got str"):
        glmm.fit("x.csv")
    with pytest.raises(TypeError, match=r"^model must be"):
        glmm.fit(df, model=3)
    with pytest.raises(TypeError, match=r"^columns must be a mapping"):
        glmm.fit(df, columns=["correct"])
    with pytest.raises(TypeError, match=r"^idata must be an arviz.InferenceData"):
        glmm.predict("fit.nc")
    with pytest.raises(TypeError, match=r"^idata must be an arviz.InferenceData"):
        glmm.posterior_summary("fit.nc")
    with pytest.raises(TypeError, match=r"^path must be"):
        glmm.load_fit(3)
    with pytest.raises(TypeError, match=r"^path must be"):
        glmm.read_table(df)
    with pytest.raises(TypeError, match=r"^fixed must be a mapping"):
        glmm.fit(df, fixed=0)


# --------------------------------------------------------------------------- calibrate


def test_calibrate_json_toml_and_suffixes(smollm2_run, tmp_path, capsys):
    from tomstats.simulation.study import load_study

    fit = smollm2_run[3]
    capsys.readouterr()
    js = tmp_path / "p.json"
    # the short test fit fails its R-hat/ESS checks: refused unless --allow-warnings
    assert main(["calibrate", str(fit), "--out", str(js)]) == 2 and not js.exists()
    assert "failed its own checks" in capsys.readouterr().err
    assert main(["calibrate", str(fit), "--allow-warnings", "--out", str(js)]) == 0
    doc = json.loads(js.read_text())  # valid JSON (int64 attributes no longer crash it)
    assert doc["source"]["n_rows"] == 240 and doc["interval"] == 0.95
    summary = glmm.posterior_summary(glmm.load_fit(fit))
    assert doc["params"]["gamma"]["mean"] == pytest.approx(summary.loc["gamma", "mean"])
    # TOML: a simulation file the study loader reads back, at the posterior means
    tm = tmp_path / "p.toml"
    assert main(["calibrate", str(fit), "--allow-warnings", "--out", str(tm)]) == 0
    study = load_study(tm)
    for k in ("alpha", "gamma", "delta", "sigma"):
        assert getattr(study.params, k) == pytest.approx(summary.loc[k, "mean"])
    assert tomllib.loads(tm.read_text())["meta"]["calibration"]["source"]["n_rows"] == 240
    capsys.readouterr()
    # unknown suffix: refused before work, naming --out and the suffix; nothing written
    for name in ("p.csv", "p"):
        rc = main(["calibrate", str(fit), "--allow-warnings", "--out", str(tmp_path / name)])
        _, err = _stderr_lines(capsys)
        assert rc == 2 and len(err) == 1 and "--out" in err[0]
        assert ("'.csv'" if name == "p.csv" else "'(none)'") in err[0]
        assert not (tmp_path / name).exists()
    # an existing file needs --force
    before = js.read_text()
    assert main(["calibrate", str(fit), "--allow-warnings", "--out", str(js), "--prob",
                 "0.5"]) == 2
    assert "pass --force" in _stderr_lines(capsys)[1][0] and js.read_text() == before
    assert main(["calibrate", str(fit), "--allow-warnings", "--out", str(js), "--prob", "0.5",
                 "--force"]) == 0
    assert json.loads(js.read_text())["interval"] == 0.5
    # the Python API refuses an unknown suffix too (it was silently JSON)
    with pytest.raises(ValueError, match="unknown suffix '.csv'"):
        glmm.calibrate.write_params(glmm.load_fit(fit), tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists()


def test_not_utf8_log_names_file_and_line(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_bytes(b"correct,model,tom_order,context_words\n1,a,0,200\n0,b\xff,1,500\n")
    rc = main(["fit", str(log), "--out", str(tmp_path / "f.nc")])
    _, err = _stderr_lines(capsys)
    assert rc == 2 and len(err) == 1
    assert f"{log}: line 3, column 4: not valid UTF-8 (byte 0xff)" in err[0]


def test_cbind_with_a_sampler_is_refused_before_the_data_are_read(tmp_path, capsys):
    """cbind() is lme4's spelling, read by the Laplace backend; a sampler run is refused at
    once (the log is not even opened), with the spelling the samplers read."""
    out = tmp_path / "f.nc"
    rc = main(["fit", str(tmp_path / "not-read.csv"), "--model",
               "cbind(k, n - k) ~ x + (1 | g)", "--out", str(out)])
    _, err = _stderr_lines(capsys)
    assert rc == 2 and len(err) == 1
    assert "cbind() is read by --backend laplace" in err[0] and "trials(n)" in err[0]
    assert list(tmp_path.iterdir()) == []
