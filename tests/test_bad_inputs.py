"""Bad input over every subcommand: exit 2, one line naming the file/field, nothing written.

Each case sets up files in a fresh folder, runs ``tomstats ...`` in-process and checks:

- the exit code is 2 ("bad input"; 1 means "re-run", 3 "a bug");
- stderr is exactly one line, starts with ``tomstats <command>: error:``, has no traceback,
  and contains every expected fragment (the file, field or value, the suggestion);
- no file in the folder was created, removed or changed.

The same cases double as documentation of the messages users see.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from evaluate._support import make_items
from stories.test_cli import BOARD as STORYBOARD

from tomstats.cli import COMMANDS, main
from tomstats.stories.items import ITEM_FORMAT

REPO = Path(__file__).resolve().parents[1]

SIM = """\
[design]
questions_per_cell = {n}
capability = [1.0]

[[design.factors]]
name = "context_length"
levels = [200, 1000]

[[design.factors]]
name = "tom_order"
levels = [0, 1]

[simulation]
replicates = {r}
"""




def _items(**first: object) -> str:
    """Three items as JSON Lines; ``first`` changes fields of the first one."""
    dicts = [it.to_dict() for it in make_items(3)]
    dicts[0].update(first)
    return "".join(json.dumps(d) + "\n" for d in dicts)


ITEMS = _items()
HEURISTIC = 'name = "h"\nbackend = "heuristic"\nstrategy = "oracle"\n'
OPENAI = ('name = "o"\nbackend = "openai"\nendpoint = "http://127.0.0.1:9/v1"\n'
          'model = "x"\n')


def _table(correct: Callable[[int], int] = lambda i: i % 2, orders: tuple[int, ...] = (0, 1, 2)
           ) -> str:
    """A per-question table (CSV) of two models over ToM order × context, 3 questions a cell."""
    rows = ["correct,model,item,tom_order,context_words"]
    i = 0
    for m in ("a", "b"):
        for t in orders:
            for c in (200, 1000):
                for k in range(3):
                    rows.append(f"{correct(i + k)},{m},i{t}{c}{k},{t},{c}")
                i += 1
    return "\n".join(rows) + "\n"


TABLE = _table()
#: two records of the shipped log; the second holds the key "correct" twice
_LOG_LINES = (REPO / "data" / "smollm2_storysim_log.jsonl").read_text("utf-8").splitlines()
DUP_KEY_LOG = (_LOG_LINES[0] + "\n" + _LOG_LINES[1][:-1] + ', "correct": 1}\n')
#: the table with a Latin-1 "é" in its first row (line 2, column 8)
LATIN1_TABLE = TABLE.replace(",a,i0200", ",a,caf\udce9", 1).encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Case:
    """One bad input: files to create, the argv (``{d}`` = the case folder), expectations."""

    id: str
    argv: list[str]
    expect: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    dirs: tuple[str, ...] = ()
    setup: Callable[[Path], None] | None = None


def _sim(n: int = 20, r: int = 10) -> str:
    return SIM.format(n=n, r=r)


CASES = [
    # ---- simulate / reproduce -------------------------------------------------------------
    Case("simulate-empty-toml", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "no simulation settings"), {"s.toml": "# nothing here\n"}),
    Case("simulate-unknown-table", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("unknown key 'desing'", "did you mean 'design'"),
         {"s.toml": _sim().replace("[design]", "[desing]").replace(
             "[[design.factors]]", "[[desing.factors]]")}),
    Case("simulate-unknown-key", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("[simulation]", "'replicats'", "did you mean 'replicates'"),
         {"s.toml": _sim().replace("replicates =", "replicats =")}),
    Case("simulate-unknown-parameter", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("[parameters]", "'gama'", "did you mean 'gamma'"),
         {"s.toml": _sim() + "\n[parameters]\ngama = 1.0\n"}),
    Case("simulate-unknown-design-key", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("[design]", "'questions_per_cel'", "did you mean 'questions_per_cell'"),
         {"s.toml": _sim().replace("questions_per_cell =", "questions_per_cel =")}),
    Case("simulate-one-question-per-cell", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("questions_per_cell", "one question per cell", "residual degrees of freedom"),
         {"s.toml": _sim(n=1)}),
    Case("simulate-negative-questions", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "[design] questions_per_cell must be >= 1", "-5"), {"s.toml": _sim(n=-5)}),
    Case("simulate-ragged-questions", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "[design] questions_per_cell must be a number or a (context × ToM) table",
          "[[1, 2], [3]]"), {"s.toml": _sim().replace("= 20", "= [[1, 2], [3]]", 1)}),
    Case("simulate-too-many-replicates", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("too large", "1,000,000,000,000 replicates", "--allow-large"),
         {"s.toml": _sim(r=10**12)}),
    Case("simulate-too-many-questions", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("too large", "2,000,000,000 questions", "--allow-large"),
         {"s.toml": _sim(n=2 * 10**9)}),
    Case("simulate-not-utf8", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "line 2", "not valid UTF-8", "0xff"),
         {"s.toml": b"# settings\n# caf\xff\n" + _sim().encode()}),
    Case("simulate-invalid-toml", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "invalid TOML"), {"s.toml": "[design\n"}),
    Case("simulate-missing-file", ["simulate", "{d}/nope.toml", "--out", "{d}/o"],
         ("nope.toml", "does not exist")),
    Case("reproduce-out-not-empty", ["reproduce", "--out", "{d}/o", "--replicates", "5"],
         ("--out", "already exists", "--force"), {"o/table1.csv": "old\n"}),
    Case("reproduce-out-is-file", ["reproduce", "--out", "{d}/o"],
         ("--out", "not a directory"), {"o": "x"}),
    Case("reproduce-bad-path", ["reproduce", "--out", "{d}/o", "--path", "fast"],
         ("--path", "'fast'")),
    Case("reproduce-zero-replicates", ["reproduce", "--out", "{d}/o", "--replicates", "0"],
         ("--replicates", "0")),
    # ---- power ------------------------------------------------------------------------------
    Case("power-unknown-test", ["power", "{d}/s.toml", "--out", "{d}/o", "--test", "anova:tom"],
         ("unknown test 'anova:tom'", "did you mean"), {"s.toml": _sim()}),
    Case("power-unknown-along", ["power", "{d}/s.toml", "--out", "{d}/o", "--along",
                                 "questions_per_cel=10,20"],
         ("'questions_per_cel'", "did you mean 'questions_per_cell'"), {"s.toml": _sim()}),
    Case("power-unknown-key", ["power", "{d}/s.toml", "--out", "{d}/o"],
         ("[power]", "'replicats'", "did you mean 'replicates'"),
         {"s.toml": _sim() + "\n[power]\nreplicats = 10\n"}),
    Case("power-too-large", ["power", "{d}/s.toml", "--out", "{d}/o", "--along",
                             "questions_per_cell=10,20", "--test", "glm-wald:delta",
                             "--replicates", "1000000000"],
         ("power run too large", "--allow-large"), {"s.toml": _sim()}),
    Case("power-out-not-empty", ["power", "{d}/s.toml", "--out", "{d}/o"],
         ("--out", "already exists", "--force"), {"s.toml": _sim(), "o/power.csv": "old\n"}),
    # ---- stories ----------------------------------------------------------------------------
    Case("stories-out-exists", ["stories", "--out", "{d}/items.jsonl", "--n", "1"],
         ("--out", "items.jsonl", "already exists", "--force"), {"items.jsonl": "{}\n"}),
    Case("stories-too-many", ["stories", "--out", "{d}/items.jsonl", "--n", "1000000000"],
         ("story set too large", "--allow-large")),
    Case("stories-storyboard-too-long", ["stories", "--storyboard", "{d}/sb.toml", "--out",
                                         "{d}/items.jsonl"],
         ("story set too large", "100,000,000 events each", "--allow-large"),
         {"sb.toml": STORYBOARD.replace("n = 30", "n = 100_000_000").replace(
             "stop = 30", "stop = 100_000_000")}),
    Case("stories-zero", ["stories", "--out", "{d}/items.jsonl", "--n", "0"],
         ("--n-per-cell", "0")),
    Case("stories-storyboard-typo", ["stories", "--storyboard", "{d}/sb.toml", "--out",
                                     "{d}/items.jsonl"],
         ("sb.toml", "unknown key 'seting'", "did you mean 'setting'"),
         {"sb.toml": STORYBOARD.replace('setting = "rooms"', 'seting = "calls"')}),
    Case("stories-storyboard-event-typo", ["stories", "--storyboard", "{d}/sb.toml", "--out",
                                           "{d}/items.jsonl"],
         ("sb.toml: event 1", "unknown key 'locaton'", "did you mean 'location'"),
         {"sb.toml": STORYBOARD.replace('location = "room_2"', 'locaton = "room_2"')}),
    Case("stories-storyboard-not-utf8", ["stories", "--storyboard", "{d}/sb.toml", "--out",
                                         "{d}/items.jsonl"],
         ("sb.toml", "line 4", "not valid UTF-8"),
         {"sb.toml": STORYBOARD.replace("n = 30", "n = 30 # \udcff", 1).encode(
             "utf-8", "surrogateescape")}),
    Case("stories-out-device", ["stories", "--out", "/dev/full", "--n", "1"],
         ("--out", "/dev/full", "not a regular file")),
    Case("stories-out-missing-folder", ["stories", "--out", "{d}/no/such/items.jsonl"],
         ("--out", "does not exist")),
    # ---- evaluate (more in evaluate/test_reliability.py) -----------------------------------
    Case("evaluate-cache-dir-is-file", ["evaluate", "--items", "{d}/i.jsonl", "--model",
                                        "{d}/o.toml", "--out", "{d}/run.jsonl",
                                        "--cache-dir", "{d}/i.jsonl"],
         ("--cache-dir", "i.jsonl", "not a directory"),
         {"i.jsonl": ITEMS, "o.toml": OPENAI}),
    Case("evaluate-out-device", ["evaluate", "--items", "{d}/i.jsonl", "--model", "{d}/h.toml",
                                 "--out", "/dev/full"],
         ("--out", "/dev/full", "not a regular file"), {"i.jsonl": ITEMS, "h.toml": HEURISTIC}),
    Case("evaluate-out-not-a-log", ["evaluate", "--items", "{d}/i.jsonl", "--model",
                                    "{d}/h.toml", "--out", "{d}/j.jsonl", "--no-progress"],
         ("j.jsonl:1", f"log format '{ITEM_FORMAT}' is not supported"),
         {"i.jsonl": ITEMS, "j.jsonl": ITEMS, "h.toml": HEURISTIC}),
    Case("evaluate-out-is-the-items", ["evaluate", "--items", "{d}/i.jsonl", "--model",
                                       "{d}/h.toml", "--out", "{d}/i.jsonl", "--no-progress"],
         ("--out", "i.jsonl", "is the same file as the input --items",
          "would destroy the input"),
         {"i.jsonl": ITEMS, "h.toml": HEURISTIC}),
    Case("evaluate-gold-not-a-candidate", ["evaluate", "--items", "{d}/i.jsonl", "--model",
                                           "{d}/h.toml", "--out", "{d}/run.jsonl"],
         ("i.jsonl:1", "gold answer 'the_moon' is not among its candidates"),
         {"i.jsonl": _items(answer="the_moon"), "h.toml": HEURISTIC}),
    Case("evaluate-model-typo", ["evaluate", "--items", "{d}/i.jsonl", "--model", "{d}/h.toml",
                                 "--out", "{d}/run.jsonl"],
         ("h.toml", "unknown key 'stratgy'", "did you mean 'strategy'"),
         {"i.jsonl": ITEMS, "h.toml": HEURISTIC.replace("strategy", "stratgy")}),
    Case("evaluate-items-not-utf8", ["evaluate", "--items", "{d}/i.jsonl", "--model",
                                     "{d}/h.toml", "--out", "{d}/run.jsonl"],
         ("--items", "i.jsonl", "line 2", "not valid UTF-8"),
         {"i.jsonl": ITEMS.replace("Story number 1", "Story \udcff 1").encode(
             "utf-8", "surrogateescape"), "h.toml": HEURISTIC}),
    # ---- fit ----------------------------------------------------------------------------------
    Case("fit-outcome-without-variance", ["fit", "{d}/t.csv", "--out", "{d}/f.nc"],
         ("outcome has no variance", "'correct' is 1 in all 36 rows"),
         {"t.csv": _table(correct=lambda i: 1)}),
    Case("fit-factor-with-one-level", ["fit", "{d}/t.csv", "--model",
                                       "correct ~ C(tom_order) + log_context", "--backend",
                                       "laplace", "--out", "{d}/f.json"],
         ("C(tom_order)", "single level", "'tom_order' is 0"), {"t.csv": _table(orders=(0,))}),
    Case("fit-formula-typo", ["fit", "{d}/t.csv", "--model", "correct ~ tom_ordr", "--backend",
                              "laplace", "--out", "{d}/f.json"],
         ("'tom_ordr'", "did you mean 'tom_order'"), {"t.csv": TABLE}),
    Case("fit-option-typo", ["fit", "{d}/t.csv", "--option", "item_efects=false", "--out",
                             "{d}/f.nc"],
         ("unknown key 'item_efects'", "did you mean 'item_effects'"), {"t.csv": TABLE}),
    Case("fit-out-exists", ["fit", "{d}/t.csv", "--out", "{d}/f.nc"],
         ("--out", "f.nc", "already exists", "--force"), {"t.csv": TABLE, "f.nc": "old"}),
    Case("fit-not-utf8", ["fit", "{d}/t.csv", "--out", "{d}/f.nc"],
         ("t.csv", "line 2, column 8", "not valid UTF-8", "0xe9"),
         {"t.csv": LATIN1_TABLE}),
    # ---- calibrate ------------------------------------------------------------------------------
    Case("calibrate-csv-suffix", ["calibrate", "{d}/f.nc", "--out", "{d}/p.csv"],
         ("--out", "p.csv", "unknown suffix '.csv'", ".toml", ".json"), {"f.nc": "x"}),
    Case("calibrate-missing-fit", ["calibrate", "{d}/nope.nc", "--out", "{d}/p.json"],
         ("nope.nc", "does not exist")),
    Case("calibrate-not-a-fit", ["calibrate", "{d}/t.csv", "--out", "{d}/p.json"],
         ("t.csv", "not a readable netCDF"), {"t.csv": TABLE}),
    # ---- compare --------------------------------------------------------------------------------
    Case("compare-one-fit", ["compare", "{d}/f.nc"], ("at least two fits", "got 1"),
         {"f.nc": "x"}),
    Case("compare-missing-fit", ["compare", "{d}/nope.nc", "{d}/f.nc"],
         ("nope.nc", "does not exist"), {"f.nc": "x"}),
    Case("compare-out-suffix", ["compare", "{d}/f.nc", "{d}/g.nc", "--out", "{d}/t.json"],
         ("--out", "t.json", "unknown suffix '.json'"), {"f.nc": "x", "g.nc": "x"}),
    # ---- summarize ------------------------------------------------------------------------------
    Case("summarize-by-typo", ["summarize", "{d}/t.csv", "--by", "modle"],
         ("no column 'modle'", "did you mean 'model'"), {"t.csv": TABLE}),
    Case("summarize-out-exists", ["summarize", "{d}/t.csv", "--out", "{d}/s.csv"],
         ("--out", "s.csv", "already exists", "--force"), {"t.csv": TABLE, "s.csv": "old"}),
    Case("summarize-not-utf8", ["summarize", "{d}/t.csv"],
         ("t.csv", "line 2, column 8", "not valid UTF-8"),
         {"t.csv": LATIN1_TABLE}),
    # ---- anova ----------------------------------------------------------------------------------
    Case("anova-dv-typo", ["anova", "{d}/t.csv", "--dv", "corect"],
         ("--dv", "no column 'corect'", "did you mean 'correct'"), {"t.csv": TABLE}),
    Case("anova-map-missing-column", ["anova", "{d}/t.csv", "--map", "tom_order=tom"],
         ("--map tom_order=tom", "no column 'tom'"), {"t.csv": TABLE}),
    Case("anova-out-exists", ["anova", "{d}/t.csv", "--out", "{d}/a.csv"],
         ("--out", "a.csv", "already exists", "--force"), {"t.csv": TABLE, "a.csv": "old"}),
    # ---- contrasts ------------------------------------------------------------------------------
    Case("contrasts-specs-typo", ["contrasts", "{d}/t.csv", "--specs", "tom_ordr"],
         ("specs", "'tom_ordr'", "did you mean 'tom_order'"), {"t.csv": TABLE}),
    Case("contrasts-tukey-on-trends", ["contrasts", "{d}/t.csv", "--method", "poly",
                                       "--adjust", "tukey"],
         ("tukey", "pairwise comparisons of means only"), {"t.csv": TABLE}),
    Case("contrasts-simple-one-factor", ["contrasts", "{d}/t.csv", "--simple"],
         ("--simple needs two or more --specs factors",), {"t.csv": TABLE}),
    Case("contrasts-at-without-fit", ["contrasts", "{d}/t.csv", "--at", "x=1,2"],
         ("--at applies with --fit only",), {"t.csv": TABLE}),
    Case("contrasts-out-exists", ["contrasts", "{d}/t.csv", "--out", "{d}/c.csv"],
         ("--out", "c.csv", "already exists", "--force"), {"t.csv": TABLE, "c.csv": "old"}),
    # ---- report ---------------------------------------------------------------------------------
    Case("report-out-exists", ["report", "{d}/t.csv", "--out", "{d}/r.html"],
         ("--out", "r.html", "already exists", "--force"), {"t.csv": TABLE, "r.html": "old"}),
    Case("report-sweep-draws-on-a-log", ["report", "{d}/t.csv", "--out", "{d}/r.html",
                                         "--sweep-draws", "5"],
         ("--sweep-draws", "evaluation log"), {"t.csv": TABLE}),
    Case("report-simulation-missing", ["report", "--simulation", "{d}/nope", "--out",
                                       "{d}/r.html"], ("nope", "does not exist")),
    Case("report-not-utf8", ["report", "{d}/t.csv", "--out", "{d}/r.html"],
         ("t.csv", "line 2, column 8", "not valid UTF-8"),
         {"t.csv": LATIN1_TABLE}),
    # ---- sizes, depths and numbers too large for the machine (exit 2, not 3) ---------------
    Case("anova-bootstrap-too-large", ["anova", "{d}/t.csv", "--ci", "0.95", "--n-boot",
                                       "1000000000"],
         ("bootstrap too large", "1,000,000,000 resamples", "--allow-large"), {"t.csv": TABLE}),
    Case("report-bootstrap-too-large", ["report", "{d}/t.csv", "--out", "{d}/r.html",
                                        "--n-boot", "1000000000"],
         ("bootstrap too large", "--allow-large"), {"t.csv": TABLE}),
    Case("anova-seed-too-large", ["anova", "{d}/t.csv", "--seed", str(2**63)],
         ("--seed", "2**63 - 1", str(2**63)), {"t.csv": TABLE}),
    Case("reproduce-seed-too-large", ["reproduce", "--out", "{d}/o", "--seed", str(2**64)],
         ("--seed must be at most 2**63 - 1", str(2**64))),
    Case("simulate-seed-too-large", ["simulate", "{d}/s.toml", "--out", "{d}/o", "--seed",
                                     str(2**63)],
         ("--seed must be at most 2**63 - 1",), {"s.toml": _sim()}),
    Case("power-seed-too-large", ["power", "{d}/s.toml", "--out", "{d}/o", "--seed",
                                  str(2**64)],
         ("seed must be an integer from 0 to 2**63 - 1", str(2**64)), {"s.toml": _sim()}),
    Case("fit-too-few-draws", ["fit", "{d}/t.csv", "--tune", "0", "--draws", "1", "--out",
                               "{d}/f.nc"],
         ("--draws must be at least 4", "got 1"), {"t.csv": TABLE}),
    Case("fit-too-many-draws", ["fit", "{d}/t.csv", "--draws", "10000000000", "--out",
                                "{d}/f.nc"],
         ("fit too large", "10,000,000,000 draws", "--allow-large"), {"t.csv": TABLE}),
    Case("fit-too-many-chains", ["fit", "{d}/t.csv", "--chains", "100000000", "--out",
                                 "{d}/f.nc"],
         ("fit too large", "100,000,000 chains", "--allow-large"), {"t.csv": TABLE}),
    Case("fit-seed-too-large", ["fit", "{d}/t.csv", "--seed", str(2**64), "--out", "{d}/f.nc"],
         ("--seed", "2**63 - 1"), {"t.csv": TABLE}),
    Case("fit-option-not-a-boolean", ["fit", "{d}/t.csv", "--option", "item_effects=maybe",
                                      "--out", "{d}/f.nc"],
         ("--option item_effects=maybe", "expected true or false"), {"t.csv": TABLE}),
    # ---- ambiguous input: one reading is not certain, so none is taken -------------------
    Case("summarize-duplicated-json-key", ["summarize", "{d}/l.jsonl"],
         ("l.jsonl:2", "the key 'correct' appears twice"), {"l.jsonl": DUP_KEY_LOG}),
    Case("anova-duplicated-csv-column", ["anova", "{d}/t.csv"],
         ("t.csv", "column 'tom_order' appears twice in the header", "columns 4 and 5"),
         {"t.csv": TABLE.replace("tom_order,context_words", "tom_order,tom_order", 1)}),
    Case("summarize-zero-rows", ["summarize", "{d}/t.csv"], ("t.csv", "no rows"),
         {"t.csv": TABLE.splitlines()[0] + "\n"}),
    Case("anova-absurd-context", ["anova", "{d}/t.csv"],
         ("t.csv", "context_words must be a finite number", "1e+308"),
         {"t.csv": TABLE.replace(",1000\n", ",1e308\n", 1)}),
    Case("simulate-absurd-context", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "context lengths must be at most", "1e+308"),
         {"s.toml": _sim().replace("levels = [200, 1000]", "levels = [200, 1e308]")}),
    Case("fit-absurd-context", ["fit", "{d}/t.csv", "--out", "{d}/f.nc"],
         ("t.csv", "context_words", "1e+30"), {"t.csv": TABLE.replace(",200\n", ",1e30\n", 1)}),
    Case("summarize-nested-json", ["summarize", "{d}/l.jsonl"], ("nested too deeply",),
         {"l.jsonl": "[" * 100_000 + "]" * 100_000 + "\n"}),
    Case("simulate-nested-toml", ["simulate", "{d}/s.toml", "--out", "{d}/o"],
         ("s.toml", "nested too deeply"), {"s.toml": "x = " + "[" * 100_000 + "]" * 100_000}),
]


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def run_case(case: Case, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Set up ``case`` in ``root``, run it and check the contract of the module docstring."""
    for name, content in case.files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    for d in case.dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    if case.setup is not None:
        case.setup(root)
    before = _snapshot(root)
    capsys.readouterr()
    try:
        rc = main([a.replace("{d}", str(root)) for a in case.argv])
    except SystemExit as exc:  # refused while the command line was parsed
        rc = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    command = case.argv[0]
    assert rc == 2, f"{case.id}: exit {rc}, stderr: {err}"
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"{case.id}: expected one line, got {lines}"
    assert lines[0].startswith(f"tomstats {command}: error: "), lines[0]
    for fragment in case.expect:
        assert fragment in lines[0], f"{case.id}: {fragment!r} not in {lines[0]!r}"
    assert _snapshot(root) == before, f"{case.id}: files changed"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    if "/dev/full" in case.argv and not Path("/dev/full").exists():
        pytest.skip("/dev/full does not exist on this system")
    monkeypatch.chdir(tmp_path)  # a default output (a cache folder) would land in the snapshot
    run_case(case, tmp_path, capsys)


