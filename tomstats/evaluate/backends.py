"""Backends: how a request becomes a completion. Each is an async function of one request.

:func:`open_backend` picks one by ``config.backend`` (a ``match``, no registry), checks that it
can work (server reachable, model file present, API key set) *before* any request is made, and
yields the async call. A call returns a :class:`~tomstats.evaluate.cache.Completion` or raises
:class:`RequestFailed` once the retry budget is spent (the runner then logs an error record).

- ``openai``: chat-completions (or completions) over async httpx. ``timeout`` is a deadline
  for the whole request (body included). Timeouts, connection and decoding errors, 200
  replies that are not a usable completion (cut or non-JSON body, empty ``choices``,
  ``content`` not a string), HTTP 408/409/425/429 and 5xx are retried with exponential
  backoff and full jitter (``Retry-After`` honoured up to ``max_retry_after``), bounded by
  ``max_retries``; other HTTP errors fail at once. Secrets are redacted from every text
  before it is cut or written; 401/403 bodies are never quoted.
- ``llamacpp``: llama-cpp-python in process, one request at a time in a worker thread so the
  event loop is never blocked; greedy decoding at temperature 0, seeded.
- ``heuristic``: the deterministic baselines (no model).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import email.utils
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

import httpx

from tomstats._validate import DuplicateKeyError, loads_unique
from tomstats.evaluate.cache import Completion
from tomstats.evaluate.config import ModelConfig, resolve_model_path
from tomstats.evaluate.prompts import Request
from tomstats.evaluate.redaction import REDACTED, Redactor, redact, safe_url, scrub
from tomstats.stories.items import Item

__all__ = ["REDACTED", "Call", "RequestFailed", "backoff_delay", "capped_retry_after",
           "heuristic_answer", "load_llama", "open_backend", "read_body", "redact",
           "redactor_for", "scrub"]

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
    ``(seed, item_id, sample)`` (independent of run order); ``rule:NAME``: the text-only
    rule ``NAME`` of :func:`tomstats.stories.audit.rule_answers` (e.g. ``rule:t_last``,
    the place named in the last sentence that names the target). An empty string when the
    item lacks the field the heuristic reads.
    """
    if strategy.startswith("rule:"):
        from tomstats.stories.audit import rule_answers

        answers = rule_answers(item)
        if strategy[5:] not in answers:
            raise ValueError(f"unknown heuristic strategy {strategy!r}")
        return answers[strategy[5:]]
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

    ``uniform(0, min(cap, base * 2**retry))``, raised to a server's ``Retry-After`` when one
    was sent (the caller caps that at ``max_retry_after`` first, see :func:`capped_retry_after`).
    """
    d = rng.uniform(0.0, min(cap, base * 2.0**retry))
    if retry_after is not None:
        d = max(d, retry_after)
    return d


#: How far into a response body an error message quotes (after redaction).
BODY_QUOTE_CHARS = 300

#: How much of a non-200 body is read (only its start is ever quoted).
ERROR_BODY_BYTES = 65536


# --------------------------------------------------------------------------- openai


class _BadResponse(Exception):
    """A reply that is not a usable completion (retried like a transient error)."""


def capped_retry_after(resp: httpx.Response, cap: float) -> tuple[float | None, float | None]:
    """``(asked, honoured)``: the server's ``Retry-After`` in seconds and that value capped at
    ``cap``; ``(None, None)`` without a valid header. Seconds and HTTP dates are read."""
    raw = resp.headers.get("retry-after")
    if raw is None:
        return None, None
    try:
        asked = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None, None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        asked = (when - _dt.datetime.now(_dt.UTC)).total_seconds()
    if not math.isfinite(asked):
        return None, None
    asked = max(0.0, asked)
    return asked, min(asked, cap)


def _parse_openai(data: Any, form: str) -> Completion:
    """A completion from a decoded 200 body; :class:`_BadResponse` says what is wrong."""
    if not isinstance(data, dict):
        raise _BadResponse(f"body is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _BadResponse("no 'choices' in the body" if not choices
                           else f"'choices' is a {type(choices).__name__}, not a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _BadResponse(f"choices[0] is a {type(choice).__name__}, not an object")
    if form == "chat":
        msg = choice.get("message")
        if not isinstance(msg, dict):
            raise _BadResponse("choices[0] has no 'message' object")
        text = msg.get("content")
        field = "message.content"
    else:
        text, field = choice.get("text"), "text"
    if not isinstance(text, str):
        raise _BadResponse(f"choices[0].{field} is {type(text).__name__}, not a string")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}

    def count(k: str) -> int | None:
        v = usage.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    finish = choice.get("finish_reason")
    return Completion(text=text, prompt_tokens=count("prompt_tokens"),
                      completion_tokens=count("completion_tokens"),
                      finish_reason=finish if isinstance(finish, str) else None)


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


def _auth_reason(data: bytes, redactor: Redactor) -> str:
    """A short, redacted reason for a 401/403 (never the body verbatim)."""
    reason = ""
    with contextlib.suppress(Exception):
        err = json.loads(data.decode("utf-8", "replace")).get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(msg, str):
            reason = msg
    reason = redactor.quote(reason, 80).removesuffix("…")
    return f"authentication refused{': ' + reason if reason else ''} (check the API key)"


def note(message: str) -> None:
    """One line on stderr that does not break a progress bar."""
    from tqdm.auto import tqdm

    tqdm.write(f"tomstats evaluate: {message}", file=sys.stderr)


#: HTTP statuses that are retried (besides timeouts, connection and decoding errors and
#: malformed 200 replies).
RETRY_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))

#: Content codings the client asks for and decodes (as a stream, within the body cap).
ACCEPT_ENCODING = "gzip, deflate"


class _BodyTooLarge(Exception):
    """A body longer than the cap (after decoding)."""


class _Undecodable(Exception):
    """A body whose content coding cannot be undone."""


class _Inflater:
    """Streaming decoder of one content coding, bounded: never more than ``room`` bytes out
    per call, so a small gzip bomb cannot inflate beyond the cap in memory."""

    def __init__(self, coding: str) -> None:
        import zlib

        self._zlib = zlib
        self.coding = coding
        # 47 = 32 + 15: a gzip or zlib header, detected; deflate may also come raw (-15)
        self._dec = zlib.decompressobj(47 if coding in ("gzip", "x-gzip") else 15)
        self._started = False

    def feed(self, data: bytes, room: int) -> bytes:
        out = bytearray()
        try:
            while data and len(out) <= room:
                try:
                    piece = self._dec.decompress(data, room + 1 - len(out))
                except self._zlib.error:
                    if self.coding != "deflate" or self._started:
                        raise
                    self._dec = self._zlib.decompressobj(-15)  # raw deflate, no header
                    piece = self._dec.decompress(data, room + 1 - len(out))
                self._started = True
                out += piece
                data = self._dec.unconsumed_tail
                if not piece and not data:
                    break
        except self._zlib.error as exc:
            raise _Undecodable(f"{self.coding}: {exc}") from None
        return bytes(out)


async def read_body(resp: httpx.Response, cap: int, *, strict: bool = True) -> bytes:
    """The decoded body of a streamed response, at most ``cap`` bytes.

    Reads the raw bytes as they arrive and undoes ``gzip`` / ``deflate`` as a stream (each
    step bounded by the room left under the cap). With ``strict``, raises
    :class:`_BodyTooLarge` as soon as the body would pass ``cap`` (a declared
    ``Content-Length`` over it is refused before reading); without, returns its first
    ``cap`` bytes. Raises :class:`_Undecodable` for another or a broken content coding. The
    caller bounds the whole read with its deadline.
    """
    codings = [c.strip().lower() for c in resp.headers.get("content-encoding", "").split(",")
               if c.strip() and c.strip().lower() != "identity"]
    if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
        raise _Undecodable(f"unsupported Content-Encoding {resp.headers['content-encoding']!r}")
    inflater = _Inflater(codings[0]) if codings else None
    declared = resp.headers.get("content-length", "")
    if strict and inflater is None and declared.isdigit() and int(declared) > cap:
        raise _BodyTooLarge(f"declares {int(declared):,} bytes")
    buf = bytearray()
    async for chunk in resp.aiter_raw():
        room = cap - len(buf)
        buf += inflater.feed(chunk, room) if inflater is not None else chunk[:room + 1]
        if len(buf) > cap:
            if strict:
                raise _BodyTooLarge("more")
            return bytes(buf[:cap])
    return bytes(buf)


async def _attempt(client: httpx.AsyncClient, url: str, body: dict[str, Any],
                   config: ModelConfig, redactor: Redactor,
                   form: str) -> tuple[Completion | None, str, httpx.Response | None, bool]:
    """One try: ``(completion, reason, response, retryable)``; never raises on a reply."""
    cap = config.max_response_bytes
    data = b""
    try:
        # the deadline covers the whole request: connecting, sending, and the last body byte
        async with asyncio.timeout(config.timeout), client.stream("POST", url,
                                                                  json=body) as resp:
            ok = resp.status_code == 200  # only the start of an error body is ever quoted
            data = await read_body(resp, cap if ok else min(cap, ERROR_BODY_BYTES), strict=ok)
    except (TimeoutError, httpx.TimeoutException):
        return None, f"timeout: no complete response within {config.timeout:g} s", None, True
    except _BodyTooLarge:
        return None, (f"response body larger than {cap:,} bytes (max_response_bytes) "
                      "(HTTP 200)"), resp, True
    except _Undecodable as exc:
        return None, f"undecodable response body ({redactor.quote(str(exc), 80)})", None, True
    except httpx.DecodingError as exc:
        return None, f"undecodable response body ({redactor.quote(str(exc), 80)})", None, True
    except httpx.TransportError as exc:
        return None, f"connection error ({type(exc).__name__})", None, True
    except httpx.HTTPError as exc:
        return None, f"HTTP error ({type(exc).__name__})", None, True
    code = resp.status_code
    if code == 200:
        try:
            return _parse_openai(loads_unique(data.decode("utf-8")), form), "", resp, False
        except UnicodeDecodeError:
            reason = "response body is not UTF-8"
        except DuplicateKeyError as exc:  # readers differ on which value counts: not scored
            reason = f"malformed response: {exc}"
        except ValueError as exc:  # json.JSONDecodeError
            reason = f"response body is not JSON ({exc})"
        except _BadResponse as exc:
            reason = f"malformed response: {exc}"
        except RecursionError:
            reason = "response body is nested too deeply"
        return None, f"{reason} (HTTP 200)", resp, True
    if code in (401, 403):
        return None, f"HTTP {code}: {_auth_reason(data, redactor)}", resp, False
    detail = redactor.quote(data.decode("utf-8", "replace"), BODY_QUOTE_CHARS)
    return None, f"HTTP {code}: {detail}", resp, code in RETRY_STATUS


async def _post_with_retries(client: httpx.AsyncClient, config: ModelConfig,
                             redactor: Redactor, request: Request,
                             rng: random.Random) -> Completion:
    url = config.endpoint.rstrip("/") + ("/chat/completions" if request.form == "chat"
                                         else "/completions")
    shown = safe_url(url)
    body = _openai_body(config, request)
    reason = ""
    for attempt in range(config.max_retries + 1):
        t0 = time.perf_counter()
        comp, reason, resp, retryable = await _attempt(client, url, body, config, redactor,
                                                       request.form)
        if comp is not None:  # the answer as the model gave it: scored before any redaction
            return Completion(text=comp.text, prompt_tokens=comp.prompt_tokens,
                              completion_tokens=comp.completion_tokens,
                              finish_reason=comp.finish_reason,
                              latency_s=time.perf_counter() - t0, attempts=attempt + 1)
        if not retryable:
            raise RequestFailed(f"{reason} from {shown}", attempt + 1)
        if attempt == config.max_retries:
            break
        asked = honoured = None
        if resp is not None:
            asked, honoured = capped_retry_after(resp, config.max_retry_after)
            if asked is not None and honoured is not None and asked > honoured:
                note(f"{shown} asked to wait {asked:g} s (Retry-After); waiting "
                     f"{honoured:g} s, the cap (max_retry_after / --max-retry-after)")
        await asyncio.sleep(backoff_delay(attempt, config.backoff_base, config.backoff_max, rng,
                                          honoured))
    raise RequestFailed(f"{reason} from {shown}; gave up after {config.max_retries + 1} "
                        "attempts", config.max_retries + 1)


def redactor_for(config: ModelConfig) -> Redactor:
    """The :class:`~tomstats.evaluate.redaction.Redactor` of a configuration's secrets (its API
    key and its endpoint's credentials; empty for backends without an endpoint)."""
    if config.backend != "openai":
        return Redactor()
    return Redactor.for_endpoint(config.endpoint, config.api_key())


