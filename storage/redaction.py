"""Secrets out, fingerprints in: what makes a cassette safe to keep and share.

A recorded request is evidence, and evidence gets copied into tickets and CI artefacts.
So credentials are replaced before anything is stored, logged or printed, by a marker
that keeps a short *keyed* fingerprint (blake3 keyed mode, with a per-install key).
Two exchanges made with different keys can still be told apart, while the fingerprint
reveals nothing about the key to anyone without the install's key file.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import (
    parse_qsl,
    quote,
    quote_from_bytes,
    quote_plus,
    unquote_to_bytes,
    urlencode,
)

import blake3
import re2

Header = tuple[bytes, bytes]

#: Headers that carry credentials or session state (the contract's list). ``Authorization``
#: covers SigV4 (the access key id sits in its ``Credential=``) and OAuth bearer tokens; AWS
#: sends the session token of temporary credentials apart, Gemini its API key, and an agent
#: on EC2 its instance-metadata (IMDSv2) session token.
SECRET_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-amz-security-token",
        "x-goog-api-key",
        "x-auth-token",
        "x-aws-ec2-metadata-token",
    }
)

SECRET_ANSWERS: frozenset[tuple[str, str]] = frozenset({("PUT", "/latest/api/token")})
"""Requests (method, path) whose whole answer is a credential: IMDSv2 hands out its session
token as the plain-text body of ``PUT /latest/api/token``, on 169.254.169.254, on
``[fd00:ec2::254]`` or on a local stand-in (amazon-ec2-metadata-mock, a test's server), and
the token reads like nothing a pattern could tell from prose. Matched on the path alone, so
every stand-in is covered; no other API answers that method at that path."""

#: Query parameters that APIs use for keys when a header is not an option (Google's
#: ``key=``, many tools' ``api_key=`` / ``access_token=``, and a presigned AWS URL's session
#: token and credential scope, which names the access key id).
SECRET_QUERY: frozenset[str] = frozenset(
    {"key", "api_key", "apikey", "api-key", "access_token"}
    | {"x-amz-security-token", "x-amz-credential"}
)

#: Key shapes that must not survive in a body either, e.g. an agent that echoes its
#: configuration into a tool call. OpenAI (``sk-``, ``sk-proj-``) and Anthropic
#: (``sk-ant-``) keys; long enough not to hit ordinary prose.
_DASH = r"(?:-|\\u002[dD]|%2[dD])"
"""A dash as written raw, JSON-escaped (``\u002d``) or percent-encoded (``%2D``)."""

DEFAULT_BODY_PATTERNS: tuple[str, ...] = (
    # OpenAI and Anthropic keys, in any spelling of their dashes.
    rf"sk{_DASH}(?:[A-Za-z0-9_]|{_DASH}){{20,}}",
    # The shapes secret scanners (gitleaks, GitHub's) know, by their published prefixes.
    r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",  # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",  # GitHub fine-grained tokens
    r"\bxox[abposr]-[A-Za-z0-9-]{10,250}",  # Slack tokens
    r"\bxapp-[0-9]+-[A-Za-z0-9-]{10,250}",  # Slack app tokens
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.)*?-----END[A-Z0-9 ]{0,40}"
    r"PRIVATE KEY(?: BLOCK)?-----",  # PEM and PGP private-key blocks
)
"""Key shapes that must not survive in a body either, e.g. an agent that echoes its
configuration into a tool call; long and specific enough not to hit ordinary prose."""

CREDENTIAL_FIELD_PATTERNS: tuple[str, ...] = (
    r'"(?:SecretAccessKey|secretAccessKey|SessionToken|sessionToken|Token)"\s*:\s*"([^"]{8,})"',
    r"<(?:SecretAccessKey|SessionToken)>([^<]{8,})</",
)
"""Fields that hand out AWS's temporary credentials: STS answers in XML, IAM Identity
Center's GetRoleCredentials and instance metadata in JSON. A pattern with a group replaces
the group alone, so the field that holds a secret stays readable (and its document
well-formed)."""

_SHAPES = "|".join(f"(?:{pattern})" for pattern in DEFAULT_BODY_PATTERNS)
"""The shapes as one pattern, so a body is scanned for all of them in one pass: RE2 skips
ahead to a single literal prefix (``sk``) by itself, but an alternation of prefixes or a word
boundary makes it read every byte, and seven such passes cost seven times one."""

SECRET_FIELDS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "client_secret",
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
    }
)
"""JSON members and form fields whose value is a secret whatever it looks like."""
TOKEN_FIELDS: frozenset[str] = frozenset({"token", "secret"})
"""Fields whose value is scrubbed when it looks like a credential (16 or more characters of
base64, hex or URL-safe text): ``token`` is also what a logprob's text is called."""


def _names(names: Iterable[str]) -> bytes:
    return b"|".join(re.escape(name.encode()) for name in sorted(names))


_FIELD_VALUES: tuple[str, ...] = tuple(
    pattern.decode("latin-1")
    for pattern in (
        # "password": "…", as JSON writes a member (the value as written, escapes and all)
        rb'("(?i:' + _names(SECRET_FIELDS) + rb')"\s*:\s*")((?:[^"\\]|\\.)+)(")',
        rb'("(?i:' + _names(TOKEN_FIELDS) + rb')"\s*:\s*")([A-Za-z0-9._~+/=\-]{16,})(")',
        # password=… in a form body
        rb"((?:^|[&?])(?i:" + _names(SECRET_FIELDS) + rb")=)([^&#\s\"'<>\\]+)()",
        rb"((?:^|[&?])(?i:" + _names(TOKEN_FIELDS) + rb")=)([A-Za-z0-9._~+/=%\-]{16,})()",
    )
)
"""Patterns whose second group is a secret field's value; the first and third are kept."""

_QUERY_IN_HEADER = re.compile(rb"([?&;](?i:" + _names(SECRET_QUERY) + rb")=)([^&#\s;,>\"']+)")
"""A secret query parameter inside a header's URL (a Referer, a Location, a Link)."""

# User patterns run on every body recorded, so on RE2, which matches in time linear in the
# body whatever the pattern: a backtracking one could hold the proxy on one body for minutes.
# On bodies byte by byte (Latin-1), as Python's re reads bytes; on log text as UTF-8.
_BYTES = re2.Options()
_BYTES.log_errors = False
_BYTES.encoding = re2.Options.Encoding.LATIN1
_TEXT = re2.Options()
_TEXT.log_errors = False
_AUTH_SCHEME = re.compile(rb"^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(.+)$", re.DOTALL)
_SIGV4_CREDENTIAL = re.compile(rb"^AWS4-[A-Z0-9-]+ +Credential=([A-Za-z0-9]+)/")
"""SigV4's Authorization: Credential=<access key id>/<date>/<region>/<service>/aws4_request."""
_MARKER_PREFIX = b"[redacted:"
KEY_BYTES = 32
#: Shorter values are too likely to occur by chance in an answer to be scrubbed from it.
MIN_ECHOED_SECRET = 8


class Redactor:
    """Replaces secrets in headers, URLs and bodies with keyed-fingerprint markers."""

    def __init__(
        self,
        key: bytes,
        headers: Iterable[str] = (),
        patterns: Iterable[str] = (),
    ) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the fingerprint key must be {KEY_BYTES} bytes, got {len(key)}")
        self._key = key
        self._headers = SECRET_HEADERS | {h.strip().lower() for h in headers if h.strip()}
        compiled = []
        for pattern in (_SHAPES, *CREDENTIAL_FIELD_PATTERNS, *patterns):
            try:
                compiled.append(
                    (
                        re2.compile(pattern.encode(), options=_BYTES),
                        re2.compile(pattern, options=_TEXT),
                    )
                )
            except re2.error as exc:
                reason = exc.args[0].decode() if isinstance(exc.args[0], bytes) else exc
                raise ValueError(
                    f"invalid redaction pattern {pattern!r}: {reason} (patterns run on RE2, "
                    "in linear time: no lookaround, no backreferences)"
                ) from None
        self._patterns = tuple(on_bytes for on_bytes, _ in compiled)
        self._text_patterns = tuple(on_text for _, on_text in compiled)
        self._fields = tuple(
            re2.compile(p.encode("latin-1"), options=_BYTES) for p in _FIELD_VALUES
        )

    def fingerprint(self, secret: bytes) -> str:
        return blake3.blake3(secret, key=self._key).hexdigest()[:16]

    def marker(self, secret: bytes) -> bytes:
        return _MARKER_PREFIX + self.fingerprint(secret).encode() + b"]"

    def is_secret_header(self, name: bytes | str) -> bool:
        text = name.decode("latin-1") if isinstance(name, bytes) else name
        return text.lower() in self._headers

    def is_secret_answer(self, method: str, target: str) -> bool:
        """Whether the whole answer to this request is a credential (see ``SECRET_ANSWERS``)."""
        return (method.upper(), target.partition("?")[0]) in SECRET_ANSWERS

    def answer(self, method: str, target: str, data: bytes) -> bytes:
        """A redacted answer body (see ``body``) with the answer that is itself a credential
        replaced whole (see ``SECRET_ANSWERS``) by the credential's marker, its surrounding
        whitespace kept, so the header that sends it back later carries the same
        fingerprint. Length-preserving, as ``body`` is; any other answer is returned as is."""
        if not self.is_secret_answer(method, target):
            return data
        secret = data.strip()
        if not secret or secret.startswith((_MARKER_PREFIX, b"[r:")):
            return data
        start = data.index(secret)
        return data[:start] + self._fitted_marker(secret) + data[start + len(secret) :]

    def header_value(self, value: bytes) -> bytes:
        """Keep an auth scheme word (``Bearer``) readable; fingerprint the rest."""
        if value.startswith(_MARKER_PREFIX):
            return value
        match = _AUTH_SCHEME.match(value)
        if match and b"=" not in match.group(1):
            return match.group(1) + b" " + self.marker(match.group(2))
        return self.marker(value)

    def headers(self, fields: Sequence[Header], known: Sequence[bytes] = ()) -> tuple[Header, ...]:
        return tuple(
            (name, self.header_value(value))
            if self.is_secret_header(name)
            else (name, self._query_in_header(self._scrub(value, known)))
            for name, value in fields
        )

    def _query_in_header(self, value: bytes) -> bytes:
        """A key in the query of a URL a header carries (``Referer: …?key=…``)."""
        if b"=" not in value:
            return value
        return _QUERY_IN_HEADER.sub(
            lambda m: m.group(1) + self._marker_unless_marked(unquote_to_bytes(m.group(2))),
            value,
        )

    def _marker_unless_marked(self, value: bytes) -> bytes:
        return value if value.startswith(_MARKER_PREFIX) else self.marker(value)

    def _scrub(self, value: bytes, known: Sequence[bytes]) -> bytes:
        """Every known secret, in each spelling it may come back in (see ``spellings``),
        replaced by a marker fingerprinting the secret itself."""
        for secret in known:
            for spelling in spellings(secret):
                if spelling in value:
                    value = value.replace(spelling, self._fitted_marker(secret, len(spelling)))
        return value

    def body(self, data: bytes, known: Sequence[bytes] = ()) -> bytes:
        """Length-preserving, so a recorded ``Content-Length`` still matches the body.

        ``known`` are secrets seen in the request (see ``secret_values``): an endpoint
        that echoes its caller's token back must not smuggle it into the store.
        """
        data = self._scrub(data, known)
        for pattern in self._patterns:
            data = pattern.sub(lambda m: _in_group(m, self._fitted_marker), data)
        json_fields, form_fields = self._fields[:2], self._fields[2:]
        for field in json_fields if b'"' in data else ():
            data = field.sub(self._field_value, data)
        for field in form_fields if _may_be_form(data) else ():
            data = field.sub(self._field_value, data)
        return data

    def _field_value(self, match: Any) -> bytes:
        """A secret field's value replaced, the field's name kept; a marker left alone, so
        redacting twice changes nothing."""
        value: bytes = match.group(2)
        if value.startswith((_MARKER_PREFIX, b"[r:")) or value.strip(b"*") == b"":
            return bytes(match.group(0))
        return bytes(match.group(1)) + self._fitted_marker(value) + bytes(match.group(3))

    def secret_values(self, fields: Sequence[Header], target: str) -> tuple[bytes, ...]:
        """The raw secrets a request carries, longest first, to scrub from its answer."""
        found: set[bytes] = set()
        for name, value in fields:
            if not self.is_secret_header(name):
                continue
            found.add(value)
            match = _AUTH_SCHEME.match(value)
            if match:
                found.add(match.group(2))
            credential = _SIGV4_CREDENTIAL.search(value)
            if credential:
                # SigV4: its access key id; the rest (signed header names) is no secret.
                found.add(credential.group(1))
                continue
            for part in value.split(b";"):
                found.add(part.partition(b"=")[2].strip())
        _, _, query = target.partition("?")
        for param, text in parse_qsl(query, keep_blank_values=True):
            if param.lower() in SECRET_QUERY:
                found.add(text.encode())
        return tuple(
            sorted((s for s in found if len(s) >= MIN_ECHOED_SECRET), key=len, reverse=True)
        )

    def _fitted_marker(self, secret: bytes, length: int | None = None) -> bytes:
        """The secret's marker fitted to ``length`` bytes (the secret's own by default, or
        that of the spelling it replaces)."""
        length = len(secret) if length is None else length
        marker = self.marker(secret)
        if length >= len(marker):
            return marker + b"*" * (length - len(marker))
        room = length - len(b"[r:]")
        if room < 4:
            return b"*" * length
        short = b"[r:" + self.fingerprint(secret)[:room].encode() + b"]"
        return short + b"*" * (length - len(short))

    def text(self, value: str) -> str:
        """For log lines and error messages, which never see raw bytes.

        RE2 reads text as UTF-8, which has no form for a lone surrogate (mitmproxy decodes
        a request target's non-UTF-8 bytes to them): such a string is redacted as its bytes
        and decoded back the same way, or with replacement characters if a pattern cut a
        character in two.
        """
        try:
            for pattern in self._text_patterns:
                value = pattern.sub(
                    lambda m: _in_group(m, lambda t: self.marker(t.encode()).decode()), value
                )
        except UnicodeEncodeError:
            data = value.encode("utf-8", "surrogatepass")
            for on_bytes in self._patterns:
                data = on_bytes.sub(lambda m: _in_group(m, self.marker), data)
            try:
                return data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                return data.decode("utf-8", "replace")
        return value

    def target(self, target: str) -> str:
        """Redact secret query parameters in a path-with-query (or a whole URL)."""
        base, sep, query = target.partition("?")
        if not sep:
            return self.text(target)
        pairs = parse_qsl(query, keep_blank_values=True)
        if not any(name.lower() in SECRET_QUERY for name, _ in pairs):
            return self.text(target)
        redacted = [
            (name, self.marker(value.encode()).decode() if name.lower() in SECRET_QUERY else value)
            for name, value in pairs
        ]
        return self.text(base + "?" + urlencode(redacted, quote_via=quote, safe="[]:"))


def _in_group[T: (bytes, str)](match: Any, replace: Callable[[T], T]) -> T:
    """The match with its secret replaced: group 1 where the pattern has one, else all."""
    whole: T = match.group(0)
    if not match.re.groups or match.group(1) is None:
        return replace(whole)
    start, end = match.start(1) - match.start(0), match.end(1) - match.start(0)
    return whole[:start] + replace(match.group(1)) + whole[end:]


def _may_be_form(data: bytes) -> bool:
    """Whether a body may be form fields (``a=1&b=2``): it has an ``=`` and does not open
    as JSON does. A JSON body's secret fields are found by the JSON patterns instead."""
    return b"=" in data and data[:64].lstrip()[:1] not in (b"{", b"[", b'"')


@lru_cache(maxsize=1024)
def spellings(secret: bytes) -> tuple[bytes, ...]:
    """The ways a secret comes back in an answer, longest first: raw, URL-encoded (upper and
    lower case hex, as a "next page" link or an error message quotes it), form-encoded, and
    JSON-escaped (``\\/``, ``\\uXXXX``). Longest first, so a spelling is replaced whole
    before a raw run inside it could be."""
    found = {
        secret,
        quote_from_bytes(secret, safe=b"").encode("ascii"),
        quote_from_bytes(secret, safe=b"-._~").encode("ascii"),
        quote_plus(secret, safe="").encode("ascii"),
    }
    found |= {_lower_hex(spelling) for spelling in tuple(found)}
    try:
        text = secret.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        for ascii_only in (True, False):
            escaped = json.dumps(text, ensure_ascii=ascii_only)[1:-1].encode("utf-8")
            found |= {escaped, escaped.replace(b"/", b"\\/")}
    return tuple(sorted(found, key=len, reverse=True))


def _lower_hex(spelling: bytes) -> bytes:
    return re.sub(rb"%[0-9A-F]{2}", lambda m: m.group(0).lower(), spelling)


def load_or_create_key(path: Path) -> bytes:
    """The per-install fingerprint key, created once with owner-only permissions."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(KEY_BYTES)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        try:
            os.link(tmp, path)  # atomic, and loses cleanly to a concurrent first start
        except FileExistsError:
            key = path.read_bytes()
        finally:
            tmp.unlink()
    if len(key) != KEY_BYTES:
        raise ValueError(f"{path}: expected a {KEY_BYTES}-byte key, found {len(key)} bytes")
    return key
