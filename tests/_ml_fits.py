"""Maximum-likelihood fits made from their fields, for tests of what reads, prints or
compares them (no fit is run)."""

from __future__ import annotations

from typing import Any

import numpy as np


def old_intercepts_dict(*, groups: tuple[str, ...], sd: Any,
                        levels: tuple[tuple[str, ...], ...], ranef: Any, **fields: Any
                        ) -> dict[str, Any]:
    """The JSON of a random-intercept fit in the format of earlier versions
    (``tomstats-laplace-fit``): ``groups``, ``sd``, ``levels``, ``ranef`` and the fields
    both formats share."""
    from tomstats.glmm.lme_result import _floats

    d = {"format": "tomstats-laplace-fit", "format_version": 1, "backend": "laplace",
         "family": "bernoulli", "converged": True, "iterations": 3, "aic": 0.0, "bic": 0.0,
         "se_method": "hessian", **fields, "groups": list(groups), "sd": np.asarray(sd, float),
         "n_levels": [len(lv) for lv in levels], "levels": [list(lv) for lv in levels],
         "ranef": np.asarray(ranef, float)}
    return {k: _floats(v) if isinstance(v, np.ndarray) else
            list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def intercepts_fit(**fields: Any) -> Any:
    """A random-intercept :class:`~tomstats.glmm.lme_result.LaplaceFit` from the fields of
    :func:`old_intercepts_dict`, read as such a file is read."""
    from tomstats.glmm.lme_result import LaplaceFit

    return LaplaceFit.from_dict(old_intercepts_dict(**fields))
