"""Multipart form bodies (`multipart/form-data`, RFC 7578) read part by part.

The boundary is chosen at random by each client for each request, so keying the raw bytes
would make two identical uploads miss each other. Each part is instead described by what a
server reads from it: its field name, file name, content type and content. Text fields keep
their value, so a miss report can show it; files are kept as a digest and a length, so forms
stay small whatever was uploaded.
"""

import re
from urllib.parse import unquote

from blake3 import blake3

from .jsonbody import JsonValue

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
    parts: list[tuple[str, JsonValue]] = []
    for section in sections[1:]:
        if section.startswith(b"--"):
            return tuple(sorted(parts, key=lambda part: part[0]))
        parts.append(_part(section))
    raise NotMultipart("has no closing boundary")


def parameters(header: str) -> dict[str, str]:
    """The `; name=value` parameters of a header value, names lower-cased, quoting removed."""
    found: dict[str, str] = {}
    for name, value in _PARAMETER.findall(header):
        value = value.strip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = _QUOTED_PAIR.sub(r"\1", value[1:-1])
        found[name.lower()] = value
    return found


def _part(section: bytes) -> tuple[str, JsonValue]:
    """Read one part: the rest of the delimiter line, its headers, a blank line, its content."""
    padding, newline, rest = section.partition(b"\r\n")
    if not newline or padding.strip(b" \t"):
        raise NotMultipart("has a boundary line with text after it")
    if rest.startswith(b"\r\n"):
        raise NotMultipart("has a part without headers")
    head, blank, content = rest.partition(b"\r\n\r\n")
    if not blank:
        raise NotMultipart("has a part whose headers never end")
    headers = _headers(head)
    disposition = headers.get("content-disposition", "")
    if disposition.split(";", 1)[0].strip().lower() != "form-data":
        raise NotMultipart("has a part that is not form-data")
    named = parameters(disposition)
    if "name" not in named:
        raise NotMultipart("has a part without a name")
    return named["name"], _describe(content, _filename(named), headers.get("content-type"))


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


def _describe(content: bytes, filename: str | None, content_type: str | None) -> JsonValue:
    """A text field by its value; a file, or content that is not text, by digest and length."""
    described: dict[str, JsonValue] = {}
    if content_type is not None:
        described["content_type"] = content_type
    if filename is None:
        try:
            described["value"] = content.decode("utf-8")
            return described
        except UnicodeDecodeError:
            pass
    else:
        described["filename"] = filename
    described["blake3"] = blake3(content).hexdigest()
    described["length"] = len(content)
    return described
