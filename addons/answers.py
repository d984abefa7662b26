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
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from mitmproxy import http

from freezeframe.canonicalize import said
from freezeframe.providers.errors import in_provider_format
from freezeframe.storage import Miss, Nearest

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


def miss_message(
    cassette: str,
    request: str,
    recorded: int,
    occurrence: int,
    near: Sequence[Nearest],
    admin: str,
    *,
    details: bool,
) -> str:
    """A replay miss in one sentence. With ``details`` it quotes the nearest recording's
    values where they differ (what the log, the store's misses and the case file keep);
    without, it names only the paths, since those values are the recording's prompt text."""
    if recorded:
        return (
            f"freezeframe: replay miss in cassette {cassette!r}: {request} was "
            f"recorded {recorded} time(s) and all were already served (this is "
            f"occurrence {occurrence}). If the agent is running again from the "
            f"start, start replay from the top: `freezeframe replay-reset --admin "
            f"{admin}` (POST http://{admin}/api/replay/reset); to record "
            "what is new, use --mode auto"
        )
    message = f"freezeframe: replay miss in cassette {cassette!r}: no recording of {request}"
    if not near:
        return message + "; the cassette has no recording of this endpoint to compare with"
    first = near[0]
    if details:
        return (
            message
            + f"; nearest is #{first.seq} {first.request}, differing at "
            + said(first.differences)
        )
    paths = ", ".join(d.path for d in first.differences if d.path != "…") or "nothing"
    return (
        f"{message}; nearest is #{first.seq}, differing at {paths} (the values are in the "
        f"proxy's log and at http://{admin}/cassettes/{quote(cassette, safe='')}/misses)"
    )


def miss(
    miss: Miss,
    request: str,
    admin: str,
    *,
    details: bool,
    provider: str | None = None,
    rule: tuple[dict[str, Any], str] | None = None,
) -> http.Response:
    """The answer to a request replay has no recording for: the one place its body is built.

    It always names the cassette, the request key and the paths where the nearest recordings
    differ, and carries ``x-should-retry: false``. The recorded values at those paths (a
    recording's prompt text) are quoted only with ``details``: on a proxy private to one run
    (``exec``, the pytest plugin) or one whose operator asked (``--miss-details``); any other
    client of the port, naming any cassette in ``X-Freezeframe-Cassette``, reads no recording.
    ``rule`` is the key rule that would have made it a hit and the sentence saying so (it
    names paths, never values); ``provider`` puts it all in that provider's error format."""
    found: dict[str, Any] = {"cassette": miss.cassette, "key": miss.key}
    if miss.kind == "freezeframe_unknown_cassette":
        message = miss.message
    else:
        found["occurrence"] = miss.occurrence
        found["recorded"] = miss.recorded
        message = miss_message(
            miss.cassette,
            request,
            miss.recorded,
            miss.occurrence,
            miss.nearest,
            admin,
            details=details,
        )
        if not miss.recorded:
            found["nearest"] = [_near_document(near, details) for near in miss.nearest]
    if rule is not None:
        found["suggested_rule"], sentence = rule
        message += sentence
    return error(MISS_STATUS, miss.kind, message, provider=provider, **found)


def _near_document(near: Nearest, details: bool) -> dict[str, Any]:
    if not details:
        return {
            "seq": near.seq,
            "key": near.key,
            "differences": [{"path": d.path} for d in near.differences],
        }
    return {
        "seq": near.seq,
        "request": near.request,
        "key": near.key,
        "differences": [
            {"path": d.path, "live": d.live, "recorded": d.recorded} for d in near.differences
        ],
    }


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
