"""The shipped SmolLM2 log, a copy of it with runner errors for the tests of error policies
(``--errors drop|keep``, error counts in summaries and reports), and a copy written as logs
were before pairs and the previous place were recorded.

The shipped log has no error records: the runner's pre-flight refuses items that do not fit
the model's window before a run starts. The copy turns every 5,000-word record into the
record llama.cpp's refusal gives (``status = "error"``, ``error_category =
"context_overflow"``, no answer), which is what the project's first SmolLM2 run wrote for
its 5,000-word stories: 60 of 300 records, 240 answered.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED_LOG = REPO / "data" / "smollm2_storysim_log.jsonl"
SHIPPED_ITEMS = REPO / "data" / "smollm2_storysim_items.jsonl"

#: The fields a runner error record leaves empty (tomstats.evaluate.run's error records).
_EMPTY = ("correct", "response", "answer_text", "parsed_answer", "latency_s",
          "prompt_tokens", "completion_tokens", "finish_reason")


def overflow_record(record: dict) -> dict:
    """``record`` as the runner writes it when llama.cpp refuses an over-long prompt."""
    out = dict(record)
    out.update({k: None for k in _EMPTY if k in out})
    out.update(status="error", error_category="context_overflow",
               error="llama.cpp refused the request: Requested tokens (9663) exceed context "
                     "window of 8192")
    return out


def _rewritten(dest: Path, change) -> Path:
    """Write the shipped log to ``dest``, each record passed through ``change``."""
    lines = [json.dumps(change(json.loads(line)), ensure_ascii=False)
             for line in SHIPPED_LOG.read_text(encoding="utf-8").splitlines()]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def log_with_overflow_errors(dest: Path, context_words: int = 5000) -> Path:
    """Write the shipped log to ``dest`` with every ``context_words`` record an error."""
    return _rewritten(dest, lambda rec: overflow_record(rec)
                      if rec["context_words"] == context_words else rec)


#: The fields a log written before paired scores and the "previous place" baseline lacks.
_NEWER = ("pair_id", "previous_location")


def log_without_pairs(dest: Path) -> Path:
    """Write the shipped log to ``dest`` as an older runner wrote it: no ``pair_id`` and no
    ``previous_location`` in any record."""
    return _rewritten(dest, lambda rec: {k: v for k, v in rec.items() if k not in _NEWER})
