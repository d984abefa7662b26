"""How a request body enters the canonical form: as a JSON value, as a digest, or as nothing.

JSON bodies are keyed by meaning so that harmless re-serialization by an SDK still replays;
every other body is keyed by its exact bytes, because nothing is known about which of its
differences matter.
"""

from dataclasses import dataclass

from blake3 import blake3

from .jsonbody import JsonValue, NotJson, decode_json, short_digest
from .model import Stripped
from .volatile import rule_for


@dataclass(frozen=True, slots=True)
class CanonicalBody:
    """The body's share of a canonical form, with what was stripped from it and why."""

    value: JsonValue
    kind: str
    stripped: tuple[Stripped, ...]
    warnings: tuple[str, ...]


def canonical_body(body: bytes, content_type: str, volatile: frozenset[str]) -> CanonicalBody:
    """Choose the body's canonical shape; never raises, whatever the bytes.

    A body without a content type is tried as JSON because many clients omit the header;
    only a body that claimed JSON earns a warning when it turns out not to be.
    """
    if not body:
        return CanonicalBody(None, "empty", (), ())
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type and not _is_json_media_type(media_type):
        return _bytes_body(body, ())
    try:
        value = decode_json(body)
    except NotJson as reason:
        if not media_type:
            return _bytes_body(body, ())
        warning = f"body claims JSON ({content_type}) but {reason}; keyed by its bytes"
        return _bytes_body(body, (warning,))
    return _without_volatile_fields(value, volatile)


def _is_json_media_type(media_type: str) -> bool:
    """Recognise `application/json` and structured-syntax suffixes such as `application/x+json`."""
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _bytes_body(body: bytes, warnings: tuple[str, ...]) -> CanonicalBody:
    """Key an opaque body by digest and length, so forms stay small whatever the body's size."""
    described: JsonValue = {"blake3": blake3(body).hexdigest(), "length": len(body)}
    return CanonicalBody(described, "bytes", (), warnings)


def _without_volatile_fields(value: JsonValue, volatile: frozenset[str]) -> CanonicalBody:
    """Drop volatile fields from a top-level object only: deeper, the same names carry meaning."""
    if not isinstance(value, dict):
        return CanonicalBody(value, "json", (), ())
    stripped = tuple(
        Stripped(part=f"body:$.{name}", rule=rule_for(name), digest=short_digest(value[name]))
        for name in sorted(volatile & value.keys())
    )
    kept: JsonValue = {name: item for name, item in value.items() if name not in volatile}
    return CanonicalBody(kept, "json", stripped, ())
