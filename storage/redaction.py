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

from freezeframe.storage.credentials import RULES, Secret, looks_like_credential, secret_name

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

DEFAULT_BODY_PATTERNS: tuple[str, ...] = tuple(rule.pattern for rule in RULES)
"""Key shapes that must not survive anywhere, e.g. an agent that echoes its configuration
into a tool call: the maintained rules of ``credential_rules.toml`` (storage.credentials),
each tested by its own examples; long and specific enough not to hit ordinary prose."""

CREDENTIAL_FIELD_PATTERNS: tuple[str, ...] = (
    r'"(?:SecretAccessKey|secretAccessKey|SessionToken|sessionToken|Token)"\s*:\s*"([^"]{8,})"',
    r"<(?:SecretAccessKey|SessionToken)>([^<]{8,})</",
)
"""Fields that hand out AWS's temporary credentials: STS answers in XML, IAM Identity
Center's GetRoleCredentials and instance metadata in JSON. A pattern with a group replaces
the group alone, so the field that holds a secret stays readable (and its document
well-formed)."""

_SHAPES = "|".join(
    f"(?:{pattern})" for pattern in (*DEFAULT_BODY_PATTERNS, *CREDENTIAL_FIELD_PATTERNS)
)
"""The shapes and AWS's credential fields as one pattern, so a body is scanned for all of
them in one pass (one RE2 DFA walk over the bytes, about 3 ns a byte whatever the number of
rules: each pass more costs as much again)."""

_HINT = rb"(?i:auth|passw|pwd|passphrase|secret|token|key|cookie|credential|sig)"
"""What a credential's name contains (see ``credentials.secret_name``, which decides): the
patterns below find only names with one of these, and ask the classifier about each."""

_NAMED_VALUES: tuple[bytes, ...] = (
    # "name": "value", a JSON member at any depth, the value as written (escapes and all)
    rb'("([A-Za-z0-9_.\-]*' + _HINT + rb'[A-Za-z0-9_.\-]*)"\s*:\s*")((?:[^"\\]|\\.)+)(")',
    # name=value in a form body
    rb"((?:^|[&?])([A-Za-z0-9_.\-%\[\]]*" + _HINT + rb"[A-Za-z0-9_.\-%\[\]]*)=)"
    rb"([^&#\s\"'<>\\]+)()",
    # a multipart field: its Content-Disposition, its other head lines, then its first line
    rb'((?i:content-disposition):[^\r\n]*?name="([^"\r\n]*)"[^\r\n]*\r\n'
    rb"(?:[^\r\n]+\r\n){0,8}\r\n)([^\r\n]+)()",
)
"""Patterns whose groups are (what precedes the value, the name, the value, what follows)."""

_NAMED_HINT = _HINT + rb"""(?:[A-Za-z0-9_.\-]*"\s*:\s*"|[A-Za-z0-9_.\-%\[\]]*=[^&#\s"'<>\\])"""
"""What every match of the JSON and form patterns above holds: a hint word, then the rest of
a name and what opens its value. One pass for it costs a third of the two it can spare (an
answer streamed as JSON events is full of quotes, and of names such as ``prompt_tokens``
whose value is a number)."""

