"""Secrets become keyed fingerprints: stable per install, different across installs."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from urllib.parse import quote, quote_plus

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
    started = time.process_time()
    redacted = redactor.body(body)
    assert time.process_time() - started < 2
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


def test_the_imds_session_token_is_redacted_where_it_is_handed_out_and_sent_back() -> None:
    """IMDSv2's token is the whole plain-text answer to ``PUT /latest/api/token`` and then a
    header; both become the token's own marker, the answer at its own length."""
    redactor = Redactor(KEY)
    token = b"AQAEAHjCzDkxNaZxk7u8NfZ0Xj0lQXmOpH7rW3lFq-GxKJcDq1v6Vg=="
    answer = redactor.answer("PUT", "/latest/api/token", token + b"\n")
    assert token not in answer and len(answer) == len(token) + 1
    header = redactor.headers(((b"X-aws-ec2-metadata-token", token),))[0][1]
    assert answer.rstrip(b"*\n") == header == redactor.marker(token)
    assert redactor.answer("PUT", "/latest/api/token", answer) == answer, "idempotent"
    assert redactor.answer("GET", "/latest/api/token", token) == token
    assert redactor.answer("PUT", "/v1/files", token) == token
    ttl = (b"X-aws-ec2-metadata-token-ttl-seconds", b"21600")
    assert redactor.headers((ttl,)) == (ttl,)


def test_a_known_secret_is_scrubbed_in_every_spelling_it_comes_back_in() -> None:
    redactor = Redactor(KEY)
    secret = "EAAB/x+y=Zq8Xr4Tn2\u00e9"
    known = redactor.secret_values((), f"/p?access_token={quote(secret)}")
    spelled = (
        quote(secret, safe=""),
        re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1].replace("/", "\\/"),
    )
    for spelling in spelled:
        body = f'{{"next": "/p?after=2&access_token={spelling}"}}'.encode()
        scrubbed = redactor.body(body, known)
        assert spelling.encode() not in scrubbed and len(scrubbed) == len(body), spelling
        assert redactor.fingerprint(secret.encode())[:8].encode() in scrubbed, "one fingerprint"


def test_keys_in_escaped_spellings_and_well_known_shapes_are_scrubbed() -> None:
    redactor = Redactor(KEY)
    found = {
        "openai, JSON-escaped": b'"sk\\u002dproj\\u002dZq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7"',
        "openai, form-encoded": b"note=sk%2Dproj-Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7",
        "aws access key id": b"id AKIAQWERTYUIOPASDFGH end",
        "github token": b"ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "slack token": b"xoxb-2184017761-5219873467-Qq8xR4tN2lM6vB0kC9wD3hF7",
        "private key": b"-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----",
        "password field": b'{"password": "hunter2!"}',
        "client_secret form field": b"a=1&client_secret=cs_live_51HqLy&b=2",
        "token field": b'{"token": "tok_9f8e7d6c5b4a39281706f5e4"}',
    }
    secrets = {
        "openai, JSON-escaped": b"Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7",
        "openai, form-encoded": b"Zq8Xr4Tn2Lm6Vb0Kc9Wd3Hf7",
        "aws access key id": b"AKIAQWERTYUIOPASDFGH",
        "github token": b"aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "slack token": b"Qq8xR4tN2lM6vB0kC9wD3hF7",
        "private key": b"MIIEow",
        "password field": b"hunter2!",
        "client_secret form field": b"cs_live_51HqLy",
        "token field": b"tok_9f8e7d6c5b4a39281706f5e4",
    }
    for what, found_in in found.items():
        body = found_in + b' "end"}'
        scrubbed = redactor.body(body)
        assert secrets[what] not in scrubbed and len(scrubbed) == len(body), what
        assert redactor.body(scrubbed) == scrubbed, f"{what}: redacting twice changes nothing"
        assert scrubbed.endswith(b' "end"}'), f"{what}: the text around the secret is kept"


def test_a_logprob_token_and_ordinary_fields_are_left_alone() -> None:
    redactor = Redactor(KEY)
    body = b'{"logprobs": [{"token": "Hello", "logprob": -0.1}], "tokens": 12, "key": "value"}'
    assert redactor.body(body) == body
    assert redactor.body(b"grant_type=client_credentials&scope=read") == (
        b"grant_type=client_credentials&scope=read"
    )


def test_more_credential_headers_and_a_key_in_a_referers_query() -> None:
    redactor = Redactor(KEY)
    fields = (
        (b"x-goog-api-key", b"AIzaSyD-9tSrke72PouQMnMX"),
        (b"X-Auth-Token", b"gAAAAABl-auth-token"),
        (b"Referer", b"https://console.example/keys?tab=1&key=AIzaSyB-referer&x=2"),
        (b"Link", b'</v1/items?page=2&api_key=abc%2Fdef>; rel="next"'),
    )
    goog, auth, referer, link = redactor.headers(fields)
    assert goog[1].startswith(b"[redacted:") and auth[1].startswith(b"[redacted:")
    assert referer[1] == (
        b"https://console.example/keys?tab=1&key=" + redactor.marker(b"AIzaSyB-referer") + b"&x=2"
    )
    assert link[1] == b"</v1/items?page=2&api_key=" + redactor.marker(b"abc/def") + b'>; rel="next"'


