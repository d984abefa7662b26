"""What makes a value a credential: the name it goes by, or the shape it has.

Two questions, answered in one place for every reader of traffic (storage.redaction):

* ``secret_name`` says whether a *name* means a credential: a header, a JSON member at any
  depth, a form or multipart field, a query parameter. Names are matched by what they mean
  (the words they are made of), not from a list, because every API spells its own:
  ``X-Vault-Token``, ``Ocp-Apim-Subscription-Key``, ``authorization_token``, ``apiKey``.
* ``RULES`` are the key *shapes* (``credential_rules.toml``), each with the examples it must
  catch and the look-alikes it must leave, read once at import and compiled for RE2.
"""

from __future__ import annotations

import enum
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


class Secret(enum.Enum):
    """What a name says about its value."""

    NO = 0
    """Not a credential (``max_tokens``, ``token_count``, ``pageToken``)."""
    ALWAYS = 1
    """A credential whatever it looks like (``password``, ``x-vault-token``)."""
    IF_SHAPED = 2
    """A credential when the value looks like one (16 or more key characters): a bare
    ``token`` is also a logprob's text, a bare ``secret`` a flag's name, ``key`` a key
    press; ``key`` counts only in a query (Google's ``?key=``)."""


_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""camelCase, PascalCase, snake_case and kebab-case split into their words."""

_SECRET_WORDS = frozenset(
    {
        "authorization",
        "auth",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "apikey",
        "credential",
        "credentials",
        "cookie",
    }
)
"""A name made with one of these words names a credential."""

_KEY_KINDS = frozenset(
    {
        "api",
        "access",
        "subscription",
        "private",
        "secret",
        "master",
        "service",
        "signing",
        "encryption",
        "account",
        "auth",
        "license",
        "shared",
        "primary",
        "secondary",
        "client",
        "admin",
        "deploy",
        "session",
        "webhook",
        "functions",
        "host",
        "role",
    }
)
"""``<kind> … key`` names a credential (``api_key``, ``x-api-key``, ``xi-api-key``,
``aws_secret_access_key``, ``Ocp-Apim-Subscription-Key``); ``key`` alone does not (a key
press, an object's key in storage, ``Sec-WebSocket-Key``'s nonce)."""

_NOT_SECRET_WORDS = frozenset(
    {
        # CORS: which credentials a browser may send, not one
        "allow",
        "expose",
        # counts, limits and budgets of tokens (usage, rate limits, request settings)
        "count",
        "counts",
        "max",
        "min",
        "limit",
        "limits",
        "remaining",
        "reset",
        "usage",
        "budget",
        "used",
        "num",
        "number",
        "length",
        "estimate",
        "estimated",
        # what a credential is, where, and till when: not the credential
        "type",
        "types",
        "name",
        "names",
        "url",
        "uri",
        "endpoint",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "hint",
        "required",
        "enabled",
        "mode",
        "scheme",
        "prefix",
        # paging cursors, which must stay in a request's key to tell pages apart
        "page",
        "next",
        "prev",
        "previous",
        "cursor",
        "continuation",
        "sync",
    }
)
"""A name with one of these words names something about a credential, never one."""

_QUERY_ALWAYS = frozenset({"sig", "signature", "x_amz_credential", "x_amz_signature"})
"""A SAS ``sig``, a presigned URL's signature and credential scope; ``key`` is Google's."""


@lru_cache(maxsize=4096)
def secret_name(name: str, *, query: bool = False) -> Secret:
    """Whether a name (any case, ``-`` or ``_`` or camelCase) names a credential.

    ``query`` for a query parameter, where a few short names are credentials that would
    be too common elsewhere (``sig``, ``key``).
    """
    words = tuple(word.lower() for word in _WORDS.findall(name))
    while words and words[-1].isdigit():  # ``X-Api-Key-2``
        words = words[:-1]
    if not words:
        return Secret.NO
    joined = "_".join(words)
    if query and joined in _QUERY_ALWAYS:
        return Secret.ALWAYS
    if query and joined == "key":
        return Secret.IF_SHAPED
    if any(word in _NOT_SECRET_WORDS for word in words) or words[-1] in ("id", "ids"):
        return Secret.NO  # (an ``AccessKeyId`` names a key; ``id_token`` is one)
    if words in (("token",), ("secret",)):
        return Secret.IF_SHAPED
    if any(word in _SECRET_WORDS for word in words):
        return Secret.ALWAYS
    if words[-1] in ("key", "keys") and any(word in _KEY_KINDS for word in words[:-1]):
        return Secret.ALWAYS
    return Secret.NO


_CREDENTIAL_CHARS = re.compile(rb"[A-Za-z0-9._~+/=\-%]{16,}")


def looks_like_credential(value: bytes) -> bool:
    """16 or more characters of base64, hex or URL-safe text, and no spaces: a logprob's
    ``"token": "Hello"`` is not one."""
    return _CREDENTIAL_CHARS.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Rule:
    """One key shape, as read from ``credential_rules.toml``."""

    id: str
    description: str
    source: str
    pattern: str
    """The RE2 pattern: the prefix, in each spelling it may be written in, then the regex."""
    examples: tuple[str, ...]
    not_examples: tuple[str, ...]


def _hex_escapes(char: str) -> str:
    code = f"{ord(char):04x}"
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in code)


def _spelled(char: str) -> str:
    r"""A character as written raw, JSON-escaped (``\u0073``), or for a dash, form-encoded."""
    raw = re.escape(char)
    escaped = r"\\u" + _hex_escapes(char)
    if char == "-":
        return rf"(?:-|{escaped}|%2[dD])"
    return f"(?:{raw}|{escaped})"


def prefix_pattern(prefix: str, *, boundary: bool = True) -> str:
    r"""A literal prefix after a word boundary (or anywhere), or with its first letter
    JSON-escaped (where no word boundary is: ``"\u0073k-…``); each later character raw or
    escaped too."""
    if not prefix:
        return ""
    first = prefix[0]
    bound = r"\b" if boundary else ""
    head = rf"(?:{bound}{re.escape(first)}|\\u{_hex_escapes(first)})"
    return head + "".join(_spelled(char) for char in prefix[1:])


def load_rules(text: str) -> tuple[Rule, ...]:
    """Rules from the TOML text of a rules file; a rule without examples is refused."""
    rules = []
    for index, entry in enumerate(tomllib.loads(text).get("rule", ())):
        try:
            rule = Rule(
                id=entry["id"],
                description=entry["description"],
                source=entry["source"],
                pattern=prefix_pattern(
                    entry.get("prefix", ""), boundary=entry.get("boundary", True)
                )
                + entry["regex"],
                examples=tuple(entry["examples"]),
                not_examples=tuple(entry.get("not", ())),
            )
        except KeyError as missing:
            raise ValueError(f"credential rule {index + 1}: no {missing.args[0]!r}") from None
        if not rule.examples:
            raise ValueError(f"credential rule {rule.id!r}: no examples")
        rules.append(rule)
    return tuple(rules)


RULES: tuple[Rule, ...] = load_rules(
    resources.files(__package__).joinpath("credential_rules.toml").read_text("utf-8")
)
"""The key shapes freezeframe knows, in file order."""
