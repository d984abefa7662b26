"""The variable parts of a URL or an error message, masked, so that one failure reads the same
every time it happens.

Two rate-limit errors that differ only in the tokens used and the seconds to wait, or two
calls of one endpoint that differ only in the order id, are one failure: a person grouping
failures by hand would not tell them apart, and neither does a signature. What is masked:
UUIDs, long hexadecimal strings (hashes, trace ids), tokens mixing letters and digits that
are long enough to be ids (``org-4fQx81Ka``, ``req_7d9c1a``), and numbers. What is kept: words,
punctuation, and short names such as ``gpt-4o``, whose digits still become ``{n}``. The rules
are fixed; changing them changes signatures, so it needs a new SIGNATURE_VERSION
(evidence.signatures).
"""

from __future__ import annotations

import re

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?<![A-Za-z0-9])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}(?![A-Za-z0-9])")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.{])\d+(?:[.,]\d+)*(?![0-9])")
_SPACES = re.compile(r"\s+")
ID_MIN = 8
"""Characters a letters-and-digits token needs before it is taken for an id."""
MESSAGE_MAX = 160
"""Characters of a masked message a signature keeps: enough to tell errors apart."""


def mask_text(text: str) -> str:
    """``text`` with ids, hashes and numbers masked, whitespace collapsed, and cut to
    MESSAGE_MAX characters."""
    masked = _UUID.sub("{id}", text)
    masked = _HEX.sub("{id}", masked)
    masked = _TOKEN.sub(_mask_token, masked)
    masked = _NUMBER.sub("{n}", masked)
    masked = _SPACES.sub(" ", masked).strip()
    return masked if len(masked) <= MESSAGE_MAX else masked[: MESSAGE_MAX - 1] + "…"


def _mask_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if _is_id(token):
        return "{id}"
    return token


def _is_id(token: str) -> bool:
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    return has_digit and has_alpha and len(token) >= ID_MIN and not token.startswith("{")


def path_template(path: str) -> str:
    """The path (its query string left out) with each segment that names one thing (a
    number, a UUID, a hash, an id of letters and digits) replaced by ``{id}``:
    ``/orders/8812/items`` is ``/orders/{id}/items``."""
    segments = path.split("?", 1)[0].split("/")
    return "/".join(_segment(segment) for segment in segments)


def _segment(segment: str) -> str:
    if not segment:
        return segment
    if segment.isdigit() or _UUID.fullmatch(segment) or _HEX.fullmatch(segment):
        return "{id}"
    if _is_id(segment) or (any(c.isdigit() for c in segment) and len(segment) >= ID_MIN):
        return "{id}"
    return segment
