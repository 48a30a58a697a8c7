"""R-hat and bulk/tail ESS for many scalars: tomstats.glmm.rhat_ess against ArviZ.

Both compute the rank-normalised split R-hat and the bulk and tail effective sample sizes
(Vehtari et al.) of every scalar of a posterior; ArviZ loops over the scalars in Python,
tomstats processes them as arrays. The draws are AR(1) chains (autocorrelation 0.5), as
from a sampler. Reported: seconds for all three statistics, the ratio, and the largest
relative difference between the two (they must agree)::

    python benchmarks/bench_convergence.py --chains 2 --draws 300 --scalars 6000
    python benchmarks/bench_convergence.py --chains 4 --draws 1000 --scalars 300
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np


def draws(chains: int, n: int, scalars: int, seed: int) -> np.ndarray:
    """AR(1) draws with coefficient 0.5, shape (chains, n, scalars)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(chains, n, scalars))
    for t in range(1, n):
        x[:, t] += 0.5 * x[:, t - 1]
    return x


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: time both and print the comparison."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--draws", type=int, default=300)
    p.add_argument("--scalars", type=int, default=6000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    import arviz as az

    from tomstats.glmm.rhat_ess import convergence

    logging.getLogger("arviz").setLevel(logging.ERROR)
    x = draws(a.chains, a.draws, a.scalars, a.seed)
    ds = az.convert_to_dataset({"theta": x})

    def arviz_all() -> tuple[np.ndarray, ...]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (az.rhat(ds, method="rank")["theta"].to_numpy(),
                    az.ess(ds, method="bulk")["theta"].to_numpy(),
                    az.ess(ds, method="tail")["theta"].to_numpy())

    times: dict[str, list[float]] = {"arviz": [], "tomstats": []}
    out = {}
    for _ in range(a.repeats):
        for name, fn in (("arviz", arviz_all), ("tomstats", lambda: convergence(x))):
            t0 = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - t0)
    diff = max(float(np.nanmax(np.abs(m - r) / np.abs(r)))
               for m, r in zip(out["tomstats"], out["arviz"], strict=True))
    best = {k: min(v) for k, v in times.items()}
    print(f"{a.chains} chains x {a.draws} draws x {a.scalars} scalars, best of {a.repeats}")
    print(f"  ArviZ    rhat + ess bulk + ess tail: {best['arviz']:8.3f} s")
    print(f"  tomstats convergence():              {best['tomstats']:8.3f} s")
    print(f"  ratio {best['arviz'] / best['tomstats']:.1f}x; largest relative difference "
          f"{diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
