"""Bodies known only by digest: keyed exactly as their bytes would be.

A body too large to hold is hashed as it streams and keyed from its digest (an opaque body)
or from its parts with file contents as digests (a multipart form). Both must give the key
canonicalize gives the same bytes, or a streamed recording would never replay.
"""

from dataclasses import replace

import httpx
import pytest
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize import (
    BodyDigest,
    FormPart,
    KeyConfig,
    RequestView,
    canonicalize,
    parse_rules,
)
from freezeframe.canonicalize.jsonbody import NotJson, read_json

VIEW = RequestView(
    method="PUT",
    scheme="https",
    host="Uploads.Example.com",
    port=443,
    path="/v1/files",
    query=(("b", "2"), ("a", "1")),
    headers=(("Content-Type", "x"), ("X-Trace", "t-1")),
    body=b"",
    content_type="",
)
CONFIGS = (
    KeyConfig(),
    KeyConfig(key_headers=frozenset({"content-type"}), volatile_fields=frozenset({"nonce"})),
    KeyConfig(rules=parse_rules('[[rule]]\nignore = ["$.purpose", "$.nonce"]\n')),
)
PATHS = ("/v1/files", "/v1/chat/completions", "/v1/messages", "/upload")
OPAQUE_TYPES = ("", "application/octet-stream", "image/png", "text/plain; charset=utf-8")

configs = st.sampled_from(CONFIGS)
paths = st.sampled_from(PATHS)


def _not_json(body: bytes) -> bool:
    """Bodies the bytes path reads as opaque whatever the content type in OPAQUE_TYPES."""
    try:
        read_json(body)
    except NotJson:
        return True
    return False


@given(
    body=st.binary(min_size=1, max_size=2048).filter(_not_json),
    content_type=st.sampled_from(OPAQUE_TYPES),
    path=paths,
    config=configs,
)
def test_an_opaque_body_keyed_by_digest_gets_the_key_of_its_bytes(
    body: bytes, content_type: str, path: str, config: KeyConfig
) -> None:
    whole = canonicalize(replace(VIEW, body=body, content_type=content_type, path=path), config)
    assert whole.body_kind == "bytes"
    digest = BodyDigest(blake3(body).hexdigest(), len(body))
    assert digest == BodyDigest.of(body)
    from_digest = canonicalize(replace(VIEW, path=path), config, body_digest=digest)
    assert from_digest == whole


def test_a_digest_body_ignores_the_content_type_and_keeps_the_form() -> None:
    body = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    digest = BodyDigest.of(body)
    as_json = canonicalize(replace(VIEW, content_type="application/json"), body_digest=digest)
    as_png = canonicalize(replace(VIEW, content_type="image/png"), body_digest=digest)
    assert as_json == as_png == canonicalize(replace(VIEW, body=body, content_type="image/png"))
    assert as_json.body_kind == "bytes"
    assert b'"body":{"blake3":"%s","length":2056}' % digest.blake3.encode() in as_json.form


# -- multipart --------------------------------------------------------------------------

_NAMES = st.sampled_from(["file", "purpose", "nonce", "document", "a", "z"])
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=40)
_CONTENT = st.one_of(
    _TEXT.map(lambda text: text.encode("utf-8")),
    st.binary(max_size=300),
)
parts_strategy = st.lists(
    st.builds(
        FormPart,
        name=_NAMES,
        content=_CONTENT,
        filename=st.one_of(st.none(), st.sampled_from(["notes.txt", "a b.bin", "image.png"])),
        content_type=st.one_of(st.none(), st.sampled_from(["text/plain", "image/png"])),
    ),
    max_size=6,
)


def encode(parts: list[FormPart], boundary: str) -> bytes:
    """A multipart body as a client writes it, from parts whose content is bytes."""
    body = bytearray()
    for part in parts:
        assert isinstance(part.content, bytes)
        disposition = f'form-data; name="{part.name}"'
        if part.filename is not None:
            disposition += f'; filename="{part.filename}"'
        head = f"Content-Disposition: {disposition}\r\n"
        if part.content_type is not None:
            head += f"Content-Type: {part.content_type}\r\n"
        body += f"--{boundary}\r\n{head}\r\n".encode() + part.content + b"\r\n"
    return bytes(body + f"--{boundary}--\r\n".encode())


