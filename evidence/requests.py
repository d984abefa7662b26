"""A request as it crossed the wire, and the one way it becomes what ``canonicalize`` keys.

The proxy (addons._flows), ``rekey``, ``explain``, ``resend``, the case file, edits and
imports of HAR and flow files all start from a ``WireRequest``: target and headers as sent
(secrets already markers), the body still content-encoded. ``WireRequest.view`` decodes the
body once, by storage's bounded decoder up to HELD_DECODED (a body that does not decode
whole is keyed by its bytes), and builds the view through ``RequestView.of``, so every
reader computes the same key for the same request, with the same limits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from freezeframe.canonicalize import RequestView
from freezeframe.storage import Exchange, Header
from freezeframe.storage.encodings import HELD_DECODED, decode_body
from freezeframe.storage.redaction import Redactor


@dataclass(frozen=True, slots=True)
class WireRequest:
    """A request as sent and as stored; see the module's docstring."""

    method: str
    scheme: str
    host: str
    port: int
    target: str
    """Path and query string, as sent (secret query values already markers)."""
    headers: tuple[Header, ...]
    body: bytes
    """As sent: content codings still applied."""
    http_version: str = "HTTP/1.1"

    @classmethod
    def of_exchange(cls, exchange: Exchange) -> WireRequest:
        return cls(
            exchange.recorded.method,
            exchange.recorded.scheme,
            exchange.recorded.host,
            exchange.recorded.port,
            exchange.recorded.path,
            exchange.recorded.request_headers,
            exchange.recorded.request_body,
            exchange.recorded.http_version,
        )

    def view(self, redact: Callable[[bytes], bytes] | None = None) -> RequestView:
        """The request as keyed: its body decoded (see ``decoded_body``), then passed
        through ``redact`` when the body still holds its secrets (the proxy's live one)."""
        body, _ = decoded_body(self.body, self.headers)
        return self.view_of(redact(body) if redact is not None else body)

    def view_of(self, body: bytes) -> RequestView:
        """The request as keyed with ``body`` (decoded and redacted already, or b"" for a
        body that streamed and is keyed by digest)."""
        headers = tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in self.headers
        )
        return RequestView.of(
            self.method, self.scheme, self.host, self.port, self.target, headers, body
        )


def decoded_body(body: bytes, headers: Sequence[Header]) -> tuple[bytes, str | None]:
    """``body`` with its content codings undone, as keys and ids are read from it, and why
    not when it is returned as sent (damaged, an unknown coding, or more than HELD_DECODED
    bytes decoded: a small body that expands a thousandfold must not take the proxy down).
    """
    found = decode_body(body, headers, HELD_DECODED)
    if found.whole:
        return found.data, None
    return body, found.note


def stored_view(exchange: Exchange) -> RequestView:
    """The stored request as the proxy keyed it."""
    return WireRequest.of_exchange(exchange).view()


def typed_view(
    method: str, url: str, headers: Sequence[str], body: bytes, redactor: Redactor
) -> tuple[RequestView, bool]:
    """A request typed as ``explain`` takes it (an absolute URL, ``Name: value`` headers, the
    body as sent), as the proxy would key it: secrets replaced by markers, the body decoded as
    the proxy decodes it; and whether its body held a secret. Raises ValueError naming the
    option that holds what does not parse."""
    parts = urlsplit(redactor.target(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--url {url!r}: expected an absolute http(s) URL")
    pairs = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header {header!r}: expected 'Name: value'")
        value = value.strip()
        if redactor.is_secret_header(name.strip()):
            value = redactor.header_value(value.encode("latin-1")).decode("latin-1")
        pairs.append((name.strip().encode("latin-1"), value.encode("latin-1")))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    request = WireRequest(
        method.upper(), parts.scheme, parts.hostname, port, target, tuple(pairs), body
    )
    held: list[bool] = []

    def redact(data: bytes) -> bytes:
        scrubbed = redactor.body(data)
        held.append(scrubbed != data)
        return scrubbed

    return request.view(redact), any(held)
