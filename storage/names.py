"""What a cassette may be called.

Cassette names arrive from flags, environment variables and a per-request header, and
end up in file names of exports and in URLs of the admin UI. A conservative alphabet
keeps every one of those safe without escaping, so a bad name is refused where it
enters instead of being mangled somewhere later.
"""

from __future__ import annotations

import re

MAX_LENGTH = 128
_ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")


class InvalidCassetteName(ValueError):
    pass


def validate_cassette_name(name: str) -> str:
    """Return ``name`` unchanged if it is usable, else raise with the reason."""
    if not name:
        raise InvalidCassetteName("invalid cassette name '': it is empty")
    shown = name.encode("unicode_escape").decode("ascii")[: MAX_LENGTH + 8]
    if len(name) > MAX_LENGTH:
        raise InvalidCassetteName(
            f"invalid cassette name {shown!r}: longer than {MAX_LENGTH} characters"
        )
    if ".." in name or not _ALLOWED.fullmatch(name):
        raise InvalidCassetteName(
            f"invalid cassette name {shown!r}: use letters, digits and . _ - : @ + = "
            "(starting with a letter or digit, no '..', no '/', no control characters)"
        )
    return name


def closest_names(name: str, known: list[str], n: int = 3) -> list[str]:
    """The names in ``known`` that ``name`` is most likely a typo of, the closest first (none
    when nothing is close): the proxy warns with them at start, and every command that is
    given a cassette the store does not hold suggests them."""
    import difflib

    return difflib.get_close_matches(name, known, n=n, cutoff=0.6)
