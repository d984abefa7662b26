"""The HTTP answers freezeframe gives in its own name.

They must be unmistakable for an upstream's answer and must not trigger a client's
retry loop: a replay miss that an SDK retries three times with backoff turns one clear
error into a slow, confusing one. Both official SDKs obey ``x-should-retry: false``
before anything else, and do not retry a 4xx other than 408, 409 and 429. The body
uses the ``{"type": "error", "error": {"type", "message"}}`` shape both SDKs read the
message from, so the explanation shows up in the exception the agent raises.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mitmproxy import http, version
from mitmproxy.proxy.layers.http._base import format_error  # the page mitmproxy itself sends

MISS_STATUS = 404
ERROR_HEADER = "x-freezeframe-error"


def error(status: int, kind: str, message: str, **details: Any) -> http.Response:
    body = {"type": "error", "error": {"type": kind, "message": message, **details}}
    response = http.Response.make(
        status,
        json.dumps(body, ensure_ascii=False, indent=2).encode() + b"\n",
        {
            "content-type": "application/json",
            "x-should-retry": "false",
            ERROR_HEADER: kind,
        },
    )
    response.timestamp_start = response.timestamp_end = time.time()
    return response


def upstream_failure(status: int, message: str) -> http.Response:
    """What mitmproxy answers when the upstream cannot be reached, byte for byte."""
    response = http.Response.make(
        status,
        format_error(status, message),
        {"Server": version.MITMPROXY, "Connection": "close", "Content-Type": "text/html"},
    )
    response.timestamp_start = response.timestamp_end = time.time()
    return response
