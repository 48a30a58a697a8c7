"""JAX simulator of equation (1) over a factorial design.

Two paths that agree in distribution:

``"exact"``
    Draw only per-cell counts. With independent per-question noise
    :math:`\\varepsilon\\sim N(0,\\sigma^2)`, every answer in a cell is marginally
    Bernoulli(:math:`\\bar p`), :math:`\\bar p = E[\\operatorname{expit}(\\eta+\\varepsilon)]`
    (Gauss–Hermite, :func:`tomstats.model.expected_accuracy`), and the answers are
    independent, so the cell count is exactly :math:`\\text{Binomial}(n, \\bar p)`.
``"bernoulli"``
    Draw every question: :math:`y = 1\\{U < \\bar p\\}` with 24-bit uniforms :math:`U`
    cut four at a time from three 32-bit words of a counter-based generator (the
    resolution of a float32 uniform, at three quarters of the bits). ``latent=True`` in
    :func:`simulate_questions` instead draws :math:`\\varepsilon` explicitly and
    :math:`y \\sim \\text{Bernoulli}(\\operatorname{expit}(\\eta + \\varepsilon))` — the
    definition itself, used to check the other two.

Replicate ``r`` always uses the ``r``-th key of ``jax.random.split(key, R)``, so results
do not depend on chunk size or on the number of devices or processes; the replicate axis is
sharded over this process's JAX devices (``jax.sharding``) when there are several, and in a
multi-process run (:mod:`tomstats._distributed`) each process takes a contiguous share of the
replicates before the results are gathered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import scipy.stats
import xarray as xr
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from tomstats import _distributed
from tomstats._args import MAX_SEED
from tomstats._guards import Footprint, check_footprint
from tomstats._validate import check_type
from tomstats._version import __version__
from tomstats.design import CONTEXT, TOM, Design
from tomstats.model import Params, cell_probabilities, linear_predictor
from tomstats.simulation.count_anova import anova_from_counts, systematic_share

__all__ = [
    "PATHS",
    "SOURCES",
    "expected_cells",
    "simulate",
    "simulate_questions",
    "simulation_footprint",
    "make_key",
    "bernoulli_counts",
    "item_trials",
    "item_counts",
]

#: Simulation paths.
PATHS = ("exact", "bernoulli")
#: ANOVA sources in the output, in order.
SOURCES = ("tom_order", "context_length", "interaction", "residual")
#: Systematic (between-cell) sources, in order.
SYSTEMATIC = SOURCES[:3]
_MAX_DRAWS_PER_CHUNK = 2**25  # per-question draws held in memory at once (bernoulli path)
# Rough single-core throughputs for the size guard, about 10x below what a 2-CPU machine
# measures (`simulate` of the paper design: ~7e6 cell-studies/s exact, ~3e8 draws/s bernoulli)
_EXACT_CELL_STUDIES_PER_S = 1e6
_BERNOULLI_DRAWS_PER_S = 3e7


def make_key(seed: int | jax.Array) -> jax.Array:
    """A typed PRNG key (default threefry implementation) from a non-negative integer seed.

    Passing a typed key returns it unchanged.
    """
    if isinstance(seed, jax.Array) and jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
        return seed
    if (isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0
            or seed > MAX_SEED):
        raise ValueError(f"seed must be an integer from 0 to 2**63 - 1, got {seed!r}")
    return jax.random.key(int(seed))


def _rbg(key: jax.Array) -> jax.Array:
    """An ``rbg`` key (XLA's bulk bit generator) derived from any typed key.

    Bulk bits for the per-question path come from ``rbg``, which is several times faster than
    threefry on CPU; everything else (and the binomial sampler, whose rejection loop does not
    terminate under ``vmap`` with ``rbg`` keys in JAX 0.10) uses the key as given.
    """
    if jax.random.key_impl(key) == jax.random.key_impl(jax.random.key(0, impl="rbg")):
        return key
    return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")


# ---------------------------------------------------------------------------------------
# parameters and grids
# ---------------------------------------------------------------------------------------


def _param_batch(
    params: Params, grid: Mapping[str, Sequence[float]] | None, param_dims: Sequence[str]
) -> tuple[Params, tuple[str, ...], dict[str, np.ndarray]]:
    """Broadcast ``params`` (and an outer-product ``grid``) to one batch shape.

    Returns the broadcast params, the batch dimension names and their coordinates.
    """
    params.validate()
    fields = ("alpha", "gamma", "delta", "sigma")
    arrays = {f: np.asarray(getattr(params, f), dtype=float) for f in fields}
    batch_shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    if len(param_dims) != len(batch_shape):
        raise ValueError(
            f"param_dims {tuple(param_dims)} do not match the parameter batch shape "
            f"{batch_shape} (one name per axis)"
        )
    dims = tuple(param_dims)
    coords: dict[str, np.ndarray] = {
        d: np.arange(n) for d, n in zip(dims, batch_shape, strict=True)
    }
    grid = dict(grid or {})
    for name, values in grid.items():
        if name not in fields:
            raise ValueError(f"grid: unknown parameter {name!r} (known: {list(fields)})")
        v = np.asarray(values, dtype=float)
        if v.ndim != 1 or v.size == 0:
            raise ValueError(f"grid: {name!r} must be a non-empty 1-D list, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"grid: {name!r} has non-finite values {v.tolist()}")
        if name == "sigma" and np.any(v < 0):
            raise ValueError(f"grid: 'sigma' must be >= 0, got {v.tolist()}")
        if name in dims:
            raise ValueError(f"grid: {name!r} is also a parameter batch dimension")
    n_grid = len(grid)
    out = {}
    for f, a in arrays.items():
        a = a.reshape(batch_shape + (1,) * n_grid) if a.shape == batch_shape else np.broadcast_to(
            a, batch_shape).reshape(batch_shape + (1,) * n_grid)
        out[f] = a
    for i, (name, values) in enumerate(grid.items()):
        shape = [1] * (len(batch_shape) + n_grid)
        shape[len(batch_shape) + i] = len(values)
        out[name] = np.broadcast_to(
            np.asarray(values, dtype=float).reshape(shape),
            np.broadcast_shapes(out[name].shape, tuple(shape)),
        )
        coords[name] = np.asarray(values, dtype=float)
    full = np.broadcast_shapes(*(a.shape for a in out.values()))
    bp = Params(**{f: np.broadcast_to(a, full) for f, a in out.items()})
    return bp, dims + tuple(grid), coords


def _cell_p(params: Params, design: Design, capability: np.ndarray) -> np.ndarray:
    """Expected cell accuracy, shape ``(*batch, n_capability, n_context, n_tom)``."""
    expand = Params(*(jnp.asarray(getattr(params, f))[..., None, None, None]
                      for f in ("alpha", "gamma", "delta", "sigma")))
    cap = jnp.asarray(capability)[..., :, None, None]
    c = jnp.asarray(design.context, dtype=jnp.float32)[:, None]
    t = jnp.asarray(design.tom, dtype=jnp.float32)[None, :]
    return np.asarray(cell_probabilities(expand, c, t, cap), dtype=np.float64)


def expected_cells(
    design: Design,
    params: Params,
    *,
    grid: Mapping[str, Sequence[float]] | None = None,
    param_dims: Sequence[str] = (),
) -> xr.DataArray:
    """Analytic expected accuracy of every design cell (no sampling).

    .. math:: \\bar p_{ct}(m) = E_\\varepsilon[\\operatorname{expit}(\\eta(m, c, t) + \\varepsilon)]

    Returns a DataArray with dims ``(*param_dims, *grid, capability, context_length,
    tom_order)``.
    """
    _check_design_params(design, params)
    bp, dims, coords = _param_batch(params, grid, param_dims)
    p = _cell_p(bp, design, np.asarray(design.capability))
    return xr.DataArray(
        p,
        dims=dims + ("capability", CONTEXT, TOM),
        coords={**coords, "capability": list(design.capability), CONTEXT: design.context,
                TOM: design.tom},
        name="p_expected",
    )


# ---------------------------------------------------------------------------------------
# the two paths
# ---------------------------------------------------------------------------------------


def _uniform24_parts(key: jax.Array, shape: tuple[int, ...]) -> list[jax.Array]:
    """Uniform integers in ``[0, 2**24)``, four per three 32-bit words, as four blocks.

    For ``shape = (..., n)`` returns four arrays of shape ``(..., m)``, ``m = ceil(n / 4)``;
    question ``i·m + j`` of the last axis is element ``j`` of block ``i``.
    """
    m = -(-shape[-1] // 4)
    w = jax.random.bits(key, shape[:-1] + (3, m), jnp.uint32)
    a, b, c = w[..., 0, :], w[..., 1, :], w[..., 2, :]
    fourth = ((a & 0xFF) << 16) | ((b & 0xFF) << 8) | (c & 0xFF)
    return [a >> 8, b >> 8, c >> 8, fourth]


def _uniform24(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Uniform integers in ``[0, 2**24)`` of the given shape (blocks of
    :func:`_uniform24_parts` laid end to end)."""
    return jnp.concatenate(_uniform24_parts(key, shape), axis=-1)[..., :shape[-1]]


def _threshold24(p: jax.Array) -> jax.Array:
    """``round(p * 2**24)`` as uint32: ``P(U < t) = t / 2**24`` for 24-bit uniforms U."""
    return jnp.round(jnp.clip(p, 0.0, 1.0) * 2.0**24).astype(jnp.uint32)


def bernoulli_counts(key: jax.Array, p: jax.Array, n: np.ndarray) -> jax.Array:
    """Per-question Bernoulli draws summed per cell.

    ``p`` has shape ``(..., C, T)``, ``n`` shape ``(C, T)``; draws ``max(n)`` questions per
    cell and masks the surplus in unbalanced designs. Returns int32 counts of shape of ``p``.
    """
    n_max = int(np.max(n))
    parts = _uniform24_parts(_rbg(key), p.shape + (n_max,))
    m = parts[0].shape[-1]
    thr = _threshold24(p)[..., None]
    total = jnp.zeros(p.shape, jnp.int32)
    for i, u in enumerate(parts):  # blockwise: no concatenated copy of the uniforms
        y = u < thr
        if (i + 1) * m > int(np.min(n)):  # this block holds questions past some cell's n
            y = y & (i * m + jnp.arange(m) < jnp.asarray(n)[..., None])
        total = total + y.sum(-1, dtype=jnp.int32)
    return total


def binomial_cdf_table(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """CDF of Binomial(n, p) at k = 0 … max(n) for every cell, in float64 (SciPy).

    ``p`` has shape ``(..., C, T)`` and ``n`` shape ``(C, T)``; the result has shape
    ``(..., C, T, max(n) + 1)`` and is 1 for k ≥ n.
    """
    k = np.arange(int(np.max(n)) + 1)
    return scipy.stats.binom.cdf(k, np.asarray(n)[..., None], np.asarray(p)[..., None])


def _exact_counts(key: jax.Array, cdf: jax.Array) -> jax.Array:
    r"""Cell counts drawn as Binomial(n, p) by inversion of the tabulated CDF.

    :math:`k = \#\{j : F(j) < u\}` with :math:`u` uniform (24 bits), so
    :math:`P(k = j) = F(j) - F(j-1)` up to the 2^-24 resolution of :math:`u`.
    """
    u = (_uniform24(_rbg(key), cdf.shape[:-1] + (1,))[..., 0].astype(jnp.float32) + 0.5) \
        * jnp.float32(2.0**-24)
    return jax.vmap(jnp.searchsorted, in_axes=(0, 0))(
        cdf.reshape(-1, cdf.shape[-1]), u.reshape(-1)
    ).reshape(u.shape).astype(jnp.int32)


def _one_replicate(
    key: jax.Array, p: jax.Array, *, n: np.ndarray, path: str, ss_type: int
) -> dict[str, jax.Array]:
    """Draw one study (every capability/grid point) and decompose its variance.

    ``p`` is the cell probability table (bernoulli path) or the binomial CDF table with a
    trailing ``k`` axis (exact path).
    """
    counts = _exact_counts(key, p) if path == "exact" else bernoulli_counts(key, p, n)
    # ANOVA tables are indexed (context, ToM) → the first factor is context; reorder to
    # SOURCES = (tom, context, interaction, residual).
    # p-values are computed afterwards on the host (scipy), outside the hot loop.
    balanced = bool(np.all(n == n.flat[0]))
    tab = anova_from_counts(counts.astype(jnp.float32), np.asarray(n, dtype=np.float32),
                            ss_type=ss_type, balanced=balanced, p_values=False, check=False)
    order = jnp.asarray([1, 0, 2, 3])
    share = systematic_share(tab)[..., jnp.asarray([1, 0, 2])]
    return {
        "successes": counts,
        "SS": tab.SS[..., order],
        "DF": jnp.broadcast_to(tab.DF[..., order], tab.SS.shape),
        "F": tab.F[..., order],
        "eta2": tab.eta2[..., order],
        "partial_eta2": tab.partial_eta2[..., order],
        "share": share,
    }


@lru_cache(maxsize=1)
def _devices_mesh() -> Mesh | None:
    """A 1-D mesh over this process's devices (axis ``replicate``), or None with a single
    device (in a multi-process run the processes split the replicates among themselves)."""
    devs = jax.local_devices()
    return Mesh(np.array(devs), ("replicate",)) if len(devs) > 1 else None


@lru_cache(maxsize=64)
def _compiled(path: str, ss_type: int, n_bytes: bytes, n_shape: tuple[int, ...],
              n_dev: int) -> Callable:
    """Compiled ``keys, table -> per-replicate results`` (cached per path/type/trials/devices).

    Replicates run as a ``lax.map`` (a loop, not ``vmap``): the ``rbg`` generator's bits
    under ``vmap`` depend on a key's position in the batch, while in a loop every replicate
    is a function of its own key only — so results do not depend on chunking or devices.
    With several devices the key axis is split over them with ``shard_map``.
    """
    n = np.frombuffer(n_bytes, dtype=np.int64).reshape(n_shape)
    fn = partial(_one_replicate, n=n, path=path, ss_type=ss_type)

    def per_keys(keys: jax.Array, table: jax.Array) -> dict[str, jax.Array]:
        return jax.lax.map(lambda k: fn(k, table), keys)

    if n_dev > 1:
        per_keys = jax.shard_map(per_keys, mesh=_devices_mesh(),
                                 in_specs=(PartitionSpec("replicate"), PartitionSpec()),
                                 out_specs=PartitionSpec("replicate"))
    return jax.jit(per_keys)


def _run_replicates(
    vfn: Callable[[jax.Array, jax.Array], dict[str, jax.Array]],
    keys: jax.Array,
    p: jax.Array,
    chunk: int,
    progress: bool | None,
    desc: str,
) -> dict[str, np.ndarray]:
    """Apply ``vfn(keys, p)`` chunk by chunk of keys, the keys sharded over this process's
    devices; in a multi-process run over this process's share of the keys, then gathered
    (one bar, on process 0, over the whole run)."""
    mesh = _devices_mesh()
    n_dev = 1 if mesh is None else mesh.size
    chunk = max(n_dev, (chunk // n_dev) * n_dev)
    n_all = keys.shape[0]
    lo, hi = _distributed.share(n_all)
    keys, n = keys[lo:hi], hi - lo
    scale = n_all / max(n, 1)  # the bar counts the whole run: this share, scaled
    parts: list[dict[str, np.ndarray]] = []
    progress = _distributed.progress_allowed(progress)
    disable = None if progress is None else not progress
    with tqdm(total=n_all, desc=desc, unit="rep", disable=disable, leave=False) as bar:
        for start in range(0, n, chunk):
            k = keys[start:start + chunk]
            size = k.shape[0]
            pad = (-size) % n_dev
            if pad:  # whole device shares: repeat the last key (its results are dropped);
                # there may be more devices than keys
                k = k[jnp.concatenate([jnp.arange(size), jnp.full(pad, size - 1)])]
            if mesh is not None:
                k = jax.device_put(k, NamedSharding(mesh, PartitionSpec("replicate")))
            out = jax.device_get(vfn(k, p))
            parts.append({name: np.asarray(v)[:size] for name, v in out.items()})
            bar.update(min(round(size * scale), n_all - bar.n))
        local = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]} \
            if parts else {}
        return _distributed.gather_rows(local, n_all)


def simulation_footprint(
    design: Design, replicates: int, *, path: str = "exact", n_points: int | None = None,
    what: str = "simulation",
) -> Footprint:
    r"""Memory and time a :func:`simulate` call needs, estimated before it starts.

    ``n_points`` is the number of (parameter point, capability level) pairs simulated
    (default: the design's capability levels). With :math:`S = R \cdot P` studies
    (replicates × points), :math:`C` cells and :math:`n_\max` questions in the largest cell:

    - exact path: the binomial CDF table holds :math:`P C (n_\max + 1)` numbers (20 bytes
      each while it is built), time :math:`S C` / 1e6 cell-studies per second;
    - bernoulli path: at most 2^25 draws at once, time :math:`S \sum n` / 3e7 draws per
      second;
    - results: about :math:`S (20 C + 200)` bytes, twice while they are gathered.
    """
    n = np.asarray(design.n_per_cell)
    cells = int(n.size)
    points = len(np.atleast_1d(design.capability)) if n_points is None else int(n_points)
    studies = float(replicates) * points
    out_bytes = 2.0 * studies * (20.0 * cells + 200.0)
    if path == "exact":
        work = 20.0 * points * cells * (float(n.max()) + 1.0)
        seconds = studies * cells / _EXACT_CELL_STUDIES_PER_S
    else:
        work = 8.0 * _MAX_DRAWS_PER_CHUNK
        seconds = studies * float(n.sum()) / _BERNOULLI_DRAWS_PER_S
    detail = (f"{replicates:,} replicates × {points:,} parameter point(s) and capability "
              f"level(s) × {cells} cells of up to {int(n.max()):,} questions, {path} path")
    return Footprint(what, out_bytes + work, seconds, detail)


def _check_design_params(design: Design, params: Params) -> None:
    """``TypeError`` naming the argument when ``design`` or ``params`` has the wrong type."""
    check_type(design, Design, "design", "a tomstats.Design (e.g. tomstats.paper_design())")
    check_type(params, Params, "params", "a tomstats.Params (e.g. tomstats.PAPER_PARAMS)")


def _check_common(replicates: int, path: str, ss_type: int) -> None:
    if isinstance(replicates, bool) or not isinstance(replicates, int | np.integer) \
            or replicates < 1:
        raise ValueError(f"replicates must be a positive integer, got {replicates!r}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if ss_type not in (1, 2, 3):
        raise ValueError(f"ss_type must be 1, 2 or 3, got {ss_type!r}")


def simulate(
    design: Design,
    params: Params,
    *,
    replicates: int = 100,
    seed: int | jax.Array = 0,
    path: str = "exact",
    grid: Mapping[str, Sequence[float]] | None = None,
    param_dims: Sequence[str] = (),
    capability: Any = None,
    ss_type: int = 2,
    progress: bool | None = None,
    chunk: int | None = None,
    allow_large: bool = False,
) -> xr.Dataset:
    """Simulate the design and decompose the variance of every simulated study.

    For each replicate, parameter point and capability level, one study of
    ``design.n_per_cell`` questions per cell is drawn from equation (1) and analysed with
    a two-way ANOVA (:func:`tomstats.simulation.count_anova.anova_from_counts`, type ``ss_type``).

    Parameters
    ----------
    design : Design
        Context × ToM design, questions per cell and capability levels.
    params : Params
        Parameters of equation (1). Fields may be arrays with a common batch shape (e.g.
        posterior draws); name their axes with ``param_dims``.
    replicates : int
        Monte Carlo replicates (independent simulated studies).
    seed : int or PRNG key
        Replicate ``r`` uses ``jax.random.split(key, replicates)[r]``.
    path : {"exact", "bernoulli"}
        Binomial cell counts, or per-question Bernoulli draws summed per cell.
    grid : mapping, optional
        Outer-product grid over parameters, e.g. ``{"gamma": [...], "alpha": [...]}``; each
        becomes a dimension.
    param_dims : sequence of str
        Names of the batch axes of ``params``.
    capability : array, optional
        Capability levels, shape ``(*param batch, K)`` or ``(K,)``; default
        ``design.capability``. A ``(*batch, K)`` array gives per-draw capabilities.
    ss_type : {1, 2, 3}
        Sums of squares type (2, the default, equals 1 and 3 for balanced designs).
    progress : bool, optional
        Show a progress bar (default: only on a terminal).
    chunk : int, optional
        Replicates per compiled call (default: as many as fit ~32 M draws).
    allow_large : bool
        Skip the size guard (:func:`simulation_footprint`), which otherwise refuses a run
        needing more memory than is available or more than a day.

    Returns
    -------
    xarray.Dataset
        ``successes`` (``replicate, *batch, capability, context_length, tom_order``),
        ``trials``,
        ``p_expected``, ``accuracy`` = successes / trials, and per study ``SS``, ``F``,
        ``p_value``, ``eta2``, ``partial_eta2`` over ``source`` = (tom_order, context_length,
        interaction, residual) and ``share`` (ToM / context / interaction share of the
        between-cell SS) over ``systematic``.
    """
    _check_design_params(design, params)
    _check_common(replicates, path, ss_type)
    n = np.asarray(design.n_per_cell)
    if int(n.sum()) <= n.size:
        raise ValueError(
            "questions_per_cell: one question per cell leaves the ANOVA no residual degrees "
            f"of freedom ({int(n.sum())} questions in {n.size} cells), so F and partial η² "
            "are undefined; use at least 2 questions per cell")
    bp, dims, coords = _param_batch(params, grid, param_dims)
    cap = np.asarray(design.capability if capability is None else capability, dtype=float)
    if not np.all(np.isfinite(cap)):
        raise ValueError(f"capability must be finite, got {cap.tolist()}")
    n_points = int(np.prod([len(coords[d]) for d in dims], dtype=float)) * cap.shape[-1]
    check_footprint(simulation_footprint(design, int(replicates), path=path,
                                         n_points=n_points), allow_large=allow_large)
    key = make_key(seed)
    p = _cell_p(bp, design, cap)
    cells_per_rep = int(np.prod(p.shape)) * (int(n.max()) if path == "bernoulli" else 1)
    if chunk is None:
        chunk = max(1, min(replicates, _MAX_DRAWS_PER_CHUNK // max(cells_per_rep, 1)))
    vfn = _compiled(path, int(ss_type), n.astype(np.int64).tobytes(), n.shape,
                    jax.local_device_count())
    keys = jax.random.split(key, replicates)
    table = binomial_cdf_table(p, n) if path == "exact" else p
    out = _run_replicates(vfn, keys, jnp.asarray(table, dtype=jnp.float32), chunk, progress,
                          desc=f"simulate ({path})")
    df = out.pop("DF")
    with np.errstate(invalid="ignore"):
        out["p_value"] = scipy.stats.f.sf(out["F"], df, df[..., -1:])

    cap_dims = ("capability",)
    cap_coord = cap if cap.ndim == 1 else np.arange(cap.shape[-1])
    cell_dims = ("replicate",) + dims + cap_dims + (CONTEXT, TOM)
    stat_dims = ("replicate",) + dims + cap_dims
    ds = xr.Dataset(
        {
            "successes": (cell_dims, out["successes"]),
            "trials": ((CONTEXT, TOM), n),
            "p_expected": (dims + cap_dims + (CONTEXT, TOM), p),
            "SS": (stat_dims + ("source",), out["SS"]),
            "F": (stat_dims + ("source",), out["F"]),
            "p_value": (stat_dims + ("source",), out["p_value"]),
            "eta2": (stat_dims + ("source",), out["eta2"]),
            "partial_eta2": (stat_dims + ("source",), out["partial_eta2"]),
            "share": (stat_dims + ("systematic",), out["share"]),
        },
        coords={
            "replicate": np.arange(replicates),
            **coords,
            "capability": cap_coord,
            CONTEXT: design.context,
            TOM: design.tom,
            "source": list(SOURCES),
            "systematic": list(SYSTEMATIC),
        },
    )
    if cap.ndim > 1:
        ds = ds.assign_coords(capability_value=(dims + cap_dims, np.broadcast_to(
            cap, tuple(len(coords[d]) for d in dims) + cap.shape[-1:])))
    ds["accuracy"] = ds["successes"] / ds["trials"]
    ds.attrs.update(
        tomstats_version=__version__,
        path=path,
        replicates=int(replicates),
        seed=int(seed) if isinstance(seed, int | np.integer) else -1,
        ss_type=int(ss_type),
        equation="logit p = beta0*m - alpha*c*ln(1+c/500) - gamma*t - delta*c*t + eps",
    )
    return ds


def item_trials(questions: int, items: int) -> np.ndarray:
    r"""Questions of each item (story) when ``questions`` are dealt round-robin to ``items``.

    Question ``q`` belongs to item ``q mod items``, so item ``i`` has
    :math:`\lfloor Q/I\rfloor + 1\{i < Q \bmod I\}` questions.
    """
    questions, items = int(questions), int(items)
    if items < 1 or questions < items:
        raise ValueError(f"items_per_cell must be between 1 and questions_per_cell "
                         f"({questions}), got {items}")
    return (questions // items + (np.arange(items) < questions % items)).astype(np.int64)


def item_counts(
    key: jax.Array,
    params: Params,
    context: Any,
    tom: Any,
    capability: Any,
    trials: Any,
    *,
    within_story: bool = False,
) -> jax.Array:
    r"""Successes per LLM and item when items (stories) carry equation (1)'s noise.

    Every cell :math:`(c, t)` has items :math:`i = 1..I` with item effects
    :math:`\varepsilon_{cti}\sim N(0, \sigma^2)`, shared by the item's questions and by every
    LLM :math:`j` (items crossed with LLMs). Given the effect, LLM :math:`j` answers each of
    the item's :math:`n_i` questions correctly with probability
    :math:`\operatorname{expit}\eta_{jcti}`,

    .. math::

        \eta_{jcti} = \beta_0 m_j - \alpha_j c\ln(1 + c/500) - \gamma_j t - \delta_j c t
            + \varepsilon_{cti},\qquad
        k_{jcti}\mid\varepsilon \sim \operatorname{Binomial}(n_i,
            \operatorname{expit}\eta_{jcti}),

    independently. With one question per item this is the paper's model (each answer is
    marginally Bernoulli(:math:`\bar p_{ct}`)), and the cell counts of one LLM are
    Binomial(:math:`n, \bar p`) as in :func:`simulate`; with several questions per item the
    answers of an item are correlated (overdispersed cell counts).

    Parameters
    ----------
    key : PRNG key
    params : Params
        ``alpha``, ``gamma``, ``delta`` of shape ``(L,)`` (per LLM) or scalars; ``sigma`` a
        scalar.
    context, tom : array, shape (C,), (T,)
    capability : array, shape (L,)
    trials : array of int, shape (I,)
        Questions per item (:func:`item_trials`).
    within_story : bool
        Length ladders: story :math:`i` of order :math:`t` is told at every context length
        and keeps its effect there, :math:`\varepsilon_{cti} = \varepsilon_{ti}` (``T × I``
        stories in all). Otherwise (the default) every length has stories of its own
        (``C × T × I`` stories), as a generator that draws a new story per length gives.

    Returns
    -------
    jax.Array
        Successes of shape ``(L, C, T, I)`` (float, whole numbers).
    """
    k_eps, k_y = jax.random.split(key)
    cap = jnp.asarray(capability)
    n_items = jnp.shape(trials)[-1]
    c = jnp.asarray(context)[:, None, None]
    t = jnp.asarray(tom)[None, :, None]
    n_story_lengths = 1 if within_story else c.shape[0]
    eps = jnp.asarray(params.sigma) * jax.random.normal(
        k_eps, (n_story_lengths, t.shape[1], n_items), dtype=cap.dtype)
    per_llm = Params(*(jnp.asarray(getattr(params, f))[..., None, None, None]
                       if jnp.ndim(getattr(params, f)) else getattr(params, f)
                       for f in ("alpha", "gamma", "delta", "sigma")))
    eta = linear_predictor(per_llm, c, t, cap[:, None, None, None], eps)
    p = jax.nn.sigmoid(eta)
    if isinstance(trials, np.ndarray | list | tuple) and 0 < np.max(trials) <= _SMALL_TRIALS:
        # few questions per item (one, in the paper's model): a sum of Bernoulli draws, the
        # same distribution as the binomial sampler at a fraction of its cost
        n_max = int(np.max(trials))
        n = np.asarray(trials)
        u = jax.random.uniform(k_y, (*eta.shape, n_max), dtype=cap.dtype)
        hit = (u < p[..., None]) & jnp.asarray(np.arange(n_max) < n[:, None])
        return jnp.sum(hit, axis=-1).astype(cap.dtype)
    n = jnp.broadcast_to(jnp.asarray(trials, dtype=cap.dtype), eta.shape)
    return jax.random.binomial(k_y, n, p).astype(cap.dtype)


#: Items with at most this many questions are drawn as sums of Bernoulli trials.
_SMALL_TRIALS = 16


def simulate_questions(
    design: Design,
    params: Params,
    *,
    seed: int | jax.Array = 0,
    replicates: int = 1,
    latent: bool = False,
    shared_items: bool = False,
    items_per_cell: int | None = None,
    within_story: bool = False,
) -> pd.DataFrame:
    """One row per simulated question: the long data a GLMM or
    :func:`tomstats.analysis.row_anova.anova` needs.

    Parameters
    ----------
    design, params
        As in :func:`simulate` (scalar parameters).
    seed : int or PRNG key
    replicates : int
        Independent datasets (column ``replicate``).
    latent : bool
        Draw the per-question noise explicitly, :math:`\\varepsilon\\sim N(0,\\sigma^2)` and
        :math:`y\\sim\\text{Bernoulli}(\\operatorname{expit}(\\eta+\\varepsilon))`, and return
        it in column ``eps``. Otherwise draw :math:`y\\sim\\text{Bernoulli}(\\bar p)`, which has
        the same distribution when :math:`\\varepsilon` is independent per question.
    shared_items : bool
        With ``latent=True``: one :math:`\\varepsilon` per item (question slot) shared by
        every capability level, so capability levels act as LLMs answering the same items
        (crossed model × item data).
    items_per_cell : int, optional
        With ``latent=True`` and ``shared_items=True``: stories per cell. Question ``q`` of a
        cell belongs to story ``q mod items_per_cell`` and shares its :math:`\\varepsilon`
        (several questions per story, as in :func:`item_counts`); ``item`` names the story.
    within_story : bool
        With ``latent=True`` and ``shared_items=True``: length ladders, every story told at
        each context length with the same :math:`\\varepsilon` there (as ``within_story`` of
        :func:`item_counts`); ``item`` then names the story, the same at every length.

    Returns
    -------
    pandas.DataFrame
        Columns ``replicate, capability, context_length, tom_order, item, correct``
        (+ ``eps``), with ``item`` a string id unique within a replicate.
    """
    _check_design_params(design, params)
    _check_common(replicates, "exact", 2)
    if shared_items and not latent:
        raise ValueError("shared_items=True needs latent=True (shared noise must be drawn)")
    if within_story and not shared_items:
        raise ValueError("within_story=True needs latent=True and shared_items=True (a story "
                         "told at every length shares its drawn effect)")
    if items_per_cell is not None:
        if not shared_items:
            raise ValueError("items_per_cell needs latent=True and shared_items=True")
        item_trials(int(design.n_per_cell.min()), items_per_cell)  # validates the range
    params.validate()
    for f in ("alpha", "gamma", "delta", "sigma"):
        if np.ndim(getattr(params, f)) != 0:
            raise ValueError(f"simulate_questions needs scalar parameters; {f!r} has shape "
                             f"{np.shape(getattr(params, f))}")
    key = make_key(seed)
    n = np.asarray(design.n_per_cell)
    n_max = int(n.max())
    cap = np.asarray(design.capability)
    K, C, T = cap.size, *design.shape
    c = jnp.asarray(design.context, dtype=jnp.float32)[None, :, None, None]
    t = jnp.asarray(design.tom, dtype=jnp.float32)[None, None, :, None]
    m = jnp.asarray(cap, dtype=jnp.float32)[:, None, None, None]

    p = jnp.asarray(_cell_p(params, design, cap), dtype=jnp.float32)

    def one(k: jax.Array) -> tuple[jax.Array, jax.Array]:
        if latent:
            k_eps, k_u = jax.random.split(k)
            eps_shape = (1, C, T, n_max) if shared_items else (K, C, T, n_max)
            if items_per_cell is not None:
                eps_shape = (1, C, T, int(items_per_cell))
            if within_story:
                eps_shape = (1, 1, *eps_shape[2:])
            eps = jnp.float32(params.sigma) * jax.random.normal(k_eps, eps_shape)
            if items_per_cell is not None:
                eps = eps[..., jnp.arange(n_max) % int(items_per_cell)]
            eta = linear_predictor(params, c, t, m, eps)
            u = jax.random.uniform(k_u, (K, C, T, n_max))
            y = u < jax.nn.sigmoid(eta)
            return y, jnp.broadcast_to(eps, (K, C, T, n_max))
        u = _uniform24(_rbg(k), (K, C, T, n_max))
        return u < _threshold24(p)[..., None], jnp.zeros((K, C, T, n_max), jnp.float32)

    keys = jax.random.split(key, replicates)
    y, eps = jax.device_get(jax.jit(partial(jax.lax.map, one))(keys))
    R = replicates
    idx = np.indices((R, K, C, T, n_max)).reshape(5, -1)
    keep = (idx[4] < n[idx[2], idx[3]])
    idx = idx[:, keep]
    item = np.char.add(
        np.char.add(np.char.add("c", idx[2].astype(str)), np.char.add("t", idx[3].astype(str))),
        np.char.add("q", idx[4].astype(str)),
    )
    if items_per_cell is not None:
        item = np.char.add(
            np.char.add(np.char.add("c", idx[2].astype(str)),
                        np.char.add("t", idx[3].astype(str))),
            np.char.add("s", (idx[4] % int(items_per_cell)).astype(str)))
    if within_story:  # one story per ladder: the same name at every length
        story = idx[4] % int(items_per_cell) if items_per_cell is not None else idx[4]
        item = np.char.add(np.char.add("t", idx[3].astype(str)),
                           np.char.add("s", story.astype(str)))
    elif not shared_items and items_per_cell is None:
        item = np.char.add(np.char.add(item, "m"), idx[1].astype(str))
    df = pd.DataFrame({
        "replicate": idx[0],
        "capability": cap[idx[1]],
        CONTEXT: design.context[idx[2]],
        TOM: design.tom[idx[3]].astype(int),
        "item": item,
        "correct": np.asarray(y).reshape(-1)[keep].astype(np.int8),
    })
    if latent:
        df["eps"] = np.asarray(eps).reshape(-1)[keep]
    return df

