"""Every table of docs/benchmarks.md is written by a benchmark script (``--write-docs``): it
lies between that script's markers, names the command that made it, and has the columns and
rows that script writes for that command. Timings are never asserted (they depend on the
machine and its load); the structure is, so a table cannot outlive the script that made it."""

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
_BEGIN = re.compile(r"<!-- begin: table written by (\S+) --write-docs \(do not edit by hand\) -->")


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
    """Script name → the text between its markers."""
    out = {}
    for m in _BEGIN.finditer(text):
        script = m.group(1)
        end = f"<!-- end: table written by {script} -->"
        assert text.count(end) == 1 and text.index(end) > m.end(), f"{script}: no end marker"
        out[script] = text[m.end(): text.index(end)]
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


@pytest.mark.parametrize("script", sorted(_blocks(PAGE.read_text(encoding="utf-8"))))
def test_table_is_the_scripts(script, capsys):
    body = _blocks(PAGE.read_text(encoding="utf-8"))[script]
    assert (BENCH / script).is_file(), f"{script} does not exist"
    mod = _module(script.removesuffix(".py"))
    with pytest.raises(SystemExit) as exc:
        mod.parser().parse_args(["--help"])
    assert exc.value.code == 0 and "--write-docs" in capsys.readouterr().out
    cmd = re.match(r"\s*`([^`]+)`", body)
    assert cmd, f"{script}: the block does not open with the command that wrote it"
    words = shlex.split(cmd.group(1))
    assert words[:2] == ["python", f"benchmarks/{script}"], words
    args = mod.parser().parse_args(words[2:])  # the documented arguments parse
    rows = _table(body)
    assert rows, f"{script}: no table between the markers (run `{cmd.group(1)} --write-docs`)"
    assert tuple(rows[0]) == tuple(mod.COLUMNS)
    keys = [k if isinstance(k, tuple) else (k,) for k in mod.row_keys(args)]
    assert [tuple(r[: len(k)]) for r, k in zip(rows[1:], keys, strict=False)] == keys
    assert len(rows) - 1 == len(keys), (script, len(rows) - 1, len(keys))


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
