"""Secrets inside compressed bodies, which redacting the bytes on the wire cannot see.

Bodies are stored as they crossed the wire, content-encoding and all, so replay can give a
client the very bytes it received. But a gzip, br, zstd or deflate body hides whatever it
holds from a pattern scan, and secrets must never reach the store. So an encoded body is
also decoded and scanned; only when that finds a secret is the redacted body encoded again
with the same coding and stored in place of the original, which costs byte-exactness for
that one body and says so in the log. A body that does not decode whole (cut off
mid-stream, or larger than storage.encodings.HELD_DECODED decoded: a compression bomb) is
stored as received: there is nothing whole to scan, and holding it would cost the proxy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from freezeframe.storage import Header
from freezeframe.storage.encodings import HELD_DECODED, content_codings, decode_body, encode
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.record")


def scrub_encoded(
    redactor: Redactor, data: bytes, headers: Sequence[Header], known: Sequence[bytes]
) -> tuple[bytes, tuple[Header, ...]] | None:
    """The body and headers to store instead, when the decoded body held a secret; else None.

    ``data`` is the body as sent, ``headers`` its message's headers; a rewritten body gets a
    matching ``Content-Length``.
    """
    codings = content_codings(headers)
    if not codings or not data:
        return None
    found = decode_body(data, headers, HELD_DECODED)
    if not found.whole:
        return None
    scrubbed = redactor.body(found.data, known)
    if scrubbed == found.data:
        return None
    body = encode(scrubbed, codings)
    log.warning(
        "a secret inside a %s-encoded body was redacted; that body is stored re-encoded, "
        "not byte-exact",
        ", ".join(codings),
    )
    length = str(len(body)).encode("ascii")
    fixed = tuple(
        (name, length) if name.lower() == b"content-length" else (name, value)
        for name, value in headers
    )
    return body, fixed
