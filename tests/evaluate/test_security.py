"""Security of the evaluation runner (issue 22, items 4, 5, 6, 8 and 10): links planted at a
log or its lock are refused, short keys never rewrite answers, secrets in any echoed form or
in an endpoint URL never reach a log or stderr, hostile bodies are bounded in size and time,
absurd run sizes are refused up front.

Servers are stdlib ``http.server`` instances on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
import resource
import time
import tracemalloc
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluate._support import (
    CANDIDATES,
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
from tomstats.evaluate import evaluate
from tomstats.evaluate.redaction import REDACTED, redact, safe_url
from tomstats.stories.items import Item, write_items


def _run(tmp_path: Path, url: str, items: list[Item], *extra: str, **cfg: Any) -> list[str]:
    model = write_model_file(tmp_path / "m.toml", openai_config(url, **cfg))
    path = write_items(tmp_path / "items.jsonl", items)
    return ["evaluate", "--items", str(path), "--model", str(model), "--out",
            str(tmp_path / "run.jsonl"), "--no-progress", *extra]


def _hallway_items(n: int) -> list[Item]:
    import dataclasses

    return [dataclasses.replace(it, answer="hallway") for it in make_items(n)]


# --------------------------------------------------------------------------- 5: short keys


@pytest.mark.parametrize("key", ["a", "ay", "hal", "hallwa", "hallway"])
def test_short_key_never_rewrites_an_answer(tmp_path: Path, key: str,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A one-letter dummy key used to turn "hallway" into "h[REDACTED]llw[REDACTED]y",
    scored wrong; keys under 8 characters are no patterns, and answers are scored raw."""
    monkeypatch.setenv("TOMSTATS_DUMMY_KEY", key)
    with scripted(lambda h, b: h.send(200, answer("hallway"))) as srv:
        rc = main(_run(tmp_path, srv.url, _hallway_items(3), "--no-cache",
                       api_key_env="TOMSTATS_DUMMY_KEY"))
    err = capsys.readouterr().err
    assert rc == 0, err
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["response"] for r in recs] == ["hallway"] * 3
    assert [r["correct"] for r in recs] == [1, 1, 1]
    assert err.count("shorter than 8 characters") == 1


def test_long_key_echoed_in_an_answer_is_scored_then_redacted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "hallway-key-0123456789"
    monkeypatch.setenv("TOMSTATS_DUMMY_KEY", key)
    with scripted(lambda h, b: h.send(200, answer(f"hallway ({key})"))) as srv:
        assert main(_run(tmp_path, srv.url, _hallway_items(2), "--no-cache",
                         api_key_env="TOMSTATS_DUMMY_KEY")) == 0
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["correct"] for r in recs] == [1, 1]
    assert all(r["response"] == f"hallway ({REDACTED})" for r in recs)


# --------------------------------------------------------------------------- 6: echo forms

SECRET = "sk-AUD1T/9f8e7d6c5b4a3210XYZqwerty"
FRAGMENTS = ("AUD1T/9", "9f8e7d", "5b4a3210", "XYZqwerty", "3210XYZ")


def _wrap(s: str, n: int, sep: str) -> str:
    return sep.join(s[i:i + n] for i in range(0, len(s), n))


