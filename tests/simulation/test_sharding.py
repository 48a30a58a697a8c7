"""Sweeps spread over several JAX devices give the same numbers as one device.

The test runs a child Python with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``
(two CPU devices) and compares its results with this process's single-device run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    from tomstats.design import paper_design
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.simulator import _compiled, _devices_mesh, simulate
    assert jax.device_count() == 2, jax.devices()
    out = {}
    for path in ("exact", "bernoulli"):
        ds = simulate(paper_design(), PAPER_PARAMS, replicates=9, seed=3, path=path,
                      grid={"gamma": [0.5, 1.5]}, progress=False)
        out[path] = ds["successes"].values.tolist()
    # the compiled sweep really places replicates on both devices
    n = np.full((5, 3), 500, dtype=np.int64)
    fn = _compiled("exact", 2, n.tobytes(), n.shape, 2)
    keys = jax.device_put(jax.random.split(jax.random.key(0), 4),
                          jax.sharding.NamedSharding(_devices_mesh(),
                                                     jax.sharding.PartitionSpec("replicate")))
    table = jax.numpy.full((1, 5, 3, 501), 1.0)
    res = fn(keys, table)
    out["devices"] = len(res["successes"].sharding.device_set)
    json.dump(out, sys.stdout)
    """
)


def test_two_device_sweep_equals_single_device():
    from tomstats.design import paper_design
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.simulator import simulate

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout)
    assert child["devices"] == 2
    for path in ("exact", "bernoulli"):
        ds = simulate(paper_design(), PAPER_PARAMS, replicates=9, seed=3, path=path,
                      grid={"gamma": [0.5, 1.5]}, progress=False)
        np.testing.assert_array_equal(np.asarray(child[path]), ds["successes"].values)


def test_more_devices_than_replicates():
    """8 devices, 3 replicates: each chunk is padded to whole device shares (by repeating a
    key whose results are dropped), as many times as needed."""
    from tomstats.design import paper_design
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.simulator import simulate

    child = textwrap.dedent(
        """
        import json, sys
        import jax
        from tomstats.design import paper_design
        from tomstats.simulation.paper import PAPER_PARAMS
        from tomstats.simulation.simulator import simulate
        assert jax.device_count() == 8, jax.devices()
        ds = simulate(paper_design(), PAPER_PARAMS, replicates=3, seed=3, path="exact",
                      progress=False)
        json.dump(ds["successes"].values.tolist(), sys.stdout)
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ds = simulate(paper_design(), PAPER_PARAMS, replicates=3, seed=3, path="exact",
                  progress=False)
    np.testing.assert_array_equal(np.asarray(json.loads(proc.stdout)), ds["successes"].values)
