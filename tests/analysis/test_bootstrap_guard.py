"""The bootstrap's size guard: refused up front, ``--allow-large`` really overrides it."""

from __future__ import annotations

from pathlib import Path

import pytest

import tomstats._guards as guards
from tomstats.analysis.sizes import bootstrap_footprint
from tomstats.cli import main


def _table(path: Path) -> Path:
    rows = ["correct,model,item,tom_order,context_words"]
    for m in ("a", "b"):
        for t in (0, 1, 2):
            for c in (200, 1000):
                rows += [f"{(k + t) % 2},{m},i{t}{c}{k},{t},{c}" for k in range(4)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_footprint_formula() -> None:
    fp = bootstrap_footprint(1000, 15, 3)
    assert fp.bytes == 1000 * 15 * 32 and fp.seconds == pytest.approx(1000 * 15 * 3 * 2e-7)
    assert "1,000 resamples × 15 cells × 3 tables" == fp.detail


@pytest.mark.parametrize("argv", [
    ["anova", "{t}", "--ci", "0.9", "--n-boot", "1000"],
    ["report", "{t}", "--n-boot", "1000", "--out", "{d}/r.html"],
])
def test_allow_large_overrides(argv, tmp_path: Path, monkeypatch, capsys) -> None:
    t = _table(tmp_path / "t.csv")
    args = [a.replace("{t}", str(t)).replace("{d}", str(tmp_path)) for a in argv]
    # an 8 kB machine: room to read the 1 kB table (tomstats._validate.check_input_size),
    # none for the 1,000 resamples of the bootstrap
    monkeypatch.setattr(guards, "available_memory", lambda: 8000)
    assert main(args) == 2
    assert "bootstrap too large" in capsys.readouterr().err
    assert main([*args, "--allow-large"]) == 0
