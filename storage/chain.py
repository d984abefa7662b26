"""The tamper-evident hash chain of a cassette, as pure functions.

Each exchange stores ``link(previous link, exchange_digest(its stored fields))``;
the first exchange of a cassette links to GENESIS. Bodies enter the digest through
their blake3 digests, so a body changed in place, a field edited, or a row deleted
or moved all make the re-computed chain differ from the stored one from that
exchange on. This catches accidents and casual edits, not someone who rewrites the
whole chain: it is evidence, not a signature.
"""

import json
from collections.abc import Mapping

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
    items = [[name, _tagged(value)] for name, value in sorted(fields.items())]
    text = json.dumps([_FORMAT, items], ensure_ascii=True, separators=(",", ":"))
    return blake3.blake3(text.encode("ascii")).hexdigest()


def link(previous: str, digest: str) -> str:
    """The chain value of an exchange, given its predecessor's and its own digest."""
    return blake3.blake3(f"{previous}\n{digest}".encode("ascii")).hexdigest()


def _tagged(value: Scalar) -> list[str | None]:
    match value:
        case None:
            return [None]
        case int():
            return ["i", str(value)]
        case float():
            return ["f", value.hex()]
        case str():
            return ["s", value]
        case bytes():
            return ["b", value.hex()]
    raise TypeError(f"a stored field cannot be a {type(value).__name__}")
