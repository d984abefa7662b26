"""The values that cross the package boundary: what goes in, what comes out, and the options.

All are frozen so a key, once computed, cannot drift from the request and options it came from.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Self
from urllib.parse import parse_qsl

from blake3 import blake3

from .ruleset import RuleSet
from .volatile import DEFAULT_VOLATILE_FIELDS


@dataclass(frozen=True, slots=True)
class RequestView:
    """A request as the proxy already decoded it, so this package never needs mitmproxy.

    `path` excludes the query and keeps its percent-encoding as sent, because servers differ in
    how they decode it. `body` is content-decoded (no gzip), because compression settings are
    transport detail, not meaning.
    """

    method: str
    scheme: str
    host: str
    port: int
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes
    content_type: str = ""

    @classmethod
    def of(
        cls,
        method: str,
        scheme: str,
        host: str,
        port: int,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
    ) -> Self:
        """The one way a request view is built, by the proxy, ``rekey`` and ``explain``
        alike, so that all three compute the same key for the same request.

        ``target`` is the path and query string as sent; ``body`` is content-decoded. The
        content type is every ``Content-Type`` value joined by ", ", as mitmproxy reads a
        repeated header.
        """
        path, _, query = target.partition("?")
        content_type = ", ".join(value for name, value in headers if name.lower() == "content-type")
        return cls(
            method=method,
            scheme=scheme,
            host=host,
            port=port,
            path=path,
            query=tuple(parse_qsl(query, keep_blank_values=True)),
            headers=tuple(headers),
            body=body,
            content_type=content_type,
        )


@dataclass(frozen=True, slots=True)
class BodyDigest:
    """Content known only by its blake3 digest (lowercase hex) and its length in bytes.

    This is how a key describes any content it does not read (an opaque body, a file in a
    multipart form), so content too large to hold can be keyed from a digest computed as it
    streamed: `BodyDigest.of(data)` is what keying `data` itself would record.
    """

    blake3: str
    length: int

    @classmethod
    def of(cls, data: bytes) -> Self:
        return cls(blake3(data).hexdigest(), len(data))


@dataclass(frozen=True, slots=True)
class FormPart:
    """One part of a `multipart/form-data` body, as a server reads it, for keying a form
    whose file contents are known only by digest (see `canonicalize`'s `multipart_parts`).

    `content` is the part's bytes, or a `BodyDigest` of them. Given as bytes, the part is
    described exactly as in a body read whole: a text field (no `filename`) that is UTF-8 by
    its value, anything else by digest and length. Given as a digest, it is always described
    by digest and length, as a file or non-UTF-8 field would be.
    """

    name: str
    content: bytes | BodyDigest
    filename: str | None = None
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class Stripped:
    """A part left out of the key, kept as a digest so later drift in it can still be noticed.

    `part` names it (`body:$.user`, `query:ts`, `form:nonce`, `part:nonce`), `rule` says which
    profile or rule removed it (`openai.chat-completions`, `mcp`, `default-volatile`, `user:2`,
    or `user:2:substitute` for a string rewritten rather than removed), and `digest` is the
    first 16 hex digits of the blake3 of the original value's canonical JSON; the value itself
    is not kept because volatile fields often carry user identifiers.
    """

    part: str
    rule: str
    digest: str


@dataclass(frozen=True, slots=True)
class Canonical:
    """A request's replay key together with everything needed to explain it.

    `form` is kept beside `key` so a replay miss can show what differs instead of two hashes.
    `body_kind` is "empty", "json", "form", "multipart" or "bytes"; `warnings` say when the
    request claimed one thing and was keyed as another. `profile` names the built-in profile
    that decided which fields count ("openai.chat-completions", "anthropic.messages", "mcp",
    "generic.json", …), so explain can say why a field was or was not part of the key.
    """

    key: str
    form: bytes
    stripped: tuple[Stripped, ...]
    body_kind: str
    warnings: tuple[str, ...]
    profile: str


@dataclass(frozen=True, slots=True)
class KeyConfig:
    """The options that decide what goes into a key, fixed once per run.

    Header names are compared case-insensitively (HTTP says they are), so they are lower-cased
    here once rather than on every request; query names stay case-sensitive because servers
    treat them so. `volatile_fields` are top-level body fields (and form fields) left out
    whatever the profile; `rules` are the user's, applied after the profile.
    """

    volatile_fields: frozenset[str] = DEFAULT_VOLATILE_FIELDS
    volatile_query: frozenset[str] = frozenset()
    key_headers: frozenset[str] = frozenset()
    rules: RuleSet = RuleSet.empty()

    def __post_init__(self) -> None:
        lowered = frozenset(name.lower() for name in self.key_headers)
        object.__setattr__(self, "key_headers", lowered)


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where a live request's canonical form departs from a recorded one.

    `path` is "method", "url.host", "query.page", "header.accept", "$.messages[0].content", or
    "body" for bodies not keyed as JSON. `live` and `recorded` are abridged compact JSON (at
    most 80 characters) or "(absent)", short enough to print in a miss report.
    """

    path: str
    live: str
    recorded: str


class DifferenceLike(Protocol):
    """What reading a difference needs (`said`, what-if's rule for a miss): a `Difference`,
    or the store's record of one in a miss (storage.Difference), which is a type of its own
    because canonicalize and storage import nothing of each other."""

    @property
    def path(self) -> str: ...
    @property
    def live(self) -> str: ...
    @property
    def recorded(self) -> str: ...