def by_digest(part: FormPart) -> FormPart:
    """The part as a streaming reader gives it: files and non-UTF-8 content by digest."""
    assert isinstance(part.content, bytes)
    if part.filename is None:
        try:
            part.content.decode("utf-8")
            return part
        except UnicodeDecodeError:
            pass
    return replace(part, content=BodyDigest.of(part.content))


@given(
    parts=parts_strategy,
    boundary=st.sampled_from(["x-boundary-1", "----WebKitFormBoundary7MA4YWxkTrZu0gW"]),
    path=paths,
    config=configs,
)
def test_a_multipart_form_keyed_from_part_digests_gets_the_key_of_its_bytes(
    parts: list[FormPart], boundary: str, path: str, config: KeyConfig
) -> None:
    content_type = f"multipart/form-data; boundary={boundary}"
    whole_view = replace(VIEW, path=path, body=encode(parts, boundary), content_type=content_type)
    whole = canonicalize(whole_view, config)
    assert whole.body_kind == "multipart"
    view = replace(VIEW, path=path, content_type=content_type)
    assert canonicalize(view, config, multipart_parts=[by_digest(p) for p in parts]) == whole
    # given as bytes, every part is described as in the whole body, digests computed
    assert canonicalize(view, config, multipart_parts=parts) == whole


def test_an_httpx_upload_keyed_from_part_digests_keeps_its_key_and_stripped_digests() -> None:
    content = bytes(range(256)) * 64
    files = {"file": ("data.bin", content, "application/octet-stream")}
    data = {"purpose": "assistants", "nonce": "n-1"}
    request = httpx.Request("POST", "https://uploads.example.com/v1/files", files=files, data=data)
    whole_view = replace(VIEW, body=request.read(), content_type=request.headers["content-type"])
    config = KeyConfig(rules=parse_rules('[[rule]]\nignore = ["$.file", "$.nonce"]\n'))
    parts = [
        FormPart("file", BodyDigest.of(content), "data.bin", "application/octet-stream"),
        FormPart("nonce", b"n-1"),
        FormPart("purpose", b"assistants"),
    ]
    for cfg in (KeyConfig(), config):
        whole = canonicalize(whole_view, cfg)
        from_parts = canonicalize(replace(whole_view, body=b""), cfg, multipart_parts=parts)
        assert from_parts == whole
    assert {entry.part for entry in canonicalize(whole_view, config).stripped} == {
        "part:file",
        "part:nonce",
    }


def test_a_text_field_given_by_digest_is_keyed_by_digest_not_value() -> None:
    view = replace(VIEW, content_type="multipart/form-data; boundary=b")
    by_value = canonicalize(view, multipart_parts=[FormPart("purpose", b"assistants")])
    digested = FormPart("purpose", BodyDigest.of(b"assistants"))
    assert canonicalize(view, multipart_parts=[digested]).key != by_value.key


def test_an_empty_form_matches_its_bytes_and_an_empty_digest_is_still_bytes() -> None:
    form_type = "multipart/form-data; boundary=b"
    empty_form = canonicalize(replace(VIEW, body=b"--b--\r\n", content_type=form_type))
    assert canonicalize(VIEW, multipart_parts=[]) == empty_form
    nothing = canonicalize(VIEW, body_digest=BodyDigest.of(b""))
    assert nothing.body_kind == "bytes"
    assert nothing.key != canonicalize(VIEW).key  # a body cut short is not an absent one


def test_a_body_given_twice_is_refused() -> None:
    digest = BodyDigest.of(b"data")
    with pytest.raises(ValueError):
        canonicalize(replace(VIEW, body=b"data"), body_digest=digest)
    with pytest.raises(ValueError):
        canonicalize(replace(VIEW, body=b"data"), multipart_parts=[])
    with pytest.raises(ValueError):
        canonicalize(VIEW, body_digest=digest, multipart_parts=[])
