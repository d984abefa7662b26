"""Key rules a user wrote, as validated values: which requests they cover and what they change.

Kept apart from the file format (`rules.py`) so a key configuration can hold rules without
knowing they came from TOML, and so rules compare and hash by value like the rest of KeyConfig.
"""

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from .jsonpath import JsonPath
from .patterns import linear_pattern


@dataclass(frozen=True, slots=True)
class Substitution:
    """Rewrite every match of `pattern` in the strings at `path`, as `re.sub` does."""

    path: JsonPath
    pattern: str
    replacement: str
    compiled: Any = field(init=False, compare=False, repr=False)
    """``pattern`` compiled by RE2 (patterns.linear_pattern): it matches in linear time."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", linear_pattern(self.pattern))


@dataclass(frozen=True, slots=True)
class Rule:
    """One `[[rule]]`: where it applies (globs) and what it does to the key there.

    `number` is its 1-based position in the file; explain credits what it strips to
    `user:<number>`, so a surprising key can be traced to the rule that shaped it.
    """

    number: int
    host: str = "*"
    path: str = "*"
    profile: str = "*"
    ignore: tuple[JsonPath, ...] = ()
    keep: tuple[JsonPath, ...] = ()
    ignore_query: frozenset[str] = frozenset()
    key_headers: frozenset[str] = frozenset()
    substitute: tuple[Substitution, ...] = ()

    @property
    def name(self) -> str:
        return f"user:{self.number}"

    def applies_to(self, host: str, path: str, profile: str) -> bool:
        """Match all three globs.

        The host arrives lower-cased and the host glob was lower-cased at load, since host
        names are case-insensitive; paths and profile names are matched as written.
        """
        return (
            fnmatchcase(host, self.host)
            and fnmatchcase(path, self.path)
            and fnmatchcase(profile, self.profile)
        )


ROUTE_MODES = ("replay", "record", "passthrough", "auto")


@dataclass(frozen=True, slots=True)
class Route:
    """One `[[route]]`: requests it matches (globs) and the mode they get in a replay.

    Routes do not change keys. They are here because they are written in the same file as
    the rules, checked the same way, and travel with them; the proxy reads them.
    """

    number: int
    host: str = "*"
    path: str = "*"
    mode: str = "replay"
    port: int | None = None
    """Only this port, when given (``--live localhost:8443``)."""

    def applies_to(self, host: str, path: str, port: int | None = None) -> bool:
        """Match both globs (and the port, if the route names one); the host arrives
        lower-cased and the glob was lower-cased."""
        if self.port is not None and port != self.port:
            return False
        return fnmatchcase(host, self.host) and fnmatchcase(path, self.path)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Every rule of one file, in file order, the order in which their substitutions run,
    and its routes, in file order, of which the first that matches a request applies."""

    rules: tuple[Rule, ...] = ()
    routes: tuple[Route, ...] = ()

    @classmethod
    def empty(cls) -> "RuleSet":
        return cls()

    def route(self, host: str, path: str, port: int | None = None) -> Route | None:
        return next((r for r in self.routes if r.applies_to(host, path, port)), None)

    def matching(self, host: str, path: str, profile: str) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.applies_to(host, path, profile))
