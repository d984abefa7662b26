"""What a profile is: the knowledge of one API about which parts of a request are bookkeeping."""

from collections.abc import Iterable
from dataclasses import dataclass

from ..jsonpath import JsonPath, member


@dataclass(frozen=True, slots=True)
class Profile:
    """Which parts of a request a kind of API answers without looking at.

    `drop` are body paths left out of the key, credited to `name` in explain output. Provider
    profiles are written as a DROP list, not an allowlist: a top-level field the profile does
    not know, such as a parameter newer than freezeframe, stays in the key, because a new
    parameter more likely changes the answer than not, and a needless miss is cheaper than a
    wrong replay. `key_headers` are headers that change the answer and so join the key;
    `token_list_headers` among them hold comma-separated tokens whose order and repetition
    mean nothing (`anthropic-beta: a,b` is `b,a`). `drop_if_empty` are body members the API
    reads the same whether empty (`{}`, `[]`) or absent. `keep` are places inside a
    dropped part that stay in the key all the same; `key_header_prefixes` name families of
    headers (`mcp-param-`) that join the key as `key_headers` do. `drop_body` leaves the whole
    body out of the key (side traffic whose every byte is minted per run: profiles.telemetry).
    """

    name: str
    drop: tuple[JsonPath, ...] = ()
    drop_if_empty: tuple[JsonPath, ...] = ()
    key_headers: frozenset[str] = frozenset()
    token_list_headers: frozenset[str] = frozenset()
    keep: tuple[JsonPath, ...] = ()
    key_header_prefixes: tuple[str, ...] = ()
    drop_body: bool = False


def top_level(names: Iterable[str]) -> tuple[JsonPath, ...]:
    """Paths for top-level body fields, sorted so a profile's behaviour reads in one order."""
    return tuple(member(name) for name in sorted(names))
