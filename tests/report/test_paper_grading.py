"""Only the paper's own study is graded against the paper; a study of your own is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _report_data import write_simulation_dir

from tomstats.report._document import Text, Verdict
from tomstats.report.simulation import OWN_STUDY, simulation_document
from tomstats.simulation.reproduce import format_table1, is_paper_study
from tomstats.simulation.study import StudyConfig, load_study

ROOT = Path(__file__).resolve().parents[2]


def test_is_paper_study() -> None:
    assert is_paper_study(StudyConfig().to_dict())
    paper = load_study(ROOT / "simulations" / "paper.toml", replicates=7, seed=3)
    assert is_paper_study(paper.to_dict())  # replicates and seed do not change the study
    for name in ("unbalanced.toml", "sensitivity.toml"):
        assert not is_paper_study(load_study(ROOT / "simulations" / name).to_dict())
    assert not is_paper_study(None)


def test_own_study_is_not_graded(tmp_path: Path) -> None:
    d = write_simulation_dir(tmp_path / "own")
    summary = json.loads((d / "summary.json").read_text())
    summary["config"] = load_study(ROOT / "simulations" / "unbalanced.toml").to_dict()
    (d / "summary.json").write_text(json.dumps(summary))
    doc = simulation_document(d)
    blocks = [b for s in doc.sections for b in s.blocks]
    assert not any(isinstance(b, Verdict) for b in blocks)
    assert isinstance(doc.sections[0].blocks[0], Text)
    assert doc.sections[0].blocks[0].text == OWN_STUDY
    t1 = doc.sections[1].blocks[0].frame
    assert not any("paper" in c for c in t1.columns)


def test_simulate_prints_no_paper_count_for_own_study(tmp_path: Path) -> None:
    import pandas as pd

    t1 = pd.DataFrame({"factor": ["tom_order"], "pct_total": [20.0], "sd_pct": [1.0],
                       "eta2": [0.2], "partial_eta2": [0.25], "F": [100.0]})
    assert "paper" in format_table1(t1) and "paper" not in format_table1(t1, False)
    cfg = tmp_path / "own.toml"
    cfg.write_text((ROOT / "simulations" / "unbalanced.toml").read_text())
    proc = subprocess.run([sys.executable, "-m", "tomstats", "simulate", str(cfg),
                           "--replicates", "2", "--out", str(tmp_path / "o"), "--no-figures"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "ToM-dominant grid cells" in proc.stdout
    assert "paper:" not in proc.stdout and "paper %" not in proc.stdout
