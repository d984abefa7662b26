"""The replay key: the one place a request's canonical form is built and hashed."""

from blake3 import blake3

from .body import canonical_body
from .jsonbody import JsonValue, encode_json, short_digest
from .model import Canonical, KeyConfig, RequestView, Stripped
from .volatile import CONFIG_RULE

SCHEME_VERSION: int = 1
"""Bumped whenever the canonical form changes, so keys from different forms never collide."""

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
    look parameters up by name. Headers stay out unless configured, since clients vary them
    freely (user agents, auth tokens) without changing the question asked.
    """
    body = canonical_body(view.body, view.content_type, config.volatile_fields)
    query, query_stripped = _canonical_query(view.query, config.volatile_query)
    document: dict[str, JsonValue] = {
        "v": SCHEME_VERSION,
        "method": view.method.upper(),
        "scheme": view.scheme.lower(),
        "host": view.host.lower(),
        "port": view.port,
        "path": view.path,
        "query": query,
        "body": body.value,
        "body_kind": body.kind,
    }
    headers = _key_headers(view.headers, config.key_headers)
    if headers:
        document["headers"] = headers
    form = encode_json(document).encode()
    return Canonical(
        key=form_key(form),
        form=form,
        stripped=body.stripped + query_stripped,
        body_kind=body.kind,
        warnings=body.warnings,
    )


def _canonical_query(
    pairs: tuple[tuple[str, str], ...], volatile: frozenset[str]
) -> tuple[list[JsonValue], tuple[Stripped, ...]]:
    """Sort parameters by name then value, setting aside the configured volatile names."""
    kept: list[JsonValue] = []
    stripped: list[Stripped] = []
    for name, value in sorted(pairs):
        if name in volatile:
            stripped.append(Stripped(f"query:{name}", CONFIG_RULE, short_digest(value)))
        else:
            kept.append([name, value])
    return kept, tuple(stripped)


def _key_headers(headers: tuple[tuple[str, str], ...], wanted: frozenset[str]) -> list[JsonValue]:
    """Keep only the configured headers, lower-cased and sorted, as HTTP ignores name case."""
    chosen = sorted((name.lower(), value) for name, value in headers if name.lower() in wanted)
    return [[name, value] for name, value in chosen]
