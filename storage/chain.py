"""The tamper-evident hash chain of a cassette, as pure functions.

Each exchange stores ``link(previous link, exchange_digest(its stored fields))``;
the first exchange of a cassette links to GENESIS. Bodies enter the digest through
their blake3 digests, so a body changed in place, a field edited, or a row deleted
or moved all make the re-computed chain differ from the stored one from that
exchange on. This catches accidents and casual edits, not someone who rewrites the
whole chain: it is evidence, not a signature.
"""

import binascii
import json
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii

import blake3

Scalar = str | int | float | bytes | None
"""A stored field's value, as the database holds it."""

GENESIS = "0" * 64
"""The link before a cassette's first exchange."""

_FORMAT = "freezeframe.exchange.v1"


def exchange_digest(fields: Mapping[str, Scalar]) -> str:
    """blake3 over an unambiguous serialization of every stored field of one exchange.

    Each value is tagged with its type, so 1, 1.0, "1" and b"1" all differ, and
    floats are written exactly (float.hex). Field order does not matter.
    """
    # The digested text is json.dumps([_FORMAT, [[name, tagged], ...]], ensure_ascii=True,
    # separators=(",", ":")) with tagged = [None], ["i", str(int)], ["f", float.hex()],
    # ["s", str] or ["b", bytes.hex()]. It is put together and hashed here piece by
    # piece, which costs less than json.dumps: the writer digests every exchange, and a
    # canonical form's hex is tens of kilobytes that need no escaping.
    # tests/storage/test_chain.py holds the two to the same digest.
    hasher = blake3.blake3()
    pieces = [_PREFIX]
    first = True
    for name, value in sorted(fields.items()):
        pieces.append(_START if first else _NEXT)
        first = False
        pieces.append(encode_basestring_ascii(name))
        if isinstance(value, bytes):
            pieces.append(_BYTES)
            hasher.update("".join(pieces).encode("ascii"))
            hasher.update(binascii.hexlify(value))
            pieces = [_BYTES_END]
        else:
            pieces.append(_tagged_json(value))
    pieces.append(_END_EMPTY if first else _END)
    hasher.update("".join(pieces).encode("ascii"))
    return hasher.hexdigest()


def link(previous: str, digest: str) -> str:
    """The chain value of an exchange, given its predecessor's and its own digest."""
    return blake3.blake3(f"{previous}\n{digest}".encode("ascii")).hexdigest()


_PREFIX = "[" + json.dumps(_FORMAT) + ",["
_START = "["
_NEXT = "],["
_END = "]]]"
_END_EMPTY = "]]"
_BYTES = ',["b","'
_BYTES_END = '"]'


def _tagged_json(value: Scalar) -> str:
    """A field's tagged value as JSON, after the comma that follows its name."""
    match value:
        case None:
            return ",[null]"
        case int():
            return ',["i","' + str(value) + '"]'
        case float():
            return ',["f","' + value.hex() + '"]'
        case str():
            return ',["s",' + encode_basestring_ascii(value) + "]"
    raise TypeError(f"a stored field cannot be a {type(value).__name__}")
