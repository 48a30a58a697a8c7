"""Pre-flight: will every prompt fit the model's context window, together with its answer?

Before a run starts, each item's request is counted in tokens and compared with the model's
window: ``n_ctx`` of a ``llamacpp`` model (counted exactly, with the model's own tokenizer
and chat template, loaded with ``vocab_only=True``: no weights) or ``max_context`` of an
``openai`` server (estimated by :func:`estimate_tokens`, since a server's tokenizer is not at
hand; ``max_context = 0`` skips the check). A run in which any prompt plus ``max_tokens``
does not fit is refused before anything is written, naming the cells (setting × context
length × ToM order) that do not fit — instead of ending those questions as
``context_overflow`` records after the run.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tomstats.evaluate.config import ModelConfig
from tomstats.evaluate.prompts import Request

__all__ = ["ContextCheck", "Counter", "check_context", "estimate_tokens", "token_counter"]

#: Pieces of text that a BPE tokenizer rarely merges: a run of letters, one digit, one
#: other symbol, a run of whitespace.
_PIECE = re.compile(r"[^\W\d_]+|\d|\s+|[^\w\s]|_")

#: Letters per token assumed beyond the first token of a word.
_LETTERS_PER_TOKEN = 6

#: Margin added to the piece count (the count alone is up to 2 % low on short stories).
_MARGIN = 1.05

#: Tokens a chat template adds per message and once per conversation (a default system
#: message included), in the estimate.
MESSAGE_OVERHEAD, CHAT_OVERHEAD = 8, 32


def _pieces(text: str) -> int:
    n = 0
    for m in _PIECE.finditer(text):
        p = m.group(0)
        if p[0].isspace():
            n += p != " "
        elif p[0].isalpha():
            n += 1 + (len(p) - 1) // _LETTERS_PER_TOKEN
        else:
            n += 1
    return n


_story_pieces = functools.lru_cache(maxsize=8192)(_pieces)


def estimate_tokens(text: str) -> int:
    """An estimate of a BPE tokenizer's count for ``text``, meant to err on the high side.

    ``ceil(1.05 × n)``, where ``n`` counts ``1 + (len - 1) // 6`` tokens for every run of
    letters, one for every digit, symbol and underscore, and one for a run of whitespace
    other than one space. Against SmolLM2's tokenizer (49,152 entries) it is 0–20 % high on
    the story generator's items of every setting and length (a test checks the ratio).
    """
    return math.ceil(_MARGIN * _pieces(text))


def _split_story(text: str, story: str) -> tuple[str, str, str] | None:
    """``(before, story, after)`` when ``story`` (a long text) occurs once in ``text``."""
    i = text.find(story) if len(story) > 256 else -1
    if i < 0:
        return None
    return text[:i], story, text[i + len(story):]


def _estimate_text(text: str, story: str) -> int:
    parts = _split_story(text, story)
    n = _pieces(text) if parts is None else (
        _pieces(parts[0]) + _story_pieces(parts[1]) + _pieces(parts[2]))
    return math.ceil(_MARGIN * n)


def _estimate_request(request: Request) -> int:
    story = request.item.story.strip()
    if request.form == "chat":
        return CHAT_OVERHEAD + sum(MESSAGE_OVERHEAD + _estimate_text(m["content"], story)
                                   for m in request.messages)
    return CHAT_OVERHEAD + _estimate_text(request.prompt, story)


@dataclass(frozen=True)
class Counter:
    """How a model's prompts are counted against its context window.

    ``exact(request)`` is the count to compare with ``window``. ``count(request)`` returns
    ``(tokens, slack)``: a faster count within ``slack`` tokens of ``exact`` (the item's
    story tokenized once and cached, its prompt's other pieces apart: the count may differ
    by a token where a piece meets the story); near the window, ``exact`` decides.
    """

    exact: Callable[[Request], int]
    window: int
    how: str
    count: Callable[[Request], tuple[int, int]] | None = None

    def tokens(self, request: Request, max_tokens: int) -> int:
        """The prompt's tokens: the fast count, or the exact one where it could matter."""
        if self.count is None:
            return self.exact(request)
        n, slack = self.count(request)
        if slack and abs(n + max_tokens - self.window) <= slack:
            return self.exact(request)
        return n


#: Tokens a piece of a prompt may gain or lose where it meets the story (per boundary).
_BOUNDARY_SLACK = 2


