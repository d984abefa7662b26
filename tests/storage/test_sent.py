"""storage.sent: the digest of a request as sent, which replay answers from first."""

from __future__ import annotations

from freezeframe.canonicalize.profiles.anthropic import anthropic_profile
from freezeframe.canonicalize.profiles.bedrock import INVOKE
from freezeframe.canonicalize.profiles.mcp import MCP, MCP_BATCH
from freezeframe.storage.sent import SKIPPED, sent_digest

HEADERS = ((b"Content-Type", b"application/json"), (b"Authorization", b"Bearer sk-1"))


def digest(headers: tuple[tuple[bytes, bytes], ...] = HEADERS, body: bytes = b"{}") -> bytes:
    return sent_digest("POST", "https", "api.example.com", 443, "/v1/x?a=1", headers, body)


def test_credentials_and_telemetry_do_not_change_it() -> None:
    other = ((b"content-type", b"application/json"), (b"authorization", b"Bearer sk-2"))
    assert digest(other + ((b"User-Agent", b"sdk/2"), (b"traceparent", b"00-1"))) == digest()


def test_every_other_byte_does() -> None:
    assert digest(body=b"{ }") != digest()
    assert digest(HEADERS + ((b"anthropic-version", b"2023-06-01"),)) != digest()
    assert digest(((b"content-type", b"text/plain"),) + HEADERS[1:]) != digest()
    moved = sent_digest("POST", "https", "api.example.com", 443, "/v1/x?a=2", HEADERS, b"{}")
    assert moved != digest()


def test_no_provider_profile_keys_a_header_it_leaves_out() -> None:
    anthropic = anthropic_profile("/v1/messages")
    assert anthropic is not None
    for profile in (anthropic, INVOKE, MCP, MCP_BATCH):
        assert not {name.encode() for name in profile.key_headers} & SKIPPED, profile.name
        prefixes = tuple(prefix.encode() for prefix in profile.key_header_prefixes)
        assert not [name for name in SKIPPED if name.startswith(prefixes)], profile.name
