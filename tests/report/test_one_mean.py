"""One posterior mean per parameter on a fit report: the dominance map marks the means over
every draw (those of the parameter table), not the means of the sweep's thinned draws."""

from __future__ import annotations

import pytest
from _fits import failed_fit

from tomstats.glmm import load_fit
from tomstats.report import posterior_sweep
from tomstats.report.sections import FitContext
from tomstats.report.sections.parameters import parameter_table
from tomstats.simulation import figures


def test_map_marks_the_table_means(monkeypatch: pytest.MonkeyPatch) -> None:
    idata = load_fit(failed_fit())
    seen = {}
    real = figures.fig_dominance_posterior

    def spy(dominance, fitted=None):
        seen["fitted"] = fitted
        return real(dominance, fitted)

    # the report imports the figure where it draws it
    monkeypatch.setattr(figures, "fig_dominance_posterior", spy)
    posterior_sweep.fit_sweep_blocks(idata, draws=3, replicates=2, sensitivity_replicates=2)
    table = parameter_table(FitContext(idata)).set_index("name in fit")["mean"]
    assert seen["fitted"] == pytest.approx((table["gamma"], table["alpha"]), rel=1e-12)
    thinned = idata.posterior["gamma"].to_numpy().ravel()[[0, 29, 59]].mean()
    assert seen["fitted"][0] != pytest.approx(thinned, rel=1e-6)  # not the 3 draws' mean
