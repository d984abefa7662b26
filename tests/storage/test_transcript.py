"""WebSocket transcripts: the binary framing round-trips any messages, and damage is an error."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.storage import Message, StoreError
from freezeframe.storage.transcript import VERSION, decode, encode

messages = st.builds(
    Message,
    from_client=st.booleans(),
    text=st.booleans(),
    at=st.floats(allow_nan=False),
    data=st.binary(max_size=300),
)


@given(st.lists(messages, max_size=20))
def test_any_messages_round_trip(sent: list[Message]) -> None:
    assert decode(encode(sent)) == tuple(sent)


def test_edge_cases_round_trip() -> None:
    sent = (
        Message(from_client=True, text=True, at=0.0, data="héllo ✓".encode()),
        Message(from_client=False, text=False, at=1e-9, data=bytes(range(256)) * 9),
        Message(from_client=True, text=False, at=3600.5, data=b""),
        Message(from_client=False, text=True, at=2.25, data=b"x" * 127),
        Message(from_client=False, text=True, at=2.5, data=b"y" * 128),
        Message(from_client=True, text=False, at=7.0, data=b"\x00" * (1 << 20)),
    )
    assert decode(encode(sent)) == sent
    assert decode(encode(())) == ()


def test_the_framing_is_as_documented() -> None:
    """Version byte, then per message: flags, the time as a big-endian double, a LEB128
    length and the payload."""
    assert encode(()) == bytes([VERSION]) == b"\x01"
    assert (
        encode([Message(True, True, 0.5, b"hi")])
        == b"\x01\x03" + struct.pack(">d", 0.5) + b"\x02hi"
    )
    framed = encode([Message(False, False, 1.0, b"z" * 300)])
    assert framed[1:10] == b"\x00" + struct.pack(">d", 1.0)
    assert framed[10:12] == b"\xac\x02"  # 300 = 0b10_0101100
    assert len(framed) == 12 + 300


GOOD = encode([Message(True, True, 0.5, b"hello"), Message(False, False, 1.5, b"\x00\xff")])


@pytest.mark.parametrize(
    ("damaged", "problem"),
    [
        (b"", "is empty"),
        (b"\x02" + GOOD[1:], "format version 2"),
        (GOOD[:5], "cut off in message 0"),
        (GOOD[:-1], "cut off in message 1"),
        (GOOD[:1] + b"\x04" + GOOD[2:], "unknown flags 0x04 on message 0"),
        (b"\x01\x00" + struct.pack(">d", 0.0) + b"\xff" * 11, "no valid length for message 0"),
        (b"\x01\x00" + struct.pack(">d", 0.0), "no valid length for message 0"),
    ],
)
def test_a_damaged_transcript_is_a_store_error(damaged: bytes, problem: str) -> None:
    with pytest.raises(StoreError) as caught:
        decode(damaged, "ab" * 32)
    message = str(caught.value)
    assert message.startswith("transcript abababababababab ")
    assert problem in message
    assert "\n" not in message
