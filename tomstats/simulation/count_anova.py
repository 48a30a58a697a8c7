r"""Two-way ANOVA of a binary outcome from cell counts, vectorised in JAX (for the simulator).

:func:`anova_from_counts` works on per-cell counts of a binary outcome of a two-way design,
vectorised over any number of leading batch dimensions (replicates, capability levels, grid
points); :func:`anova_from_stats` on per-cell sums and within-cell sums of squares of any
outcome. The ANOVA of rows (n-way between, repeated measures, mixed) is
:func:`tomstats.analysis.row_anova.anova`; both return the same columns
(:data:`tomstats.analysis.row_anova.COLUMNS`).

The data are reduced to per-cell sufficient statistics — cell size :math:`n_{ij}`, cell sum
:math:`s_{ij} = \sum y` and within-cell sum of squares :math:`W_{ij} = \sum (y - \bar y_{ij})^2`
(for a binary outcome with :math:`k_{ij}` successes, :math:`s_{ij} = k_{ij}` and
:math:`W_{ij} = k_{ij} - k_{ij}^2 / n_{ij}`). Every model of the two-way family (``A``, ``B``,
``A + B``, ``A * B``) is constant within cells, so its residual sum of squares is
:math:`SS_\text{res} + RSS_\text{cells}(\text{model})`, where
:math:`SS_\text{res} = \sum_{ij} W_{ij}` and :math:`RSS_\text{cells}` is the weighted (weights
:math:`n_{ij}`) least-squares residual of the cell means :math:`m_{ij} = s_{ij}/n_{ij}` on the
model's design. The sums of squares follow (:math:`A` = first factor, :math:`B` = second):

- type I (sequential, in the order given): :math:`SS_A = RSS(1) - RSS(A)`,
  :math:`SS_B = RSS(A) - RSS(A+B)`, :math:`SS_{AB} = RSS(A+B) - RSS(A*B)`;
- type II (each main effect adjusted for the other, not for the interaction):
  :math:`SS_A = RSS(B) - RSS(A+B)`, :math:`SS_B = RSS(A) - RSS(A+B)`,
  :math:`SS_{AB} = RSS(A+B) - RSS(A*B)`;
- type III (each term adjusted for all others, sum-to-zero coding, as statsmodels
  ``anova_lm(ols("y ~ C(A, Sum) * C(B, Sum)"), typ=3)``): the main effects test equality of the
  unweighted marginal means :math:`\bar u_i = \frac1B \sum_j m_{ij}`, which gives the weighted
  squares of means :math:`SS_A = \sum_i w_i (\bar u_i - \bar u_w)^2` with
  :math:`w_i = B^2 / \sum_j n_{ij}^{-1}` and :math:`\bar u_w = \sum_i w_i \bar u_i / \sum_i w_i`;
  the interaction is the same as in types I and II.

In a balanced design (:math:`n_{ij} = n`) all three types coincide with the classic closed
forms :math:`SS_A = nB\sum_i(\bar m_{i\cdot} - \bar m)^2`,
:math:`SS_B = nA\sum_j(\bar m_{\cdot j} - \bar m)^2`,
:math:`SS_{AB} = n\sum_{ij}(m_{ij} - \bar m_{i\cdot} - \bar m_{\cdot j} + \bar m)^2`.

Degrees of freedom: :math:`A-1`, :math:`B-1`, :math:`(A-1)(B-1)` and :math:`N - AB`;
:math:`MS = SS/DF`, :math:`F_X = MS_X / MS_\text{res}`,
:math:`p = P(F_{DF_X, DF_\text{res}} > F_X)`.
Effect sizes: :math:`\eta^2_X = SS_X / SS_\text{total}` with
:math:`SS_\text{total} = \sum (y - \bar y)^2` (in unbalanced type II/III designs the SS do not
add up to :math:`SS_\text{total}`; η² is still :math:`SS_X / SS_\text{total}`, as in pingouin) and
:math:`\eta^2_{p,X} = SS_X / (SS_X + SS_\text{res})`. The ``Residual`` row carries
:math:`\eta^2 = SS_\text{res}/SS_\text{total}` (the paper's "residual share of total variance")
and NaN for F, p and partial η².
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from tomstats.analysis.row_anova import COLUMNS, SS_TYPES

__all__ = [
    "SOURCES",
    "AnovaArrays",
    "anova_from_counts",
    "anova_from_stats",
    "counts_table_to_frame",
    "systematic_share",
]

#: Order of the sources along the last axis of every :class:`AnovaArrays` field.
SOURCES: tuple[str, str, str, str] = ("A", "B", "A:B", "Residual")


# ---------------------------------------------------------------------------------------------
# result container
# ---------------------------------------------------------------------------------------------


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["SS", "DF", "MS", "F", "p", "eta2", "partial_eta2"],
    meta_fields=[],
)
@dataclasses.dataclass(frozen=True)
class AnovaArrays:
    """ANOVA tables as arrays; a JAX pytree (passes through ``jit``/``vmap``).

    Every field has shape ``(..., 4)``; the last axis runs over :data:`SOURCES`
    ``("A", "B", "A:B", "Residual")`` = first factor, second factor, interaction, residual.

    Attributes
    ----------
    SS, DF, MS, F, p, eta2, partial_eta2
        Sums of squares, degrees of freedom, mean squares :math:`SS/DF`, F ratios
        :math:`MS_X/MS_\\text{res}`, p-values, :math:`\\eta^2 = SS_X/SS_\\text{total}` and
        :math:`\\eta^2_p = SS_X/(SS_X+SS_\\text{res})`. The residual entry has NaN F, p and
        partial η², and :math:`\\eta^2 = SS_\\text{res}/SS_\\text{total}`.
    """

    SS: Any
    DF: Any
    MS: Any
    F: Any
    p: Any
    eta2: Any
    partial_eta2: Any

    @property
    def systematic_share(self) -> Any:
        """Share of systematic variance per effect; see :func:`systematic_share`."""
        return systematic_share(self)


def systematic_share(arrs: AnovaArrays) -> Any:
    r"""The paper's share of systematic (between-cell) variance of A, B and A:B.

    .. math:: \text{share}_X = \frac{SS_X}{SS_A + SS_B + SS_{AB}}, \quad X \in \{A, B, A{:}B\}

    In a balanced design the denominator is the between-cells sum of squares
    :math:`\sum_{ij} n_{ij}(m_{ij} - \bar y)^2`. In an unbalanced design that is no longer true
    for type II/III sums of squares; the denominator is still :math:`SS_A + SS_B + SS_{AB}` of
    the requested type, so the three shares always add up to 1 (for type I the sum equals the
    between-cells SS exactly).

    Parameters
    ----------
    arrs
        Result of :func:`anova_from_counts` (fields of shape ``(..., 4)``).

    Returns
    -------
    array of shape ``(..., 3)``
        Shares in the order ``("A", "B", "A:B")``; NaN where all three SS are 0.
    """
    if not isinstance(arrs, AnovaArrays):
        raise TypeError(f"arrs must be the AnovaArrays of tomstats.anova_from_counts, got "
                        f"{type(arrs).__name__}")
    ss = arrs.SS[..., :3]
    xp = jnp if isinstance(ss, jax.Array) else np
    return ss / xp.sum(ss, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# shared core: sums of squares from cell statistics (xp = numpy or jax.numpy)
# ---------------------------------------------------------------------------------------------


def _quad_inverse(c: Any, q: Any, xp: ModuleType) -> Any:
    """:math:`q^T C^{-1} q` for a batch of small SPD matrices ``c`` (..., k, k), ``q`` (..., k).

    Unrolled LDLᵀ elimination over the static size ``k``: only elementwise operations on the
    batch, which is far faster than batched LAPACK calls for k of 1–4 and works in numpy and
    jax alike. ``C`` here is a Schur complement of a positive-definite matrix, so no pivoting
    is needed.
    """
    k = q.shape[-1]
    a = [[c[..., i, j] for j in range(k)] for i in range(k)]
    z = [q[..., i] for i in range(k)]
    total = xp.zeros_like(z[0]) if k else xp.zeros(q.shape[:-1], q.dtype)
    for p in range(k):
        piv = a[p][p]
        total = total + z[p] * z[p] / piv
        for i in range(p + 1, k):
            f = a[i][p] / piv
            z[i] = z[i] - f * z[p]
            for j in range(p + 1, k):
                a[i][j] = a[i][j] - f * a[p][j]
    return total


def _adjusted_col_ss(sc: Any, n: Any, xp: ModuleType) -> Any:
    r"""SS of the column factor adjusted for the row factor, :math:`RSS(R) - RSS(R + C)`.

    ``sc`` are centred cell sums :math:`s_{ij} - n_{ij}\bar y` and ``n`` cell sizes, shape
    (..., R, C). Eliminating the row effects from the weighted normal equations of the additive
    model leaves the reduced system :math:`M b = q` with
    :math:`M = \operatorname{diag}(n_{\cdot j}) - \sum_i n_{ij} n_{ij'} / n_{i\cdot}` and
    :math:`q_j = s_{\cdot j} - \sum_i n_{ij} s_{i\cdot}/n_{i\cdot}`; the adjusted SS is
    :math:`q^T M^{-} q`, computed with the last level's effect fixed at 0.
    """
    n_row = xp.sum(n, axis=-1)  # (..., R)
    s_row = xp.sum(sc, axis=-1)
    n_col = xp.sum(n, axis=-2)  # (..., C)
    s_col = xp.sum(sc, axis=-2)
    nr = n / n_row[..., :, None]
    m = -xp.einsum("...ij,...ik->...jk", nr, n)
    c = n.shape[-1]
    m = m + n_col[..., :, None] * xp.eye(c, dtype=n.dtype)
    q = s_col - xp.einsum("...ij,...i->...j", nr, s_row)
    return _quad_inverse(m[..., : c - 1, : c - 1], q[..., : c - 1], xp)


def _sums_of_squares(
    s: Any, n: Any, within: Any, ss_type: int, balanced: bool, xp: ModuleType
) -> tuple[Any, Any, Any, Any, Any]:
    """Return ``(SS_A, SS_B, SS_AB, SS_res, SS_total)`` from cell statistics (..., A, B)."""
    n_a, n_b = s.shape[-2], s.shape[-1]
    big_n = xp.sum(n, axis=(-2, -1))
    grand = xp.sum(s, axis=(-2, -1)) / big_n
    sc = s - n * grand[..., None, None]  # centred cell sums
    mc = sc / n  # centred cell means
    ss_res = xp.sum(within, axis=(-2, -1))
    ss_cells = xp.sum(sc * mc, axis=(-2, -1))
    ss_total = ss_cells + ss_res
    if balanced:
        n0 = big_n / (n_a * n_b)
        row = xp.mean(mc, axis=-1)
        col = xp.mean(mc, axis=-2)
        ss_a = n0 * n_b * xp.sum(row * row, axis=-1)
        ss_b = n0 * n_a * xp.sum(col * col, axis=-1)
        inter = mc - row[..., :, None] - col[..., None, :]
        ss_ab = n0 * xp.sum(inter * inter, axis=(-2, -1))
        return ss_a, ss_b, ss_ab, ss_res, ss_total
    n_row = xp.sum(n, axis=-1)
    n_col = xp.sum(n, axis=-2)
    s_row = xp.sum(sc, axis=-1)
    s_col = xp.sum(sc, axis=-2)
    ss_a_one = xp.sum(s_row * s_row / n_row, axis=-1)  # RSS(1) - RSS(A)
    ss_b_one = xp.sum(s_col * s_col / n_col, axis=-1)  # RSS(1) - RSS(B)
    # one reduced solve, over the factor with fewer levels
    if n_b <= n_a:
        ss_b_adj = _adjusted_col_ss(sc, n, xp)
        ss_a_adj = ss_a_one + ss_b_adj - ss_b_one
    else:
        ss_a_adj = _adjusted_col_ss(xp.swapaxes(sc, -1, -2), xp.swapaxes(n, -1, -2), xp)
        ss_b_adj = ss_b_one + ss_a_adj - ss_a_one
    ss_ab = xp.maximum(ss_cells - ss_a_one - ss_b_adj, 0.0)  # RSS(A+B) - RSS(A*B)
    if ss_type == 1:
        return ss_a_one, ss_b_adj, ss_ab, ss_res, ss_total
    if ss_type == 2:
        return ss_a_adj, ss_b_adj, ss_ab, ss_res, ss_total
    inv_n = 1.0 / n
    w_a = n_b * n_b / xp.sum(inv_n, axis=-1)
    w_b = n_a * n_a / xp.sum(inv_n, axis=-2)
    u_a = xp.mean(mc, axis=-1)
    u_b = xp.mean(mc, axis=-2)
    ss_a3 = _weighted_ss(u_a, w_a, xp)
    ss_b3 = _weighted_ss(u_b, w_b, xp)
    return ss_a3, ss_b3, ss_ab, ss_res, ss_total


def _weighted_ss(u: Any, w: Any, xp: ModuleType) -> Any:
    r""":math:`\sum_i w_i (u_i - \bar u_w)^2` over the last axis."""
    ubar = xp.sum(w * u, axis=-1, keepdims=True) / xp.sum(w, axis=-1, keepdims=True)
    d = u - ubar
    return xp.sum(w * d * d, axis=-1)


def _f_sf(f: Any, d1: Any, d2: Any, betainc: Callable[..., Any]) -> Any:
    r"""Survival function of the F distribution: :math:`I_{d_2/(d_2+d_1F)}(d_2/2, d_1/2)`."""
    return betainc(0.5 * d2, 0.5 * d1, d2 / (d2 + d1 * f))


def _table(
    ss_effects: Sequence[Any],
    df_effects: Sequence[Any],
    ss_res: Any,
    df_res: Any,
    ss_total: Any,
    xp: ModuleType,
    betainc: Callable[..., Any] | None,
) -> AnovaArrays:
    """Assemble SS, DF, MS, F, p, η², partial η² with the residual as the last source.

    ``betainc=None`` skips the p-values (NaN): the incomplete beta function costs ~20× more
    than everything else together.
    """
    ss_eff = xp.stack(list(ss_effects), axis=-1)
    df_eff = xp.stack([xp.broadcast_to(d, ss_res.shape) for d in df_effects], axis=-1)
    df_eff = df_eff.astype(ss_eff.dtype)
    df_res = xp.broadcast_to(df_res, ss_res.shape).astype(ss_eff.dtype)
    ms_eff = ss_eff / df_eff
    ms_res = ss_res / df_res
    f_eff = ms_eff / ms_res[..., None]
    nan = xp.full(ss_res.shape + (1,), xp.nan, dtype=ss_eff.dtype)
    if betainc is None:
        p_eff = xp.full(f_eff.shape, xp.nan, dtype=ss_eff.dtype)
    else:
        p_eff = _f_sf(f_eff, df_eff, df_res[..., None], betainc)
    ss = xp.concatenate([ss_eff, ss_res[..., None]], axis=-1)
    return AnovaArrays(
        SS=ss,
        DF=xp.concatenate([df_eff, df_res[..., None]], axis=-1),
        MS=xp.concatenate([ms_eff, ms_res[..., None]], axis=-1),
        F=xp.concatenate([f_eff, nan], axis=-1),
        p=xp.concatenate([p_eff, nan], axis=-1),
        eta2=ss / ss_total[..., None],
        partial_eta2=xp.concatenate([ss_eff / (ss_eff + ss_res[..., None]), nan], axis=-1),
    )


def _two_way(
    s: Any, n: Any, within: Any, ss_type: int, balanced: bool, xp: ModuleType, betainc: Any
) -> AnovaArrays:
    n_a, n_b = s.shape[-2], s.shape[-1]
    ss_a, ss_b, ss_ab, ss_res, ss_total = _sums_of_squares(s, n, within, ss_type, balanced, xp)
    df_res = xp.sum(n, axis=(-2, -1)) - n_a * n_b
    dfs = (float(n_a - 1), float(n_b - 1), float((n_a - 1) * (n_b - 1)))
    return _table((ss_a, ss_b, ss_ab), dfs, ss_res, df_res, ss_total, xp, betainc)


# ---------------------------------------------------------------------------------------------
# JAX: from cell counts of a binary outcome
# ---------------------------------------------------------------------------------------------


@partial(jax.jit, static_argnames=("ss_type", "balanced", "p_values"))
def _counts_core(
    successes: jax.Array, trials: jax.Array, ss_type: int, balanced: bool, p_values: bool
) -> AnovaArrays:
    k, n = jnp.broadcast_arrays(successes, trials)
    within = k - k * k / n
    betainc = jax.scipy.special.betainc if p_values else None
    return _two_way(k, n, within, ss_type, balanced, jnp, betainc)


@partial(jax.jit, static_argnames=("ss_type", "balanced", "p_values"))
def _stats_core(
    sums: jax.Array, trials: jax.Array, within: jax.Array, ss_type: int, balanced: bool,
    p_values: bool,
) -> AnovaArrays:
    s, n, w = jnp.broadcast_arrays(sums, trials, within)
    betainc = jax.scipy.special.betainc if p_values else None
    return _two_way(s, n, w, ss_type, balanced, jnp, betainc)


def anova_from_stats(
    sums: Any,
    trials: Any,
    within: Any,
    ss_type: int = 2,
    *,
    balanced: bool = False,
    p_values: bool = True,
) -> AnovaArrays:
    r"""Two-way ANOVA of any outcome from per-cell sufficient statistics, vectorised in JAX.

    The cell statistics are :math:`n_{ij}` (``trials``), :math:`s_{ij}=\sum y` (``sums``) and
    :math:`W_{ij}=\sum (y-\bar y_{ij})^2` (``within``); the formulas are those of the module
    docstring (:func:`anova_from_counts` is the binary case :math:`s=k`, :math:`W=k-k^2/n`).
    Shapes ``(..., A, B)`` broadcast; no value checks (use it from traced code).
    """
    if ss_type not in SS_TYPES or isinstance(ss_type, bool):
        raise ValueError(f"ss_type must be 1, 2 or 3, got {ss_type!r}")
    dtype = jnp.result_type(sums, trials, within, float)
    return _stats_core(jnp.asarray(sums, dtype), jnp.asarray(trials, dtype),
                       jnp.asarray(within, dtype), ss_type=int(ss_type),
                       balanced=bool(balanced), p_values=bool(p_values))


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def anova_from_counts(
    successes: Any,
    trials: Any,
    ss_type: int = 2,
    *,
    balanced: bool | None = None,
    p_values: bool = True,
    check: bool = True,
) -> AnovaArrays:
    r"""Two-way ANOVA with interaction of a binary outcome from per-cell counts, vectorised.

    Equals :func:`anova` (and statsmodels ``anova_lm``) on the expanded rows — one row per
    trial with outcome 1 for ``successes`` of them and 0 otherwise — for every table in the
    batch. Per cell the sufficient statistics are :math:`n_{ij}` (trials) and :math:`k_{ij}`
    (successes): cell mean :math:`k/n`, within-cell SS :math:`k - k^2/n`; the between-cell SS
    come from weighted least squares of the cell means (weights :math:`n_{ij}`) on the factorial
    design (see the module docstring for the type I/II/III definitions).

    Parameters
    ----------
    successes
        Successes per cell, shape ``(..., A, B)`` with ``A, B >= 2``; leading axes are batch
        axes (replicates, capability levels, grid points, ...).
    trials
        Trials per cell, broadcastable against ``successes`` (e.g. shape ``(A, B)``); all
        cells need at least one trial (a cell with 0 trials yields NaN).
    ss_type
        1 (sequential: A, then B, then A:B), 2 (default) or 3 (sum-to-zero coding).
    balanced
        Use the closed forms of a balanced design (trials constant within each table, where
        all types coincide; no linear solve). ``None`` (default) detects it when ``trials`` is
        concrete and falls back to the general path (always correct) under ``jit``/``vmap``
        tracing. Pass ``True`` from traced code only when trials are known to be constant.
    p_values
        Compute p-values (default). ``False`` leaves ``p`` NaN and is about 15× faster: the
        regularised incomplete beta function dominates the cost, and the simulator's shares,
        η² and F do not need it.
    check
        Validate values when the inputs are concrete: ``0 <= successes <= trials``,
        ``trials >= 1``, more trials than cells, and constant trials if ``balanced=True``.
        Set ``False`` to skip the host round-trip in hot loops.

    Returns
    -------
    AnovaArrays
        Fields of shape ``(..., 4)`` over :data:`SOURCES`; dtype is the floating type of the
        inputs (float64 under ``jax.enable_x64``, float32 otherwise; integers become the
        default float type).

    Raises
    ------
    ValueError
        Bad ``ss_type``, shapes that do not broadcast or have fewer than 2 levels per factor,
        or (when ``check`` and concrete) invalid counts; the message names the argument and
        the offending value.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> out = anova_from_counts(jnp.array([[40, 30], [20, 10]]), 50)
    >>> out.SS.shape
    (4,)
    """
    if ss_type not in SS_TYPES or isinstance(ss_type, bool):
        raise ValueError(f"ss_type must be 1, 2 or 3, got {ss_type!r}")
    shape_k, shape_n = np.shape(successes), np.shape(trials)
    if len(shape_k) < 2:
        raise ValueError(
            f"successes must have shape (..., A, B) with a level axis per factor, got {shape_k}"
        )
    try:
        shape = np.broadcast_shapes(shape_k, shape_n)
    except ValueError:
        raise ValueError(
            f"trials shape {shape_n} does not broadcast against successes shape {shape_k}"
        ) from None
    if shape != shape_k:
        raise ValueError(
            f"trials shape {shape_n} would enlarge successes shape {shape_k} to {shape}; "
            "give successes the full batch shape"
        )
    if shape[-2] < 2 or shape[-1] < 2:
        raise ValueError(f"each factor needs at least 2 levels, got A={shape[-2]}, B={shape[-1]}")
    concrete_n = _is_concrete(trials)
    if check and _is_concrete(successes) and concrete_n:
        _check_counts(np.asarray(successes), np.asarray(trials), shape)
    if balanced is None:
        balanced = concrete_n and _constant_per_table(np.asarray(trials))
    elif balanced and check and concrete_n and not _constant_per_table(np.asarray(trials)):
        raise ValueError("balanced=True but trials are not constant within each table")
    dtype = jnp.result_type(successes, trials, float)
    k = jnp.asarray(successes, dtype=dtype)
    n = jnp.asarray(trials, dtype=dtype)
    return _counts_core(
        k, n, ss_type=int(ss_type), balanced=bool(balanced), p_values=bool(p_values)
    )


def _constant_per_table(trials: np.ndarray) -> bool:
    if trials.ndim < 2:
        return True
    flat = trials.reshape(trials.shape[:-2] + (-1,))
    return bool(np.all(flat == flat[..., :1]))


def _check_counts(k: np.ndarray, n: np.ndarray, shape: tuple[int, ...]) -> None:
    for name, arr in (("successes", k), ("trials", n)):
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name} must be finite; {name}[{idx}] = {arr[idx]}")
    if (n < 1).any():
        idx = tuple(int(i) for i in np.argwhere(n < 1)[0])
        raise ValueError(f"trials must be >= 1 in every cell; trials[{idx}] = {n[idx]}")
    kb, nb = np.broadcast_arrays(k, n)
    bad = (kb < 0) | (kb > nb)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"successes must lie in [0, trials]; successes[{idx}] = {kb[idx]} "
            f"with trials = {nb[idx]}"
        )
    total = nb.reshape(shape[:-2] + (-1,)).sum(axis=-1)
    cells = shape[-2] * shape[-1]
    if (total <= cells).any():
        raise ValueError(
            f"trials must total more than the {cells} cells (no residual degrees of freedom); "
            f"smallest total = {total.min()}"
        )


# ---------------------------------------------------------------------------------------------
# one table as a DataFrame
# ---------------------------------------------------------------------------------------------


def _frame(arrs: AnovaArrays, names: Sequence[str]) -> pd.DataFrame:
    cols = {c: np.asarray(getattr(arrs, c), dtype=float) for c in COLUMNS[1:]}
    return pd.DataFrame({"source": list(names), **cols}, columns=list(COLUMNS))


def counts_table_to_frame(arrs: AnovaArrays, names: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """One table of :func:`anova_from_counts` as the tidy DataFrame that :func:`anova` returns.

    Parameters
    ----------
    arrs
        An :class:`AnovaArrays` without batch axes (fields of shape ``(4,)``); index a batch
        first, e.g. ``jax.tree.map(lambda x: x[r, c], arrs)``.
    names
        Names of the first and second factor; the interaction row is ``"<A>:<B>"``.

    Returns
    -------
    pandas.DataFrame
        Columns ``source, SS, DF, MS, F, p, eta2, partial_eta2``, rows A, B, A:B, Residual.
    """
    shape = np.shape(arrs.SS)
    if shape != (4,):
        raise ValueError(f"arrs must hold one table (fields of shape (4,)), got SS shape {shape}")
    if len(names) != 2:
        raise ValueError(f"names must be two factor names, got {names!r}")
    a, b = (str(x) for x in names)
    return _frame(arrs, [a, b, f"{a}:{b}", "Residual"])