def test_cases_cover_every_subcommand() -> None:
    """At least 40 cases, and at least two for every command ``tomstats --help`` lists."""
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    per_command = {name: sum(c.argv[0] == name for c in CASES) for name in COMMANDS}
    assert all(n >= 2 for n in per_command.values()), per_command


# ---- the Python API: a wrong type is a TypeError naming the argument ----------------------


def test_api_wrong_types_name_the_argument() -> None:
    import tomstats

    with pytest.raises(TypeError, match=r"^design must be a tomstats.Design.*got str 'paper'"):
        tomstats.simulate("paper", tomstats.PAPER_PARAMS)
    with pytest.raises(TypeError, match=r"^params must be a tomstats.Params.*got dict"):
        tomstats.simulate(tomstats.paper_design(), {"alpha": 1.0})
    with pytest.raises(TypeError, match=r"^config must be a tomstats.StudyConfig.*got str"):
        tomstats.run_study("simulations/paper.toml")
    with pytest.raises(TypeError, match=r"^file must be a path to a simulation TOML.*got int"):
        tomstats.load_study(3)
    with pytest.raises(TypeError, match=r"^study must be"):
        tomstats.power(3)
    with pytest.raises(TypeError, match=r"^design must be a tomstats.Design.*got str 'paper'"):
        tomstats.expected_cells("paper", tomstats.PAPER_PARAMS)
    with pytest.raises(TypeError, match=r"^params must be a tomstats.Params.*got dict"):
        tomstats.simulate_questions(tomstats.paper_design(), {"alpha": 1.0})
    with pytest.raises(TypeError, match=r"^params must be a tomstats.Params.*got dict"):
        tomstats.linear_predictor({"alpha": 1.0}, 200.0, 1)
    with pytest.raises(TypeError, match=r"^params must be a tomstats.Params.*got str"):
        tomstats.cell_probabilities("paper", 200.0, 1)
    with pytest.raises(TypeError, match=r"^arrs must be the AnovaArrays.*got dict"):
        tomstats.systematic_share({"SS": 1})
    with pytest.raises(TypeError, match=r"^result must be a StudyResult.*got str"):
        tomstats.write_study("paper", "out")


