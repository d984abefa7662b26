"""mitmproxy flow files (``mitmdump -w``) brought in as a cassette.

They are read with mitmproxy's own FlowReader, which migrates older flow formats forward and
refuses a newer one; that refusal is reported in one line. Raw bodies (content-encoding
kept), timestamps, errors and WebSocket messages are kept; secrets are replaced by markers
and requests keyed as the proxy would (exchange_formats.captured). A flow file has no chunk
times and no run context, which is reported, one line per kind.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from mitmproxy import exceptions, http
from mitmproxy.flow import Flow
from mitmproxy.io import FlowReader

from freezeframe.exchange_formats.captured import Captured, Keeper
from freezeframe.exchange_formats.errors import FormatError
from freezeframe.storage import Chunk, Imported, Message, Outcome, RecordedResponse

#: mitmproxy's word for a client that closed its connection (or stream) before the end.
CLIENT_CLOSED = "Client disconnected."


def read_flows(path: Path, keeper: Keeper, notes: list[str]) -> Iterator[Imported]:
    """The HTTP flows of a flow file as records to import, in file order; other flows (TCP,
    UDP, DNS) are skipped and counted in ``notes``."""
    count = skipped = 0
    with open(path, "rb") as source:
        flows = iter(FlowReader(cast(BinaryIO, _Bounded(source))).stream())
        while (flow := _next_flow(path, flows, count + 1)) is not None:
            count += 1
            if not isinstance(flow, http.HTTPFlow):
                skipped += 1
                continue
            yield keeper.imported(_captured(flow))
    imported = count - skipped
    if skipped:
        notes.append(f"{skipped} flows are not HTTP (TCP, UDP or DNS) and were skipped")
    if imported:
        notes.append(f"{imported} flows have no chunk timing: they replay at once")
        notes.append(f"{imported} flows have no run context")


def _next_flow(path: Path, flows: Iterator[Flow], number: int) -> Flow | None:
    """The next flow of the file, None at its end; FormatError naming flow ``number`` for
    whatever the reader cannot read. mitmproxy's migration of older formats raises what it
    meets (KeyError, TypeError) on a damaged flow, and its parser recurses per level."""
    try:
        return next(flows, None)
    except exceptions.FlowReadException as exc:
        text = " ".join(str(exc).split()).rstrip(".")
        raise FormatError(path, f"flow {number}", text) from None
    except RecursionError:
        raise FormatError(path, f"flow {number}", "nested too deep to read") from None
    except (MemoryError, OverflowError):
        raise FormatError(path, f"flow {number}", "a length beyond the file") from None
    except (KeyError, TypeError, ValueError, AttributeError, UnicodeError) as exc:
        raise FormatError(
            path, f"flow {number}", f"not a flow mitmproxy reads ({type(exc).__name__}: {exc})"
        ) from None


class _Bounded(io.RawIOBase):
    """A flow file whose reads never ask for more than is left in it.

    mitmproxy's tnetstring reader reads as many bytes as a length prefix says, up to twelve
    digits: a prefix of 10^12 would have the buffer allocated before the short read, so
    each read is cut to what the file still holds, and the value then fails to parse."""

    def __init__(self, source: io.BufferedReader) -> None:
        self._source = source
        self._left = os.fstat(source.fileno()).st_size - source.tell()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = self._left if size is None or size < 0 else min(size, self._left)
        data = self._source.read(wanted)
        self._left -= len(data)
        return data

    def peek(self, size: int = 0) -> bytes:
        return self._source.peek(size)[: self._left]


def _captured(flow: http.HTTPFlow) -> Captured:
    request = flow.request
    started = request.timestamp_start
    response = None
    ended = request.timestamp_end
    if flow.response is not None:
        answer = flow.response
        body = answer.raw_content or b""
        first = max(0.0, answer.timestamp_start - started)
        response = RecordedResponse(
            status=answer.status_code,
            reason=answer.reason,
            http_version=answer.http_version,
            headers=tuple(answer.headers.fields),
            body=body,
            chunks=(Chunk(0, first),) if body else (),
            first_byte_at=first,
            trailers=tuple(answer.trailers.fields) if answer.trailers else (),
        )
        ended = answer.timestamp_end or ended
    error = flow.error.msg if flow.error else None
    if flow.error is not None:
        ended = flow.error.timestamp
    if response is None:
        outcome = Outcome.FAILED
    elif error is not None and flow.websocket is None:
        outcome = Outcome.CLIENT_CLOSED if error == CLIENT_CLOSED else Outcome.TRUNCATED
    else:
        outcome = Outcome.COMPLETE
    messages = None
    if flow.websocket is not None:
        messages = tuple(
            Message(m.from_client, m.is_text, max(0.0, m.timestamp - started), m.content)
            for m in flow.websocket.messages
        )
    return Captured(
        method=request.method,
        scheme=request.scheme,
        host=request.host,
        port=request.port,
        path=request.path,
        http_version=request.http_version,
        request_headers=tuple(request.headers.fields),
        request_body=request.raw_content or b"",
        started_at=started,
        duration=None if ended is None else max(0.0, ended - started),
        response=response,
        outcome=outcome,
        error=error,
        messages=messages,
    )
