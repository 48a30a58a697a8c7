"""The ``openai`` backend against a fake OpenAI-compatible server on loopback: retries, errors,
cache, secrets, fail-fast, and resume after SIGKILL."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluate._support import (
    FakeServer,
    fake_answer,
    fake_server,
    free_port,
    kill_and_resume,
    log_lines,
    make_items,
    openai_config,
    seeded_failures,
    strip_volatile,
    write_model_file,
)
from tomstats.cli import main
from tomstats.evaluate import build_request, evaluate, load_model_config, read_log
from tomstats.stories import build_design_items
from tomstats.stories.items import write_items


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with fake_server() as srv:
        yield srv


def _cfg(url: str, **kw: object):
    return load_model_config(openai_config(url, **kw))


def _keys(recs: list[dict]) -> list[tuple[str, str, int]]:
    return [(r["model"], r["item_id"], r["sample"]) for r in recs]


def test_answers_are_scored(tmp_path: Path, server: FakeServer) -> None:
    items = make_items(6)
    cfg = _cfg(server.url)
    s = evaluate(items, cfg, tmp_path / "run.jsonl", progress=False, cache_dir=None)
    assert (s.n_answered, s.n_errors, s.n_requests) == (6, 0, 6)
    df = read_log(tmp_path / "run.jsonl")
    for it in items:
        want = fake_answer(build_request(it, cfg).payload()).removeprefix("Answer: ")[:-1]
        row = df.loc[df["item_id"] == it.item_id].iloc[0]
        assert row["parsed_answer"] == want
        assert row["correct"] == int(want == it.answer)
    body = server.bodies[0]
    assert body["model"] == "fake" and body["temperature"] == 0.0 and body["max_tokens"] == 8
    assert body["messages"][-1]["role"] == "user"
    assert server.auth_headers[0] is None


def test_completion_form(tmp_path: Path, server: FakeServer) -> None:
    cfg = _cfg(server.url, prompt_form="completion")
    evaluate(make_items(2), cfg, tmp_path / "run.jsonl", progress=False, cache_dir=None)
    assert all("prompt" in b and "messages" not in b for b in server.bodies)
    assert len(read_log(tmp_path / "run.jsonl")) == 2


def test_few_shot_examples_come_from_the_story_generator(tmp_path: Path,
                                                         server: FakeServer) -> None:
    items = make_items(3)  # orders 0, 1, 2
    cfg = _cfg(server.url, few_shot=2, few_shot_seed=5, concurrency=1)
    evaluate(items, cfg, tmp_path / "run.jsonl", progress=False, cache_dir=None)
    made = build_design_items(2, 5, contexts=(200,), orders=(0, 1, 2))
    for it, body in zip(items, server.bodies, strict=True):
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
        want = [e for e in made if e.tom_order == it.tom_order]
        for ex, (user, assistant) in zip(want, [msgs[0:2], msgs[2:4]], strict=True):
            assert ex.story in user["content"] and ex.question in user["content"]
            assert assistant["content"] == ex.answer
        assert it.story in msgs[-1]["content"]
    # the examples are deterministic: the same run again sends identical requests
    first = [json.dumps(b, sort_keys=True) for b in server.bodies]
    evaluate(items, cfg, tmp_path / "run2.jsonl", progress=False, cache_dir=None)
    assert first == [json.dumps(b, sort_keys=True) for b in server.bodies[3:]]


def test_transient_failures_are_retried(tmp_path: Path) -> None:
    script = {0: "500", 1: "429", 2: "timeout", 3: "503"}
    with fake_server(fail=lambda n, b: script.get(n)) as srv:
        s = evaluate(make_items(3), _cfg(srv.url, concurrency=1), tmp_path / "run.jsonl",
                     progress=False, cache_dir=None)
        assert (s.n_answered, s.n_errors) == (3, 0)
        assert srv.posts == 3 + len(script)
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["attempts"] for r in recs] == [5, 1, 1]
    assert all(r["status"] == "ok" for r in recs)


def test_permanent_failure_is_logged_then_retried_on_rerun(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    with fake_server(fail=lambda n, b: "500") as srv:
        cfg = _cfg(srv.url)
        s = evaluate(make_items(3), cfg, out, progress=False, cache_dir=None)
        assert (s.n_answered, s.n_errors) == (0, 3)
        assert srv.posts == 3 * 5  # 1 try + 4 retries each, then given up
        recs = log_lines(out)
        assert len(recs) == 3 and all(r["status"] == "error" for r in recs)
        assert all(r["correct"] is None and r["attempts"] == 5 for r in recs)
        assert all("HTTP 500" in r["error"] and "gave up after 5 attempts" in r["error"]
                   for r in recs)
        # the server recovers: re-running answers the errored keys, nothing is duplicated
        srv.fail, srv.posts = (lambda n, b: None), 0
        s = evaluate(make_items(3), cfg, out, progress=False, cache_dir=None)
        assert (s.n_skipped, s.n_answered, srv.posts) == (0, 3, 3)
        df = read_log(out, errors="raise")
        assert len(df) == 3 and (df["status"] == "ok").all()
        s = evaluate(make_items(3), cfg, out, progress=False, cache_dir=None)
        assert (s.n_skipped, srv.posts) == (3, 3)
    assert len(log_lines(out)) == 6


def test_client_error_is_not_retried(tmp_path: Path) -> None:
    with fake_server(fail=lambda n, b: "400") as srv:
        s = evaluate(make_items(2), _cfg(srv.url), tmp_path / "run.jsonl", progress=False,
                     cache_dir=None)
        assert (s.n_errors, srv.posts) == (2, 2)
    assert all("HTTP 400" in r["error"] and r["attempts"] == 1
               for r in log_lines(tmp_path / "run.jsonl"))


def test_seeded_30_percent_failures_complete(tmp_path: Path) -> None:
    items = make_items(24)
    out = tmp_path / "run.jsonl"
    with fake_server(fail=seeded_failures(0.3, seed=7)) as srv:
        cfg = _cfg(srv.url, max_retries=2, concurrency=8)
        s = evaluate(items, cfg, out, samples=2, progress=False, cache_dir=None)
        assert s.n_answered + s.n_errors == 48
        assert s.n_errors > 0 or srv.posts > 48  # failures really were injected
    recs = log_lines(out)
    assert sorted(_keys(recs)) == sorted(("fake", it.item_id, k) for it in items
                                         for k in range(2))
    for r in recs:
        assert r["status"] in ("ok", "error")
        if r["status"] == "error":
            assert r["attempts"] == 3 and r["correct"] is None
        else:
            assert 1 <= r["attempts"] <= 3 and r["correct"] in (0, 1)
    with pytest.warns(UserWarning) if s.n_errors else contextlib.nullcontext():
        assert len(read_log(out)) == 48 - s.n_errors


def test_cache_hits_issue_no_requests_and_models_never_share(tmp_path: Path,
                                                            server: FakeServer) -> None:
    items, cache = make_items(5), tmp_path / "cache"
    a = _cfg(server.url, name="model-a")
    s1 = evaluate(items, a, tmp_path / "a1.jsonl", progress=False, cache_dir=cache)
    assert (s1.n_requests, s1.n_cached, server.posts) == (5, 0, 5)
    s2 = evaluate(items, a, tmp_path / "a2.jsonl", progress=False, cache_dir=cache)
    assert (s2.n_requests, s2.n_cached, server.posts) == (0, 5, 5)
    one = [strip_volatile(r) for r in log_lines(tmp_path / "a1.jsonl")]
    two = [strip_volatile(r) for r in log_lines(tmp_path / "a2.jsonl")]
    assert sorted(one, key=str) == sorted(two, key=str)
    assert all(r["cached"] for r in log_lines(tmp_path / "a2.jsonl"))
    # another configuration (only the name differs) never reads model-a's entries
    b = _cfg(server.url, name="model-b")
    s3 = evaluate(items, b, tmp_path / "b.jsonl", progress=False, cache_dir=cache)
    assert (s3.n_requests, s3.n_cached, server.posts) == (5, 0, 10)
    # neither does a changed decoding setting, nor another sample
    c = _cfg(server.url, name="model-a", max_tokens=9)
    assert evaluate(items, c, tmp_path / "c.jsonl", progress=False,
                    cache_dir=cache).n_requests == 5
    s5 = evaluate(items, a, tmp_path / "a3.jsonl", samples=2, progress=False, cache_dir=cache)
    assert (s5.n_cached, s5.n_requests) == (5, 5)
    # caching off: every request goes out
    n = server.posts
    assert evaluate(items, a, tmp_path / "a4.jsonl", progress=False,
                    cache_dir=None).n_requests == 5
    assert server.posts == n + 5


def test_api_key_is_sent_but_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sekrit-Zq81-do-not-log"
    monkeypatch.setenv("TOMSTATS_FAKE_KEY", secret)
    cache = tmp_path / "cache"
    # the server fails some calls with a body that echoes the key
    with fake_server(fail=lambda n, b: "401" if n % 3 == 2 else None) as srv:
        cfg = openai_config(srv.url, api_key_env="TOMSTATS_FAKE_KEY")
        model = tmp_path / "m.toml"
        write_model_file(model, cfg)
        items = write_items(tmp_path / "items.jsonl", make_items(6))
        rc = main(["evaluate", "--items", str(items), "--model", str(model), "--out",
                   str(tmp_path / "run.jsonl"), "--cache-dir", str(cache), "--concurrency", "1"])
        assert rc == 1  # some questions ended in an error
        assert set(srv.auth_headers) == {f"Bearer {secret}"}
    io = capsys.readouterr()
    written = [tmp_path / "run.jsonl", *cache.rglob("*.json")]
    assert len(written) > 1
    for p in written:
        assert secret not in p.read_text()
    assert secret not in io.out + io.err
    assert "TOMSTATS_FAKE_KEY" not in (tmp_path / "run.jsonl").read_text()


def test_unreachable_server_fails_fast_with_url(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ValueError, match=f"cannot reach model server '{url}'"):
        evaluate(make_items(2), _cfg(url), tmp_path / "run.jsonl", progress=True,
                 cache_dir=None)
    assert not (tmp_path / "run.jsonl").exists()
    assert "q/s" not in capsys.readouterr().err


def test_progress_bar_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server(fail=lambda n, b: "400" if n == 0 else None) as srv:
        evaluate(make_items(3), _cfg(srv.url, concurrency=1), tmp_path / "run.jsonl",
                 progress=True, cache_dir=None)
    err = capsys.readouterr().err
    assert "3/3" in err and "errors=1" in err and "q/s" in err


# ----------------------------------------------------------------------------- SIGKILL


def test_sigkill_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(24))
    with fake_server(delay=0.05) as srv:
        model = tmp_path / "m.toml"
        cfg = openai_config(srv.url, concurrency=2, timeout=5.0)
        write_model_file(model, cfg)
        killed = kill_and_resume(items, model, tmp_path / "killed.jsonl", 24, kills=3, seed=1)
        assert killed == 3
        evaluate(items, model, tmp_path / "clean.jsonl", progress=False, cache_dir=None)
    got, want = log_lines(tmp_path / "killed.jsonl"), log_lines(tmp_path / "clean.jsonl")
    assert len(got) == len(set(_keys(got))) == 24
    by_key = lambda rs: {k: strip_volatile(r) for k, r in zip(_keys(rs), rs, strict=True)}  # noqa: E731
    assert by_key(got) == by_key(want)
    assert len(read_log(tmp_path / "killed.jsonl")) == 24