_QUERY_IN_HEADER = re.compile(rb"([?&;]([A-Za-z0-9_.\-]+)=)([^&#\s;,>\"']+)")
"""A query parameter inside a header's URL (a Referer, a Location, a Link)."""
_SCHEME_VALUE = re.compile(
    rb"((?i:bearer|basic|token|bot|digest|apikey|api-key|oauth|ssws|key) +)(\S.*)", re.DOTALL
)
"""A credential written with its scheme word, as a ``headers`` map in a body holds one."""

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
_ANCHOR = re.compile(r"\^|\$|\\[AzbB]")
"""What ties a user's pattern to where a value starts or ends (or a word does), which a
value joined to others would move."""
KEY_BYTES = 32
#: Quotes rarer than one in this many bytes: the JSON pass is as cheap as ``_NAMED_HINT``'s
#: (RE2 skips from quote to quote), so it runs without it.
_SPARSE_QUOTES = 32
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
        for pattern in (_SHAPES, *patterns):
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
        self._unanchored = not any(_ANCHOR.search(pattern) for pattern in patterns)
        """No pattern is anchored, so one that finds nothing in a request's header values
        joined finds nothing in any one of them (see ``headers``)."""
        self._text_patterns = tuple(on_text for _, on_text in compiled)
        self._json, self._form, self._multipart = (
            re2.compile(pattern, options=_BYTES) for pattern in _NAMED_VALUES
        )
        self._named_hint = re2.compile(_NAMED_HINT, options=_BYTES)

    def fingerprint(self, secret: bytes) -> str:
        return blake3.blake3(secret, key=self._key).hexdigest()[:16]

    def marker(self, secret: bytes) -> bytes:
        return _MARKER_PREFIX + self.fingerprint(secret).encode() + b"]"

    def is_secret_header(self, name: bytes | str) -> bool:
        """A header named as a credential (see ``credentials.secret_name``) or by the user."""
        text = name.decode("latin-1") if isinstance(name, bytes) else name
        return text.lower() in self._headers or secret_name(text) is not Secret.NO

    def is_secret_query(self, name: str, value: str) -> bool:
        """A query parameter that carries a credential: by its name, or for a name that
        is one only with a credential's looks (Google's ``key``), by both."""
        if name.lower() in SECRET_QUERY:
            return True
        kind = secret_name(name, query=True)
        return kind is Secret.ALWAYS or (
            kind is Secret.IF_SHAPED and looks_like_credential(value.encode("utf-8", "replace"))
        )

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
        if self._plain_headers(fields, known):
            return tuple(
                (name, self.header_value(value))
                if self.is_secret_header(name)
                else (name, self._query_in_header(value))
                for name, value in fields
            )
        return tuple(
            (name, self.header_value(value))
            if self.is_secret_header(name)
            else (name, self._query_in_header(self._shapes(self._scrub(value, known))))
            for name, value in fields
        )

    def _plain_headers(self, fields: Sequence[Header], known: Sequence[bytes]) -> bool:
        """Whether no header value but the secret headers' holds a known secret or a
        pattern's match, asked of them all joined: one pass of each pattern over a request's
        headers instead of one a header (most hold neither). A match across two values only
        sends them the long way, value by value."""
        if not self._unanchored:
            return False
        joined = b"\n".join(value for name, value in fields if not self.is_secret_header(name))
        if any(spelling in joined for secret in known for spelling in spellings(secret)):
            return False
        return not any(pattern.search(joined) for pattern in self._patterns)

    def reason(self, reason: str, known: Sequence[bytes] = ()) -> str:
        """A reason phrase, which an upstream may write a request's token into."""
        try:
            data = reason.encode("latin-1")
        except UnicodeEncodeError:
            return self.text(reason)
        return self._shapes(self._scrub(data, known)).decode("latin-1")

    def _shapes(self, data: bytes) -> bytes:
        for pattern in self._patterns:
            data = pattern.sub(lambda m: _in_group(m, self._fitted_marker), data)
        return data

    def _query_in_header(self, value: bytes) -> bytes:
        """A key in the query of a URL a header carries (``Referer: …?key=…``)."""
        if b"=" not in value:
            return value

        def replace(match: Any) -> bytes:
            name, value = match.group(2).decode("latin-1"), bytes(match.group(3))
            if not self.is_secret_query(name, value.decode("latin-1")):
                return bytes(match.group(0))
            return bytes(match.group(1)) + self._marker_unless_marked(unquote_to_bytes(value))

        return _QUERY_IN_HEADER.sub(replace, value)

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

    def body(
        self, data: bytes, known: Sequence[bytes] = (), found: set[bytes] | None = None
    ) -> bytes:
        """Length-preserving, so a recorded ``Content-Length`` still matches the body.

        ``known`` are secrets seen in the request (see ``secret_values``): an endpoint
        that echoes its caller's token back must not smuggle it into the store. ``found``,
        when given, collects the raw secrets this body holds by name (a JSON member, a form
        or multipart field), as ``secret_values`` collects a request's headers': an MCP
        server's token in a request body comes back in an answer that quotes it.
        """
        data = self._shapes(self._scrub(data, known))
        form = _may_be_form(data)
        quotes = data.count(b'"')
        if (form or quotes * _SPARSE_QUOTES > len(data)) and not self._named_hint.search(data):
            form = False  # no JSON member or form field named as a credential
            quotes = 0
        if quotes:
            data = self._json.sub(lambda m: self._named_value(m, found, _json_unescaped), data)
        if form:
            data = self._form.sub(lambda m: self._named_value(m, found, _form_unquoted), data)
        if b"form-data" in data:
            data = self._multipart.sub(lambda m: self._named_value(m, found, bytes), data)
        return data

    def _named_value(
        self, match: Any, found: set[bytes] | None, raw: Callable[[bytes], bytes]
    ) -> bytes:
        """A value replaced when its name says it is a credential (``secret_name``), the
        name kept, and a scheme word before it (``Bearer``) too; a marker left alone, so
        redacting twice changes nothing, and a multipart file's content too. The secret,
        unwritten from its body's spelling by ``raw``, goes into ``found``."""
        whole = bytes(match.group(0))
        head, name, value = match.group(1), match.group(2), match.group(3)
        if value.startswith((_MARKER_PREFIX, b"[r:")) or value.strip(b"*") == b"":
            return whole
        kind = secret_name(name.decode("latin-1"))
        if kind is Secret.NO or (kind is Secret.IF_SHAPED and not looks_like_credential(value)):
            return whole
        if b"filename=" in head:
            return whole
        scheme = _SCHEME_VALUE.fullmatch(value)
        if scheme:
            marked = scheme.group(1) + self._fitted_marker(scheme.group(2))
        else:
            marked = self._fitted_marker(value)
        if found is not None:
            found.update(
                secret
                for secret in (raw(value), raw(scheme.group(2)) if scheme else b"")
                if len(secret) >= MIN_ECHOED_SECRET
            )
        return bytes(head) + marked + bytes(match.group(4))

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
            if self.is_secret_query(param, text):
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
        secret = [self.is_secret_query(name, value) for name, value in pairs]
        if not any(secret):
            return self.text(target)
        redacted = [
            (name, self.marker(value.encode()).decode() if is_secret else value)
            for (name, value), is_secret in zip(pairs, secret, strict=True)
        ]
        return self.text(base + "?" + urlencode(redacted, quote_via=quote, safe="[]:"))


def _in_group[T: (bytes, str)](match: Any, replace: Callable[[T], T]) -> T:
    """The match with its secret replaced: the first group that took part where the pattern
    has any (the shapes are one alternation of rules, each with at most one), else all."""
    whole: T = match.group(0)
    for group in range(1, match.re.groups + 1):
        if match.start(group) >= 0:
            start, end = match.start(group) - match.start(0), match.end(group) - match.start(0)
            return whole[:start] + replace(match.group(group)) + whole[end:]
    return replace(whole)


def _json_unescaped(value: bytes) -> bytes:
    """A JSON string's content as written (``\\/``, ``\\u0073``) as the bytes it stands for."""
    try:
        text = json.loads(b'"' + value + b'"')
    except ValueError:
        return value
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else value


def _form_unquoted(value: bytes) -> bytes:
    """A form field's value as the bytes it stands for (``%2B``, ``+`` for a space)."""
    return unquote_to_bytes(value.replace(b"+", b" "))


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
