"""A local TLS WebSocket server shaped like OpenAI's Realtime API.

End-to-end tests record a Realtime session through the proxy against a :class:`WsUpstream`,
then replay it and assert that the server saw no new connection. The server

* speaks JSON text events the way the Realtime API does: ``session.created`` as soon as a
  connection opens; ``session.update`` -> ``session.updated``; ``conversation.item.create``
  -> ``conversation.item.created``; ``response.create`` -> ``response.created``, then
  ``deltas`` ``response.output_text.delta`` / ``response.output_audio.delta`` (base64)
  events with ``gaps`` between them, then ``response.done`` (``completed``, with its token
  ``usage``); with ``calls_tools``, a response to the user's own words in a session that
  offers tools is a call of the first (``response.function_call_arguments.done``, then
  ``response.done`` with the ``function_call`` item), as a model told to use one answers;
  anything else -> ``error``;
* echoes a binary message back unchanged;
* closes with a chosen code on ``{"type": "test.close", "code": C, "reason": R}`` (not a
  Realtime event: how a test makes the *server* end a session);
* makes every answer differ from the last one (``n`` counts events across connections), so
  a replayed event can be told from a live one;
* counts accepted TCP connections (on accept, before TLS) and keeps every client message.

It runs on its own event loop in a daemon thread (``support.upstream._TlsServer``), with
TLS from the same ``trustme`` CA as :class:`support.upstream.Upstream`, and speaks the
protocol with ``wsproto`` (permessage-deflate when the client offers it). Quick use::

    with WsUpstream(ca, gaps=(0.05, 0.2)) as up:   # up.url("/v1/realtime") == "wss://..."
        ...
    assert up.connections == 1
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Sequence
from typing import Any

import trustme
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate

from support.upstream import _TlsServer, tool_arguments

__all__ = ["HANDSHAKE_S", "WsUpstream"]

IDLE_TIMEOUT = 30.0
#: A client's opening-handshake budget through the proxy. The SDKs' default (websockets'
#: 10 s) ran out twice in CI with the whole suite on two cores, though 40 replays beside the
#: e2e suite and six busy loops here took 2.2 s at most.
HANDSHAKE_S = 30.0
MAX_GAP = 10.0
MAX_DELTAS = 1000
MAX_EVENTS = 100_000
_READ = 65536


class WsUpstream(_TlsServer):
    """The fake Realtime server. See the module docstring for the protocol.

    ``gaps``: seconds between consecutive events of a response (gap ``i`` follows event
    ``i`` of ``response.created``, the deltas, ``response.done``; the last value repeats).
    ``deltas``: how many delta events a response has (text and audio alternate).
    ``base_url`` is for an OpenAI client: its websocket URL is ``<base_url>/v1/realtime``.
    """

    _name = "ws-upstream"
    _ends = (OSError, TimeoutError, asyncio.IncompleteReadError)

    def __init__(
        self,
        ca: trustme.CA,
        *,
        gaps: Sequence[float] = (0.005,),
        deltas: int = 4,
        calls_tools: bool = False,
    ) -> None:
        super().__init__(ca, ["http/1.1"])
        if not gaps or any(not 0 <= g <= MAX_GAP for g in gaps):
            raise ValueError(f"gaps must be a non-empty list within [0, {MAX_GAP}] s")
        self.gaps = tuple(float(g) for g in gaps)
        self.deltas = max(1, min(deltas, MAX_DELTAS))
        self.calls_tools = calls_tools
        self.received: list[str | bytes] = []  # every client message, in arrival order
        self.n = 0

    def url(self, path: str = "/v1/realtime") -> str:
        return f"wss://localhost:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _Session(self, reader, writer).run()
        finally:
            writer.transport.abort()  # however the session ended, no lingering close

    def next_n(self) -> int:
        self.n += 1
        return self.n

    def gap(self, i: int) -> float:
        return self.gaps[min(i, len(self.gaps) - 1)]


class _Session:
    """One client connection: the handshake, then events until either side closes."""

    def __init__(
        self, owner: WsUpstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.owner = owner
        self.reader = reader
        self.writer = writer
        self.ws = WSConnection(ConnectionType.SERVER)
        self.parts: list[str | bytes] = []
        self.session_id = ""
        self.tools: list[dict[str, Any]] = []
        self.heard: str | None = None
        """The user's words when they were the last item to join the conversation."""

    async def send(self, event: Event) -> None:
        self.writer.write(self.ws.send(event))
        await self.writer.drain()

    async def emit(self, event: dict[str, Any]) -> None:
        n = self.owner.next_n()
        await self.send(TextMessage(json.dumps({"event_id": f"event_{n}", **event})))

    async def run(self) -> None:
        for _ in range(MAX_EVENTS):
            data = await asyncio.wait_for(self.reader.read(_READ), IDLE_TIMEOUT)
            self.ws.receive_data(data or None)
            for event in self.ws.events():
                if not await self.handle(event):
                    return
            if not data:
                return

    async def handle(self, event: Event) -> bool:
        """React to one wsproto event; False once the connection is done."""
        if isinstance(event, Request):
            if not event.target.startswith("/v1/realtime"):
                await self.send(RejectConnection(status_code=404))
                return False
            await self.send(AcceptConnection(extensions=[PerMessageDeflate()]))
            self.session_id = f"sess_{self.owner.next_n()}"
            await self.emit(
                {
                    "type": "session.created",
                    "session": {"id": self.session_id, "object": "realtime.session"},
                }
            )
        elif isinstance(event, Message):
            self.parts.append(event.data)
            if event.message_finished:
                parts, self.parts = self.parts, []
                text = isinstance(event, TextMessage)
                whole = (
                    "".join(p for p in parts if isinstance(p, str))
                    if text
                    else b"".join(p for p in parts if isinstance(p, bytes))
                )
                self.owner.received.append(whole)
                return await self.answer(whole)
        elif isinstance(event, Ping):
            await self.send(event.response())
        elif isinstance(event, CloseConnection):
            with contextlib.suppress(Exception):
                await self.send(event.response())
            return False
        return True

    async def answer(self, message: str | bytes) -> bool:
        if isinstance(message, bytes):
            await self.send(BytesMessage(message))
            return True
        try:
            event = json.loads(message)
            kind = event["type"]
        except (ValueError, KeyError, TypeError):
            await self.emit(_error("invalid_json", "the event is not a JSON object with a type"))
            return True
        if kind == "test.close":
            await self.send(CloseConnection(int(event["code"]), str(event.get("reason", ""))))
            return False
        if kind == "session.update":
            session = {"id": self.session_id, **event.get("session", {})}
            self.tools = list(session.get("tools") or self.tools)
            await self.emit({"type": "session.updated", "session": session})
        elif kind == "conversation.item.create":
            item = {"id": f"item_{self.owner.n + 1}", **event.get("item", {})}
            said = [part.get("text", "") for part in item.get("content") or []]
            self.heard = "".join(said) if item.get("role") == "user" else None
            await self.emit({"type": "conversation.item.created", "item": item})
        elif kind == "response.create":
            await self.respond()
        else:
            await self.emit(_error("unknown_event", f"unknown event type {kind!r}"))
        return True

    async def respond(self) -> None:
        response_id = f"resp_{self.owner.n + 1}"
        await self.emit({"type": "response.created", "response": {"id": response_id}})
        if self.owner.calls_tools and self.tools and self.heard is not None:
            await self.call_tool(response_id, self.tools[0], self.heard)
            self.heard = None
            return
        for i in range(self.owner.deltas):
            await asyncio.sleep(self.owner.gap(i))
            n = self.owner.n + 1
            common = {"response_id": response_id, "item_id": "item_r", "output_index": 0}
            if i % 2 == 0:
                delta = {"type": "response.output_text.delta", "delta": f"word{n} "}
            else:
                audio = base64.b64encode(bytes((n + k) % 256 for k in range(48))).decode()
                delta = {"type": "response.output_audio.delta", "delta": audio}
            await self.emit({**delta, **common, "content_index": 0})
        await asyncio.sleep(self.owner.gap(self.owner.deltas))
        usage = {"total_tokens": 20 + self.owner.deltas, "input_tokens": 20}
        usage["output_tokens"] = self.owner.deltas
        done = {"id": response_id, "status": "completed", "usage": usage}
        await self.emit({"type": "response.done", "response": done})

    async def call_tool(self, response_id: str, tool: dict[str, Any], heard: str) -> None:
        n = self.owner.n + 1
        arguments = json.dumps(tool_arguments(tool.get("parameters"), heard))
        call = {"type": "function_call", "id": f"item_fc_{n}", "call_id": f"call_{n}"}
        call |= {"name": tool.get("name", ""), "arguments": arguments}
        where = {"response_id": response_id, "item_id": call["id"], "output_index": 0}
        done = {"call_id": call["call_id"], "name": call["name"], "arguments": arguments}
        await self.emit({"type": "response.function_call_arguments.done", **where, **done})
        usage = {"total_tokens": 30, "input_tokens": 24, "output_tokens": 6}
        output = [{**call, "status": "completed"}]
        response = {"id": response_id, "status": "completed", "output": output, "usage": usage}
        await self.emit({"type": "response.done", "response": response})


def _error(code: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "invalid_request_error", "code": code, "message": message},
    }
