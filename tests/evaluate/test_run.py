"""The run with heuristic baselines, the log format, read_log and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evaluate._support import log_lines, make_items, strip_volatile
from tomstats.cli import main
from tomstats.evaluate import LOG_FORMAT, evaluate, heuristic_answer, load_model_config, read_log
from tomstats.evaluate.log import REQUIRED_FIELDS
from tomstats.stories.items import write_items

REPO = Path(__file__).resolve().parents[2]


def _model(name: str) -> Path:
    return REPO / "models" / f"{name}.toml"


def _run(tmp_path: Path, name: str, out: str = "run.jsonl", **kw: object) -> Path:
    out_p = tmp_path / out
    evaluate(make_items(9), _model(name), out_p, progress=False, cache_dir=None, **kw)
    return out_p


def test_oracle_scores_100_percent(tmp_path: Path) -> None:
    df = read_log(_run(tmp_path, "heuristic-oracle"))
    assert len(df) == 9 and df["correct"].tolist() == [1] * 9
    assert set(df["error_category"]) == {"correct"}


@pytest.mark.parametrize(("name", "category", "field"), [
    ("heuristic-recency", "last_location", "last_location"),
    ("heuristic-first-common-location", "first_common_location", "first_common_location"),
])
def test_heuristics_answer_per_their_definition(tmp_path: Path, name: str, category: str,
                                               field: str) -> None:
    df = read_log(_run(tmp_path, name))
    items = {it.item_id: it for it in make_items(9)}
    # make_items gives each item distinct gold / first-common / last locations
    assert df["correct"].sum() == 0
    assert set(df["error_category"]) == {category}
    assert all(df["parsed_answer"] == [getattr(items[i], field) for i in df["item_id"]])


def test_random_is_seeded_and_order_free(tmp_path: Path) -> None:
    items = make_items(9)
    a = [heuristic_answer("random", it, seed=0, sample=s) for it in items for s in range(3)]
    b = [heuristic_answer("random", it, seed=0, sample=s) for it in items for s in range(3)]
    c = [heuristic_answer("random", it, seed=1, sample=s) for it in items for s in range(3)]
    assert a == b and a != c
    assert set(a) <= set(items[0].candidates) and len(set(a)) > 1
    df1 = read_log(_run(tmp_path, "heuristic-random", "r1.jsonl", samples=3, concurrency=1))
    df2 = read_log(_run(tmp_path, "heuristic-random", "r2.jsonl", samples=3, concurrency=4))
    cols = ["item_id", "sample", "parsed_answer", "correct"]
    pd.testing.assert_frame_equal(df1[cols], df2[cols])


def test_record_fields(tmp_path: Path) -> None:
    recs = log_lines(_run(tmp_path, "heuristic-oracle", limit=2, samples=2))
    assert len(recs) == 4
    r = recs[0]
    assert set(REQUIRED_FIELDS) <= set(r)
    assert r["format"] == LOG_FORMAT and r["model"] == "heuristic-oracle"
    cfg = load_model_config(_model("heuristic-oracle"))
    assert r["config_hash"] == cfg.config_hash
    it = {x.item_id: x for x in make_items(9)}[r["item_id"]]
    assert (r["tom_order"], r["context_words"], r["question_type"], r["mislead_distance"],
            r["agents"]) == (it.tom_order, it.context_words, it.question_type,
                             it.mislead_distance, list(it.agents))
    assert {(x["item_id"], x["sample"]) for x in recs} == {("t000", 0), ("t000", 1),
                                                           ("t001", 0), ("t001", 1)}


def test_resume_skips_completed_and_never_duplicates(tmp_path: Path) -> None:
    out = _run(tmp_path, "heuristic-random", limit=4, samples=2)
    assert len(log_lines(out)) == 8
    s = evaluate(make_items(9), _model("heuristic-random"), out, samples=2, progress=False)
    assert (s.n_skipped, s.n_answered) == (8, 10)
    s = evaluate(make_items(9), _model("heuristic-random"), out, samples=2, progress=False)
    assert (s.n_skipped, s.n_answered) == (18, 0)
    full = _run(tmp_path, "heuristic-random", "full.jsonl", samples=2)
    key = lambda r: (r["item_id"], r["sample"])  # noqa: E731
    got = sorted(map(strip_volatile, log_lines(out)), key=key)
    want = sorted(map(strip_volatile, log_lines(full)), key=key)
    assert got == want


def test_torn_last_line_is_repaired_on_resume(tmp_path: Path) -> None:
    out = _run(tmp_path, "heuristic-oracle", limit=3)
    full = out.read_bytes()
    lines = full.splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # killed mid-write
    with pytest.raises(ValueError, match="torn last line"):
        read_log(out)
    evaluate(make_items(3), _model("heuristic-oracle"), out, progress=False)
    assert len(log_lines(out)) == 3
    assert len(read_log(out)) == 3
    # a complete last record that only lost its newline is kept, not re-run
    out.write_bytes(full[:-1])
    s = evaluate(make_items(3), _model("heuristic-oracle"), out, progress=False)
    assert s.n_skipped == 3 and len(log_lines(out)) == 3


def test_changed_config_under_same_name_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path, "heuristic-oracle", limit=2)
    other = tmp_path / "m.toml"
    other.write_text('name = "heuristic-oracle"\nbackend = "heuristic"\nstrategy = "recency"\n')
    before = out.read_bytes()
    with pytest.raises(ValueError, match="another configuration"):
        evaluate(make_items(3), other, out, progress=False)
    assert out.read_bytes() == before


def test_two_models_share_one_log(tmp_path: Path) -> None:
    out = _run(tmp_path, "heuristic-oracle")
    _run(tmp_path, "heuristic-recency")
    df = read_log(out)
    assert df.groupby("model")["correct"].mean().to_dict() == {"heuristic-oracle": 1.0,
                                                               "heuristic-recency": 0.0}
    assert set(df.attrs["config_hashes"]) == {"heuristic-oracle", "heuristic-recency"}


# ----------------------------------------------------------------------------- read_log


def _good_log(tmp_path: Path) -> tuple[Path, list[dict]]:
    out = _run(tmp_path, "heuristic-oracle", limit=3)
    return out, log_lines(out)


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_read_log_frame(tmp_path: Path) -> None:
    df = read_log(_run(tmp_path, "heuristic-recency", samples=2))
    assert list(df.columns[:7]) == ["model", "item_id", "sample", "correct", "tom_order",
                                    "context_words", "question_type"]
    assert len(df) == 18
    assert df["correct"].dtype == "int64" and df["tom_order"].dtype == "int64"
    assert df["context_words"].dtype == "int64"
    assert sorted(df["tom_order"].unique()) == [0, 1, 2]
    assert sorted(df["context_words"].unique()) == [200, 500]
    assert df.attrs["log_format"] == LOG_FORMAT
    assert df.groupby(["context_words", "tom_order"]).size().sum() == 18


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda rs: rs[1].pop("correct"), r":2: record is missing fields \['correct'\]"),
    (lambda rs: rs[2].update(correct=2), r":3: field 'correct' must be 0 or 1, got 2"),
    (lambda rs: rs[2].update(correct=0.5), r"must be 0 or 1, got 0.5"),
    (lambda rs: rs[2].update(correct=True), r"must be 0 or 1, got True"),
    (lambda rs: rs[1].update(format="tomstats.evallog/0"), r":2: mixed log format versions"),
    (lambda rs: rs[0].update(format="other/9"), r":1: log format 'other/9' is not supported"),
    (lambda rs: rs.append(dict(rs[0])), r":4: duplicated key .*already answered on line 1"),
    (lambda rs: rs[1].update(tom_order=-1), r"field 'tom_order' must be a non-negative"),
    (lambda rs: rs[1].update(status="maybe"), r"field 'status' must be 'ok' or 'error'"),
    (lambda rs: rs[1].update(config_hash="0" * 64), r"two configuration hashes"),
])
def test_read_log_refuses_malformed(tmp_path: Path, mutate, needle: str) -> None:
    _, recs = _good_log(tmp_path)
    mutate(recs)
    with pytest.raises(ValueError, match=needle):
        read_log(_write(tmp_path / "bad.jsonl", recs))


def test_read_log_refuses_garbage_and_empty(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"format": "tomstats.evallog/1"}\nnot json\n')
    with pytest.raises(ValueError, match=r"x.jsonl:1: record is missing fields"):
        read_log(p)
    p.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="must be a JSON object"):
        read_log(p)
    p.write_text("")
    with pytest.raises(ValueError, match="holds no records"):
        read_log(p)
    with pytest.raises(FileNotFoundError):
        read_log(tmp_path / "missing.jsonl")


def test_read_log_errors_policy(tmp_path: Path) -> None:
    _, recs = _good_log(tmp_path)
    err = dict(recs[1], status="error", correct=None, error="HTTP 500; gave up")
    # an error record followed by an answer for the same key: the answer wins
    p = _write(tmp_path / "a.jsonl", [recs[0], err, recs[1], recs[2]])
    assert len(read_log(p, errors="raise")) == 3
    # an error record as the last word on a key
    p = _write(tmp_path / "b.jsonl", [recs[0], recs[2], err])
    with pytest.warns(UserWarning, match="dropped 1 question"):
        assert len(read_log(p)) == 2
    kept = read_log(p, errors="keep")
    assert len(kept) == 3 and kept["correct"].isna().sum() == 1
    with pytest.raises(ValueError, match="1 question"):
        read_log(p, errors="raise")
    with pytest.raises(ValueError, match="errors must be"):
        read_log(p, errors="ignore")
    # an answer followed by anything for the same key is a duplicate
    with pytest.raises(ValueError, match="duplicated key"):
        read_log(_write(tmp_path / "c.jsonl", [recs[1], err]))


# ----------------------------------------------------------------------------- CLI


def test_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(6))
    out = tmp_path / "run.jsonl"
    argv = ["evaluate", "--items", str(items), "--model", str(_model("heuristic-oracle")),
            "--out", str(out), "--no-progress", "--samples", "2", "--limit", "5",
            "--concurrency", "3", "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    assert "10 answered" in capsys.readouterr().out
    assert main(argv) == 0
    assert "10 already in" in capsys.readouterr().out
    df = read_log(out)
    assert len(df) == 10 and df["correct"].all()


@pytest.mark.parametrize(("args", "needle"), [
    (["--samples", "0"], "samples must be an integer >= 1, got 0"),
    (["--limit", "0"], "limit must be an integer >= 1, got 0"),
    (["--concurrency", "-1"], "concurrency must be an integer >= 1, got -1"),
])
def test_cli_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                           needle: str) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(2))
    argv = ["evaluate", "--items", str(items), "--model", str(_model("heuristic-oracle")),
            "--out", str(tmp_path / "run.jsonl"), "--no-progress", *args]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "run.jsonl").exists()


def test_cli_bad_items_file_names_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(3))
    lines = items.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["tom_order"] = "two"
    items.write_text("\n".join([lines[0], json.dumps(bad), lines[2]]) + "\n")
    argv = ["evaluate", "--items", str(items), "--model", str(_model("heuristic-oracle")),
            "--out", str(tmp_path / "run.jsonl"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "items.jsonl:2:" in err and "tom_order" in err
    assert not (tmp_path / "run.jsonl").exists()


def test_cli_bad_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(2))
    m = tmp_path / "m.toml"
    m.write_text('name = "x"\nbackend = "gpt"\n')
    argv = ["evaluate", "--items", str(items), "--model", str(m), "--out",
            str(tmp_path / "run.jsonl"), "--no-progress"]
    assert main(argv) == 2
    assert "field 'backend' must be one of" in capsys.readouterr().err


# ----------------------------------------------------------------------------- shipped data


def test_shipped_smollm2_log_matches_its_items_and_model() -> None:
    """data/smollm2_storysim_log.jsonl loads and every record's prompt is the one the shipped
    items and models/smollm2-local.toml give (provenance without running the model).

    The shipped items are the full second-round items, as data/README.md says: format
    ``tomstats.items/3``, true- and false-belief tellings in pairs, each item's setting rules
    in its prompt, and the audit passes them.
    """
    from tomstats.evaluate import build_request
    from tomstats.stories import audit_items
    from tomstats.stories.items import read_items

    log = REPO / "data" / "smollm2_storysim_log.jsonl"
    shipped = read_items(REPO / "data" / "smollm2_storysim_items.jsonl")
    items = {it.item_id: it for it in shipped}
    formats = {json.loads(line)["format"] for line in
               (REPO / "data" / "smollm2_storysim_items.jsonl").read_text("utf-8").splitlines()}
    assert formats == {"tomstats.items/3"}
    assert all(it.metadata.get("instructions") for it in shipped)
    pairs: dict[str, list] = {}
    for it in shipped:
        assert bool(it.pair_id) == (it.tom_order > 0), it.item_id
        if it.pair_id:
            pairs.setdefault(it.pair_id, []).append(it)
    assert len(pairs) == 100
    for two in pairs.values():  # one storyboard told with the belief true and false
        assert sorted(it.belief_status for it in two) == ["false", "true"]
        assert len({(it.context_words, it.tom_order, it.question) for it in two}) == 1
    report = audit_items(shipped)
    assert not report.failed, [c.name for c in report.failed]
    cfg = load_model_config(_model("smollm2-local"))
    recs = log_lines(log)
    assert {r["item_id"] for r in recs} == set(items)
    assert len(recs) == len(items)
    for r in recs:
        it = items[r["item_id"]]
        assert r["config_hash"] == cfg.config_hash
        assert r["prompt_hash"] == build_request(it, cfg).prompt_hash
        assert (r["belief_status"], r["same_as"], r["pair_id"]) == (
            it.belief_status, it.same_as, it.pair_id)
        assert r["status"] == "ok" and r["prompt_tokens"] + r["completion_tokens"] <= cfg.n_ctx
    df = read_log(log, errors="keep")
    assert len(df) == len(items)
    assert set(df["correct"]) <= {0, 1}
    # the 5 × 3 design with 20 questions a cell, every one answered
    cells = df.groupby(["context_words", "tom_order"])["status"].agg(list)
    assert len(cells) == 15
    assert all(len(s) == 20 and set(s) == {"ok"} for s in cells)
    # the figures data/README.md gives are the log's
    readme = " ".join((REPO / "data" / "README.md").read_text(encoding="utf-8").split())
    tokens = [r["prompt_tokens"] for r in recs]
    assert f"take {min(tokens):,}–{max(tokens):,} SmolLM2 tokens" in readme
    minutes = round(sum(r["latency_s"] for r in recs) / 60)
    assert f"the run took {minutes} minutes" in readme


def test_shipped_smollm2_items_are_the_generators(tmp_path: Path) -> None:
    """data/smollm2_storysim_items.jsonl is, byte for byte, what today's generator writes for
    data/README.md's command (``tomstats stories --n-per-cell 20 --seed 2024``), so the
    shipped items can be made again (and a change of the generator's text shows here)."""
    out = tmp_path / "items.jsonl"
    assert main(["stories", "--out", str(out), "--n-per-cell", "20", "--seed", "2024",
                 "--cores", "1", "--no-progress"]) == 0
    assert out.read_bytes() == (REPO / "data" / "smollm2_storysim_items.jsonl").read_bytes()


def test_belief_status_is_copied_and_derived_for_older_logs(tmp_path: Path) -> None:
    from tomstats.stories import build_design_items

    items = build_design_items(4, 3, contexts=(200,), orders=(0, 1, 2))
    want = {it.item_id: (it.belief_status, it.same_as) for it in items}
    assert {b for b, _ in want.values()} == {"none", "true", "false"}
    out = tmp_path / "run.jsonl"
    evaluate(items, load_model_config({"name": "h", "backend": "heuristic",
                                       "strategy": "recency"}), out, progress=False)
    df = read_log(out)
    assert {r.item_id: (r.belief_status, r.same_as) for r in df.itertuples()} == want
    # recency answers reality: right on true beliefs and reality, wrong on false beliefs
    acc = df.groupby("belief_status")["correct"].mean().to_dict()
    assert acc == {"false": 0.0, "none": 1.0, "true": 1.0}
    # a log written before the fields existed: derived from answer and reality, and for
    # StorySim ToM questions without reality from the old generator (false beliefs only)
    old = []
    for rec in log_lines(out):
        rec.pop("belief_status"), rec.pop("same_as")
        if rec["item_id"].endswith("0-o1"):
            rec.pop("last_location")
        old.append(rec)
    out.write_text("".join(json.dumps(r) + "\n" for r in old))
    derived = read_log(out).set_index("item_id")["belief_status"].to_dict()
    for item_id, (status, _) in want.items():
        expect = "false" if item_id.endswith("0-o1") else status
        assert derived[item_id] == expect, item_id
