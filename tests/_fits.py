"""Real (small) fits made once per test run by the ``tomstats fit`` command.

The fits are shared by the run's worker processes (``pytest -n``): they are written into one
folder per run (named after xdist's run id), each made by the first worker that asks for it
while the others wait on a lock, so that no fit is compiled and sampled twice.

``failed_fit()`` samples too briefly (30 warm-up and 30 draws), so its R-hat and ESS checks
fail (``tomstats fit`` exits 4, the file is written); ``sound_fit()`` samples enough to pass.
Both fit the structural model to :func:`_report_data.structural_log`.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "tomstats"]


@functools.cache
def _folder() -> Path:
    """One folder per test run, shared by its workers (a fresh one outside xdist)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not run.isalnum():
        return Path(tempfile.mkdtemp(prefix="tomstats-fits-"))
    path = Path(tempfile.gettempdir()) / f"tomstats-fits-{run}"
    path.mkdir(exist_ok=True)
    return path


def _once(name: str, make) -> dict:
    """The record ``make()`` returns (a JSON-able dict), made once per run under a lock on
    ``name`` in :func:`_folder` and read back by every later caller."""
    record = _folder() / f"{name}.json"
    with open(_folder() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not record.is_file():
                tmp = record.with_suffix(".tmp")
                tmp.write_text(json.dumps(make()))
                tmp.replace(record)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return json.loads(record.read_text())


@functools.cache
def structural_csv() -> Path:
    from _report_data import structural_log

    path = _folder() / "structural.csv"

    def make() -> dict:
        structural_log(0, 4).to_csv(path, index=False)
        return {}

    _once("structural-csv", make)
    return path


@functools.cache
def narrow_csv() -> Path:
    """The structural log with its five context lengths squeezed into 100–160 words: α and δ
    are then not identified (their terms barely vary), so their posteriors are the priors."""
    import pandas as pd

    path = _folder() / "narrow.csv"

    def make() -> dict:
        df = pd.read_csv(structural_csv())
        df["context_words"] = df["context_words"].map({200: 100, 500: 110, 1000: 125,
                                                       2000: 140, 5000: 160})
        df.to_csv(path, index=False)
        return {}

    _once("narrow-csv", make)
    return path


@functools.cache
def fit_file(draws: int, tune: int, chains: int, *extra: str,
             data: str = "structural") -> tuple[Path, int, str]:
    """``tomstats fit`` of the structural log (or ``data="narrow"``: :func:`narrow_csv`):
    (path, exit code, stdout + stderr)."""
    csv = structural_csv() if data == "structural" else narrow_csv()
    name = "-".join(["fit", data, str(draws), str(tune), str(chains),
                     *(a.lstrip("-").replace("/", "_") for a in extra)])
    out = _folder() / f"{name}.nc"

    def make() -> dict:
        proc = subprocess.run([*RUN, "fit", str(csv), "--model", "structural",
                               "--draws", str(draws), "--tune", str(tune),
                               "--chains", str(chains), "--seed", "1", "--no-progress",
                               "--out", str(out), *extra],
                              capture_output=True, text=True, cwd=ROOT)
        return {"code": proc.returncode, "text": proc.stdout + proc.stderr}

    done = _once(name, make)
    return out, done["code"], done["text"]


def failed_fit() -> Path:
    path, code, text = fit_file(30, 30, 2)
    assert code == 4, text
    return path


def sound_fit() -> Path:
    path, code, text = fit_file(300, 300, 2)
    assert code == 0, text
    return path
