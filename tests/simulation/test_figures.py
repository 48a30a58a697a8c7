"""The paper's five figures: plotted values equal the input tables; bad input is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _report_data import write_simulation_dir
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure

from tomstats.simulation import figures as F
from tomstats.simulation.files import read_simulation_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_simulation_dir(tmp_path_factory.mktemp("sim") / "out")


@pytest.fixture(scope="module")
def data(sim_dir: Path) -> dict:
    return read_simulation_dir(sim_dir)


def test_variance_decomposition_bars_equal_table(data: dict) -> None:
    t1 = data["table1"]
    fig = F.fig_variance_decomposition(t1, reference=F.PAPER_TABLE1)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    expected = t1.set_index("factor").loc[list(F.FACTOR_LABELS), "pct_total"].to_numpy()
    np.testing.assert_allclose(heights, expected)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["ToM order", "Context length", "Interaction", "Residual"]
    # the paper's values drawn as reference markers
    ref = [ln for ln in ax.lines if ln.get_label() == "paper (Table 1)"]
    np.testing.assert_allclose(ref[0].get_ydata(), [22.4, 4.1, 0.5, 73.0])


def test_variance_decomposition_reorders_rows(data: dict) -> None:
    shuffled = data["table1"].iloc[::-1].reset_index(drop=True)
    ax = F.fig_variance_decomposition(shuffled).axes[0]
    assert ax.patches[0].get_height() == pytest.approx(
        float(shuffled.loc[shuffled.factor == "tom_order", "pct_total"].iloc[0]))


def test_cells_lines_equal_accuracies(data: dict) -> None:
    cells = data["cells"]
    ax = F.fig_cells(cells, capability=1.0).axes[0]
    assert ax.get_xscale() == "log"
    sub = cells[np.isclose(cells.capability, 1.0)]
    solid = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    assert len(solid) == 3
    for t, line in zip((0, 1, 2), solid, strict=True):
        d = sub[sub.tom_order == t].sort_values("context_length")
        np.testing.assert_allclose(line.get_xdata(), d.context_length)
        np.testing.assert_allclose(line.get_ydata(), d.accuracy)
    dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    np.testing.assert_allclose(dashed[2].get_ydata(),
                               sub[sub.tom_order == 2].sort_values("context_length").expected)


def test_cells_other_capability_differs(data: dict) -> None:
    low = F.fig_cells(data["cells"], capability=0.7).axes[0].lines[0].get_ydata()
    ref = F.fig_cells(data["cells"], capability=1.0).axes[0].lines[0].get_ydata()
    assert np.all(np.asarray(low) < np.asarray(ref) + 0.1)
    assert not np.allclose(low, ref)


def test_main_effects_are_marginal_means(data: dict) -> None:
    cells = data["cells"]
    fig = F.fig_main_effects(cells, capability=1.0)
    ax_c, ax_t = fig.axes
    sub = cells[np.isclose(cells.capability, 1.0)]
    np.testing.assert_allclose(ax_c.lines[0].get_ydata(),
                               sub.groupby("context_length").accuracy.mean())
    np.testing.assert_allclose([p.get_height() for p in ax_t.patches],
                               sub.groupby("tom_order").accuracy.mean())


def test_marginal_interval_formula() -> None:
    # two cells with CI half-widths 1.96*0.1 and 1.96*0.2 -> marginal se sqrt(.01+.04)/2
    cells = pd.DataFrame({"tom_order": [0, 0], "accuracy": [0.4, 0.6],
                          "ci_low": [0.4 - 1.959964 * 0.1, 0.6 - 1.959964 * 0.2],
                          "ci_high": [0.4 + 1.959964 * 0.1, 0.6 + 1.959964 * 0.2]})
    m = F._marginal(cells, "tom_order")
    assert m["accuracy"].iloc[0] == pytest.approx(0.5)
    assert m["se"].iloc[0] == pytest.approx(np.sqrt(0.01 + 0.04) / 2)


def test_decomposition_by_capability(data: dict) -> None:
    d = data["decomposition"]
    fig = F.fig_decomposition_by_capability(d)
    ax, ax2 = fig.axes
    tom = d[d.factor == "tom_order"].sort_values("capability")
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights[:5], tom.pct_total)  # first factor's bars
    np.testing.assert_allclose(ax2.lines[0].get_ydata(), 100 * tom.share_systematic)
    # without share_systematic: a single panel
    assert len(F.fig_decomposition_by_capability(d.drop(columns="share_systematic")).axes) == 1


def test_sensitivity_mesh_star_and_count(data: dict) -> None:
    s = data["sensitivity"]
    fig = F.fig_sensitivity(s, default=(1.3, 7.5e-5))
    ax = fig.axes[0]
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    gam, alp, share = F.sensitivity_grid(s)
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(share.shape), share)
    assert share[0, 0] == pytest.approx(
        float(s[(s.gamma == s.gamma.min()) & (s.alpha == s.alpha.min())].tom_share.iloc[0]))
    star = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert star and star[0].get_xdata()[0] == pytest.approx(0.75)  # α in units of 1e-4
    assert star[0].get_ydata()[0] == pytest.approx(1.3)
    n_dom = int(s.dominant.sum())
    assert f"in {n_dom} of 49 grid points" in ax.get_title()
    assert any(c.get_linestyle() for c in ax.collections[1:])  # the 0.5 contour exists


def test_write_paper_figures(tmp_path: Path) -> None:
    d = write_simulation_dir(tmp_path / "out")
    paths = F.write_paper_figures(d)
    assert [p.name for p in paths] == [f"fig{i}.png" for i in range(1, 6)]
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
        assert p.stat().st_size > 10_000
    assert not list(d.glob("*.tmp")) and not list(d.glob(".*"))


@pytest.mark.parametrize(
    ("fn", "table", "mutate", "message"),
    [
        (F.fig_variance_decomposition, "table1", lambda t: t.drop(columns="sd_pct"),
         "table1: missing column(s) ['sd_pct']"),
        (F.fig_variance_decomposition, "table1",
         lambda t: t.assign(factor=t.factor.replace("interaction", "age")),
         "unknown factor(s) ['age']"),
        (F.fig_cells, "cells", lambda t: t.assign(accuracy="x"),
         "column 'accuracy' must be numeric"),
        (F.fig_cells, "cells", lambda t: t.iloc[:0], "cells: table has no rows"),
        (F.fig_sensitivity, "sensitivity", lambda t: t.iloc[1:],
         "do not form a complete gamma × alpha grid"),
        (F.fig_decomposition_by_capability, "decomposition",
         lambda t: t.drop(columns="pct_total_low"), "missing column(s) ['pct_total_low']"),
    ],
)
def test_bad_tables(data: dict, fn, table: str, mutate, message: str) -> None:
    with pytest.raises(ValueError) as err:
        fn(mutate(data[table].copy()))
    assert message in str(err.value)


def test_bad_arguments(data: dict) -> None:
    with pytest.raises(ValueError, match=r"capability 2\.0 not in the table"):
        F.fig_cells(data["cells"], capability=2.0)
    with pytest.raises(ValueError, match="default: expected"):
        F.fig_sensitivity(data["sensitivity"], default=(1.0,))
    with pytest.raises(ValueError, match="expected a pandas DataFrame, got list"):
        F.fig_cells([1, 2, 3])


def test_bad_folders(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        F.write_paper_figures(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a tomstats reproduce output"):
        F.write_paper_figures(tmp_path / "empty")
    d = write_simulation_dir(tmp_path / "partial")
    (d / "cells.csv").unlink()
    with pytest.raises(ValueError, match=r"incomplete: missing \['cells.csv'\]"):
        F.write_paper_figures(d)
    assert not list(d.glob("*.png"))


def test_bad_table_leaves_folder_unchanged(tmp_path: Path) -> None:
    d = write_simulation_dir(tmp_path / "out")
    s = pd.read_csv(d / "sensitivity.csv").iloc[:-1]
    s.to_csv(d / "sensitivity.csv", index=False)
    with pytest.raises(ValueError, match="complete gamma"):
        F.write_paper_figures(d)
    assert not list(d.glob("*.png"))


# --------------------------------------------------------------------------- calibrated sweeps


def _posterior_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Synthetic ``decomposition_posterior.csv`` / ``dominance_posterior.csv`` tables."""
    rng = np.random.default_rng(3)
    rows = []
    for llm in ("llm-a", "llm-b"):
        for src in ("tom_order", "context_length", "interaction", "residual"):
            m = rng.uniform(0.01, 0.3)
            rows.append({"llm": llm, "source": src, "eta2_mean": m, "eta2_low": m * 0.5,
                         "eta2_high": m * 1.6})
    g, a = np.meshgrid(np.linspace(0.3, 2.4, 7), np.linspace(2e-5, 2e-4, 7), indexing="ij")
    share = 1 / (1 + np.exp(-(3 * g - 2e4 * a)))
    dom = pd.DataFrame({"gamma": g.ravel(), "alpha": a.ravel(),
                        "tom_share_mean": share.ravel(), "tom_share_low": share.ravel() - 0.05,
                        "tom_share_high": share.ravel() + 0.05,
                        "p_dominant": (share.ravel() > 0.5) * 0.9 + 0.05})
    return pd.DataFrame(rows), dom


