"""NumPyro's NUTS as two compiled programs, cached in memory and on disk.

NumPyro's ``MCMC`` driver re-traces the sampler in Python on every fit (2–4 s for the
structural model, more than the sampling of a 150-cell binomial log) and runs about a
hundred small eager operations for the initialisation. Here the same kernel
(:func:`numpyro.infer.hmc.hmc` with ``algo="NUTS"``: the same tree building, step-size
and mass-matrix adaptation as ``numpyro.infer.NUTS``) is wrapped in two pure functions
of arrays:

``init(keys, arrays, y) -> state``
    one initial point per chain (``init_to_uniform``: uniform in [-2, 2] on the
    unconstrained scale, redrawn until the log density and its gradient are finite) and
    the kernel's initial state; chains are vectorised (``vmap``).
``advance(state, arrays, y, n, keep) -> (state, out)``
    ``n`` transitions (``n`` is an argument, so one program runs any chunk); with
    ``keep`` (kept draws after the warm-up) each is written into fixed-size buffers of
    :data:`CHUNK` rows: constrained and deterministic sites, and the sampler statistics.

**Warm-up trees are at most :data:`WARMUP_TREE_DEPTH` deep** (NumPyro's
``max_tree_depth=(warm-up, sampling)``); the draws after the warm-up use the full depth.
Early in the warm-up the metric is the identity, so when parameters sit on very different
posterior scales (an LLM capability informed by thousands of answers next to item effects
informed by four) the step size must suit the narrowest one and the trees run to depth
8–10: on the crossed 12,000-row log of ``benchmarks/glmm_speed.py`` the first 100 warm-up
iterations took 77 % of all leapfrog steps of the fit. Those long trajectories buy little,
because the metric they run under is about to be replaced; capped, the metric improves
window by window at a fraction of the cost, and the adapted step size and metric (hence
the draws' ESS per draw) come out as good.

The data arrays are arguments, not constants: a new log of the same shape runs the same
programs. Each program is exported (:mod:`jax.export`) and stored under the compilation
cache directory (:mod:`tomstats._compile_cache`), keyed by everything that determines it
(model spec, sizes, shapes, sampler settings, package versions, platform), so a later
process loads it without tracing; JAX's persistent cache then spares the XLA compilation.
Fits always run the exported programs, so a warm and a cold run give the same draws.

Chains advance in chunks of at most :data:`CHUNK` transitions; the progress bar moves
after each chunk. The chunking never changes the draws (the random state is carried).
On a CPU every chain is a program of its own (no batching), run in concurrent threads up to
the cores allowed (:func:`chain_groups`, :func:`run_chains`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tomstats._cpus import usable_cpus
from tomstats._io import atomic_write_bytes
from tomstats._version import __version__

__all__ = ["Runner", "runner", "run_chains", "chain_groups", "usable_cpus", "tree_depths",
           "CHUNK", "WARMUP_TREE_DEPTH"]

#: Transitions per compiled call (the progress bar's step).
CHUNK = 100
#: Maximum tree depth during the warm-up (at most 2**6 - 1 = 63 leapfrog steps).
WARMUP_TREE_DEPTH = 6
#: Bump when the programs change: old exported files are then ignored.
_PROGRAM_VERSION = 5


@dataclass(frozen=True)
class Runner:
    """The compiled programs of one model shape and sampler setting."""

    init: Callable[..., Any]
    advance: Callable[..., Any]
    chunk: int


_MEMORY: dict[str, Runner] = {}


def _versions() -> dict[str, str]:
    import jaxlib
    import numpyro

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "numpyro": numpyro.__version__, "tomstats": __version__}


def _signature(spec: Any, static: Mapping[str, Any], arrays: Mapping[str, Any],
               n_obs: int, settings: Mapping[str, Any]) -> str:
    """A hash of everything that determines the programs."""
    desc = {
        "program": _PROGRAM_VERSION,
        "spec": spec.to_dict(),
        "static": {k: static[k] for k in sorted(static)},
        "arrays": {k: [list(np.shape(v)), str(jnp.asarray(v).dtype)]
                   for k, v in sorted(arrays.items())},
        "n_obs": n_obs,
        "settings": dict(settings),
        "versions": _versions(),
        "platform": jax.default_backend(),
        "devices": str(jax.devices()[0].device_kind),
        "x64": bool(jax.config.jax_enable_x64),
    }
    return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()


def _export_dir() -> Path | None:
    d = jax.config.jax_compilation_cache_dir
    return Path(d) / "tomstats-programs" if d else None


def _compiled(exp: Any) -> Callable[..., Any]:
    """An exported program compiled for its argument shapes (JAX's persistent cache spares
    the XLA compilation when it has seen the program)."""
    args, kwargs = jax.tree.unflatten(
        exp.in_tree, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exp.in_avals])
    return jax.jit(exp.call).lower(*args, **kwargs).compile()


def _runner_of(exported: Mapping[str, Any], chunk: int) -> Runner:
    return Runner(_compiled(exported["init"]), _compiled(exported["advance"]), chunk=chunk)


def _load(sig: str) -> dict[str, Any] | None:
    d = _export_dir()
    if d is None:
        return None
    parts = {}
    for name in ("init", "advance"):
        f = d / f"{sig}-{name}.bin"
        try:
            parts[name] = jax.export.deserialize(bytearray(f.read_bytes()))
        except (OSError, ValueError, RuntimeError, ImportError):
            return None
    return parts


def _store(sig: str, exported: Mapping[str, Any]) -> None:
    d = _export_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        for name, exp in exported.items():  # (temporaries named with the pid: _io)
            atomic_write_bytes(d / f"{sig}-{name}.bin", exp.serialize())
    except (OSError, ImportError):  # a read-only or full cache: run without storing
        return


def _build(model_fn: Callable[..., Any], spec: Any, static: Mapping[str, Any],
           arrays: Mapping[str, Any], y: Any, *, chains: int, tune: int, chunk: int,
           target_accept: float, max_tree_depth: int, dense: Any) -> dict[str, Any]:
    """Trace the programs and export them (``jax.export.Exported`` each)."""
    from numpyro.infer.hmc import hmc
    from numpyro.infer.initialization import init_to_uniform
    from numpyro.infer.util import find_valid_initial_params, initialize_model

    def model(arrs: Mapping[str, Any], yy: Any = None) -> None:
        model_fn(spec, {**arrs, **static}, yy)

    # NumPyro's model set-up, traced only: run eagerly it would dispatch (and compile)
    # its search for initial values op by op, seconds on a first fit. With dynamic
    # arguments the potential and postprocessing functions take the data as arguments,
    # so they hold no tracer of this trace.
    made: dict[str, Any] = {}

    def setup(arrs: Mapping[str, Any], yy: Any) -> Any:
        info, made["pe_gen"], made["post_gen"], _ = initialize_model(
            jax.random.PRNGKey(0), model, model_args=(arrs, yy), dynamic_args=True)
        return info.z

    z_shape = jax.eval_shape(setup, arrays, y)
    pe_gen, post_gen = made["pe_gen"], made["post_gen"]
    init_kernel, sample_kernel = hmc(potential_fn_gen=pe_gen, algo="NUTS")

    def init_one(key: Any, arrs: Mapping[str, Any], yy: Any) -> Any:
        k_init, k_run = jax.random.split(key)
        (params, _, _), _ = find_valid_initial_params(
            k_init, model, init_strategy=init_to_uniform, model_args=(arrs, yy),
            prototype_params=jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), z_shape))
        return init_kernel(params, num_warmup=tune, target_accept_prob=target_accept,
                           max_tree_depth=tree_depths(max_tree_depth), dense_mass=dense,
                           model_args=(arrs, yy), rng_key=k_run)

    keys0 = jax.random.split(jax.random.PRNGKey(0), chains)
    state_shape = jax.eval_shape(jax.vmap(init_one, in_axes=(0, None, None)), keys0,
                                 arrays, y)
    treedef = jax.tree.structure(state_shape)

    def step(st: Any, arrs: Mapping[str, Any], yy: Any) -> Any:
        if chains == 1:  # no batching: NUTS's loops stay plain loops
            one = sample_kernel(jax.tree.map(lambda x: x[0], st), model_args=(arrs, yy))
            return jax.tree.map(lambda x: x[None], one)
        return jax.vmap(lambda s: sample_kernel(s, model_args=(arrs, yy)))(st)

    def collect(st: Any, arrs: Mapping[str, Any], yy: Any) -> dict[str, Any]:
        post = jax.vmap(post_gen(arrs, yy))(st.z)
        out = {f"post/{k}": v for k, v in post.items()}
        out.update({"stat/diverging": st.diverging, "stat/num_steps": st.num_steps,
                    "stat/energy": st.energy, "stat/potential_energy": st.potential_energy,
                    "stat/accept_prob": st.accept_prob,
                    "stat/step_size": st.adapt_state.step_size})
        return out

    def init(keys: Any, arrs: Mapping[str, Any], yy: Any) -> tuple[list[Any], Any]:
        st = jax.vmap(init_one, in_axes=(0, None, None))(keys, arrs, yy)
        return jax.tree.leaves(st), jnp.isfinite(st.potential_energy)

    out_shape = jax.eval_shape(collect, state_shape, arrays, y)

    def advance(leaves: list[Any], arrs: Mapping[str, Any], yy: Any, n: Any, keep: Any
                ) -> tuple[list[Any], dict[str, Any]]:
        st = jax.tree.unflatten(treedef, leaves)
        buf = {k: jnp.zeros((chunk, *v.shape), v.dtype) for k, v in out_shape.items()}

        def write(i: Any, s: Any, b: dict[str, Any]) -> dict[str, Any]:
            o = collect(s, arrs, yy)
            return {k: b[k].at[i].set(o[k]) for k in b}

        def body(i: Any, carry: Any) -> Any:
            s, b = carry
            s = step(s, arrs, yy)
            b = jax.lax.cond(keep, lambda: write(i, s, b), lambda: b)
            return s, b

        st, buf = jax.lax.fori_loop(0, n, body, (st, buf))
        return jax.tree.leaves(st), buf

    leaves_shape = jax.tree.leaves(state_shape)
    n_spec = jax.ShapeDtypeStruct((), jnp.int32)
    keep_spec = jax.ShapeDtypeStruct((), jnp.bool_)
    arr_spec = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), jnp.asarray(v).dtype),
                            dict(arrays))
    y_spec = jax.ShapeDtypeStruct(np.shape(y), jnp.asarray(y).dtype)
    key_spec = jax.ShapeDtypeStruct(keys0.shape, keys0.dtype)
    ex = jax.export.export
    return {"init": ex(jax.jit(init))(key_spec, arr_spec, y_spec),
            "advance": ex(jax.jit(advance))(leaves_shape, arr_spec, y_spec, n_spec, keep_spec)}


def chain_groups(chains: int) -> int:
    """Number of equal groups the chains run in, each advanced by one compiled program.

    On a CPU every chain is a program of its own: a vectorised program turns NUTS's
    data-dependent loops into masked loops that wait at every tree for the slowest chain,
    and single-chain programs run on separate cores at once (:func:`run_chains`). On an
    accelerator one vectorised program of all chains fills the device. The grouping
    depends on the number of chains and the platform only, never on the cores available,
    so a seed gives the same draws whatever ``cores`` is.

    >>> chain_groups(4) == (4 if jax.default_backend() == "cpu" else 1)
    True
    """
    return chains if jax.default_backend() == "cpu" else 1


def tree_depths(max_tree_depth: int) -> tuple[int, int]:
    """(warm-up, sampling) maximum tree depths for a fit's ``max_tree_depth``."""
    return min(WARMUP_TREE_DEPTH, max_tree_depth), max_tree_depth


