"""The replay key: the one place a request's canonical form is built and hashed."""

from collections.abc import Sequence

from blake3 import blake3

from .body import ReadBody, read_body, read_digest, read_parts
from .jsonbody import JsonValue, encode_json, encode_json_utf8, short_digest
from .keyedbody import keyed_body
from .model import BodyDigest, Canonical, FormPart, KeyConfig, RequestView, Stripped
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


def canonicalize(
    view: RequestView,
    config: KeyConfig = _DEFAULT_CONFIG,
    *,
    body_digest: BodyDigest | None = None,
    multipart_parts: Sequence[FormPart] | None = None,
) -> Canonical:
    """Reduce a request to the parts an upstream's answer depends on, and key it.

    Method, scheme and host are case-normalized because HTTP treats them case-insensitively;
    the path is kept as sent because servers may not. Query order is dropped because servers
    look parameters up by name. Headers stay out unless the profile, the configuration or a
    rule names them, since clients vary them freely (user agents, auth tokens, SDK telemetry)
    without changing the question asked.

    A body too large to hold can be keyed without its bytes, given instead of `view.body`
    (which must then be empty; `view.content_type` is not consulted for it):

    - `body_digest`: the body as opaque bytes, known by digest and length. The key is the
      one `view.body` would get whenever it would be read as opaque bytes (a non-empty body
      of any content type but JSON, a URL-encoded form or multipart, or one that is not what
      its type claims, bar that claim's warning). A digest of length 0 is still keyed as
      bytes, not as an empty body.
    - `multipart_parts`: a multipart form, part by part in the order sent, each part's
      content as bytes or as a `BodyDigest`. The key is the one the whole body would get,
      whatever its boundary, provided a digest is given only for a file or for content
      that is not UTF-8 (a text field given by digest is keyed by digest, not by value).
    """
    body = _read(view, body_digest, multipart_parts)
    return _canonical(view, config, body)


def _read(
    view: RequestView, digest: BodyDigest | None, parts: Sequence[FormPart] | None
) -> ReadBody:
    """The body as read: from its bytes, or from the digest or parts given in their place."""
    if digest is None and parts is None:
        return read_body(view.body, view.content_type)
    if digest is not None and parts is not None:
        raise ValueError("give a body digest or multipart parts, not both")
    if view.body:
        raise ValueError("a body given by digest or by parts needs an empty view.body")
    return read_digest(digest) if digest is not None else read_parts(parts or ())


def _canonical(view: RequestView, config: KeyConfig, body: ReadBody) -> Canonical:
    """Build and hash the canonical form of a request whose body has been read."""
    host = view.host.lower()
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
    prefixes = profile.key_header_prefixes
    chosen = sorted(
        (name.lower(), value)
        for name, value in headers
        if name.lower() in wanted or name.lower().startswith(prefixes)
    )
    lists = profile.token_list_headers
    pairs: list[JsonValue] = [[name, value] for name, value in chosen if name not in lists]
    for name in sorted(lists & {name for name, _ in chosen}):
        tokens = {token.strip() for n, value in chosen if n == name for token in value.split(",")}
        pairs.append([name, ",".join(sorted(tokens - {""}))])
    return sorted(pairs, key=lambda pair: encode_json(pair))
