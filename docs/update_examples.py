"""Rerun the ``tomstats`` commands a docs page shows with their output, and check or rewrite
that output, so that the printed tables of a page are the commands' own.

A shown example is a ``console`` block that opens with one ``$ tomstats …`` command
(continuation lines joined) and goes on with what it prints. Each command runs in a scratch
folder that sees the repository's ``data/``, ``models/`` and ``simulations/`` and the
``../shared/data`` folder beside it, so files it writes (``--out``) land there; an input
that another command of the page writes (``tomstats fit … --out fit.nc`` before
``simulate --posterior fit.nc``) is made first by that command, and that command's own inputs
before it, unless ``--scratch DIR`` already holds them.

    python docs/update_examples.py docs/analysing-logs.md           # rewrite the outputs
    python docs/update_examples.py docs/analysing-logs.md --check   # exit 1 on a difference
    python docs/update_examples.py docs/glmm-real-data.md --scratch DIR  # reuse DIR's fits

``tests/test_docs_examples.py`` runs the check on the pages it lists. An output is stale
when it differs from the shown one by more than :mod:`printed` allows (the words and the
layout exactly, each number within one unit of its last printed digit: the last bits of a
sum differ between machines); an output that differs by no more is left as the page shows it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from printed import differences  # noqa: E402  (docs/printed.py, beside this file)

REPO = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"```console\n(.*?)```", flags=re.S)


@dataclasses.dataclass(frozen=True)
class Example:
    """One shown command: its argument list, the output the page prints, and where that
    output lies in the page's text."""

    argv: tuple[str, ...]
    output: str
    start: int
    end: int

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def examples(text: str) -> list[Example]:
    """The page's shown examples, in order (blocks with several commands or without output
    are not examples)."""
    out = []
    for m in _BLOCK.finditer(text):
        lines = m.group(1).splitlines(keepends=True)
        if not lines or not lines[0].startswith("$ tomstats "):
            continue
        cmd, i = lines[0], 1
        while cmd.rstrip("\n").endswith("\\") and i < len(lines):
            cmd = cmd.rstrip("\n")[:-1] + " " + lines[i].strip()
            i += 1
        rest = "".join(lines[i:])
        if not rest.strip() or any(x.startswith("$ ") for x in lines[i:]):
            continue
        start = m.start(1) + sum(len(x) for x in lines[:i])
        out.append(Example(tuple(shlex.split(cmd.strip().removeprefix("$ "))), rest, start,
                           start + len(rest)))
    return out


def run(example: Example, scratch: Path) -> str:
    """What the command prints on stdout, or on stderr when it fails (a page may show a
    refusal), run from ``scratch`` (see :func:`scratch_folder`)."""
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu", "COLUMNS": "200"}
    res = subprocess.run([sys.executable, "-m", "tomstats", *example.argv[1:]], cwd=scratch,
                         capture_output=True, text=True, timeout=600, env=env, check=False)
    if res.returncode == 2 and "error:" in example.output:
        return res.stderr
    if res.returncode != 0:
        raise RuntimeError(f"{example.command} exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout


def page_commands(text: str) -> list[tuple[str, ...]]:
    """Every ``$ tomstats …`` command of the page's console blocks (continuation lines
    joined), with or without output."""
    out = []
    for m in _BLOCK.finditer(text):
        for line in m.group(1).replace("\\\n", " ").splitlines():
            if line.startswith("$ tomstats "):
                out.append(tuple(shlex.split(line.removeprefix("$ "))))
    return out


def prepare(example: Example, text: str, scratch: Path,
            _making: frozenset[str] = frozenset()) -> None:
    """Run the page's commands that write an input of ``example`` absent from ``scratch``,
    each after the commands that write its own inputs (``evaluate --items items.jsonl --out
    run.jsonl`` after ``stories --out items.jsonl``)."""
    writers = {w[w.index("--out") + 1]: w for w in page_commands(text) if "--out" in w}
    for arg in example.argv[2:]:
        if (arg in writers and writers[arg] != example.argv and arg not in _making
                and not (scratch / arg).exists()):
            writer = Example(writers[arg], "", 0, 0)
            prepare(writer, text, scratch, _making | {arg})
            run(writer, scratch)


def scratch_folder(root: Path) -> Path:
    """A folder ``root/repo`` that sees the repository's inputs and ``../shared``."""
    repo = root / "repo"
    repo.mkdir()
    for name in ("data", "models", "simulations"):
        (repo / name).symlink_to(REPO / name)
    shared = REPO.parent / "shared"
    if shared.exists():
        (root / "shared").symlink_to(shared)
    return repo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=Path, help="the Markdown page (e.g. docs/analysing-logs.md)")
    ap.add_argument("--check", action="store_true",
                    help="compare only; exit 1 if an output differs (default: rewrite)")
    ap.add_argument("--scratch", type=Path, metavar="DIR",
                    help="run the commands in DIR, reusing the files already there (default: "
                         "a new temporary folder)")
    args = ap.parse_args(argv)
    text = args.page.read_text(encoding="utf-8")
    found = examples(text)
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = args.scratch or scratch_folder(Path(tmp))
        outputs = []
        for ex in found:  # in the page's order: a command may read what an earlier one wrote
            prepare(ex, text, scratch)
            outputs.append(run(ex, scratch))
        new = text
        for ex, got in reversed(list(zip(found, outputs, strict=True))):  # offsets hold
            if differences(ex.output, got):
                stale.insert(0, ex.command)
                new = new[: ex.start] + got + new[ex.end:]
    for c in stale:
        print(f"{'differs' if args.check else 'updated'}: {c}", file=sys.stderr)
    if args.check:
        return 1 if stale else 0
    if stale:
        tmp_page = args.page.with_suffix(".md.tmp")
        tmp_page.write_text(new, encoding="utf-8")
        tmp_page.replace(args.page)
    print(f"{args.page}: {len(found)} example(s), {len(stale)} rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
