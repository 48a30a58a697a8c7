"""Every table of docs/benchmarks.md is written by a benchmark script (``--write-docs``): it
lies between that script's markers, names the command that made it, and has the columns and
rows that script writes for that command. The same holds for every marked table of the other
pages a script writes into (``PAGES``; there a script may write several tables, one per
``[part]``, e.g. glmm_speed.py's one per dataset). Timings are never asserted (they depend on
the machine and its load); the structure is, so a table cannot outlive the script that made
it."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
PAGE = REPO / "docs" / "benchmarks.md"
#: Pages with marked tables written by benchmark scripts.
PAGES = (PAGE, REPO / "docs" / "glmm-real-data.md", REPO / "docs" / "glmm.md",
         REPO / "docs" / "anova.md", REPO / "docs" / "power-from-fit.md",
         REPO / "docs" / "cluster.md")
_BEGIN = re.compile(r"<!-- begin: table written by (\S+) --write-docs(?: \[([^\]]+)\])? "
                    r"\(do not edit by hand\) -->")


def _module(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    key = f"bench_docs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


def _blocks(text: str) -> dict[str, str]:
    """Script name (with `` [part]`` for one of several tables) → the text between its
    markers."""
    out = {}
    for m in _BEGIN.finditer(text):
        key = m.group(1) + (f" [{m.group(2)}]" if m.group(2) else "")
        end = f"<!-- end: table written by {key} -->"
        assert text.count(end) == 1 and text.index(end) > m.end(), f"{key}: no end marker"
        assert key not in out, f"{key}: two tables with the same markers"
        out[key] = text[m.end(): text.index(end)]
    return out


def _table(block: str) -> list[list[str]]:
    rows = []
    for line in block.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(re.fullmatch(r"-+", c) for c in cells):
                rows.append(cells)
    return rows


def test_every_table_lies_between_a_scripts_markers():
    text = PAGE.read_text(encoding="utf-8")
    blocks = _blocks(text)
    assert {"bench_simulation.py", "bench_power.py", "bench_anova.py"} <= set(blocks)
    outside = text
    for body in blocks.values():
        outside = outside.replace(body, "")
    stray = [line for line in outside.splitlines() if line.startswith("|")]
    assert not stray, ("docs/benchmarks.md: tables typed by hand (give the script a "
                       f"--write-docs flag, see benchmarks/_docs.py): {stray[:3]}")


def _all_blocks() -> list[tuple[str, str]]:
    return [(page.name, key) for page in PAGES
            for key in sorted(_blocks(page.read_text(encoding="utf-8")))]


def test_pages_with_marked_tables():
    pages = {page for page, _ in _all_blocks()}
    assert pages == {p.name for p in PAGES}
    assert {"glmm_speed.py [one-llm]", "glmm_speed.py [crossed]"} <= {
        key for page, key in _all_blocks() if page == "glmm-real-data.md"}


def _check_block(body: str, key: str, capsys) -> list[list[str]]:
    """The block of ``key`` (``script`` or ``script [part]``) opens with the command that
    made it, whose ``--help`` works and whose arguments parse, and holds the table that
    command writes (columns, first cells of the rows); returns the table's rows."""
    script, _, part = key.partition(" [")
    part = part.removesuffix("]")
    assert (BENCH / script).is_file(), f"{script} does not exist"
    mod = _module(script.removesuffix(".py"))
    with pytest.raises(SystemExit) as exc:
        mod.parser().parse_args(["--help"])
    assert exc.value.code == 0 and "--write-docs" in capsys.readouterr().out
    cmd = re.match(r"\s*`([^`]+)`", body)
    assert cmd, f"{key}: the block does not open with the command that wrote it"
    words = shlex.split(cmd.group(1))
    assert words[:2] == ["python", f"benchmarks/{script}"], words
    args = mod.parser().parse_args(words[2:])  # the documented arguments parse
    rows = _table(body)
    assert rows, f"{key}: no table between the markers (run `{cmd.group(1)} --write-docs`)"
    assert tuple(rows[0]) == tuple(mod.COLUMNS)
    raw = mod.row_keys(args, part) if part else mod.row_keys(args)  # a wrong part raises
    keys = [k if isinstance(k, tuple) else (k,) for k in raw]
    assert [tuple(r[: len(k)]) for r, k in zip(rows[1:], keys, strict=False)] == keys
    assert len(rows) - 1 == len(keys), (key, len(rows) - 1, len(keys))
    return rows


@pytest.mark.parametrize(("page", "key"), _all_blocks())
def test_table_is_the_scripts(page, key, capsys):
    _check_block(_blocks((REPO / "docs" / page).read_text(encoding="utf-8"))[key], key, capsys)