def test_eta2_posterior_points_and_bars() -> None:
    dec, _ = _posterior_tables()
    ax = F.fig_eta2_posterior(dec).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["llm-a", "llm-b"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "ToM order", "Context length", "Interaction"]
    points = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert len(points) == 3  # one series per systematic source; residual left out
    for line, src in zip(points, ("tom_order", "context_length", "interaction"), strict=True):
        np.testing.assert_allclose(line.get_xdata(), dec[dec.source == src].eta2_mean)
    # the interval bars span eta2_low .. eta2_high
    bars = ax.collections[0].get_segments()
    tom = dec[dec.source == "tom_order"]
    np.testing.assert_allclose([s[:, 0] for s in bars],
                               tom[["eta2_low", "eta2_high"]].to_numpy())


def test_dominance_posterior_mesh_and_probabilities() -> None:
    _, dom = _posterior_tables()
    fig = F.fig_dominance_posterior(dom, fitted=(1.0, 1e-4))
    ax = fig.axes[0]
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    _, _, share = F.sensitivity_grid(dom, "tom_share_mean")
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(7, 7), share)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 49
    first = dom[(dom.gamma == dom.gamma.min()) & (dom.alpha == dom.alpha.min())].iloc[0]
    assert texts[0] == f"{first.tom_share_mean:.2f}\nP {first.p_dominant:.2f}"
    assert f"in {int((dom.tom_share_mean > 0.5).sum())} of 49 cells" in ax.get_title()
    star = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert star and star[0].get_xdata()[0] == pytest.approx(1.0)
    outside = F.fig_dominance_posterior(dom, fitted=(5.0, 1e-4)).axes[0]
    assert "lies outside the grid" in outside.get_title()
    assert not [ln for ln in outside.lines if ln.get_marker() == "*"]
    with pytest.raises(ValueError, match="dominance_posterior: missing column"):
        F.fig_dominance_posterior(dom.drop(columns="p_dominant"))
    with pytest.raises(ValueError, match="decomposition_posterior: missing column"):
        F.fig_eta2_posterior(_posterior_tables()[0].drop(columns="eta2_low"))
