"""The Markdown report shows data as text, as the HTML report does: no tag, script or link
from a model name, an answer or a caption reaches report.md."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tomstats.cli import main
from tomstats.report._document import (
    Check,
    Document,
    Image,
    Section,
    Table,
    Text,
    Verdict,
    render_markdown,
)

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<!-- hidden -->",
    "[click](javascript:alert(1))",
    "![beacon](http://tracker.example/p.png)",
    "<https://evil.example>",
    "a | b\n# heading\n<iframe src=x>",
]


def _doc(s: str) -> Document:
    frame = pd.DataFrame({s: [s, 1.0]})
    return Document(title=s, subtitle=s, sections=(
        Section(s, (Text(s), Text(s, "note"), Text(s, "warning"), Table(frame, caption=s),
                    Image(b"\x89PNG\r\n\x1a\n", name=s, caption=s),
                    Verdict(s, (Check(s, False, s, s, s),)))),))


def _tags(md: str) -> list[str]:
    """HTML tags, comments or autolinks a Markdown renderer would pass through."""
    return re.findall(r"<[A-Za-z!/][^>]*>?", md)


@pytest.mark.parametrize("s", HOSTILE, ids=range(len(HOSTILE)))
def test_markdown_escapes_html_and_links(s: str) -> None:
    md, images = render_markdown(_doc(s))
    assert _tags(md) == []
    assert "](" not in md.replace(f"]({next(iter(images))})", "")  # only the figure's own link
    # the image file name is a plain file name in the folder
    (name,) = images
    assert re.fullmatch(r"[A-Za-z0-9_.-]+\.png", name) and not name.startswith(".")
    # the text is still there, escaped (shown literally by a renderer)
    assert "&lt;" in md or "]\\(" in md


def test_plain_text_is_unchanged() -> None:
    md, images = render_markdown(_doc("smollm2-local [0.112, 0.469] p ≤ 0.05"))
    assert "| smollm2-local [0.112, 0.469] p ≤ 0.05 |" in md
    assert list(images) == ["smollm2-local__0.112__0.469__p___0.05.png"]


def test_report_md_of_a_hostile_log(tmp_path: Path) -> None:
    """End to end: a CSV whose model names hold a script; ``report --format md``."""
    rows = ["correct,model,item,tom_order,context_words"]
    for m in ("<script>alert(1)</script>", "b"):
        for t in (0, 1, 2):
            for c in (200, 1000):
                for k in range(4):
                    rows.append(f"{(k + t) % 2},{m},i{t}{c}{k},{t},{c}")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["report", str(tmp_path / "t.csv"), "--format", "md", "--out",
                 str(tmp_path / "md"), "--n-boot", "0"]) == 0
    md = (tmp_path / "md" / "report.md").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert _tags(md) == []
