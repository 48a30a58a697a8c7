"""``tomstats report LOG``: the evaluation-log report (HTML and Markdown), ``--force``, and the
page in headless Chromium (images decoded, non-empty)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _shipped import SHIPPED_LOG as LOG
from _shipped import log_with_overflow_errors

from tomstats.analysis.log_anova import log_anova
from tomstats.analysis.summary import ERROR_COLUMNS, summarize
from tomstats.cli import main
from tomstats.report.log import SECTIONS, fit_command, is_log

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def err_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped log with its 5,000-word records as context-overflow errors."""
    return log_with_overflow_errors(tmp_path_factory.mktemp("log") / "smollm2.jsonl")


@pytest.fixture(scope="module")
def html_report(tmp_path_factory: pytest.TempPathFactory, err_log: Path) -> Path:
    out = tmp_path_factory.mktemp("logreport") / "log.html"
    assert main(["report", str(err_log), "--out", str(out), "--n-boot", "200"]) == 0
    return out


def _cell(log: Path, words: int, order: int) -> pd.Series:
    cells = summarize(log)
    return cells[(cells["context_words"] == words) & (cells["tom_order"] == order)].iloc[0]


def _acc(row: pd.Series) -> str:
    return f"{row['accuracy']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def test_html_sections_numbers_and_images(html_report: Path, err_log: Path) -> None:
    html = html_report.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and not re.search(r'(src|href)="(https?:)?//', html)
    srcs = re.findall(r'<img src="([^"]*)"', html)
    assert len(srcs) == 3  # accuracy (Figure 2), ToM-order contrasts and error taxonomy
    for src in srcs:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_MAGIC
    pos = [html.index(f">{s}</h2>") for s in SECTIONS]
    assert pos == sorted(pos)
    # accuracy with Wilson interval of the 200-word order-0 cell, the overflow cells
    assert _acc(_cell(err_log, 200, 0)) in html and "— (0 of 20 answered)" in html
    assert "context_overflow: 60" in html
    # the ANOVA row of ToM order, F as the table prints it (4 significant digits)
    row = log_anova(err_log).set_index("source").loc["tom_order"]
    m = re.search(r"<td>tom_order</td><td class=\"num\">2</td><td class=\"num\">([\d.]+)</td>",
                  html)
    assert m and float(m[1]) == pytest.approx(row["F"], rel=1e-3)
    # the error taxonomy counts of the 2000-word order-2 cell
    c = _cell(err_log, 2000, 2)
    want = "".join(f'<td class="num">{int(c[k])}</td>'
                   for k in ("tom_order", "n", "n_correct", *ERROR_COLUMNS))
    assert f'<td>smollm2-local</td><td class="num">2000</td>{want}' in html
    assert (f"tomstats fit {err_log} --map item=story_id --model structural --out fit.nc"
            in html)
    # the ToM-order differences: the 1000-word pair 0 - 1, Tukey-adjusted
    from tomstats.analysis.contrasts import anova_grid
    from tomstats.analysis.marginal import contrasts

    pairs = contrasts(anova_grid(err_log), "tom_order", "context_words")
    r = pairs[(pairs["context_words"] == 1000)].iloc[0]
    cells = "".join(f'<td class="num">{r[k]:.4f}</td>'
                    for k in ("estimate", "lower", "upper", "p_adjusted"))
    assert f'<td class="num">1000</td><td>tom_order0 - tom_order1</td>{cells}' in html


def test_markdown_has_the_same_sections(html_report: Path, tmp_path: Path) -> None:
    assert main(["report", str(LOG), "--format", "md", "--out", str(tmp_path / "md"),
                 "--n-boot", "200"]) == 0
    text = (tmp_path / "md" / "report.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.*)$", text, flags=re.M) == list(SECTIONS)
    html_titles = re.findall(r"<h2 id=\"[^\"]*\">(.*?)</h2>", html_report.read_text("utf-8"))
    assert [t.replace("&amp;", "&") for t in html_titles] == list(SECTIONS)
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(refs) == ["accuracy.png", "contrasts.png", "taxonomy.png"]
    for r in refs:
        assert (tmp_path / "md" / r).read_bytes()[:8] == PNG_MAGIC
    assert f"| smollm2-local | 0 | {_acc(_cell(LOG, 200, 0))} |" in text


