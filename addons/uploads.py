"""Request bodies too large to hold: streamed, hashed and keyed as they pass.

mitmproxy buffers a request body whole before the ``request`` hook, which is where keys
are computed for every other request. A body that may be large (a Content-Length over
LARGE_BODY, or an HTTP/1 chunked body, whose size nobody knows in advance) is instead
streamed from the ``requestheaders`` hook: forwarded upstream chunk by chunk while being
hashed and spilled to the store (record), or fed to the loopback re-enactor, which hashes
it and answers from the cassette (replay). Its key is known only once it has ended.

Which key such a body gets depends on its bytes alone, never on how it was framed, so
record and replay always agree: a body of at most LARGE_BODY bytes (a small chunked one)
is keyed exactly as today. A larger multipart form is read part by part as it streams,
files by digest and length, and keyed as canonicalize keys it (a client picks a fresh
boundary for every request, so its bytes never match twice). Any other larger body is
keyed as opaque bytes (digest and length of the body with secrets redacted, as
canonicalize keys any body it does not read), even if it is JSON or a URL-encoded form,
because reading those by meaning would mean holding them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from blake3 import blake3
from mitmproxy import http

from freezeframe.addons._flows import FlowInfo, canonical_of, info_of, request_view
from freezeframe.canonicalize import BodyDigest, Canonical, FormPart, KeyConfig, canonicalize
from freezeframe.canonicalize.multipart import (
    NotMultipart,
    parameters,
    read_multipart,
    read_part_head,
)
from freezeframe.storage import BlobRef, BlobWriter, Header
from freezeframe.storage.inflight import LARGE_BODY, Body, Landed
from freezeframe.storage.redaction import Redactor

UPLOAD_KEY = "freezeframe.upload"


@dataclass(slots=True)
class Upload:
    """A request whose body streams instead of being buffered; in ``flow.metadata``."""

    info: FlowInfo | None  # None: freezeframe refused the request (its answer is set)
    large: bool  # known to be over LARGE_BODY from its Content-Length
    routed: bool = False  # replay: sent to the re-enactor, which answers it
    origin: tuple[str, str, int] | None = None  # scheme, host, port before it was routed

    def route(self, flow: http.HTTPFlow) -> None:
        """Note where the request was going before it is routed to the re-enactor."""
        self.routed = True
        self.origin = (flow.request.scheme, flow.request.host, flow.request.port)

    def restore_origin(self, flow: http.HTTPFlow) -> None:
        """Make the flow name its real destination again, for its key and the logs (its
        connection to the re-enactor is open by now and stays as it is)."""
        if self.origin is not None:
            flow.request.scheme, flow.request.data.host, flow.request.data.port = self.origin


def upload_of(flow: http.HTTPFlow) -> Upload | None:
    upload = flow.metadata.get(UPLOAD_KEY)
    return upload if isinstance(upload, Upload) else None


def body_streams(request: http.Request) -> tuple[bool, bool]:
    """(whether this request's body must stream, whether it is known to be large).

    HTTP/2 and HTTP/3 requests without a Content-Length are not streamed: nothing in the
    ``requestheaders`` hook tells one that has a body from one that has none, and an
    HTTP/1 upstream could not be sent such a body without a length. They are buffered.
    """
    headers = request.headers
    if request.http_version.startswith("HTTP/1") and "chunked" in (
        headers.get("transfer-encoding", "").lower()
    ):
        return True, False
    try:
        length = int(headers.get("content-length", ""))
    except ValueError:
        return False, False
    return length > LARGE_BODY, length > LARGE_BODY


def begin_upload(flow: http.HTTPFlow) -> Upload | None:
    """Mark a request whose body must stream; None for other requests. Idempotent.

    The context addon has already read freezeframe's own headers (in ``requestheaders``,
    before they could go upstream); its ``FlowInfo`` is None when it refused the request.
    """
    upload = upload_of(flow)
    if upload is not None:
        return upload
    streams, large = body_streams(flow.request)
    if not streams:
        return None
    upload = Upload(info_of(flow), large)
    flow.metadata[UPLOAD_KEY] = upload
    return upload


class RequestBody:
    """A request body read as it arrives, through its ``Body`` (storage.inflight).

    Up to LARGE_BODY bytes are held (a chunked body may turn out small, and is then keyed
    as it always was). Past that, and from the start when the Content-Length says so, the
    body spills: its ``Body`` redacts it in fixed blocks and, when ``spill`` is given,
    writes it to a blob writer, and each redacted block is hashed here (and read part by
    part when it is a multipart form) for its key. At most a block, its overlap and a
    chunk are held.
    """

    __slots__ = ("_body", "_hasher", "multipart", "ended", "landed")

    def __init__(
        self,
        redactor: Redactor,
        secrets: Sequence[bytes],
        headers: Sequence[Header] = (),
        *,
        spill: Callable[[], BlobWriter] | None = None,
        large: bool = False,
    ) -> None:
        content_type = next(
            (value.decode("latin-1") for name, value in headers if name.lower() == b"content-type"),
            "",
        )
        self._hasher = blake3()
        self.multipart = MultipartReader.of(content_type)  # read once the body spills
        self._body = Body(
            redactor,
            secrets,
            headers,
            spill=spill,
            spill_now=large,
            blocks=self._take,
            what="request body",
        )
        self.ended = False
        self.landed: Landed | None = None  # once it has ended

    @property
    def size(self) -> int:
        return self._body.size

    @property
    def large(self) -> bool:
        return self._body.spilled

    @property
    def ref(self) -> BlobRef | None:
        return self.landed.ref if self.landed is not None else None

    def feed(self, data: bytes) -> None:
        if not self.ended:
            self._body.feed(data)

    def end(self) -> None:
        """The body is complete (or will never be: it is then keyed as far as it came)."""
        if self.ended:
            return
        self.ended = True
        self.landed = self._body.end()
        if self.multipart is not None and self._body.spilled:
            self.multipart.end()

    @property
    def small(self) -> bytes | None:
        """The whole body as received, if it ended at LARGE_BODY bytes or fewer."""
        return self._body.held

    @property
    def digest(self) -> str:
        """The blake3 digest of the redacted body, once it spilled."""
        return self._hasher.hexdigest()

    def _take(self, block: bytes) -> None:
        self._hasher.update(block)
        if self.multipart is not None:
            self.multipart.feed(block)


def upload_canonical(
    flow: http.HTTPFlow, info: FlowInfo, config: KeyConfig, redactor: Redactor, body: RequestBody
) -> Canonical:
    """The key of a streamed request, once its body has ended (see the comment above)."""
    if info.canonical is not None:
        return info.canonical
    assert body.landed is not None  # its callers end it first
    info.landed(body.landed)
    small = body.small
    if small is not None:
        flow.request.data.content = small  # held anyway: from here on it is like any other
        return canonical_of(flow, info, config, redactor)
    content_type = flow.request.headers.get("content-type", "")
    reader = body.multipart
    if reader is not None and reader.error is None:
        info.canonical = multipart_canonical(flow, info, config, reader)
        return info.canonical
    canonical = opaque_canonical(flow, info, config, body.digest, body.size)
    notes = []
    media_type = content_type.split(";", 1)[0].strip().lower()
    if reader is not None:
        notes.append(f"body claims a multipart form ({content_type}) but {reader.error}")
    elif media_type in ("application/json", _FORM_TYPE, _MULTIPART_TYPE) or media_type.endswith(
        "+json"
    ):
        notes.append(
            f"body of {body.size} bytes ({content_type}) is over {LARGE_BODY} bytes; "
            "keyed by its bytes"
        )
    if encoding := flow.request.headers.get("content-encoding", ""):
        notes.append(f"large body keyed by its {encoding}-encoded bytes")
    if notes:
        canonical = Canonical(
            key=canonical.key,
            form=canonical.form,
            stripped=canonical.stripped,
            body_kind=canonical.body_kind,
            warnings=canonical.warnings + tuple(notes),
            profile=canonical.profile,
        )
    info.canonical = canonical
    return canonical


_FORM_TYPE = "application/x-www-form-urlencoded"
_MULTIPART_TYPE = "multipart/form-data"
_HEAD_HELD = 64 * 1024


def opaque_canonical(
    flow: http.HTTPFlow, info: FlowInfo, config: KeyConfig, digest: str, size: int
) -> Canonical:
    """What ``canonicalize`` gives for a body it reads as opaque bytes, from the body's
    blake3 ``digest`` and ``size`` alone, without the bytes."""
    view = request_view(flow, info, b"")
    return canonicalize(view, config, body_digest=BodyDigest(digest, size))


def multipart_canonical(
    flow: http.HTTPFlow, info: FlowInfo, config: KeyConfig, reader: MultipartReader
) -> Canonical:
    """What ``canonicalize`` gives for a multipart body that ``reader`` has read as it
    streamed, from its text fields and the digests of its files.

    Equal to ``canonicalize`` on the whole body but for a text field (a part without a
    file name) that is valid UTF-8 and longer than LARGE_BODY, which is described by
    digest and length here instead of by its value.
    """
    parts = [
        replace(
            part.form,
            content=part.text if part.text is not None else BodyDigest(part.digest, part.length),
        )
        for part in reader.parts
    ]
    view = request_view(flow, info, b"")
    return canonicalize(view, config, multipart_parts=parts)


def _refusal(body: bytes, content_type: str) -> str | None:
    try:
        read_multipart(body, content_type)
    except NotMultipart as reason:
        return str(reason)
    return None


@dataclass(frozen=True, slots=True)
class _Part:
    form: FormPart  # the part as its head describes it (its content is set when keyed)
    text: bytes | None  # the content of a text field while it is small; else None
    digest: str
    length: int


class MultipartReader:
    """Reads a ``multipart/form-data`` body as it streams, part by part, the way
    ``canonicalize.multipart.read_multipart`` reads it whole: the same boundary search, the
    same rules for a part's head (each head is checked by read_multipart itself), file
    contents reduced to digest and length as they pass. Holds one head at a time, and the
    contents of text fields up to LARGE_BODY bytes in all; ``error`` says why the body is
    not a multipart form, as read_multipart would have."""

    def __init__(self, content_type: str, boundary: str) -> None:
        self.content_type = content_type
        self._boundary = boundary.encode("utf-8", "surrogatepass")
        self._delimiter = b"\r\n--" + self._boundary
        self._carry = b"\r\n"  # read_multipart reads the body after a CRLF too
        self._started = False  # a boundary has been seen (before it: the preamble)
        self._head: bytearray | None = None  # the current part's head, while it arrives
        self._form = FormPart("", b"")
        self._text: bytearray | None = None
        self._held = 0
        self._hasher = blake3()
        self._length = 0
        self.parts: list[_Part] = []
        self.closed = False  # the closing boundary has been seen
        self.error: str | None = None

    @classmethod
    def of(cls, content_type: str) -> MultipartReader | None:
        if content_type.split(";", 1)[0].strip().lower() != _MULTIPART_TYPE:
            return None
        boundary = parameters(content_type).get("boundary")
        if not boundary:
            return None
        return cls(content_type, boundary)

    def feed(self, data: bytes) -> None:
        if self.closed or self.error is not None:
            return
        buffer = self._carry + data
        start = 0
        while (found := buffer.find(self._delimiter, start)) >= 0:
            self._content(buffer[start:found])
            if self.closed or self.error is not None:
                return
            self._next_part()
            start = found + len(self._delimiter)
        # keep what could be the start of a boundary split across two calls
        cut = max(start, len(buffer) - len(self._delimiter) + 1)
        self._content(buffer[start:cut])
        self._carry = buffer[cut:]

    def end(self) -> None:
        if self.closed or self.error is not None:
            return
        self._content(self._carry)
        self._carry = b""
        if self._head is not None and not self.closed and self.error is None:
            self._read_head(final=True)
        if self.error is None and not self.closed:
            self.error = "has no closing boundary" if self._started else "never uses its boundary"

    def stand_in(self, parts: Sequence[tuple[bytes, bytes, bytes]]) -> bytes:
        """A body with this boundary and these (line, head, content) parts, closed."""
        body = bytearray(b"--" + self._boundary)
        for line, head, content in parts:
            body += line + b"\r\n" + head + b"\r\n\r\n" + content + self._delimiter
        return bytes(body + b"--")

    def _next_part(self) -> None:
        if self._started:
            if self._head is not None:
                self._read_head(final=True)
                if self.closed or self.error is not None:
                    return
            text = bytes(self._text) if self._text is not None else None
            digest, length = self._hasher.hexdigest(), self._length
            self.parts.append(_Part(self._form, text, digest, length))
        self._started = True
        self._head = bytearray()

    def _content(self, data: bytes) -> None:
        if not data or not self._started:
            return
        if self._head is None:
            self._take(data)
            return
        self._head += data
        self._read_head(final=False)
        if self._head is not None and len(self._head) > _HEAD_HELD:
            self.error = "has a part whose headers are too long to read as it streams"

    def _read_head(self, final: bool) -> None:
        """Read the current part's head once it is complete (``final``: it will not grow).

        read_multipart itself judges every head, from a stand-in body holding just that
        part, so a head is accepted or refused (and why) exactly as it would be whole.
        """
        head = self._head
        assert head is not None
        if len(head) < 2 and not final:
            return
        if head.startswith(b"--"):
            self.closed = True
            return
        newline = head.find(b"\r\n")
        end = head.find(b"\r\n\r\n", newline + 2) if newline >= 0 else -1
        if end < 0:
            if final:  # the part ended inside its head: let read_multipart say what is wrong
                whole = b"--" + self._boundary + bytes(head) + self._delimiter + b"--"
                self.error = _refusal(whole, self.content_type) or "has a part it cannot read"
            return
        line, part_head = bytes(head[:newline]), bytes(head[newline + 2 : end])
        try:
            read_multipart(self.stand_in([(line, part_head, b"\xff")]), self.content_type)
            self._form = read_part_head(part_head, b"")
        except ValueError as reason:  # NotMultipart
            self.error = str(reason)
            return
        self._text = None if self._form.filename is not None else bytearray()
        self._hasher, self._length = blake3(), 0
        self._head = None
        self._take(bytes(head[end + 4 :]))

    def _take(self, data: bytes) -> None:
        self._hasher.update(data)
        self._length += len(data)
        if self._text is not None:
            if self._held + len(data) > LARGE_BODY:
                self._text = None  # too long to keep: described by digest and length
            else:
                self._text += data
                self._held += len(data)
