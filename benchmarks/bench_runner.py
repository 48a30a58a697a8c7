"""Runner overhead per question, measured beside the raw HTTP round trip, at concurrency 32.

A fast OpenAI-compatible server runs on a loopback port in a child process (its own
interpreter, so its work never shares the runner's event loop or GIL). It answers every
chat or completion request at once with a heuristic answer — the last location the prompt
mentions (StorySim's recency heuristic) — so that the model costs nothing and what is left
is HTTP and the runner. Over the same questions and the same server, three things are timed:

- **raw HTTP**: plain ``httpx.AsyncClient`` with 32 workers, posting the request body the
  runner would send (``client.post(url, json=body)``, bodies built before the timer) and
  decoding the JSON answer; one client, 32 keep-alive connections, as in the runner;
- **runner**: :func:`tomstats.evaluate.evaluate_async` at concurrency 32, no cache, no
  progress bar, into a fresh log: building each prompt and its hashes, the HTTP call, answer
  extraction and scoring, the record, one ``os.write`` per record, the final ``fsync``,
  plus the run's fixed costs (model check, server reachability check);
- **runner + bar**: the same with the tqdm progress bar on (drawn to ``/dev/null``).

Per question = wall time / questions (a throughput figure: 32 are in flight at once); the
client process's CPU time per question is printed beside it (on a busy machine the wall
time also counts the time the process waited for a core, the CPU time does not). The three
are run in turn, ``repeats`` times after one warm-up round, and the median and the best are
printed, with the load average. Overhead = runner − raw HTTP per question: the difference
of the medians, and the median over rounds of the difference within a round ("paired",
which cancels the machine's slow drifts). Every runner log is checked: one ``ok`` record
per question.

Run: ``python benchmarks/bench_runner.py [--n-per-cell 20] [--repeats 5]
[--concurrency 32] [--json out.json]``. The items are the 5 × 3 StorySim design
(200–5,000 words × ToM order 0/1/2, seed 2024), so request bodies are 1–35 kB. The issue's
target is a runner overhead under 2 ms per question at concurrency 32.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tomstats.evaluate import ModelConfig, build_request, evaluate_async, read_log
from tomstats.stories import build_design_items
from tomstats.stories.items import Item

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import add_write_docs_argument, markdown_table, write_docs  # noqa: E402

_LOCATION = re.compile(r"\b(room_\d+|hallway)\b")


# --------------------------------------------------------------------------- the server


def _answer(body: dict[str, Any]) -> str:
    """The recency heuristic: the last location named in the prompt."""
    if "messages" in body:
        text = body["messages"][-1]["content"]
    else:
        text = body.get("prompt", "")
    story = text.split("Question:", 1)[0]
    found = _LOCATION.findall(story)
    return found[-1] if found else "hallway"


def _response(path: str, body: dict[str, Any] | None) -> bytes:
    if body is None:  # GET /v1/models (the runner's reachability check)
        return json.dumps({"object": "list", "data": [{"id": "fast"}]}).encode()
    text = _answer(body)
    if path.endswith("/chat/completions"):
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}
    else:
        choice = {"index": 0, "finish_reason": "stop", "text": text}
    return json.dumps({"object": "chat.completion", "model": "fast", "choices": [choice],
                       "usage": {"prompt_tokens": 0, "completion_tokens": 1}}).encode()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            raw = await reader.readexactly(length) if length else b""
            body = json.loads(raw) if method == "POST" else None
            data = _response(path, body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=256)
    async with server:
        await server.serve_forever()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fast_server() -> Any:
    """Start the fast server in a child process; yield its base URL; always stop it."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fast server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------- the timings