def _fake_recovery_results(out: Path, n: int, n_llm: int, seed: int) -> list[dict]:
    """``n`` dataset records in glmm_recovery.py's format, with random intervals."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    names = ["alpha", "gamma", "delta", "sigma", *(f"capability[m{j}]" for j in range(n_llm))]
    (out / "datasets").mkdir(parents=True)
    recs = []
    for i in range(n):
        params = []
        for name in names:
            truth, mean = rng.normal(size=2)
            q = np.sort(mean + rng.normal(size=4) * [2, 1, 1, 2])
            params.append({"param": name, "truth": truth, "mean": mean, "sd": 1.0,
                           "q025": q[0], "q25": q[1], "q75": q[2], "q975": q[3],
                           "frac_below": 0.5, "cover50": bool(q[1] <= truth <= q[2]),
                           "cover95": bool(q[0] <= truth <= q[3])})
        rec = {"index": i, "params": params, "seconds": 1.0 + i, "max_rhat": 1.0 + i / 100,
               "min_ess_bulk": 100.0, "divergences": i % 2, "diagnostics_passed": i != 0,
               "failed_checks": [], "n_rows": 270,
               "settings": {"truth": "prior", "chains": 2, "draws": 500, "tune": 500,
                            "n_per_cell": 6, "n_llm": n_llm, "seed": 20240, "via_fit": False}}
        (out / "datasets" / f"ds_{i:05d}.json").write_text(json.dumps(rec), encoding="utf-8")
        recs.append(rec)
    return recs


def test_recovery_summary_writes_its_table(tmp_path, monkeypatch, capsys):
    """glmm_recovery.py --summary-only --write-docs: the block for the --out folder gets the
    coverage of each parameter as counted directly from the dataset records."""
    mod = _module("glmm_recovery")
    docs = _module("_docs")
    out = tmp_path / "prior"
    recs = _fake_recovery_results(out, n=7, n_llm=3, seed=5)
    page = tmp_path / "page.md"
    page.write_text(f"x\n{docs.begin_marker('glmm_recovery.py', 'prior')}\n"
                    f"{docs.end_marker('glmm_recovery.py', 'prior')}\ny\n", encoding="utf-8")
    monkeypatch.setattr(mod, "DOCS_PAGE", page)
    assert mod.main(["--summary-only", "--out", str(out), "--write-docs"]) == 0
    capsys.readouterr()
    body = _blocks(page.read_text(encoding="utf-8"))["glmm_recovery.py [prior]"]
    assert f"--summary-only --out {out}` on " in body
    rows = {r[0]: r for r in _check_block(body, "glmm_recovery.py [prior]", capsys)[1:]}
    for name in ("alpha", "sigma", "capability[m2]"):
        got = [p for rec in recs for p in rec["params"] if p["param"] == name]
        assert rows[name][1] == "7"
        assert rows[name][2] == f"{sum(p['cover50'] for p in got) / 7:.3f}"
        assert rows[name][3] == f"{sum(p['cover95'] for p in got) / 7:.3f}"
    caps = [p for rec in recs for p in rec["params"] if p["param"].startswith("capability")]
    assert rows["capability (all LLMs)"][1] == "21"
    assert rows["capability (all LLMs)"][3] == f"{sum(p['cover95'] for p in caps) / 21:.3f}"
    assert "7 datasets (truth `prior`" in body and "datasets with divergences 3" in body
    with pytest.raises(SystemExit, match="--n-llm"):  # rows would not be the command's
        mod.main(["--summary-only", "--out", str(out), "--write-docs", "--n-llm", "4"])
    with pytest.raises(SystemExit, match="markers"):  # no block for this folder: no work
        mod.main(["--summary-only", "--out", str(tmp_path / "paper"), "--write-docs"])
    assert not (tmp_path / "paper").exists()


def test_write_docs_replaces_only_its_block(tmp_path):
    docs = _module("_docs")
    page = tmp_path / "b.md"
    b, e = docs.begin_marker("x.py"), docs.end_marker("x.py")
    page.write_text(f"# T\n\nbefore\n{b}\nold | table\n{e}\nafter {b[:10]}\n", encoding="utf-8")
    table = docs.markdown_table(("a", "b"), [["1", "2"]])
    docs.write_docs("x.py", ["--n", "3", "--write-docs"], table, page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# T\n\nbefore\n" + b + "\n`python benchmarks/x.py --n 3` on ")
    assert "| a | b |\n|---|---|\n| 1 | 2 |\n" + e + "\nafter" in text and "old" not in text
    with pytest.raises(SystemExit):
        docs.write_docs("y.py", [], table, page)  # no markers: nothing written
    assert page.read_text(encoding="utf-8") == text
    with pytest.raises(ValueError, match="cells"):
        docs.markdown_table(("a", "b"), [["1"]])


def test_write_docs_parts_are_separate_blocks(tmp_path):
    docs = _module("_docs")
    page = tmp_path / "p.md"
    blocks = [f"{docs.begin_marker('x.py', p)}\nold {p}\n{docs.end_marker('x.py', p)}"
              for p in ("one", "two")]
    page.write_text("# T\n" + "\nmid\n".join(blocks) + "\n", encoding="utf-8")
    docs.write_docs("x.py", ["--d", "one"], docs.markdown_table(("a",), [["1"]]), page,
                    part="one")
    got = _blocks(page.read_text(encoding="utf-8"))
    assert set(got) == {"x.py [one]", "x.py [two]"}
    assert "| 1 |" in got["x.py [one]"] and "old one" not in got["x.py [one]"]
    assert got["x.py [two]"] == "\nold two\n"
    with pytest.raises(SystemExit):
        docs.write_docs("x.py", [], "t", page, part="three")
