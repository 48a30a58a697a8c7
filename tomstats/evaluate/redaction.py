"""Redaction: keep secrets out of everything tomstats writes or prints about a run.

What counts as a secret:

- the API key (``api_key_env``) and the credentials inside an endpoint URL: its userinfo
  (``http://user:password@host``) and the values of secret-looking query parameters
  (``?api_key=…``, ``key``, ``token``, ``access_token``, …, see :func:`is_secret_param`);
- anything that looks like a credential whatever the configuration: ``sk-…``/``hf_…`` keys
  and ``Bearer …`` tokens of 12 or more characters, ``Basic …`` credentials, URL userinfo
  and secret query parameters.

A configured secret is matched case-insensitively, by *any* substring of
:data:`MIN_SECRET_CHARS` (8) or more characters, after undoing JSON (``\\/``, ``\\u002f``,
``\\n``), HTML (``&#x2F;``, ``&amp;``) and URL (``%2F``) escapes, each also nested, and
also with every character that is not a letter or digit removed (so a key that a server
split, wrapped over lines, stripped of its dashes or upper-cased is still found). Its
derived forms are searched for the same way: reversed, hexadecimal and base64 (standard or
URL-safe, with or without padding, at any alignment; :func:`derived_forms`). The
matched span of the original text becomes :data:`REDACTED`. Secrets shorter than 8
characters are not used as patterns: they cannot be told apart from ordinary text (a
one-letter dummy key would rewrite every answer), and :meth:`Redactor.short` says so.

Redaction applies to what is written about requests and errors — log records, the cache,
stderr — never to a model's answer before it is scored.
"""

from __future__ import annotations

import base64
import bisect
import functools
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "Redactor", "derived_forms", "is_secret_param",
           "redact", "safe_url", "scrub", "url_secrets"]

#: What replaces a secret in anything written (log, cache, stderr).
REDACTED = "[REDACTED]"

#: Shortest configured secret used as a pattern (and shortest matched piece of one).
MIN_SECRET_CHARS = 8

#: Query parameter names that hold a secret (compared lower-cased, ``-`` read as ``_``).
SECRET_PARAMS = frozenset({
    "api_key", "apikey", "key", "token", "access_token", "auth", "auth_token",
    "authorization", "bearer", "client_secret", "secret", "password", "passwd", "pwd",
    "refresh_token", "id_token", "session", "session_token", "sig", "signature",
    "x_api_key", "subscription_key", "code"})

_SECRET_SUFFIXES = ("key", "token", "secret", "password", "signature")


def is_secret_param(name: str) -> bool:
    """Whether a URL query parameter called ``name`` holds a secret.

    The names of :data:`SECRET_PARAMS`, and any name ending in ``key``, ``token``,
    ``secret``, ``password`` or ``signature`` (``subscription-key``, ``x-goog-api-key``),
    case-insensitively.
    """
    n = name.strip().lower().replace("-", "_")
    return n in SECRET_PARAMS or n.endswith(_SECRET_SUFFIXES)


def _split_url(url: str) -> tuple[object, list[tuple[str, str]]] | None:
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return None
    return parts, pairs