@contextlib.asynccontextmanager
async def _openai_backend(config: ModelConfig) -> AsyncIterator[Call]:
    key = config.api_key()
    redactor = redactor_for(config)
    headers = {"Accept-Encoding": ACCEPT_ENCODING}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    host = urlparse(config.endpoint).hostname or ""
    client = httpx.AsyncClient(
        timeout=config.timeout, headers=headers,
        limits=httpx.Limits(max_connections=config.concurrency,
                            max_keepalive_connections=config.concurrency),
        trust_env=host not in _LOOPBACK)
    try:
        rng = random.Random(config.seed)
        await _check_reachable(client, config, redactor, rng)

        async def call(request: Request) -> Completion:
            try:
                return await _post_with_retries(client, config, redactor, request, rng)
            except RequestFailed as exc:
                # an error text must never carry a secret, whatever the server echoed
                raise RequestFailed(redactor(str(exc)), exc.attempts) from None
            except Exception as exc:  # noqa: BLE001 - no reply may crash the run
                raise RequestFailed(redactor(f"unexpected failure ({type(exc).__name__}: "
                                             f"{exc})")) from None

        yield call
    finally:
        await client.aclose()


#: Pre-flight retries (at most) and the longest wait between two (seconds): a server that is
#: down fails within a few seconds, one dropped connection does not abort the run.
PREFLIGHT_RETRIES, PREFLIGHT_BACKOFF_MAX = 3, 2.0


