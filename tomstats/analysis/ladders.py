r"""Length ladders: the same story told at every context length, analysed within the story.

The simulation paper recommends "multi-length versions of the same questions to enable
within-question factorial analysis" and ToM scores reported "after regressing out
context-length effects". A log has **ladders** when stories (``story_id``) are observed at two
or more context lengths: then a story's difficulty is the same at every length, and the effect
of length can be read inside each story, free of the differences between stories.

- :func:`story_layout` — how the log's stories cross context length and ToM order;
- :func:`story_unit_factors` and :func:`check_ladders` — the factors of the repeated-measures
  ANOVA with the story as its unit (``tomstats anova --unit story``,
  :func:`tomstats.analysis.log_anova.log_anova`), and the errors when a story is not observed
  in every cell;
- :func:`length_effects` — the within-story length effect per ToM order (``tomstats
  summarize``, the log report);
- :func:`adjusted_tom_effect` — the ToM-order effect adjusted for context length, with an
  interval across stories (the log report).

Only the answered questions enter (runner error records and a missing ``correct`` are left
out). Nothing here imports JAX.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tomstats._validate import show_value
from tomstats.analysis.table import (
    POOLED,
    apply_mapping,
    by_columns,
    outcome,
    read_evaluation,
    require_column,
)

__all__ = ["ADJUSTED_COLUMNS", "LENGTH_EFFECT_COLUMNS", "STORY", "StoryLayout",
           "adjusted_tom_effect", "check_ladders", "format_adjusted", "format_length_effects",
           "length_effects", "story_layout", "story_unit_factors"]

#: The log's story column: questions that share it were asked about one story (at every
#: length of its ladder); ``--map story_id=COLUMN`` names another.
STORY = "story_id"
#: Columns of :func:`length_effects` after the grouping columns.
LENGTH_EFFECT_COLUMNS = ("tom_order", "n_stories", "shortest", "longest", "acc_shortest",
                         "acc_longest", "difference", "ci_low", "ci_high", "p")
#: Columns of :func:`adjusted_tom_effect` after the grouping column.
ADJUSTED_COLUMNS = ("tom_order", "reference", "estimate", "se", "ci_low", "ci_high", "p",
                    "unadjusted", "n", "n_clusters")
_CONTEXT, _ORDER = "context_words", "tom_order"


def _plain(v: Any) -> Any:
    """A NumPy scalar as the Python value (``np.int64(200)`` as ``200``)."""
    return v.item() if isinstance(v, np.generic) else v


def _answered(df: pd.DataFrame) -> pd.DataFrame:
    """The answered questions: ``correct`` present (and checked 0/1), no runner error."""
    y = outcome(df, "correct")
    keep = y.notna().to_numpy().copy()
    if "status" in df.columns:
        keep &= df["status"].astype("string").fillna("ok").ne("error").to_numpy()
    out = df.loc[keep].assign(correct=y[keep].to_numpy()).reset_index(drop=True)
    if len(out) == 0:
        raise ValueError("the log holds no answered questions (every record is an error)")
    return out


def _no_missing(df: pd.DataFrame, cols: Sequence[str]) -> None:
    for c in cols:
        na = df[c].isna().to_numpy()
        if na.any():
            raise ValueError(f"column {c!r} has a missing value in row {int(np.argmax(na))}")


def _read(data: str | os.PathLike[str] | pd.DataFrame, columns: Mapping[str, str] | None,
          need: Sequence[str]) -> pd.DataFrame:
    df = apply_mapping(read_evaluation(data), columns)
    for c in need:
        require_column(df, c, "length ladders", (*need, "correct", "model"))
    _no_missing(df, need)
    return df


# --------------------------------------------------------------------------- layout


@dataclasses.dataclass(frozen=True)
class StoryLayout:
    """How the stories of a log cross context length and ToM order.

    Attributes
    ----------
    story : str
        The story column.
    n_stories : int
        Distinct stories.
    lengths, orders : tuple
        The context lengths and ToM orders of the data, sorted.
    n_ladders : int
        Stories observed at two or more context lengths.
    n_complete : int
        Stories observed at every context length at each of their ToM orders.
    order_design : {"within", "between", "partial"}
        ``"within"``: every story is asked at every ToM order; ``"between"``: each story at
        one order (the simulator's ``within_story`` design); ``"partial"``: neither.
    """

    story: str
    n_stories: int
    lengths: tuple[Any, ...]
    orders: tuple[Any, ...]
    n_ladders: int
    n_complete: int
    order_design: str

    @property
    def has_ladders(self) -> bool:
        """Whether some story is observed at two or more context lengths."""
        return self.n_ladders > 0


def story_layout(data: pd.DataFrame, story: str = STORY) -> StoryLayout:
    """The :class:`StoryLayout` of ``data`` (rows with columns ``story``, ``context_words``
    and ``tom_order``; every row counts, answered or not)."""
    for c in (story, _CONTEXT, _ORDER):
        require_column(data, c, "length ladders", (story, _CONTEXT, _ORDER))
    lengths = tuple(_plain(v) for v in sorted(pd.unique(data[_CONTEXT])))
    orders = tuple(_plain(v) for v in sorted(pd.unique(data[_ORDER])))
    g = data.groupby(story, sort=True)
    n_len = g[_CONTEXT].nunique()
    n_ord = g[_ORDER].nunique()
    cells = data.groupby([story, _ORDER], sort=True)[_CONTEXT].nunique()
    complete = cells.eq(len(lengths)).groupby(level=0).all()
    design = ("within" if n_ord.eq(len(orders)).all() else
              "between" if n_ord.eq(1).all() and len(orders) > 1 else "partial")
    if len(orders) == 1:
        design = "within"
    return StoryLayout(story, int(len(n_len)), lengths, orders, int(n_len.ge(2).sum()),
                       int(complete.sum()), design)


def _no_ladders(data: pd.DataFrame, story: str, where: str) -> str:
    first = data.iloc[0]
    n = data[story].nunique()
    return (f"--unit story: no length ladders in the data{where}: each of the {n} stories "
            f"({story}) is told at one context length (e.g. {story}="
            f"{show_value(first[story])} only at {_CONTEXT}={show_value(first[_CONTEXT])}); a "
            "within-story analysis needs the same story told at several lengths (items that "
            f"share a {story} across lengths). Analyse this log between stories (leave out "
            "--unit story)")


def story_unit_factors(data: pd.DataFrame, story: str = STORY,
                       between: Sequence[str] = (), within: Sequence[str] = ()
                       ) -> tuple[list[str], list[str]]:
    """The ``(between, within)`` factors of the ANOVA with the story as its unit.

    Given factors are kept; without any, context length is within the story and ToM order
    within it when every story is asked at every order (a full ladder), between stories when
    each story is asked at one order. Raises ``ValueError`` when no story is observed at two
    lengths (a between-story log) and when ToM order is neither within nor between stories.
    """
    layout = story_layout(data, story)
    if not layout.has_ladders:
        raise ValueError(_no_ladders(data, story, ""))
    if between or within:
        return list(between), list(within)
    if layout.order_design == "partial":
        per = data.groupby(story, sort=True)[_ORDER].agg(lambda s: sorted(pd.unique(s)))
        short = per[per.map(len) < len(layout.orders)]  # some story lacks an order
        bad = short[short.map(len) >= 2] if (short.map(len) >= 2).any() else short
        name, have = bad.index[0], bad.iloc[0]
        lacking = [o for o in layout.orders if o not in have]
        raise ValueError(
            f"--unit story: {story}={show_value(name)} is asked at {_ORDER} "
            f"{', '.join(map(show_value, have))} but not {', '.join(map(show_value, lacking))}: "
            f"ToM order is neither within every story (each story at every order) nor between "
            f"stories (each story at one order); name the design with --within/--between")
    if layout.order_design == "between":
        return [_ORDER], [_CONTEXT]
    return [], [_CONTEXT, *([_ORDER] if len(layout.orders) > 1 else [])]


def check_ladders(data: pd.DataFrame, within: Sequence[str], story: str = STORY,
                  where: str = "") -> None:
    """Raise ``ValueError`` unless every story of ``data`` is observed in every cell of the
    ``within`` factors (a complete ladder), naming the first story and cell that lack data
    and how many stories are complete; ``where`` ends the place named (``" (in model=a)"``)."""
    if _CONTEXT in within and not data.groupby(story)[_CONTEXT].nunique().ge(2).any():
        raise ValueError(_no_ladders(data, story, where))
    levels = [sorted(pd.unique(data[f])) for f in within]
    cells = list(itertools.product(*levels))
    have = data.groupby(story, sort=True)[list(within)].apply(
        lambda d: set(map(tuple, d.drop_duplicates().itertuples(index=False, name=None))))
    lacking = {s: [c for c in cells if c not in h] for s, h in have.items()}
    bad = [s for s, miss in lacking.items() if miss]
    if not bad:
        return
    s = bad[0]
    cell = ", ".join(f"{f}={show_value(v)}" for f, v in zip(within, lacking[s][0], strict=True))
    more = (f" (and {len(lacking[s]) - 1} more of the {len(cells)} cells)"
            if len(lacking[s]) > 1 else "")
    raise ValueError(f"--unit story: {story}={show_value(s)} is not observed at {cell}{more}"
                     f"{where}; a within-story ANOVA needs every story in every "
                     f"{' × '.join(within)} cell (a complete length ladder); "
                     f"{len(have) - len(bad)} of {len(have)} stories are complete")


# --------------------------------------------------------------------------- length effect


def _t_interval(d: np.ndarray, level: float) -> tuple[float, float, float, float]:
    """Mean, interval and two-sided p of the one-sample t test of ``d`` (NaN below 2)."""
    import scipy.special

    n = d.size
    if n == 0:
        return (np.nan,) * 4
    mean = float(d.mean())
    if n < 2:
        return mean, np.nan, np.nan, np.nan
    se = float(d.std(ddof=1)) / np.sqrt(n)
    q = float(scipy.special.stdtrit(n - 1, 0.5 + level / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / se if se > 0 else (0.0 if mean == 0 else np.inf)
    p = float(2 * scipy.special.stdtr(n - 1, -abs(t)))
    return mean, mean - q * se, mean + q * se, p


def _check_level(level: float) -> None:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")


def length_effects(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    story: str = STORY,
    columns: Mapping[str, str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    r"""The within-story effect of context length per ToM order (and group).

    For ToM order :math:`k` of a group, with :math:`L_-` and :math:`L_+` the shortest and the
    longest context length of the data, the stories :math:`s = 1..S` asked at order :math:`k`
    at both lengths each give

    .. math::

        D_s = \bar y_{s,L_+,k} - \bar y_{s,L_-,k},

    :math:`\bar y_{s,L,k}` the accuracy of story :math:`s` at length :math:`L` and order
    :math:`k` (its answered questions, of every LLM in the group). The table shows
    :math:`\bar D = \frac1S\sum_s D_s` (``difference``; negative: accuracy falls with length)
    with the :math:`t` interval across stories,

    .. math::

        \bar D \pm t_{S-1,\,(1+\text{level})/2}\,\frac{s_D}{\sqrt S},

    and the two-sided :math:`p` of :math:`t = \bar D\sqrt S / s_D` (the paired :math:`t`
    test of the longest against the shortest telling); ``acc_shortest`` and ``acc_longest``
    are the means of :math:`\bar y_{s,L_\mp,k}` over the same stories, so ``difference`` is
    their difference. Every story's difficulty cancels in :math:`D_s`: the contrast is within
    stories. Fewer than two stories leave the interval and :math:`p` NaN.

    Parameters
    ----------
    data : path or pandas.DataFrame
        An evaluation log or table, one row per question, with ``correct``,
        ``context_words``, ``tom_order`` and the ``story`` column.
    by : str or sequence of str, optional
        Grouping columns (default ``"model"`` when the data have it; ``[]`` pools the LLMs).
    story : str, default ``"story_id"``
    columns : mapping, optional
        ``{standard name: your column}`` (``--map``).
    level : float, default 0.95

    Returns
    -------
    pandas.DataFrame
        The grouping columns, then :data:`LENGTH_EFFECT_COLUMNS`; ``attrs``: ``level``,
        ``story``, ``shortest``, ``longest``.

    Raises
    ------
    ValueError
        A missing column, a bad ``level``, and a log without ladders (no story observed at
        two lengths; :func:`story_layout` tells beforehand).
    """
    _check_level(level)
    df = _read(data, columns, (_CONTEXT, _ORDER, story))
    keys = by_columns(df, by)
    _no_missing(df, keys)
    layout = story_layout(df, story)
    if not layout.has_ladders:
        raise ValueError(_no_ladders(df, story, "").replace("--unit story: ", "length effects: ")
                         .split(". Analyse")[0])
    lo, hi = layout.lengths[0], layout.lengths[-1]
    ans = _answered(df)
    cell = ans.groupby([*keys, _ORDER, story, _CONTEXT], sort=True)["correct"].mean()
    ends = cell[cell.index.get_level_values(_CONTEXT).isin([lo, hi])].unstack(_CONTEXT)
    ends = ends.reindex(columns=[lo, hi]).dropna()  # the stories told at both ends
    per = {k if isinstance(k, tuple) else (k,): v
           for k, v in ends.groupby(level=[*keys, _ORDER], sort=True)}
    groups = (list(ans[keys].drop_duplicates().sort_values(keys).itertuples(index=False,
                                                                            name=None))
              if keys else [()])
    rows = []
    for g in groups:
        for k in layout.orders:
            both = per.get((*g, k), ends.iloc[:0])
            d = (both[hi] - both[lo]).to_numpy(dtype=float)
            mean, c_lo, c_hi, p = _t_interval(d, level)
            rows.append({**dict(zip(keys, g, strict=True)), "tom_order": k,
                         "n_stories": int(d.size), "shortest": lo, "longest": hi,
                         "acc_shortest": float(both[lo].mean()) if d.size else np.nan,
                         "acc_longest": float(both[hi].mean()) if d.size else np.nan,
                         "difference": mean, "ci_low": c_lo, "ci_high": c_hi, "p": p})
    out = pd.DataFrame(rows, columns=[*keys, *LENGTH_EFFECT_COLUMNS])
    out.attrs.update(level=float(level), story=story, shortest=lo, longest=hi)
    return out


def _fmt(v: Any, spec: str = "{:.3f}") -> str:
    return "—" if v is None or pd.isna(v) else spec.format(v)


def _interval(lo: Any, hi: Any) -> str:
    return "—" if pd.isna(lo) or pd.isna(hi) else f"[{lo:.3f}, {hi:.3f}]"


def _words(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float, np.number)) else str(v)


def format_length_effects(table: pd.DataFrame) -> str:
    """:func:`length_effects`'s table as text: a heading sentence, then per group and order
    the stories, the accuracies at the shortest and longest length, their difference with
    its interval and :math:`p`."""
    a = table.attrs
    lo, hi = _words(a["shortest"]), _words(a["longest"])
    keys = [c for c in table.columns if c not in LENGTH_EFFECT_COLUMNS]
    show = table[[*keys, "tom_order", "n_stories"]].copy()
    show[f"acc {lo}"] = [_fmt(v) for v in table["acc_shortest"]]
    show[f"acc {hi}"] = [_fmt(v) for v in table["acc_longest"]]
    show["difference"] = [_fmt(v, "{:+.3f}") for v in table["difference"]]
    show[f"{a['level']:.0%} interval"] = [_interval(x, y) for x, y in
                                          zip(table["ci_low"], table["ci_high"], strict=True)]
    show["p"] = [_fmt(v, "{:.3g}") for v in table["p"]]
    head = (f"Within-story length effect: accuracy at {hi} minus at {lo} words, per story "
            f"({a['story']}) told at both, averaged over the stories; {a['level']:.0%} t "
            "intervals across stories")
    return head + "\n" + show.to_string(index=False)


def format_adjusted(table: pd.DataFrame) -> str:
    """:func:`adjusted_tom_effect`'s table as text: a heading sentence with the model and
    the clusters, then per group and order the estimate with its interval, :math:`p` and the
    unadjusted difference."""
    a = table.attrs
    by = [a["by"]] if a.get("by") else []
    show = table[[*by, "tom_order", "reference"]].copy()
    show["adjusted"] = [_fmt(v, "{:+.3f}") for v in table["estimate"]]
    show[f"{a['level']:.0%} interval"] = [_interval(x, y) for x, y in
                                          zip(table["ci_low"], table["ci_high"], strict=True)]
    show["p"] = [_fmt(v, "{:.3g}") for v in table["p"]]
    show["unadjusted"] = [_fmt(v, "{:+.3f}") for v in table["unadjusted"]]
    show["clusters"] = table["n_clusters"]
    unit = a.get("cluster") or "row"
    head = (f"ToM effect adjusted for context length: accuracy at each order minus at the "
            f"lowest, at equal length ({a['formula']}, least squares); {a['level']:.0%} "
            f"intervals with {unit} clusters (CR1, t on clusters - 1 df)")
    return head + "\n" + show.to_string(index=False)


# --------------------------------------------------------------------------- adjusted effect


def _cluster_ols(y_sum: np.ndarray, n: np.ndarray, x: np.ndarray, g: np.ndarray,
                 n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Least squares on rows given as cells (``n`` rows of covariates ``x`` summing to
    ``y_sum``), with the CR1 cluster-robust covariance over the clusters ``g`` of the cells:
    :math:`\frac{G}{G-1}\frac{N-1}{N-K}(X^\top X)^{-1}\big(\sum_g u_g u_g^\top\big)
    (X^\top X)^{-1}`, :math:`u_g = \sum_{i\in g} x_i e_i` (exact from the cells: a cell's
    rows share :math:`x`)."""
    xtx = (x * n[:, None]).T @ x
    beta = np.linalg.solve(xtx, x.T @ y_sum)
    resid = y_sum - n * (x @ beta)  # the sum of the cell's row residuals
    n_g = int(g.max()) + 1
    u = np.zeros((n_g, x.shape[1]))
    np.add.at(u, g, x * resid[:, None])
    bread = np.linalg.inv(xtx)
    k = x.shape[1]
    factor = n_g / (n_g - 1) * (n_rows - 1) / (n_rows - k)
    return beta, factor * bread @ (u.T @ u) @ bread


def _dummies(values: pd.Series, levels: Sequence[Any]) -> np.ndarray:
    """Treatment-coded columns of ``values`` (the first level the reference)."""
    return np.column_stack([(values == v).to_numpy(dtype=float) for v in levels[1:]]) \
        if len(levels) > 1 else np.zeros((len(values), 0))


def _adjusted_one(ans: pd.DataFrame, cluster: str | None, level: float,
                  with_models: bool, where: str) -> list[dict[str, Any]]:
    import scipy.special

    orders = sorted(pd.unique(ans[_ORDER]))
    lengths = sorted(pd.unique(ans[_CONTEXT]))
    if len(orders) < 2:
        raise ValueError(f"adjusted ToM effect: tom_order has the single value "
                         f"{show_value(orders[0])}{where}; the effect needs two orders")
    keys = [_ORDER, _CONTEXT, *(["model"] if with_models else [])]
    clus = (ans[cluster].astype(str) if cluster is not None
            else pd.Series(np.arange(len(ans)).astype(str), index=ans.index))
    cells = ans.assign(_g=clus.to_numpy()).groupby([*keys, "_g"], sort=True)["correct"] \
        .agg(["sum", "size"]).reset_index()
    g_codes, g_levels = pd.factorize(cells["_g"], sort=True)
    n_clusters = len(g_levels)
    if n_clusters < 2:
        raise ValueError(f"adjusted ToM effect: one {cluster or 'row'} cluster{where}; an "
                         "interval across clusters needs two")
    parts = [np.ones((len(cells), 1)), _dummies(cells[_ORDER], orders),
             _dummies(cells[_CONTEXT], lengths)]
    if with_models:
        parts.append(_dummies(cells["model"], sorted(pd.unique(ans["model"]))))
    x = np.hstack(parts)
    n = cells["size"].to_numpy(dtype=float)
    if np.linalg.matrix_rank(x * np.sqrt(n)[:, None]) < x.shape[1]:
        raise ValueError(f"adjusted ToM effect{where}: ToM order and context length are "
                         "confounded (an order observed only at lengths that no other order "
                         "has), so the order effect cannot be adjusted for length")
    beta, cov = _cluster_ols(cells["sum"].to_numpy(dtype=float), n, x, g_codes, len(ans))
    q = float(scipy.special.stdtrit(n_clusters - 1, 0.5 + level / 2))
    means = ans.groupby(_ORDER)["correct"].mean()
    rows = []
    for j, k in enumerate(orders[1:], start=1):
        est, se = float(beta[j]), float(np.sqrt(max(cov[j, j], 0.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = est / se if se > 0 else (0.0 if est == 0 else np.inf)
        rows.append({"tom_order": k, "reference": orders[0], "estimate": est, "se": se,
                     "ci_low": est - q * se, "ci_high": est + q * se,
                     "p": float(2 * scipy.special.stdtr(n_clusters - 1, -abs(t))),
                     "unadjusted": float(means[k] - means[orders[0]]), "n": len(ans),
                     "n_clusters": n_clusters})
    return rows


def adjusted_tom_effect(
    data: str | os.PathLike[str] | pd.DataFrame,
    *,
    by: str | None = None,
    cluster: str | None = None,
    columns: Mapping[str, str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    r"""The ToM-order effect on accuracy adjusted for context length, with an interval across
    stories.

    The linear probability model of the answered questions :math:`i`

    .. math::

        y_i = \mu + \sum_{k \ne k_0} \theta_k [t_i = k] + \sum_{L \ne L_0} \lambda_L
        [c_i = L] + \sum_{m \ne m_0} \nu_m [\text{model}_i = m] + e_i

    (ToM order :math:`t`, context length :math:`c` as a factor, the LLM terms only when the
    table pools several LLMs) is fitted by least squares; :math:`\hat\theta_k` is the
    difference in accuracy between order :math:`k` and the lowest order :math:`k_0` at equal
    context length. Its interval is

    .. math::

        \hat\theta_k \pm t_{G-1,\,(1+\text{level})/2}\,\sqrt{\hat V_{kk}},\qquad
        \hat V = \frac{G}{G-1}\frac{N-1}{N-K}\,(X^\top X)^{-1}
        \Big(\sum_g X_g^\top e_g e_g^\top X_g\Big)(X^\top X)^{-1},

    the CR1 cluster-robust covariance over the :math:`G` clusters (stories) of the :math:`N`
    questions, :math:`K` columns of :math:`X` (statsmodels' ``cov_type="cluster"``), with
    :math:`p` from the same :math:`t_{G-1}`.

    **Length blocked by story.** In a complete length ladder where every story is asked at
    every order and length equally often, :math:`\hat\theta_k` is the mean of the
    within-story contrasts

    .. math::

        \hat\theta_k = \frac1S\sum_s d_s, \qquad d_s = \frac1{|\mathcal L|}
        \sum_{L} \big(\bar y_{s,L,k} - \bar y_{s,L,k_0}\big),

    each story compared with itself at each length, and :math:`\hat V_{kk} = \frac{N-1}{N-K}
    s_d^2/S`: the paired :math:`t` interval of the :math:`d_s`. Where each story is asked at
    one order (order between stories), length enters as a covariate and the stories are the
    independent units. ``unadjusted`` is the plain difference of the two orders' accuracies,
    which a log whose higher orders sit at other lengths confounds with length.

    Parameters
    ----------
    data : path or pandas.DataFrame
        An evaluation log or table with ``correct``, ``tom_order``, ``context_words``.
    by : str, optional
        Also the effect per value of this column (e.g. ``"model"``), before the pooled rows
        (group ``"(pooled)"``).
    cluster : str, optional
        The clusters of the interval: default ``story_id``, else ``item_id``/``item`` when
        the data have it, else the rows (HC1).
    columns : mapping, optional
        ``{standard name: your column}`` (``--map``).
    level : float, default 0.95

    Returns
    -------
    pandas.DataFrame
        (The ``by`` column, then) :data:`ADJUSTED_COLUMNS`, one row per order above the
        lowest; ``attrs``: ``level``, ``cluster``, ``by``, ``formula``, ``layout`` (the
        :class:`StoryLayout` when the cluster is the story column, else ``None``).
    """
    _check_level(level)
    df = _read(data, columns, (_CONTEXT, _ORDER))
    if cluster is None:
        cluster = next((c for c in (STORY, "item_id", "item") if c in df.columns), None)
    else:
        require_column(df, cluster, "cluster")
    if by is not None:
        require_column(df, by, "by")
    _no_missing(df, [c for c in (cluster, by, "model") if c is not None and c in df.columns])
    ans = _answered(df)
    groups: list[tuple[Any, pd.DataFrame, str]] = []
    if by is not None:
        groups += [(v, sub, f" (in {by}={show_value(v)})")
                   for v, sub in ans.groupby(by, sort=True)]
    groups.append((POOLED, ans, ""))
    several = "model" in ans.columns and ans["model"].nunique() > 1
    rows = []
    for value, sub, where in groups:
        with_models = several and sub["model"].nunique() > 1
        for r in _adjusted_one(sub, cluster, level, with_models, where):
            rows.append({**({by: value if value == POOLED else str(value)} if by else {}),
                         **r})
    out = pd.DataFrame(rows, columns=[*([by] if by else []), *ADJUSTED_COLUMNS])
    formula = ("correct ~ C(tom_order) + C(context_words)"
               + (" + C(model)" if several else ""))
    out.attrs.update(level=float(level), cluster=cluster, by=by, formula=formula,
                     layout=story_layout(df, cluster) if cluster == STORY else None)
    return out
