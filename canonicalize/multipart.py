"""Multipart form bodies (`multipart/form-data`, RFC 7578) read part by part.

The boundary is chosen at random by each client for each request, so keying the raw bytes
would make two identical uploads miss each other. Each part is instead described by what a
server reads from it: its field name, file name, content type and content. Text fields keep
their value, so a miss report can show it; files are kept as a digest and a length, so forms
stay small whatever was uploaded.
"""

import re
from collections.abc import Iterable
from urllib.parse import unquote

from .jsonbody import JsonValue
from .model import BodyDigest, FormPart

_PARAMETER = re.compile(r';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')
_QUOTED_PAIR = re.compile(r"\\(.)")
_EXTENDED_VALUE = re.compile(r"([^']*)'[^']*'(.*)")


class NotMultipart(ValueError):
    """The body is not the multipart form it claims; the message completes "body claims …"."""


def read_multipart(body: bytes, content_type: str) -> tuple[tuple[str, JsonValue], ...]:
    """Describe every part, ordered by field name; parts sharing a name keep their order.

    Field order is spelling (servers look fields up by name), but the order of repeated
    fields, such as several files under one name, can matter.
    """
    boundary = parameters(content_type).get("boundary")
    if not boundary:
        raise NotMultipart("has no boundary parameter")
    sections = (b"\r\n" + body).split(b"\r\n--" + boundary.encode("utf-8", "surrogatepass"))
    if len(sections) < 2:
        raise NotMultipart("never uses its boundary")
    parts: list[FormPart] = []
    for section in sections[1:]:
        if section.startswith(b"--"):
            return describe_parts(parts)
        parts.append(_part(section))
    raise NotMultipart("has no closing boundary")


def describe_parts(parts: Iterable[FormPart]) -> tuple[tuple[str, JsonValue], ...]:
    """The form's fields as keyed: each part described, ordered by field name (stably).

    Shared by bodies read whole and forms given part by part, so both are keyed alike.
    """
    described = [(part.name, _describe(part)) for part in parts]
    return tuple(sorted(described, key=lambda field: field[0]))


def parameters(header: str) -> dict[str, str]:
    """The `; name=value` parameters of a header value, names lower-cased, quoting removed."""
    found: dict[str, str] = {}
    for name, value in _PARAMETER.findall(header):
        value = value.strip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = _QUOTED_PAIR.sub(r"\1", value[1:-1])
        found[name.lower()] = value
    return found


def _part(section: bytes) -> FormPart:
    """Read one part: the rest of the delimiter line, its headers, a blank line, its content."""
    padding, newline, rest = section.partition(b"\r\n")
    if not newline or padding.strip(b" \t"):
        raise NotMultipart("has a boundary line with text after it")
    if rest.startswith(b"\r\n"):
        raise NotMultipart("has a part without headers")
    head, blank, content = rest.partition(b"\r\n\r\n")
    if not blank:
        raise NotMultipart("has a part whose headers never end")
    return read_part_head(head, content)


def read_part_head(head: bytes, content: bytes | BodyDigest) -> FormPart:
    """The part with these header lines (CRLF-separated, no blank line) and this content.

    Raises NotMultipart when the headers do not make a form-data part with a name; a form
    read as it streams can so judge each part's headers as a whole body's would be judged.
    """
    headers = _headers(head)
    disposition = headers.get("content-disposition", "")
    if disposition.split(";", 1)[0].strip().lower() != "form-data":
        raise NotMultipart("has a part that is not form-data")
    named = parameters(disposition)
    if "name" not in named:
        raise NotMultipart("has a part without a name")
    return FormPart(named["name"], content, _filename(named), headers.get("content-type"))


def _headers(head: bytes) -> dict[str, str]:
    """Part headers by lower-cased name; UTF-8, which RFC 7578 allows, else escaped bytes."""
    found: dict[str, str] = {}
    for line in head.decode("utf-8", "surrogateescape").split("\r\n"):
        name, colon, value = line.partition(":")
        if not colon:
            raise NotMultipart("has a part header without a colon")
        found[name.strip().lower()] = value.strip()
    return found


def _filename(named: dict[str, str]) -> str | None:
    """Prefer the RFC 5987 `filename*` spelling, as servers do, over plain `filename`."""
    extended = _EXTENDED_VALUE.fullmatch(named.get("filename*", ""))
    if extended is not None:
        charset, encoded = extended.groups()
        try:
            return unquote(encoded, encoding=charset or "utf-8", errors="surrogateescape")
        except (LookupError, ValueError):
            raise NotMultipart(f"names a file in an unknown charset {charset!r}") from None
    return named.get("filename")


def _describe(part: FormPart) -> JsonValue:
    """A text field by its value; a file, or content that is not text (or given only by
    digest), by digest and length."""
    described: dict[str, JsonValue] = {}
    content = part.content
    if part.content_type is not None:
        described["content_type"] = part.content_type
    if part.filename is None:
        if isinstance(content, bytes):
            try:
                described["value"] = content.decode("utf-8")
                return described
            except UnicodeDecodeError:
                pass
    else:
        described["filename"] = part.filename
    digest = BodyDigest.of(content) if isinstance(content, bytes) else content
    described["blake3"] = digest.blake3
    described["length"] = digest.length
    return described
