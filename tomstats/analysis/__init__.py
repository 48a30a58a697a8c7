"""The classical analysis of a real evaluation log.

- :mod:`tomstats.analysis.table` — the one reader of evaluation logs and tables, ``--map``
  and ``--query``;
- :mod:`tomstats.analysis.intervals` — intervals of a binomial proportion (Wilson);
- :mod:`tomstats.analysis.summary` — accuracy by cell with the error taxonomy;
- :mod:`tomstats.analysis.paired` — paired scores: a story's question right only when its
  true- and false-belief versions both are;
- :mod:`tomstats.analysis.ladders` — length ladders (a story told at every length): the story
  as the unit of the ANOVA, the within-story length effect, the ToM effect adjusted for length;
- :mod:`tomstats.analysis.row_anova` — n-way, repeated-measures and mixed ANOVA of rows;
- :mod:`tomstats.analysis.log_anova` — the paper's ANOVA table for a log;
- :mod:`tomstats.analysis.marginal` — estimated marginal means and contrasts (R's emmeans):
  the linear-algebra core that the ANOVA's and the GLMM's reference grids share;
- :mod:`tomstats.analysis.contrasts` — the reference grid of a log's ANOVA;
- :mod:`tomstats.analysis.cli` — ``tomstats summarize`` and ``tomstats anova``.

Nothing here imports JAX; the modules are imported on their own (this package's face imports
none of them).
"""
