"""The lme4 references of the maximum-likelihood tests: ``tests/reference/lme4_*.json``, or a
fresh run of the R script beside it when ``Rscript`` with lme4 and jsonlite is here (set
``TOMSTATS_LME4_FROM_JSON=1`` to use the committed JSON anyway). Each script runs at most
once per test run, whichever test module asks first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA, r_available

REF_DIR = REPO / "tests" / "reference"


def lme4_available() -> bool:
    """R with lme4 and jsonlite, and no ``TOMSTATS_LME4_FROM_JSON``."""
    return not os.environ.get("TOMSTATS_LME4_FROM_JSON") and r_available("lme4", "jsonlite")


def lme4_reference(name: str, tmp: Path, timeout: int = 900) -> dict:
    """Case name -> lme4's results of ``tests/reference/<name>.R``: run now (into ``tmp``)
    when :func:`lme4_available`, over the committed ``<name>.json`` (which keeps the
    real-log cases a run without ``../shared/data`` leaves out); the committed JSON alone
    otherwise."""
    committed = {c["name"]: c for c in json.loads((REF_DIR / f"{name}.json").read_text())
                 ["cases"]}
    if not lme4_available():
        return committed
    out = tmp / f"{name}.json"
    data_arg = str(SHARED_DATA) if SHARED_DATA.is_dir() else str(tmp / "none")
    proc = subprocess.run(["Rscript", str(REF_DIR / f"{name}.R"), data_arg, str(out)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if proc.returncode != 0:
        pytest.fail(f"{name}.R failed:\n{proc.stdout}\n{proc.stderr}")
    return {**committed, **{c["name"]: c for c in json.loads(out.read_text())["cases"]}}


@pytest.fixture(scope="session")
def lme4_slopes_reference(tmp_path_factory) -> dict:
    """lme4's fits of ``tests/reference/lme4_slopes.R`` (random slopes, nested terms)."""
    return lme4_reference("lme4_slopes", tmp_path_factory.mktemp("lme4_slopes"))


@pytest.fixture(scope="session")
def lme4_laplace_reference(tmp_path_factory) -> dict:
    """lme4's fits of ``tests/reference/lme4_laplace.R`` (random intercepts)."""
    return lme4_reference("lme4_laplace", tmp_path_factory.mktemp("lme4_laplace"), 600)


@pytest.fixture(scope="session")
def lme4_ladder_reference(tmp_path_factory) -> dict:
    """lme4's fits of ``tests/reference/lme4_ladder.R`` (a length-ladder log: stories crossed
    with context length, ToM order and the LLMs)."""
    return lme4_reference("lme4_ladder", tmp_path_factory.mktemp("lme4_ladder"), 300)
