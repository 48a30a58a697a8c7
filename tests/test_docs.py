"""The documentation builds with warnings as errors, and every example in it runs.

Two Sphinx builds in subprocesses (html and doctest; ~30 s together). They run by default;
deselect them with ``-k "not sphinx"``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

pytest.importorskip("sphinx", reason="the 'docs' extra (sphinx, myst-parser) is not installed")
pytest.importorskip("myst_parser", reason="the 'docs' extra (myst-parser) is not installed")


def _sphinx(builder: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder,
           "-d", str(out / "doctrees"), str(DOCS), str(out / builder)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300,
                          check=False)


def test_sphinx_html_build(tmp_path: Path) -> None:
    res = _sphinx("html", tmp_path)
    assert res.returncode == 0, f"sphinx html build failed:\n{res.stderr[-4000:]}"
    html = tmp_path / "html"
    for page in ("index", "getting-started", "reproduction", "reports", "benchmarks", "api"):
        assert (html / f"{page}.html").is_file(), page
    api = (html / "api.html").read_text(encoding="utf-8")
    # autodoc really rendered the docstrings
    for name in ("tomstats.simulation.figures.fig_sensitivity",
                 "tomstats.report.fit.write_fit_report", "tomstats.model.linear_predictor"):
        assert f'id="{name}"' in api, name


def test_sphinx_doctest(tmp_path: Path) -> None:
    res = _sphinx("doctest", tmp_path)
    assert res.returncode == 0, f"doctest failed:\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
    summary = (tmp_path / "doctest" / "output.txt").read_text(encoding="utf-8")
    tests = sum(int(n) for n in re.findall(r"^\s*(\d+) tests?", summary, flags=re.M))
    assert tests >= 5, summary[-2000:]  # the pages' examples were found and run
    assert "0 failures in tests" in summary


def test_every_stage_page_is_in_a_toctree() -> None:
    """Each Markdown page (the stage helpers' too) is listed in index.md's toctrees."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^([a-z0-9_-]+)$", index, flags=re.M))
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    assert pages <= listed, f"pages missing from index.md toctrees: {sorted(pages - listed)}"


def test_every_public_module_is_in_the_api_reference() -> None:
    """New stage modules must be added to docs/api.md (public modules, not private ``_``)."""
    import pkgutil

    import tomstats

    api = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"automodule:: (tomstats[\w.]*)", api))
    top = {m.name for m in pkgutil.iter_modules(tomstats.__path__, "tomstats.")
           if not m.name.rsplit(".", 1)[-1].startswith("_")}
    missing = sorted(top - documented)
    assert not missing, f"public modules missing from docs/api.md: {missing}"


#: Public submodules left out of the API reference: command-line glue (documented by
#: ``tomstats.cli`` and the stage pages) and the per-backend model builders, which users reach
#: through ``tomstats.glmm.fit(backend=...)``.
API_EXEMPT = {"tomstats.glmm.cli", "tomstats.glmm.numpyro_backend",
              "tomstats.glmm.pymc_backend"}


@pytest.mark.parametrize("package", ["tomstats.glmm", "tomstats.report"])
def test_every_public_submodule_is_in_the_api_reference(package: str) -> None:
    import importlib
    import pkgutil

    api = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"automodule:: (tomstats[\w.]*)", api))
    pkg = importlib.import_module(package)
    subs = {m.name for m in pkgutil.iter_modules(pkg.__path__, f"{package}.")
            if not m.name.rsplit(".", 1)[-1].startswith("_")}
    missing = sorted(subs - documented - API_EXEMPT)
    assert not missing, f"public modules missing from docs/api.md: {missing}"


def test_getting_started_two_commands_are_the_readmes() -> None:
    """The page's "Two commands" are the README's first two lines, character for character."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", readme, flags=re.S)
    assert first, "README.md has no bash block"
    expected = [ln for ln in first.group(1).splitlines() if ln.strip()][:2]
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    section = page.split("## Two commands\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", section, flags=re.S)
    assert block, "no console block under 'Two commands'"
    shown = [ln.removeprefix("$ ") for ln in block.group(1).splitlines() if ln.strip()]
    assert shown == expected


def test_update_doctests_rewrites_only_what_failed(tmp_path: Path, monkeypatch) -> None:
    """docs/update_doctests.py reads Sphinx's doctest report: a failing example's expected
    output is replaced by what it printed; an exception is left for a person (exit 1)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("update_doctests", DOCS / "update_doctests.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    page = tmp_path / "p.md"
    page.write_text("```{doctest}\n>>> f()\n   a  b\n0  1  2\n>>> g()\n3\n```\n", encoding="utf-8")
    report = ('*' * 70 + '\nFile "p.md", line 2, in default\nFailed example:\n    f()\n'
              "Expected:\n       a  b\n    0  1  2\nGot:\n       a  b\n    0  1  5\n" + "*" * 70
              + "\n1 items had failures:\n")
    monkeypatch.setattr(tool, "DOCS", tmp_path)
    monkeypatch.setattr(tool, "run_doctest", lambda out: (1, report))
    assert tool.main(["--check"]) == 1
    assert "0  1  2" in page.read_text(encoding="utf-8")
    assert tool.main([]) == 0
    assert page.read_text(encoding="utf-8") == (
        "```{doctest}\n>>> f()\n   a  b\n0  1  5\n>>> g()\n3\n```\n")
    raised = ('File "p.md", line 4, in default\nFailed example:\n    g()\n'
              "Exception raised:\n    Traceback (most recent call last):\n")
    monkeypatch.setattr(tool, "run_doctest", lambda out: (1, raised))
    assert tool.main([]) == 1
