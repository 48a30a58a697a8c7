"""The evaluation runner: put story items to language models, log binary outcomes.

- :func:`load_model_config` — a ``models/*.toml`` file as a validated :class:`ModelConfig`;
- :func:`evaluate` / :func:`evaluate_async` — the resumable, cached, concurrent run;
- :func:`read_log` — the log as a validated long DataFrame (one row per question);
- :func:`repair_log` — remove a key's second answer from logs of older versions (one writer
  per log is enforced since: a second run on a locked log raises :class:`LogLocked`);
- :func:`build_request`, :func:`frame_for`, :data:`PROMPTS` — each item's own setting
  instructions (StorySim's prompt table for its rooms rules, AnaToM's own prompt), chat and
  completion forms;
- :func:`check_context` — the pre-flight that refuses prompts longer than the model's
  context window (counted with a local model's tokenizer, estimated for a server);
- :func:`redact`, :func:`safe_url` — what keeps secrets out of logs and messages;
- :func:`extract_answer_text`, :func:`score_response` — answer extraction and scoring;
- :func:`heuristic_answer` — the oracle / recency / first-common-location / random baselines.
"""

from __future__ import annotations

from tomstats.evaluate.backends import RequestFailed, heuristic_answer
from tomstats.evaluate.cache import DEFAULT_CACHE_DIR, Completion, ResponseCache
from tomstats.evaluate.config import (
    BACKENDS,
    HEURISTIC_STRATEGIES,
    ModelConfig,
    load_model_config,
    resolve_model_path,
)
from tomstats.evaluate.context import check_context, estimate_tokens
from tomstats.evaluate.extract import Scored, extract_answer_text, score_response
from tomstats.evaluate.log import LOG_FORMAT, LogLocked, RepairResult, read_log, repair_log
from tomstats.evaluate.prompts import PROMPTS, Request, build_request, frame_for
from tomstats.evaluate.redaction import redact, safe_url
from tomstats.evaluate.run import RunSummary, evaluate, evaluate_async

__all__ = [
    "BACKENDS",
    "DEFAULT_CACHE_DIR",
    "HEURISTIC_STRATEGIES",
    "LOG_FORMAT",
    "LogLocked",
    "PROMPTS",
    "Completion",
    "ModelConfig",
    "RepairResult",
    "Request",
    "RequestFailed",
    "ResponseCache",
    "RunSummary",
    "Scored",
    "build_request",
    "check_context",
    "estimate_tokens",
    "frame_for",
    "evaluate",
    "evaluate_async",
    "extract_answer_text",
    "heuristic_answer",
    "load_model_config",
    "read_log",
    "redact",
    "repair_log",
    "resolve_model_path",
    "safe_url",
    "score_response",
]
