"""On-disk response cache keyed by model configuration hash *and* request hash.

Entries live at ``<root>/<config_hash[:16]>/<request_hash[:2]>/<request_hash>.json`` and are
written atomically; two model configurations never share an entry because the configuration
hash is part of the path and is checked again on read. Only answered requests are cached, and
an entry holds the response and its token counts, never a key or header.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tomstats._io import atomic_write_text

__all__ = ["DEFAULT_CACHE_DIR", "Completion", "ResponseCache"]

#: Default cache folder (relative to the working directory).
DEFAULT_CACHE_DIR = ".tomstats_cache"


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one request (``attempts``: tries it took; not cached)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    attempts: int = 1


@dataclass(frozen=True)
class ResponseCache:
    """A folder of cached completions (see the module docstring)."""

    root: Path

    def _path(self, config_hash: str, request_hash: str) -> Path:
        return self.root / config_hash[:16] / request_hash[:2] / f"{request_hash}.json"

    def get(self, config_hash: str, request_hash: str) -> Completion | None:
        """The cached completion, or ``None`` (a corrupt or foreign entry counts as a miss)."""
        p = self._path(config_hash, request_hash)
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(d, dict) or d.get("config_hash") != config_hash \
                or d.get("request_hash") != request_hash or not isinstance(d.get("text"), str):
            return None
        try:
            return Completion(text=d["text"], prompt_tokens=d.get("prompt_tokens"),
                              completion_tokens=d.get("completion_tokens"),
                              finish_reason=d.get("finish_reason"),
                              latency_s=float(d.get("latency_s", 0.0)))
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, config_hash: str, request_hash: str, completion: Completion) -> None:
        """Store a completion atomically."""
        p = self._path(config_hash, request_hash)
        os.makedirs(p.parent, exist_ok=True)
        d = {"config_hash": config_hash, "request_hash": request_hash, "text": completion.text,
             "prompt_tokens": completion.prompt_tokens,
             "completion_tokens": completion.completion_tokens,
             "finish_reason": completion.finish_reason, "latency_s": completion.latency_s}
        atomic_write_text(p, json.dumps(d, ensure_ascii=False))
