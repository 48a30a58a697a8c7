"""Shared fixtures. Tests that read the real LLM outcome data find it in ``../shared/data``
(beside the repository); a user's clone has no such folder, so those tests skip there."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOMSTATS_SHARED_DATA", REPO.parent / "shared" / "data"))

# JAX's persistent compilation cache is off in the test process and its subprocesses: two
# full runs of the suite with the cache on died with a segfault inside XLA's CPU compile/load of
# a cached program (jax/_src/compilation_cache.py) after the GLMM tests had filled it. The tests
# of the cache itself (tests/glmm/test_sampler.py) switch it on in a folder of their own.
os.environ.setdefault("TOMSTATS_JAX_CACHE", "off")


#: Most worker processes ``-n auto`` starts: each imports JAX and compiles its own programs
#: (1–3 GB), and the suite gains little past four.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers of ``-n auto`` (the README's test command): one per core, at most
    :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    The suite compiles thousands of XLA programs in one process; each keeps memory maps of its
    machine code, and a whole run kept them all until a compile near the end crashed (a
    segfault in XLA's CPU backend once the process neared Linux's ``vm.max_map_count``).
    Programs still referenced (module-level caches) are compiled again when next called.
    """
    yield
    jax = sys.modules.get("jax")  # never import JAX here: some tests check it stays unloaded
    if jax is not None:
        jax.clear_caches()


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


@functools.cache
def r_available(*packages: str) -> bool:
    """Whether ``Rscript`` is on the PATH with every R package of ``packages`` installed (one
    probe per set of packages and test run). Tests that compare with an R reference run its
    script when this is true and read the committed JSON otherwise."""
    if not shutil.which("Rscript"):
        return False
    names = ", ".join(f'"{p}"' for p in packages)
    try:
        probe = subprocess.run(
            ["Rscript", "-e", f"quit(status = !all(sapply(c({names}), requireNamespace, "
                              f"quietly = TRUE)))"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def r_reference(script: Path, committed: Path, packages: tuple[str, ...], folder: Path,
                timeout: int = 300) -> tuple[dict, str]:
    """An R reference: the JSON that ``script`` writes (run now, into ``folder``) when
    ``Rscript`` and ``packages`` are present, else the ``committed`` JSON; with the source
    named for the test's printout."""
    import json

    if r_available(*packages):
        out = Path(folder) / committed.name
        subprocess.run(["Rscript", str(script), str(out)], check=True, capture_output=True,
                       timeout=timeout)
        return json.loads(out.read_text()), f"Rscript + {packages[0]} (run now)"
    return (json.loads(committed.read_text()),
            f"committed {committed.name} (no Rscript/{packages[0]})")