def test_bootstrap_intervals_in_the_anova_section(html_report: Path, err_log: Path) -> None:
    html = html_report.read_text(encoding="utf-8")
    assert "cluster bootstrap, 200 resamples of story_id" in html
    eta2 = log_anova(err_log).set_index("source").loc["tom_order", "eta2"]
    assert re.search(re.escape(f"{eta2:.4f}") + r" \[0\.\d{4}, 0\.\d{4}\]", html)  # η² of order
    assert "No bootstrap intervals" not in html


def test_accuracy_figure_dodges_the_orders() -> None:
    """At each context length the three orders are drawn side by side (their Wilson
    intervals would hide each other otherwise), symmetric around the tick."""
    from tomstats.report.log import fig_accuracy

    cells = summarize(LOG)
    ax = fig_accuracy(cells, "model").axes[0]
    xs = [c.lines[0].get_xdata() for c in ax.containers]  # errorbar: the data line
    assert len(xs) == 3  # one line per order over the answered context lengths
    x = np.array(xs, dtype=float)
    assert (x[0] < x[1]).all() and (x[1] < x[2]).all()
    answered = sorted(cells.loc[cells["n_answered"] > 0, "context_words"].unique())
    np.testing.assert_allclose(x[1], answered)  # the middle order on the tick
    np.testing.assert_allclose(np.log(x[2] / x[1]), np.log(x[1] / x[0]))