async def raw_http(url: str, bodies: Sequence[dict[str, Any]],
                   concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds to post every body with plain httpx, ``concurrency`` at a time."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60.0, limits=limits, trust_env=False) as client:
        await client.get(url + "/models")  # as the runner does: connection warm-up
        pending = iter(bodies)
        answers: list[str] = []

        async def worker() -> None:
            for body in pending:
                resp = await client.post(url + "/chat/completions", json=body)
                resp.raise_for_status()
                answers.append(resp.json()["choices"][0]["message"]["content"])

        t0, c0 = time.perf_counter(), time.process_time()
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if len(answers) != len(bodies):
        raise RuntimeError(f"raw HTTP: {len(answers)} answers for {len(bodies)} requests")
    return wall, cpu


async def runner(config: ModelConfig, items: Sequence[Item], concurrency: int,
                 progress: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh :func:`evaluate_async` run (checked: all answered)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.jsonl"
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            t0, c0 = time.perf_counter(), time.process_time()
            s = await evaluate_async(items, config, out, concurrency=concurrency,
                                     cache_dir=None, progress=progress)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        df = read_log(out)
    if (s.n_answered, s.n_errors, len(df)) != (len(items), 0, len(items)):
        raise RuntimeError(f"runner: {s}")
    return wall, cpu


def chat_body(config: ModelConfig, item: Item) -> dict[str, Any]:
    """The chat-completions body the runner's ``openai`` backend sends for ``item``."""
    req = build_request(item, config)
    return {"model": config.model, "temperature": req.temperature,
            "max_tokens": req.max_tokens, "seed": req.seed,
            "messages": [dict(m) for m in req.messages]}


#: The columns of the table the script prints (and writes with --write-docs).
COLUMNS = ("ms per question", "wall, median", "wall, best", "CPU, median",
           "overhead vs raw HTTP: wall, paired median", "overhead: CPU, paired median")
NAMES = ("raw HTTP", "runner", "runner + bar")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-per-cell", type=int, default=20, help="items per design cell")
    ap.add_argument("--seed", type=int, default=2024, help="seed of the item set")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds")
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    add_write_docs_argument(ap)
    return ap


def row_keys(args: argparse.Namespace) -> list[str]:
    """The first cell of each row, in order."""
    return list(NAMES)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print a table; return the numbers."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)

    items = build_design_items(args.n_per_cell, args.seed, progress=False)
    n = len(items)
    names = NAMES
    with fast_server() as url:
        config = ModelConfig(name="fast-server", backend="openai", endpoint=url, model="fast",
                             temperature=0.0, max_tokens=1, prompt=1, prompt_form="chat",
                             answer_instruction="Answer with the location only.",
                             timeout=60.0, max_retries=0, concurrency=args.concurrency)
        bodies = [chat_body(config, it) for it in items]
        kb = [len(json.dumps(b)) / 1000 for b in bodies]
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in names}

        async def one_round() -> None:
            times["raw HTTP"].append(await raw_http(url, bodies, args.concurrency))
            times["runner"].append(await runner(config, items, args.concurrency, False))
            times["runner + bar"].append(await runner(config, items, args.concurrency, True))

        asyncio.run(one_round())  # warm-up (imports, first connections), not counted
        for v in times.values():
            v.clear()
        for _ in range(args.repeats):
            asyncio.run(one_round())

    def per_q(k: str, i: int, f: Any) -> float:
        return f(1000 * t[i] / n for t in times[k])

    wall = {k: {"median": per_q(k, 0, statistics.median), "best": per_q(k, 0, min)}
            for k in names}
    cpu = {k: {"median": per_q(k, 1, statistics.median), "best": per_q(k, 1, min)}
           for k in names}
    def paired(k: str, i: int) -> float:  # median over rounds of (k - raw HTTP), same round
        return statistics.median(1000 * (a[i] - r[i]) / n
                                 for a, r in zip(times[k], times["raw HTTP"], strict=True))

    result: dict[str, Any] = {
        "command": "python benchmarks/bench_runner.py " + " ".join(argv),
        "questions": n, "concurrency": args.concurrency, "repeats": args.repeats,
        "body_kb_min_median_max": [min(kb), statistics.median(kb), max(kb)],
        "loadavg_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
        "wall_ms_per_question": wall, "cpu_ms_per_question": cpu,
        "overhead_ms_per_question": {
            k: {"wall_median_difference": wall[k]["median"] - wall["raw HTTP"]["median"],
                "wall_paired_median": paired(k, 0), "cpu_paired_median": paired(k, 1)}
            for k in names[1:]},
    }
    print(f"{n} questions (request bodies {min(kb):.1f}-{max(kb):.1f} kB), concurrency "
          f"{args.concurrency}, {args.repeats} repeats; load average "
          f"{result['loadavg_1min']:.1f} on {result['cpus']} CPUs")
    rows = []
    for k in names:
        o = result["overhead_ms_per_question"].get(k)
        rows.append([k, f"{wall[k]['median']:.3f}", f"{wall[k]['best']:.3f}",
                     f"{cpu[k]['median']:.3f}",
                     "—" if o is None else f"{o['wall_paired_median']:.3f}",
                     "—" if o is None else f"{o['cpu_paired_median']:.3f}"])
    text = markdown_table(COLUMNS, rows) + (
        f"\n{n} questions (request bodies {min(kb):.1f}–{max(kb):.1f} kB), concurrency "
        f"{args.concurrency}, {args.repeats} rounds after a warm-up round; overhead = runner "
        "minus raw HTTP in the same round (target: under 2 ms per question).\n")
    print(text, end="")
    if args.write_docs:
        write_docs("bench_runner.py", argv, text)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        asyncio.run(_serve(int(sys.argv[2])))
    else:
        main()
