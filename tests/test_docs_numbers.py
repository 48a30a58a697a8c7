"""Numbers in the docs that a command produces are checked against that command.

Each test runs the command a page documents, with the page's settings and seed, and compares
every number of the page's table (as printed: two decimals, "10 (or fewer)", "≈ 116") with
the result, so a changed simulator, test or seed cannot leave a stale table behind. The
cheap ones run by default; the long ones (minutes of GLMM fits) are marked ``slow``, and the
default suite checks the same machinery through the cheaper tables of the same page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tomstats
from tomstats.model import Params
from tomstats.simulation.study import StudyConfig, load_study

REPO = Path(__file__).resolve().parents[1]
PLANNING = REPO / "docs" / "planning.md"
POWER_TOML = REPO / "simulations" / "power.toml"


def table_after(page: Path, anchor: str) -> list[list[str]]:
    """The rows (header first, separator dropped) of the first Markdown table after the
    first occurrence of ``anchor`` in ``page``, each a list of stripped cells."""
    text = page.read_text(encoding="utf-8")
    start = text.index(anchor)
    rows, seen = [], False
    for line in text[start:].splitlines():
        if line.startswith("|"):
            seen = True
            # cells split at the unescaped pipes (a cell may hold `(1 \| g)`)
            cells = [c.strip().replace("\\|", "|")
                     for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif seen:
            break
    assert rows, f"no table after {anchor!r} in {page.name}"
    return rows


def two(x: float) -> str:
    return f"{x:.2f}"


def agrees(shown: str, value: float) -> bool:
    """Whether a number as the page prints it ("0.38", "38.9", "5.45") is ``value`` rounded
    to the printed decimals (either way at an exact half, as binary floats fall)."""
    decimals = len(shown.partition(".")[2])
    return abs(float(shown) - value) <= 0.5 * 10.0 ** -decimals + 1e-9


def smallest_text(target: dict, smallest: float) -> str:
    """How the page writes a target: "10 (or fewer)", "150 (≈ 116)" or "—"."""
    if not target["reached"]:
        return "—"
    v = target["value"]
    if v == smallest:
        return f"{v} (or fewer)"
    return f"{v} (≈ {round(target['interpolated'])})"


def _power_by(res, test: str) -> dict[float, float]:
    df = res.frame()
    df = df[(df["kind"] == "plug-in") & (df["test"] == test)]
    return dict(zip(df["value"].astype(float), df["power"], strict=True))


def test_planning_paper_design_table():
    """docs/planning.md, "The paper's design at the default parameters": the command
    `tomstats power simulations/power.toml` (its [power] table: 1,000 studies, seed 0)."""
    cfg = load_study(POWER_TOML)
    assert (cfg.power.replicates, cfg.power.seed) == (1000, 0)
    res = tomstats.power(cfg, progress=False)
    rows = table_after(PLANNING, "`tomstats power simulations/power.toml --out power/` (1,000")
    head = rows[0][1]
    shown = [float(v) for v in re.findall(r"\d+", head.split("at", 1)[1])]
    targets = {t["test"]: t for t in res.target_records()}
    smallest = min(res.frame()["value"])
    for test_cell, powers, target_cell in rows[1:]:
        test = test_cell.strip("`")
        got = _power_by(res, test)
        assert powers.split(" / ") == [two(got[v]) for v in shown], test
        assert target_cell == smallest_text(targets[test], smallest), test


def test_planning_glmm_table():
    """docs/planning.md, "The GLMM pools the LLMs": 200 studies per value, seed 0 (about
    50 s: 1,000 GLMM fits of 150-1,500 rows and five compilations)."""
    res = tomstats.power(load_study(POWER_TOML), along={"questions_per_cell": [2, 4, 6, 10, 20]},
                         tests=["glmm-wald:delta", "glmm-lrt:delta"], replicates=200,
                         progress=False)
    rows = table_after(PLANNING, "--test glmm-wald:delta --test glmm-lrt:delta --replicates "
                                 "200 --out power-glmm/")
    shown = [float(v) for v in rows[0][1:]]
    for test_cell, *powers in rows[1:]:
        got = _power_by(res, test_cell.strip("`"))
        assert all(agrees(c, got[v]) for c, v in zip(powers, shown, strict=True)), (
            test_cell, powers, [got[v] for v in shown])
    # the sentence after the table: the smallest size each test reaches 80 % at
    text = PLANNING.read_text(encoding="utf-8")
    t = {d["test"]: d["value"] for d in res.target_records()}
    sentence = re.search(r"[Tt]he Wald test reaches 80 % at (\d+) questions per cell and LLM "
                         r"and the likelihood-ratio test at (\d+)", " ".join(text.split()))
    assert sentence, "the sentence giving the GLMM sizes is missing"
    assert (int(sentence.group(1)), int(sentence.group(2))) == (
        t["glmm-wald:delta"], t["glmm-lrt:delta"])


def _rm_null(sigma: float, n_llms: int, questions: list[int], **kw):
    from tomstats.design import paper_design

    return tomstats.power(StudyConfig(design=paper_design(),
                                      params=Params(7e-5, 0.0, 0.0, sigma)),
                          along={"questions_per_cell": questions}, n_llms=n_llms,
                          tests=["rm-anova:tom_order", "rm-anova:interaction"],
                          replicates=2000, seed=1, progress=False, **kw)


def percents(cell: str) -> list[str]:
    return re.findall(r"(\d+(?:\.\d+)?) %", cell)


@pytest.mark.slow
def test_planning_grid_table():
    """docs/planning.md, "Two dimensions at once": --by n_llms=3,5,8 (minutes of GLMM fits;
    the default suite checks --by against single runs, tests/planning/test_power.py, and the
    GLMM test of the same command with five fixed LLMs above)."""
    res = tomstats.power(load_study(POWER_TOML), along={"questions_per_cell": [2, 4, 6, 10, 20]},
                         by={"n_llms": [3, 5, 8]}, tests=["glmm-wald:delta", "glmm-lrt:delta"],
                         replicates=200, progress=False)
    rows = table_after(PLANNING, "| `glmm-wald:delta` | 2 | 4 | 6 | 10 | 20 |")
    shown = [float(v) for v in rows[0][1:6]]
    df = res.frame()
    targets = {t["by_value"]: t for t in res.target_records() if t["test"] == "glmm-wald:delta"}
    for row in rows[1:]:
        n_llms = int(row[0].split()[0])
        sub = df[(df["by_value"] == n_llms) & (df["test"] == "glmm-wald:delta")]
        got = dict(zip(sub["value"].astype(float), sub["power"], strict=True))
        assert all(agrees(c, got[v]) for c, v in zip(row[1:6], shown, strict=True)), (
            n_llms, row, got)
        assert row[6] == smallest_text(targets[n_llms], min(shown)), n_llms
        # answers per study at the interpolated size: LLMs × 15 cells × questions per cell
        answers = float(row[7].strip("≈ ").replace(",", ""))
        assert abs(answers - targets[n_llms]["interpolated"] * n_llms * 15) <= 10, row


@pytest.mark.slow
def test_planning_llms_table():
    """docs/planning.md, "How many LLMs": --along n_llms=3,5,8,12,20 --questions-per-cell 20."""
    tests = ["rm-anova:interaction", "rm-anova:tom_order", "glmm-wald:delta", "glmm-lrt:delta"]
    res = tomstats.power(load_study(POWER_TOML), along={"n_llms": [3, 5, 8, 12, 20]},
                         questions_per_cell=20, tests=tests, replicates=200, progress=False)
    rows = table_after(PLANNING, "| LLMs | 3 | 5 | 8 | 12 | 20 |")
    shown = [float(v) for v in rows[0][1:]]
    for test_cell, *powers in rows[1:]:
        got = _power_by(res, test_cell.strip("`"))
        assert all(agrees(c, got[v]) for c, v in zip(powers, shown, strict=True)), (
            test_cell, powers, got)


@pytest.mark.slow
def test_planning_rm_anova_null_table():
    """docs/planning.md, "But the stories are a sample too": rejection rates with γ = δ = 0."""
    rows = table_after(PLANNING, "The rejection rate of the order and interaction tests when "
                                 "neither effect exists")
    for row in rows[1:]:
        n_llms = int(row[0])
        for j, sigma in ((1, 0.0), (3, 0.6)):
            res = _rm_null(sigma, n_llms, [20, 80])
            for k, test in enumerate(("rm-anova:tom_order", "rm-anova:interaction")):
                got = _power_by(res, test)
                shown = percents(row[j + k])
                assert len(shown) == 2, row
                assert agrees(shown[0], 100 * got[20.0]) and agrees(shown[1], 100 * got[80.0]), (
                    n_llms, sigma, test, shown, got)


@pytest.mark.slow
def test_planning_correction_table():
    """docs/planning.md: GG / HF / none at σ = 0, 20 questions per cell."""
    rows = table_after(PLANNING, "| LLMs | GG (default) | HF | none |")
    for row in rows[1:]:
        n_llms = int(row[0])
        for cell, corr in zip(row[1:], ("GG", "HF", "none"), strict=True):
            res = _rm_null(0.0, n_llms, [20], correction=corr)
            got = [_power_by(res, t)[20.0] for t in ("rm-anova:tom_order",
                                                   "rm-anova:interaction")]
            shown = percents(cell)
            assert len(shown) == 2 and all(agrees(a, 100 * b) for a, b in zip(
                shown, got, strict=True)), (n_llms, corr, shown, got)


@pytest.mark.slow
def test_planning_glmm_type_one_error():
    """docs/planning.md, "Type I error": the GLMM's rate on 2,000 null studies, seed 12
    (minutes of GLMM fits; the default suite checks it on 400 fresh studies within 3 MC se,
    tests/planning/test_power.py)."""
    p = StudyConfig().params
    res = tomstats.power(StudyConfig(), Params(p.alpha, p.gamma, 0.0, p.sigma),
                         along={"questions_per_cell": [20]},
                         tests=["glmm-wald:delta", "glmm-lrt:delta", "glm-wald:delta"],
                         replicates=2000, seed=12, progress=False)
    rows = table_after(PLANNING, "| test | setting (δ = 0 or γ = δ = 0) | studies |")
    glmm = next(r for r in rows if r[0].startswith("`glmm-wald:delta`"))
    glm = next(r for r in rows if r[0] == "`glm-wald:delta`")
    wald, lrt = (_power_by(res, t)[20.0] for t in ("glmm-wald:delta", "glmm-lrt:delta"))
    shown = percents(glmm[3])
    assert len(shown) >= 2 and agrees(shown[0], 100 * wald) and agrees(shown[1], 100 * lrt)
    assert agrees(percents(glm[3])[0], 100 * _power_by(res, "glm-wald:delta")[20.0])
    # the text after the table repeats the Wald rate
    text = " ".join(PLANNING.read_text(encoding="utf-8").split())
    assert f"checks the {shown[0]} %" in text


def _console_commands(page: Path, anchor: str) -> list[list[str]]:
    """The ``tomstats`` commands of the first console block after ``anchor`` (continuation
    lines joined), as argument lists."""
    import shlex

    text = page.read_text(encoding="utf-8")
    block = text[text.index(anchor):].split("```console\n", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(x.removeprefix("$ ")) for x in lines if x.startswith("$ tomstats ")]


@pytest.mark.slow
def test_planning_assurance_table(tmp_path):
    """docs/planning.md, "Assurance": the page's two commands as printed — the structural fit
    of the StorySim triplets (4 chains × 500 draws, the fit's default seed) and the power run
    on its posterior (1,000 studies per value, seed 0) — give every cell of the table, the
    fit's γ and sd quoted before it, and the interpolated sizes quoted after it (about 2 min
    on two CPUs)."""
    import json
    import subprocess
    import sys

    import pandas as pd

    shared = REPO.parent / "shared" / "data" / "storysim_items.csv"
    if not shared.is_file():
        pytest.skip("the StorySim table is absent (../shared/data/storysim_items.csv)")
    anchor = "## Assurance: power given what real LLMs showed"
    fit_cmd, power_cmd = _console_commands(PLANNING, anchor)
    assert fit_cmd[1] == "fit" and power_cmd[1] == "power"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "simulations").symlink_to(REPO / "simulations")
    (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    for cmd in (fit_cmd, power_cmd):
        res = subprocess.run([sys.executable, "-m", "tomstats", *cmd[1:], "--no-progress"],
                             cwd=repo, capture_output=True, text=True, timeout=1200,
                             check=False)
        assert res.returncode == 0, (cmd, res.stderr[-3000:])
    out = repo / power_cmd[power_cmd.index("--out") + 1]
    df = pd.read_csv(out / "power.csv")
    text = PLANNING.read_text(encoding="utf-8")
    rows = table_after(PLANNING, anchor)
    shown = [float(v) for v in rows[0][1:]]
    for label, *cells in rows[1:]:
        test = re.search(r"`([^`]+)`", label).group(1)
        kind = "assurance" if "assurance" in label else "plug-in"
        sub = df[(df["kind"] == kind) & (df["test"] == test)]
        got = dict(zip(sub["value"].astype(float), sub["power"], strict=True))
        assert all(agrees(c, got[v]) for c, v in zip(cells, shown, strict=True)), (
            label, cells, [got[v] for v in shown])
    # the fit quoted before the table: γ and its posterior sd
    from tomstats.glmm import load_fit

    post = load_fit(repo / fit_cmd[fit_cmd.index("--out") + 1]).posterior["gamma"]
    quoted = re.search(r"γ = ([\d.]+) \(sd ([\d.]+)\), with every model",
                       " ".join(text[text.index(anchor):].split()))
    assert quoted, "the sentence quoting the fit's γ is missing"
    assert agrees(quoted.group(1), float(post.mean())), (quoted.group(1), float(post.mean()))
    assert agrees(quoted.group(2), float(post.std())), (quoted.group(2), float(post.std()))
    # the sizes after the table: "about N questions … for the ANOVA", assurance "about M"
    targets = {(t["kind"], t["test"]): t for t in json.loads(
        (out / "summary.json").read_text())["targets"]}
    after = " ".join(text[text.index(anchor):].split())
    sizes = re.search(r"80 % plug-in power comes at about (\d+) questions per cell and LLM "
                      r"for the ANOVA, and .*? reaches it only at about (\d+)", after)
    assert sizes, "the sentence giving the interpolated sizes is missing"
    for quoted_n, key in zip(sizes.groups(), (("plug-in", "anova:tom_order"),
                                              ("assurance", "anova:tom_order")), strict=True):
        assert int(quoted_n) == round(targets[key]["interpolated"], -1), (quoted_n, key)


ANALYSING = REPO / "docs" / "analysing-logs.md"


def test_analysing_logs_prose_quotes_the_shown_anova():
    """docs/analysing-logs.md's reading of the shipped log's ANOVA quotes the table printed
    above it (which tests/test_docs_examples.py checks against the command byte for byte):
    F, p, η² of ToM order and context, the context interval and the residual share. A new log
    changes the table, and this test then says which sentence to rewrite."""
    text = ANALYSING.read_text(encoding="utf-8")
    cmd = "$ tomstats anova data/smollm2_storysim_log.jsonl --ci 0.95\n"
    table, prose = text.split(cmd, 1)[1].split("```", 1)
    rows = {}
    for line in table.splitlines():
        words = line.split()
        if words and words[0] in ("context_words", "tom_order", "Residual"):
            rows[words[0]] = words
    order, ctx, res = rows["tom_order"], rows["context_words"], rows["Residual"]
    prose = " ".join(prose.split("\n\n", 3)[1].split())
    m = re.search(r"F\((\d+), (\d+)\) = ([\d.]+), p = ([\d.]+)\)?, and it explains ([\d.]+) % "
                  r"of the variance.*?context length explains ([\d.]+) % with an interval "
                  r"reaching from ([\d.]+) to ([\d.]+) %.*? holds ([\d.]+) %", prose)
    assert m, "the sentence reading the ANOVA changed shape; update this test with it"
    df1, df2, f, p, eta_order, eta_ctx, lo, hi, eta_res = m.groups()
    assert (df1, df2) == (order[2], res[2])
    assert agrees(f, float(order[4])) and agrees(p, float(order[5]))
    assert agrees(eta_order, 100 * float(order[6])) and agrees(eta_ctx, 100 * float(ctx[6]))
    low, high = (100 * float(v) for v in " ".join(ctx[7:9]).strip("[]").split(", "))
    assert agrees(lo, low) and agrees(hi, high), (lo, hi, low, high)
    assert agrees(eta_res, 100 * float(res[6]))


def _shown_output(page: Path, command: str) -> str:
    """The output a page shows under ``$ COMMAND`` (continuation lines joined), which
    tests/test_docs_examples.py compares with the command's."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("update_examples",
                                                  REPO / "docs" / "update_examples.py")
    ue = sys.modules.get("update_examples")
    if ue is None:
        ue = importlib.util.module_from_spec(spec)
        sys.modules["update_examples"] = ue
        spec.loader.exec_module(ue)
    (ex,) = [e for e in ue.examples(page.read_text(encoding="utf-8")) if e.command == command]
    return ex.output


