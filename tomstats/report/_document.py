"""A tiny document model (sections of text, tables, figures, verdicts) and its two renderers.

Reports are built as a :class:`Document` first and rendered second, so the HTML and the
Markdown versions cannot drift apart:

- :func:`render_html` writes one self-contained file: inline CSS, every image a base64
  ``data:image/png`` URI, no scripts and no network access needed to view it;
- :func:`write_markdown` writes ``report.md`` plus one PNG per figure into a folder.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tomstats._io import atomic_path, atomic_write_text, ensure_writable_dir, ensure_writable_file
from tomstats._printable import CONTROL, printable

__all__ = [
    "Check",
    "Document",
    "Image",
    "Section",
    "Table",
    "Text",
    "Verdict",
    "figure_png",
    "render_html",
    "render_markdown",
    "write_document",
]


@dataclass(frozen=True)
class Text:
    """A paragraph; ``kind`` is ``"p"`` (plain), ``"note"`` (boxed), ``"missing"`` (a part
    that could not be drawn) or ``"warning"`` (a finding the reader must not miss)."""

    text: str
    kind: str = "p"


@dataclass(frozen=True)
class Table:
    """A table with an optional caption; the index is shown when ``index`` is true."""

    frame: pd.DataFrame
    caption: str = ""
    index: bool = False
    float_format: str = "{:.4g}"


@dataclass(frozen=True)
class Image:
    """A PNG image (bytes) with a file stem (for Markdown) and a caption."""

    png: bytes
    name: str
    caption: str = ""


@dataclass(frozen=True)
class Check:
    """One pass/fail check of a verdict.

    Parameters
    ----------
    name : str
        What is checked (``"R-hat"``, ``"ToM % of total variance"``).
    passed : bool or None
        ``None`` when the check could not be made (the reason goes in ``detail``).
    value : str
        The measured value, formatted.
    threshold : str
        The rule it is held to (``"≤ 1.01"``).
    detail : str
        Offending parameters, or why the check was skipped.
    """

    name: str
    passed: bool | None
    value: str
    threshold: str
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """A headline verdict over several checks; shown first, in a coloured box."""

    title: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool | None:
        """``False`` if any check failed, ``None`` if none could be made, else ``True``."""
        states = [c.passed for c in self.checks]
        if any(s is False for s in states):
            return False
        if all(s is None for s in states):
            return None
        return True

    @property
    def label(self) -> str:
        """``PASS``, ``FAIL`` or ``UNKNOWN``."""
        return {True: "PASS", False: "FAIL", None: "UNKNOWN"}[self.passed]


Block = Text | Table | Image | Verdict


@dataclass(frozen=True)
class Section:
    """A titled list of blocks."""

    title: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Document:
    """A report: title, subtitle line, sections in order."""

    title: str
    subtitle: str
    sections: tuple[Section, ...]


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """Render a matplotlib :class:`~matplotlib.figure.Figure` to PNG bytes; every text of the
    figure (titles, labels, tick labels, legends: often data) with its control characters
    made visible (:func:`tomstats._printable.printable`)."""
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        text = t.get_text()
        if CONTROL.search(text):
            t.set_text(printable(text))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


# --------------------------------------------------------------------------- formatting


def _fmt(value: Any, float_format: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "—"
        return float_format.format(value)
    if value is None:
        return "—"
    return str(value)


def _cells(table: Table) -> tuple[list[str], list[list[str]]]:
    df = table.frame
    header = ([str(df.index.name or "")] if table.index else []) + [str(c) for c in df.columns]
    rows = []
    for idx, *values in df.itertuples(index=True, name=None):  # keeps per-column dtypes
        cells = [_fmt(v, table.float_format) for v in values]
        rows.append(([str(idx)] if table.index else []) + cells)
    return header, rows


CSS = """
:root { --pass: #1a7f37; --fail: #cf222e; --unknown: #9a6700; --line: #d0d7de; }
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328;
       margin: 0; background: #f6f8fa; line-height: 1.5; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { font-size: 1.8em; margin: 0.2em 0; } h2 { border-bottom: 1px solid var(--line);
     padding-bottom: 0.2em; margin-top: 1.8em; }
.subtitle { color: #59636e; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em;
        font-variant-numeric: tabular-nums; max-width: 100%; display: block; overflow-x: auto; }
th, td { border: 1px solid var(--line); padding: 4px 10px; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; white-space: nowrap; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: 4px; }
figure { margin: 1em 0 1.6em; } figure img { max-width: 100%; height: auto;
         border: 1px solid var(--line); }
