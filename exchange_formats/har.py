"""HAR 1.2, for browsers' devtools and other proxies, both ways.

Export follows the spec: bodies content-decoded (``content.text``, base64 for binary),
timings split into send/wait/receive with ``-1`` for what a proxy cannot know (blocked, dns,
connect, ssl), and freezeframe's own fields under ``_``-prefixed names: ``_outcome``,
``_error``, ``_chunks`` (offset and seconds of each body piece), ``_context`` (run context),
``_seq``, ``_key``, ``_chain``, and WebSocket messages as ``_webSocketMessages`` the way
Chrome writes them. The document is written entry by entry, and a body the store keeps out
of memory is streamed into it (raw, base64, marked ``_undecoded``).

Import reads HAR from Chrome, Firefox and mitmproxy (``savehar``), and freezeframe's own:
bodies are stored decoded, so ``Content-Encoding`` is dropped as mitmproxy's own HAR reader
does; secrets are replaced by markers and requests keyed as the proxy would
(exchange_formats.captured). What the file lacks is reported, one line per kind.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlsplit

from freezeframe.exchange_formats.captured import Captured, Keeper
from freezeframe.exchange_formats.errors import FormatError
from freezeframe.exchange_formats.jsonl import Progress
from freezeframe.exchange_formats.portable import KIND_NAMES, kind_of
from freezeframe.exchange_formats.streaming import Streamed
from freezeframe.providers.bodies import request_body, response_body
from freezeframe.storage import (
    BlobRef,
    Chunk,
    Exchange,
    Header,
    Imported,
    Message,
    Outcome,
    ReadStore,
    RecordedResponse,
    boundedjson,
)


def export_har(store: ReadStore, cassette: str, out: IO[bytes], progress: Progress) -> int:
    """Write the cassette as one HAR document, entry by entry; returns the entries written."""
    creator = {"name": "freezeframe", "version": version("freezeframe")}
    out.write(b'{"log":{"version":"1.2","creator":')
    out.write(json.dumps(creator).encode())
    out.write(b',"pages":[],"_cassette":' + json.dumps(cassette).encode() + b',"entries":[\n')
    count = 0
    for summary in store.exchanges(cassette):
        if count:
            out.write(b",\n")
        streamed = Streamed(store)
        entry = har_entry(store.exchange(cassette, summary.seq), streamed)
        streamed.write(json.dumps(entry, ensure_ascii=False), out)
        count += 1
        progress(1)
    out.write(b"\n]}}\n")
    return count


def har_entry(exchange: Exchange, streamed: Streamed) -> dict[str, Any]:
    """One HAR entry for an exchange; large bodies become marks in ``streamed``."""
    response = exchange.recorded.response
    split = urlsplit(exchange.url)
    request: dict[str, Any] = {
        "method": exchange.recorded.method,
        "url": exchange.url,
        "httpVersion": exchange.recorded.http_version,
        "cookies": [],
        "headers": _headers(exchange.recorded.request_headers),
        "queryString": [
            {"name": name, "value": value}
            for name, value in parse_qsl(split.query, keep_blank_values=True)
        ],
        "headersSize": -1,
        "bodySize": _size(exchange.recorded.request_body, exchange.recorded.request_body_ref),
    }
    if exchange.recorded.request_body or exchange.recorded.request_body_ref:
        decoded = request_body(exchange)
        content = _content(
            exchange.recorded.request_body,
            exchange.recorded.request_body_ref,
            decoded.data,
            decoded.whole,
            streamed,
        )
        # postData has no size or encoding in HAR 1.2: base64 is marked as freezeframe's own.
        request["postData"] = {
            "mimeType": _header(exchange.recorded.request_headers, b"content-type"),
            "params": [],
            "text": content["text"],
        }
        if "encoding" in content:
            request["postData"]["_encoding"] = content["encoding"]
        if content.get("_undecoded"):
            request["postData"]["_undecoded"] = True
    entry: dict[str, Any] = {
        "startedDateTime": datetime.fromtimestamp(exchange.recorded.started_at, UTC).isoformat(
            timespec="milliseconds"
        ),
        "time": 0,
        "request": request,
        "response": _response(exchange, streamed),
        "cache": {},
        "timings": _timings(exchange),
        "_seq": exchange.seq,
        "_key": exchange.recorded.key,
        "_chain": exchange.chain,
        "_outcome": exchange.recorded.outcome.value,
        "_error": exchange.recorded.error,
        "_context": dict(exchange.recorded.context),
        "_chunks": [] if response is None else [[c.offset, c.at] for c in response.chunks],
    }
    entry["time"] = sum(value for value in entry["timings"].values() if value > 0)
    if exchange.recorded.messages is not None:
        entry["_resourceType"] = "websocket"
        entry["_webSocketMessages"] = [
            {
                "type": "send" if message.from_client else "receive",
                "time": exchange.recorded.started_at + message.at,
                "opcode": 1 if message.text else 2,
                "data": message.data.decode("utf-8", "replace")
                if message.text
                else base64.b64encode(message.data).decode("ascii"),
            }
            for message in exchange.recorded.messages
        ]
    return entry


def _response(exchange: Exchange, streamed: Streamed) -> dict[str, Any]:
    response = exchange.recorded.response
    if response is None:
        return {
            "status": 0,
            "statusText": "",
            "httpVersion": "",
            "cookies": [],
            "headers": [],
            "content": {"size": 0, "mimeType": ""},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
            "_error": exchange.recorded.error,
        }
    decoded = response_body(exchange)
    assert decoded is not None
    content = {"mimeType": _header(response.headers, b"content-type")}
    content |= _content(response.body, response.body_ref, decoded.data, decoded.whole, streamed)
    return {
        "status": response.status,
        "statusText": response.reason,
        "httpVersion": response.http_version,
        "cookies": [],
        "headers": _headers(response.headers),
        "content": content,
        "redirectURL": _header(response.headers, b"location"),
        "headersSize": -1,
        "bodySize": _size(response.body, response.body_ref),
    }


def _content(
    raw: bytes, ref: BlobRef | None, decoded: bytes, whole: bool, streamed: Streamed
) -> dict[str, Any]:
    """A body as HAR's content: decoded text, or base64; the raw bytes when they do not
    decode (``_undecoded``), streamed from the store when it keeps them out of memory."""
    if ref is not None:
        mark = streamed.mark(ref, False)
        return {"size": ref.size, "text": mark, "encoding": "base64", "_undecoded": True}
    data = decoded if whole else raw
    content: dict[str, Any] = {"size": len(data)}
    if whole and len(raw) != len(decoded):
        content["compression"] = len(decoded) - len(raw)
    try:
        content["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        content |= {"text": base64.b64encode(data).decode("ascii"), "encoding": "base64"}
    if not whole:
        content["_undecoded"] = True
    return content


def _timings(exchange: Exchange) -> dict[str, float]:
    """Milliseconds; -1 where a proxy cannot tell (its own connection setup is not the
    client's)."""
    response = exchange.recorded.response
    first = response.first_byte_at if response is not None else None
    wait = -1.0 if first is None else first * 1000
    receive = -1.0
    if first is not None and exchange.recorded.duration is not None:
        receive = max(0.0, (exchange.recorded.duration - first) * 1000)
    elif first is None and exchange.recorded.duration is not None:
        wait = exchange.recorded.duration * 1000
    return {
        "blocked": -1,
        "dns": -1,
        "connect": -1,
        "ssl": -1,
        "send": 0,
        "wait": round(wait, 3),
        "receive": round(receive, 3),
    }


def _headers(fields: tuple[Header, ...]) -> list[dict[str, str]]:
    return [
        {"name": name.decode("latin-1"), "value": value.decode("latin-1")} for name, value in fields
    ]


def _header(fields: tuple[Header, ...], name: bytes) -> str:
    return next((value.decode("latin-1") for n, value in fields if n.lower() == name), "")


def _size(body: bytes, ref: BlobRef | None) -> int:
    return ref.size if ref is not None else len(body)


class _Entry:
    """Reads one HAR entry, naming the first field that is missing or of the wrong kind."""

    def __init__(self, path: Path, index: int, entry: object) -> None:
        self.path = path
        self.at = f"$.log.entries[{index}]"
        if not isinstance(entry, dict):
            raise FormatError(path, self.at, "expected an object")
        self.entry = entry

    def get(self, parent: Mapping[str, Any], name: str, at: str, *kinds: type) -> Any:
        where = f"{self.at}{at}.{name}"
        if name not in parent:
            raise FormatError(self.path, where, "missing")
        value = parent[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(KIND_NAMES[kind] for kind in kinds)
            raise FormatError(self.path, where, f"expected {wanted}, found {kind_of(value)}")
        return value

    def headers(self, parent: Mapping[str, Any], at: str) -> tuple[Header, ...]:
        found = []
        for index, item in enumerate(self.get(parent, "headers", at, list)):
            where = f"{at}.headers[{index}]"
            if isinstance(item, dict):
                name = self.get(item, "name", where, str)
                value = self.get(item, "value", where, str)
            elif isinstance(item, list) and len(item) == 2:
                name, value = str(item[0]), str(item[1])
            else:
                raise FormatError(self.path, f"{self.at}{where}", "expected {name, value}")
            # HTTP/2 pseudo-headers (Chrome writes them) are not header lines.
            if not name.startswith(":"):
                found.append((_bytes(name), _bytes(value)))
        return tuple(found)

    def content(self, parent: Mapping[str, Any], name: str, at: str) -> bytes:
        if name not in parent:
            return b""
        content = self.get(parent, name, at, dict)
        where = f"{at}.{name}"
        text = content.get("text", "")
        if not isinstance(text, str):
            raise FormatError(self.path, f"{self.at}{where}.text", "expected a string")
        if "base64" in (content.get("encoding"), content.get("_encoding")):
            try:
                return base64.b64decode(text, validate=True)
            except ValueError:
                raise FormatError(self.path, f"{self.at}{where}.text", "not base64") from None
        return text.encode("utf-8", "surrogateescape")

    def captured(self) -> tuple[Captured, bool]:
        """The exchange, and whether the file gave its chunk times."""
        entry = self.entry
        request = self.get(entry, "request", "", dict)
        url = self.get(request, "url", ".request", str)
        split = urlsplit(url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise FormatError(self.path, f"{self.at}.request.url", f"not an http(s) URL: {url}")
        started = self.get(entry, "startedDateTime", "", str)
        try:
            started_at = datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise FormatError(
                self.path, f"{self.at}.startedDateTime", "not an ISO 8601 time"
            ) from None
        total = self.get(entry, "time", "", int, float)
        found_timings = entry.get("timings")
        timings: dict[str, Any] = found_timings if isinstance(found_timings, dict) else {}
        request_headers = self.headers(request, ".request")
        body = self.content(request, "postData", ".request")
        answer = self.get(entry, "response", "", dict)
        status = self.get(answer, "status", ".response", int)
        error = entry.get("_error") or answer.get("_error")
        outcome_name = entry.get("_outcome")
        response = None
        chunks_given = isinstance(entry.get("_chunks"), list)
        if status > 0:
            headers = self.headers(answer, ".response")
            content = self.get(answer, "content", ".response", dict)
            data = self.content(answer, "content", ".response")
            if not content.get("_undecoded"):
                headers = _decoded_headers(headers, len(data))
            wait = timings.get("wait", -1)
            first = (
                wait / 1000
                if isinstance(wait, int | float) and not isinstance(wait, bool) and wait >= 0
                else None
            )
            if chunks_given:
                chunks = tuple(Chunk(int(o), float(a)) for o, a in entry["_chunks"])
            else:
                chunks = (Chunk(0, 0.0),) if data else ()
            response = RecordedResponse(
                status=status,
                reason=str(answer.get("statusText", "")),
                http_version=_version(answer.get("httpVersion")),
                headers=headers,
                body=data,
                chunks=chunks,
                first_byte_at=first if chunks_given else (0.0 if data else None),
            )
        if outcome_name in set(Outcome):
            outcome = Outcome(outcome_name)
        else:
            outcome = Outcome.COMPLETE if response is not None else Outcome.FAILED
        context = entry.get("_context")
        return (
            Captured(
                method=self.get(request, "method", ".request", str),
                scheme=split.scheme,
                host=split.hostname,
                port=split.port or (443 if split.scheme == "https" else 80),
                path=(split.path or "/") + (f"?{split.query}" if split.query else ""),
                http_version=_version(request.get("httpVersion")),
                request_headers=request_headers,
                request_body=body,
                started_at=started_at,
                duration=total / 1000 if total >= 0 else None,
                response=response,
                outcome=outcome,
                error=str(error) if error else None,
                context=dict(context) if isinstance(context, dict) else {},
                messages=self._messages(started_at),
            ),
            chunks_given,
        )

    def _messages(self, started_at: float) -> tuple[Message, ...] | None:
        found = self.entry.get("_webSocketMessages")
        if not isinstance(found, list):
            return None
        messages = []
        for index, item in enumerate(found):
            where = f"._webSocketMessages[{index}]"
            if not isinstance(item, dict):
                raise FormatError(self.path, f"{self.at}{where}", "expected an object")
            message = item
            text = self.get(message, "opcode", where, int) == 1
            data = self.get(message, "data", where, str)
            at = self.get(message, "time", where, int, float)
            messages.append(
                Message(
                    from_client=message.get("type") == "send",
                    text=text,
                    at=max(0.0, at - started_at),
                    data=data.encode("utf-8") if text else base64.b64decode(data),
                )
            )
        return tuple(messages)


def _bytes(text: str) -> bytes:
    """A header as bytes: latin-1 where it fits (how headers are written out), else UTF-8."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _decoded_headers(headers: tuple[Header, ...], size: int) -> tuple[Header, ...]:
    """The headers of a body stored decoded: where a Content-Encoding is dropped, the
    Content-Length becomes the decoded body's (a length that differs otherwise is what
    the answer said, such as one cut off, and is kept)."""
    if not any(name.lower() == b"content-encoding" for name, _ in headers):
        return headers
    kept = []
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-encoding":
            continue
        if lowered == b"content-length":
            value = str(size).encode()
        kept.append((name, value))
    return tuple(kept)


def _version(found: object) -> str:
    text = str(found or "HTTP/1.1")
    return {"http/2.0": "HTTP/2", "h2": "HTTP/2", "h3": "HTTP/3", "": "HTTP/1.1"}.get(
        text.lower(), text.upper() if text.lower().startswith("http/") else "HTTP/1.1"
    )


_UNREADABLE = (ValueError, TypeError, OverflowError, KeyError, IndexError, AttributeError)
"""What a field of the wrong kind or size raises deep in an entry (a number too large for a
float, a lone surrogate in a header, base64 that is not): one line naming the entry."""


def read_har(path: Path, keeper: Keeper, notes: list[str]) -> Iterator[Imported]:
    """The entries of a HAR file as records to import; what the file lacks is added to
    ``notes``, one line per kind, once the entries are read. The file is parsed whole
    (HAR is one JSON document)."""
    try:
        with open(path, "rb") as source:
            document = boundedjson.loads(source.read())
    except ValueError as exc:
        raise FormatError(path, "$", f"not JSON: {exc}") from None
    log = document.get("log") if isinstance(document, dict) else None
    if not isinstance(log, dict):
        raise FormatError(path, "$.log", "missing: not a HAR file")
    entries = log.get("entries")
    if not isinstance(entries, list):
        raise FormatError(path, "$.log.entries", "expected an array")
    return _imported(path, entries, keeper, notes)


def _imported(
    path: Path, entries: list[Any], keeper: Keeper, notes: list[str]
) -> Iterator[Imported]:
    untimed = uncontexted = 0
    for index, entry in enumerate(entries):
        try:
            captured, timed = _Entry(path, index, entry).captured()
            imported = keeper.imported(captured)
        except FormatError:
            raise
        except _UNREADABLE as exc:
            raise FormatError(
                path,
                f"$.log.entries[{index}]",
                f"not an entry freezeframe reads ({type(exc).__name__}: {exc})",
            ) from None
        untimed += not timed
        uncontexted += not captured.context
        yield imported
    if untimed:
        notes.append(
            f"{untimed} of {len(entries)} entries have no chunk timing: they replay at once"
        )
    if uncontexted:
        notes.append(f"{uncontexted} of {len(entries)} entries have no run context")
