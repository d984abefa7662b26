"""Explaining a replay miss: where a live request's canonical form departs from recorded ones.

Works on canonical forms alone, so a miss report needs nothing but what storage already keeps.
Never raises: a form that cannot be read compares as empty, so it shows every part as absent
and ranks last instead of aborting the whole report.
"""

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .jsonbody import MAX_DEPTH, JsonValue, NotJson, Number, decode_json, encode_json
from .jsonpath import member_path
from .model import Difference, DifferenceLike

_MAX_DIFFERENCES = 50
_MAX_SHOWN = 80

_SCALAR_MEMBERS = (
    ("v", "v"),
    ("method", "method"),
    ("scheme", "url.scheme"),
    ("host", "url.host"),
    ("port", "url.port"),
    ("path", "url.path"),
)
"""Form members compared whole, with the label each is reported under, in report order."""

_NAMED_MEMBERS = (("query", "query"), ("headers", "header"))
"""Form members holding [name, value] pairs, compared name by name under `<label>.<name>`."""

_NAMED_BODIES = {"form": "form", "multipart": "part"}
"""Body kinds held as [name, value] pairs, with the label their fields are reported under."""


@dataclass(frozen=True, slots=True)
class _Absent:
    """Marks a member missing on one side, which JSON `null` cannot, as null is a value."""


_ABSENT = _Absent()

type _Side = JsonValue | _Absent
type _Form = dict[str, JsonValue]


def differences(live_form: bytes, recorded_form: bytes) -> list[Difference]:
    """List what differs, at most 50 entries then one "…" entry counting the rest."""
    return _capped(_all_differences(_read(live_form), _read(recorded_form)))


def json_differences(left: bytes, right: bytes) -> list[Difference]:
    """Where two JSON documents differ, path by path (numbers by value), as ``differences``
    reports a body; one "body" entry when either side is not JSON. At most 50 then "…"."""
    try:
        left_value, right_value = decode_json(left), decode_json(right)
    except NotJson:
        if left == right:
            return []
        return [Difference("body", _abridge(left.decode("utf-8", "replace")),
                           _abridge(right.decode("utf-8", "replace")))]  # fmt: skip
    found: list[Difference] = []
    _walk("$", left_value, right_value, found)
    return _capped(found)


def nearest[T](
    live_form: bytes, candidates: Iterable[tuple[T, bytes]], limit: int = 3
) -> list[tuple[T, list[Difference]]]:
    """Pick the recordings nearest the live form, ties in input order.

    The same endpoint comes first whatever its body: the same method, host and path, then the
    same host and path under another method, then the same method and path on another host.
    Within each, the fewest differing paths then the least differing text rank first (by the
    full count, not the capped list, so two very different candidates are still told apart).
    A recording of another endpoint is unrelated and never offered, however few paths differ:
    a miss on ``POST /v1/chat/completions`` is not explained by ``GET /tool/counter``. Only
    `limit` candidates' differences are held at a time.
    """
    live = _read(live_form)
    scored = (
        (item, tier, _all_differences(live, recorded))
        for item, form in candidates
        if (tier := _endpoint_tier(live, recorded := _read(form))) is not None
    )
    best = heapq.nsmallest(limit, scored, key=lambda entry: (entry[1], *_size(entry[2])))
    return [(item, _capped(found)) for item, _, found in best]


SAID_PATHS = 3
"""Differences spelled out in a one-line miss message; the rest are counted."""
SAID_CHARS = 60
"""Characters of a value in a one-line miss message."""


def said(found: Sequence[DifferenceLike]) -> str:
    """Differences as one line, each path with its recorded and live value cut to a readable
    length: what a miss's message says where the user reads it (the SDK's exception, the
    proxy's log, ``show --misses``, the pytest failure)."""
    if not found:
        return "nothing"
    shown = [
        f"{d.path} (recorded {_cut(d.recorded)}, live {_cut(d.live)})"
        for d in found[:SAID_PATHS]
        if d.path != "…"
    ]
    rest = sum(1 for d in found[SAID_PATHS:] if d.path != "…")
    rest += sum(int(d.live.split()[0]) for d in found if d.path == "…")
    if rest:
        shown.append(f"and {rest} more")
    return "; ".join(shown)


