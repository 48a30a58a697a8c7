"""Hostile replies, third round (issue 31, items 6 and 12): a server that echoes the API key
in a derived form (base64 in either alphabet, with or without padding, at any alignment;
hexadecimal; reversed) gets none of it into the log, the cache or stderr, and a reply whose
JSON holds one key twice is an invalid reply, never scored.

Servers are stdlib ``http.server`` instances on 127.0.0.1 (:func:`evaluate._support.scripted`).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from evaluate._support import (
    Scripted,
    answer,
    fake_answer,
    log_lines,
    make_items,
    openai_config,
    scripted,
    write_model_file,
)
from tomstats.cli import main
from tomstats.evaluate.redaction import REDACTED, derived_forms, redact
from tomstats.stories.items import write_items

KEY = "sk-proj-Q7vZ2mN8xK4pL9wR3tY6uB1cE5"


def _b64(data: bytes, urlsafe: bool = False, pad: bool = True) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if pad else text.rstrip("=")


#: Derived forms of the key a server may echo (issue 31, item 6). Base64 is taken of the key
#: alone and of the key inside a longer message (``Bearer KEY``, a JSON object), which shifts
#: its byte offset modulo 3 and so every character of the encoding.
DERIVED: dict[str, str] = {
    "base64": _b64(KEY.encode()),
    "base64, no padding": _b64(KEY.encode(), pad=False),
    "base64 URL-safe": _b64(KEY.encode(), urlsafe=True),
    "base64 URL-safe, no padding": _b64(KEY.encode(), urlsafe=True, pad=False),
    "base64 of 'Bearer KEY'": _b64(b"Bearer " + KEY.encode()),
    "base64 of a JSON object": _b64(json.dumps({"api_key": KEY}).encode()),
    "base64 after two bytes": _b64(b"k=" + KEY.encode(), urlsafe=True, pad=False),
    "hex": KEY.encode().hex(),
    "hex, upper case": KEY.encode().hex().upper(),
    "reversed": KEY[::-1],
    "reversed, upper case": KEY[::-1].upper(),
}


def _recovers_key(text: str) -> bool:
    """Whether ``text`` still gives away 12 or more consecutive characters of the key in any
    derived form: every token of it is decoded (base64 in both alphabets at each alignment,
    hex, reversal) and searched."""
    pieces = {KEY[i:i + 12].lower() for i in range(len(KEY) - 11)}
    tokens = {t.strip("\"'.,;:()[]{}") for t in text.replace("\\n", " ").split()}
    decoded = set()
    for t in tokens:
        decoded |= {t, t[::-1]}
        for cut in range(4):
            body = t[cut:].rstrip("=")
            for alt in (b"+/", b"-_"):
                try:
                    decoded.add(base64.b64decode(body + "=" * (-len(body) % 4), altchars=alt)
                                .decode("latin-1"))
                except ValueError:
                    pass
        for cut in range(2):
            try:
                decoded.add(bytes.fromhex(t[cut:len(t) - (len(t) - cut) % 2]).decode("latin-1"))
            except ValueError:
                pass
    return any(p in d.lower() for d in decoded for p in pieces)


@pytest.mark.parametrize("form", list(DERIVED))
def test_redact_covers_derived_forms(form: str) -> None:
    echoed = DERIVED[form]
    assert _recovers_key(echoed)  # the form really carries the key
    out = redact(f"invalid key {echoed} (401)", KEY)
    assert not _recovers_key(out), out
    assert REDACTED in out and out.startswith("invalid key ") and out.endswith(" (401)")


def test_derived_forms_leave_ordinary_text_alone() -> None:
    text = ("Answer: room_3. Checksum deadbeef0123456789abcdef, token QUJDREVGR0hJSktM, "
            "the desk_drawer is in room_1.")
    assert redact(text, KEY) == text
    assert all(len(f) >= 8 for f in derived_forms(KEY))


def _run(tmp_path: Path, url: str, n: int, **cfg: Any) -> list[str]:
    model = write_model_file(tmp_path / "m.toml", openai_config(url, **cfg))
    path = write_items(tmp_path / "items.jsonl", make_items(n))
    return ["evaluate", "--items", str(path), "--model", str(model), "--out",
            str(tmp_path / "run.jsonl"), "--no-progress", "--cache-dir",
            str(tmp_path / "cache")]


def test_derived_forms_stay_out_of_log_cache_and_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each form once in a 500 body (the log's ``error``) and once in an answer
    (``answer_text`` and ``response``)."""
    monkeypatch.setenv("TOMSTATS_FAKE_KEY", KEY)
    forms = list(DERIVED.values())

    def reply(h: Scripted, body: dict[str, Any]) -> None:
        n = h.server.posts - 1  # type: ignore[attr-defined]
        form = forms[(n // 2) % len(forms)]
        if n % 2 == 0:
            h.send(500, json.dumps({"error": {"message": f"bad key {form}"}}).encode())
        else:
            h.send(200, answer(f"{fake_answer(body)} key {form}"))

    with scripted(reply) as srv:
        rc = main(_run(tmp_path, srv.url, 2 * len(forms), concurrency=1, max_retries=0,
                       api_key_env="TOMSTATS_FAKE_KEY"))
    io = capsys.readouterr()
    assert rc == 1, io.err
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["status"] for r in recs] == ["error", "ok"] * len(forms)
    for r in recs:
        for field in ("error", "answer_text", "response"):
            assert not _recovers_key(str(r.get(field) or "")), (field, r.get(field))
    assert all(REDACTED in r["error"] for r in recs if r["status"] == "error")
    assert all(REDACTED in r["answer_text"] for r in recs if r["status"] == "ok")
    for p in (tmp_path / "cache").rglob("*.json"):
        assert not _recovers_key(p.read_text()), p
    assert not _recovers_key(io.out + io.err)


# --------------------------------------------------------------------------- 12: duplicate keys

DUPLICATED = {
    "content twice": b'{"choices": [{"index": 0, "finish_reason": "stop", "message": '
                     b'{"role": "assistant", "content": "kitchen", "content": "%s"}}]}',
    "choices twice": b'{"choices": [{"message": {"role": "assistant", "content": "kitchen"}}],'
                     b' "choices": [{"message": {"role": "assistant", "content": "%s"}}]}',
    "message twice": b'{"choices": [{"message": {"content": "kitchen"}, '
                     b'"message": {"content": "%s"}}]}',
}


@pytest.mark.parametrize("case", list(DUPLICATED))
def test_reply_with_a_duplicated_key_is_not_scored(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``{"content": "kitchen", "content": "<right answer>"}``: readers disagree on which
    value counts (Python's keeps the last), so the reply is invalid: an error record after
    the retries, with the key named, and no score."""
    def reply(h: Scripted, body: dict[str, Any]) -> None:
        h.send(200, DUPLICATED[case] % fake_answer(body).encode())

    with scripted(reply) as srv:
        rc = main(_run(tmp_path, srv.url, 2, max_retries=1))
    assert rc == 1, capsys.readouterr().err
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["status"] for r in recs] == ["error", "error"]
    assert all(r.get("correct") is None for r in recs)
    key = case.split()[0]
    assert all(f"'{key}' appears twice" in r["error"] for r in recs), recs[0]["error"]