def runner(model_fn: Callable[..., Any], spec: Any, data: Mapping[str, Any], y: Any, *,
           chains: int, tune: int, draws: int, target_accept: float, max_tree_depth: int,
           dense: Any) -> Runner:
    """The compiled programs for this model, data shape and sampler setting (built, or
    loaded from memory or disk); ``chains`` is the number of chains one program advances
    (a group, see :func:`chain_groups`)."""
    static = {k: v for k, v in data.items() if not hasattr(v, "shape")}
    arrays = {k: v for k, v in data.items() if hasattr(v, "shape")}
    chunk = max(1, min(CHUNK, draws))
    settings = {"chains": chains, "tune": tune, "chunk": chunk,
                "target_accept": float(target_accept),
                "max_tree_depth": list(tree_depths(max_tree_depth)),
                "dense": [list(b) for b in dense] if isinstance(dense, list) else bool(dense)}
    sig = _signature(spec, static, arrays, int(np.shape(y)[0]), settings)
    if sig in _MEMORY:
        return _MEMORY[sig]
    exported = _load(sig)
    if exported is None:
        exported = _build(model_fn, spec, static, arrays, y, chains=chains, tune=tune,
                          chunk=chunk, target_accept=target_accept,
                          max_tree_depth=max_tree_depth, dense=dense)
        _store(sig, exported)
    run = _runner_of(exported, chunk)
    if len(_MEMORY) >= 8:
        _MEMORY.pop(next(iter(_MEMORY)))
    _MEMORY[sig] = run
    return run


