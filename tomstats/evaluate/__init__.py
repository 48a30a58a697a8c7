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
- :func:`heuristic_answer` — the oracle / recency / first-common-location / random baselines;
- :mod:`tomstats.evaluate.baselines` — what each record carries for the paired scores and the
  report's baselines (``pair_id``, the target's previous place, the number of places).

Nothing is imported until it is first used (:pep:`562`): the log reader
(:mod:`tomstats.evaluate.log`, which the analysis commands use) comes without the HTTP client
and the backends of a run.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> module that defines it (imported on first use).
_NAMES: dict[str, str] = {
    "BACKENDS": "tomstats.evaluate.config",
    "DEFAULT_CACHE_DIR": "tomstats.evaluate.cache",
    "HEURISTIC_STRATEGIES": "tomstats.evaluate.config",
    "LOG_FORMAT": "tomstats.evaluate.log",
    "LogLocked": "tomstats.evaluate.log",
    "PROMPTS": "tomstats.evaluate.prompts",
    "Completion": "tomstats.evaluate.cache",
    "ModelConfig": "tomstats.evaluate.config",
    "RepairResult": "tomstats.evaluate.log",
    "Request": "tomstats.evaluate.prompts",
    "RequestFailed": "tomstats.evaluate.backends",
    "ResponseCache": "tomstats.evaluate.cache",
    "RunSummary": "tomstats.evaluate.run",
    "Scored": "tomstats.evaluate.extract",
    "build_request": "tomstats.evaluate.prompts",
    "check_context": "tomstats.evaluate.context",
    "estimate_tokens": "tomstats.evaluate.context",
    "frame_for": "tomstats.evaluate.prompts",
    "evaluate": "tomstats.evaluate.run",
    "evaluate_async": "tomstats.evaluate.run",
    "extract_answer_text": "tomstats.evaluate.extract",
    "heuristic_answer": "tomstats.evaluate.backends",
    "load_model_config": "tomstats.evaluate.config",
    "read_log": "tomstats.evaluate.log",
    "redact": "tomstats.evaluate.redaction",
    "repair_log": "tomstats.evaluate.log",
    "resolve_model_path": "tomstats.evaluate.config",
    "safe_url": "tomstats.evaluate.redaction",
    "score_response": "tomstats.evaluate.extract",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first used."""
    if name not in _NAMES:
        raise AttributeError(f"module 'tomstats.evaluate' has no attribute {name!r}")
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """The public API only: the names of :data:`__all__`."""
    return sorted(_NAMES)


__all__ = sorted(_NAMES)