async def _check_reachable(client: httpx.AsyncClient, config: ModelConfig, redactor: Redactor,
                           rng: random.Random) -> None:
    """Fail fast (with the URL, its credentials redacted) when nothing answers there.

    ``GET <endpoint>/models`` is retried on timeouts and connection errors
    (``min(max_retries, 3)`` retries, backoff as configured but at most 2 s a wait); any
    HTTP answer but 401/403 counts as reachable. The body is read as a stream, at most
    64 KiB of it, within the same deadline.
    """
    url = config.endpoint.rstrip("/") + "/models"
    shown, endpoint = safe_url(url), safe_url(config.endpoint)
    limit = min(config.timeout, 10.0)
    retries = min(config.max_retries, PREFLIGHT_RETRIES)
    why = ""
    for attempt in range(retries + 1):
        data = b""
        try:
            async with asyncio.timeout(limit), client.stream("GET", url) as resp:
                with contextlib.suppress(_Undecodable):
                    data = await read_body(resp, ERROR_BODY_BYTES, strict=False)
        except (TimeoutError, httpx.TimeoutException):
            why = f"model server {endpoint!r} did not answer within {limit:g} s"
        except httpx.HTTPError as exc:
            why = f"cannot reach model server {endpoint!r} ({type(exc).__name__})"
        else:
            if resp.status_code in (401, 403):
                raise ValueError(redactor(f"model server {endpoint!r} refused GET {shown} "
                                          f"with HTTP {resp.status_code}: "
                                          f"{_auth_reason(data, redactor)}; api_key_env = "
                                          f"{config.api_key_env!r}"))
            return
        if attempt < retries:
            await asyncio.sleep(backoff_delay(attempt, config.backoff_base,
                                              min(config.backoff_max, PREFLIGHT_BACKOFF_MAX),
                                              rng))
    raise ValueError(redactor(f"{why} (GET {shown}, {retries + 1} attempts); is it running?"))


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