class _Progress:
    """One progress bar for concurrent chain groups, counting chain iterations."""

    def __init__(self, tune: int, draws: int, chains: int, groups: int, show: bool) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=(tune + draws) * chains, desc="NUTS warm-up", unit="it",
                         disable=not show, leave=False)
        self._show, self._tune, self._size = show, tune, chains // groups
        self._done = [0] * groups
        self._lock = threading.Lock()

    def advanced(self, group: int, n: int, state: Any) -> None:
        if not self._show:
            return
        jax.block_until_ready(state)
        with self._lock:
            self._done[group] += n
            if min(self._done) >= self._tune:
                self._bar.set_description("NUTS sampling")
            self._bar.update(n * self._size)

    def close(self) -> None:
        self._bar.close()


def _check_start(finite: Any, first_chain: int) -> None:
    """Raise when a chain starts where the log density is not finite."""
    bad = [first_chain + int(i) for i in np.flatnonzero(~np.asarray(finite))]
    if bad:
        raise RuntimeError(
            f"NUTS found no initial values with a finite log density for chain(s) {bad} "
            "(100 random tries, uniform in (-2, 2) on the unconstrained scale): the model's "
            "log density is -inf or NaN there; check the data (e.g. infinite covariates) "
            "and the priors")


def _run_group(run: Runner, keys: Any, arrays: Mapping[str, Any], y: Any, tune: int,
               draws: int, report: Callable[[int, Any], None], first_chain: int = 0
               ) -> dict[str, np.ndarray]:
    """Warm up and draw one group of chains; arrays with leading (draw, chain) axes."""
    state, finite = run.init(keys, arrays, y)
    _check_start(finite, first_chain)
    done = 0
    while done < tune:
        n = min(run.chunk, tune - done)
        state, _ = run.advance(state, arrays, y, np.int32(n), np.bool_(False))
        done += n
        report(n, state)
    parts: list[dict[str, Any]] = []
    done = 0
    while done < draws:
        n = min(run.chunk, draws - done)
        state, buf = run.advance(state, arrays, y, np.int32(n), np.bool_(True))
        parts.append({k: v[:n] for k, v in buf.items()})
        done += n
        report(n, state)
    host = jax.device_get(parts)
    return {k: np.concatenate([p[k] for p in host], axis=0) for k in host[0]}


