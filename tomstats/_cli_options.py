"""Command-line conventions shared by every subcommand.

- Progress: ``--progress/--no-progress`` (default: on when stderr is a terminal, so redirected
  output never holds progress-bar lines); :func:`progress_wanted` resolves it.
- Figures: ``--no-figures`` wherever figures are made.
- Examples: every ``--help`` ends with an examples section (``tomstats.cli.EXAMPLES``), which
  :class:`DefaultsHelpFormatter` prints as written.
- Defaults: :class:`DefaultsHelpFormatter` appends ``(default: X)`` to every option's help that
  does not state its default already (options whose default is "not given" say in words what
  happens then).
- Several processes: :func:`add_distributed_arguments` (``--distributed``, ``--coordinator``,
  ``--num-processes``, ``--process-id``, ``--distributed-timeout``) on the commands that split
  their work over processes; :func:`start_distributed` joins the run before any work.
- Long silent phases: :func:`announce` prints one line on stderr when progress is on, e.g.
  before a first-run compilation (``compiling …, about N s, once per shape``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["DefaultsHelpFormatter", "add_distributed_arguments", "add_figures_argument",
           "add_progress_argument", "announce", "deprecated_alias", "progress_wanted",
           "start_distributed"]


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
    """The resolved ``--progress`` flag: given, or whether stderr is a terminal; always off on
    every process but process 0 of a multi-process run (one bar for the run)."""
    from tomstats import _distributed

    if not _distributed.is_writer():
        return False
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


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a multi-process run (docs/cluster.md): one process of N started by the
    user's launcher; without them the command runs alone, as always."""
    g = parser.add_argument_group(
        "several processes or hosts (jax.distributed; see docs/cluster.md)")
    g.add_argument("--distributed", action="store_true",
                   help="join a multi-process run described by the environment (SLURM's "
                        "srun, Open MPI's mpirun)")
    g.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                   help="join a multi-process run whose process 0 listens at HOST:PORT "
                        "(with --num-processes and --process-id)")
    g.add_argument("--num-processes", type=int, default=None, metavar="N",
                   help="processes of the run (with --coordinator)")
    g.add_argument("--process-id", type=int, default=None, metavar="I",
                   help="this process's index, 0..N-1; process 0 writes the outputs (with "
                        "--coordinator)")
    g.add_argument("--distributed-timeout", type=float, default=30.0, metavar="S",
                   help="seconds to reach the coordinator; a lost process ends the run on "
                        "every process within this time")


def start_distributed(args: argparse.Namespace) -> bool:
    """Join the multi-process run that ``args`` asks for (before any JAX work); whether one
    was asked. ``DistributedError`` when it cannot start."""
    from tomstats import _distributed

    wanted = bool(getattr(args, "distributed", False)) or any(
        getattr(args, k, None) is not None
        for k in ("coordinator", "num_processes", "process_id"))
    if not wanted:
        return False
    _distributed.start(getattr(args, "coordinator", None),
                       getattr(args, "num_processes", None),
                       getattr(args, "process_id", None),
                       timeout=float(getattr(args, "distributed_timeout", 30.0)))
    return True
