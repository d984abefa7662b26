"""The request headers MCP's 2026-07-28 revision mirrors from the body, kept equal to it.

A stateless MCP request says what it asks twice: in its JSON-RPC body and in headers that
gateways route on, `Mcp-Method` (``method``), `Mcp-Name` (``params.name`` or
``params.uri``), `Mcp-Param-{Name}` (a tool argument its schema marks with
``x-mcp-header``) and `MCP-Protocol-Version` (``params._meta``'s protocol version). A server
refuses a request whose headers and body disagree (400, JSON-RPC error -32020,
``HeaderMismatch``), so a request changed at a JSON path (``resend --set``) must have its
mirrored headers changed with it (``mirror``).

Values are encoded as the revision says: plain when they are visible ASCII without leading
or trailing whitespace, else ``=?base64?…?=`` of their UTF-8; integers in decimal, booleans
``true``/``false``
(https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_str
from freezeframe.storage import Header

METHOD = b"mcp-method"
NAME = b"mcp-name"
VERSION = b"mcp-protocol-version"
PARAM = b"mcp-param-"
_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
_PLAIN = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")
_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$")


class MirrorError(ValueError):
    """A mirrored header cannot be kept equal to the changed body; the message says which."""


def encode_value(value: JsonValue) -> str | None:
    """A body value as its header carries it; None for a value no header carries."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    if _PLAIN.match(text) and not _SENTINEL.match(text):
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def decode_value(text: str) -> str:
    """A header value as the body has it (the sentinel's Base64 undone)."""
    found = _SENTINEL.match(text)
    if found is None:
        return text
    try:
        return base64.b64decode(found.group(1), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return text


def mirror(headers: Sequence[Header], before: JsonValue, after: JsonValue) -> list[Header]:
    """``headers`` with every mirrored header made to match ``after``, the changed body
    (``before`` is the body they were sent with). Headers the request did not carry are
    not added: a request of an older revision stays as it was.

    Raises MirrorError when an `Mcp-Param-*` header cannot be traced to one argument.
    """
    old, new = as_dict(before), as_dict(after)
    old_params, new_params = as_dict(old.get("params")), as_dict(new.get("params"))
    wanted: dict[bytes, str | None] = {  # a method or version is ASCII; encoded all the same
        METHOD: encode_value(as_str(new.get("method"))),
        NAME: encode_value(new_params.get("name", new_params.get("uri"))),
        VERSION: encode_value(as_str(as_dict(new_params.get("_meta")).get(_PROTOCOL_VERSION))),
    }
    out: list[Header] = []
    for name, value in headers:
        lower = name.lower()
        if lower in wanted:
            replacement = wanted[lower]
            if replacement is None:
                out.append((name, value))  # the body no longer says: leave it as sent
            else:
                out.append((name, replacement.encode("ascii")))
        elif lower.startswith(PARAM):
            place = _argument_of(name, value.decode("latin-1"), old_params.get("arguments"))
            found = _at(new_params.get("arguments"), place)
            encoded = encode_value(found) if found is not None else None
            if encoded is not None:
                out.append((name, encoded.encode("ascii")))
            # an argument now absent or null: the revision says the header is omitted
        else:
            out.append((name, value))
    return out


def _argument_of(header: bytes, value: str, arguments: JsonValue) -> tuple[str, ...]:
    """The argument an `Mcp-Param-*` header mirrored: the one whose value it carried, the
    one named like it when several carried that value."""
    suffix = header[len(PARAM) :].decode("latin-1").lower()  # the name, as the client wrote it
    places = [place for place, item in _primitives(arguments, ()) if encode_value(item) == value]
    if len(places) > 1:
        places = [place for place in places if place[-1].lower() == suffix] or places
    if len(places) != 1:
        which = "no argument" if not places else f"{len(places)} arguments"
        raise MirrorError(
            f"{header.decode('latin-1')}: {which} of the recorded call carried {value!r}, so "
            "the header cannot follow the change; give it with --header"
        )
    return places[0]


def _primitives(
    value: JsonValue, place: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], JsonValue]]:
    """Every value reachable through object members alone, as `x-mcp-header` requires."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _primitives(item, (*place, name))
    elif place and not isinstance(value, list | float) and value is not None:
        yield place, value


def _at(value: JsonValue, place: tuple[str, ...]) -> JsonValue:
    for name in place:
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    return value
