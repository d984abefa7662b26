"""An exchange as a portable JSON document and back, losing nothing the store holds.

The jsonl export writes these documents one a line and the bundle keeps them in its
``exchanges.jsonl``, so both read them back with the same code. Bytes become UTF-8 text
where they are valid text and base64 otherwise, each with its blake3 digest and size, so a
reader can check them; headers keep their raw bytes as latin-1 text, which maps every byte
to one code point and back. A bundle names its bodies by digest instead of carrying them
inline (``{"blake3", "size"}`` alone), and its bodies live beside the documents.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import blake3

from freezeframe.storage import (
    BlobRef,
    Chunk,
    Drift,
    Exchange,
    ForkOrigin,
    Header,
    Imported,
    Message,
    NewExchange,
    Origin,
    Outcome,
    RecordedResponse,
    Slot,
)
from freezeframe.storage.blobs import INLINE_LIMIT
from freezeframe.storage.records import check_facts

FORMAT_VERSION = 1
"""The version of the exchange document; a newer one is refused with "upgrade freezeframe"."""

MAX_BODY = 64 * 1024**3
"""The hard cap on one body an import reads (64 GiB), whatever its document claims; a body is
read up to the size it claims and no further, so a zstd bomb stops there."""
MAX_INLINE = 64 * 1024 * 1024
"""The most a canonical form or a WebSocket message, each read whole into memory, may hold."""
MAX_INTEGER = 2**63 - 1
"""The largest seq, occurrence, port or offset a store column holds (a signed 64-bit one)."""

BodyReader = Callable[[BlobRef], Iterable[bytes]]
"""Reads a body kept outside the document (a large one, or any body of a bundle)."""


class Spooled(Protocol):
    """A string too long to hold that the document names by a placeholder
    (exchange_formats.longlines): its content read back piece by piece."""

    def utf8(self) -> Iterator[bytes]: ...

    def base64(self) -> Iterator[bytes]: ...


class DocumentError(ValueError):
    """A document that is not an exchange: ``where`` in it, and ``what`` is wrong."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where = where
        self.what = what


def origin_document(origin: ForkOrigin) -> dict[str, Any]:
    """What a forked cassette was forked from, as an export's header or manifest says it."""
    return {"cassette": origin.cassette, "upto": origin.upto, "head": origin.head}


def read_origin(found: object) -> ForkOrigin | None:
    """An origin document back as the record; None for null. Raises DocumentError."""
    if found is None:
        return None
    if (
        not isinstance(found, dict)
        or not isinstance(found.get("cassette"), str)
        or not isinstance(found.get("head"), str)
        or not isinstance(found.get("upto"), int | type(None))
    ):
        raise DocumentError("$.origin", "expected {cassette, upto, head}")
    return ForkOrigin(found["cassette"], found["upto"], found["head"])