def _llama_counter(config: ModelConfig) -> Counter:
    """Prompt tokens with the model's own tokenizer and chat template (no weights)."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise ValueError("backend 'llamacpp' needs llama-cpp-python (the 'local' extra: "
                         f"pip install 'tomstats[local]'): {exc}") from None
    from tomstats.evaluate.config import resolve_model_path

    vocab = Llama(model_path=str(resolve_model_path(config.model_path)), vocab_only=True,
                  verbose=False)
    formatter = _chat_formatter(vocab)

    @functools.lru_cache(maxsize=8192)
    def tok(text: str, bos: bool) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=bos, special=True))

    def rendered(request: Request) -> tuple[str, bool] | None:
        """The text llama.cpp tokenizes and whether it adds BOS (``None``: a named chat
        format, counted from the contents with an allowance)."""
        if request.form != "chat":
            return request.prompt, True
        if formatter is None:
            return None
        res = formatter(messages=[dict(m) for m in request.messages])
        return res.prompt, not res.added_special

    def allowance(request: Request) -> int:
        return CHAT_OVERHEAD + sum(MESSAGE_OVERHEAD + tok(m["content"], False)
                                   for m in request.messages)

    def exact(request: Request) -> int:
        r = rendered(request)
        if r is None:
            return allowance(request)
        return len(vocab.tokenize(r[0].encode("utf-8"), add_bos=r[1], special=True))

    def count(request: Request) -> tuple[int, int]:
        r = rendered(request)
        if r is None:
            return allowance(request), 0
        parts = _split_story(r[0], request.item.story.strip())
        if parts is None:
            return exact(request), 0
        before, story, after = parts
        return (tok(before, r[1]) + tok(story, False) + tok(after, False),
                2 * _BOUNDARY_SLACK)

    return Counter(exact, config.n_ctx, "counted with the model's tokenizer", count)


def _chat_formatter(vocab: Any) -> Any:
    """The Jinja chat formatter ``create_chat_completion`` uses for a GGUF chat template
    (``None`` when the model uses one of llama-cpp-python's named formats instead)."""
    template = vocab.metadata.get("tokenizer.chat_template")
    if not template or vocab.chat_format != "chat_template.default":
        return None
    from llama_cpp import llama_chat_format

    def text(tid: int) -> str:
        return vocab._model.token_get_text(tid) if tid != -1 else ""

    return llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=text(vocab.token_eos()), bos_token=text(vocab.token_bos()),
        stop_token_ids=[vocab.token_eos()])


def token_counter(config: ModelConfig) -> Counter | None:
    """The :class:`Counter` of a configuration, or ``None`` when nothing is checked
    (heuristic models; an ``openai`` model without ``max_context``)."""
    match config.backend:
        case "llamacpp":
            return _llama_counter(config)
        case "openai" if config.max_context:
            return Counter(_estimate_request, config.max_context,
                           "estimated; the server's own count may differ a little")
    return None


@dataclass(frozen=True)
class ContextCheck:
    """The outcome of :func:`check_context` for one cell: items, items too long, the
    longest prompt in tokens."""

    cell: tuple[str, int, int]
    n_items: int
    n_over: int
    max_prompt: int


def check_context(requests: Iterable[Request], config: ModelConfig,
                  counter: Counter | None = None) -> list[ContextCheck]:
    """Count every request and refuse a run whose prompts do not fit.

    A request fits when ``prompt tokens + max_tokens <= window``. Identical prompts are
    counted once; a story shared by several prompts is tokenized once (see
    :class:`Counter`).

    Returns
    -------
    list of ContextCheck
        One per cell (setting, context words, ToM order), sorted; empty when nothing is
        checked (see :func:`token_counter`).

    Raises
    ------
    ValueError
        Naming the model, its window and every cell with items that do not fit.
    """
    counter = counter if counter is not None else token_counter(config)
    if counter is None:
        return []
    window = counter.window
    seen: dict[str, int] = {}
    cells: dict[tuple[str, int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for req in requests:
        n = seen.get(req.prompt_hash)
        if n is None:
            n = seen[req.prompt_hash] = counter.tokens(req, req.max_tokens)
        it = req.item
        c = cells[(it.setting, it.context_words, it.tom_order)]
        c[0] += 1
        c[1] += n + req.max_tokens > window
        c[2] = max(c[2], n)
    out = [ContextCheck(k, *v) for k, v in sorted(cells.items())]
    bad = [c for c in out if c.n_over]
    if bad:
        parts = "; ".join(f"{s} × {w} words × order {o}: {c.n_over} of {c.n_items} items "
                          f"(up to {c.max_prompt:,} tokens)"
                          for c in bad for (s, w, o) in [c.cell])
        field = "n_ctx" if config.backend == "llamacpp" else "max_context"
        raise ValueError(
            f"model {config.name!r}: prompts do not fit its context window of {window:,} "
            f"tokens ({field}) with max_tokens = {config.max_tokens} ({counter.how}) in "
            f"{len(bad)} cell(s) of setting × context length × ToM order: {parts}; leave "
            "those items out or use a model with a longer context")
    return out
