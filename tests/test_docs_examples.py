"""Doc examples run verbatim: every command that reads one of the real data sets names it
where it lies (``../shared/data/…``, beside the repository, as docs/glmm-real-data.md says),
and the shipped SmolLM2 model file says what data/README.md says about its context window."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
#: The real data sets of ../shared/data (docs/glmm-real-data.md lists them).
SHARED = ("storysim_items.csv", "tombench_items.csv", "chartom_mcqa_accuracy.csv",
          "hitom_items_meta.csv")


def commands(page: Path) -> list[list[str]]:
    """The ``tomstats …`` commands of a page's console and bash blocks, split as a shell
    would (continuation lines joined, ``$`` prompts and comments dropped)."""
    text = page.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```(?:console|bash|shell)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("tomstats "):
                out.append(shlex.split(line, comments=True))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_real_data_is_named_where_it_lies(page):
    wrong = []
    for words in commands(page):
        for w in words:
            name = w.split("=", 1)[-1]
            if Path(name).name in SHARED and name != f"../shared/data/{Path(name).name}":
                wrong.append(f"{' '.join(words[:2])} … {w}")
    assert not wrong, (f"{page.name}: give the real data's path (../shared/data/FILE, run from "
                       f"the repository root): {wrong}")


def test_smollm2_model_file_agrees_with_the_data_readme():
    toml_path = REPO / "models" / "smollm2-local.toml"
    cfg = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    readme = " ".join((REPO / "data" / "README.md").read_text(encoding="utf-8").split())
    window = re.search(r"context window (\d+) tokens", readme)
    assert window and int(window.group(1)) == cfg["n_ctx"]
    low, high = (int(v.replace(",", "")) for v in re.search(
        r"prompts take ([\d,]+)–([\d,]+) SmolLM2 tokens", readme).groups())
    log = REPO / "data" / "smollm2_storysim_log.jsonl"
    tokens = [json.loads(line)["prompt_tokens"] for line in log.read_text("utf-8").splitlines()]
    assert (low, high) == (min(tokens), max(tokens))  # the log's own counts
    assert high + cfg["max_tokens"] <= cfg["n_ctx"]  # every item fits, as the README says
    # any token count the model file's comments give is one the README gives
    comments = " ".join(line.partition("#")[2] for line in
                        toml_path.read_text(encoding="utf-8").splitlines())
    for count in re.findall(r"(\d[\d,.]*\s*k?)\s*tokens", comments):
        assert count.replace(" ", "") in readme.replace(" ", ""), (
            f"models/smollm2-local.toml says {count} tokens; data/README.md does not")


#: Pages whose shown command outputs (a ``console`` block: one ``$ tomstats …`` command and
#: what it prints) are rerun and compared as a reader compares them (docs/printed.py: words
#: and layout exactly, each number within one unit of its last printed digit);
#: ``python docs/update_examples.py PAGE`` rewrites them. Pages whose examples need minutes
#: (MCMC fits) are not listed.
OUTPUT_PAGES = ("analysing-logs.md", "contrasts.md")
#: Pages whose shown outputs take minutes (GLMM power runs: each study size and story
#: design compiles its own program), checked the same way in the slow set.
SLOW_OUTPUT_PAGES = ("planning.md",)


def _update_examples():
    import importlib.util
    import sys

    if "update_examples" in sys.modules:
        return sys.modules["update_examples"]
    spec = importlib.util.spec_from_file_location("update_examples",
                                                  REPO / "docs" / "update_examples.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["update_examples"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("page", OUTPUT_PAGES)
def test_shown_outputs_are_the_commands(page, tmp_path):
    """Each shown output is what its command prints now (the shipped log's ANOVA and
    contrasts, the shared StorySim tables' summaries and ANOVAs, a baseline run on length
    ladders, a refusal's message); an input that another command of the page writes (a fit,
    a log and the items it answers) is made first."""
    _check_shown_outputs(page, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW_OUTPUT_PAGES)
def test_slow_shown_outputs_are_the_commands(page, tmp_path):
    """The planning page's between- against within-story comparison (GLMM power runs at two
    parameter sets, about 3 to 5 minutes on two CPUs), checked as the pages above."""
    _check_shown_outputs(page, tmp_path)


def _check_shown_outputs(page: str, tmp_path: Path) -> None:
    ue = _update_examples()
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    found = ue.examples(text)
    assert found, f"{page} shows no command output"
    scratch = ue.scratch_folder(tmp_path)
    shared = (REPO.parent / "shared" / "data").is_dir()
    stale, skipped = [], []
    for ex in found:
        if any("../shared/" in a for a in ex.argv) and not shared:
            skipped.append(ex.command)
            continue
        ue.prepare(ex, text, scratch)  # an input an earlier command of the page writes
        bad = ue.differences(ex.output, ue.run(ex, scratch))
        if bad:
            stale.append(f"{ex.command}: {bad[:3]}")
    assert not stale, (f"{page}: outputs differ from the commands' (rewrite them with "
                       f"`python docs/update_examples.py docs/{page}`): {stale}")
    assert len(skipped) < len(found), "every example needs ../shared/data, which is absent"


def test_inputs_are_made_by_their_writers_in_order(tmp_path, monkeypatch):
    """An example's input that a command of the page writes is made first, and that
    command's own input before it (the items before the log that answers them)."""
    ue = _update_examples()
    text = ("```console\n$ tomstats stories --out items.jsonl --seed 0\n```\n"
            "```console\n$ tomstats evaluate --items items.jsonl --out run.jsonl\n```\n"
            "```console\n$ tomstats summarize run.jsonl\nTABLE\n```\n")
    ran = []

    def fake_run(example, scratch):
        ran.append(example.argv[1])
        (scratch / example.argv[example.argv.index("--out") + 1]).write_text("x")
        return ""

    monkeypatch.setattr(ue, "run", fake_run)
    (ex,) = ue.examples(text)
    ue.prepare(ex, text, tmp_path)
    assert ran == ["stories", "evaluate"]
    ue.prepare(ex, text, tmp_path)  # both files there: nothing is run again
    assert ran == ["stories", "evaluate"]


