"""JAX's persistent compilation cache for the samplers and the Laplace fit, on by default.

Compiling NumPyro's NUTS for a model takes seconds to tens of seconds on a CPU, often longer
than the sampling itself for the small GLMMs of an evaluation log. JAX can keep every
compiled program on disk and load it when the same program is compiled again (same model
structure, data shapes, sampler settings, JAX version and device): the second
``tomstats fit`` of a log of the same shape skips XLA compilation, as PyMC's compiled C
modules (its ``compiledir``) spare its second fit.

:func:`enable_compilation_cache` is called by :func:`tomstats.glmm.fit` for the NumPyro
samplers and the Laplace backend. The Laplace fit also keeps its traced program there
(``tomstats-laplace/``, exported StableHLO; :func:`tomstats.glmm.laplace._fit_stored`), so a
new process skips tracing as well as compiling. Its directory, in order:

1. the one JAX already uses (``jax_compilation_cache_dir`` set by you, or the
   ``JAX_COMPILATION_CACHE_DIR`` environment variable): left as it is, thresholds included;
2. ``$TOMSTATS_JAX_CACHE`` — a directory; ``0``, ``off``, ``false`` or ``no`` switch the
   cache off;
3. ``$XDG_CACHE_HOME/tomstats/jax`` (default ``~/.cache/tomstats/jax``).

Cached programs are a few hundred kB each; deleting the directory is always safe.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["enable_compilation_cache", "default_cache_dir"]

_OFF = {"0", "off", "false", "no", "none"}


def default_cache_dir() -> Path | None:
    """The directory :func:`enable_compilation_cache` uses when JAX has none (``None``: the
    cache is switched off by ``TOMSTATS_JAX_CACHE``)."""
    env = os.environ.get("TOMSTATS_JAX_CACHE")
    if env is not None:
        return None if env.strip().lower() in _OFF or not env.strip() else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tomstats" / "jax"


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache unless it is on already or switched off.

    Every compiled program is cached (``jax_persistent_cache_min_compile_time_secs = 0``):
    NumPyro's sampler is one large program plus about a hundred small ones (initialisation,
    key splitting), each of which costs 30–70 ms to compile on a CPU.

    Returns
    -------
    pathlib.Path or None
        The cache directory in use, or ``None`` when the cache is off or the directory
        cannot be created (then everything still works, only without the cache).
    """
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = default_cache_dir()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
