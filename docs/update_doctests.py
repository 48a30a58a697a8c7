"""Run the pages' ``{doctest}`` blocks with Sphinx and rewrite each failing example's expected
output with what it printed, so that a page's Python examples are the code's own after a
change of the code or of a shipped log (``update_examples.py`` does the same for the
``console`` blocks of ``tomstats`` commands).

    python docs/update_doctests.py           # rewrite the failing examples' outputs
    python docs/update_doctests.py --check   # exit 1 when an example fails

Only an example whose expected output occurs once in its page is rewritten; any other
failure (an exception, an output shown twice) is printed and left for a person, with exit 1.
``tests/test_docs.py`` runs the same doctest build.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
_FAILED = re.compile(r'File "(?P<page>[^"]+)", line \d+, in \S+\nFailed example:\n'
                     r"(?P<ex>(?: {4}.*\n)+)Expected:\n(?P<exp>(?: {4}.*\n)+)"
                     r"Got:\n(?P<got>(?: {4}.*\n?)+)")


def _dedent(block: str) -> str:
    return "\n".join(line[4:] for line in block.rstrip("\n").splitlines())


def run_doctest(out: Path) -> tuple[int, str]:
    """Sphinx's doctest builder on ``docs/``: its exit code and its report."""
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "sphinx", "-q", "-b", "doctest", "-d", str(out / "doctrees"),
           str(DOCS), str(out / "doctest")]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    report = out / "doctest" / "output.txt"
    if report.exists():
        return res.returncode, report.read_text(encoding="utf-8")
    return res.returncode, res.stdout + res.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report, rewrite nothing")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rc, report = run_doctest(Path(tmp))
    if rc == 0:
        print("every doctest example passes")
        return 0
    failures = list(_FAILED.finditer(report))
    left = len(re.findall(r"^Failed example:", report, flags=re.M)) - len(failures)
    bad = 0
    for m in failures:
        page = DOCS / m["page"]
        expected, got = _dedent(m["exp"]), _dedent(m["got"])
        text = page.read_text(encoding="utf-8")
        if args.check or text.count(expected) != 1:
            print(f"{m['page']}: {m['ex'].strip()}\n  expected:\n{m['exp']}\n  got:\n{m['got']}")
            bad += 1
            continue
        tmp_page = page.with_suffix(page.suffix + ".tmp")
        tmp_page.write_text(text.replace(expected, got), encoding="utf-8")
        tmp_page.replace(page)
        print(f"rewrote {m['page']}: {m['ex'].strip()}")
    if left or (not failures):
        print(report[-4000:])
    return 1 if bad or left or not failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
