"""Secrets become keyed fingerprints: stable per install, different across installs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.storage.redaction import KEY_BYTES, Redactor, load_or_create_key

KEY = b"k" * KEY_BYTES


def test_secret_headers_keep_the_scheme_and_a_fingerprint() -> None:
    redactor = Redactor(KEY)
    fields = ((b"Authorization", b"Bearer sk-abc"), (b"X-Api-Key", b"abc"), (b"Accept", b"*/*"))
    redacted = redactor.headers(fields)
    assert redacted[0][1].startswith(b"Bearer [redacted:") and b"sk-abc" not in redacted[0][1]
    assert redacted[1][1].startswith(b"[redacted:") and redacted[2] == (b"Accept", b"*/*")
    assert redactor.headers(fields) == redacted, "fingerprints are stable"
    other = Redactor(b"o" * KEY_BYTES).headers(fields)
    assert other[0] != redacted[0], "fingerprints are keyed per install"


def test_user_headers_and_patterns_are_redacted_too() -> None:
    redactor = Redactor(KEY, headers=["X-Tool-Token"], patterns=[r"tok_[a-z0-9]{8,}"])
    assert redactor.headers(((b"x-tool-token", b"t0p-secret"),))[0][1].startswith(b"[redacted:")
    assert b"tok_abcdefgh12" not in redactor.body(b'{"t": "tok_abcdefgh12"}')


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_body_redaction_preserves_length(prefix: bytes, suffix: bytes) -> None:
    redactor = Redactor(KEY)
    body = prefix + b"sk-proj-" + b"a" * 30 + suffix
    redacted = redactor.body(body)
    assert len(redacted) == len(body)
    assert b"sk-proj-" + b"a" * 30 not in redacted


def test_secrets_echoed_back_by_an_upstream_are_scrubbed() -> None:
    redactor = Redactor(KEY)
    known = redactor.secret_values(
        (
            (b"Cookie", b"session=cookie-secret-456; theme=dark"),
            (b"Authorization", b"Basic dXNlcjpwYXNzd29yZA=="),
        ),
        "/echo?api_key=query-secret-789&page=2",
    )
    answer = (
        b'{"cookie": "cookie-secret-456", "auth": "dXNlcjpwYXNzd29yZA==", '
        b'"k": "query-secret-789", "page": "2"}'
    )
    scrubbed = redactor.body(answer, known)
    for secret in (b"cookie-secret-456", b"dXNlcjpwYXNzd29yZA==", b"query-secret-789"):
        assert secret not in scrubbed
    assert b'"page": "2"' in scrubbed and len(scrubbed) == len(answer)


def test_query_secrets_in_a_target_are_replaced() -> None:
    target = Redactor(KEY).target("/v1/search?key=AIzaSecret&q=cats")
    assert "AIzaSecret" not in target and target.endswith("&q=cats")


def test_the_install_key_is_created_once_and_private(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    key = load_or_create_key(path)
    assert len(key) == KEY_BYTES and load_or_create_key(path) == key
    assert os.stat(path).st_mode & 0o077 == 0


def test_a_damaged_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="expected a 32-byte key"):
        load_or_create_key(path)


def test_a_redaction_pattern_runs_in_linear_time_on_any_body() -> None:
    """Redaction runs on every body recorded: a pattern that would make a backtracking
    engine take minutes on one body takes no time, and binary bodies are matched byte by
    byte."""
    redactor = Redactor(KEY, patterns=[r"(x+x+)+y", r"pw=[^&\s]{6,}"])
    body = b"\xff\x80" + b"x" * 50_000 + b" pw=hunter2&\x00"
    started = time.perf_counter()
    redacted = redactor.body(body)
    assert time.perf_counter() - started < 2
    assert len(redacted) == len(body) and b"hunter2" not in redacted
    assert redacted.startswith(b"\xff\x80" + b"x" * 50_000)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"tok(?=_)", r"(unclosed"])
def test_a_pattern_that_cannot_run_in_linear_time_or_at_all_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"^invalid redaction pattern .*RE2") as error:
        Redactor(KEY, patterns=[pattern])
    assert "\n" not in str(error.value)


def test_text_with_lone_surrogates_is_redacted_not_raised_on() -> None:
    redactor = Redactor(KEY, patterns=[r"tok_[a-z0-9]{8,}"])
    secret = "tok_abcdef123"
    marker = redactor.marker(secret.encode()).decode()
    # mitmproxy decodes a target's non-UTF-8 byte to a lone surrogate (surrogateescape)
    shown = redactor.text(f"/files/\udcff?t={secret}")
    assert shown == f"/files/\udcff?t={marker}"
    assert redactor.text("/a\ud800b") == "/a\ud800b"
    assert secret not in redactor.text(f"\ud800{secret}")


SIGV4 = (
    b"AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEACCESSKEY/20260101/us-east-1/bedrock/aws4_request, "
    b"SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=" + b"ab" * 32
)


def test_cloud_provider_credentials_are_redacted() -> None:
    """Issue 23: AWS's session token and SigV4 access key id, Gemini's API key (header or
    ``key=``), an OAuth bearer token; each echoed back in an answer is scrubbed too."""
    redactor = Redactor(KEY)
    fields = (
        (b"Authorization", SIGV4),
        (b"X-Amz-Security-Token", b"IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN"),
        (b"x-goog-api-key", b"AIzaSyEXAMPLEGEMINIKEY0123456789"),
        (b"X-Amz-Date", b"20260101T000000Z"),
    )
    redacted = dict(redactor.headers(fields))
    assert redacted[b"Authorization"].startswith(b"AWS4-HMAC-SHA256 [redacted:")
    for name in (b"X-Amz-Security-Token", b"x-goog-api-key"):
        assert redacted[name].startswith(b"[redacted:")
    assert redacted[b"X-Amz-Date"] == b"20260101T000000Z"
    target = "/v1beta/models/gemini-2.0-flash:generateContent?key=AIzaSyQUERYKEY0123456789"
    assert "AIzaSyQUERYKEY" not in redactor.target(target)
    presigned = (
        "/x?X-Amz-Credential=ASIAEXAMPLEACCESSKEY%2F20260101&X-Amz-Security-Token=tok12345678"
    )
    assert "ASIAEXAMPLE" not in redactor.target(presigned) and "tok12345678" not in redactor.target(
        presigned
    )
    known = redactor.secret_values(fields, target)
    answer = (
        b'{"message": "key ASIAEXAMPLEACCESSKEY, token IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN, '
        b'gemini AIzaSyEXAMPLEGEMINIKEY0123456789 AIzaSyQUERYKEY0123456789"}'
    )
    scrubbed = redactor.body(answer, known)
    for secret in (b"ASIAEXAMPLE", b"IQoJb3J", b"AIzaSyEXAMPLE", b"AIzaSyQUERY"):
        assert secret not in scrubbed
    assert len(scrubbed) == len(answer)


def test_aws_temporary_credentials_in_answers_are_redacted_in_place() -> None:
    """STS (XML) and instance metadata (JSON) answers keep their shape: only the secret
    access key and session token become markers, so an SDK still reads the document."""
    redactor = Redactor(KEY)
    imds = (
        b'{"AccessKeyId": "ASIAIMDS", "SecretAccessKey": "wJalrXUtnFEMIK7MDENG", '
        b'"Token": "IQoJb3JpZ2luX2VjTOKEN"}'
    )
    sts = (
        b"<SecretAccessKey>wJalrXUtnFEMIK7MDENG</SecretAccessKey>"
        b"<SessionToken>IQoJb3JpZ2luX2VjTOKEN</SessionToken>"
    )
    sso = (
        b'{"roleCredentials": {"accessKeyId": "ASIASSO", "secretAccessKey": '
        b'"wJalrXUtnFEMIK7MDENG", "sessionToken": "IQoJb3JpZ2luX2VjTOKEN", "expiration": 1}}'
    )
    for body in (imds, sts, sso):
        scrubbed = redactor.body(body)
        assert b"wJalrXUtnFEMIK7MDENG" not in scrubbed and b"IQoJb3JpZ2luX2VjTOKEN" not in scrubbed
        assert len(scrubbed) == len(body)
    assert json.loads(redactor.body(imds))["AccessKeyId"] == "ASIAIMDS"
    assert redactor.body(sts).startswith(b"<SecretAccessKey>[r:")
