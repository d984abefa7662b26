"""mitmproxy flow files (``mitmdump -w``) brought in as a cassette.

They are read with mitmproxy's own FlowReader, which migrates older flow formats forward and
refuses a newer one; that refusal is reported in one line. Raw bodies (content-encoding
kept), timestamps, errors and WebSocket messages are kept; secrets are replaced by markers
and requests keyed as the proxy would (exchange_formats.captured). A flow file has no chunk
times and no run context, which is reported, one line per kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mitmproxy import exceptions, http
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
        reader = FlowReader(source)
        try:
            for flow in reader.stream():
                count += 1
                if not isinstance(flow, http.HTTPFlow):
                    skipped += 1
                    continue
                yield keeper.imported(_captured(flow))
        except exceptions.FlowReadException as exc:
            text = " ".join(str(exc).split()).rstrip(".")
            raise FormatError(path, f"flow {count + 1}", text) from None
    imported = count - skipped
    if skipped:
        notes.append(f"{skipped} flows are not HTTP (TCP, UDP or DNS) and were skipped")
    if imported:
        notes.append(f"{imported} flows have no chunk timing: they replay at once")
        notes.append(f"{imported} flows have no run context")


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
