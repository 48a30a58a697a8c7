r"""lme4's :math:`\theta`: the elements of a random-effects term's relative covariance factor
:math:`T` (d × d, lower triangular for a correlated term, diagonal for ``||``), in lme4's
order (column-major lower triangle), and the static shape of a term (:class:`TermShape`).
The one definition that the fit (:mod:`lme_fit`), its driver (:mod:`lme`) and its result
(:mod:`lme_result`) share (NumPy only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def n_theta(d: int, correlated: bool) -> int:
    """Number of :math:`\\theta` elements: :math:`d(d+1)/2` (correlated) or :math:`d`."""
    return d * (d + 1) // 2 if correlated else d


def theta_index(d: int, correlated: bool) -> tuple[tuple[int, int], ...]:
    """(row, column) of :math:`T` of each :math:`\\theta` element, lme4's order."""
    if not correlated:
        return tuple((i, i) for i in range(d))
    return tuple((i, j) for j in range(d) for i in range(j, d))


def theta_onehot(d: int, correlated: bool) -> np.ndarray:
    """Array ``E`` of shape (n_theta, d, d) with :math:`T = \\sum_k \\theta_k E_k`."""
    idx = theta_index(d, correlated)
    E = np.zeros((len(idx), d, d))
    for k, (i, j) in enumerate(idx):
        E[k, i, j] = 1.0
    return E


@dataclass(frozen=True)
class TermShape:
    """Static shape of one random-effects term.

    Attributes
    ----------
    d : int
        Effects per level (columns of the term's :math:`Z_k`).
    q : int
        Levels of the grouping factor.
    correlated : bool
        Lower-triangular :math:`T_k` (``|``) or diagonal (``||``).
    """

    d: int
    q: int
    correlated: bool

    @property
    def n_theta(self) -> int:
        """Number of :math:`\\theta` elements: :math:`d(d+1)/2` or :math:`d`."""
        return n_theta(self.d, self.correlated)

    def theta_index(self) -> tuple[tuple[int, int], ...]:
        """(row, column) of :math:`T_k` of each :math:`\\theta` element, lme4's order
        (column-major lower triangle)."""
        return theta_index(self.d, self.correlated)


def theta_start(shapes: tuple[TermShape, ...]) -> np.ndarray:
    """lme4's start: 1 on the diagonal of every :math:`T_k`, 0 elsewhere."""
    out = [1.0 if i == j else 0.0 for s in shapes for i, j in s.theta_index()]
    return np.asarray(out, dtype=float)
