"""AWS event streams: what freezeframe encodes, botocore (which checks both CRCs) reads, and
what Bedrock sends, freezeframe reads back, its padding left out."""

from __future__ import annotations

import base64
import json

from botocore.eventstream import EventStreamBuffer
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import eventstream

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)


@given(st.lists(st.tuples(NAMES, st.binary(max_size=300)), min_size=1, max_size=5))
def test_what_is_encoded_botocore_reads_and_so_does_decode(events: list[tuple[str, bytes]]) -> None:
    data = b"".join(eventstream.event(kind, payload) for kind, payload in events)
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    read = [(m.headers[":event-type"], m.payload) for m in buffer]
    assert read == events
    decoded = eventstream.decode(data)
    assert decoded.damage is None
    assert [(m.event_type, m.payload) for m in decoded.messages] == events


def test_damage_stops_the_reading_and_says_where() -> None:
    data = eventstream.event("messageStart", b'{"role":"assistant"}') * 2
    flipped = bytearray(data)
    flipped[len(data) // 2 + 30] ^= 1
    found = eventstream.decode(bytes(flipped))
    assert len(found.messages) == 1 and found.damage == "message 2: CRC mismatch"
    cut = eventstream.decode(data[:-5])
    assert len(cut.messages) == 1 and cut.damage == "cut off in message 2"
    assert eventstream.decode(b"\x00" * 20).damage == "message 1: prelude CRC mismatch"


def test_bedrock_events_read_as_boto3_gives_them() -> None:
    chunk = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}}
    data = b"".join(
        [
            eventstream.event(
                "contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abc"}'
            ),
            eventstream.event(
                "chunk",
                json.dumps(
                    {"bytes": base64.b64encode(json.dumps(chunk).encode()).decode(), "p": "xy"}
                ).encode(),
            ),
            eventstream.exception("throttlingException", b'{"message":"Too many requests"}'),
        ]
    )
    events, damage = eventstream.json_events(data)
    assert damage is None
    assert events == [
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}},
        chunk,
        {"type": "error", "error": {"type": "throttlingException", "message": "Too many requests"}},
    ]


def test_a_long_stream_s_ends_are_found_by_lengths_alone() -> None:
    """The facts of a 10,000-event answer are read from its first and last events, which
    are found without decoding the rest; a short stream is kept whole."""
    events = [eventstream.event("contentBlockDelta", b'{"n":%d}' % n) for n in range(10_000)]
    data = b"".join(events)
    kept = eventstream.decode(eventstream.ends(data, 2, 3))
    assert kept.damage is None
    assert [m.payload for m in kept.messages] == [b'{"n":%d}' % n for n in (0, 1, 9997, 9998, 9999)]
    short = b"".join(events[:5])
    assert eventstream.ends(short, 2, 3) == short
