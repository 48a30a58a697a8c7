"""Real (small) fits made once per test session by the ``tomstats fit`` command.

``failed_fit()`` samples too briefly (30 warm-up and 30 draws), so its R-hat and ESS checks
fail (``tomstats fit`` exits 4, the file is written); ``sound_fit()`` samples enough to pass.
Both fit the structural model to :func:`_report_data.structural_log`.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "tomstats"]


@functools.cache
def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="tomstats-fits-"))


@functools.cache
def structural_csv() -> Path:
    from _report_data import structural_log

    path = _folder() / "structural.csv"
    structural_log(0, 4).to_csv(path, index=False)
    return path


@functools.cache
def narrow_csv() -> Path:
    """The structural log with its five context lengths squeezed into 100–160 words: α and δ
    are then not identified (their terms barely vary), so their posteriors are the priors."""
    import pandas as pd

    path = _folder() / "narrow.csv"
    df = pd.read_csv(structural_csv())
    df["context_words"] = df["context_words"].map({200: 100, 500: 110, 1000: 125, 2000: 140,
                                                   5000: 160})
    df.to_csv(path, index=False)
    return path


@functools.cache
def fit_file(draws: int, tune: int, chains: int, *extra: str,
             data: str = "structural") -> tuple[Path, int, str]:
    """``tomstats fit`` of the structural log (or ``data="narrow"``: :func:`narrow_csv`):
    (path, exit code, stdout + stderr)."""
    csv = structural_csv() if data == "structural" else narrow_csv()
    out = _folder() / f"fit-{data}-{draws}-{tune}-{chains}-{abs(hash(extra))}.nc"
    proc = subprocess.run([*RUN, "fit", str(csv), "--model", "structural",
                           "--draws", str(draws), "--tune", str(tune), "--chains", str(chains),
                           "--seed", "1", "--no-progress", "--out", str(out), *extra],
                          capture_output=True, text=True, cwd=ROOT)
    return out, proc.returncode, proc.stdout + proc.stderr


def failed_fit() -> Path:
    path, code, text = fit_file(30, 30, 2)
    assert code == 4, text
    return path


def sound_fit() -> Path:
    path, code, text = fit_file(300, 300, 2)
    assert code == 0, text
    return path
