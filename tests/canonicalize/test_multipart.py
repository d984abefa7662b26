"""Form bodies: URL-encoded forms keyed by their fields, multipart forms by their parts, never by
the random boundary a client picked."""

import json
from dataclasses import replace
from typing import Any

import httpx
import httpx2
import openai
import pytest
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import (
    Canonical,
    KeyConfig,
    RequestView,
    Stripped,
    canonicalize,
    parse_rules,
)
from freezeframe.canonicalize.jsonbody import short_digest

UPLOAD = RequestView(
    method="POST",
    scheme="https",
    host="uploads.example.com",
    port=443,
    path="/v1/files",
    query=(),
    headers=(),
    body=b"",
    content_type="",
)


def sent(request: httpx.Request | httpx2.Request) -> RequestView:
    """The view of a request as httpx encoded it, boundary and all."""
    content_type = request.headers["content-type"]
    return replace(UPLOAD, body=request.read(), content_type=content_type)


def upload(**options: Any) -> RequestView:
    return sent(httpx.Request("POST", "https://uploads.example.com/v1/files", **options))


FILES = {"file": ("notes.txt", b"line one\nline two\n", "text/plain")}
DATA = {"purpose": "assistants"}


def test_the_same_upload_with_two_boundaries_shares_a_key() -> None:
    first, second = upload(files=FILES, data=DATA), upload(files=FILES, data=DATA)
    assert first.content_type != second.content_type, "httpx picks a fresh boundary each time"
    assert first.body != second.body
    assert canonicalize(first).key == canonicalize(second).key
    assert canonicalize(first).body_kind == "multipart"
    assert canonicalize(first).profile == "generic.multipart"


@pytest.mark.parametrize(
    "other",
    [
        {"files": {"file": ("notes.txt", b"line one\nline 2\n", "text/plain")}, "data": DATA},
        {"files": {"file": ("other.txt", b"line one\nline two\n", "text/plain")}, "data": DATA},
        {"files": {"file": ("notes.txt", b"line one\nline two\n", "text/csv")}, "data": DATA},
        {"files": {"document": FILES["file"]}, "data": DATA},
        {"files": FILES, "data": {"purpose": "fine-tune"}},
        {"files": FILES},
    ],
)
def test_a_different_part_is_a_different_key(other: dict[str, Any]) -> None:
    assert canonicalize(upload(**other)).key != canonicalize(upload(files=FILES, data=DATA)).key


def test_parts_are_described_by_name_filename_type_and_content() -> None:
    canonical = canonicalize(upload(files=FILES, data=DATA))
    content = FILES["file"][1]
    assert json.loads(canonical.form)["body"] == [
        [
            "file",
            {
                "blake3": blake3(content).hexdigest(),
                "content_type": "text/plain",
                "filename": "notes.txt",
                "length": len(content),
            },
        ],
        ["purpose", {"value": "assistants"}],
    ]


def test_field_order_is_spelling_but_the_order_of_repeated_fields_is_not() -> None:
    def sent_in_order(fields: list[tuple[str, bytes]]) -> str:
        boundary = "b0undary"
        body = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value
            + b"\r\n"
            for name, value in fields
        )
        view = replace(
            UPLOAD,
            body=body + f"--{boundary}--\r\n".encode(),
            content_type=f"multipart/form-data; boundary={boundary}",
        )
        return canonicalize(view).key

    a, b, c = ("a", b"1"), ("b", b"2"), ("b", b"3")
    assert sent_in_order([a, b, c]) == sent_in_order([b, c, a])
    assert sent_in_order([a, b, c]) != sent_in_order([a, c, b])


def test_an_sdk_audio_upload_replays_despite_a_new_boundary() -> None:
    captured: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        captured.append(request)
        return httpx2.Response(200, json={"text": ""})

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://127.0.0.1:9/v1",
        http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(answer)),
        max_retries=0,
    )
    for audio in (b"RIFF-one", b"RIFF-one", b"RIFF-two"):
        client.audio.transcriptions.with_raw_response.create(
            model="whisper-1", file=("speech.wav", audio), language="en"
        )
    first, again, other = (canonicalize(sent(request)) for request in captured)
    assert first.key == again.key != other.key
    assert sent(captured[0]).content_type != sent(captured[1]).content_type


def test_volatile_and_ignored_parts_are_stripped_and_recorded() -> None:
    rules = parse_rules('[[rule]]\nignore = ["$.nonce"]\n')
    config = KeyConfig(rules=rules)
    with_extras = upload(files=FILES, data=DATA | {"nonce": "n-1", "timestamp": "1700000000"})
    canonical = canonicalize(with_extras, config)
    assert canonical.stripped == (
        Stripped("part:nonce", "user:1", short_digest({"value": "n-1"})),
        Stripped("part:timestamp", "default-volatile", short_digest({"value": "1700000000"})),
    )
    assert canonical.key == canonicalize(upload(files=FILES, data=DATA), config).key