def test_planning_story_designs_prose_reads_the_shown_table():
    """docs/planning.md's reading of the between/within comparison (the table itself is the
    command's, tests/test_docs_examples.py, slow set): at the paper's parameters the ladders
    need fewer questions for the context effect and no more for the interaction; at the
    SmolLM2 calibration both tests reach 80 % within the sizes tried (at most the smallest,
    "≤ 6"), the context test with fewer questions than at the paper's parameters and the
    interaction test with no fewer; ladders need a fifth of the stories per size."""
    out = _shown_output(PLANNING, "tomstats power simulations/power.toml "
                                  "--compare-story-designs simulations/smollm2-calibrated.toml "
                                  "--along questions_per_cell=6,12,24 --test glmm-wald:alpha "
                                  "--test glmm-wald:delta --n-llms 5 --replicates 200 "
                                  "--out story-designs/")
    rows = {}
    for line in out.splitlines():
        m = re.match(r"(power|smollm2-calibrated)\s+(glmm-wald:\w+)\s+(between|within)\s+"
                     r"[\d.]+ / [\d.]+ / [\d.]+\s+(.*)$", line)
        if m:
            rows[m.groups()[:3]] = m.group(4).replace("≤ ", "≤").split()
    assert len(rows) == 8, out
    alpha_b, alpha_w = rows[("power", "glmm-wald:alpha", "between")], rows[
        ("power", "glmm-wald:alpha", "within")]
    assert int(alpha_w[0]) < int(alpha_b[0]) and float(alpha_w[-1]) < 1
    delta_b, delta_w = rows[("power", "glmm-wald:delta", "between")], rows[
        ("power", "glmm-wald:delta", "within")]
    assert int(delta_w[0]) <= int(delta_b[0]) and float(delta_w[-1]) <= 1
    for (study, test, design), cells in rows.items():
        if study == "smollm2-calibrated":  # both tests reach 80 % within the sizes tried
            need = int(cells[0].lstrip("≤"))
            assert need <= 24, cells
            paper = int(rows[("power", test, design)][0])
            if test == "glmm-wald:alpha":  # the calibrated alpha: several times the paper's
                assert need < paper, (test, design, need, paper)
            else:  # near the floor of accuracy: no fewer, though |delta| is larger
                assert need >= paper, (test, design, need, paper)
    for b, w in ((alpha_b, alpha_w), (delta_b, delta_w)):  # stories: 15 n against 3 n
        assert int(b[-1]) == 15 * int(b[0]) and int(w[-2]) == 3 * int(w[0])


def test_analysing_logs_ladder_prose_reads_the_shown_outputs():
    """docs/analysing-logs.md's reading of the baseline run on ladders quotes the outputs
    above it (checked against the commands by tests/test_docs_examples.py): no term of the
    random baseline's story-unit ANOVA is significant, and the text rule's within-story
    length effect is 0 with a zero-width interval at every order."""
    anova = _shown_output(ANALYSING, "tomstats anova ladders-random.jsonl --unit story")
    p_values = {}
    for line in anova.splitlines():
        words = line.split()
        if words and words[0] in ("context_words", "tom_order", "context_words:tom_order"):
            p_values[words[0]] = float(words[6])  # source, df (2 words), MSE, F, ges, p (GG)
    assert len(p_values) == 3 and all(p > 0.05 for p in p_values.values()), p_values
    t_last = _shown_output(ANALYSING, "tomstats summarize ladders-t-last.jsonl")
    effects = t_last.split("Within-story length effect", 1)[1].splitlines()[2:]
    effects = [line.split() for line in effects if line.strip()]
    assert [row[1] for row in effects] == ["0", "1", "2"], effects
    zero = [row[5:8] == ["+0.000", "[0.000,", "0.000]"] for row in effects]
    assert all(zero), effects
