"""One owner for a body in flight, request or answer, from its first byte to the store.

A body used to pass through several hands on its way to the store: a compressed request was
decoded twice and redacted three times, a large upload was redacted in 1 MiB blocks and a
large answer per network chunk (so a secret split across two chunks was stored). Now every
body the proxy records goes through a ``Body``, for requests and answers alike:

* the tee (addons.record's for an answer or a streamed upload, the re-enactor reading a
  routed upload) hands each chunk on unchanged and feeds it here;
* the body is held while it is small; past ``hold`` bytes it spills to a blob writer as it
  arrives (storage.spool), so a body of any size costs the proxy the same memory;
* it is redacted once, in fixed blocks (``Blocks``) the same way in both directions, with
  enough overlap that a secret is found wherever the network or the blocks cut it;
* when it has ended, a held body is decoded once (its content codings undone, bounded by
  HELD_DECODED) and redacted decoded, and it lands: ``Landed`` is what the store keeps and
  what the request's key and the answer's facts are read from.

A body stored as it crossed the wire keeps its content coding, so replay sends the very
bytes a client received. Only when its decoded content held a secret is the redacted content
encoded again and stored in its place (no longer byte-exact, which the log says). A body
that does not decode whole (cut off, an unknown coding, or a compression bomb that decodes
past HELD_DECODED) is redacted and stored as sent; so is a spilled one, which is never held
whole to decode.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from freezeframe.storage.encodings import (
    HELD_DECODED,
    Decoded,
    Encoder,
    StreamDecoder,
    content_codings,
    decode,
    encode,
    encode_start,
)
from freezeframe.storage.errors import StoreError
from freezeframe.storage.recording import BlobWriter
from freezeframe.storage.records import BlobRef, Header
from freezeframe.storage.redaction import Redactor

log = logging.getLogger("freezeframe.record")

#: A body above this size is never held whole: it spills to the store as it arrives.
LARGE_BODY = 8 * 1024 * 1024
#: A body is redacted in blocks of this size at fixed offsets, so what is stored (and a
#: large request's key) never depends on how the network happened to cut it into chunks.
BLOCK = 1024 * 1024
#: Each block is redacted with this much of the body on either side of it, so a secret of
#: up to this many bytes is found wherever it falls, across chunks and blocks alike.
REACH = 64 * 1024
#: The most content a compressed body that spills is scanned for: past it, a bomb's content
#: is not read (what it held before is, and the body is stored as far as it was read).
SPILLED_DECODED = 256 * 1024 * 1024
#: A held piece smaller than this is copied into a buffer rather than kept as an object of
#: its own; the buffer joins the held pieces once it holds ``GATHERED`` bytes.
SMALL_PIECE = 4096
GATHERED = 64 * 1024


class Blocks:
    """Redacts a body as it streams, at fixed offsets whatever its chunks.

    Block k (bytes k*BLOCK to (k+1)*BLOCK) is redacted once REACH bytes past its end have
    arrived, together with REACH bytes before and after it, and only the block itself is
    passed on: a secret that straddles a boundary lies whole inside the window of each
    block it touches. Redaction keeps lengths, so the block's bytes are where they were.
    Holds at most BLOCK + 2 * REACH bytes plus one chunk. A body of at most BLOCK + REACH
    bytes is redacted whole, in one window, as ``redacted`` redacts a held one.
    """

    __slots__ = ("_redact", "_out", "_raw", "_lead")

    def __init__(self, redact: Callable[[bytes], bytes], out: Callable[[bytes], None]) -> None:
        self._redact = redact
        self._out = out
        self._raw = bytearray()  # not yet passed on, after ``_lead`` bytes of context
        self._lead = 0

    def feed(self, data: bytes) -> None:
        self._raw += data
        while len(self._raw) >= self._lead + BLOCK + REACH:
            end = self._lead + BLOCK
            with memoryview(self._raw) as raw:
                window = self._redact(bytes(raw[: end + REACH]))
            self._out(window[self._lead : end])
            del self._raw[: end - REACH]
            self._lead = REACH

    def end(self) -> None:
        if len(self._raw) > self._lead:
            self._out(self._redact(bytes(self._raw))[self._lead :])
        self._raw = bytearray()


def redacted(redact: Callable[[bytes], bytes], data: bytes) -> bytes:
    """A held body redacted exactly as ``Blocks`` redacts it streamed."""
    if len(data) <= BLOCK + REACH:
        return redact(data)
    pieces: list[bytes] = []
    blocks = Blocks(redact, pieces.append)
    blocks.feed(data)
    blocks.end()
    return b"".join(pieces)


@dataclass(frozen=True, slots=True)
class Landed:
    """A body as it reaches the store, and what its key and facts are read from."""

    size: int
    """Bytes that crossed the wire."""
    stored: bytes
    """As stored: redacted, still content-encoded; b"" when it spilled (see ``ref``)."""
    ref: BlobRef | None
    """The spilled body in the store; None when held, or when the store could not keep it."""
    decoded: Decoded | None
    """Its content, decoded and redacted (whole, or why not); None when it spilled."""
    reencoded: bool = False
    """Its decoded content held a secret, so ``stored`` was encoded again: not byte-exact."""
    secrets: tuple[bytes, ...] = ()
    """The raw secrets it held by name (``Redactor.body``'s ``found``), longest first: a
    request's are scrubbed from its answer as its headers' are (see ``FlowInfo.landed``)."""

    @property
    def keyed(self) -> bytes:
        """What a request's key reads: the decoded content, or the body as stored when it
        does not decode whole."""
        decoded = self.decoded
        return decoded.data if decoded is not None and decoded.whole else self.stored

    def headers(self, headers: Sequence[Header]) -> tuple[Header, ...]:
        """``headers`` as they go with the stored body: a re-encoded one gets its length."""
        if not self.reencoded:
            return tuple(headers)
        size = self.ref.size if self.ref is not None else len(self.stored)
        length = str(size).encode("ascii")
        return tuple(
            (name, length) if name.lower() == b"content-length" else (name, value)
            for name, value in headers
        )


class Body:
    """One body in flight; see the module's docstring.

    ``headers`` are its message's (for its content codings). ``hold`` is how much is held
    before it spills to a writer from ``spill`` (None: never, for a body mitmproxy holds
    already); ``spill_now`` spills from the first byte (a Content-Length says it is large).
    Once it spills, ``blocks`` (if given) is handed each redacted block as it is written,
    which is how a streamed request's key is read without holding it.
    """

    __slots__ = (
        "_redact",
        "_codings",
        "_hold",
        "_spill",
        "_also",
        "_what",
        "_held",
        "_small",
        "_blocks",
        "_writer",
        "_rescan",
        "_landed",
        "_found",
        "size",
    )

    def __init__(
        self,
        redactor: Redactor,
        secrets: Sequence[bytes],
        headers: Sequence[Header] = (),
        *,
        hold: int | None = LARGE_BODY,
        spill: Callable[[], BlobWriter] | None = None,
        spill_now: bool = False,
        blocks: Callable[[bytes], None] | None = None,
        what: str = "body",
        whole_secret: tuple[str, str] | None = None,
    ) -> None:
        known = tuple(secrets)
        self._found: set[bytes] = set()
        self._redact: Callable[[bytes], bytes] = lambda data: redactor.body(
            data, known, self._found
        )
        if whole_secret is not None and redactor.is_secret_answer(*whole_secret):
            # The answer is itself a credential (IMDSv2's token): its marker is of the whole of
            # it, as the header that sends it back gets; a scan for names and shapes inside it
            # first would fingerprint something else (its "==" read as a form field).
            method, target = whole_secret
            self._redact = lambda data: redactor.answer(method, target, data)
        self._codings = content_codings(headers)
        self._hold = hold
        self._spill = spill
        self._also = blocks
        self._what = what
        self._held: list[bytes] = []
        # Small pieces (an answer in 1-byte chunks) gather here before joining ``_held``: an
        # object per piece cost a 1 MB answer 1,048,576 of them, held until it landed.
        self._small = bytearray()
        self._blocks: Blocks | None = None
        self._writer: BlobWriter | None = None
        self._rescan: _Rescan | None = None
        self._landed: Landed | None = None
        self.size = 0
        if spill_now:
            self._go_spill()

    @property
    def spilled(self) -> bool:
        return self._blocks is not None

    @property
    def held(self) -> bytes | None:
        """The body as it arrived, while it is held (None once it spilled)."""
        if self._blocks is not None:
            return None
        self._gather()
        if len(self._held) > 1:
            self._held = [b"".join(self._held)]
        return self._held[0] if self._held else b""

    def feed(self, data: bytes) -> None:
        if not data or self._landed is not None:
            return
        self.size += len(data)
        if self._blocks is not None:
            if self._rescan is not None:
                self._rescan.feed(data)
            self._blocks.feed(data)
            return
        if len(data) < SMALL_PIECE:
            self._small += data
            if len(self._small) >= GATHERED:
                self._gather()
        else:
            self._gather()
            self._held.append(data)
        if self._hold is not None and self.size > self._hold:
            self._go_spill()

    def end(self) -> Landed:
        """The body as it lands, once it has ended (or never will: as far as it came)."""
        if self._landed is None:
            landed = self._spilled() if self._blocks is not None else self._whole()
            found = tuple(sorted(self._found, key=len, reverse=True))
            self._landed = dataclasses.replace(landed, secrets=found) if found else landed
        return self._landed

    def _gather(self) -> None:
        if self._small:
            self._held.append(bytes(self._small))
            self._small.clear()

    def _go_spill(self) -> None:
        self._gather()
        self._writer = self._spill() if self._spill is not None else None
        self._blocks = Blocks(self._redact, self._out)
        if self._codings and self._spill is not None and self._writer is not None:
            self._rescan = _Rescan(self._redact, self._codings, self._spill(), self._what)
        held, self._held = self._held, []
        for data in held:
            if self._rescan is not None:
                self._rescan.feed(data)
            self._blocks.feed(data)

    def _out(self, block: bytes) -> None:
        if self._also is not None:
            self._also(block)
        if self._writer is not None:
            try:
                self._writer.write(block)
            except StoreError as exc:  # the client still gets every byte; only the copy is lost
                self._lost(exc)

    def _lost(self, exc: StoreError) -> None:
        log.error("%s not stored: %s", self._what, exc)
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def _spilled(self) -> Landed:
        assert self._blocks is not None
        self._blocks.end()
        rescan, self._rescan = self._rescan, None
        if rescan is not None and rescan.end():
            if self._writer is not None:  # the body as sent holds the secret: never stored
                self._writer.abort()
                self._writer = None
            return Landed(self.size, b"", rescan.finish(), None, True)
        ref = None
        if self._writer is not None:
            try:
                ref = self._writer.finish()
            except StoreError as exc:
                self._lost(exc)
        return Landed(self.size, b"", ref, None)

    def _whole(self) -> Landed:
        data = self.held or b""
        if not data:
            return Landed(0, b"", None, Decoded(b"", True))
        if not self._codings:
            clean = redacted(self._redact, data)
            return Landed(self.size, clean, None, Decoded(clean, True))
        found = decode(data, self._codings, HELD_DECODED)
        if not found.whole:
            return self._part(data, found)
        content = redacted(self._redact, found.data)
        if content == found.data:
            return Landed(self.size, data, None, Decoded(content, True))
        log.warning(
            "a secret inside a %s-encoded %s was redacted; it is stored re-encoded, not byte-exact",
            ", ".join(self._codings),
            self._what,
        )
        return Landed(self.size, encode(content, self._codings), None, Decoded(content, True), True)

    def _part(self, data: bytes, found: Decoded) -> Landed:
        """A body that does not decode whole: cut off, or a bomb past HELD_DECODED. What did
        decode is scanned; when it held a secret, the redacted part is stored encoded again
        as a stream that stops where the decoding stopped (still decodable, and still cut
        off, as on the wire). Otherwise, or when nothing decoded (an unknown or damaged
        coding), it is redacted and stored as sent."""
        unread = Decoded(b"", False, found.note)
        if found.data:
            content = redacted(self._redact, found.data)
            if content != found.data:
                log.warning(
                    "a secret inside a %s-encoded %s that does not decode whole (%s) was "
                    "redacted; it is stored re-encoded as far as it decoded, not byte-exact",
                    ", ".join(self._codings),
                    self._what,
                    found.note,
                )
                return Landed(self.size, encode_start(content, self._codings), None, unread, True)
        return Landed(self.size, redacted(self._redact, data), None, unread)


class _Rescan:
    """A compressed body that spills, scanned decoded as it streams, and encoded again.

    The body as sent goes to one writer (byte-exact) while its content, decoded
    (``StreamDecoder``, bounded by SPILLED_DECODED), is redacted in ``Blocks`` and encoded
    again into a second. When the content held a secret, the second is kept and the first
    thrown away (its spool never reaches the store); otherwise the other way round. A
    stream that did not decode to its end (cut off, or past the bound) is encoded again as
    far as it decoded, left open as it was on the wire.
    """

    __slots__ = (
        "found",
        "_redact",
        "_encoder",
        "_writer",
        "_blocks",
        "_decoder",
        "_what",
        "_codings",
    )

    def __init__(
        self,
        redact: Callable[[bytes], bytes],
        codings: Sequence[str],
        writer: BlobWriter,
        what: str,
    ) -> None:
        self.found = False
        self._redact = redact
        self._what = what
        self._writer: BlobWriter | None = writer
        self._encoder = Encoder(codings, fast=True)
        self._blocks = Blocks(self._scan, self._encoded)
        self._decoder = StreamDecoder(codings, self._blocks.feed, SPILLED_DECODED)
        self._codings = codings

    def _scan(self, window: bytes) -> bytes:
        clean = self._redact(window)
        if clean != window:
            self.found = True
        return clean

    def _encoded(self, block: bytes) -> None:
        self._write(self._encoder.feed(block))

    def _write(self, data: bytes) -> None:
        if data and self._writer is not None:
            try:
                self._writer.write(data)
            except StoreError as exc:
                log.error("%s not stored: %s", self._what, exc)
                self._writer.abort()
                self._writer = None

    def feed(self, data: bytes) -> None:
        self._decoder.feed(data)

    def end(self) -> bool:
        """Whether the content held a secret (the re-encoded body is then the one kept);
        when not, the re-encoded copy is thrown away."""
        if self._decoder.failed and not self.found:
            self.abort()
            return False
        self._blocks.end()
        if not self.found:
            self.abort()
            return False
        self._write(self._encoder.end(cut=not self._decoder.whole))
        log.warning(
            "a secret inside a %s-encoded %s was redacted; it is stored re-encoded%s, "
            "not byte-exact",
            ", ".join(self._codings),
            self._what,
            "" if self._decoder.whole else " as far as it decoded",
        )
        return True

    def finish(self) -> BlobRef | None:
        if self._writer is None:
            return None
        try:
            return self._writer.finish()
        except StoreError as exc:
            log.error("%s not stored: %s", self._what, exc)
            self._writer.abort()
            return None

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
