"""Backends: how a request becomes a completion. Each is an async function of one request.

:func:`open_backend` picks one by ``config.backend`` (a ``match``, no registry), checks that it
can work (server reachable, model file present, API key set) *before* any request is made, and
yields the async call. A call returns a :class:`~tomstats.evaluate.cache.Completion` or raises
:class:`RequestFailed` once the retry budget is spent (the runner then logs an error record).

- ``openai``: chat-completions (or completions) over async httpx; timeouts, connection errors,
  HTTP 429 and 5xx are retried with exponential backoff and full jitter, bounded by
  ``max_retries``; other HTTP errors fail at once.
- ``llamacpp``: llama-cpp-python in process, one request at a time in a worker thread so the
  event loop is never blocked; greedy decoding at temperature 0, seeded.
- ``heuristic``: the deterministic baselines (no model).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

import httpx

from tomstats.evaluate.cache import Completion
from tomstats.evaluate.config import ModelConfig, resolve_model_path
from tomstats.evaluate.prompts import Request
from tomstats.stories.items import Item

__all__ = ["Call", "RequestFailed", "backoff_delay", "heuristic_answer", "load_llama",
           "open_backend"]

#: A backend call: one request in, one completion out.
Call = Callable[[Request], Awaitable[Completion]]

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class RequestFailed(Exception):
    """A request that failed for good (after ``attempts`` tries)."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


@contextlib.asynccontextmanager
async def open_backend(config: ModelConfig) -> AsyncIterator[Call]:
    """Open the backend ``config.backend`` names and yield its call.

    Raises
    ------
    ValueError
        Before any request: unreachable server (with its URL), unset API-key variable,
        missing model file or llama-cpp-python not installed.
    """
    match config.backend:
        case "openai":
            async with _openai_backend(config) as call:
                yield call
        case "llamacpp":
            async with _llamacpp_backend(config) as call:
                yield call
        case "heuristic":
            yield _heuristic_backend(config)
        case other:  # pragma: no cover - ModelConfig validates the backend
            raise ValueError(f"unknown backend {other!r}")


# --------------------------------------------------------------------------- heuristic


def heuristic_answer(strategy: str, item: Item, seed: int = 0, sample: int = 0) -> str:
    """The answer of a heuristic baseline (deterministic).

    ``oracle``: the gold answer; ``recency``: the target's last location
    (``item.last_location``); ``first_common_location``: StorySim's first location the
    question's agents shared; ``random``: a uniform draw from ``item.candidates`` seeded by
    ``(seed, item_id, sample)`` (independent of run order). An empty string when the item
    lacks the field the heuristic reads.
    """
    match strategy:
        case "oracle":
            return item.answer
        case "recency":
            return item.last_location or ""
        case "first_common_location":
            return item.first_common_location or ""
        case "random":
            digest = hashlib.sha256(f"{seed}\0{item.item_id}\0{sample}".encode()).digest()
            rng = random.Random(int.from_bytes(digest[:8], "big"))
            return rng.choice(sorted(item.candidates)) if item.candidates else ""
    raise ValueError(f"unknown heuristic strategy {strategy!r}")


def _heuristic_backend(config: ModelConfig) -> Call:
    async def call(request: Request) -> Completion:
        text = heuristic_answer(config.strategy, request.item, config.seed, request.sample)
        return Completion(text=text, prompt_tokens=0, completion_tokens=0,
                          finish_reason="stop")

    return call


# --------------------------------------------------------------------------- openai