#: How a careless server echoes a key (issue 22, item 6): split, wrapped, HTML-escaped,
#: stripped, upper-cased, and combinations.
ECHO_FORMS: dict[str, str] = {
    "plain": SECRET,
    "upper": SECRET.upper(),
    "lower": SECRET.lower(),
    "split in two": f"{SECRET[:13]} ... {SECRET[13:]}",
    "split in three": f"{SECRET[:9]}', '{SECRET[9:20]}', '{SECRET[20:]}",
    "wrapped at 10": _wrap(SECRET, 10, "\n"),
    "wrapped at 4": _wrap(SECRET, 4, " "),
    "wrapped, JSON": json.dumps(_wrap(SECRET, 10, "\n"))[1:-1],
    "wrapped, HTML": _wrap(SECRET, 10, "<br>"),
    "HTML slash": SECRET.replace("/", "&#x2F;"),
    "HTML decimal": "".join(f"&#{ord(c)};" for c in SECRET),
    "HTML twice": html.escape(html.escape(SECRET.replace("/", "&#47;"))),
    "JSON \\u002f": SECRET.replace("/", "\\u002f"),
    "JSON \\/ twice": SECRET.replace("/", "\\\\\\/"),
    "URL-encoded": urllib.parse.quote(SECRET, safe=""),
    "URL-encoded twice": urllib.parse.quote(urllib.parse.quote(SECRET, safe=""), safe=""),
    "stripped of prefix": SECRET[3:],
    "stripped of punctuation": SECRET.replace("-", "").replace("/", ""),
    "stripped and upper": SECRET[3:].replace("/", "").upper(),
    "upper, wrapped, HTML": _wrap(SECRET.upper(), 7, "&#10;"),
    "prefix of 14": SECRET[:14],
    "tail of 12": SECRET[-12:],
}


def _decoded(text: str) -> str:
    """``text`` with JSON, HTML and URL escapes undone (twice), lower-cased."""
    for _ in range(2):
        text = html.unescape(text).replace("\\\\", "\\").replace("\\/", "/")
        text = urllib.parse.unquote(text)
        text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
        text = text.replace("\\n", "\n")
    return text.lower()


def _leaks(text: str) -> list[str]:
    flat = _decoded(text)
    squeezed = "".join(c for c in flat if c.isalnum())
    return [f for f in FRAGMENTS if f.lower() in flat
            or "".join(c for c in f.lower() if c.isalnum()) in squeezed]


@pytest.mark.parametrize("form", list(ECHO_FORMS))
def test_redact_covers_every_echo_form(form: str) -> None:
    echoed = ECHO_FORMS[form]
    assert _leaks(echoed)  # the form really carries the key
    out = redact(f'{{"error": "invalid key {echoed}", "code": 401}}', SECRET)
    assert not _leaks(out), out
    assert REDACTED in out and out.startswith('{"error": "invalid key ')
    assert out.endswith('", "code": 401}')


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "Answer: room_3. The desk_drawer is in room_1; see https://example.org/a?b=c&d=1."
    assert redact(text, SECRET) == text