def safe_url(url: str) -> str:
    """``url`` fit to be printed: userinfo and secret query parameter values redacted.

    Examples
    --------
    >>> safe_url("http://bob:pw@example.org:8080/v1?api_key=abc&api-version=2")
    'http://[REDACTED]@example.org:8080/v1?api_key=[REDACTED]&api-version=2'
    """
    split = _split_url(url)
    if split is None:
        return redact(url)
    parts, pairs = split
    netloc = parts.netloc  # type: ignore[attr-defined]
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rpartition("@")[2]
    query = parts.query  # type: ignore[attr-defined]
    if any(is_secret_param(k) for k, _ in pairs):
        query = "&".join(f"{quote(k, safe='')}=" + (REDACTED if is_secret_param(k)
                                                    else quote(v, safe=""))
                         for k, v in pairs)
    return urlunsplit((parts.scheme, netloc, parts.path, query,  # type: ignore[attr-defined]
                       parts.fragment))  # type: ignore[attr-defined]


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets an endpoint URL carries: userinfo (whole, user and password) and the
    values of secret-looking query parameters (as written and URL-decoded)."""
    split = _split_url(url)
    if split is None:
        return ()
    parts, pairs = split
    out: list[str] = []
    netloc = parts.netloc  # type: ignore[attr-defined]
    if "@" in netloc:
        info = netloc.rpartition("@")[0]
        out += [info, *info.split(":", 1)]
    out += [v for k, v in pairs if is_secret_param(k)]
    out += [unquote(s) for s in out]
    return tuple(dict.fromkeys(s for s in out if s))


# --------------------------------------------------------------------------- text patterns

_TOKEN_CHAR = r"(?:[A-Za-z0-9_\-.~+=]|\\*/|\\*u[0-9A-Fa-f]{4}|%(?:25)*[0-9A-Fa-f]{2})"
#: Secret-looking tokens: ``sk-…``/``sk_…``/``hf_…`` keys and ``Bearer …`` credentials of 12
#: or more characters (shorter ones are words: "sk-learn", "the bearer of"), in plain,
#: JSON-escaped or URL-encoded form; ``Basic …`` credentials (base64 of URL userinfo).
_TOKEN_RE = re.compile(
    r"(?:(?<![A-Za-z])(?:sk|rk|pk|hf)[-_]" + _TOKEN_CHAR + r"{12,})"
    r"|(?:(?<![A-Za-z])Bearer(?:\s|%20|\+|\\*u0020)+" + _TOKEN_CHAR + r"{12,})"
    r"|(?:(?<![A-Za-z])Basic(?:\s|%20|\+|\\*u0020)+[A-Za-z0-9+/]{8,}={0,2})",
    re.IGNORECASE)
#: ``scheme://userinfo@`` in any text.
_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*:(?:\\?/){2})([^/\s@\"'<>\\]+)@")
#: ``?name=value`` / ``&name=value`` of a secret-looking parameter in any text.
_PARAM_RE = re.compile(r"([?&;](?:amp;)?)([A-Za-z0-9_\-]+)=([^&#\s\"'<>\\]*)")


def _params(m: re.Match[str]) -> str:
    if is_secret_param(m.group(2)) and m.group(3):
        return f"{m.group(1)}{m.group(2)}={REDACTED}"
    return m.group(0)


# --------------------------------------------------------------------------- unescaping
# One decoding pass turns each escape (JSON ``\/``, ``\uXXXX``, ``\n``; HTML entities; URL
# ``%XX``) into its character and remembers, for every decoded character, the span of the
# input it came from; nested escapes are undone by further passes.

_ESC_RE = re.compile(
    r"\\+u([0-9a-fA-F]{4})|\\+([/\"'nrtbf])|&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|"
    r"[A-Za-z][A-Za-z0-9]{1,31});|%([0-7][0-9a-fA-F])")
_JSON_SIMPLE = {"/": "/", '"': '"', "'": "'", "n": " ", "r": " ", "t": " ", "b": " ",
                "f": " "}
_MAX_PASSES = 4


def _unescape_one(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        c = chr(int(m.group(1), 16))
        return c if not 0xD800 <= ord(c) <= 0xDFFF else "\ufffd"
    if m.group(2) is not None:
        return _JSON_SIMPLE[m.group(2)]
    if m.group(3) is not None:
        return html.unescape(m.group(0))
    return chr(int(m.group(4), 16))


@dataclass(frozen=True)
class _Level:
    """A decoded text and how its characters map onto the text one level up."""

    text: str
    starts: tuple[int, ...]   # decoded index where each segment starts
    spans: tuple[tuple[int, int, bool], ...]  # (input start, input end, is one escape)

    def span(self, a: int, b: int) -> tuple[int, int]:
        """The input span of decoded characters ``a .. b-1``."""
        return self._start(a), self._end(b - 1)

    def _start(self, d: int) -> int:
        i = bisect.bisect_right(self.starts, d) - 1
        s, _, esc = self.spans[i]
        return s if esc else s + d - self.starts[i]

    def _end(self, d: int) -> int:
        i = bisect.bisect_right(self.starts, d) - 1
        s, e, esc = self.spans[i]
        return e if esc else s + d - self.starts[i] + 1


def _decode(text: str) -> _Level | None:
    """One decoding pass, or ``None`` when ``text`` holds no escape."""
    if _ESC_RE.search(text) is None:
        return None
    out: list[str] = []
    starts: list[int] = []
    spans: list[tuple[int, int, bool]] = []
    pos = n = 0
    for m in _ESC_RE.finditer(text):
        if m.start() > pos:
            starts.append(n)
            spans.append((pos, m.start(), False))
            out.append(text[pos:m.start()])
            n += m.start() - pos
        piece = _unescape_one(m)
        if piece == m.group(0):  # an unknown entity: keep it as text
            starts.append(n)
            spans.append((m.start(), m.end(), False))
        else:
            for c in piece:
                starts.append(n)
                spans.append((m.start(), m.end(), True))
                out.append(c)
                n += 1
            pos = m.end()
            continue
        out.append(piece)
        n += len(piece)
        pos = m.end()
    if pos < len(text):
        starts.append(n)
        spans.append((pos, len(text), False))
        out.append(text[pos:])
    return _Level("".join(out), tuple(starts), tuple(spans))


# --------------------------------------------------------------------------- matching

_ASCII_LOWER = str.maketrans({c: c.lower() for c in map(chr, range(65, 91))})
_NOT_ALNUM = re.compile(r"[\W_]+")
_ALNUM = re.compile(r"[^\W_]")


def _windows(secret: str) -> tuple[str, ...]:
    s = secret.translate(_ASCII_LOWER)
    w = MIN_SECRET_CHARS
    return tuple(dict.fromkeys(s[i:i + w] for i in range(len(s) - w + 1)))


def _find(haystack: str, windows: Iterable[str]) -> list[tuple[int, int]]:
    """Spans of ``haystack`` covered by any occurrence of any window."""
    hits = []
    for w in windows:
        i = haystack.find(w)
        while i >= 0:
            hits.append((i, i + len(w)))
            i = haystack.find(w, i + 1)
    return hits


def _matches(text: str, secrets: Sequence[str]) -> list[tuple[int, int]]:
    """Spans of ``text`` holding (a piece of) a secret, as-is or with separators removed."""
    low = text.translate(_ASCII_LOWER)
    spans = _find(low, (w for s in secrets for w in _windows(s)))
    skel_windows = [w for s in secrets for w in _windows(_NOT_ALNUM.sub("", s))]
    if skel_windows:
        skel = _NOT_ALNUM.sub("", low)
        hits = _find(skel, skel_windows)
        if hits:
            where = [m.start() for m in _ALNUM.finditer(low)]
            spans += [(where[a], where[b - 1] + 1) for a, b in hits]
    return spans


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _secret_spans(text: str, secrets: Sequence[str]) -> list[tuple[int, int]]:
    """Spans of the original ``text`` holding a secret, at every decoding level."""
    spans = _matches(text, secrets)
    levels: list[_Level] = []
    cur = text
    for _ in range(_MAX_PASSES):
        lvl = _decode(cur)
        if lvl is None:
            break
        levels.append(lvl)
        cur = lvl.text
        for a, b in _matches(cur, secrets):
            for up in reversed(levels):
                a, b = up.span(a, b)
            spans.append((a, b))
    return _merge(spans)


_URLSAFE = str.maketrans("+/", "-_")


def _base64_pieces(raw: bytes) -> list[str]:
    """The parts of the base64 text of any message holding ``raw`` that depend on ``raw``
    alone: for each of the three offsets of ``raw`` modulo 3 bytes, the characters whose six
    bits all come from ``raw`` (standard and URL-safe alphabets; padding never falls inside)."""
    out = []
    for k in range(3):
        enc = base64.b64encode(bytes(k) + raw + bytes(3)).decode("ascii")
        piece = enc[-(-8 * k // 6):(8 * (k + len(raw))) // 6]
        out += [piece, piece.translate(_URLSAFE)]
    return out


def derived_forms(secret: str) -> tuple[str, ...]:
    """The forms of ``secret`` a server may echo besides the text itself, each searched for
    like the secret: reversed, hexadecimal (of its UTF-8 bytes; matched in either case) and
    base64 (standard and URL-safe alphabets, with or without padding, at any byte offset of
    the encoded message: :func:`_base64_pieces`).

    Examples
    --------
    >>> derived_forms("sk-0123456789")[:2]
    ('9876543210-ks', '736b2d30313233343536373839')
    """
    raw = secret.encode("utf-8")
    forms = [secret[::-1], raw.hex(), *_base64_pieces(raw)]
    return tuple(dict.fromkeys(f for f in forms if len(f) >= MIN_SECRET_CHARS))


@functools.lru_cache(maxsize=64)
def _usable(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The secrets long enough to search for, each with its :func:`derived_forms`."""
    long = [s for s in secrets if len(s) >= MIN_SECRET_CHARS]
    return tuple(dict.fromkeys(f for s in long for f in (s, *derived_forms(s))))