def test_credentials_are_known_by_name_at_any_depth_and_counts_are_not() -> None:
    redactor = Redactor(KEY)
    body = json.dumps(
        {
            "max_tokens": 64,
            "usage": {"input_tokens": 12, "output_tokens": 3},
            "logprobs": [{"token": "Hello", "bytes": [72]}],
            "tools": [{"authorization": "oauth-abc-123", "headers": {"X-Vault-Token": "v.123"}}],
            "mcp_servers": [{"authorization_token": "mcp-token-xyz"}],
            "pageToken": "page-2-cursor-value",
        }
    ).encode()
    redacted = json.loads(redactor.body(body))
    assert redacted["max_tokens"] == 64 and redacted["usage"]["input_tokens"] == 12
    assert redacted["logprobs"][0]["token"] == "Hello"
    assert redacted["pageToken"] == "page-2-cursor-value"
    assert "oauth-abc-123" not in json.dumps(redacted)
    assert "v.123" not in json.dumps(redacted) and "mcp-token-xyz" not in json.dumps(redacted)


def test_multipart_fields_query_names_headers_and_reasons() -> None:
    redactor = Redactor(KEY)
    multipart = (
        b'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\nmk-123456789\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="password"\r\n\r\n'
        b"file content\r\n--b--\r\n"
    )
    scrubbed = redactor.body(multipart)
    assert b"mk-123456789" not in scrubbed and b"file content" in scrubbed
    target = redactor.target("/blob?sv=2022&sig=abcDEF%2B123&client_secret=cs1&page=2")
    assert "abcDEF" not in target and "cs1" not in target and target.endswith("&page=2")
    (header,) = redactor.headers(
        ((b"Sec-WebSocket-Protocol", b"x, openai-insecure-api-key.sk-proj-" + b"a" * 30),)
    )
    assert b"a" * 30 not in header[1] and header[1].startswith(b"x, openai-insecure-api-key.")
    known = redactor.secret_values(((b"Authorization", b"Bearer tok-0123456789abcdef"),), "/")
    assert "tok-0123456789abcdef" not in redactor.reason("Bad token tok-0123456789abcdef", known)


def test_a_body_gives_up_the_secrets_it_names_as_the_bytes_they_stand_for() -> None:
    """What ``found`` collects is scrubbed from the answer by value (storage.inflight), so it
    is the secret itself: its JSON escapes and form encoding undone, its scheme word off."""
    redactor = Redactor(KEY)
    token = "mcpoat/Qm7+Vb3kP9sR2tW5nL8cF1hJ4dG6aB3=="
    found: set[bytes] = set()
    escaped = json.dumps(token)[1:-1].replace("/", "\\/")
    body = '{"tools": [{"authorization": "Bearer ' + escaped + '", "max_tokens": 5}]}'
    assert token not in redactor.body(body.encode(), (), found).decode()
    assert found == {("Bearer " + token).encode(), token.encode()}
    found.clear()
    redactor.body(f"user=ada&client_secret={quote_plus(token)}&pwd=short".encode(), (), found)
    assert found == {token.encode()}, "a value under 8 bytes is too common to scrub by value"
    found.clear()
    form = (
        b'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n'
        + token.encode()
        + b"\r\n--b--\r\n"
    )
    redactor.body(form, (), found)
    assert found == {token.encode()}
    echoed = f'{{"error": "bad token {quote(token, safe="")}", "again": "{escaped}"}}'.encode()
    scrubbed = redactor.body(echoed, tuple(found))
    assert len(scrubbed) == len(echoed) and b"Qm7" not in scrubbed


_JUNK = st.lists(
    st.sampled_from(['"', ":", " ", "\n", "=", "&", "?", "#", "{", ",", "\\", "'", "<", "x", "9"]),
    max_size=6,
).map("".join)
_NAME = st.lists(
    st.sampled_from(["token", "Api_Key", "auth", "SIG", "pwd", "x", "-", ".", "%5B", "[", "_"]),
    max_size=6,
).map("".join)
_NAMED = st.tuples(
    _JUNK,
    st.sampled_from(["", "&", "?", '"']),
    _NAME,
    st.sampled_from(["=", '":"', '" :\n"']),
    _JUNK,
).map("".join)


@given(st.lists(_NAMED, min_size=1, max_size=4).map("".join))
def test_the_named_value_prefilter_lets_every_named_value_through(text: str) -> None:
    """``body`` skips the JSON and form passes when the hint pattern finds nothing; it must
    find something wherever either pass would (a skipped pass is a secret stored)."""
    redactor = Redactor(KEY)
    data = text.encode()
    for named in (redactor._json, redactor._form):
        if named.search(data) is not None:
            assert redactor._named_hint.search(data) is not None, data


def test_a_body_dense_with_quotes_is_redacted_as_a_sparse_one() -> None:
    """A stream of JSON events (many quotes, ``prompt_tokens``) takes the prefiltered way;
    a named credential at its end is still found."""
    redactor = Redactor(KEY)
    event = b'data: {"choices": [{"delta": {"content": "hi"}}], "usage": {"prompt_tokens": 9}}\n\n'
    tail = b'data: {"client_secret": "cs_9f8e7d6c5b4a39281706f5e4"}\n\n'
    assert b"cs_9f8e7d6c5b4a" not in redactor.body(event * 200 + tail)
    assert redactor.body(event * 200) == event * 200
