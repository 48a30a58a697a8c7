"""Control characters from data are shown, never obeyed (issue 31, item 10).

A model name such as ``"gpt\\x1b[2J\\x1b]0;owned\\x07"`` used to clear the screen and set the
window title when ``summarize`` printed it, and went raw into ``report.md``. Every character of
:data:`tomstats._printable.CONTROL` is now written as a visible escape by what the commands
print and by the Markdown and HTML reports (one helper, :func:`tomstats._printable.printable`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats._printable import CONTROL, printable
from tomstats.cli import main

#: Hostile names: (the name, the visible escape that must show instead).
NAMES = {
    "clear screen": ("gpt\x1b[2J", "gpt\\x1b[2J"),
    "window title": ("llama\x1b]0;owned\x07", "llama\\x1b]0;owned\\x07"),
    "C1 CSI": ("qwen\x9b31m", "qwen\\x9b31m"),
    "carriage return": ("mistral\roverwritten", "mistral\\x0doverwritten"),
    "backspace": ("phi\x08\x08xx", "phi\\x08\\x08xx"),
    "bidi override": ("gemma\u202eevil", "gemma\\u202eevil"),
    "NUL and DEL": ("yi\x00\x7f", "yi\\x00\\x7f"),
}

#: The names put in a log (a NUL byte makes a file binary, refused before it is read).
RAW = [n for case, (n, _) in NAMES.items() if "NUL" not in case]
SHOWN = [s for case, (_, s) in NAMES.items() if "NUL" not in case]


@pytest.mark.parametrize("case", list(NAMES))
def test_printable_escapes_each_control(case: str) -> None:
    raw, shown = NAMES[case]
    assert printable(raw) == shown
    assert CONTROL.search(printable(raw)) is None
    assert printable("a\tb\nc") == "a\tb\nc"  # layout kept
    assert printable("a\tb\nc", keep="") == "a\\x09b\\x0ac"


def _log(path: Path) -> Path:
    rng = np.random.default_rng(0)
    rows = [{"correct": int(rng.random() < 0.7), "model": m, "item": f"i{t}{c}{k}",
             "tom_order": t, "context_words": c, "answer": "kitchen\x1b[2J"}
            for m in RAW for t in (0, 1) for c in (200, 1000) for k in range(3)]
    # strings quoted: pandas leaves a carriage return unquoted otherwise
    pd.DataFrame(rows).to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return path


def _no_controls(text: str) -> None:
    bad = sorted({c for c in text if CONTROL.fullmatch(c) and c not in "\n\t"})
    assert not bad, [hex(ord(c)) for c in bad]


def test_summarize_prints_names_escaped(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path / "log.csv")
    assert main(["summarize", str(log)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    for shown in SHOWN:  # pandas writes a carriage return in a cell as \r itself
        assert shown in out or shown.replace("\\x0d", "\\r") in out, shown


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_reports_write_names_escaped(tmp_path: Path, fmt: str) -> None:
    log = _log(tmp_path / "log.csv")
    out = tmp_path / ("r" if fmt == "md" else "r.html")
    assert main(["report", str(log), "--format", fmt, "--out", str(out)]) == 0
    text = (out / "report.md" if fmt == "md" else out).read_text(encoding="utf-8")
    _no_controls(text)
    for shown in SHOWN:
        assert shown in text, shown


def test_compare_prints_fit_names_escaped(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from _ml_fits import intercepts_fit

    def fit(formula: str, p: int, loglik: float) -> Path:
        names = ("Intercept", "tom_order")[:p]
        f = intercepts_fit(formula=formula, family="bernoulli", n_obs=4, coef_names=names,
                           beta=np.zeros(p), se=np.ones(p), cov=np.eye(p), groups=("model",),
                           sd=np.array([0.5]), levels=(("a", "b"),), ranef=np.zeros(2),
                           loglik=loglik, converged=True, iterations=3, n_rows=4)
        return f.to_json(tmp_path / f"f{p}.json")

    small = fit("correct ~ 1 + (1 | model)", 1, -3.0)
    big = fit("correct ~ tom_order + (1 | model)", 2, -2.0)
    assert main(["compare", f"gpt\x1b[2J={small}", f"b\x9b={big}"]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert "gpt\\x1b[2J" in out