def test_example_parser_finds_commands_and_outputs():
    ue = _update_examples()
    text = ("intro\n```console\n$ tomstats anova a.csv \\\n    --ci 0.95\nTABLE\nrow\n```\n"
            "```console\n$ tomstats fit x.csv --out y.nc\n```\n"
            "```console\n$ tomstats a\n$ tomstats b\nout\n```\n")
    (ex,) = ue.examples(text)
    assert ex.argv == ("tomstats", "anova", "a.csv", "--ci", "0.95")
    assert ex.output == "TABLE\nrow\n" == text[ex.start: ex.end]


_FILE = re.compile(r"\.(jsonl|csv|tsv|parquet|nc|json|toml|txt)$")


def _inputs_and_outputs(words: list[str]) -> tuple[list[str], list[str]]:
    """The files a command reads (positional or option values with a data file's suffix, or
    a folder given to ``--simulation``) and those it writes (``--out``)."""
    ins, outs = [], []
    for i, w in enumerate(words[2:], 2):
        prev = words[i - 1].strip("[]")
        value = w.split("=", 1)[-1].strip("[]")
        if prev in ("--out", "-o"):
            outs.append(value.rstrip("/"))
        elif "$" not in value and (_FILE.search(value) or prev == "--simulation"):
            ins.append(value.rstrip("/"))
    return ins, outs


def _placeholders(text: str) -> set[str]:
    """Names the page's prose (outside code blocks) calls placeholders for the reader's own
    files: backticked names in a paragraph that says "placeholder" or "your own"."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    names: set[str] = set()
    for para in re.split(r"\n\s*\n", prose):
        if "placeholder" in para or "your own" in para:
            names.update(n.rstrip("/") for n in re.findall(r"`([^`\s]+)`", para))
    return names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_input_file_is_one_the_reader_has(page):
    """Each file a docs command reads is shipped in the repository, written by an earlier
    command on the same page, one of the real data sets under ``../shared/data``, or named a
    placeholder for the reader's own file in the page's text."""
    text = page.read_text(encoding="utf-8")
    named = _placeholders(text)
    made: set[str] = set()
    missing = []
    for block in re.findall(r"```(?:console|bash|shell)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.strip().removeprefix("$ ").split("&&"):
                part = part.strip()
                if not part.startswith("tomstats "):
                    continue
                ins, outs = _inputs_and_outputs(shlex.split(part, comments=True))
                for name in ins:
                    if not ((REPO / name).exists() or name in made or name in named
                            or name.startswith("../shared/data/")
                            or any(name.startswith(m + "/") for m in made)):
                        missing.append(f"tomstats {part.split()[1]} … {name}")
                made.update(outs)
    assert not missing, (f"{page.name}: inputs the reader does not have (ship them, make them "
                         f"earlier on the page, or call them placeholders for the reader's "
                         f"own files): {missing}")
