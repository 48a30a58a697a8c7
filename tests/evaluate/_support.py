"""Shared helpers of the evaluation-runner tests (hand-built items, a fake OpenAI server).

Holds no tests itself; the tests of ``tests/evaluate/`` and ``tests/test_bad_inputs.py`` import
from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tomstats.stories.items import Item

CANDIDATES = ("hallway", "room_1", "room_2", "room_3")


def make_items(n: int = 6) -> list[Item]:
    """``n`` tiny items over orders 0/1/2 and two context levels, with distinct heuristics."""
    items = []
    for i in range(n):
        order = i % 3
        gold = CANDIDATES[1 + i % 3]
        fcl = CANDIDATES[1 + (i + 1) % 3]
        last = CANDIDATES[1 + (i + 2) % 3]
        story = (f"Anne enters {fcl}. Bob enters {fcl}. Anne enters {gold}. "
                 f"Bob enters {last}. Story number {i}.")
        items.append(Item(
            item_id=f"t{i:03d}", story=story, question=f"Where does Anne think Bob is? ({i})",
            answer=gold, question_type="tom" if order else "reality", tom_order=order,
            context_words=200 if i < n // 2 else 500, n_words=len(story.split()),
            candidates=CANDIDATES, agents=("Anne", "Bob")[:order], target="Bob",
            first_common_location=fcl, last_location=last, mislead_distance=i,
            n_characters=2, setting="rooms", generator="storysim", seed=i))
    return items


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_answer(body: dict[str, Any]) -> str:
    """The fake server's deterministic answer: a candidate chosen by a hash of the prompt."""
    text = json.dumps(body.get("messages") or body.get("prompt"), sort_keys=True)
    h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    return f"Answer: {CANDIDATES[h % len(CANDIDATES)]}."


@dataclass
class FakeServer:
    """State of a fake OpenAI-compatible server (see :func:`fake_server`)."""

    url: str
    fail: Callable[[int, dict[str, Any]], str | None]
    delay: float = 0.0
    posts: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send(200, {"object": "list", "data": [{"id": "fake"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                n = state.posts
                state.posts += 1
                state.bodies.append(body)
                state.auth_headers.append(self.headers.get("Authorization"))
            mode = state.fail(n, body)
            if mode == "timeout":
                time.sleep(1.0)
                try:
                    self._send(200, {"choices": [{"message": {"content": "late"}}]})
                except OSError:
                    pass
                return
            if mode is not None:
                # a careless server that echoes the credentials it was sent
                self._send(int(mode), {"error": {"message": f"injected {mode}",
                                                 "auth": self.headers.get("Authorization")}})
                return
            if state.delay:
                time.sleep(state.delay)
            text = fake_answer(body)
            choice = ({"message": {"role": "assistant", "content": text}} if "messages" in body
                      else {"text": text})
            choice.update(index=0, finish_reason="stop")
            self._send(200, {"choices": [choice],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 3}})

    return H


@contextlib.contextmanager
def fake_server(fail: Callable[[int, dict[str, Any]], str | None] = lambda n, b: None,
                delay: float = 0.0) -> Iterator[FakeServer]:
    """Run a fake chat-completions server on a free loopback port; always shut down.

    ``fail(n, body)`` decides the ``n``-th POST (0-based): ``None`` answers, ``"500"``,
    ``"429"``, … send that status, ``"timeout"`` answers only after 1 s.
    """
    port = free_port()
    state = FakeServer(url=f"http://127.0.0.1:{port}/v1", fail=fail, delay=delay)
    with serving(port, _handler(state)):
        yield state


@contextlib.contextmanager
def serving(port: int, handler: type[BaseHTTPRequestHandler]) -> Iterator[None]:
    """Serve ``handler`` on 127.0.0.1:``port`` in a daemon thread; always shut down."""
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(timeout=5)


def openai_config(url: str, name: str = "fake", **kw: Any) -> dict[str, Any]:
    """A model-file mapping for the fake server with fast retries."""
    d: dict[str, Any] = {"name": name, "backend": "openai", "endpoint": url, "model": "fake",
                         "max_tokens": 8, "timeout": 0.3, "max_retries": 4,
                         "backoff_base": 0.01, "backoff_max": 0.05, "concurrency": 4}
    d.update(kw)
    return d


def seeded_failures(rate: float, seed: int) -> Callable[[int, dict[str, Any]], str | None]:
    """Fail a seeded ``rate`` of calls with 500, 429 or a timeout."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def fail(n: int, body: dict[str, Any]) -> str | None:
        with lock:
            if rng.random() < rate:
                return rng.choice(["500", "503", "429", "timeout"])
        return None

    return fail


def _toml_value(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)  # strings, numbers, booleans and lists read the same in TOML


def write_model_file(path: Path, cfg: dict[str, Any]) -> Path:
    """Write a model-file mapping as TOML."""
    path.write_text("".join(f"{k} = {_toml_value(v)}\n" for k, v in cfg.items()))
    return path


def log_lines(path: Path) -> list[dict[str, Any]]:
    """Every record of a log file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def strip_volatile(rec: dict[str, Any]) -> dict[str, Any]:
    """A record without the fields that legitimately differ between runs."""
    return {k: v for k, v in rec.items()
            if k not in ("timestamp", "latency_s", "cached", "attempts")}


def spawn_evaluate(items: Path, model: Path, out: Path) -> subprocess.Popen[bytes]:
    """``tomstats evaluate`` in a child process (no cache, no progress bar)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tomstats.cli", "evaluate", "--items", str(items), "--model",
         str(model), "--out", str(out), "--no-progress", "--no-cache"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def n_lines(p: Path) -> int:
    """Complete lines of a file (0 when it does not exist)."""
    return p.read_bytes().count(b"\n") if p.exists() else 0


def kill_and_resume(items: Path, model: Path, out: Path, n_total: int, kills: int,
                    seed: int) -> int:
    """Run, SIGKILL after a random number of new records, resume; ``kills`` times, then finish.

    Returns how many runs were really killed before finishing.
    """
    rng = random.Random(seed)
    killed = 0
    for _ in range(kills):
        start = n_lines(out)
        if start >= n_total:
            break
        target = start + rng.randint(1, 2)
        proc = spawn_evaluate(items, model, out)
        try:
            while proc.poll() is None and n_lines(out) < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.05))  # land anywhere: between or inside requests
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed += 1
        finally:
            proc.wait(timeout=60)
    proc = spawn_evaluate(items, model, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return killed


Reply = Callable[["Scripted", dict[str, Any]], None]


class Scripted(BaseHTTPRequestHandler):
    """A chat-completions handler whose POST reply is ``self.server.reply(self, body)``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def send(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.send(200, b'{"object": "list", "data": [{"id": "fake"}]}')

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts += 1  # type: ignore[attr-defined]
        self.server.reply(self, body)  # type: ignore[attr-defined]


def answer(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": text}}]}).encode()


@contextlib.contextmanager
def scripted(reply: Reply) -> Iterator[Any]:
    """A :class:`Scripted` server on a free port; yields its ``httpd`` (``.url``, ``.posts``)."""
    port = free_port()
    httpd: Any = ThreadingHTTPServer(("127.0.0.1", port), Scripted)
    httpd.daemon_threads = True
    httpd.reply, httpd.posts, httpd.url = reply, 0, f"http://127.0.0.1:{port}/v1"
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(timeout=5)