def backoff_delay(retry: int, base: float, cap: float, rng: random.Random,
                  retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``retry`` (0-based): full jitter on an exponential cap.

    ``uniform(0, min(cap, base * 2**retry))``, raised to a server's ``Retry-After`` (itself
    capped at ``cap``) when one was sent.
    """
    d = rng.uniform(0.0, min(cap, base * 2.0**retry))
    if retry_after is not None:
        d = max(d, min(cap, retry_after))
    return d


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return max(0.0, float(resp.headers.get("retry-after", "")))
    except ValueError:
        return None


def _parse_openai(data: Any, form: str) -> Completion:
    choice = data["choices"][0]
    text = choice["message"]["content"] if form == "chat" else choice["text"]
    usage = data.get("usage") or {}
    return Completion(text=text or "", prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"),
                      finish_reason=choice.get("finish_reason"))


def _openai_body(config: ModelConfig, request: Request) -> dict[str, Any]:
    body: dict[str, Any] = dict(config.extra_body)
    body.update(model=config.model, temperature=request.temperature,
                max_tokens=request.max_tokens, seed=request.seed)
    if request.stop:
        body["stop"] = list(request.stop)
    if request.form == "chat":
        body["messages"] = [dict(m) for m in request.messages]
    else:
        body["prompt"] = request.prompt
    return body


async def _post_with_retries(client: httpx.AsyncClient, config: ModelConfig, key: str | None,
                             request: Request, rng: random.Random) -> Completion:
    url = config.endpoint.rstrip("/") + ("/chat/completions" if request.form == "chat"
                                         else "/completions")
    body = _openai_body(config, request)
    reason = ""
    for attempt in range(config.max_retries + 1):
        retry_after = None
        t0 = time.perf_counter()
        try:
            resp = await client.post(url, json=body)
        except httpx.TimeoutException:
            reason = f"timeout after {config.timeout:g} s"
        except httpx.TransportError as exc:
            reason = f"connection error ({type(exc).__name__})"
        else:
            if resp.status_code == 200:
                try:
                    comp = _parse_openai(resp.json(), request.form)
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise RequestFailed(f"malformed response from {url}: {exc!r}",
                                        attempt + 1) from None
                return Completion(text=_redact(comp.text, key), prompt_tokens=comp.prompt_tokens,
                                  completion_tokens=comp.completion_tokens,
                                  finish_reason=comp.finish_reason,
                                  latency_s=time.perf_counter() - t0, attempts=attempt + 1)
            detail = _redact(resp.text[:300], key)
            if resp.status_code != 429 and resp.status_code < 500:
                raise RequestFailed(f"HTTP {resp.status_code} from {url}: {detail}", attempt + 1)
            reason = f"HTTP {resp.status_code}"
            retry_after = _retry_after(resp)
        if attempt == config.max_retries:
            break
        await asyncio.sleep(backoff_delay(attempt, config.backoff_base, config.backoff_max, rng,
                                          retry_after))
    raise RequestFailed(f"{reason} from {url}; gave up after {config.max_retries + 1} attempts",
                        config.max_retries + 1)


@contextlib.asynccontextmanager
async def _openai_backend(config: ModelConfig) -> AsyncIterator[Call]:
    key = config.api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    host = urlparse(config.endpoint).hostname or ""
    client = httpx.AsyncClient(
        timeout=config.timeout, headers=headers,
        limits=httpx.Limits(max_connections=config.concurrency,
                            max_keepalive_connections=config.concurrency),
        trust_env=host not in _LOOPBACK)
    try:
        await _check_reachable(client, config)
        rng = random.Random(config.seed)

        async def call(request: Request) -> Completion:
            try:
                return await _post_with_retries(client, config, key, request, rng)
            except RequestFailed as exc:
                # an error text must never carry the key, whatever the server echoed
                raise RequestFailed(_redact(str(exc), key), exc.attempts) from None

        yield call
    finally:
        await client.aclose()


async def _check_reachable(client: httpx.AsyncClient, config: ModelConfig) -> None:
    """Fail fast (with the URL) when nothing answers at the endpoint; any HTTP answer is fine."""
    url = config.endpoint.rstrip("/") + "/models"
    try:
        await client.get(url, timeout=min(config.timeout, 10.0))
    except httpx.TimeoutException:
        raise ValueError(f"model server {config.endpoint!r} did not answer within "
                         f"{min(config.timeout, 10.0):g} s (GET {url})") from None
    except httpx.TransportError as exc:
        raise ValueError(f"cannot reach model server {config.endpoint!r} "
                         f"({type(exc).__name__}); is it running?") from None


# --------------------------------------------------------------------------- llamacpp


def load_llama(config: ModelConfig) -> Any:
    """Load the GGUF model of a ``llamacpp`` configuration (``ValueError`` when impossible)."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise ValueError("backend 'llamacpp' needs llama-cpp-python (the 'local' extra: "
                         f"pip install 'tomstats[local]'): {exc}") from None
    path = resolve_model_path(config.model_path)
    threads = config.n_threads or None
    return Llama(model_path=str(path), n_ctx=config.n_ctx, n_threads=threads,
                 n_threads_batch=threads, seed=config.seed, verbose=False)


def _llama_generate(llm: Any, request: Request) -> Completion:
    t0 = time.perf_counter()
    kw: dict[str, Any] = {"temperature": request.temperature, "max_tokens": request.max_tokens,
                          "seed": request.seed, "stop": list(request.stop) or None,
                          "repeat_penalty": 1.0}
    if request.form == "chat":
        out = llm.create_chat_completion(messages=[dict(m) for m in request.messages], **kw)
        text = out["choices"][0]["message"]["content"]
    else:
        out = llm.create_completion(prompt=request.prompt, **kw)
        text = out["choices"][0]["text"]
    usage = out.get("usage") or {}
    return Completion(text=text or "", prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"),
                      finish_reason=out["choices"][0].get("finish_reason"),
                      latency_s=time.perf_counter() - t0)


@contextlib.asynccontextmanager
async def _llamacpp_backend(config: ModelConfig) -> AsyncIterator[Call]:
    llm = load_llama(config)
    lock = asyncio.Lock()  # a Llama object is not thread-safe: one request at a time

    async def call(request: Request) -> Completion:
        async with lock:
            try:
                return await asyncio.to_thread(_llama_generate, llm, request)
            except ValueError as exc:  # e.g. prompt longer than n_ctx
                raise RequestFailed(f"llama.cpp refused the request: {exc}") from None

    try:
        yield call
    finally:
        close = getattr(llm, "close", None)
        if close is not None:
            close()
