"""A small JSONPath subset, for naming parts of a JSON body in profiles, rules and reports.

Supported: `$` (the whole body), `.name` and `["any name"]` (a member), `[n]` and `[-n]` (an
array item, negative counting from the end), `.*` and `[*]` (every child), and `..` before any
of these (the same, at any depth, so `$..*` is every value and `$..name` every member so named).
Filters and slices are left out: rules name fixed places, and a smaller language is one a
reader can check by eye.

A concrete place in a document is a `Location`, a tuple of member names and array indices;
`render` writes one back as a path, the same way miss reports do, so what explain prints can be
pasted into a rules file.
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .jsonbody import JsonValue, encode_json

type Location = tuple[str | int, ...]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"\[(-?[0-9]+)\]")
_DECODER = json.JSONDecoder()


class BadPath(ValueError):
    """The text is not a path in the supported subset; the message says where it goes wrong."""


@dataclass(frozen=True, slots=True)
class Member:
    """Selects the member of an object with this name."""

    name: str


@dataclass(frozen=True, slots=True)
class Index:
    """Selects one array item; negative indices count from the end, as in Python."""

    index: int


@dataclass(frozen=True, slots=True)
class Every:
    """Selects every member of an object or item of an array."""


@dataclass(frozen=True, slots=True)
class Descend:
    """Applies a selector to a value and to everything nested in it."""

    step: Member | Index | Every


type Step = Member | Index | Every | Descend


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A parsed path, kept with its text so errors and reports can quote it as written."""

    text: str
    steps: tuple[Step, ...]

    def find(self, root: JsonValue) -> list[tuple[Location, JsonValue]]:
        """Every place the path selects in `root`, in document order, each once."""
        current: list[tuple[Location, JsonValue]] = [((), root)]
        for step in self.steps:
            if not current:
                return current
            if len(current) == 1 and isinstance(step, Member):
                # The common step, taken directly: one place, one member, found or not.
                location, value = current[0]
                if not isinstance(value, dict) or step.name not in value:
                    return []
                current = [((*location, step.name), value[step.name])]
                continue
            selected: dict[Location, JsonValue] = {}
            for location, value in current:
                for found, item in _apply(step, location, value):
                    selected.setdefault(found, item)
            current = list(selected.items())
        return current

    def top_level_name(self) -> str | None:
        """The member name when the path is just `$.name`, as form fields can be addressed."""
        match self.steps:
            case (Member(name=name),):
                return name
            case _:
                return None


def member(name: str) -> JsonPath:
    """The path of one top-level member, built without parsing since any name is allowed."""
    return JsonPath(member_path("$", name), (Member(name),))


def parse_path(text: str) -> JsonPath:
    """Read a path, raising BadPath with the 1-based character where it stops making sense."""
    if not text.startswith("$"):
        raise BadPath(f"JSON path {text!r} must start with '$'")
    steps: list[Step] = []
    position = 1
    while position < len(text):
        if text.startswith("..", position):
            step, position = _selector(text, position + 2, brackets=True)
            steps.append(Descend(step))
        elif text[position] == ".":
            step, position = _selector(text, position + 1, brackets=False)
            steps.append(step)
        elif text[position] == "[":
            step, position = _bracket(text, position)
            steps.append(step)
        else:
            raise _bad(text, position, "expected '.', '..' or '['")
    return JsonPath(text, tuple(steps))


def render(location: Location) -> str:
    """Write a concrete location as a path: `$.messages[0].content`, `$["a b"]`."""
    path = "$"
    for key in location:
        path = f"{path}[{key}]" if isinstance(key, int) else member_path(path, key)
    return path


def member_path(path: str, name: str) -> str:
    """Write `.name` where that reads unambiguously, else a quoted `["name"]`."""
    if _IDENTIFIER.fullmatch(name):
        return f"{path}.{name}"
    return f"{path}[{encode_json(name)}]"


def _selector(text: str, position: int, brackets: bool) -> tuple[Member | Index | Every, int]:
    """Read what follows a dot: a name, `*`, or (after `..`) a bracket."""
    if text.startswith("*", position):
        return Every(), position + 1
    if brackets and text.startswith("[", position):
        return _bracket(text, position)
    name = _IDENTIFIER.match(text, position)
    if name is None:
        raise _bad(text, position, "expected a name, '*' or [\"quoted name\"]")
    return Member(name.group()), name.end()


def _bracket(text: str, position: int) -> tuple[Member | Index | Every, int]:
    """Read `[*]`, `[n]` or `["name"]` starting at the opening bracket."""
    if text.startswith("[*]", position):
        return Every(), position + 3
    index = _INDEX.match(text, position)
    if index is not None:
        return Index(int(index.group(1))), index.end()
    if text.startswith('["', position):
        try:
            name, end = _DECODER.raw_decode(text, position + 1)
        except json.JSONDecodeError:
            raise _bad(text, position + 1, "unterminated or invalid quoted name") from None
        if text.startswith("]", end):
            return Member(name), end + 1
        raise _bad(text, end, "expected ']' after the quoted name")
    raise _bad(text, position, 'expected [*], [number] or ["quoted name"]')


def _bad(text: str, position: int, what: str) -> BadPath:
    return BadPath(f"JSON path {text!r}: {what} at character {position + 1}")


def _apply(
    step: Step, location: Location, value: JsonValue
) -> Iterator[tuple[Location, JsonValue]]:
    """Select from one value; a step that does not fit the value's type selects nothing."""
    if isinstance(step, Descend):
        for inner_location, inner in _self_and_descendants(location, value):
            yield from _apply(step.step, inner_location, inner)
    elif isinstance(step, Member):
        if isinstance(value, dict) and step.name in value:
            yield (*location, step.name), value[step.name]
    elif isinstance(step, Index):
        if isinstance(value, list) and -len(value) <= step.index < len(value):
            index = step.index % len(value)
            yield (*location, index), value[index]
    else:
        yield from _children(location, value)


def _children(location: Location, value: JsonValue) -> Iterator[tuple[Location, JsonValue]]:
    if isinstance(value, dict):
        for name, item in value.items():
            yield (*location, name), item
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*location, index), item


def _self_and_descendants(
    location: Location, value: JsonValue
) -> Iterator[tuple[Location, JsonValue]]:
    """Walk depth first in document order, without recursion, as bodies may nest deeply."""
    pending = [(location, value)]
    while pending:
        here, item = pending.pop()
        yield here, item
        pending.extend(reversed(list(_children(here, item))))
