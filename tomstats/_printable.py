"""Control characters from data, made visible: the one escaping of text that data supplies
before it reaches a terminal, a Markdown file or an HTML page.

A model name, an answer or a column value can hold terminal escape sequences
(``\\x1b[2J`` clears the screen, ``\\x1b]0;…\\x07`` sets the window title), other C0 and C1
control characters, or the Unicode controls that reorder what is shown (bidirectional
overrides and isolates, as in "Trojan Source"). :func:`printable` writes each as a visible
escape (``\\x1b``, ``\\x9b``, ``\\u202e``), so the text shows what it holds and cannot act on
the screen or the page. Line feeds and tabs, the layout of printed tables, are kept
(``keep``).
"""

from __future__ import annotations

import io
import re
from typing import Any, TextIO

__all__ = ["CONTROL", "PrintableStream", "printable", "summary_line"]

#: What :func:`printable` escapes: C0 controls, DEL, C1 controls, and the Unicode
#: bidirectional controls (marks, embeddings, overrides, isolates).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: Any, keep: str = "\n\t") -> str:
    """``str(text)`` with every control character of :data:`CONTROL` except those in
    ``keep`` written as a visible escape.

    Examples
    --------
    >>> printable("gpt\\x1b[2J-4\\u202e")
    'gpt\\\\x1b[2J-4\\\\u202e'
    >>> printable("a\\nb", keep="")
    'a\\\\x0ab'
    """
    s = str(text)
    if CONTROL.search(s) is None:
        return s
    return CONTROL.sub(lambda m: m.group(0) if m.group(0) in keep else _escape(m.group(0)), s)


class PrintableStream(io.TextIOBase):
    """A text stream that writes :func:`printable` text to ``stream`` (line feeds and tabs
    kept): what a command prints cannot drive the terminal."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, s: str) -> int:  # type: ignore[override]
        self.stream.write(printable(s))
        return len(s)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None)


def summary_line(obj: Any, *parts: str, full: bool = True) -> str:
    """The ``repr`` of a result object: one line, ``<Class: part; part>``, never a dump of
    its arrays or tables; with ``full`` it ends by saying that ``print()`` shows the whole
    summary (the object's ``str``)."""
    tail = "; print() for the summary" if full else ""
    return printable(f"<{type(obj).__name__}: {'; '.join(p for p in parts if p)}{tail}>",
                     keep="")
