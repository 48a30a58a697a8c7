"""The closed loop of docs/getting-started.md, executed: stories → run → fit → report →
calibrate → calibrated sweep → report (and the page's report on a ``reproduce`` folder).

The commands are read from the page's "The closed loop" block and run, exactly as written,
through :func:`tomstats.cli.main` in a temporary folder that links the repository's
``models/`` and ``simulations/``; after each one its outputs are checked. So the page cannot
show a command that does not work. Small sizes (24 items, 1 chain × 150 draws, 10 posterior
draws): about a minute.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tomstats.cli import main

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "getting-started.md"
STEPS = ["stories", "evaluate", "fit", "report", "calibrate", "simulate", "report"]


def page_commands(heading: str) -> list[list[str]]:
    """The ``$ tomstats ...`` lines of the console blocks under ``## heading`` (arguments
    after ``tomstats``)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```console\n(.*?)```", section, flags=re.S)
    assert blocks, f"no console block under {heading!r} in {PAGE.name}"
    cmds = [shlex.split(line[2:], comments=True) for b in blocks for line in b.splitlines()
            if line.startswith("$ tomstats ")]
    return [c[1:] for c in cmds]


def _images(html: str) -> list[bytes]:
    srcs = re.findall(r'<img src="data:image/png;base64,([^"]*)"', html)
    assert len(srcs) == len(re.findall(r"<img ", html))  # every image embedded
    return [base64.b64decode(s) for s in srcs]


def test_page_shows_the_whole_loop() -> None:
    assert [c[0] for c in page_commands("The closed loop")] == STEPS


def test_simulation_report_of_reproduce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture) -> None:
    """The README's first command (with 20 replicates instead of 1000) and the page's report
    command on its output, exactly as written."""
    monkeypatch.chdir(tmp_path)
    (report,) = page_commands("Two commands")
    assert report[:3] == ["report", "--simulation", "out/"]
    assert main(["reproduce", "--out", "out/", "--replicates", "20", "--quiet"]) == 0
    assert main(report) == 0, capsys.readouterr().err
    html = Path(report[report.index("--out") + 1]).read_text(encoding="utf-8")
    assert "tomstats simulation report" in html and "20 replicates" in html
    assert re.search(r'data-verdict="(PASS|FAIL)"', html)  # every check could be made
    assert len(_images(html)) == 5