def redact(text: str, secret: str | Sequence[str] | None = None) -> str:
    r"""``text`` with the configured secrets and anything that looks like a credential
    replaced by :data:`REDACTED` (see the module docstring).

    Apply it to a whole body *before* cutting it: a cut made first could leave a piece of a
    key the patterns no longer recognise.

    Examples
    --------
    >>> redact('{"error": "bad key sk-AUD1T\\/9f8e7d6c5b4a"}')
    '{"error": "bad key [REDACTED]"}'
    >>> redact("echo: 9F8E7D6C 5B4A", "sk-9f8e7d6c5b4a")
    'echo: [REDACTED]'
    """
    secrets = (secret,) if isinstance(secret, str) else tuple(secret or ())
    usable = _usable(secrets)
    if usable:
        spans = _secret_spans(text, usable)
        if spans:
            parts, pos = [], 0
            for a, b in spans:
                parts += [text[pos:a], REDACTED]
                pos = b
            text = "".join(parts) + text[pos:]
    text = _USERINFO_RE.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _PARAM_RE.sub(_params, text)
    return _TOKEN_RE.sub(REDACTED, text)


#: Lone UTF-16 surrogates: valid in a JSON string (``"\\ud800"``), not encodable as UTF-8.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def scrub(text: str, secret: str | Sequence[str] | None = None) -> str:
    """``text`` fit to be logged and cached: :func:`redact`-ed, and every lone surrogate
    (a ``\\ud800`` escape a server wrote without its pair) replaced by U+FFFD, so writing it
    as UTF-8 cannot fail."""
    return redact(_SURROGATE_RE.sub("\ufffd", text), secret)


