"""Synthetic length-ladder logs: every story told at every context length, its difficulty
shared by all its tellings and questions (a story random effect), for the within-story tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

LENGTHS = (200, 1000, 5000)
ORDERS = (0, 1, 2)


def ladder_log(n_stories: int = 12, *, lengths=LENGTHS, orders=ORDERS,
               models=("llm-a", "llm-b", "llm-c"), n_questions: int = 2,
               sd_story: float = 1.0, order_design: str = "within", seed: int = 0
               ) -> pd.DataFrame:
    """One row per question: ``model``, ``story_id``, ``item_id``, ``context_words``,
    ``tom_order``, ``correct`` from :math:`\\eta = 1.4 + a_m - 0.8t - 0.3\\ln(c/200) + u_s`,
    :math:`u_s \\sim N(0, \\text{sd\\_story}^2)` shared by the story's every telling,
    :math:`a_m` spread over -0.4..0.4. ``order_design="within"``: every story asked at every
    order; ``"between"``: story ``s`` at order ``orders[s % len(orders)]`` only."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0.0, sd_story, n_stories)
    a = np.linspace(-0.4, 0.4, len(models))
    rows = []
    for s in range(n_stories):
        story_orders = orders if order_design == "within" else (orders[s % len(orders)],)
        for mi, m in enumerate(models):
            for c in lengths:
                for t in story_orders:
                    for q in range(n_questions):
                        eta = 1.4 + a[mi] - 0.8 * t - 0.3 * np.log(c / 200) + u[s]
                        rows.append((m, f"s{s:02d}", f"s{s:02d}-w{c}-o{t}-q{q}", c, t,
                                     int(rng.random() < 1 / (1 + np.exp(-eta)))))
    return pd.DataFrame(rows, columns=["model", "story_id", "item_id", "context_words",
                                       "tom_order", "correct"])
