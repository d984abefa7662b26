"""Which parts left out of a key changed between a recording and the request it now answers.

A key that still matches can hide a changed situation: the end user, the metadata, a query
parameter a rule ignores. Replay serves the recording anyway (that is what the key says), but
the change is worth saying out loud, so every stripped part keeps a digest of its value and a
hit compares the live digests with the recorded ones.

Some parts differ on every call by design, and reporting them would mark every replay as
drifted and bury the drift that matters. Those are not compared: correlation and trace ids,
idempotency keys and client clocks (the fields of `volatile.PER_CALL_FIELDS`), the JSON-RPC
`id` and `params._meta` of an MCP message, a telemetry export's whole body, and strings
rewritten by a user's substitution, whose digest can only differ in what the substitution
was written to remove.
"""

import re
from collections.abc import Iterable, Mapping

from .jsonbody import NotJson, decode_json, encode_json
from .jsonpath import BadPath, parse_path
from .model import Stripped
from .profiles.mcp import MCP
from .profiles.telemetry import TELEMETRY
from .volatile import PER_CALL_FIELDS

_PER_CALL_BODY_PATH = re.compile(r"\$(\[\d+\])?\.(id|params\._meta)")
"""MCP's per-message bookkeeping (canonicalize.profiles.mcp), in a single message or a batch."""

_SUBSTITUTION = ":substitute"


def digests(stripped: Iterable[Stripped]) -> dict[str, str]:
    """The part -> digest map a recording keeps, for comparing later requests against.

    A part stripped more than once (a repeated query parameter) keeps all its digests, in
    order, joined with commas, so a change in any one of them shows.
    """
    found: dict[str, list[str]] = {}
    for part in stripped:
        if not _per_call(part):
            found.setdefault(part.part, []).append(part.digest)
    return {part: ",".join(values) for part, values in found.items()}


def drifted(live: Iterable[Stripped], recorded: Mapping[str, str]) -> tuple[str, ...]:
    """The stripped parts whose values differ between the live request and the recording.

    `recorded` is what `digests` gave for the recording. A part present on one side only has
    drifted too: a field that appeared or went away. Parts are returned sorted, so the same
    drift always reads the same.
    """
    now = digests(live)
    return tuple(
        sorted(part for part in now.keys() | recorded.keys() if now.get(part) != recorded.get(part))
    )


def _per_call(stripped: Stripped) -> bool:
    """Whether a stripped part ("body:$.user", "query:ts", "form:nonce") is minted per call."""
    if stripped.rule.endswith(_SUBSTITUTION):
        return True
    if stripped.rule == TELEMETRY.name:
        return True
    kind, _, where = stripped.part.partition(":")
    if kind == "body" and stripped.rule == MCP.name and _PER_CALL_BODY_PATH.fullmatch(where):
        return True
    return where.rsplit(".", 1)[-1] in PER_CALL_FIELDS


DRIFT_VALUE_CHARS = 60
"""Characters of a drifted value shown in the log."""


def drift_values(part: str, live: bytes, recorded: bytes) -> tuple[str, str] | None:
    """A drifted body part's recorded and live values, as compact JSON cut to
    DRIFT_VALUE_CHARS, ``(absent)`` on a side that did not carry it: a stripped field that now
    carries what the recording never had is named with both values, so the drift says what
    changed, not only where. None for a part that is not a JSON body path, or bodies that are
    not JSON."""
    kind, _, where = part.partition(":")
    if kind != "body" or not where.startswith("$"):
        return None
    try:
        path = parse_path(where)
        sides = [path.find(decode_json(body)) if body else [] for body in (recorded, live)]
    except (BadPath, NotJson):
        return None
    shown = []
    for found in sides:
        text = "(absent)" if not found else encode_json(found[0][1])
        shown.append(text if len(text) <= DRIFT_VALUE_CHARS else text[:59] + "…")
    return shown[0], shown[1]


def described(part: str, values: tuple[str, str] | None) -> str:
    """A drifted part as people read it: the part, with its recorded and live values (as
    ``drift_values`` gives them) when known."""
    return part if values is None else f"{part} (recorded {values[0]}, live {values[1]})"
