"""Logs with constant outcomes (the oracle: always right; a baseline that is always wrong) and
zero error variance go through ``anova``, ``summarize`` and ``report``: a degenerate term is
NaN with a note saying why, checked against pingouin's ANOVA of the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.analysis.log_anova import log_anova
from tomstats.analysis.row_anova import anova
from tomstats.report.log import fit_command

ROOT = Path(__file__).resolve().parents[2]
RUN = [sys.executable, "-m", "tomstats"]
FACTORS = ["context_words", "tom_order"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN, *args], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Oracle and recency baselines from `tomstats evaluate`, plus an always-wrong baseline
    and a deterministic one (right at order 0, wrong above: no error variance) made from the
    oracle's records."""
    tmp = tmp_path_factory.mktemp("baselines")
    items, out = tmp / "items.jsonl", tmp / "run.jsonl"
    assert _run("stories", "--n-per-cell", "2", "--seed", "1", "--out",
                str(items)).returncode == 0
    for m in ("oracle", "recency"):
        proc = _run("evaluate", "--items", str(items), "--model", f"models/heuristic-{m}.toml",
                    "--out", str(out), "--no-cache", "--no-progress")
        assert proc.returncode == 0, proc.stderr
    records = [json.loads(ln) for ln in out.read_text().splitlines()]
    oracle = [r for r in records if r["model"] == "heuristic-oracle"]
    extra = []
    for name, rule in (("heuristic-wrong", lambda r: 0),
                       ("heuristic-order0", lambda r: int(r["tom_order"] == 0))):
        for r in oracle:
            extra.append({**r, "model": name, "correct": rule(r),
                          "error_category": "correct" if rule(r) else "other"})
    with out.open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in extra)
    return out


def _pingouin(rows: pd.DataFrame) -> pd.DataFrame:
    pg = pytest.importorskip("pingouin")
    ref = pg.anova(rows, dv="correct", between=FACTORS, detailed=True, effsize="np2")
    ref["Source"] = ref["Source"].str.replace(" * ", ":", regex=False)
    return ref.set_index("Source")


@pytest.mark.parametrize("model", ["heuristic-oracle", "heuristic-wrong", "heuristic-order0",
                                   "heuristic-recency"])
def test_against_pingouin(log: Path, model: str) -> None:
    rows = pd.read_json(log, lines=True)
    rows = rows[rows["model"] == model].reset_index(drop=True)
    got = anova(rows, "correct", FACTORS).set_index("source")
    ref = _pingouin(rows)
    for src in [*got.index[:-1], "Residual"]:
        ss_ref = float(ref.loc[src, "SS"])
        if abs(ss_ref) < 1e-9:  # pingouin prints rounding as ±1e-15: ours is exactly 0
            assert got.loc[src, "SS"] == 0.0
        else:
            assert got.loc[src, "SS"] == pytest.approx(ss_ref, rel=1e-9)
    ss_res = got.loc["Residual", "SS"]
    for src in got.index[:-1]:
        f_ref = float(ref.loc[src, "F"]) if "F" in ref.columns else np.nan
        if got.loc[src, "SS"] == 0 and ss_res == 0:
            # 0/0: NaN with a note (pingouin: NaN, or ±inf from its rounding residue)
            assert np.isnan(got.loc[src, "F"]) and np.isnan(got.loc[src, "p"])
            assert np.isnan(got.loc[src, "partial_eta2"])
            assert got.loc[src, "note"]
            assert np.isnan(f_ref) or abs(float(ref.loc[src, "SS"])) < 1e-9
        else:
            assert got.loc[src, "F"] == pytest.approx(f_ref, rel=1e-9)
            assert got.loc[src, "p"] == pytest.approx(float(ref.loc[src, "p_unc"]), rel=1e-9)
            assert got.loc[src, "partial_eta2"] == pytest.approx(float(ref.loc[src, "np2"]),
                                                                 rel=1e-9)
    if model in ("heuristic-oracle", "heuristic-wrong"):
        assert all("no variation: the outcome is" in n for n in got["note"])
    elif model == "heuristic-order0":
        assert got.loc["tom_order", "F"] == np.inf  # as pingouin: a perfect fit, noted
        assert "F is infinite" in got.loc["tom_order", "note"]
    else:
        assert (got["note"] == "").all()


def test_bootstrap_intervals_of_degenerate_terms(log: Path) -> None:
    rows = pd.read_json(log, lines=True)
    rows = rows[rows["model"] == "heuristic-order0"].reset_index(drop=True)
    got = anova(rows, "correct", FACTORS, ci=0.95, n_boot=100, cluster="story_id")
    ctx = got.set_index("source").loc["context_words"]
    assert np.isnan(ctx["partial_eta2_low"]) and np.isnan(ctx["partial_eta2_high"])


def test_anova_summarize_report_commands(log: Path, tmp_path: Path) -> None:
    csv = tmp_path / "anova.csv"
    proc = _run("anova", str(log), "--by", "model", "--out", str(csv))
    assert proc.returncode == 0, proc.stderr
    assert "note (every row): no variation: the outcome is 1 in every row" in proc.stdout
    tab = pd.read_csv(csv, keep_default_na=True)
    oracle = tab[tab["model"] == "heuristic-oracle"]
    assert oracle["F"].isna().all() and oracle["note"].str.startswith("no variation").all()
    assert tab[tab["model"] == "(pooled)"]["F"].notna().sum() == 3
    proc = _run("anova", str(log), "--query", "model == 'heuristic-oracle'")
    assert proc.returncode == 0, proc.stderr
    proc = _run("summarize", str(log), "--by", "model")
    assert proc.returncode == 0, proc.stderr
    assert "heuristic-oracle" in proc.stdout and "1.000" in proc.stdout
    html = tmp_path / "r.html"
    proc = _run("report", str(log), "--out", str(html), "--n-boot", "50")
    assert proc.returncode == 0, proc.stderr
    page = html.read_text()
    assert "no variation: the outcome is 1 in every row" in page
    assert "F is infinite and the F test does not apply" in page


def test_log_anova_pooled_with_constant_groups(log: Path) -> None:
    tab = log_anova(log, by="model")
    assert set(tab["model"]) == {"heuristic-oracle", "heuristic-wrong", "heuristic-order0",
                                 "heuristic-recency", "(pooled)"}


def test_structural_suggested_only_where_identified() -> None:
    def frame(contexts: list[int], orders: list[int]) -> pd.DataFrame:
        rows = [{"context_words": c, "tom_order": t, "correct": 1, "model": "m",
                 "story_id": f"s{c}-{t}"} for c in contexts for t in orders]
        return pd.DataFrame(rows)

    words = frame([200, 1000, 5000], [0, 1, 2])
    assert "structural" in fit_command("a.csv", words)
    assert "structural" not in fit_command("a.csv", frame([200, 5000], [0, 1, 2]))
    assert "structural" not in fit_command("a.csv", frame([200, 1000, 5000], [1]))
    # a context that is a count of characters is not the model's words
    chars = fit_command("a.csv", words, {"context_words": "n_chars"})
    assert "structural" not in chars
    assert any("log_context" in a for a in chars)
