"""How a request body is read before keying: as JSON, as form fields, or as opaque bytes.

Bodies whose format is known are read by meaning, so that harmless re-serialization by a
client (member order, a fresh multipart boundary) still replays; every other body is keyed by
its exact bytes, because nothing is known about which of its differences matter.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from .form import read_form
from .jsonbody import JsonValue, NotJson, read_json
from .model import BodyDigest, FormPart
from .multipart import NotMultipart, describe_parts, read_multipart

_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"


@dataclass(frozen=True, slots=True)
class ReadBody:
    """A body as read: `value` for JSON and opaque bodies, `fields` for forms.

    `kind` is "empty", "json", "form", "multipart" or "bytes". Form fields are (name, value)
    pairs in canonical order, values being strings for URL-encoded forms and part
    descriptions for multipart ones.
    """

    kind: str
    value: JsonValue = None
    fields: tuple[tuple[str, JsonValue], ...] = ()
    warnings: tuple[str, ...] = ()


def read_body(body: bytes, content_type: str) -> ReadBody:
    """Choose the body's reading by its content type; never raises, whatever the bytes.

    A body without a content type is tried as JSON because many clients omit the header;
    only a body that claimed a format earns a warning when it turns out not to have it.
    """
    if not body:
        return ReadBody("empty")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == _FORM:
        return ReadBody("form", fields=read_form(body))
    if media_type == _MULTIPART:
        try:
            return ReadBody("multipart", fields=read_multipart(body, content_type))
        except NotMultipart as reason:
            return _bytes_body(body, (_claimed("a multipart form", content_type, reason),))
    if media_type and not _is_json_media_type(media_type):
        return _bytes_body(body, ())
    try:
        return ReadBody("json", read_json(body))
    except NotJson as reason:
        if not media_type:
            return _bytes_body(body, ())
        return _bytes_body(body, (_claimed("JSON", content_type, reason),))


def read_digest(digest: BodyDigest) -> ReadBody:
    """Read a body known only by digest as `read_body` reads the same bytes as opaque.

    Always as bytes, even of length 0: a body known by digest was never seen to be empty
    (a streamed body cut short before its first byte is not a request without one).
    """
    return _described(digest, ())


def read_parts(parts: Iterable[FormPart]) -> ReadBody:
    """Read a multipart form given part by part as `read_body` reads the same form whole."""
    return ReadBody("multipart", fields=describe_parts(parts))


def _claimed(claim: str, content_type: str, reason: ValueError) -> str:
    """Warn that the body is not what its content type says, and how it was keyed instead."""
    return f"body claims {claim} ({content_type}) but {reason}; keyed by its bytes"


def _is_json_media_type(media_type: str) -> bool:
    """Recognise `application/json` and structured-syntax suffixes such as `application/x+json`."""
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _bytes_body(body: bytes, warnings: tuple[str, ...]) -> ReadBody:
    return _described(BodyDigest.of(body), warnings)


def _described(digest: BodyDigest, warnings: tuple[str, ...]) -> ReadBody:
    """Key an opaque body by digest and length, so forms stay small whatever the body's size."""
    described: JsonValue = {"blake3": digest.blake3, "length": digest.length}
    return ReadBody("bytes", described, warnings=warnings)
