"""R-hat and bulk/tail ESS for many scalars: tomstats.glmm.rhat_ess against ArviZ.

Both compute the rank-normalised split R-hat and the bulk and tail effective sample sizes
(Vehtari et al.) of every scalar of a posterior; ArviZ loops over the scalars in Python,
tomstats processes them as arrays. The draws are AR(1) chains (autocorrelation 0.5), as
from a sampler. Reported: seconds for all three statistics, the ratio, and the largest
relative difference between the two (they must agree), one row per configuration
(chains × draws × scalars)::

    python benchmarks/bench_convergence.py [--configs 2x300x6000 4x1000x300] [--write-docs]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("chains × draws × scalars", "ArviZ (s)", "tomstats (s)", "ratio",
           "largest relative difference")


def draws(chains: int, n: int, scalars: int, seed: int) -> np.ndarray:
    """AR(1) draws with coefficient 0.5, shape (chains, n, scalars)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(chains, n, scalars))
    for t in range(1, n):
        x[:, t] += 0.5 * x[:, t - 1]
    return x


def _config(text: str) -> tuple[int, int, int]:
    try:
        chains, n, scalars = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CHAINSxDRAWSxSCALARS, got {text!r}") from None
    return chains, n, scalars


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", type=_config, nargs="+",
                   default=[(2, 300, 6000), (4, 1000, 300)], metavar="CxDxS",
                   help="chains x draws x scalars, one row each (default: 2x300x6000 "
                        "4x1000x300)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each (best reported)")
    p.add_argument("--seed", type=int, default=0, help="seed of the AR(1) draws")
    add_write_docs_argument(p)
    return p


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return [f"{c} × {n:,} × {s:,}" for c, n, s in args.configs]


def compare(chains: int, n: int, scalars: int, repeats: int, seed: int,
            ) -> tuple[float, float, float]:
    """Best seconds of ArviZ and of tomstats, and their largest relative difference."""
    import arviz as az

    from tomstats.glmm.rhat_ess import convergence

    x = draws(chains, n, scalars, seed)
    ds = az.convert_to_dataset({"theta": x})

    def arviz_all() -> tuple[np.ndarray, ...]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (az.rhat(ds, method="rank")["theta"].to_numpy(),
                    az.ess(ds, method="bulk")["theta"].to_numpy(),
                    az.ess(ds, method="tail")["theta"].to_numpy())

    times: dict[str, list[float]] = {"arviz": [], "tomstats": []}
    out = {}
    for _ in range(repeats):
        for name, fn in (("arviz", arviz_all), ("tomstats", lambda: convergence(x))):
            t0 = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - t0)
    diff = max(float(np.nanmax(np.abs(m - r) / np.abs(r)))
               for m, r in zip(out["tomstats"], out["arviz"], strict=True))
    return min(times["arviz"]), min(times["tomstats"]), diff


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: time both for each configuration and print the table."""
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    logging.getLogger("arviz").setLevel(logging.ERROR)
    rows = []
    for key, (c, n, s) in zip(row_keys(a), a.configs, strict=True):
        t_az, t_ts, diff = compare(c, n, s, a.repeats, a.seed)
        rows.append([key, f"{t_az:.2f}", f"{t_ts:.2f}", f"{t_az / t_ts:.1f} ×", f"{diff:.0e}"])
    table = markdown_table(COLUMNS, rows)
    note = f"\nBest of {a.repeats} runs each; AR(1) draws with coefficient 0.5, seed {a.seed}.\n"
    print(table + note, end="")
    if a.write_docs:
        write_docs("bench_convergence.py", argv, table + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
