"""A request known by the bytes it was sent as: the digest replay answers from first.

Most replays send the very bytes that were recorded, and a digest of those bytes finds the
recording before anything is decoded, parsed or keyed; a request whose digest finds nothing
is keyed in full (canonicalize) as before. The digest covers the method, scheme, host, port,
target, body and every header but those in ``SKIPPED``: what a client varies from run to
run without changing the question (credentials, which the store keeps only as markers,
SDK telemetry, tracing, transport). No provider profile keys a header in ``SKIPPED``
(tests/storage/test_sent.py checks each); a key configuration that does turns replay by
bytes off (addons.replay), since two requests alike in every other byte would then be
different questions.

So equal digests mean the request is the one recorded, byte for byte where it matters: its
canonical form, stripped parts and JSON-RPC id are the recording's, and the recording
answers it whatever the key configuration says.
"""

from __future__ import annotations

from collections.abc import Iterable

from blake3 import blake3

SKIPPED = frozenset(
    {
        # Credentials: stored as markers, so never equal to what is sent.
        b"authorization",
        b"proxy-authorization",
        b"x-api-key",
        b"api-key",
        b"x-goog-api-key",
        b"cookie",
        b"x-amz-security-token",
        # Signing and SDK telemetry: new on every request or every run.
        b"x-amz-date",
        b"x-amz-content-sha256",
        b"amz-sdk-invocation-id",
        b"amz-sdk-request",
        b"user-agent",
        b"x-stainless-retry-count",
        b"x-stainless-read-timeout",
        b"x-stainless-timeout",
        b"traceparent",
        b"tracestate",
        b"baggage",
        # Transport: framing, not the question.
        b"content-length",
        b"connection",
        b"keep-alive",
        b"te",
        b"host",
    }
)
"""Header names (lower case) left out of the digest."""

_DOMAIN = b"freezeframe/sent/v1\n"


def sent_digest(
    method: str,
    scheme: str,
    host: str,
    port: int,
    target: str,
    headers: Iterable[tuple[bytes, bytes]],
    body: bytes,
) -> bytes:
    """The digest of a request as sent: ``target`` is the path and query, ``headers`` the
    header lines in order (names in any case)."""
    hasher = blake3(_DOMAIN)
    head = [method.upper(), scheme.lower(), host.lower(), str(port), target]
    hasher.update("\n".join(head).encode("utf-8", "surrogateescape"))
    for name, value in headers:
        lowered = name.lower()
        if lowered not in SKIPPED:
            hasher.update(b"\n%d:%s:%s" % (len(lowered), lowered, value))
    hasher.update(b"\n\n")
    hasher.update(body)
    return hasher.digest()