def test_every_echo_form_stays_out_of_log_cache_and_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOMSTATS_FAKE_KEY", SECRET)
    forms = list(ECHO_FORMS.values())

    def reply(h: Scripted, body: dict[str, Any]) -> None:
        n = h.server.posts - 1  # type: ignore[attr-defined]
        form = forms[(n // 2) % len(forms)]
        if n % 2 == 0:  # an error body echoing the key
            h.send(500, json.dumps({"error": {"message": f"bad key {form}"}}).encode())
        else:  # an answer that quotes the key before answering
            h.send(200, answer(f"key {form} -- {fake_answer(body)}"))

    cache = tmp_path / "cache"
    with scripted(reply) as srv:
        rc = main(_run(tmp_path, srv.url, make_items(2 * len(forms)), "--cache-dir",
                       str(cache), concurrency=1, max_retries=0,
                       api_key_env="TOMSTATS_FAKE_KEY"))
    io = capsys.readouterr()
    assert rc == 1
    recs = log_lines(tmp_path / "run.jsonl")
    assert [r["status"] for r in recs] == ["error", "ok"] * len(forms)
    for p in [tmp_path / "run.jsonl", *cache.rglob("*.json")]:
        assert not _leaks(p.read_text()), p
    assert not _leaks(io.out + io.err)
    assert all(REDACTED in r["error"] for r in recs if r["status"] == "error")
    assert all(REDACTED in r["response"] for r in recs if r["status"] == "ok")


ENDPOINT_SECRETS = ("pw-Secret-12345", "QQkey-0123456789", "tok_ABCDEFGHIJ")


def _endpoints(port: int) -> dict[str, str]:
    base = f"127.0.0.1:{port}"
    return {
        "userinfo": f"http://alice:{ENDPOINT_SECRETS[0]}@{base}/v1",
        "api_key": f"http://{base}/v1?api_key={ENDPOINT_SECRETS[1]}",
        "Token, upper case": f"http://{base}/v1?api-version=2&Token={ENDPOINT_SECRETS[2]}",
    }


@pytest.mark.parametrize("which", ["userinfo", "api_key", "Token, upper case"])
def test_endpoint_credentials_never_written(tmp_path: Path, which: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Userinfo and secret query parameters of an endpoint used to be written into every
    error record and printed to stderr."""
    def reply(h: Scripted, body: dict[str, Any]) -> None:  # echoes what it was sent
        h.send(500, json.dumps({"error": f"no route {h.path}", "host": h.headers.get("Host"),
                                "auth": h.headers.get("Authorization")}).encode())

    with scripted(reply) as srv:
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        url = _endpoints(port)[which]
        rc = main(_run(tmp_path, url, make_items(2), "--no-cache", max_retries=1))
    recs = log_lines(tmp_path / "run.jsonl")
    io = capsys.readouterr()
    assert rc == 1 and all(r["status"] == "error" for r in recs)
    written = (tmp_path / "run.jsonl").read_text() + io.out + io.err
    assert not [s for s in ENDPOINT_SECRETS if s.lower() in written.lower()]
    assert all(f"from {safe_url(url).rstrip('/')}" in r["error"] or REDACTED in r["error"]
               for r in recs)
    # the server is gone: the refusal names the endpoint without its credentials
    rc = main(_run(tmp_path, url, make_items(2), "--no-cache", max_retries=0))
    err = capsys.readouterr().err
    assert rc == 2 and "cannot reach model server" in err and REDACTED in err
    assert not [s for s in ENDPOINT_SECRETS if s.lower() in err.lower()]


def test_a_configuration_never_shows_endpoint_credentials() -> None:
    from tomstats.evaluate import load_model_config

    for url in _endpoints(8765).values():
        cfg = load_model_config(openai_config(url))
        shown = repr(cfg) + json.dumps(cfg.public_dict())
        assert not [s for s in ENDPOINT_SECRETS if s in shown], shown
        assert REDACTED in shown
    with pytest.raises(ValueError, match="must be an http") as err:
        load_model_config(openai_config(f"ftp://alice:{ENDPOINT_SECRETS[0]}@h/v1"))
    assert ENDPOINT_SECRETS[0] not in str(err.value)


def test_safe_url_table() -> None:
    cases = {
        "http://h/v1": "http://h/v1",
        "http://u:p@h:1/v1": f"http://{REDACTED}@h:1/v1",
        "https://KEY123@h/v1": f"https://{REDACTED}@h/v1",
        "http://h/v1?api_key=abc&x=1": f"http://h/v1?api_key={REDACTED}&x=1",
        "http://h/v1?ACCESS_TOKEN=abc": f"http://h/v1?ACCESS_TOKEN={REDACTED}",
        "http://h/v1?subscription-key=a": f"http://h/v1?subscription-key={REDACTED}",
        "http://h/v1?api-version=2024": "http://h/v1?api-version=2024",
    }
    for url, want in cases.items():
        assert safe_url(url) == want, url


# --------------------------------------------------------------------------- 4: links


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious data\n")
    return victim


def _plant(tmp_path: Path, case: str) -> tuple[list[str], Path, str]:
    """Plant ``case``; return the arguments, the file that must not change, the message."""
    items = write_items(tmp_path / "items.jsonl", make_items(3))
    model = write_model_file(tmp_path / "h.toml", {"name": "h", "backend": "heuristic",
                                                   "strategy": "oracle"})
    out = tmp_path / "run.jsonl"
    lock = tmp_path / "run.jsonl.lock"
    run = ["evaluate", "--items", str(items), "--model", str(model), "--out", str(out),
           "--no-progress"]
    victim = _victim(tmp_path)
    if case.startswith("repair"):
        evaluate(items, model, tmp_path / "real.jsonl", progress=False)
        text = (tmp_path / "real.jsonl").read_text()
        (tmp_path / "real.jsonl").write_text(text + text.splitlines(keepends=True)[0])
        victim = tmp_path / "real.jsonl"
    match case:
        case "lock is a symlink":
            lock.symlink_to(victim)
            return run, victim, "is a symbolic link"
        case "lock is a dangling symlink":
            lock.symlink_to(tmp_path / "created.txt")
            return run, victim, "is a symbolic link"
        case "lock is a hard link":
            os.link(victim, lock)
            return run, victim, "hard links"
        case "log is a symlink":
            out.symlink_to(victim)
            return run, victim, "is a symbolic link"
        case "log is a hard link":
            os.link(victim, out)
            return run, victim, "hard links"
        case "repair a symlink":
            out.symlink_to(victim)
            return ["evaluate", "--repair", str(out)], victim, "is a symbolic link"
        case "repair with a planted lock":
            os.replace(victim, out)
            lock.symlink_to(_victim(tmp_path))
            return ["evaluate", "--repair", str(out)], tmp_path / "victim.txt", \
                "is a symbolic link"
    raise AssertionError(case)


LINK_CASES = ("lock is a symlink", "lock is a dangling symlink", "lock is a hard link",
              "log is a symlink", "log is a hard link", "repair a symlink",
              "repair with a planted lock")


@pytest.mark.parametrize("case", LINK_CASES)
def test_planted_links_are_refused_and_the_victim_keeps_its_content(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    args, victim, needle = _plant(tmp_path, case)
    before = victim.read_bytes()
    links = {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()}
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert victim.read_bytes() == before
    assert {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()} == links
    assert not (tmp_path / "created.txt").exists()
    if not case.startswith(("log", "repair")):
        assert not (tmp_path / "run.jsonl").exists()


# --------------------------------------------------------------------------- 8: hostile bodies

DEADLINE = 3.0


@functools.cache
def _bomb(mib: int = 256) -> bytes:
    """``mib`` MiB of zeros, gzip-compressed (about 1/1000 of that on the wire)."""
    enc = zlib.compressobj(9, zlib.DEFLATED, 31)
    zero = bytes(1 << 20)
    return b"".join([*(enc.compress(zero) for _ in range(mib)), enc.flush()])


def _stream(h: Scripted, chunks: Iterator[bytes], headers: dict[str, str]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()
    with contextlib.suppress(OSError):
        for c in chunks:
            h.wfile.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
            h.wfile.flush()


def _endless(piece: bytes, pause: float = 0.0) -> Iterator[bytes]:
    while True:
        yield piece
        if pause:
            time.sleep(pause)


def _endless_gzip() -> Iterator[bytes]:
    enc = zlib.compressobj(9, zlib.DEFLATED, 31)
    zero = bytes(1 << 20)
    while True:
        yield enc.compress(zero) + enc.flush(zlib.Z_SYNC_FLUSH)


HOSTILE_BODIES: dict[str, Callable[[Scripted], None]] = {
    "gzip bomb (256 MiB)": lambda h: h.send(200, _bomb(), {"Content-Encoding": "gzip"}),
    "endless body": lambda h: _stream(h, _endless(b'{"choices": [' + b" " * 65536), {}),
    "endless gzip": lambda h: _stream(h, _endless_gzip(), {"Content-Encoding": "gzip"}),
    "endless trickle": lambda h: _stream(h, _endless(b" ", 0.05), {}),
    "huge Content-Length": lambda h: h.send(200, b" " * (5 << 20)),
}


@pytest.mark.parametrize("case", list(HOSTILE_BODIES))
def test_hostile_body_is_bounded_in_time_and_memory(tmp_path: Path, case: str) -> None:
    """A 256 MiB gzip bomb took 115 s and 1.9 GB, an endless body 3.4 GB in 5 s; now each
    ends within 2 × the deadline and 200 MB, as an error record."""
    if "bomb" in case:
        _bomb()  # built before the measurement
    make = HOSTILE_BODIES[case]
    with scripted(lambda h, b: make(h)) as srv:
        model = write_model_file(tmp_path / "m.toml", openai_config(
            srv.url, timeout=DEADLINE, max_retries=0, concurrency=1))
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            s = evaluate(make_items(1), model, tmp_path / "run.jsonl", progress=False,
                         cache_dir=None)
        finally:
            wall = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
    assert wall < 2 * DEADLINE, wall
    assert peak < 200e6 and grown < 200e6, (peak, grown)
    assert (s.n_answered, s.n_errors) == (0, 1)
    (rec,) = log_lines(tmp_path / "run.jsonl")
    assert rec["status"] == "error"
    assert ("larger than 4,194,304 bytes" in rec["error"]
            or f"no complete response within {DEADLINE:g} s" in rec["error"]), rec["error"]
    assert len(json.dumps(rec)) < 4096


def test_body_cap_is_configurable(tmp_path: Path) -> None:
    text = "room_1 " * 400  # a 2.8 kB answer: over a 2 kB cap, under the default
    with scripted(lambda h, b: h.send(200, answer(text))) as srv:
        for cap, status in ((2048, "error"), (4 << 20, "ok")):
            out = tmp_path / f"run{cap}.jsonl"
            evaluate(make_items(1), write_model_file(tmp_path / "m.toml", openai_config(
                srv.url, max_retries=0, max_response_bytes=cap)), out, progress=False,
                cache_dir=None)
            assert log_lines(out)[0]["status"] == status


def test_gzip_and_deflate_answers_are_decoded(tmp_path: Path) -> None:
    def reply(h: Scripted, body: dict[str, Any]) -> None:
        data = answer(fake_answer(body))
        n = h.server.posts  # type: ignore[attr-defined]
        if n % 3 == 1:
            h.send(200, zlib.compress(data), {"Content-Encoding": "deflate"})
        elif n % 3 == 2:
            enc = zlib.compressobj(6, zlib.DEFLATED, 31)
            h.send(200, enc.compress(data) + enc.flush(), {"Content-Encoding": "gzip"})
        else:
            enc = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate, as some servers send
            h.send(200, enc.compress(data) + enc.flush(), {"Content-Encoding": "deflate"})

    with scripted(reply) as srv:
        s = evaluate(make_items(6), write_model_file(tmp_path / "m.toml", openai_config(
            srv.url, max_retries=0, concurrency=1)), tmp_path / "run.jsonl", progress=False,
            cache_dir=None)
    assert (s.n_answered, s.n_errors) == (6, 0)
    assert all(r["parsed_answer"] in CANDIDATES for r in log_lines(tmp_path / "run.jsonl"))


# --------------------------------------------------------------------------- 10: run size


@pytest.mark.parametrize("samples", ["1e8", "100000000", "1e30", "inf", "nan", "2.5", "0"])
def test_absurd_samples_are_refused_before_any_work(tmp_path: Path, samples: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    items = write_items(tmp_path / "items.jsonl", make_items(6))
    model = write_model_file(tmp_path / "h.toml", {"name": "h", "backend": "heuristic",
                                                   "strategy": "oracle"})
    before = sorted(tmp_path.iterdir())
    rc = _exit_code(["evaluate", "--items", str(items), "--model", str(model), "--out",
               str(tmp_path / "run.jsonl"), "--no-progress", "--samples", samples])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "samples" in err, err
    assert sorted(tmp_path.iterdir()) == before


def _exit_code(args: list[str]) -> int:
    try:
        return main(args)
    except SystemExit as exc:  # argparse refuses the value itself
        return int(exc.code or 0)


def test_run_size_guard_in_the_api(tmp_path: Path) -> None:
    model = {"name": "h", "backend": "heuristic", "strategy": "oracle"}
    from tomstats.evaluate import load_model_config

    with pytest.raises(ValueError, match="evaluation run too large.*--allow-large"):
        evaluate(make_items(6), load_model_config(model), tmp_path / "run.jsonl",
                 samples=10**12, progress=False)
    assert not (tmp_path / "run.jsonl").exists()
