"""The kernel's refusals in a command's namespace, read back to the destination refused."""

from __future__ import annotations

import struct

from freezeframe.sandbox.namespace import _refused_tcp4, _refused_tcp6, _refused_udp4, _refused_udp6

# As seen on a raw socket in a namespace: the reset the kernel sent for a SYN to
# 198.18.0.5:443 (IPv4 header first), and the bare TCP reset from [2001:db8::1]:443.
RST_V4 = bytes.fromhex(
    "45000028000040004006aea1c6120005c612000501bb986400000000541656d750140000de940000"
)
RST_V6 = bytes.fromhex("01bb870a0000000017a35e84501400002dd50000")


def test_a_reset_answering_a_syn_names_the_destination() -> None:
    assert _refused_tcp4(RST_V4, "198.18.0.5") == ("198.18.0.5", 443)
    assert _refused_tcp6(RST_V6, "2001:db8::1") == ("2001:db8::1", 443)


def test_a_reset_of_an_established_connection_is_no_refusal() -> None:
    aborted = bytearray(RST_V6)
    aborted[4:8] = struct.pack("!I", 12345)  # a real sequence number: not an answer to a SYN
    assert _refused_tcp6(bytes(aborted), "2001:db8::1") is None
    assert _refused_tcp4(b"", "198.18.0.5") is None


def test_a_port_unreachable_names_the_datagram_s_destination() -> None:
    inner = bytes.fromhex("4500001d000040004011000ac6120009c6120009") + struct.pack(
        "!HH", 50000, 443
    )
    icmp4 = bytes([3, 3, 0, 0, 0, 0, 0, 0]) + inner
    outer = bytes.fromhex("45c0003900000000400100007f0000017f000001")
    assert _refused_udp4(outer + icmp4, "127.0.0.1") == ("198.18.0.9", 443)
    echo = bytes([0, 0, 0, 0, 0, 0, 0, 0]) + inner
    assert _refused_udp4(outer + echo, "127.0.0.1") is None

    header6 = (
        bytes(6) + bytes([17]) + bytes(1) + bytes(16) + bytes.fromhex("20010db8" + "00" * 11 + "01")
    )
    icmp6 = bytes([1, 4, 0, 0, 0, 0, 0, 0]) + header6 + struct.pack("!HH", 50000, 853)
    assert _refused_udp6(icmp6, "::1") == ("2001:db8::1", 853)
