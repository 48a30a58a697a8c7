"""Error messages whose advice speaks the syntax of the interface the user called.

A message of :mod:`tomstats.glmm` that tells the user what to pass names an option twice:
as a Python keyword (``fixed={'alpha': 0.0, 'delta': 0.0}``) for the library, and as a
command-line flag (``--option 'fixed={"alpha": 0, "delta": 0}'``) for ``tomstats fit``.
The message is written once with :func:`hint` markers; :class:`InputError` (a
``ValueError``) renders the Python form as its text and keeps the command-line form in
:attr:`InputError.cli`. The command-line runners translate in one place,
:func:`cli_syntax`, so every hint printed by ``tomstats fit``/``calibrate``/``compare`` is
a flag the user can type.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

__all__ = ["InputError", "cli_syntax", "column_hint", "hint", "option_hint", "render"]

_OPEN, _SEP, _CLOSE = "\x02", "\x1f", "\x03"
_HINT = re.compile(f"{_OPEN}(.*?){_SEP}(.*?){_CLOSE}", re.S)


def hint(python: str, cli: str) -> str:
    """A piece of advice in both syntaxes, to embed in a message (see :func:`render`)."""
    return f"{_OPEN}{python}{_SEP}{cli}{_CLOSE}"


def option_hint(name: str, value: Any, *, cli_value: str | None = None) -> str:
    """``name=value`` for Python, ``--option name=<JSON>`` for the command line.

    ``cli_value`` replaces the JSON text of ``value`` (e.g. a placeholder such as ``G``).
    """
    text = cli_value if cli_value is not None else json.dumps(value)
    return hint(f"{name}={value!r}", f"--option {shlex.quote(f'{name}={text}')}")


def column_hint(std: str = "...", column: str | None = None) -> str:
    """How to rename a column: ``columns={'item': ...}`` or ``--map item=COLUMN`` (the
    standard name on the left; ``column``, when known, in place of ``...``/``COLUMN``)."""
    if std == "...":
        return hint("columns={...}", "--map STANDARD=COLUMN")
    if column is not None:
        return hint(f"columns={{{std!r}: {column!r}}}", f"--map {std}={column}")
    return hint(f"columns={{{std!r}: ...}}", f"--map {std}=COLUMN")


def render(text: str, syntax: str = "python") -> str:
    """``text`` with every :func:`hint` in ``syntax`` (``"python"`` or ``"cli"``)."""
    group = 1 if syntax == "python" else 2
    return _HINT.sub(lambda m: m.group(group), text)


class InputError(ValueError):
    """Bad input whose message gives advice; ``str()`` is the Python form.

    Attributes
    ----------
    cli : str
        The same message with every hint in command-line syntax.
    """

    def __init__(self, message: str) -> None:
        self.raw = message
        super().__init__(render(message, "python"))

    @property
    def cli(self) -> str:
        """The message in command-line syntax."""
        return render(self.raw, "cli")


@contextlib.contextmanager
def cli_syntax() -> Iterator[None]:
    """Re-raise an :class:`InputError` as a ``ValueError`` in command-line syntax."""
    try:
        yield
    except InputError as exc:
        raise ValueError(exc.cli) from None
