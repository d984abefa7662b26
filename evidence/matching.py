"""Whether an HTTP request carried a tool call's arguments: the evidence for an inferred link.

An agent runs a tool by calling some HTTP API with the arguments the model wrote: a path
segment (``/records/42``), a query value (``?city=Paris``), a member of a JSON or form body,
or text inside one of them (a search phrase in a longer query). Nothing ties the request
to the call but that content, so the match says exactly which argument values were found
where, and how many of them. Values too common to tell anything (booleans, nulls, strings
shorter than MIN_TEXT) are not looked for; numbers count only as a whole segment, query
value or body member, never inside other text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, unquote_plus

from freezeframe.canonicalize.jsonbody import JsonValue, Number, encode_json
from freezeframe.providers.bodies import media_type, parse_json, request_body
from freezeframe.storage import Exchange

MIN_TEXT = 3
"""String values shorter than this ("C", "en") are not looked for."""
MIN_CONTAINED = 4
"""String values at least this long are also found inside longer text."""
MOST_VALUES = 64
"""Argument values looked for, at most; the rest of a huge argument object are not."""
TEXT_LIMIT = 1024 * 1024
"""Characters of a request body searched for values inside text."""
REASONS_SHOWN = 3

_FORM = "application/x-www-form-urlencoded"
_INSIDE = "text in the request"


@dataclass(frozen=True, slots=True)
class RequestContent:
    """What one request says, indexed once to be matched against many calls."""

    segments: frozenset[str]
    """The path's segments, percent-decoded."""
    fields: dict[str, str]
    """Each query value, form field and JSON body member's value (as text) to where it
    was found (``query city``, ``body $.user.id``); the first place wins."""
    body: JsonValue
    """The body's JSON value, when it is JSON."""
    text: str
    """The decoded URL and body, case-folded, for values inside longer text."""


@dataclass(frozen=True, slots=True)
class ContentMatch:
    found: int
    """Argument values found in the request."""
    whole_values: int
    """Of those, the values found whole: a path segment, a query value, a form field or a
    body member, rather than inside longer text (as a tracing upload holds them)."""
    looked_for: int
    """Argument values that could be found (see the module's rules)."""
    whole_body: bool
    """The request's JSON body is the call's arguments."""
    why: str
    """What matched where, for people."""


def request_content(exchange: Exchange) -> RequestContent:
    path, _, query = exchange.recorded.path.partition("?")
    segments = frozenset(unquote(s) for s in path.split("/") if s)
    fields: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        fields.setdefault(value, f"query {name}")
    decoded = request_body(exchange)
    body = parse_json(decoded.data) if decoded.data else None
    if media_type(exchange.recorded.request_headers) == _FORM:
        form = decoded.data.decode("utf-8", "replace")
        for name, value in parse_qsl(form, keep_blank_values=True):
            fields.setdefault(value, f"form {name}")
    for place, value, _ in _leaves(body, "$"):
        fields.setdefault(value, f"body {place}")
    text = (
        unquote_plus(exchange.recorded.path)
        + "\n"
        + decoded.data[:TEXT_LIMIT].decode("utf-8", "replace")
    )
    return RequestContent(segments, fields, body, text.casefold())


def content_match(arguments: JsonValue, request: RequestContent) -> ContentMatch | None:
    """How ``arguments`` (a call's parsed arguments, or its free text) show in ``request``;
    None when nothing does."""
    if request.body is not None and arguments is not None:
        if isinstance(arguments, dict) and encode_json(arguments) == encode_json(request.body):
            return ContentMatch(1, 1, 1, True, "the request body is the call's arguments")
    reasons: list[str] = []
    looked_for = whole = 0
    for place, value, is_number in _values(arguments):
        looked_for += 1
        reason = _found(value, is_number, request)
        if reason is not None:
            whole += reason != _INSIDE
            reasons.append(f"{place} {value!r} as {reason}" if place else f"{value!r} as {reason}")
    if not reasons:
        return None
    shown = "; ".join(reasons[:REASONS_SHOWN]) + ("; …" if len(reasons) > REASONS_SHOWN else "")
    counted = f"{len(reasons)} of {looked_for} argument values"
    return ContentMatch(len(reasons), whole, looked_for, False, f"{shown} ({counted})")


def _found(value: str, is_number: bool, request: RequestContent) -> str | None:
    if value in request.segments:
        return "a path segment"
    if value in request.fields:
        return request.fields[value]
    if not is_number and len(value) >= MIN_CONTAINED and value.casefold() in request.text:
        return _INSIDE
    return None


def _values(arguments: JsonValue) -> Iterator[tuple[str, str, bool]]:
    """(where in the arguments, value as text, is a number) for each value worth finding."""
    if isinstance(arguments, str):  # free text, or one string argument
        if len(arguments.strip()) >= MIN_TEXT:
            yield "", arguments.strip(), False
        return
    for count, (place, value, is_number) in enumerate(_leaves(arguments, "")):
        if count >= MOST_VALUES:
            return
        yield place.lstrip("."), value, is_number


def _leaves(value: JsonValue, place: str) -> Iterator[tuple[str, str, bool]]:
    """(path, text, is a number) of every string and number in ``value``, strings at least
    MIN_TEXT long after stripping; a number's text is its JSON token."""
    stack: list[tuple[str, JsonValue]] = [(place, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{where}.{name}", child) for name, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}[{n}]", child) for n, child in reversed(list(enumerate(item))))
        elif isinstance(item, str):
            if len(item.strip()) >= MIN_TEXT:
                yield where, item.strip(), False
        elif isinstance(item, Number):
            yield where, item.token, True
        elif isinstance(item, int | float) and not isinstance(item, bool):
            yield where, encode_json(item), True
