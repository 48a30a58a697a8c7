"""The simulation paper: equation (1) simulated over a design, analysed and drawn.

- :mod:`tomstats.simulation.paper` — default parameters fitted to the paper's printed numbers;
- :mod:`tomstats.simulation.count_anova` — two-way ANOVA of cell counts, vectorised in JAX;
- :mod:`tomstats.simulation.simulator` — the JAX simulator (exact counts, per-question draws);
- :mod:`tomstats.simulation.sensitivity_grid` — the γ × α sensitivity grid;
- :mod:`tomstats.simulation.study` — simulation TOML files (``StudyConfig``, ``PowerSpec``);
- :mod:`tomstats.simulation.posterior_sweep` — the study once per posterior draw of a fit;
- :mod:`tomstats.simulation.figures` — the paper's figures and the output folders' readers;
- :mod:`tomstats.simulation.reproduce` — the paper in one call, ``tomstats reproduce`` and
  ``tomstats simulate``.

The modules are imported on their own (this package's face imports none of them).
"""
