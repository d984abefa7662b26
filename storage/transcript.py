"""A WebSocket exchange's messages as one blob: a compact binary framing, versioned.

A transcript is stored like a body (compressed, named by its digest, once however
many exchanges share it), so the chain covers it through its digest. Messages are
framed in binary rather than JSON because payloads are often binary and JSON would
have to escape every byte of them::

    transcript = version frame*              version: one byte, VERSION
    frame      = flags at length data
    flags      = one byte: 0x01 sent by the client, 0x02 a text message; others 0
    at         = 8 bytes, IEEE 754 double, big-endian: seconds since the request started
    length     = the payload's size as an unsigned LEB128 varint (7 bits a byte, low first)
    data       = the payload, ``length`` bytes

An empty transcript (a WebSocket that carried no message) is the version byte alone.
A reader refuses a version it does not know, so a newer freezeframe can change the
framing without an older one misreading it.
"""

import struct
from collections.abc import Iterable

from freezeframe.storage.errors import StoreError
from freezeframe.storage.records import Message

VERSION = 1

_FROM_CLIENT = 0x01
_TEXT = 0x02
_HEAD = struct.Struct(">Bd")
_MAX_VARINT = 10
"""Bytes in the longest varint a reader accepts: enough for any 64-bit length."""


class DamagedTranscript(StoreError):
    """Stored messages that cannot be read back as a transcript."""


def encode(messages: Iterable[Message]) -> bytes:
    """The transcript of ``messages``, in their order."""
    out = bytearray([VERSION])
    for message in messages:
        flags = (_FROM_CLIENT if message.from_client else 0) | (_TEXT if message.text else 0)
        out += _HEAD.pack(flags, message.at)
        size = len(message.data)
        while size >= 0x80:
            out.append(size & 0x7F | 0x80)
            size >>= 7
        out.append(size)
        out += message.data
    return bytes(out)


def decode(transcript: bytes, name: str = "") -> tuple[Message, ...]:
    """The messages of a transcript; raises DamagedTranscript (a StoreError) naming
    ``name`` (its digest) when it is not one this version can read whole."""
    what = f"transcript {name[:16]}".rstrip()
    if not transcript:
        raise DamagedTranscript(f"{what} is empty: it has lost its version byte")
    if transcript[0] != VERSION:
        raise DamagedTranscript(
            f"{what} has format version {transcript[0]}, which this freezeframe cannot read"
        )
    view = memoryview(transcript)
    messages: list[Message] = []
    offset = 1
    end = len(transcript)
    while offset < end:
        if offset + _HEAD.size > end:
            raise DamagedTranscript(f"{what} is cut off in message {len(messages)}")
        flags, at = _HEAD.unpack_from(view, offset)
        if flags & ~(_FROM_CLIENT | _TEXT):
            raise DamagedTranscript(
                f"{what} has unknown flags {flags:#04x} on message {len(messages)}"
            )
        offset += _HEAD.size
        size, shift = 0, 0
        while True:
            if offset >= end or shift >= 7 * _MAX_VARINT:
                raise DamagedTranscript(f"{what} has no valid length for message {len(messages)}")
            byte = transcript[offset]
            offset += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if offset + size > end:
            raise DamagedTranscript(f"{what} is cut off in message {len(messages)}")
        data = bytes(view[offset : offset + size])
        offset += size
        messages.append(Message(bool(flags & _FROM_CLIENT), bool(flags & _TEXT), at, data))
    return tuple(messages)