def test_stories_api_wrong_types_name_the_argument(tmp_path: Path) -> None:
    from tomstats.stories import generate_story, validate_storyboard, write_items

    with pytest.raises(TypeError, match=r"^sb must be a tomstats.stories.Storyboard.*got str"):
        generate_story("rooms", 0)
    with pytest.raises(TypeError, match=r"^sb must be a tomstats.stories.Storyboard.*None"):
        validate_storyboard(None)
    with pytest.raises(TypeError, match=r"^items must be an iterable of tomstats Item.*str"):
        write_items(tmp_path / "i.jsonl", "items")
    with pytest.raises(TypeError, match=r"^items must hold tomstats Item objects, got dict"):
        write_items(tmp_path / "i.jsonl", [make_items(1)[0], {"item_id": "x"}])
    assert list(tmp_path.iterdir()) == []


def test_read_items_names_file_and_line(tmp_path: Path) -> None:
    from tomstats.stories import read_items

    p = tmp_path / "i.jsonl"
    p.write_bytes(ITEMS.encode() + b'{"item_id": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"i.jsonl: line 4, column 17: not valid UTF-8"):
        read_items(p)
    p.write_text(ITEMS + "[1, 2]\n")
    with pytest.raises(ValueError, match=r"i.jsonl:4: an item must be a JSON object, got list"):
        read_items(p)


def test_api_size_guard_and_override() -> None:
    import tomstats

    design = tomstats.paper_design().with_(n_per_cell=2 * 10**9)
    with pytest.raises(ValueError, match="simulation too large.*allow_large=True"):
        tomstats.simulate(design, tomstats.PAPER_PARAMS, replicates=2)
    # the override really skips the guard: a small run that the guard would refuse when the
    # machine reports too little memory goes through with allow_large=True
    import tomstats._guards as guards

    small = tomstats.paper_design().with_(n_per_cell=20, capability=(1.0,))
    orig = guards.available_memory
    try:
        guards.available_memory = lambda: 1000  # a 1 kB machine
        with pytest.raises(ValueError, match="too large"):
            tomstats.simulate(small, tomstats.PAPER_PARAMS, replicates=2, progress=False)
        ds = tomstats.simulate(small, tomstats.PAPER_PARAMS, replicates=2, progress=False,
                               allow_large=True)
    finally:
        guards.available_memory = orig
    assert ds["F"].shape[0] == 2


def test_out_dir_failure_names_out_not_temp(tmp_path: Path, monkeypatch, capsys) -> None:
    """A failed write while publishing a folder names --out, never the temporary folder."""
    import tomstats._io as io

    real = os.replace

    def failing(src, dst):
        if str(dst) == str(tmp_path / "o"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", failing)
    rc = main(["reproduce", "--out", str(tmp_path / "o"), "--replicates", "5", "--quiet",
               "--no-figures"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0, err
    assert f"cannot write '{tmp_path / 'o'}': disk full (No space left on device)" in err
    assert ".tmp" not in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv,needle", [
    (["anova", "log.jsonl", "--ss-type", "4"], "argument --ss-type: invalid choice: 4"),
    (["fitt"], "invalid choice: 'fitt'"),
    (["power"], "the following arguments are required: --out"),
    (["summarize", "log.jsonl", "--level"], "argument --level: expected one argument"),
])
def test_usage_errors_are_one_line_exit_2(argv: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and needle in err[0] and err[0].endswith("--help)"), err


def test_power_without_a_study_or_a_fit_says_which_to_give(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give a simulation TOML" in err[0] and "--from-fit" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_disk_full_while_writing_a_fit(tmp_path: Path, monkeypatch, capsys) -> None:
    """ENOSPC half-way through the netCDF: exit 2, "disk full", nothing half-written."""
    import errno

    import arviz as az

    def full(self, filename, *args, **kwargs):
        Path(filename).write_bytes(b"\x89HDF half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "t.csv").write_text(TABLE, encoding="utf-8")
    monkeypatch.setattr(az.InferenceData, "to_netcdf", full)
    rc = main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "f.nc"), "--chains",
               "1", "--draws", "20", "--tune", "20", "--no-progress"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1, err
    assert f"cannot write '{tmp_path / 'f.nc'}': disk full" in err[0] and ".tmp" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.parametrize("exc,needle", [
    (MemoryError(), "out of memory"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (OverflowError("Python int too large to convert to C long"), "a number is too large"),
])
def test_resource_errors_are_bad_input(exc, needle, monkeypatch, capsys) -> None:
    """Inputs too big or too deep for the machine: one line, exit 2 (they were exit 3)."""
    import tomstats.analysis.cli as analysis_cli

    def boom(args):
        raise exc

    monkeypatch.setattr(analysis_cli, "run_summarize", boom)
    rc = main(["summarize", "log.jsonl"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("tomstats summarize: error: ") and needle in err[0]
    assert "a bug in tomstats" not in err[0]
