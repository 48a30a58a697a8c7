"""Planning a study: simulation-based power and assurance (``tomstats power``).

- :mod:`tomstats.planning.analyses` — the planned tests: statistics and decisions;
- :mod:`tomstats.planning.studies` — compiled programs simulating and analysing studies;
- :mod:`tomstats.planning.plan` — the curves of a run, checked and sized before it starts;
- :mod:`tomstats.planning.run` — :func:`~tomstats.planning.run.power`, reachable as
  ``tomstats.power``;
- :mod:`tomstats.planning.result` — :class:`~tomstats.planning.result.PowerResult`, its text
  table and files;
- :mod:`tomstats.planning.story_designs` — between- against within-story designs: the
  questions, LLM calls and stories each needs for a target power;
- :mod:`tomstats.planning.figure` — the power figure;
- :mod:`tomstats.planning.cli` — ``tomstats power``.

The modules are imported on their own (this package's face imports none of them).
"""
