"""The replay key: the one place a request's canonical form is built and hashed."""

from blake3 import blake3

from .body import read_body
from .jsonbody import JsonValue, encode_json, encode_json_utf8, short_digest
from .keyedbody import keyed_body
from .model import Canonical, KeyConfig, RequestView, Stripped
from .profiles import Profile, select_profile
from .ruleset import Rule
from .volatile import CONFIG_RULE

SCHEME_VERSION: int = 3
"""Bumped whenever the canonical form changes, so keys from different forms never collide.

2: provider profiles, form and multipart bodies read by field, user rules.
"""

_KEY_DOMAIN = b"freezeframe/key/v%d\n" % SCHEME_VERSION
_DEFAULT_CONFIG = KeyConfig()


def form_key(form: bytes) -> str:
    """Hash a canonical form, prefixed with the scheme version so no other blake3 use collides."""
    hasher = blake3(_KEY_DOMAIN)
    hasher.update(form)
    return hasher.hexdigest()


def canonicalize(view: RequestView, config: KeyConfig = _DEFAULT_CONFIG) -> Canonical:
    """Reduce a request to the parts an upstream's answer depends on, and key it.

    Method, scheme and host are case-normalized because HTTP treats them case-insensitively;
    the path is kept as sent because servers may not. Query order is dropped because servers
    look parameters up by name. Headers stay out unless the profile, the configuration or a
    rule names them, since clients vary them freely (user agents, auth tokens, SDK telemetry)
    without changing the question asked.
    """
    host = view.host.lower()
    body = read_body(view.body, view.content_type)
    profile = select_profile(view.path, body)
    rules = config.rules.matching(host, view.path, profile.name)
    body_value, body_stripped = keyed_body(body, profile, config.volatile_fields, rules)
    query, query_stripped = _canonical_query(view.query, config.volatile_query, rules)
    document: dict[str, JsonValue] = {
        "v": SCHEME_VERSION,
        "method": view.method.upper(),
        "scheme": view.scheme.lower(),
        "host": host,
        "port": view.port,
        "path": view.path,
        "query": query,
        "body": body_value,
        "body_kind": body.kind,
    }
    headers = _key_headers(view.headers, config.key_headers, profile, rules)
    if headers:
        document["headers"] = headers
    form = encode_json_utf8(document)
    return Canonical(
        key=form_key(form),
        form=form,
        stripped=body_stripped + query_stripped,
        body_kind=body.kind,
        warnings=body.warnings,
        profile=profile.name,
    )


def _canonical_query(
    pairs: tuple[tuple[str, str], ...], volatile: frozenset[str], rules: tuple[Rule, ...]
) -> tuple[list[JsonValue], tuple[Stripped, ...]]:
    """Sort parameters by name then value, setting aside configured and rule-ignored names."""
    dropped = dict.fromkeys(volatile, CONFIG_RULE)
    for rule in rules:
        for name in sorted(rule.ignore_query):
            dropped.setdefault(name, rule.name)
    kept: list[JsonValue] = []
    stripped: list[Stripped] = []
    for name, value in sorted(pairs):
        if name in dropped:
            stripped.append(Stripped(f"query:{name}", dropped[name], short_digest(value)))
        else:
            kept.append([name, value])
    return kept, tuple(stripped)


def _key_headers(
    headers: tuple[tuple[str, str], ...],
    configured: frozenset[str],
    profile: Profile,
    rules: tuple[Rule, ...],
) -> list[JsonValue]:
    """Keep only the named headers, lower-cased and sorted, as HTTP ignores name case.

    A token-list header is reduced to its sorted, distinct tokens, however the client split
    them across lines or ordered them.
    """
    wanted = configured | profile.key_headers
    for rule in rules:
        wanted |= rule.key_headers
    chosen = sorted((name.lower(), value) for name, value in headers if name.lower() in wanted)
    lists = profile.token_list_headers
    pairs: list[JsonValue] = [[name, value] for name, value in chosen if name not in lists]
    for name in sorted(lists & {name for name, _ in chosen}):
        tokens = {token.strip() for n, value in chosen if n == name for token in value.split(",")}
        pairs.append([name, ",".join(sorted(tokens - {""}))])
    return sorted(pairs, key=lambda pair: encode_json(pair))
