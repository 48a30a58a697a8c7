"""Speed of the structural GLMM: min bulk ESS per second, NumPyro vs PyMC vs PyMC-via-NumPyro.

Two datasets simulated from equation (1) (:data:`tomstats.simulation.paper.PAPER_PARAMS`):

``one-llm``
    7,500 rows: one LLM, the 5 × 3 design × 500 questions a cell, 150 item intercepts
    (10 items a cell, each asked 50 times; item effects :math:`u_k\\sim N(0,\\sigma^2)`).
``crossed``
    12,000 rows: four LLMs (capability 0.8/0.95/1.1/1.25) answering the same 3,000 items
    (5 × 3 cells × 200 items; :func:`tomstats.simulation.simulator.simulate_questions` with
    ``latent=True, shared_items=True``): crossed model × item effects.

Each is fitted with the same spec and priors by ``tomstats.glmm.fit`` on each backend
(``numpyro``: tomstats's NumPyro NUTS — vectorised chains, a dense mass matrix over the
regression coefficients, compiled programs cached on disk; ``pymc``: PyMC's own NUTS with
its defaults, ``cores=1`` so that both use one process (``--pymc-cores`` changes it;
PyMC's own default is one process per chain up to 4 CPUs); ``pymc-numpyro``: the PyMC model
sampled by NumPyro's NUTS through ``pm.sample(nuts_sampler="numpyro")``). The libraries are
imported before any timing. Reported per fit: wall time of the whole ``fit`` call
(compilation, warm-up, sampling, diagnostics; posterior predictive and log-likelihood
switched off), the CPU seconds it used (all threads and child processes), min bulk ESS
over every sampled parameter (ArviZ, rank-normalised), ESS/s = min bulk ESS / wall
seconds, and the ratio to PyMC's ESS/s in the same run.

Each fit runs ``--repeats`` times (default 2) with the same seed. With ``--fresh-caches``
(the default) the compilation caches start empty — JAX's (``TOMSTATS_JAX_CACHE``) and
PyTensor's ``compiledir`` both point into a new temporary folder — so run 1 is a first
fit on a new machine (everything compiled) and run 2 a later fit of a log of the same
shape in a new process (programs loaded from the caches; tomstats's in-memory cache is
cleared between runs)::

    python benchmarks/glmm_speed.py --chains 4 --draws 1000 --tune 1000 --datasets one-llm
    python benchmarks/glmm_speed.py --chains 4 --draws 1000 --tune 1000 --datasets crossed

Rows are aggregated into binomial cells when that halves the observations (the fit's
default, applied identically to all backends: 7,500 rows → 150 cells; the crossed data
have one row per LLM × item, so stay Bernoulli); ``--no-aggregate`` fits the rows.

Each dataset's table (:data:`COLUMNS`, one row per backend and run) is printed; with
``--write-docs`` it also goes into docs/glmm-real-data.md between this script's markers for
that dataset (``[one-llm]``, ``[crossed]``), with the command, machine, load average and
date (``benchmarks/_docs.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _docs

BACKENDS = ("numpyro", "pymc", "pymc-numpyro")
SCRIPT = "glmm_speed.py"


def one_llm_data(seed: int = 0, n_items_per_cell: int = 10, n_per_cell: int = 500
                 ) -> pd.DataFrame:
    """7,500 rows, one LLM, 150 items (each asked ``n_per_cell / n_items_per_cell`` times)."""
    from tomstats.design import paper_design
    from tomstats.model import linear_predictor
    from tomstats.simulation.paper import PAPER_PARAMS

    rng = np.random.default_rng(seed)
    d = paper_design()
    rows = []
    u = rng.normal(0.0, PAPER_PARAMS.sigma, size=(d.shape[0], d.shape[1], n_items_per_cell))
    for i, c in enumerate(d.context):
        for j, t in enumerate(d.tom):
            k = np.arange(n_per_cell) % n_items_per_cell
            eta = np.asarray(linear_predictor(PAPER_PARAMS, float(c), float(t), 1.0,
                                              u[i, j, k]))
            y = rng.random(n_per_cell) < 1 / (1 + np.exp(-eta))
            rows.append(pd.DataFrame({"model": "llm", "context_words": float(c),
                                      "tom_order": int(t),
                                      "item": [f"c{i}t{j}i{q}" for q in k],
                                      "correct": y.astype(int)}))
    return pd.concat(rows, ignore_index=True)


def crossed_data(seed: int = 0) -> pd.DataFrame:
    """12,000 rows: four LLMs × 3,000 shared items."""
    from tomstats.design import paper_design
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.simulator import simulate_questions

    d = paper_design().with_(n_per_cell=200, capability=(0.8, 0.95, 1.1, 1.25))
    df = simulate_questions(d, PAPER_PARAMS, seed=seed, latent=True, shared_items=True)
    df = df.rename(columns={"capability": "model", "context_length": "context_words"})
    df["model"] = [f"m{c:.2f}" for c in df["model"]]
    return df[["model", "item", "tom_order", "context_words", "correct"]]


def _cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its finished child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_one(df: pd.DataFrame, backend: str, *, chains: int, draws: int, tune: int,
            seed: int, aggregate: Any, pymc_cores: int = 1) -> dict[str, Any]:
    """Fit once; wall and CPU seconds, min bulk ESS (and the variable), divergences,
    max R-hat."""
    import arviz as az

    from tomstats.glmm import fit

    extra = {"cores": pymc_cores} if backend == "pymc" else {}
    c0, t0 = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = fit(df, "structural", backend=backend, chains=chains, draws=draws,
                    tune=tune, seed=seed, progress=False, log_likelihood=False,
                    posterior_predictive=False, aggregate=aggregate, **extra)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    post = idata.posterior
    # sampled (non-deterministic) parameters: the raw, non-centred ones
    names = [v for v in post.data_vars if v not in ("capability", "item_effect", "alpha",
                                                    "delta", "gamma_llm", "alpha_llm")]
    names += [v for v in ("alpha", "delta") if f"{v}_scaled" not in post]
    ess = az.ess(post[names], method="bulk")
    mins = {v: float(ess[v].min()) for v in names}
    worst = min(mins, key=mins.get)
    rhat = az.rhat(post[names])
    return {"backend": backend, "wall_s": wall, "cpu_s": cpu, "min_ess_bulk": mins[worst],
            "min_ess_var": worst, "ess_per_s": mins[worst] / wall,
            "max_rhat": float(max(float(rhat[v].max()) for v in names)),
            "divergences": int(idata.sample_stats["diverging"].to_numpy().sum()),
            "n_obs": int(post.attrs["n_obs"]), "n_rows": int(post.attrs["n_rows"])}


#: The columns of each dataset's table (printed, and written with --write-docs).
COLUMNS = ("backend", "run", "wall (s)", "CPU (s)", "min bulk ESS (variable)", "ESS/s",
           "vs PyMC (same run)", "max R-hat", "divergences")

#: The page that holds the tables (one marked block per dataset).
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "glmm-real-data.md"


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--datasets", nargs="+", default=["one-llm", "crossed"],
                   choices=["one-llm", "crossed"])
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--no-aggregate", action="store_true")
    p.add_argument("--repeats", type=int, default=2, help="fits per dataset and backend")
    p.add_argument("--keep-caches", action="store_true",
                   help="use the existing compilation caches instead of fresh, empty ones")
    p.add_argument("--pymc-cores", type=int, default=1,
                   help="processes for PyMC's own sampler (PyMC's default: min(4, CPUs))")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--write-docs", action="store_true",
                   help="also write each dataset's table into docs/glmm-real-data.md, "
                        "between this script's markers for that dataset, with the command, "
                        "machine and load")
    return p


def _labels(backend: str, args: argparse.Namespace) -> str:
    return {"numpyro": "NumPyro (tomstats)",
            "pymc": f"PyMC (own NUTS, `cores={args.pymc_cores}`)",
            "pymc-numpyro": "PyMC via NumPyro"}[backend]


def _run_label(run: int, args: argparse.Namespace) -> str:
    if args.keep_caches:
        return str(run)
    return f"{run} (cold)" if run == 1 else f"{run} (warm)"


def row_keys(args: argparse.Namespace, dataset: str | None = None) -> list[tuple[str, str]]:
    """(backend, run) of each row of ``dataset``'s table, in order (default: the first)."""
    if dataset is not None and dataset not in args.datasets:
        raise ValueError(f"dataset {dataset!r} is not among --datasets {args.datasets}")
    return [(_labels(b, args), _run_label(r, args)) for b in args.backends
            for r in range(1, args.repeats + 1)]


