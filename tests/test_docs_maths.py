"""The documentation's maths renders offline (issue 33, part 4): MathJax ships with the docs
build (``sphinx-mathjax-offline`` of the ``docs`` extra), so the ANOVA page, opened from disk in
headless Chromium with the network off, shows typeset formulas and no raw ``\\(...\\)``.

Only the ANOVA page is built (a source folder holding it, ``docs/conf.py`` and what that
imports; the page is the root document), so the test takes seconds, not the whole docs build
of tests/test_docs.py. Without Chromium the test skips with that reason, as
tests/report/test_browser.py does; CI installs Debian's ``chromium``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="the 'docs' extra (sphinx, myst-parser) is not installed")
pytest.importorskip("myst_parser", reason="the 'docs' extra (myst-parser) is not installed")

DOCS = Path(__file__).resolve().parents[1] / "docs"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


def _build_anova_page(tmp: Path) -> Path:
    src, out = tmp / "src", tmp / "html"
    src.mkdir()
    for name in ("anova.md", "conf.py", "printed.py"):
        shutil.copy(DOCS / name, src / name)
    # links to the other pages are left unresolved here (warnings, not errors)
    res = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-D",
                          "root_doc=anova", str(src), str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return out / "anova.html"


def test_maths_renders_offline(tmp_path: Path) -> None:
    page = _build_anova_page(tmp_path)
    html = page.read_text(encoding="utf-8")
    n_maths = len(re.findall(r'class="math notranslate nohighlight"', html))
    assert n_maths > 20  # the page is full of maths: the check below means something
    # every script is a file of the build: nothing is fetched from the network
    scripts = re.findall(r'<script[^>]*\ssrc="([^"]+)"', html)
    assert any("mathjax" in s for s in scripts), scripts
    assert not [s for s in scripts if re.match(r"(https?:)?//", s)], scripts
    mathjax = page.parent / re.sub(r"\?.*", "", next(s for s in scripts if "mathjax" in s))
    assert mathjax.is_file()
    if CHROMIUM is None:
        pytest.skip("headless Chromium not installed (CI: apt-get install -y chromium)")
    # the network is off: every host name fails to resolve and every proxy connection is
    # refused (port 9, discard); the virtual time budget lets MathJax typeset before the dump
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--virtual-time-budget=20000", "--dump-dom", page.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    body = res.stdout[res.stdout.index("<body"):]
    text = re.sub(r"<script.*?</script>", "", body, flags=re.S)
    assert text.count("<mjx-container") >= n_maths, "MathJax did not typeset the page"
    assert "\\(" not in text and "\\[" not in text, "raw TeX left on the page"
