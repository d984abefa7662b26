"""Leaving parts of a body out of its key, and rewriting strings in it, with a record of each.

One mechanism serves profiles, configured volatile fields and user rules alike, so that they
combine the same way everywhere: the first rule to drop a place is credited with it, `keep`
protects a place and everything in it from every drop, and an object or array that dropping
leaves empty goes too, so a request whose only extra was dropped keys like one without it.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .jsonbody import JsonValue, short_digest
from .jsonpath import JsonPath, Location, render
from .model import Stripped
from .ruleset import Substitution

_LONE_SURROGATES = re.compile("([\ud800-\udfff]+)")


@dataclass(frozen=True, slots=True)
class Drop:
    """A path to leave out of the key, and the rule to credit when it matches."""

    path: JsonPath
    rule: str


@dataclass(frozen=True, slots=True)
class _Removed:
    """Marks a value pruned away, which no JSON value (not even null) can stand for."""


_REMOVED = _Removed()


def prune(
    value: JsonValue, drops: Sequence[Drop], keeps: Sequence[JsonPath]
) -> tuple[JsonValue, list[Stripped]]:
    """Drop what `drops` select, except what `keeps` select; the root itself always stays.

    Only the branches leading to a dropped place are rebuilt, so the cost follows what is
    dropped rather than the size of the body.
    """
    dropped: dict[Location, str] = {}
    for drop in drops:
        for location, _ in drop.path.find(value):
            if location:
                dropped.setdefault(location, drop.rule)
    if not dropped:
        return value, []
    kept = {location for path in keeps for location, _ in path.find(value)}
    pruner = _Pruner(dropped, kept)
    pruned = pruner.visit((), value, None)
    assert not isinstance(pruned, _Removed), "the root is never dropped"
    return pruned, pruner.stripped


def prune_fields(
    fields: Iterable[tuple[str, JsonValue]], drops: dict[str, str], keeps: set[str], label: str
) -> tuple[list[JsonValue], list[Stripped]]:
    """Drop form fields by name, as `prune` drops top-level members; `drops` maps to rules.

    Each dropped field is recorded as `<label>:<name>`, once per occurrence, as query
    parameters are.
    """
    kept: list[JsonValue] = []
    stripped: list[Stripped] = []
    for name, value in fields:
        if name in drops and name not in keeps:
            stripped.append(Stripped(f"{label}:{name}", drops[name], short_digest(value)))
        else:
            kept.append([name, value])
    return kept, stripped


def substitute(
    value: JsonValue, substitution: Substitution, rule: str
) -> tuple[JsonValue, list[Stripped]]:
    """Rewrite the strings `substitution` selects, recording each changed one's original.

    Rewrites in place: the value is the caller's own freshly read body, and copying the
    branch above every rewritten string would cost quadratic time on long conversations.
    """
    stripped: list[Stripped] = []
    for location, found in substitution.path.find(value):
        if not isinstance(found, str):
            continue
        changed = _rewritten(substitution, found)
        if changed == found:
            continue
        stripped.append(Stripped(f"body:{render(location)}", rule, short_digest(found)))
        value = _replaced(value, location, changed)
    return value, stripped


def _rewritten(substitution: Substitution, text: str) -> str:
    """`text` with the substitution made, between its lone surrogates if it has any.

    RE2 reads UTF-8, which has no form for a lone surrogate (a `\\ud800` escape in a body
    decodes to one), so such a string is rewritten piece by piece between its surrogates,
    which stay as sent; anchors then see each piece's ends.
    """
    try:
        return str(substitution.compiled.sub(substitution.replacement, text))
    except UnicodeEncodeError:
        pass
    pieces = _LONE_SURROGATES.split(text)
    return "".join(
        piece if index % 2 else str(substitution.compiled.sub(substitution.replacement, piece))
        for index, piece in enumerate(pieces)
    )


def _replaced(root: JsonValue, location: Location, new: JsonValue) -> JsonValue:
    """Put `new` at `location` inside `root`, returning the root (itself `new` at `$`)."""
    if not location:
        return new
    container = _child_at(root, location[:-1])
    last = location[-1]
    if isinstance(container, dict) and isinstance(last, str):
        container[last] = new
    elif isinstance(container, list) and isinstance(last, int):
        container[last] = new
    return root


def _child(container: JsonValue, key: str | int) -> JsonValue:
    if isinstance(container, dict) and isinstance(key, str):
        return container[key]
    if isinstance(container, list) and isinstance(key, int):
        return container[key]
    raise AssertionError(f"no {key!r} in a {type(container).__name__}: a stale location")


class _Pruner:
    """One pruning pass: which places go, which are protected, and what was recorded."""

    def __init__(self, dropped: dict[Location, str], kept: set[Location]) -> None:
        self._dropped = dropped
        self._kept = kept
        self._leads_to_drop = {
            location[:end] for location in dropped for end in range(len(location))
        }
        self._leads_to_keep = {location[:end] for location in kept for end in range(len(location))}
        self.stripped: list[Stripped] = []

    def visit(self, location: Location, value: JsonValue, rule: str | None) -> JsonValue | _Removed:
        """Rebuild `value` without what is dropped; `rule` is set inside a dropped branch."""
        if location in self._kept:
            return value
        rule = self._dropped.get(location, rule)
        if rule is not None and location not in self._leads_to_keep:
            self.stripped.append(Stripped(f"body:{render(location)}", rule, short_digest(value)))
            return _REMOVED
        if rule is None and location not in self._leads_to_drop:
            return value
        if isinstance(value, dict):
            members = (
                (name, self.visit((*location, name), item, rule)) for name, item in value.items()
            )
            rebuilt: JsonValue = {
                name: item for name, item in members if not isinstance(item, _Removed)
            }
        elif isinstance(value, list):
            items = (self.visit((*location, index), item, rule) for index, item in enumerate(value))
            rebuilt = [item for item in items if not isinstance(item, _Removed)]
        else:
            return value
        if value and not rebuilt and location:
            return _REMOVED
        return rebuilt


def drop_empty(value: JsonValue, paths: Iterable[JsonPath]) -> JsonValue:
    """Remove the object members `paths` select whose value is `{}` or `[]`.

    For places where an API reads empty as absent, such as JSON-RPC `params`; nothing is
    recorded, as nothing that could change an answer is lost.
    """
    for path in paths:
        for location, found in reversed(path.find(value)):
            if found in ({}, []) and location and isinstance(location[-1], str):
                parent = _child_at(value, location[:-1])
                if isinstance(parent, dict):
                    del parent[location[-1]]
    return value


def _child_at(root: JsonValue, location: Location) -> JsonValue:
    for key in location:
        root = _child(root, key)
    return root
