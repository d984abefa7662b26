"""Secrets inside compressed bodies, which redacting the bytes on the wire cannot see.

Bodies are stored as they crossed the wire, content-encoding and all, so replay can give a
client the very bytes it received. But a gzip, br, zstd or deflate body hides whatever it
holds from a pattern scan, and secrets must never reach the store. So an encoded body is
also decoded and scanned; only when that finds a secret is the redacted body encoded again
with the same coding and stored in place of the original, which costs byte-exactness for
that one body and says so in the log. A body that does not decode (cut off mid-stream) is
stored as received: there is nothing whole to scan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mitmproxy.net import encoding

from storage import Header
from storage.redaction import Redactor

log = logging.getLogger("freezeframe.record")


def scrub_encoded(
    redactor: Redactor, data: bytes, headers: Sequence[Header], known: Sequence[bytes]
) -> tuple[bytes, tuple[Header, ...]] | None:
    """The body and headers to store instead, when the decoded body held a secret; else None.

    ``data`` is the body as sent, ``headers`` its message's headers; a rewritten body gets a
    matching ``Content-Length``.
    """
    coding = _coding(headers)
    if not coding or not data:
        return None
    try:
        decoded = encoding.decode(data, coding)
    except ValueError:
        return None
    scrubbed = redactor.body(decoded, known)
    if scrubbed == decoded:
        return None
    body = encoding.encode(scrubbed, coding)
    log.warning(
        "a secret inside a %s-encoded body was redacted; that body is stored re-encoded, "
        "not byte-exact",
        coding,
    )
    length = str(len(body)).encode("ascii")
    fixed = tuple(
        (name, length) if name.lower() == b"content-length" else (name, value)
        for name, value in headers
    )
    return body, fixed


def _coding(headers: Sequence[Header]) -> str:
    for name, value in headers:
        if name.lower() == b"content-encoding":
            return value.decode("latin-1").strip().lower()
    return ""
