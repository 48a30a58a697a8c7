"""Default parameters of equation (1), fitted to the numbers the simulation paper prints.

The paper gives :math:`\\beta_0 = \\ln(0.85/0.15)` but not :math:`\\alpha, \\gamma, \\delta,
\\sigma`. It does print, for the reference model (m = 1), four cell accuracies, two context
marginals and three ToM marginals (:data:`PAPER_TARGETS`), and Table 1 (the variance
decomposition averaged over the five capability levels, :data:`PAPER_TABLE1`).
:func:`fit_paper_parameters` finds the parameters whose *expected* cell accuracies
(Gauss–Hermite, :func:`tomstats.model.cell_probabilities`) match the printed accuracies in
least squares; :data:`PAPER_PARAMS` holds its result, and a test re-runs the fit and checks
that the stored values are its output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from scipy.optimize import least_squares

from tomstats.design import Design, paper_design
from tomstats.model import Params, cell_probabilities

__all__ = [
    "PAPER_TARGETS",
    "PAPER_TABLE1",
    "PAPER_BANDS",
    "PAPER_PARAMS",
    "PaperFit",
    "fit_paper_parameters",
    "paper_statistics",
]

#: Accuracies printed in the paper for the reference model m = 1 (Sections 3.2 and 3.3).
#: Keys: ``cell_<context>_<order>``, ``context_<context>`` (mean over orders),
#: ``tom_<order>`` (mean over context lengths).
PAPER_TARGETS: dict[str, float] = {
    "cell_200_0": 0.836,
    "cell_5000_0": 0.696,
    "cell_200_2": 0.342,
    "cell_5000_2": 0.028,
    "context_200": 0.595,
    "context_5000": 0.309,
    "tom_0": 0.796,
    "tom_1": 0.488,
    "tom_2": 0.219,
}

#: Table 1 of the paper: % of total variance (mean over five capability levels), its sd,
#: η², partial η² and F.
PAPER_TABLE1: dict[str, dict[str, float]] = {
    "tom_order": {"pct_total": 22.4, "sd_pct": 0.6, "eta2": 0.224, "partial_eta2": 0.236,
                  "F": 1155.0},
    "context_length": {"pct_total": 4.1, "sd_pct": 0.5, "eta2": 0.041, "partial_eta2": 0.054,
                       "F": 106.0},
    "interaction": {"pct_total": 0.5, "sd_pct": 0.2, "eta2": 0.005, "partial_eta2": 0.008,
                    "F": 7.5},
    "residual": {"pct_total": 73.0, "sd_pct": float("nan"), "eta2": float("nan"),
                 "partial_eta2": float("nan"), "F": float("nan")},
}

#: The bands the paper states (value ± band, in % of total variance) and the ToM-dominant
#: count of the 7×7 sensitivity grid (39 of 49 ± 2).
PAPER_BANDS: dict[str, tuple[float, float]] = {
    "tom_order": (22.4, 0.6),
    "context_length": (4.1, 0.5),
    "interaction": (0.5, 0.2),
    "n_dominant": (39.0, 2.0),
}


@dataclass(frozen=True)
class PaperFit:
    """Result of :func:`fit_paper_parameters`.

    Attributes
    ----------
    params : Params
        Fitted :math:`\\alpha, \\gamma, \\delta, \\sigma`.
    predicted, target, residuals : dict
        Model-implied values, the paper's values and their differences, by target name.
    cost : float
        Half the sum of squared residuals.
    """

    params: Params
    predicted: dict[str, float]
    target: dict[str, float]
    residuals: dict[str, float]
    cost: float

    def __repr__(self) -> str:
        """One line: the fitted parameters and the cost; ``table()`` gives every number."""
        from tomstats._printable import summary_line

        p = self.params
        return summary_line(self, f"alpha {p.alpha:.4g}, gamma {p.gamma:.4g}, delta "
                            f"{p.delta:.4g}, sigma {p.sigma:.4g}",
                            f"{len(self.target)} targets, cost {self.cost:.4g}",
                            "table() for every number", full=False)

    def table(self) -> Any:
        """The fit as a DataFrame (target, predicted, residual), one row per number."""
        import pandas as pd

        return pd.DataFrame(
            {"target": self.target, "predicted": self.predicted, "residual": self.residuals}
        )


def paper_statistics(params: Params, design: Design | None = None,
                     capability: float = 1.0) -> dict[str, float]:
    """The paper's printed statistics implied by ``params`` (expected values, no sampling).

    Cell accuracies are :math:`\\bar p_{ct}`; marginals are unweighted means of cells (the
    design is balanced).
    """
    design = design or paper_design()
    c = np.asarray(design.context, dtype=np.float32)
    t = np.asarray(design.tom, dtype=np.float32)
    p = np.asarray(cell_probabilities(params, c[:, None], t[None, :], capability),
                   dtype=np.float64)
    ci = {float(v): i for i, v in enumerate(design.context)}
    ti = {float(v): i for i, v in enumerate(design.tom)}
    out: dict[str, float] = {}
    for name in PAPER_TARGETS:
        kind, *rest = name.split("_")
        if kind == "cell":
            out[name] = float(p[ci[float(rest[0])], ti[float(rest[1])]])
        elif kind == "context":
            out[name] = float(p[ci[float(rest[0])]].mean())
        else:
            out[name] = float(p[:, ti[float(rest[0])]].mean())
    return out


# Parameters are fitted on a scale where each is of order one.
_SCALE = np.array([1e-4, 1.0, 1e-4, 1.0])


def fit_paper_parameters(
    targets: dict[str, float] | None = None,
    start: tuple[float, float, float, float] = (1e-4, 1.0, 1e-4, 0.5),
) -> PaperFit:
    """Least-squares fit of :math:`(\\alpha, \\gamma, \\delta, \\sigma)` to the paper's numbers.

    .. math::

        \\hat\\theta = \\arg\\min_\\theta \\sum_k \\big(s_k(\\theta) - s_k^{\\text{paper}}\\big)^2

    where :math:`s_k` are the expected accuracies of :func:`paper_statistics` (m = 1,
    500 questions a cell) and :math:`s_k^{\\text{paper}}` are :data:`PAPER_TARGETS`. Bounded
    trust-region reflective solver (SciPy), all parameters ≥ 0, deterministic.

    Returns
    -------
    PaperFit
    """
    targets = dict(PAPER_TARGETS if targets is None else targets)
    unknown = sorted(set(targets) - set(PAPER_TARGETS))
    if unknown:
        raise ValueError(f"targets: unknown names {unknown} (known: {list(PAPER_TARGETS)})")
    names = list(targets)
    y = np.array([targets[k] for k in names])
    if not np.all(np.isfinite(y)) or np.any((y <= 0) | (y >= 1)):
        raise ValueError(f"targets must be accuracies in (0, 1), got {targets}")
    design = paper_design()

    def residuals(x: np.ndarray) -> np.ndarray:
        a, g, d, s = x * _SCALE
        stats = paper_statistics(Params(a, g, d, s), design)
        return np.array([stats[k] for k in names]) - y

    with jax.default_device(jax.devices("cpu")[0]):
        res = least_squares(
            residuals,
            np.asarray(start) / _SCALE,
            bounds=(np.zeros(4), np.array([50.0, 10.0, 50.0, 5.0])),
            diff_step=1e-3,
            x_scale=1.0,
            xtol=1e-10,
            ftol=1e-12,
            gtol=1e-12,
        )
    a, g, d, s = (float(v) for v in res.x * _SCALE)
    params = Params(a, g, d, s)
    pred = paper_statistics(params, design)
    return PaperFit(
        params=params,
        predicted={k: pred[k] for k in names},
        target={k: targets[k] for k in names},
        residuals={k: pred[k] - targets[k] for k in names},
        cost=float(res.cost),
    )


#: Defaults of the package: the output of ``fit_paper_parameters()`` rounded to 4
#: significant digits (``tests/simulation/test_paper.py`` re-runs the fit and compares).
PAPER_PARAMS = Params(alpha=7.021e-05, gamma=1.175, delta=2.324e-04, sigma=0.6107)
