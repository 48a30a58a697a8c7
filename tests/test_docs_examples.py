"""Doc examples run verbatim: every command that reads one of the real data sets names it
where it lies (``../shared/data/…``, beside the repository, as docs/glmm-real-data.md says),
and the shipped SmolLM2 model file says what data/README.md says about its context window."""

from __future__ import annotations

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
    assert low > cfg["n_ctx"]  # why the 5,000-word stories are error records
    # any token count the model file's comments give is one the README gives
    comments = " ".join(line.partition("#")[2] for line in
                        toml_path.read_text(encoding="utf-8").splitlines())
    for count in re.findall(r"(\d[\d,.]*\s*k?)\s*tokens", comments):
        assert count.replace(" ", "") in readme.replace(" ", ""), (
            f"models/smollm2-local.toml says {count} tokens; data/README.md does not")


def test_the_shipped_logs_anova_output_is_the_commands():
    """docs/analysing-logs.md prints `tomstats anova data/smollm2_storysim_log.jsonl --ci
    0.95`: the page shows what the command prints now, byte for byte."""
    import subprocess
    import sys

    page = (REPO / "docs" / "analysing-logs.md").read_text(encoding="utf-8")
    cmd = "$ tomstats anova data/smollm2_storysim_log.jsonl --ci 0.95\n"
    shown = page.split(cmd, 1)[1].split("```", 1)[0]
    res = subprocess.run([sys.executable, "-m", "tomstats", "anova",
                          "data/smollm2_storysim_log.jsonl", "--ci", "0.95"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout == shown
