"""Shared fixtures. Tests that read the real LLM outcome data find it in ``../shared/data``
(beside the repository); a user's clone has no such folder, so those tests skip there."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOMSTATS_SHARED_DATA", REPO.parent / "shared" / "data"))

# JAX's persistent compilation cache of this test run: a fresh folder, shared by the run's own
# subprocesses (they inherit the variable) and removed at the end. The user's cache
# (~/.cache/tomstats/jax) is never read or written by the tests, so programs compiled by other
# processes, other versions or other XLA flags cannot leak into a run.
if "TOMSTATS_JAX_CACHE" not in os.environ:
    _JAX_CACHE = tempfile.mkdtemp(prefix="tomstats-test-jax-")
    os.environ["TOMSTATS_JAX_CACHE"] = _JAX_CACHE
    atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Folder of the real per-item LLM outcomes; skip when this clone has none."""
    if not (SHARED_DATA / "storysim_items.csv").is_file():
        pytest.skip(f"real outcome data not present ({SHARED_DATA} has no storysim_items.csv); "
                    "CI provides it beside the repository")
    return SHARED_DATA


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Root of the repository (models/, simulations/, data/ live here)."""
    return REPO
