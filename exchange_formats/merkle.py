"""A Merkle root over a bundle's exchanges, so one hash stands for all of them in order.

Leaves and inner nodes are hashed with different prefixes (as in RFC 6962), so no inner node
can pass for a leaf; an odd node at the end of a level is carried up as it is. The root of no
leaves is the hash of nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import blake3

_LEAF = b"\x00"
_NODE = b"\x01"


def merkle_root(leaves: Sequence[str]) -> str:
    """The root over hex digests ``leaves``, in their order."""
    level = [blake3.blake3(_LEAF + bytes.fromhex(leaf)).digest() for leaf in leaves]
    if not level:
        return blake3.blake3(b"").hexdigest()
    while len(level) > 1:
        paired = [
            blake3.blake3(_NODE + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0].hex()
