r"""Rank-normalised split R-hat and bulk/tail effective sample sizes, for all variables at once.

The same estimators as ArviZ's ``rhat(method="rank")`` and ``ess(method="bulk"|"tail")``
(Vehtari, Gelman, Simpson, Carpenter & Bürkner, *Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC*), vectorised over the
variables: ArviZ loops over every scalar in Python (about 1.5 ms each), which costs
seconds on a model with thousands of item effects. A test compares every value with
ArviZ's.

With :math:`M` chains of :math:`N` draws split into :math:`2M` half-chains of
:math:`n = \lfloor N/2\rfloor`:

* rank normalisation: :math:`z = \Phi^{-1}\big((r - 3/8)/(S + 1/4)\big)`, :math:`r` the
  average rank of a draw among all :math:`S = 2Mn` split draws;
* split R-hat of :math:`z`: :math:`\hat R = \sqrt{(\hat B/W + n - 1)/n}`, with
  :math:`\hat B = n\operatorname{var}(\bar z_{m})` and :math:`W` the mean within-chain
  variance; the reported R-hat is the larger of the bulk one (of :math:`z`) and the tail
  one (of the rank-normalised :math:`|x - \operatorname{median}(x)|`);
* ESS :math:`= S/\hat\tau`, :math:`\hat\tau = -1 + 2\sum_{t} \hat\rho_t`, the
  autocorrelations :math:`\hat\rho_t = 1 - (W - \bar\gamma_t)/\widehat{\operatorname{var}}^+`
  summed by Geyer's initial monotone sequence; bulk ESS is that of :math:`z`, tail ESS the
  smaller of those of the indicators :math:`x \le q_{0.05}` and :math:`x \le q_{0.95}`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# SciPy is imported inside the two functions that use it: every Laplace fit imports this
# module (through the diagnostics warnings) and never calls them.

__all__ = ["rhat_rank", "ess_bulk", "ess_tail", "convergence", "dataset_convergence"]

#: Scalars processed together (bounds the memory of the FFTs).
_BLOCK = 2048


def _flat(x: np.ndarray, min_chains: int) -> tuple[np.ndarray, tuple[int, ...], np.ndarray]:
    """``(chain, draw, *shape)`` → ``(V, chain, draw)`` floats, the shape, and a mask of the
    scalars ArviZ would skip (non-finite draws, too few chains or draws)."""
    x = np.asarray(x, dtype=float)
    if x.ndim < 2:
        raise ValueError(f"draws must have shape (chain, draw, ...), got {x.shape}")
    shape = x.shape[2:]
    v = np.moveaxis(x.reshape(x.shape[0], x.shape[1], -1), 2, 0)
    bad = ~np.isfinite(v).all(axis=(1, 2))
    if x.shape[0] < min_chains or x.shape[1] < 4:
        bad[:] = True
    return v, shape, bad


def _split(v: np.ndarray) -> np.ndarray:
    """``(V, M, N)`` → ``(V, 2M, N // 2)``: first and last halves as separate chains."""
    half = v.shape[2] // 2
    return np.concatenate([v[:, :, :half], v[:, :, v.shape[2] - half:]], axis=1)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Rank of each entry within its row, ties sharing their average rank (1-based)."""
    order = np.argsort(x, axis=1)
    xs = np.take_along_axis(x, order, axis=1)
    n = x.shape[1]
    pos = np.broadcast_to(np.arange(n), x.shape)
    new = np.ones(x.shape, dtype=bool)
    new[:, 1:] = xs[:, 1:] != xs[:, :-1]
    end = np.ones(x.shape, dtype=bool)
    end[:, :-1] = new[:, 1:]
    first = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(x.shape)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=1)
    return ranks


def _z_scale(v: np.ndarray) -> np.ndarray:
    """Rank-normalise each scalar over all its (split) draws."""
    from scipy.special import ndtri

    n_var, m, n = v.shape
    r = _average_ranks(v.reshape(n_var, m * n))
    return ndtri((r - 0.375) / (m * n + 0.25)).reshape(v.shape)


def _rhat(z: np.ndarray) -> np.ndarray:
    n = z.shape[2]
    between = n * np.var(z.mean(axis=2), axis=1, ddof=1)
    within = np.var(z, axis=2, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(v: np.ndarray) -> np.ndarray:
    """ESS of each scalar of ``(V, M, N)`` draws (Geyer's initial monotone sequence)."""
    from scipy.fft import next_fast_len

    n_var, m, n = v.shape
    size = m * n
    const = (v.max(axis=(1, 2)) - v.min(axis=(1, 2))) < np.finfo(float).resolution
    centred = v - v.mean(axis=2, keepdims=True)
    m_fft = next_fast_len(2 * n)
    f = np.fft.rfft(centred, n=m_fft, axis=2)
    acov = np.fft.irfft(f * np.conjugate(f), n=m_fft, axis=2)[:, :, :n] / n
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(v.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]
    rho[:, 0] = 1.0
    # Pair sums P_k = rho_2k + rho_2k+1; Geyer's sequence adds pairs while they stay positive
    # (pair k is reached only while every earlier pair is positive, k <= k_max) and
    # replaces each by the running minimum of the pairs before it.
    k_max = max((n - 3) // 2, 0)
    pairs = rho[:, 0:2 * k_max + 1:2] + rho[:, 1:2 * k_max + 2:2]
    nonpos = pairs <= 0.0
    k_end = np.where(nonpos.any(axis=1), nonpos.argmax(axis=1), k_max)
    k_end = np.minimum(k_end, k_max)
    mono = np.minimum.accumulate(pairs, axis=1)
    used = np.arange(pairs.shape[1])[None, :] < k_end[:, None]
    last_rho = np.take_along_axis(rho, 2 * k_end[:, None], axis=1)[:, 0]
    last_pair = np.take_along_axis(pairs, k_end[:, None], axis=1)[:, 0]
    last = np.where((last_rho > 0.0) | (last_pair >= 0.0), last_rho, 0.0)
    tau = -1.0 + 2.0 * np.where(used, mono, 0.0).sum(axis=1) + last
    tau = np.maximum(tau, 1.0 / np.log10(size))
    ess = size / tau
    ess[const] = size
    ess[np.isnan(rho).any(axis=1) & ~const] = np.nan
    return ess


def _blocked(fn: Callable[[np.ndarray], tuple[np.ndarray, ...]], x: np.ndarray,
             min_chains: int, n_out: int) -> tuple[np.ndarray, ...]:
    """Apply ``fn`` to blocks of the scalars of ``x``; NaN for the scalars ArviZ skips."""
    v, shape, bad = _flat(x, min_chains)
    outs = tuple(np.full(v.shape[0], np.nan) for _ in range(n_out))
    ok = np.flatnonzero(~bad)
    for s in range(0, ok.size, _BLOCK):
        idx = ok[s:s + _BLOCK]
        for out, res in zip(outs, fn(v[idx]), strict=True):
            out[idx] = res
    return tuple(o.reshape(shape) for o in outs)


def _rhat_from(s: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Rank R-hat from the split draws ``s`` and their rank-normalised values ``z``."""
    bulk = _rhat(z)
    flat = s.reshape(s.shape[0], -1)
    tail = _rhat(_z_scale(np.abs(s - np.median(flat, axis=1)[:, None, None])))
    return np.where(tail > bulk, tail, bulk)  # as Python's max(bulk, tail): a NaN tail is ignored


def _quantiles(v: np.ndarray, probs: tuple[float, ...]) -> list[np.ndarray]:
    """Type-7 quantiles of each scalar's draws, computed as ArviZ does (``mquantiles`` with
    ``alphap = betap = 1``), so that a draw equal to a quantile is classified alike."""
    x = np.sort(v.reshape(v.shape[0], -1), axis=1)
    n = x.shape[1]
    out = []
    for p in probs:
        aleph = n * p + (1.0 - p)
        k = int(np.floor(np.clip(aleph, 1, n - 1)))
        gamma = float(np.clip(aleph - k, 0.0, 1.0))
        out.append((1.0 - gamma) * x[:, k - 1] + gamma * x[:, k])
    return out


def _rhat_block(v: np.ndarray) -> tuple[np.ndarray]:
    s = _split(v)
    return (_rhat_from(s, _z_scale(s)),)


def _bulk_block(v: np.ndarray) -> tuple[np.ndarray]:
    return (_ess(_z_scale(_split(v))),)


def _tail_block(v: np.ndarray) -> tuple[np.ndarray]:
    lo, hi = (_ess(_split((v <= q[:, None, None]).astype(float)))
              for q in _quantiles(v, (0.05, 0.95)))
    return (np.minimum(lo, hi),)


def _all_block(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = _split(v)
    z = _z_scale(s)
    return _rhat_from(s, z), _ess(z), _tail_block(v)[0]


def rhat_rank(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (the larger of bulk and tail) of each scalar.

    Parameters
    ----------
    draws : array, shape (chain, draw, ...)

    Returns
    -------
    array, shape ``draws.shape[2:]``
        NaN where a scalar has non-finite draws, fewer than 2 chains or 4 draws, or is
        constant.
    """
    return _blocked(_rhat_block, draws, 2, 1)[0]


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size (of the rank-normalised split draws) of each scalar.

    Parameters
    ----------
    draws : array, shape (chain, draw, ...)

    Returns
    -------
    array, shape ``draws.shape[2:]``
        NaN where a scalar has non-finite draws or fewer than 4 draws; chains × draws
        where it is constant.
    """
    return _blocked(_bulk_block, draws, 1, 1)[0]


def ess_tail(draws: np.ndarray) -> np.ndarray:
    """Tail effective sample size: the smaller ESS of the 5 % and 95 % quantile indicators.

    Parameters
    ----------
    draws : array, shape (chain, draw, ...)

    Returns
    -------
    array, shape ``draws.shape[2:]``
    """
    return _blocked(_tail_block, draws, 1, 1)[0]


def convergence(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R-hat, bulk ESS and tail ESS of each scalar, sharing one rank normalisation.

    Parameters
    ----------
    draws : array, shape (chain, draw, ...)

    Returns
    -------
    rhat, ess_bulk, ess_tail : arrays of shape ``draws.shape[2:]``
        As :func:`rhat_rank`, :func:`ess_bulk` and :func:`ess_tail`.
    """
    x = np.asarray(draws, dtype=float)
    if x.ndim >= 2 and x.shape[0] < 2:  # one chain: no R-hat
        return rhat_rank(x), ess_bulk(x), ess_tail(x)
    return _blocked(_all_block, x, 2, 3)  # type: ignore[return-value]


STATS = ("rhat", "ess_bulk", "ess_tail")


def dataset_convergence(ds: object, stats: tuple[str, ...] = STATS) -> dict[str, object]:
    """R-hat, bulk and tail ESS (:func:`convergence`) of every variable of an
    ``xarray.Dataset`` with ``chain`` and ``draw`` dimensions.

    Returns
    -------
    dict
        For each name in ``stats`` (of ``"rhat"``, ``"ess_bulk"``, ``"ess_tail"``) an
        ``xarray.Dataset`` shaped as ArviZ's ``rhat`` / ``ess`` return it (the sample
        dimensions dropped, the other coordinates kept).
    """
    import xarray as xr

    unknown = [s for s in stats if s not in STATS]
    if unknown:
        raise ValueError(f"stats must be among {list(STATS)}, got {unknown}")
    out: dict[str, dict[str, xr.DataArray]] = {s: {} for s in STATS}
    for name, da in ds.data_vars.items():  # type: ignore[attr-defined]
        da = da.transpose("chain", "draw", ...)
        dims = da.dims[2:]
        coords = {d: da.coords[d] for d in dims if d in da.coords}
        for stat, v in zip(STATS, convergence(da.to_numpy()), strict=True):
            out[stat][name] = xr.DataArray(v, dims=dims, coords=coords)
    return {s: xr.Dataset(out[s]) for s in stats}
