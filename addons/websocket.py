"""What freezeframe keeps of a WebSocket, and how it reads that back.

A WebSocket (OpenAI's Realtime API, say) is recorded as the HTTP exchange that opened it
(the upgrade request and its ``101`` answer) plus a transcript: every message in either
direction, text or binary, its exact payload and when it crossed the proxy. How the
connection ended goes into the exchange's ``error`` as ``closed by server: 1000`` (or
``closed by client: 4000 reason``), so replay can end it the same way. The exchange is
submitted when the WebSocket ends (``addons.record``), not when the ``101`` arrives.

Payloads are redacted like bodies (``Redactor.body``, length-preserving): a Realtime client
may carry its token in a message, and the server may echo it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mitmproxy import http
from wsproto.utilities import generate_accept_token

from freezeframe.canonicalize.realtime import client_event_form
from freezeframe.storage import Header, Outcome, RecordedResponse
from freezeframe.storage.records import Message
from freezeframe.storage.redaction import Redactor

#: The close code a peer never sends: the connection was lost without a close frame.
ABNORMAL_CLOSURE = 1006

_CLOSE = re.compile(r"closed by (client|server): (\d+)(?: (.*))?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Close:
    """How a recorded WebSocket ended: who sent the close frame, its code and reason."""

    by_client: bool
    code: int
    reason: str

    def describe(self) -> str:
        side = "client" if self.by_client else "server"
        return f"closed by {side}: {self.code}" + (f" {self.reason}" if self.reason else "")

    @classmethod
    def parse(cls, error: str | None) -> Close | None:
        """The close recorded in an exchange's ``error``; None if it never closed (the
        proxy stopped first)."""
        match = _CLOSE.fullmatch(error or "")
        if match is None:
            return None
        return cls(match.group(1) == "client", int(match.group(2)), match.group(3) or "")


def is_websocket(response: RecordedResponse | None) -> bool:
    """Whether this answer opened a WebSocket (so replay must re-enact a conversation)."""
    if response is None or response.status != 101:
        return False
    return any(
        name.lower() == b"upgrade" and value.strip().lower() == b"websocket"
        for name, value in response.headers
    )


def transcript(
    flow: http.HTTPFlow, started: float, redactor: Redactor, secrets: Sequence[bytes]
) -> tuple[Message, ...] | None:
    """The messages that crossed the proxy so far; None for a flow that is no WebSocket."""
    if flow.websocket is None:
        return None
    return tuple(
        Message(
            from_client=message.from_client,
            text=message.is_text,
            at=message.timestamp - started,
            data=redactor.body(message.content, secrets),
        )
        for message in flow.websocket.messages
        if not message.dropped
    )


def ending(flow: http.HTTPFlow) -> tuple[Outcome, str]:
    """The outcome and ``error`` of a WebSocket that has ended: complete if a close frame
    ended it, truncated if the connection was lost."""
    websocket = flow.websocket
    assert websocket is not None
    code = websocket.close_code if websocket.close_code is not None else ABNORMAL_CLOSURE
    close = Close(bool(websocket.closed_by_client), code, websocket.close_reason or "")
    outcome = Outcome.TRUNCATED if code == ABNORMAL_CLOSURE else Outcome.COMPLETE
    return outcome, close.describe()


def handshake_headers(headers: Sequence[Header], request: http.Request) -> tuple[Header, ...]:
    """The recorded ``101`` headers, with ``Sec-WebSocket-Accept`` answering this request's
    key: the client checks it against the fresh key it just sent, never the recorded one."""
    key = request.headers.get("sec-websocket-key", "").strip().encode("ascii", "replace")
    return tuple(
        (name, generate_accept_token(key))
        if name.lower() == b"sec-websocket-accept"
        else (name, value)
        for name, value in headers
    )


def same_message(
    recorded: Message, text: bool, data: bytes, scrub: Callable[[bytes], bytes]
) -> bool:
    """Whether a live client message is the recorded one.

    ``scrub`` redacts the live payload as the recorded one was. JSON text messages are
    compared by value (member order aside) without the ids a run mints
    (``canonicalize.realtime.client_event_form``: ``event_id``, and the server's item and
    response ids the client names back) and the default volatile fields; anything else
    must be the same bytes.
    """
    if text != recorded.text:
        return False
    live = scrub(data)
    if live == recorded.data:
        return True
    if not text:
        return False
    mine, theirs = client_event_form(live), client_event_form(recorded.data)
    return mine is not None and mine == theirs
