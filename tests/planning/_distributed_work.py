"""The work of tests/planning/test_distributed.py: small runs of the API functions that split
over processes, done alike by the test (one process) and by each of two processes joined with
``tomstats.distributed.session`` (``python _distributed_work.py PORT ID WORK``, process 0
pickling the results into ``WORK/two.pkl``; with a fourth argument ``raise``, process 1 raises
inside the session instead of working)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

#: The small study of every run: 3 × 3 cells, 2 capability levels, 2 × 2 sensitivity grid.
SMALL_TOML = """
[design]
questions_per_cell = 40
capability = [0.8, 1.2]

[[design.factors]]
name = "context_length"
levels = [200, 1000, 5000]

[[design.factors]]
name = "tom_order"
levels = [0, 1, 2]

[parameters]
alpha = 7.021e-05
gamma = 1.175
delta = 2.324e-04
sigma = 0.6107

[simulation]
replicates = 13
seed = 5
path = "exact"

[sensitivity]
gamma = [0.3, 1.2]
alpha = [2e-05, 2e-04]
capability = 1.0
replicates = 7
"""


def run_all(work: Path) -> dict[str, Any]:
    """Each splitting function once, on files in ``work`` (``small.toml``, ``fit.nc`` a
    structural posterior, ``fit.json`` + ``log.csv`` a Laplace fit and its log)."""
    from tomstats.glmm import load_fit
    from tomstats.planning.from_fit import load_power_fit, power_from_fit
    from tomstats.planning.run import power
    from tomstats.simulation.posterior_sweep import posterior_draws, posterior_study
    from tomstats.simulation.simulator import simulate
    from tomstats.simulation.study import load_study

    cfg = load_study(work / "small.toml")
    out: dict[str, Any] = {}
    for path in ("exact", "bernoulli"):
        ds = simulate(cfg.design, cfg.params, replicates=13, seed=5, path=path,
                      grid={"gamma": [0.5, 1.5]}, progress=False)
        out[f"simulate_{path}"] = {v: ds[v].values for v in ("successes", "F", "eta2")}
    along = {"questions_per_cell": [10, 30]}
    res = power(cfg, along=along, tests=["anova:tom_order"], replicates=11, seed=2,
                progress=False)
    out["power"] = res.frame()
    res = power(cfg, along=along, tests=["anova:tom_order"], replicates=9, seed=2,
                posterior=work / "fit.nc", draws=20, progress=False)
    out["assurance"] = res.frame()
    draws = posterior_draws(load_fit(work / "fit.nc"), 30)  # two chunks of the map
    dec, dom, summary = posterior_study(cfg, draws, replicates=3, sensitivity_replicates=2,
                                        progress=False)
    out["posterior"] = (dec, dom, summary["per_llm"], summary["dominance"])
    fit, df = load_power_fit(work / "fit.json", work / "log.csv")
    table = power_from_fit(fit, "x", data=df, n_sims=6, chunk=2, seed=1, progress=False).table
    out["from_fit"] = table
    return out


if __name__ == "__main__":
    port, pid, work = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    from tomstats import distributed

    with distributed.session(f"127.0.0.1:{port}", 2, pid, timeout=60):
        if sys.argv[4:] == ["raise"] and pid == 1:
            raise ValueError("a planted error in process 1")
        result = run_all(work)
        if distributed.is_writer():
            (work / "two.pkl").write_bytes(pickle.dumps(result))