def run_chains(run: Runner, keys: Any, arrays: Mapping[str, Any], y: Any, *, tune: int,
               draws: int, progress: bool, groups: int = 1, cores: int = 1
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Warm up and draw; return posterior and statistics as NumPy arrays with leading
    (chain, draw) axes.

    ``keys`` holds one key per chain. With ``groups > 1`` the chains are split into that
    many equal groups (``run`` is compiled for one group); up to ``cores`` groups advance
    at once, each in its own thread (XLA releases the GIL, so they run on separate CPU
    cores). How many run at once never changes the draws.
    """
    arrays = {k: v for k, v in arrays.items() if hasattr(v, "shape")}
    key_groups = np.split(np.asarray(keys), groups)
    bar = _Progress(tune, draws, len(keys), groups, progress)

    def group(g: int) -> dict[str, np.ndarray]:
        return _run_group(run, key_groups[g], arrays, y, tune, draws,
                          lambda n, st: bar.advanced(g, n, st), g * len(key_groups[g]))

    try:
        workers = max(1, min(cores, groups))
        if workers == 1:
            outs = [group(g) for g in range(groups)]
        else:
            with ThreadPoolExecutor(max_workers=workers,
                                    thread_name_prefix="tomstats-nuts") as pool:
                outs = list(pool.map(group, range(groups)))
    finally:
        bar.close()
    out = {k: np.swapaxes(np.concatenate([o[k] for o in outs], axis=1), 0, 1)
           for k in outs[0]}
    post = {k.split("/", 1)[1]: v for k, v in out.items() if k.startswith("post/")}
    stats = {k.split("/", 1)[1]: v for k, v in out.items() if k.startswith("stat/")}
    return post, stats
