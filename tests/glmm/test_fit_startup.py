"""``tomstats fit LOG --backend laplace`` in a new process: what it loads (by default the
interpreted fit: no JAX), and that with ``--option engine=jax`` a second process reuses the
fit's program for a log of similar size (shapes padded to buckets; the traced program
exported into JAX's persistent cache folder, its compiled form in the cache) with the same
numbers.

The suite runs with the persistent cache off (``tests/conftest.py``); the cache test below
gives its subprocesses a cache folder of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _crossed import crossed_frame

REPO = Path(__file__).resolve().parents[2]
FORMULA = "correct ~ x + (1 | model) + (1 | item)"
#: Never needed by a Laplace fit: the samplers' stack, netCDF, plotting, SciPy's statistics
#: and its optimiser (the separation check runs only when a fit may be separated).
UNNEEDED = ("arviz", "xarray", "matplotlib", "numpyro", "pymc", "scipy.stats",
            "scipy.optimize")


def _log(path: Path, n_llms: int, n_items: int, seed: int) -> Path:
    crossed_frame(n_llms, n_items, seed).to_csv(path, index=False)
    return path


def _fit(log: Path, out: Path, cache: str, watch: tuple[str, ...] = (),
         engine: str = "jax") -> dict:
    """Run the command with ``--option engine=ENGINE`` in a fresh interpreter; its stderr,
    its fit and the watched modules it loaded."""
    probe = ("import sys, json\nfrom tomstats.cli import main\n"
             f"rc = main(['fit', {str(log)!r}, '--model', {FORMULA!r}, '--backend', "
             f"'laplace', '--out', {str(out)!r}, '--option', 'engine={engine}'])\n"
             f"print(json.dumps([rc, sorted(m for m in {watch!r} if m in sys.modules)]))\n")
    env = dict(os.environ, TOMSTATS_JAX_CACHE=cache, JAX_LOG_COMPILES="1")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=REPO, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rc, loaded = json.loads(res.stdout.strip().splitlines()[-1])
    assert rc == 0, res.stderr[-3000:]
    return {"err": res.stderr, "loaded": loaded, "fit": json.loads(out.read_text())}


@pytest.mark.parametrize("engine, loaded", [("auto", ["formulaic"]),
                                            ("jax", ["formulaic", "jax", "jaxlib"])])
def test_a_laplace_fit_loads_no_sampler_stack(tmp_path: Path, engine: str,
                                              loaded: list[str]) -> None:
    """The default engine of a single fit (``auto``: the interpreted one) loads no JAX;
    ``engine=jax`` does (so the check can fail)."""
    got = _fit(_log(tmp_path / "log.csv", 5, 30, 1), tmp_path / "fit.json", "off",
               watch=(*UNNEEDED, "jax", "jaxlib", "formulaic"), engine=engine)
    assert got["loaded"] == loaded
    assert got["fit"]["converged"]


def test_a_second_process_reuses_the_compiled_fit_of_a_similar_log(tmp_path: Path) -> None:
    """9 × 50 and 10 × 53 LLMs × items both pad to 10 × 56: the second log's fit neither
    traces nor compiles (the exported program and its compiled form come from the cache) and
    equals its fit without the cache."""
    cache = tmp_path / "jax-cache"
    first = _fit(_log(tmp_path / "a.csv", 9, 50, 2), tmp_path / "a.json", str(cache))
    exported = list((cache / "tomstats-laplace").iterdir())
    assert len(exported) == 1 and exported[0].suffix == ".jaxexport"
    assert "Finished tracing fit_program" in first["err"]  # the fit, traced to be exported
    log_b = _log(tmp_path / "b.csv", 10, 53, 3)
    second = _fit(log_b, tmp_path / "b.json", str(cache))
    assert "Finished tracing fit_program" not in second["err"]
    hits = [ln for ln in second["err"].splitlines()
            if "Persistent compilation cache hit" in ln and "call_exported" in ln]
    assert len(hits) == 1, second["err"][-3000:]
    assert list((cache / "tomstats-laplace").iterdir()) == exported
    # a damaged program file is exported again, with the same fit
    good = exported[0].read_bytes()
    exported[0].write_bytes(good[: len(good) // 2])
    again = _fit(log_b, tmp_path / "b1.json", str(cache))
    assert "Finished tracing fit_program" in again["err"]
    import jax

    jax.export.deserialize(bytearray(exported[0].read_bytes()))  # whole again
    assert again["fit"]["beta"] == second["fit"]["beta"]
    fresh = _fit(log_b, tmp_path / "b0.json", "off")
    assert "Persistent compilation cache hit" not in fresh["err"]
    assert "Finished tracing _fit_one" in fresh["err"]  # without the cache: traced again
    for key in ("beta", "se", "theta", "b", "b_var", "loglik"):
        np.testing.assert_allclose(second["fit"][key], fresh["fit"][key], rtol=1e-12,
                                   atol=1e-14, err_msg=key)
    assert [len(t["levels"]) for t in second["fit"]["terms"]] == [10, 53]


@pytest.mark.parametrize("bad", ["", "off", "0"])
def test_the_cache_switch(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TOMSTATS_JAX_CACHE`` empty or off: no cache folder; a folder: that folder."""
    from tomstats._compile_cache import default_cache_dir

    monkeypatch.setenv("TOMSTATS_JAX_CACHE", bad)
    assert default_cache_dir() is None
    monkeypatch.setenv("TOMSTATS_JAX_CACHE", "/somewhere/else")
    assert default_cache_dir() == Path("/somewhere/else")