def bytes_document(data: bytes) -> dict[str, Any]:
    """Bytes as text (or base64), with the blake3 and size a reader checks them by."""
    document: dict[str, Any] = {"blake3": blake3.blake3(data).hexdigest(), "size": len(data)}
    try:
        document["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        document["base64"] = base64.b64encode(data).decode("ascii")
    return document


def ref_document(ref: BlobRef) -> dict[str, Any]:
    """A body named by digest and size only: its bytes are kept elsewhere."""
    return {"blake3": ref.digest, "size": ref.size}


def exchange_document(
    exchange: Exchange, body: Callable[[bytes, BlobRef | None], dict[str, Any]]
) -> dict[str, Any]:
    """Every field of ``exchange``; ``body`` makes the document of the request's and the
    response's body (from its bytes, or the reference of one the store keeps out of memory).
    The canonical form and WebSocket messages are always held inline."""
    recorded = exchange.recorded
    response = recorded.response
    return {
        "seq": exchange.seq,
        "occurrence": recorded.slot.occurrence,
        "key": recorded.key,
        "key_scheme": recorded.key_scheme,
        "canonical": bytes_document(recorded.canonical),
        "request": {
            "method": recorded.method,
            "scheme": recorded.scheme,
            "host": recorded.host,
            "port": recorded.port,
            "path": recorded.path,
            "http_version": recorded.http_version,
            "headers": _headers(recorded.request_headers),
            "body": body(recorded.request_body, recorded.request_body_ref),
        },
        "started_at": recorded.started_at,
        "duration": recorded.duration,
        "response": None
        if response is None
        else {
            "status": response.status,
            "reason": response.reason,
            "http_version": response.http_version,
            "headers": _headers(response.headers),
            "trailers": _headers(response.trailers),
            "body": body(response.body, response.body_ref),
            "chunks": [[chunk.offset, chunk.at] for chunk in response.chunks],
            "first_byte_at": response.first_byte_at,
        },
        "outcome": recorded.outcome.value,
        "error": recorded.error,
        "context": dict(recorded.context),
        "stripped": None if recorded.stripped is None else dict(recorded.stripped),
        "metadata": {name: _plain(value) for name, value in recorded.facts.items()},
        "messages": None
        if recorded.messages is None
        else [
            {
                "from_client": message.from_client,
                "text": message.text,
                "at": message.at,
                "data": bytes_document(message.data),
            }
            for message in recorded.messages
        ],
        "drift": [
            {"at": note.at, "paths": list(note.paths), "context": dict(note.context)}
            for note in exchange.drift
        ],
        "origin": None
        if recorded.origin is None
        else {
            "kind": recorded.origin.kind,
            "cassette": recorded.origin.cassette,
            "seq": recorded.origin.seq,
            "chain": recorded.origin.chain,
            "changes": list(recorded.origin.changes),
        },
        "chain": exchange.chain,
    }


def _plain(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def _headers(fields: Sequence[Header]) -> list[list[str]]:
    return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in fields]


class Reading:
    """Reads one exchange document into the record the store imports, naming the first
    field that is missing or of the wrong kind."""

    def __init__(
        self,
        document: object,
        where: str,
        bodies: BodyReader | None,
        spooled: Mapping[str, Spooled] | None = None,
        locate: Callable[[DocumentError], Exception] = lambda error: error,
    ) -> None:
        self.where = where
        self._bodies = bodies
        self._spooled = spooled or {}
        self._locate = locate
        """Makes the error a spooled string's reader raises name its file and line."""
        self._streams: list[tuple[BlobRef, Callable[[], Iterable[bytes]]]] = []
        self.document = self.object(document, "")

    def fail(self, path: str, what: str) -> DocumentError:
        return DocumentError(f"{self.where}{path}", what)

    def object(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, found {kind_of(value)}")
        return value

    def get(self, parent: Mapping[str, Any], name: str, path: str, *kinds: type) -> Any:
        if name not in parent:
            raise self.fail(f"{path}.{name}", "missing")
        value = parent[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(KIND_NAMES[kind] for kind in kinds)
            raise self.fail(f"{path}.{name}", f"expected {wanted}, found {kind_of(value)}")
        return value

    def integer(self, parent: Mapping[str, Any], name: str, path: str) -> int:
        """A whole number a store column can hold: 0 up to MAX_INTEGER."""
        value: int = self.get(parent, name, path, int)
        return self.in_range(value, f"{path}.{name}")

    def in_range(self, value: int, at: str) -> int:
        if not 0 <= value <= MAX_INTEGER:
            raise self.fail(at, f"{value} is out of range (0 to 2^63-1)")
        return value

    def number(self, parent: Mapping[str, Any], name: str, path: str) -> float:
        return self._float(self.get(parent, name, path, int, float), f"{path}.{name}")

    def maybe_number(self, parent: Mapping[str, Any], name: str, path: str) -> float | None:
        value = self.get(parent, name, path, int, float, type(None))
        return None if value is None else self._float(value, f"{path}.{name}")

    def _float(self, value: int | float, at: str) -> float:
        try:
            found = float(value)
        except OverflowError:
            found = math.inf
        if not math.isfinite(found):
            raise self.fail(at, "out of range for a number of seconds")
        return found

    def headers(self, parent: Mapping[str, Any], name: str, path: str) -> tuple[Header, ...]:
        found = []
        for index, pair in enumerate(self.get(parent, name, path, list)):
            at = f"{path}.{name}[{index}]"
            if not (
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
            ):
                raise self.fail(at, "expected a [name, value] pair of strings")
            try:
                found.append((pair[0].encode("latin-1"), pair[1].encode("latin-1")))
            except UnicodeEncodeError:
                raise self.fail(at, "a header holds a character beyond latin-1") from None
        return tuple(found)

    def text_map(self, parent: Mapping[str, Any], name: str, path: str) -> dict[str, str]:
        value = self.get(parent, name, path, dict)
        if not all(isinstance(v, str) for v in value.values()):
            raise self.fail(f"{path}.{name}", "expected an object of strings")
        return dict(value)

    def body(
        self, parent: Mapping[str, Any], name: str, path: str, *, inline: bool = False
    ) -> tuple[bytes, BlobRef | None]:
        """The bytes of a body document, checked against its digest, or (a body kept outside
        the document that is too large to hold) a reference to stream it in by."""
        at = f"{path}.{name}"
        document = self.get(parent, name, path, dict)
        digest = self.get(document, "blake3", at, str)
        size = self.get(document, "size", at, int)
        cap = MAX_INLINE if inline else MAX_BODY
        if not 0 <= size <= cap:
            raise self.fail(f"{at}.size", f"{size} bytes is out of range (0 to {cap:,})")
        spooled = self._spooled_reader(document, at)
        if spooled is not None:
            ref = BlobRef(digest, size)
            if not inline and size > INLINE_LIMIT:
                self._streams.append((ref, spooled))
                return b"", ref
            data = b"".join(at_most(spooled(), size))
        elif "text" in document:
            data = self.get(document, "text", at, str).encode("utf-8", "surrogatepass")
        elif "base64" in document:
            try:
                data = base64.b64decode(self.get(document, "base64", at, str), validate=True)
            except ValueError:
                raise self.fail(f"{at}.base64", "not valid base64") from None
        elif self._bodies is not None:
            ref = BlobRef(digest, size)
            if not inline and size > INLINE_LIMIT:
                reader = self._bodies
                self._streams.append((ref, lambda: at_most(reader(ref), ref.size)))
                return b"", ref
            try:
                data = b"".join(at_most(self._bodies(ref), size))
            except ValueError as exc:
                if hasattr(exc, "where"):  # the reader's own error, naming its file
                    raise
                raise self.fail(at, str(exc)) from None
        else:
            raise self.fail(at, "holds neither text nor base64")
        if len(data) != size or blake3.blake3(data).hexdigest() != digest:
            raise self.fail(at, "its bytes do not match its blake3 digest and size")
        return data, None

    def _spooled_reader(
        self, document: Mapping[str, Any], at: str
    ) -> Callable[[], Iterator[bytes]] | None:
        """The reader of a body whose text or base64 was spooled, if it was."""
        for kind in ("text", "base64"):
            value = document.get(kind)
            if isinstance(value, str) and value in self._spooled:
                spool = self._spooled[value]
                pieces = spool.utf8 if kind == "text" else spool.base64
                bounded = functools.partial(_bounded, pieces, int(document["size"]))
                return _located(bounded, f"{self.where}{at}.{kind}", self._locate)
        return None

    def imported(self, cassette: str) -> Imported:
        """The exchange to import into ``cassette``."""
        d = self.document
        seq = self.integer(d, "seq", "")
        occurrence = self.integer(d, "occurrence", "")
        request = self.get(d, "request", "", dict)
        request_body, request_ref = self.body(request, "body", ".request")
        canonical, _ = self.body(d, "canonical", "", inline=True)
        response = None
        if (answer := self.get(d, "response", "", dict, type(None))) is not None:
            at = ".response"
            body, body_ref = self.body(answer, "body", at)
            chunks = []
            for index, pair in enumerate(self.get(answer, "chunks", at, list)):
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise self.fail(f"{at}.chunks[{index}]", "expected [offset, seconds]")
                chunks.append(self._chunk(pair, f"{at}.chunks[{index}]"))
            response = RecordedResponse(
                status=self.get(answer, "status", at, int),
                reason=self.get(answer, "reason", at, str),
                http_version=self.get(answer, "http_version", at, str),
                headers=self.headers(answer, "headers", at),
                body=body,
                chunks=tuple(chunks),
                first_byte_at=self.maybe_number(answer, "first_byte_at", at),
                trailers=self.headers(answer, "trailers", at),
                body_ref=body_ref,
            )
        outcome = self.get(d, "outcome", "", str)
        if outcome not in set(Outcome):
            raise self.fail(".outcome", f"{outcome!r} is no outcome")
        stripped = self.get(d, "stripped", "", dict, type(None))
        facts = dict(self.get(d, "metadata", "", dict))
        try:
            check_facts(facts)
        except ValueError as exc:
            raise self.fail(".metadata", str(exc)) from None
        exchange = NewExchange(
            cassette=cassette,
            key=self.get(d, "key", "", str),
            key_scheme=self.integer(d, "key_scheme", ""),
            canonical=canonical,
            method=self.get(request, "method", ".request", str),
            scheme=self.get(request, "scheme", ".request", str),
            host=self.get(request, "host", ".request", str),
            port=self.integer(request, "port", ".request"),
            path=self.get(request, "path", ".request", str),
            http_version=self.get(request, "http_version", ".request", str),
            request_headers=self.headers(request, "headers", ".request"),
            request_body=request_body,
            started_at=self.number(d, "started_at", ""),
            duration=self.maybe_number(d, "duration", ""),
            response=response,
            outcome=Outcome(outcome),
            error=self.get(d, "error", "", str, type(None)),
            context=self.text_map(d, "context", ""),
            slot=Slot(seq, occurrence),
            request_body_ref=request_ref,
            stripped={} if stripped is None else self.text_map(d, "stripped", ""),
            facts=facts,
            messages=self._messages(d),
            origin=self._origin(d),
        )
        return Imported(exchange, self._drift(d), tuple(self._streams))

    def _chunk(self, pair: list[Any], at: str) -> Chunk:
        offset, seconds = pair
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise self.fail(at, "expected [offset, seconds]")
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            raise self.fail(at, "expected [offset, seconds]")
        return Chunk(self.in_range(offset, at), self._float(seconds, at))

    def _messages(self, d: Mapping[str, Any]) -> tuple[Message, ...] | None:
        found = self.get(d, "messages", "", list, type(None))
        if found is None:
            return None
        messages = []
        for index, item in enumerate(found):
            at = f".messages[{index}]"
            message = self.object(item, at)
            data, _ = self.body(message, "data", at, inline=True)
            messages.append(
                Message(
                    from_client=self.get(message, "from_client", at, bool),
                    text=self.get(message, "text", at, bool),
                    at=self.number(message, "at", at),
                    data=data,
                )
            )
        return tuple(messages)

    def _drift(self, d: Mapping[str, Any]) -> tuple[Drift, ...]:
        notes = []
        for index, item in enumerate(self.get(d, "drift", "", list)):
            at = f".drift[{index}]"
            note = self.object(item, at)
            paths = self.get(note, "paths", at, list)
            notes.append(
                Drift(
                    at=self.number(note, "at", at),
                    paths=tuple(str(path) for path in paths),
                    context=self.text_map(note, "context", at),
                )
            )
        return tuple(notes)

    def _origin(self, d: Mapping[str, Any]) -> Origin | None:
        found = self.get(d, "origin", "", dict, type(None))
        if found is None:
            return None
        at = ".origin"
        return Origin(
            kind=self.get(found, "kind", at, str),
            cassette=self.get(found, "cassette", at, str),
            seq=self.integer(found, "seq", at),
            chain=self.get(found, "chain", at, str),
            changes=tuple(str(change) for change in self.get(found, "changes", at, list)),
        )


def at_most(pieces: Iterable[bytes], size: int) -> Iterator[bytes]:
    """``pieces`` up to ``size`` bytes; ValueError as soon as they run past it, so a body
    whose compressed form unpacks to far more than it claims is never read further."""
    left = size
    for piece in pieces:
        if len(piece) > left:
            raise ValueError(f"holds more than the {size:,} bytes its size says")
        left -= len(piece)
        yield piece


def _bounded(pieces: Callable[[], Iterator[bytes]], size: int) -> Iterator[bytes]:
    return at_most(pieces(), size)


def _located(
    pieces: Callable[[], Iterator[bytes]],
    where: str,
    locate: Callable[[DocumentError], Exception],
) -> Callable[[], Iterator[bytes]]:
    """``pieces``, with a ValueError it raises made to name ``where``."""

    def read() -> Iterator[bytes]:
        try:
            yield from pieces()
        except ValueError as exc:
            raise locate(DocumentError(where, str(exc))) from None

    return read


KIND_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "an object",
    list: "an array",
    type(None): "null",
}


def kind_of(value: object) -> str:
    """What a JSON value is, in the words an error message uses."""
    for kind, name in KIND_NAMES.items():
        if type(value) is kind:
            return name
    return type(value).__name__