def _table(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """One dataset's Markdown table and a line on its size and settings.

    ESS/s = min bulk ESS / wall seconds; vs PyMC = ESS/s over PyMC's (own NUTS) ESS/s in
    the same run number of the same invocation."""
    from _docs import markdown_table

    ref = {r["run"]: r["ess_per_s"] for r in results if r["backend"] == "pymc"}
    rows = []
    for r in results:
        vs = f"{r['ess_per_s'] / ref[r['run']]:.2f}×" if r["run"] in ref else "—"
        rows.append([_labels(r["backend"], args), _run_label(r["run"], args),
                     f"{r['wall_s']:.3g}", f"{r['cpu_s']:.3g}",
                     f"{r['min_ess_bulk']:,.0f} (`{r['min_ess_var']}`)",
                     f"{r['ess_per_s']:.3g}", vs, f"{r['max_rhat']:.3f}",
                     str(r["divergences"])])
    first = results[0]
    obs = ("rows" if first["n_obs"] == first["n_rows"]
           else f"rows aggregated to {first['n_obs']:,} binomial cells")
    caches = ("existing compilation caches" if args.keep_caches else
              "compilation caches empty at run 1 (run 1 compiles everything; later runs "
              "load the compiled programs)")
    note = (f"\n{first['n_rows']:,} {obs}; {args.chains} chains × {args.draws} draws after "
            f"{args.tune} warm-up, seed {args.seed}; {caches}.\n")
    return markdown_table(COLUMNS, rows) + note


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the benchmark and print the table."""
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    if a.write_docs:  # every block must be there before minutes of sampling
        from _docs import require_markers

        for name in a.datasets:
            require_markers(SCRIPT, DOCS_PAGE, name)
    if not a.keep_caches:  # before PyTensor or JAX read their settings
        tmp = tempfile.mkdtemp(prefix="glmm_speed_caches_")
        os.environ["TOMSTATS_JAX_CACHE"] = os.path.join(tmp, "jax")
        os.environ["PYTENSOR_FLAGS"] = ",".join(
            f for f in (os.environ.get("PYTENSOR_FLAGS", ""),
                        f"compiledir={os.path.join(tmp, 'pytensor')}") if f)
    import arviz  # noqa: F401  (imports are not part of any fit's time)
    import numpyro  # noqa: F401
    import pymc  # noqa: F401

    from tomstats.glmm import _nuts

    makers = {"one-llm": one_llm_data, "crossed": crossed_data}
    results = []
    tables = {}
    for name in a.datasets:
        df = makers[name](a.seed)
        done = []
        for backend in a.backends:
            for rep in range(1, a.repeats + 1):
                _nuts._MEMORY.clear()  # a later fit = a new process with warm disk caches
                r = run_one(df, backend, chains=a.chains, draws=a.draws, tune=a.tune,
                            seed=a.seed, aggregate=False if a.no_aggregate else "auto",
                            pymc_cores=a.pymc_cores)
                r["dataset"], r["run"] = name, rep
                done.append(r)
                print(f"{name:8} {backend:13} run {rep} {r['wall_s']:8.1f} s  min ESS "
                      f"{r['min_ess_bulk']:7.0f} ({r['min_ess_var']})  "
                      f"{r['ess_per_s']:7.2f} ESS/s", flush=True)
        results += done
        tables[name] = _table(done, a)
        print(f"\n{name}:\n\n{tables[name]}", flush=True)
    print(f"pymc_cores={a.pymc_cores}")
    if a.json:
        from tomstats._io import atomic_write_text

        atomic_write_text(a.json, json.dumps({"settings": vars(a), "results": results},
                                             indent=2) + "\n")
    if a.write_docs:
        from _docs import write_docs

        for name, table in tables.items():
            write_docs(SCRIPT, argv, table, page=DOCS_PAGE, part=name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
