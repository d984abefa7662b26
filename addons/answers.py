"""The HTTP answers freezeframe gives in its own name.

They must be unmistakable for an upstream's answer and must not trigger a client's
retry loop: a replay miss that an SDK retries three times with backoff turns one clear
error into a slow, confusing one. Both official SDKs obey ``x-should-retry: false``
before anything else, and do not retry a 4xx other than 408, 409 and 429. The body
uses the ``{"type": "error", "error": {"type", "message"}}`` shape both SDKs read the
message from, so the explanation shows up in the exception the agent raises; a request meant
for another provider (Bedrock, Gemini, Azure) gets what its SDK reads added
(``providers.errors``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import time
from typing import Any

from mitmproxy import http

from freezeframe.providers.errors import in_provider_format

MISS_STATUS = 404
ERROR_HEADER = "x-freezeframe-error"
#: How mitmproxy words an upstream certificate it could not verify.
TLS_VERIFY_FAILED = "Certificate verify failed:"


def error(
    status: int, kind: str, message: str, *, provider: str | None = None, **details: Any
) -> http.Response:
    """freezeframe's error, in the format of ``provider`` (``canonicalize.providers``'s name
    of the API the request was meant for) so that its SDK shows the message."""
    explanation = {"type": "error", "error": {"type": kind, "message": message, **details}}
    body, extra = in_provider_format(provider, status, explanation)
    response = http.Response.make(
        status,
        json.dumps(body, ensure_ascii=False, indent=2).encode() + b"\n",
        {
            "content-type": "application/json",
            "x-should-retry": "false",
            ERROR_HEADER: kind,
            **dict(extra),
        },
    )
    response.timestamp_start = response.timestamp_end = time.time()
    return response


def upstream_failure(status: int, message: str, address: str) -> http.Response:
    """What the client is answered when the upstream at ``address`` cannot be reached.

    Every failure gets freezeframe's JSON error in the shape the OpenAI and Anthropic SDKs
    read (``error.message``), naming the upstream and the cause: an SDK shows that message,
    where mitmproxy's HTML page reaches the agent as a bare 502. An upstream certificate that
    does not verify also names the setting that fixes it. Recording and replay both answer
    through here, so a replayed failure is the answer the client saw when it was recorded.
    """
    if message.startswith(TLS_VERIFY_FAILED):
        reason = message.removeprefix(TLS_VERIFY_FAILED).strip()
        return error(
            status,
            "freezeframe_upstream_tls",
            f"freezeframe: the certificate of the upstream {address} failed verification "
            f"({reason}); if it is signed by a private CA, pass --upstream-ca FILE "
            "(FREEZEFRAME_UPSTREAM_CA) with that CA",
        )
    return error(
        status,
        "freezeframe_upstream_unreachable",
        f"freezeframe: the upstream {address} could not be reached: {cause(message)}",
    )


_CONNECT_FAILED = re.compile(r"\[Errno (\d+)\] Connect call failed \('([^']*)', (\d+)")


def cause(message: str) -> str:
    """mitmproxy's error in words: ``[Errno 111] Connect call failed ('127.0.0.1', 9443)``
    is ``connect to 127.0.0.1:9443 refused``; anything else is kept as it is."""
    found = _CONNECT_FAILED.match(message)
    if found is None:
        return message
    number, host, port = int(found[1]), found[2], found[3]
    if number == errno.ECONNREFUSED:
        return f"connect to {host}:{port} refused"
    return f"connect to {host}:{port} failed: {os.strerror(number)}"
