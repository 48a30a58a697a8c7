"""Command-line conventions shared by every subcommand.

- Progress: ``--progress/--no-progress`` (default: on when stderr is a terminal, so redirected
  output never holds progress-bar lines); :func:`progress_wanted` resolves it.
- Figures: ``--no-figures`` wherever figures are made.
- Examples: every ``--help`` ends with an examples section (``tomstats.cli.EXAMPLES``), which
  :class:`DefaultsHelpFormatter` prints as written.
- Defaults: :class:`DefaultsHelpFormatter` appends ``(default: X)`` to every option's help that
  does not state its default already (options whose default is "not given" say in words what
  happens then).
- Long silent phases: :func:`announce` prints one line on stderr when progress is on, e.g.
  before a first-run compilation (``compiling …, about N s, once per shape``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["DefaultsHelpFormatter", "add_figures_argument", "add_progress_argument",
           "announce", "deprecated_alias", "progress_wanted"]


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help text with every option's default: ``(default: X)`` is appended to an option's
    help unless the help states its default already, the option is required, hidden or an
    off switch (``store_true``). A ``None`` default reads ``(default: none)``: the option is
    not used unless given (options whose ``None`` means something else say so in words)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Descriptions are wrapped as usual; an examples section (``examples:`` and one
        command line a line) is kept as written, so each command can be copied whole."""
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or action.required or "default" in text.lower()
                or action.default is argparse.SUPPRESS or action.default is False
                or action.default is True or text == argparse.SUPPRESS):
            return text
        shown = "none" if action.default is None else "%(default)s"
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


def add_progress_argument(parser: argparse.ArgumentParser, what: str = "progress bar") -> None:
    """``--progress/--no-progress`` (default ``None``: on when stderr is a terminal)."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{what} on stderr (default: when stderr is a terminal)")


def progress_wanted(args: argparse.Namespace) -> bool:
    """The resolved ``--progress`` flag: given, or whether stderr is a terminal."""
    given = getattr(args, "progress", None)
    if given is not None:
        return bool(given)
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return False


def add_figures_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--no-figures``: skip the figures (``what`` names them, e.g. ``"power.png"``)."""
    parser.add_argument("--no-figures", action="store_true", help=f"skip {what}")


def announce(args: argparse.Namespace | None, message: str) -> None:
    """One line on stderr before a long silent phase, when progress is wanted."""
    if args is None or progress_wanted(args):
        print(message, file=sys.stderr, flush=True)


class _Deprecated(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, new: str = "",
                 **kw: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated; use {self.new} (same meaning)",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str,
                     **kw: Any) -> None:
    """``old`` still works as ``new`` (same ``dest``), with a deprecation line on stderr."""
    parser.add_argument(old, dest=dest, action=_Deprecated, new=new, default=None,
                        help=f"deprecated spelling of {new}", **kw)
