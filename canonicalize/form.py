"""URL-encoded form bodies (`application/x-www-form-urlencoded`) read as name and value pairs.

Servers decode a form before looking at it, so the key is built from what they see: field
order, `+` against `%20` and the case of percent-escapes are spelling, not meaning.
"""

from urllib.parse import parse_qsl


def read_form(body: bytes) -> tuple[tuple[str, str], ...]:
    """Decode every field, sorted by name then value, as the query string is.

    Never fails: bytes that are not UTF-8, raw or percent-escaped, are carried as surrogate
    escapes, so they still tell bodies apart and still encode into a canonical form.
    """
    text = body.decode("utf-8", "surrogateescape")
    pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="surrogateescape")
    return tuple(sorted(pairs))
