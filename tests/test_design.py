"""Factorial designs and simulation TOML files."""

from __future__ import annotations

import numpy as np
import pytest

from tomstats.design import Design, Factor, load_design, paper_design
from tomstats.simulation.reproduce import load_study


def test_paper_design_defaults():
    d = paper_design()
    assert d.context.tolist() == [200, 500, 1000, 2000, 5000]
    assert d.tom.tolist() == [0, 1, 2]
    assert d.capability == (0.7, 0.85, 1.0, 1.15, 1.3)
    assert d.n_per_cell.shape == (5, 3) and d.balanced and d.n_questions == 7500


def test_unbalanced_design():
    n = np.arange(1, 16).reshape(5, 3)
    d = paper_design().with_(n_per_cell=n)
    assert not d.balanced and d.n_questions == n.sum()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_per_cell": 2.5}, "whole numbers"),
        ({"n_per_cell": -3}, ">= 1"),
        ({"n_per_cell": 0}, ">= 1"),
        ({"n_per_cell": np.ones((3, 5), int)}, r"shape \(3, 5\), expected \(5, 3\)"),
        ({"n_per_cell": "many"}, "integers"),
        ({"capability": (1.0, float("nan"))}, "capability"),
        ({"capability": ()}, "capability"),
    ],
)
def test_bad_designs_are_named(kwargs, match):
    base = {"factors": paper_design().factors, "n_per_cell": 500, "capability": (1.0,)}
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Design(**base)


@pytest.mark.parametrize("levels", [(0, 500), (-200, 500)])
def test_non_positive_context_is_refused(levels):
    with pytest.raises(ValueError, match=r"'context_length'.*> 0 words.*" + str(levels[0])):
        Factor("context_length", levels)


def test_empty_factor_and_duplicates():
    with pytest.raises(ValueError, match="must not be empty"):
        Factor("tom_order", ())
    with pytest.raises(ValueError, match="distinct"):
        Factor("tom_order", (0, 0, 1))
    with pytest.raises(ValueError, match="finite"):
        Factor("tom_order", (0, float("nan")))
    with pytest.raises(ValueError, match="factors must be"):
        Design(factors=(Factor("tom_order", (0, 1)), Factor("context_length", (200, 500))))


def test_shipped_simulation_files_load(repo_root):
    d = load_design(repo_root / "simulations" / "paper.toml")
    assert d.to_dict() == paper_design().to_dict()
    for f in sorted((repo_root / "simulations").glob("*.toml")):
        cfg = load_study(f)
        assert cfg.replicates >= 1 and len(cfg.gamma) >= 1


def test_paper_toml_equals_package_defaults(repo_root):
    from tomstats.simulation.paper import PAPER_PARAMS
    from tomstats.simulation.reproduce import StudyConfig

    assert load_study(repo_root / "simulations" / "paper.toml").to_dict() == StudyConfig(
        params=PAPER_PARAMS).to_dict()


def test_bad_toml_names_table_and_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[parameters]\nalpha = "fast"\n')
    with pytest.raises(ValueError, match=r"\[parameters\]\.alpha"):
        load_study(f)
    f.write_text("[simulation]\nreplicate = 3\n")
    with pytest.raises(ValueError, match=r"unknown key 'replicate' \(did you mean 'replicates'"):
        load_study(f)
    f.write_text("[design]\nfactors = []\n")
    with pytest.raises(ValueError, match="factors"):
        load_study(f)
    f.write_text("[sensitivity]\ngamma = {start = 0.3, stop = 2.4, num = 0}\n")
    with pytest.raises(ValueError, match="num"):
        load_study(f)
    f.write_text("not toml [")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_study(f)
    with pytest.raises(FileNotFoundError):
        load_study(tmp_path / "missing.toml")