def _cut(value: str) -> str:
    return value if len(value) <= SAID_CHARS else value[: SAID_CHARS - 1] + "…"


def _endpoint_tier(live: _Form, recorded: _Form) -> int | None:
    """How closely two forms share an endpoint: 0 the same method, host and path; 1 the same
    host and path; 2 the same method and path on another host; None unrelated."""
    same = {name: live.get(name) == recorded.get(name) for name in ("method", "path")}
    origin = all(live.get(name) == recorded.get(name) for name in ("scheme", "host", "port"))
    if not same["path"]:
        return None
    if origin:
        return 0 if same["method"] else 1
    return 2 if same["method"] else None


def _size(found: list[Difference]) -> tuple[int, int]:
    """How much differs: paths, then characters of the values shown for them."""
    return len(found), sum(len(d.live) + len(d.recorded) for d in found)


def _read(form: bytes) -> _Form:
    """Parse a form, reading anything that is not a JSON object as an empty one."""
    try:
        value = decode_json(form, max_depth=MAX_DEPTH + 1)
    except NotJson:
        return {}
    return value if isinstance(value, dict) else {}


def _capped(found: list[Difference]) -> list[Difference]:
    """Keep a report readable when everything differs, while saying how much was left out."""
    if len(found) <= _MAX_DIFFERENCES:
        return found
    rest = len(found) - _MAX_DIFFERENCES
    return [*found[:_MAX_DIFFERENCES], Difference(path="…", live=f"{rest} more", recorded="")]


def _all_differences(live: _Form, recorded: _Form) -> list[Difference]:
    """Compare in a fixed order, request line first, so reports read the same way every time."""
    found: list[Difference] = []
    for member, label in _SCALAR_MEMBERS:
        _compare_whole(label, live.get(member, _ABSENT), recorded.get(member, _ABSENT), found)
    for member, label in _NAMED_MEMBERS:
        _compare_by_name(label, live.get(member, _ABSENT), recorded.get(member, _ABSENT), found)
    _compare_bodies(live, recorded, found)
    return found


def _compare_whole(label: str, live: _Side, recorded: _Side, found: list[Difference]) -> None:
    """Report a member as one entry, for parts whose insides carry no separate meaning."""
    if live != recorded:
        found.append(Difference(label, _abridge(live), _abridge(recorded)))


def _compare_by_name(label: str, live: _Side, recorded: _Side, found: list[Difference]) -> None:
    """Compare query parameters or headers by name, as servers look them up."""
    live_named, recorded_named = _by_name(live), _by_name(recorded)
    if live_named is None or recorded_named is None:
        _compare_whole(label, live, recorded, found)
        return
    for name in sorted(live_named.keys() | recorded_named.keys()):
        live_values = live_named.get(name, [])
        recorded_values = recorded_named.get(name, [])
        if live_values != recorded_values:
            shown = _abridge_values(live_values), _abridge_values(recorded_values)
            found.append(Difference(f"{label}.{name}", *shown))


def _by_name(member: _Side) -> dict[str, list[JsonValue]] | None:
    """Group [name, value] pairs by name; None when the member is not such a list.

    Values may be any JSON, as a multipart body's are descriptions of its parts.
    """
    if isinstance(member, _Absent):
        return {}
    if not isinstance(member, list):
        return None
    grouped: dict[str, list[JsonValue]] = {}
    for pair in member:
        match pair:
            case [str(name), value]:
                grouped.setdefault(name, []).append(value)
            case _:
                return None
    return grouped