def test_closed_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture) -> None:
    import tomstats.evaluate as ev
    import tomstats.glmm as glmm
    from tomstats.stories import read_items

    for folder in ("models", "simulations"):
        (tmp_path / folder).symlink_to(REPO / folder, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    commands = page_commands("The closed loop")
    outputs: dict[str, str] = {}
    for argv in commands:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sampler diagnostics of a 1-chain fit
            rc = main(argv)
        out, err = capsys.readouterr()
        assert rc == 0, f"tomstats {shlex.join(argv)} failed (rc {rc}):\n{err[-3000:]}"
        outputs[shlex.join(argv)] = out
        _check_step(argv, tmp_path, out)

    # the chain of files, end to end: items → log → fit → parameters → sweep
    items = read_items("items.jsonl")
    log = ev.read_log("run.jsonl")
    assert sorted(log["item_id"]) == sorted(i.item_id for i in items)
    idata = glmm.load_fit("fit.nc")
    assert int(idata.posterior.attrs["n_rows"]) == len(log)
    params = tomllib.loads(Path("calibrated.toml").read_text(encoding="utf-8"))
    params = params["meta"]["calibration"]
    summary = json.loads(Path("sweep/summary.json").read_text(encoding="utf-8"))
    assert summary["fit"]["data_hash"] == idata.posterior.attrs["data_hash"]
    assert params["source"]["data_hash"] == idata.posterior.attrs["data_hash"]
    assert summary["llm"] == list(params["capability"]) == ["heuristic-random"]


def _check_step(argv: list[str], d: Path, out: str) -> None:
    step = argv[0]
    if step == "stories":
        from tomstats.stories import read_items

        items = read_items(d / "items.jsonl")
        assert len(items) == 4 * 2 * 3  # --n-per-cell 4, two context lengths, ToM 0/1/2
        cells = {(i.context_words, i.tom_order) for i in items}
        assert cells == {(c, t) for c in (200, 1000) for t in (0, 1, 2)}
        assert all(i.answer for i in items)
    elif step == "evaluate":
        import tomstats.evaluate as ev

        log = ev.read_log(d / "run.jsonl")
        assert len(log) == 24 and log["item_id"].is_unique
        assert set(log["status"]) == {"ok"} and set(log["model"]) == {"heuristic-random"}
        assert set(log["correct"].astype(int)) <= {0, 1}
        assert set(log["context_words"]) == {200, 1000}
    elif step == "fit":
        import tomstats.glmm as glmm

        idata = glmm.load_fit(d / "fit.nc")
        post = idata.posterior
        assert (post.sizes["chain"], post.sizes["draw"]) == (1, 150)
        assert post.attrs["model"] == "structural" and post.attrs["backend"] == "numpyro"
        for v in ("alpha", "gamma", "delta", "capability"):
            assert np.isfinite(post[v].to_numpy()).all(), v
        assert {"log_likelihood", "posterior_predictive", "observed_data"} <= set(
            idata.groups())
        assert "wrote fit.nc" in out
    elif step == "report" and argv[1] == "fit.nc":
        html = (d / "fit.html").read_text(encoding="utf-8")
        assert re.search(r'data-verdict="(PASS|FAIL|UNKNOWN)"', html)
        assert "Rank plots need at least two chains." in html  # 1 chain, said so
        title = "Calibrated η² decomposition and ToM-dominance map"
        sweep = html.split(f">{title}</h2>", 1)[1]
        assert "No calibrated sweep" not in sweep and "heuristic-random" in sweep
        assert "50 of 150 posterior draws" in sweep  # the report's default budget
        pngs = _images(html)
        assert len(pngs) >= 7 and all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
        _browser_check(d / "fit.html", d)
    elif step == "calibrate":
        import tomstats.glmm as glmm

        doc = tomllib.loads((d / "calibrated.toml").read_text(encoding="utf-8"))
        params = doc["meta"]["calibration"]
        post = glmm.load_fit(d / "fit.nc").posterior
        # the file is a simulation file at the posterior means, runnable as it is
        from tomstats.simulation.reproduce import load_study

        cfg = load_study(d / "calibrated.toml", replicates=5)
        assert cfg.params.gamma == pytest.approx(params["params"]["gamma"]["mean"])
        assert cfg.design.capability == (params["capability"]["heuristic-random"]["mean"],)
        assert main(["simulate", str(d / "calibrated.toml"), "--out", str(d / "calibrated"),
                     "--replicates", "5", "--no-figures", "--quiet"]) == 0
        assert (d / "calibrated" / "table1.csv").is_file()
        for name in ("alpha", "gamma", "delta", "sigma"):
            p = params["params"][name]
            assert p["lower"] <= p["median"] <= p["upper"], (name, p)
        for name in ("alpha", "gamma", "delta"):
            assert params["params"][name]["mean"] == pytest.approx(
                float(post[name].mean()), rel=1e-5)
        cap = params["capability"]["heuristic-random"]
        assert cap["mean"] == pytest.approx(float(post["capability"].mean()), rel=1e-5)
    elif step == "simulate":
        sweep = d / "sweep"
        summary = json.loads((sweep / "summary.json").read_text(encoding="utf-8"))
        assert summary["draws_used"] == 10 and summary["draws_available"] == 150
        assert summary["replicates_per_draw"] == 1  # --replicates 2 over 10 draws
        dec = pd.read_csv(sweep / "decomposition_posterior.csv")
        assert list(dec["source"]) == ["tom_order", "context_length", "interaction",
                                       "residual"]
        assert ((dec.eta2_low <= dec.eta2_mean) & (dec.eta2_mean <= dec.eta2_high)).all()
        # η² of the four sources of one study sum to one
        assert dec["eta2_mean"].sum() == pytest.approx(1.0, abs=1e-4)
        dom = pd.read_csv(sweep / "dominance_posterior.csv")
        assert len(dom) == 49 and dom["p_dominant"].between(0, 1).all()
        assert "ToM-dominant grid cells" in out
    elif step == "report" and argv[1] == "--simulation":
        html = (d / "sweep.html").read_text(encoding="utf-8")
        assert "tomstats calibrated sweep report" in html
        assert "structural fit fit.nc: 10 of 150 draws" in html
        assert len(_images(html)) == 2
    else:  # pragma: no cover - the page grew a step this test does not know
        raise AssertionError(f"unchecked step: tomstats {shlex.join(argv)}")


def _browser_check(html: Path, d: Path) -> None:
    """The real fit report (with its calibrated section) in headless Chromium, if present."""
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        return
    from report.test_browser import check_page

    text = html.read_text(encoding="utf-8")
    verdict = re.search(r'data-verdict="(\w+)"', text).group(1)
    shots = d / "browser"
    shots.mkdir()
    check_page(html, shots, n_images=len(re.findall(r"<img ", text)), verdict=verdict)