def test_csv_log_with_several_models_and_map(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [{"llm": m, "words": c, "order": t, "ok": int(rng.random() < 0.5), "story": f"{i}"}
            for m in ("m1", "m2") for c in (300, 900) for t in (0, 1) for i in range(8)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "t.html"
    assert main(["report", str(tmp_path / "t.csv"), "--map",
                 "correct=ok,model=llm,context_words=words,tom_order=order", "--n-boot", "0",
                 "--out", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "(pooled)" in html and "<td>m2</td>" in html  # ANOVA per LLM and pooled
    assert "cannot be classified" in html  # no error_category column: said, not drawn
    assert len(re.findall(r"<img ", html)) == 2  # accuracy, contrasts
    # two context lengths cannot identify equation (1)'s α and δ: a formula model, not
    # --model structural (which needs at least 3 lengths in words and 2 ToM orders)
    assert "--map correct=ok,model=llm,context_words=words,tom_order=order --model" in html
    assert "--model structural" not in html


def test_fit_command_for_logs_without_both_factors() -> None:
    df = pd.DataFrame({"model": ["a", "b"] * 4, "tom_order": [0, 0, 2, 2] * 2,
                       "context_words": [185] * 8, "item_id": list("abcdefgh"),
                       "correct": [1, 0] * 4})
    cmd = fit_command("s.csv", df, {"context_words": "n_words"}, "experiment == 'x'")
    assert cmd == ["tomstats", "fit", "s.csv", "--query", "experiment == 'x'", "--map",
                   "context_words=n_words", "--model",
                   "correct ~ tom_order + (1 | model) + (1 | item)", "--out", "fit.nc"]
    assert is_log("x.jsonl") and is_log("x.CSV") and is_log("x.csv.gz") and not is_log("f.nc")


def test_design_without_anova_still_reports(tmp_path: Path) -> None:
    """One ToM order and a categorical context stand-in: no ANOVA (said why), the rest drawn."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"correct": rng.integers(0, 2, 24).astype(float),
                       "variant": ["plain", "spaced", "fewshot"] * 8, "tom_order": 0,
                       "model": "m"})
    df.loc[0, "correct"] = np.nan  # an unanswered question: counted, not an error
    df.to_csv(tmp_path / "one.csv", index=False)
    out = tmp_path / "one.html"
    assert main(["report", str(tmp_path / "one.csv"), "--map", "context_words=variant",
                 "--out", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "No ANOVA for this log: factor &#x27;tom_order&#x27; has a single level 0" in html
    assert "No contrasts for this log: factor &#x27;tom_order&#x27; has a single level" in html
    assert len(re.findall(r"<img ", html)) == 1 and "— (0 of" not in html
    assert "<th>fewshot</th>" in html and "fewshot words" not in html  # accuracy table
    assert "&lt;NA&gt;" not in html  # no taxonomy column: shown as —, not as <NA>
    assert "<td>without an answer</td><td>1 (missing correct: 1)</td>" in html


@pytest.mark.parametrize(("fmt", "name"), [("html", "r.html"), ("md", "r")])
def test_existing_out_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture, fmt: str,
                                  name: str) -> None:
    out = tmp_path / name
    if fmt == "html":
        out.write_text("earlier report\n")
    else:
        out.mkdir()
        (out / "report.md").write_text("earlier report\n")
        (out / "stale.png").write_bytes(b"old figure")
    args = ["report", str(LOG), "--format", fmt, "--n-boot", "0", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0] and "pass --force" in err[0]
    kept = out if fmt == "html" else out / "report.md"
    assert kept.read_text() == "earlier report\n"
    assert main([*args, "--force"]) == 0
    assert "tomstats evaluation log report" in kept.read_text(encoding="utf-8")
    if fmt == "md":  # the folder is replaced whole: no file of the earlier report survives
        assert sorted(p.name for p in out.iterdir()) == ["accuracy.png", "contrasts.png",
                                                         "report.md", "taxonomy.png"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{log}", "--sweep-draws", "5"], "--sweep-draws applies to a fit report"),
        (["{tmp}/fit.nc", "--map", "correct=x"], "--map applies to an evaluation log report"),
        (["--simulation", "{tmp}", "--query", "a == 1"], "--query applies to an evaluation log"),
        (["{log}", "--map", "tom_order=tom_ordr"],
         "--map tom_order=tom_ordr: no column 'tom_ordr' in the data (did you mean "
         "'tom_order'?)"),
        (["{tmp}/missing.jsonl"], "evaluation log '{tmp}/missing.jsonl' does not exist"),
        (["{tmp}/bad.csv"], "bad.csv: line 2, column 3: not valid UTF-8"),
        (["{tmp}/one.csv", "--map", "correct=ok"], "--map correct=ok: no column 'ok'"),
    ],
)
def test_log_report_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str],
                              message: str) -> None:
    (tmp_path / "bad.csv").write_bytes(b"correct,context_words,tom_order\n1,\xff200,0\n")
    pd.DataFrame({"correct": [0, 1, 1, 0], "context_words": [200, 200, 500, 500],
                  "tom_order": 0}).to_csv(tmp_path / "one.csv", index=False)
    out = tmp_path / "r.html"
    args = [a.format(tmp=tmp_path, log=LOG) for a in argv]
    assert main(["report", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tomstats report: error: ")
    assert message.format(tmp=tmp_path) in err[0], err[0]
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.browser
def test_log_report_in_browser(html_report: Path, tmp_path: Path) -> None:
    """Headless Chromium decodes the three images; the page draws and fits 1280 px."""
    from report.test_browser import CHROMIUM, WIDTH, probe, screenshot

    if CHROMIUM is None:
        pytest.skip("headless Chromium not installed (CI: apt-get install -y chromium)")
    info = probe(html_report, tmp_path)
    assert info.get("probe") == "done", info
    assert int(info["images"]) == 3 and int(info["broken"]) == 0
    assert int(info["scroll-width"]) <= WIDTH
    img = screenshot(html_report, tmp_path)
    assert img.shape[1] == WIDTH and img.std() > 10, "blank screenshot"