def _compare_bodies(live: _Form, recorded: _Form, found: list[Difference]) -> None:
    """Compare bodies part by part where their kind has parts, else as one "body" entry.

    JSON bodies are walked member by member, form and multipart bodies compared field by field.
    """
    live_kind, recorded_kind = live.get("body_kind", _ABSENT), recorded.get("body_kind", _ABSENT)
    live_body, recorded_body = live.get("body", _ABSENT), recorded.get("body", _ABSENT)
    if live_kind == recorded_kind == "json":
        _walk("$", live_body, recorded_body, found)
    elif live_kind == recorded_kind and isinstance(live_kind, str) and live_kind in _NAMED_BODIES:
        _compare_by_name(_NAMED_BODIES[live_kind], live_body, recorded_body, found)
    elif (live_kind, live_body) != (recorded_kind, recorded_body):
        shown = _describe_body(live_kind, live_body), _describe_body(recorded_kind, recorded_body)
        found.append(Difference("body", *shown))


def _walk(path: str, live: _Side, recorded: _Side, found: list[Difference]) -> None:
    """Report leaf differences, and type changes or missing members at the highest path."""
    if live == recorded:
        return
    if isinstance(live, dict) and isinstance(recorded, dict):
        for name in sorted(live.keys() | recorded.keys()):
            live_member, recorded_member = live.get(name, _ABSENT), recorded.get(name, _ABSENT)
            _walk(member_path(path, name), live_member, recorded_member, found)
    elif isinstance(live, list) and isinstance(recorded, list):
        for index in range(max(len(live), len(recorded))):
            live_item = live[index] if index < len(live) else _ABSENT
            recorded_item = recorded[index] if index < len(recorded) else _ABSENT
            _walk(f"{path}[{index}]", live_item, recorded_item, found)
    else:
        found.append(Difference(path, *_abridge_pair(live, recorded)))


def _describe_body(kind: _Side, body: _Side) -> str:
    """Show an opaque body as its size and a digest prefix, which is all a form keeps of it."""
    match kind, body:
        case "empty", None:
            return "(empty)"
        case "bytes", {"blake3": str(digest), "length": Number(token=length)}:
            return f"{length} bytes, blake3 {digest[:16]}…"
        case _:
            return _abridge(body)


def _abridge_values(values: list[JsonValue]) -> str:
    """Show one value as itself and repeats as a list, the way they were sent."""
    if not values:
        return _abridge(_ABSENT)
    return _abridge(values[0] if len(values) == 1 else values)


def _abridge_pair(live: _Side, recorded: _Side) -> tuple[str, str]:
    """Two long strings that differ (a prompt with a new last line) are shown around their
    first difference, not from their start, where they are the same."""
    if not (isinstance(live, str) and isinstance(recorded, str)):
        return _abridge(live), _abridge(recorded)
    texts = encode_json(live), encode_json(recorded)
    if max(len(t) for t in texts) <= _MAX_SHOWN:
        return texts
    first = next(
        (i for i, (a, b) in enumerate(zip(*texts, strict=False)) if a != b),
        min(len(t) for t in texts),
    )
    return _around(texts[0], first), _around(texts[1], first)


def _around(text: str, at: int) -> str:
    if len(text) <= _MAX_SHOWN:
        return text
    suffix = f" ({len(text)} chars)"
    budget = _MAX_SHOWN - len(suffix) - 1  # room for the text and one ellipsis
    if at - budget // 3 <= 0:
        return f"{text[:budget]}…{suffix}"
    if at - budget // 3 + budget >= len(text):
        return f"…{text[-budget:]}{suffix}"
    start = at - (budget - 1) // 3
    return f"…{text[start : start + budget - 1]}…{suffix}"


def _abridge(value: _Side) -> str:
    """Render a value as compact JSON cut to 80 characters, saying how long it really was."""
    if isinstance(value, _Absent):
        return "(absent)"
    text = encode_json(value)
    if len(text) <= _MAX_SHOWN:
        return text
    suffix = f" ({len(text)} chars)"
    return f"{text[: _MAX_SHOWN - len(suffix) - 1]}…{suffix}"