def test_a_filename_in_rfc_5987_form_is_read() -> None:
    def named(disposition: str) -> Canonical:
        body = (
            f"--x\r\nContent-Disposition: form-data; {disposition}\r\n\r\nhi\r\n--x--\r\n"
        ).encode()
        return canonicalize(
            replace(UPLOAD, body=body, content_type="multipart/form-data; boundary=x")
        )

    spelled = named("name=\"f\"; filename*=utf-8''%E2%82%AC.txt")
    assert spelled.key == named('name="f"; filename="€.txt"').key
    assert spelled.key != named('name="f"').key


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"--x\r\n\r\nhi\r\n--x--", "multipart/form-data", "has no boundary parameter"),
        (b"hello", "multipart/form-data; boundary=x", "never uses its boundary"),
        (b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nhi', "", "has no closing"),
        (b"--x\r\nContent-Type: text/plain\r\n\r\nhi\r\n--x--", "", "is not form-data"),
        (b"--x\r\nContent-Disposition: form-data\r\n\r\nhi\r\n--x--", "", "without a name"),
        (b"--x\r\n\r\nhi\r\n--x--", "", "a part without headers"),
        (b"--x junk\r\n\r\nhi\r\n--x--", "", "a boundary line with text after it"),
    ],
)
def test_a_broken_multipart_body_is_keyed_by_its_bytes_with_a_warning(
    body: bytes, content_type: str, reason: str
) -> None:
    content_type = content_type or "multipart/form-data; boundary=x"
    canonical = canonicalize(replace(UPLOAD, body=body, content_type=content_type))
    assert canonical.body_kind == "bytes"
    [warning] = canonical.warnings
    assert warning.startswith(f"body claims a multipart form ({content_type}) but ")
    assert reason in warning


@given(st.binary(), st.sampled_from(["", "x", '"x"', "--", "\ud800"]))
def test_any_bytes_claiming_multipart_are_keyed_without_raising(body: bytes, boundary: str) -> None:
    view = replace(
        UPLOAD, body=b"--x\r\n" + body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    canonical = canonicalize(view)
    assert canonical.body_kind in {"multipart", "bytes"}
    json.loads(canonical.form)


# URL-encoded forms.

FORM = replace(UPLOAD, path="/oauth/token", content_type="application/x-www-form-urlencoded")


DEFAULTS = KeyConfig()


def form_key(body: bytes, config: KeyConfig = DEFAULTS) -> str:
    return canonicalize(replace(FORM, body=body), config).key


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (b"grant_type=password&scope=a+b", b"scope=a%20b&grant_type=password", True),
        (b"name=%C3%A9", "name=é".encode(), True),
        (b"a=1&&b=2", b"b=2&a=1", True),
        (b"a=1&user=alice", b"a=1&user=bob", True),
        (b"a=1", b"a=2", False),
        (b"a=1", b"A=1", False),
        (b"a=1&a=2", b"a=1", False),
        (b"a=%FF", b"a=%FE", False),
    ],
)
def test_form_fields_are_keyed_by_name_and_value_not_spelling(
    first: bytes, second: bytes, same: bool
) -> None:
    assert (form_key(first) == form_key(second)) is same


def test_form_bodies_are_read_as_sorted_pairs_with_volatile_names_recorded() -> None:
    canonical = canonicalize(replace(FORM, body=b"z=1&user=alice&a=%2B&a=0"))
    assert (canonical.body_kind, canonical.profile) == ("form", "generic.form")
    assert json.loads(canonical.form)["body"] == [["a", "+"], ["a", "0"], ["z", "1"]]
    assert canonical.stripped == (Stripped("form:user", "default-volatile", short_digest("alice")),)


def test_rules_keep_and_ignore_form_fields_by_top_level_path() -> None:
    rules = parse_rules('[[rule]]\nkeep = ["$.user"]\nignore = ["$.nonce", "$.x.y"]\n')
    config = KeyConfig(rules=rules)
    assert form_key(b"user=a&nonce=1", config) != form_key(b"user=b&nonce=1", config)
    assert form_key(b"user=a&nonce=1", config) == form_key(b"user=a&nonce=2", config)


@given(st.binary(min_size=1))
def test_any_form_body_is_keyed_without_raising(body: bytes) -> None:
    canonical = canonicalize(replace(FORM, body=body))
    assert canonical.body_kind == "form"
    json.loads(canonical.form.decode("utf-8"))
