"""Re-enacts a recorded WebSocket session on the loopback re-enactor's socket.

The re-enactor (``addons.reenact``) answers the upgrade request with the recorded ``101``
and hands the connection here, where a ``wsproto`` server plays the upstream's part:
mitmproxy relays its frames to the client exactly as it relayed the original upstream's.

The transcript is played in order. Server messages are sent at their recorded times,
scaled by the replay pace and counted from the client's latest message (from the start
before the client has said anything), so an answer keeps its recorded latency whenever the
client speaks; at instant pace nothing waits. At a recorded client message, replay waits
for the client's next message and compares it with the recording (``same_message``). At the
end the connection closes as recorded: a close frame with the recorded code and reason if
the server closed it, the client's close awaited if the client did, and a dropped
connection if it was lost or the proxy stopped while it was open.

A client message that differs from the recording, or one the recording does not have,
ends the replay: the rest of the recording answers a conversation that is no longer taking
place, and an agent fed answers to questions it did not ask fails far from the cause. So
freezeframe says so where the client sees it, a close frame with code 1008 (policy
violation) and the reason ``freezeframe: replay diverged at message N`` (``N`` counts the
transcript from 0, as ``freezeframe show`` lists it), and logs both messages. A client
that closes early simply ends the replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    TextMessage,
)
from wsproto.events import Message as WsMessage
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import ProtocolError, split_comma_header

from freezeframe.addons.websocket import ABNORMAL_CLOSURE, Close, same_message
from freezeframe.storage import Exchange, Header, RecordedResponse
from freezeframe.storage.records import Message

log = logging.getLogger("freezeframe.reenact")

POLICY_VIOLATION = 1008
#: How long a close frame waits for the client's answering close before the socket closes.
CLOSE_WAIT = 5.0
_PIECE = 256 * 1024
_PREVIEW = 120


@dataclass(frozen=True, slots=True)
class Conversation:
    """A recorded WebSocket to re-enact: the ``101`` answer under ``headers`` (already
    answering the live handshake), then the exchange's transcript, its delays multiplied by
    ``pace``. ``scrub`` redacts a live client message as the recorded ones were."""

    exchange: Exchange
    response: RecordedResponse
    headers: tuple[Header, ...]
    pace: float
    scrub: Callable[[bytes], bytes]

    async def play(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Player(self, reader, writer).run()


@dataclass(frozen=True, slots=True)
class _Received:
    arrived: float  # loop time
    text: bool
    data: bytes


class _Player:
    def __init__(
        self,
        conversation: Conversation,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.c = conversation
        self.reader = reader
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.ws = Connection(ConnectionType.SERVER, extensions=_extensions(conversation.headers))
        self.inbox: asyncio.Queue[_Received | None] = asyncio.Queue()  # None: client gone
        self.closed = asyncio.Event()

    async def run(self) -> None:
        start = self.loop.time()
        recorded = self.c.response
        if not await self._until(start, recorded.first_byte_at or 0.0):
            return
        head = [f"HTTP/1.1 {recorded.status} {recorded.reason}".encode("latin-1")]
        head += [name + b": " + value for name, value in self.c.headers]
        self.writer.write(b"\r\n".join(head) + b"\r\n\r\n")
        await self.writer.drain()
        listener = asyncio.ensure_future(self._listen())
        try:
            await self._converse(start)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _converse(self, start: float) -> None:
        """Play the transcript, then end the connection as recorded."""
        messages = self.c.exchange.recorded.messages or ()
        anchor, anchor_at = start, 0.0  # the latest client message: loop time, recorded time
        for index, message in enumerate(messages):
            if message.from_client:
                live = await self.inbox.get()
                if live is None:
                    return  # the client closed first
                if not same_message(message, live.text, live.data, self.c.scrub):
                    await self._diverge(index, message, live)
                    return
                anchor, anchor_at = live.arrived, message.at
            else:
                if not await self._until(anchor, message.at - anchor_at):
                    return
                await self._send(_event(message))
        await self._end(len(messages), anchor, anchor_at)

    async def _end(self, index: int, anchor: float, anchor_at: float) -> None:
        close = Close.parse(self.c.exchange.recorded.error)
        if close is not None and close.by_client:
            live = await self.inbox.get()
            if live is not None:
                await self._diverge(index, None, live)
            return
        ended = self.c.exchange.recorded.duration or 0.0
        if not await self._until(anchor, ended - anchor_at):
            return
        if close is None or close.code == ABNORMAL_CLOSURE:
            self.writer.transport.abort()  # lost, or still open when the proxy stopped
            return
        # wsproto sends an empty close frame only for the enum member itself
        no_status = close.code == CloseReason.NO_STATUS_RCVD
        await self._close(CloseReason.NO_STATUS_RCVD if no_status else close.code, close.reason)

    async def _diverge(self, index: int, recorded: Message | None, live: _Received) -> None:
        exchange = self.c.exchange
        log.warning(
            "WebSocket replay of %s#%d diverged at message %d: the client sent %s where the "
            "recording has %s; closing with %d",
            exchange.recorded.cassette,
            exchange.seq,
            index,
            _preview(live.text, self.c.scrub(live.data)),
            _preview(recorded.text, recorded.data) if recorded else "no more client messages",
            POLICY_VIOLATION,
        )
        await self._close(POLICY_VIOLATION, f"freezeframe: replay diverged at message {index}")

    async def _close(self, code: int, reason: str) -> None:
        if self.ws.state is ConnectionState.OPEN:
            await self._send(CloseConnection(code, reason or None))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closed.wait(), CLOSE_WAIT)

    async def _until(self, anchor: float, delay: float) -> bool:
        """Wait until ``delay`` recorded seconds (times the pace) after ``anchor``; False if
        the client closed meanwhile."""
        remaining = anchor + delay * self.c.pace - self.loop.time()
        if remaining > 0 and not self.closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closed.wait(), remaining)
        return not self.closed.is_set()

    async def _send(self, event: Event) -> None:
        if self.ws.state is ConnectionState.OPEN:
            self.writer.write(self.ws.send(event))
            await self.writer.drain()

    async def _listen(self) -> None:
        """Read the client's side: messages into the inbox, pings answered, close echoed."""
        parts: list[bytes] = []
        try:
            while not self.closed.is_set():
                data = await self.reader.read(_PIECE)
                self.ws.receive_data(data or None)
                for event in self.ws.events():
                    if isinstance(event, WsMessage):
                        text = isinstance(event, TextMessage)
                        parts.append(event.data.encode() if text else event.data)
                        if event.message_finished:
                            whole = _Received(self.loop.time(), text, b"".join(parts))
                            self.inbox.put_nowait(whole)
                            parts = []
                    elif isinstance(event, Ping):
                        await self._send(event.response())
                    elif isinstance(event, CloseConnection):
                        if self.ws.state is ConnectionState.REMOTE_CLOSING:
                            self.writer.write(self.ws.send(event.response()))
                        self.closed.set()
        except (ConnectionError, ProtocolError):  # gone, or not speaking WebSocket
            self.closed.set()
        finally:
            self.inbox.put_nowait(None)


def _event(message: Message) -> WsMessage[Any]:
    if message.text:
        return TextMessage(message.data.decode("utf-8", "replace"))
    return BytesMessage(message.data)


def _extensions(headers: tuple[Header, ...]) -> list[Extension]:
    """The extensions the recorded ``101`` accepted (mitmproxy relays with the same ones)."""
    extensions: list[Extension] = []
    for name, value in headers:
        if name.lower() != b"sec-websocket-extensions":
            continue
        for offer in split_comma_header(value):
            if offer.split(";", 1)[0].strip() == PerMessageDeflate.name:
                deflate = PerMessageDeflate()
                deflate.finalize(offer)
                extensions.append(deflate)
    return extensions


def _preview(text: bool, data: bytes) -> str:
    shown = data[:_PREVIEW].decode("utf-8", "replace") if text else data[:_PREVIEW].hex()
    more = "..." if len(data) > _PREVIEW else ""
    return f"{'text' if text else 'binary'} {shown!r}{more} ({len(data)} bytes)"