@dataclass(frozen=True)
class Redactor:
    """The secrets of one run and the redaction of every text written about it.

    Build it with :meth:`for_endpoint`. ``secrets`` holds the usable ones (8 characters or
    more); ``n_short`` counts those left out as too short to match safely.
    """

    secrets: tuple[str, ...] = ()
    n_short: int = 0

    @classmethod
    def for_endpoint(cls, endpoint: str = "", api_key: str | None = None) -> Redactor:
        """The secrets of an API key and of an endpoint URL's credentials."""
        found = ([api_key] if api_key else []) + list(url_secrets(endpoint))
        found = list(dict.fromkeys(found))
        usable = tuple(s for s in found if len(s) >= MIN_SECRET_CHARS)
        short = sum(1 for s in found if len(s) < MIN_SECRET_CHARS)
        return cls(usable, short)

    def short(self) -> str | None:
        """The note for secrets too short to be used as patterns (``None`` when none)."""
        if not self.n_short:
            return None
        return (f"{self.n_short} configured secret(s) (API key or URL credentials) shorter "
                f"than {MIN_SECRET_CHARS} characters are not searched for in what is logged "
                "(too short to tell apart from ordinary text); URL userinfo and secret query "
                "parameters are still redacted")

    def __call__(self, text: str) -> str:
        """:func:`scrub` with this run's secrets."""
        return scrub(text, self.secrets)

    def quote(self, body: str, n: int) -> str:
        """A redacted one-line excerpt of at most ``n`` characters (+ "…") of ``body``.

        Redacts before cutting; only as much of the front of a long body as the excerpt
        needs is redacted (doubling until the redacted front is safely longer than ``n``).
        """
        margin = 64 + 16 * max((len(s) for s in self.secrets), default=0)
        size = n + margin
        while True:
            front = " ".join(self(body[:size]).split())
            if size >= len(body) or len(front) >= n + margin:
                break
            size *= 2
        return front if len(front) <= n else front[:n] + "…"