figcaption { color: #59636e; font-size: 0.9em; margin-top: 4px; }
.verdict { border: 2px solid; border-radius: 8px; padding: 8px 16px 4px; margin: 1em 0; }
.verdict.pass { border-color: var(--pass); background: #dafbe1; }
.verdict.fail { border-color: var(--fail); background: #ffebe9; }
.verdict.unknown { border-color: var(--unknown); background: #fff8c5; }
.verdict h2 { border: 0; margin: 0.2em 0; font-size: 1.3em; }
.verdict table { background: #fff; }
td.pass { color: var(--pass); font-weight: 600; } td.fail { color: var(--fail);
          font-weight: 600; } td.unknown { color: var(--unknown); font-weight: 600; }
.note { background: #ddf4ff; border-left: 4px solid #0969da; padding: 6px 12px; }
.missing { background: #fff8c5; border-left: 4px solid var(--unknown); padding: 6px 12px; }
.warning { background: #ffebe9; border-left: 4px solid var(--fail); padding: 6px 12px; }
code { background: #f6f8fa; padding: 0 4px; border-radius: 4px; }
"""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _h(text: Any) -> str:
    """Text for the HTML page: control characters made visible
    (:func:`tomstats._printable.printable`), then HTML-escaped."""
    return html.escape(printable(text))


def _html_table(t: Table) -> str:
    header, rows = _cells(t)
    out = ["<table>"]
    if t.caption:
        out.append(f"<caption>{_h(t.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{_h(h)}</th>" for h in header)
               + "</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{_h(c)}</td>' if _NUMERIC.fullmatch(c)
            else f"<td>{_h(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


_RESULT = {True: "pass", False: "FAIL", None: "n/a"}


_NUMERIC = re.compile(r"[-+−]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?( ?%)?|—")


def _state(passed: bool | None) -> str:
    return {True: "pass", False: "fail", None: "unknown"}[passed]


def _html_verdict(v: Verdict) -> str:
    state = _state(v.passed)
    rows = "".join(
        f"<tr><td>{_h(c.name)}</td><td class=\"{_state(c.passed)}\">"
        f"{_RESULT[c.passed]}</td>"
        f"<td>{_h(c.value)}</td><td>{_h(c.threshold)}</td>"
        f"<td>{_h(c.detail)}</td></tr>"
        for c in v.checks
    )
    return (f'<section class="verdict {state}" id="verdict" data-verdict="{v.label}">'
            f"<h2>{_h(v.title)}: {v.label}</h2>"
            "<table><thead><tr><th>check</th><th>result</th><th>value</th><th>threshold</th>"
            f"<th>detail</th></tr></thead><tbody>{rows}</tbody></table></section>")


def _html_block(b: Block) -> str:
    if isinstance(b, Text):
        cls = "" if b.kind == "p" else f' class="{b.kind}"'
        return f"<p{cls}>{_h(b.text)}</p>"
    if isinstance(b, Table):
        return _html_table(b)
    if isinstance(b, Image):
        data = base64.b64encode(b.png).decode("ascii")
        cap = f"<figcaption>{_h(b.caption)}</figcaption>" if b.caption else ""
        return (f'<figure><img src="data:image/png;base64,{data}" '
                f'alt="{_h(b.caption or b.name)}">{cap}</figure>')
    if isinstance(b, Verdict):
        return _html_verdict(b)
    raise TypeError(f"unknown block type {type(b).__name__}")


def render_html(doc: Document) -> str:
    """Render ``doc`` as one self-contained HTML page (inline CSS, embedded PNGs)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_h(doc.title)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>{_h(doc.title)}</h1>",
        f'<p class="subtitle">{_h(doc.subtitle)}</p>',
    ]
    for s in doc.sections:
        if s.title:
            parts.append(f'<h2 id="{_slug(s.title)}">{_h(s.title)}</h2>')
        parts.extend(_html_block(b) for b in s.blocks)
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _md_text(text: str) -> str:
    """``text`` as literal Markdown: no HTML and no link from the data.

    ``<`` and ``>`` become ``&lt;`` and ``&gt;`` (a ``<script>`` tag or an autolink in a
    model name or an answer shows as text, as in the HTML report), ``](`` becomes
    ``]\\(`` so that no ``[text](url)`` link or ``![](url)`` image is formed from data, and
    control characters (terminal escapes) are written as visible escapes
    (:func:`tomstats._printable.printable`).
    """
    return (printable(text).replace("<", "&lt;").replace(">", "&gt;")
            .replace("](", "]\\("))


def _md_escape(text: str) -> str:
    """A table cell: :func:`_md_text` on one line, ``|`` escaped."""
    return _md_text(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_line(text: str) -> str:
    """A heading or one-line text: :func:`_md_text` with line breaks made spaces."""
    return " ".join(_md_text(text).splitlines())


def _md_file_stem(name: str) -> str:
    """An image's file stem safe in a folder and a link: letters, digits, ``_ - .`` only."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    return stem or "figure"


def _md_table(t: Table) -> str:
    header, rows = _cells(t)
    lines = []
    if t.caption:
        lines += [f"**{_md_line(t.caption)}**", ""]
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(doc: Document) -> tuple[str, dict[str, bytes]]:
    """Render ``doc`` as Markdown; returns the text and ``{file name: PNG bytes}``.

    Every string of the document is literal text, as in :func:`render_html`: HTML in it is
    escaped (:func:`_md_text`), so data cannot add a tag, a script or a link to the page.
    """
    parts = [f"# {_md_line(doc.title)}", "", f"*{_md_line(doc.subtitle)}*", ""]
    images: dict[str, bytes] = {}
    for s in doc.sections:
        if s.title:
            parts += [f"## {_md_line(s.title)}", ""]
        for b in s.blocks:
            if isinstance(b, Text):
                prefix = {"p": "", "note": "> ", "missing": "> **Missing:** ",
                          "warning": "> **Warning:** "}.get(b.kind, "")
                parts.append(prefix + _md_text(b.text))
            elif isinstance(b, Table):
                parts.append(_md_table(b))
            elif isinstance(b, Image):
                name = f"{_md_file_stem(b.name)}.png"
                if name in images:
                    raise ValueError(f"two images named {name!r} in one report")
                images[name] = b.png
                parts.append(f"![{_md_escape(b.name)}]({name})")
                if b.caption:
                    parts += ["", f"*{_md_line(b.caption)}*"]
            elif isinstance(b, Verdict):
                parts.append(f"### {_md_line(b.title)}: **{b.label}**")
                parts.append("")
                rows = [[c.name, {True: "pass", False: "**FAIL**", None: "n/a"}[c.passed],
                         c.value, c.threshold, c.detail] for c in b.checks]
                parts.append(_md_table(Table(pd.DataFrame(
                    rows, columns=["check", "result", "value", "threshold", "detail"]))))
            parts.append("")
    return "\n".join(parts).rstrip() + "\n", images


def check_output(out: str | os.PathLike[str], fmt: str) -> Path:
    """Validate ``--out`` for ``fmt`` (``html``: a file path; ``md``: a folder) before work."""
    if fmt == "html":
        return ensure_writable_file(out, "--out")
    if fmt == "md":
        p = Path(out)
        if p.exists() and not p.is_dir():
            raise ValueError(f"--out: {str(p)!r} exists and is not a folder "
                             "(--format md writes report.md and PNGs into a folder)")
        parent = p.parent if str(p.parent) else Path(".")
        if not p.exists():
            if not parent.is_dir():
                raise ValueError(f"--out: folder {str(parent)!r} of {str(p)!r} does not exist")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"--out: folder {str(parent)!r} is not writable")
        elif not os.access(p, os.W_OK | os.X_OK):
            raise ValueError(f"--out: folder {str(p)!r} is not writable")
        return p
    raise ValueError(f"--format: expected 'html' or 'md', got {fmt!r}")


def write_document(doc: Document, out: str | os.PathLike[str], fmt: str = "html") -> Path:
    """Write ``doc`` to ``out``; returns the path of the HTML or Markdown file.

    ``fmt="html"``: ``out`` is the HTML file, written atomically. ``fmt="md"``: ``out`` is a
    folder (created if needed) receiving the PNGs, then ``report.md`` (each file atomic;
    ``report.md`` last, so it never references a missing image).
    """
    out = check_output(out, fmt)
    if fmt == "html":
        atomic_write_text(out, render_html(doc))
        return out
    text, images = render_markdown(doc)
    folder = ensure_writable_dir(out, "--out")
    for name, png in images.items():
        with atomic_path(folder / name) as tmp:
            tmp.write_bytes(png)
    atomic_write_text(folder / "report.md", text)
    return folder / "report.md"


def table_from_records(records: Sequence[dict[str, Any]], caption: str = "") -> Table:
    """A :class:`Table` from a list of dicts (columns in first-seen order)."""
    return Table(pd.DataFrame.from_records(list(records)), caption=caption)
