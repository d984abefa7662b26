"""JSON read and written with value semantics: the parser and encoder behind canonical forms.

Two documents a server would read as the same must encode to the same text, so object key
order, whitespace and number spelling are erased; everything a server can tell apart (string
contents, array order, types) is kept.
"""

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import NoReturn

from blake3 import blake3

MAX_DEPTH = 256
"""The deepest nesting read as JSON.

Real API bodies stay far shallower; the cap keeps the recursive encoder and diff walker clear
of Python's recursion limit, so a hostile body is keyed by its bytes instead of crashing.
"""

_PLAIN_EXPONENT_LIMIT = 64
"""Beyond this many zeros a number is written in scientific form, so `1e999999` stays small."""

_UTF8_BOM = b"\xef\xbb\xbf"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Number:
    """A JSON number held as its one canonical token.

    A token rather than a Decimal so that equal values compare equal with plain `==` and never
    equal `True` (which `Decimal(1)` does), keeping diffs exact without special cases.
    """

    token: str


type JsonValue = None | bool | int | str | Number | list[JsonValue] | dict[str, JsonValue]


class NotJson(ValueError):
    """The body is not JSON; the message completes "body claims JSON but …" in a warning."""


def decode_json(data: bytes, max_depth: int = MAX_DEPTH) -> JsonValue:
    """Read UTF-8 JSON (optional BOM) with every number reduced to its canonical token.

    Raises only NotJson, whatever the bytes, so callers can fall back to keying by bytes.
    Duplicate object members keep the last value, as most servers' parsers do. `max_depth` is
    raised only to read a whole canonical form, which wraps a body one level deeper.
    """
    offset = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        text = data[offset:].decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotJson(f"is not valid UTF-8 at byte {offset + error.start}") from None
    try:
        value: JsonValue = json.loads(
            text, parse_int=_number, parse_float=_number, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        at = offset + len(text[: error.pos].encode())
        raise NotJson(f"is not valid JSON at byte {at}: {error.msg}") from None
    except RecursionError:
        raise NotJson(f"nests deeper than {max_depth} levels") from None
    except InvalidOperation:
        raise NotJson("holds a number whose exponent is out of range") from None
    if _nests_deeper_than(max_depth, value):
        raise NotJson(f"nests deeper than {max_depth} levels")
    return value


def encode_json(value: JsonValue) -> str:
    """Write compact JSON with sorted keys, the same text `json.dumps` gives for plain data.

    Hand-written because `json.dumps` cannot emit canonical number tokens; lone surrogates
    (from `\\ud800` escapes or surrogate-escaped headers) are written as escapes so the text
    always encodes to UTF-8.
    """
    match value:
        case None:
            return "null"
        case bool():
            return "true" if value else "false"
        case int():
            return str(value)
        case Number(token=token):
            return token
        case str():
            return _encode_string(value)
        case list():
            return "[" + ",".join(encode_json(item) for item in value) + "]"
        case dict():
            members = sorted(value.items(), key=lambda member: member[0])
            return "{" + ",".join(f"{_encode_string(k)}:{encode_json(v)}" for k, v in members) + "}"


def short_digest(value: JsonValue) -> str:
    """Fingerprint a value left out of a key: enough to notice drift, too short to store it."""
    return blake3(encode_json(value).encode()).hexdigest()[:16]


def _number(token: str) -> Number:
    """Reduce a JSON number token to the one spelling of its exact value.

    Integral values become plain integers (`1.0`, `1e0` and `10E-1` all become `1`), others the
    shortest exact decimal (`0.10` becomes `0.1`); exactness is kept, so `0.1000000000000000001`
    stays distinct from `0.1`. Zero loses its sign because `-0` and `0` are the same value.
    """
    sign, digits, exponent = Decimal(token).as_tuple()
    assert isinstance(exponent, int), "the JSON grammar has no NaN or Infinity number token"
    spelled = "".join(map(str, digits))
    coefficient = spelled.rstrip("0")
    if not coefficient:
        return Number("0")
    exponent += len(spelled) - len(coefficient)
    minus = "-" if sign else ""
    if abs(exponent) > _PLAIN_EXPONENT_LIMIT:
        fraction = f".{coefficient[1:]}" if len(coefficient) > 1 else ""
        scientific = exponent + len(coefficient) - 1
        return Number(f"{minus}{coefficient[0]}{fraction}E{scientific:+d}")
    if exponent >= 0:
        return Number(f"{minus}{coefficient}{'0' * exponent}")
    point = len(coefficient) + exponent
    if point > 0:
        return Number(f"{minus}{coefficient[:point]}.{coefficient[point:]}")
    return Number(f"{minus}0.{'0' * -point}{coefficient}")


def _reject_constant(name: str) -> NoReturn:
    """Refuse the NaN and Infinity literals Python's parser accepts but JSON does not."""
    raise NotJson(f"contains {name}, which JSON does not allow")


def _nests_deeper_than(max_depth: int, value: JsonValue) -> bool:
    """Measure nesting without recursion, since the value may be as deep as the parser allowed."""
    pending: list[tuple[JsonValue, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, dict | list):
            continue
        if depth == max_depth:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children)
    return False


def _encode_string(text: str) -> str:
    """Quote a string as JSON, escaping lone surrogates that UTF-8 cannot carry."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)
