"""The calibrated simulation file is written by a TOML writer: data never becomes syntax.

LLM names come from the data (a log's ``model`` column). Written raw into a comment, a name
holding a newline added a ``[simulation]`` table that ``tomstats simulate`` obeyed.
"""

from __future__ import annotations

import tomllib

import pytest

from tomstats.glmm.calibrate import _simulation_toml
from tomstats.simulation.study import load_study

SUMM = {"mean": 0.5, "sd": 0.1, "median": 0.5, "lower": 0.3, "upper": 0.7}

HOSTILE = [
    "plain-llm",
    "x\n[simulation]\nreplicates = 1000000000000\n#",
    "x\r\n[[design.factors]]\nname = 'evil'",
    'quote " and \\ backslash',
    "tab\tdel\x7fnul\x00bell\x07",
    "emoji \U0001F600 and é",
    "] = 1\n[meta]\nx = 1",
    "",
]


def _summary(names: list[str]) -> dict:
    return {
        "params": {k: dict(SUMM) for k in ("alpha", "gamma", "delta", "sigma")},
        "capability": {n: {**SUMM, "mean": 1.0 + i / 10} for i, n in enumerate(names)},
        "interval": 0.95,
        "source": {"model": "structural", "data_hash": "abc\n[simulation]", "backend": None,
                   "seed": 3, "created_at": "2026-01-01", "n_rows": 240},
    }


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(n)[:20] for n in HOSTILE])
def test_hostile_llm_name_round_trips_as_data(name: str, tmp_path) -> None:
    names = [name, "other"] if name != "other" else [name]
    text = _simulation_toml(_summary(names))
    doc = tomllib.loads(text)
    assert set(doc) == {"parameters", "design", "meta"}  # nothing injected
    assert "simulation" not in doc and [f["name"] for f in doc["design"]["factors"]] == [
        "context_length", "tom_order"]
    cal = doc["meta"]["calibration"]
    assert cal["llms"] == names and list(cal["capability"]) == names
    assert doc["design"]["capability"] == [1.0, 1.1]
    assert cal["source"]["data_hash"] == "abc\n[simulation]" and "backend" not in cal["source"]
    # no data in a comment: every comment line is the fixed header
    assert all(line.startswith("#") for line in text.splitlines()[:4])
    assert not any(line.lstrip().startswith("#") for line in text.splitlines()[5:])
    f = tmp_path / "p.toml"
    f.write_text(text, encoding="utf-8")
    study = load_study(f)
    assert study.params.gamma == pytest.approx(0.5)
    assert study.design.capability == pytest.approx((1.0, 1.1))
    assert study.replicates != 10**12
