"""Check a parsed rules document against the rules format and build its RuleSet.

Strict on purpose: a misspelt key or a regex that does not compile would otherwise leave a rule
silently doing nothing, and the user would learn of it only as replay misses. Each complaint
carries the table and key it is about, for `rules.py` to turn into a line number.
"""

import re
from collections.abc import Callable
from datetime import date, datetime, time
from typing import Any

from .jsonpath import BadPath, JsonPath, parse_path
from .patterns import linear_pattern
from .ruleset import ROUTE_MODES, Route, Rule, RuleSet, Substitution
from .tomllines import Address

_RULE_KEYS = ("host", "path", "profile", "ignore", "keep", "ignore_query", "key_headers")
_SUBSTITUTE_KEYS = ("path", "pattern", "replacement")
_ROUTE_KEYS = ("host", "path", "mode")
_EVERY_STRING = "$..*"


class SchemaError(ValueError):
    """What is wrong, and where: the table's address and, when it is about one, the key."""

    def __init__(self, table: Address, key: str | None, message: str) -> None:
        super().__init__(message)
        self.table = table
        self.key = key
        self.message = message


def build_rule_set(document: dict[str, Any]) -> RuleSet:
    """Turn the document `tomllib` read into rules, raising SchemaError at the first problem."""
    for key in document:
        if key not in ("rule", "route"):
            raise SchemaError(
                (), key, f"unknown key {key!r}; a rules file holds only [[rule]] and [[route]]"
            )
    rules = _tables(document, "rule")
    routes = _tables(document, "route")
    return RuleSet(
        tuple(_rule(index, table) for index, table in enumerate(rules)),
        tuple(_route(index, table) for index, table in enumerate(routes)),
    )


def _tables(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    tables = document.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise SchemaError((), name, f"'{name}' must be an array of tables, written [[{name}]]")
    return tables


def _route(index: int, table: dict[str, Any]) -> Route:
    address: Address = ("route", index)
    _refuse_unknown(address, table, _ROUTE_KEYS, "[[route]]")
    strings = _Reader(address, table)
    mode = strings.text("mode", "replay")
    if mode not in ROUTE_MODES:
        raise SchemaError(
            address, "mode", f"unknown mode {mode!r}; choose one of {', '.join(ROUTE_MODES)}"
        )
    return Route(
        number=index + 1,
        host=strings.text("host", "*").lower(),
        path=strings.text("path", "*"),
        mode=mode,
    )


def _rule(index: int, table: dict[str, Any]) -> Rule:
    address: Address = ("rule", index)
    _refuse_unknown(address, table, (*_RULE_KEYS, "substitute"), "[[rule]]")
    strings = _Reader(address, table)
    substitutes = table.get("substitute", [])
    if not isinstance(substitutes, list) or not all(isinstance(t, dict) for t in substitutes):
        message = "'substitute' must be an array of tables, written [[rule.substitute]]"
        raise SchemaError(address, "substitute", message)
    return Rule(
        number=index + 1,
        host=strings.text("host", "*").lower(),
        path=strings.text("path", "*"),
        profile=strings.text("profile", "*"),
        ignore=strings.items("ignore", _body_path),
        keep=strings.items("keep", _body_path),
        ignore_query=frozenset(strings.items("ignore_query", _name)),
        key_headers=frozenset(name.lower() for name in strings.items("key_headers", _name)),
        substitute=tuple(
            _substitution((*address, "substitute", position), substitute)
            for position, substitute in enumerate(substitutes)
        ),
    )


def _substitution(address: Address, table: dict[str, Any]) -> Substitution:
    _refuse_unknown(address, table, _SUBSTITUTE_KEYS, "[[rule.substitute]]")
    strings = _Reader(address, table)
    path = strings.parsed("path", _EVERY_STRING, parse_path)
    pattern = strings.parsed("pattern", None, linear_pattern)
    replacement = strings.text("replacement", None)
    # The template is checked against a pattern with the same groups: RE2 reads it only
    # when a match is replaced, and a bad one must fail here, not on some later request.
    # `re` says "unknown group name" with an IndexError, any other fault with re.error.
    names = {index: name for name, index in pattern.groupindex.items()}
    groups = (f"(?P<{names[n]}>)" if n in names else "()" for n in range(1, pattern.groups + 1))
    try:
        re.compile("".join(groups)).sub(replacement, "")
    except (re.error, IndexError) as error:
        raise SchemaError(address, "replacement", f"bad replacement: {error}") from None
    return Substitution(path, pattern.pattern, replacement)


def _refuse_unknown(
    address: Address, table: dict[str, Any], known: tuple[str, ...], where: str
) -> None:
    for key in table:
        if key not in known:
            expected = ", ".join(known)
            raise SchemaError(address, key, f"unknown key {key!r} in {where}; known: {expected}")


class _Reader:
    """Reads typed values out of one table, complaining in terms of the table's own keys."""

    def __init__(self, address: Address, table: dict[str, Any]) -> None:
        self._address = address
        self._table = table

    def text(self, key: str, default: str | None) -> str:
        """A string; a None default makes the key required."""
        if key not in self._table:
            if default is None:
                raise SchemaError(self._address, None, f"missing required key {key!r}")
            return default
        value = self._table[key]
        if not isinstance(value, str):
            raise SchemaError(self._address, key, f"{key!r} must be a string, not {_kind(value)}")
        return value

    def parsed[T](self, key: str, default: str | None, parse: Callable[[str], T]) -> T:
        """A string read by `parse`, whose ValueError (a pattern RE2 refuses, BadPath)
        becomes the message."""
        text = self.text(key, default)
        try:
            return parse(text)
        except (ValueError, BadPath) as error:
            raise SchemaError(self._address, key, f"bad {key}: {error}") from None

    def items[T](self, key: str, parse: Callable[[str], T]) -> tuple[T, ...]:
        """An array of strings, each read by `parse`."""
        values = self._table.get(key, [])
        if not isinstance(values, list):
            message = f"{key!r} must be an array of strings, not {_kind(values)}"
            raise SchemaError(self._address, key, message)
        parsed: list[T] = []
        for position, item in enumerate(values, start=1):
            if not isinstance(item, str):
                message = f"{key!r} must hold only strings; item {position} is {_kind(item)}"
                raise SchemaError(self._address, key, message)
            try:
                parsed.append(parse(item))
            except ValueError as error:
                raise SchemaError(self._address, key, f"bad {key}: {error}") from None
        return tuple(parsed)


def _body_path(text: str) -> JsonPath:
    """A path naming a part of the body; `$` itself is refused, as a key needs some body."""
    path = parse_path(text)
    if not path.steps:
        raise ValueError("'$' is the whole body; name a part of it")
    return path


def _name(text: str) -> str:
    if not text:
        raise ValueError("names must not be empty")
    return text


def _kind(value: object) -> str:
    """Name a value's type in TOML's words, as the user wrote TOML."""
    names: list[tuple[type | tuple[type, ...], str]] = [
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list, "an array"),
        (dict, "a table"),
        ((datetime, date, time), "a date or time"),
    ]
    for types, name in names:
        if isinstance(value, types):
            return name
    return type(value).__name__
