"""The body's share of a key, and a record of everything taken out of it or rewritten.

Three authorities decide what is left: the profile, the configured volatile fields and the
user's rules, in that order, the first to drop a part being the one credited with it.
"""

from collections.abc import Iterator

from .body import ReadBody
from .jsonbody import JsonValue, short_digest
from .jsonpath import JsonPath, member
from .model import Stripped
from .profiles import Profile
from .prune import Drop, drop_empty, prune, prune_fields, substitute
from .ruleset import Rule
from .volatile import rule_for

_FIELD_LABELS = {"form": "form", "multipart": "part"}


def keyed_body(
    body: ReadBody, profile: Profile, volatile: frozenset[str], rules: tuple[Rule, ...]
) -> tuple[JsonValue, tuple[Stripped, ...]]:
    """Apply the drops, then the rules' substitutions in file order.

    Stripped parts come sorted by part, so they do not depend on the body's member order.
    A profile that drops the whole body leaves one stripped part, ``body``.
    """
    if profile.drop_body and body.kind != "empty":
        whole: JsonValue = body.value
        if body.kind not in ("json", "bytes"):
            whole = [[name, value] for name, value in body.fields]
        return None, (Stripped("body", profile.name, short_digest(whole)),)
    if body.kind == "json":
        value, stripped = _keyed_json(body.value, profile, volatile, rules)
    elif body.kind in _FIELD_LABELS:
        value, stripped = _keyed_fields(body, profile, volatile, rules)
    else:
        return body.value, ()
    return value, tuple(sorted(stripped, key=lambda entry: entry.part))


def _keyed_json(
    value: JsonValue, profile: Profile, volatile: frozenset[str], rules: tuple[Rule, ...]
) -> tuple[JsonValue, list[Stripped]]:
    """Prune a JSON body, then rewrite its strings.

    Volatile fields are looked for at the top level only: deeper, the same names carry meaning
    (a tool's `user` argument, a message's `metadata`).
    """
    drops = [Drop(path, profile.name) for path in profile.drop]
    if isinstance(value, dict):
        drops += [Drop(member(name), rule_for(name)) for name in sorted(volatile & value.keys())]
    drops += [Drop(path, rule.name) for rule in rules for path in rule.ignore]
    keeps = [*profile.keep, *(path for rule in rules for path in rule.keep)]
    value, stripped = prune(value, drops, keeps)
    value = drop_empty(value, profile.drop_if_empty)
    for rule in rules:
        for substitution in rule.substitute:
            value, rewritten = substitute(value, substitution, f"{rule.name}:substitute")
            stripped += rewritten
    return value, stripped


def _keyed_fields(
    body: ReadBody, profile: Profile, volatile: frozenset[str], rules: tuple[Rule, ...]
) -> tuple[JsonValue, list[Stripped]]:
    """Form fields are dropped by name, each `$.name` path of a profile or rule naming one."""
    drops: dict[str, str] = {}
    for name in _names(profile.drop):
        drops.setdefault(name, profile.name)
    for name in sorted(volatile):
        drops.setdefault(name, rule_for(name))
    for rule in rules:
        for name in _names(rule.ignore):
            drops.setdefault(name, rule.name)
    keeps = {name for rule in rules for name in _names(rule.keep)}
    kept, stripped = prune_fields(body.fields, drops, keeps, _FIELD_LABELS[body.kind])
    return kept, stripped


def _names(paths: tuple[JsonPath, ...]) -> Iterator[str]:
    for path in paths:
        name = path.top_level_name()
        if name is not None:
            yield name
