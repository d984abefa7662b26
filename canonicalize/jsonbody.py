"""JSON read and written with value semantics: the parser and encoder behind canonical forms.

Two documents a server would read as the same must encode to the same text, so object key
order, whitespace and number spelling are erased; everything a server can tell apart (string
contents, array order, types) is kept.

Every request is keyed through here, so the common case runs in the C parser and encoder of
`json`: `read_json` holds a number as a Python `int` or `float` whenever `json.dumps` writes
that object as the number's canonical token, and `encode_json` uses `json.dumps` whenever
what it writes is provably the canonical text. Everything else (a number whose canonical
token no Python number is written as, a string with a lone surrogate) takes the exact path,
`decode_json` and the hand-written encoder; both paths give the same text, byte for byte.
"""

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import NoReturn

from blake3 import blake3

MAX_DEPTH = 256
"""The deepest nesting read as JSON.

Real API bodies stay far shallower; the cap keeps the recursive encoder and diff walker clear
of Python's recursion limit, so a hostile body is keyed by its bytes instead of crashing.
"""

_PLAIN_EXPONENT_LIMIT = 64
"""Beyond this many zeros a number is written in scientific form, so `1e999999` stays small."""

_MANY_ZEROS = "0" * (_PLAIN_EXPONENT_LIMIT + 1)
"""Text holding no such run holds no integer token that is written in scientific form."""

_INT_DIGITS = 100
"""Integral non-integer tokens (`1.0`, `1e3`) up to this long are held as `int`; longer ones
stay `Number`, clear of the interpreter's limit on converting long integers to text."""

_COUNT_BRACKETS_UP_TO = 64 * 1024
"""Texts up to this long have their brackets counted before their nesting is walked."""

_UTF8_BOM = b"\xef\xbb\xbf"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Number:
    """A JSON number held as its one canonical token.

    A token rather than a Decimal so that equal values compare equal with plain `==` and never
    equal `True` (which `Decimal(1)` does), keeping diffs exact without special cases.
    """

    token: str


type JsonValue = None | bool | int | float | str | Number | list[JsonValue] | dict[str, JsonValue]
"""`decode_json` gives every number as a `Number`; `read_json` gives `int` and `float` too,
but only where `str(int)` or `repr(float)` is the number's canonical token."""


type _Container = list[JsonValue] | dict[str, JsonValue]


class NotJson(ValueError):
    """The body is not JSON; the message completes "body claims JSON but …" in a warning."""


def decode_json(data: bytes, max_depth: int = MAX_DEPTH) -> JsonValue:
    """Read UTF-8 JSON (optional BOM) with every number reduced to its canonical token.

    Raises only NotJson, whatever the bytes, so callers can fall back to keying by bytes.
    Duplicate object members keep the last value, as most servers' parsers do. `max_depth` is
    raised only to read a whole canonical form, which wraps a body one level deeper.
    """
    text, offset = _text(data)
    return _parse(text, offset, max_depth, exact=True)


def read_json(data: bytes) -> JsonValue:
    """Read a body as `decode_json` does, faster, for keying: it encodes to the same text.

    Numbers are held as `int` or `float` wherever `json.dumps` writes them as their canonical
    token, and as `Number` elsewhere, so `encode_json` can take its fast path in the common
    case. Not for comparing values: in Python `1 == True`, which `Number` keeps apart.
    Refuses exactly what `decode_json` refuses, with the same message.
    """
    text, offset = _text(data)
    if _MANY_ZEROS in text:
        return _parse(text, offset, MAX_DEPTH, exact=True)
    try:
        return _parse(text, offset, MAX_DEPTH, exact=False)
    except NotJson:
        raise
    except ValueError:
        # An integer longer than the interpreter converts (sys.get_int_max_str_digits).
        return _parse(text, offset, MAX_DEPTH, exact=True)


class _NeedsExact(Exception):
    """Raised inside `json.dumps` on a value it cannot write canonically (a `Number`)."""


def _needs_exact(value: object) -> NoReturn:
    raise _NeedsExact


def _c_encoder() -> Callable[[JsonValue], str] | None:
    """`json`'s C encoder with `json.dumps`' canonical settings, or None where it is missing.

    Called directly rather than through `json.JSONEncoder`, which builds one per call: that
    costs more than encoding the small values digests and header sort keys are made of.
    """
    try:
        from _json import encode_basestring, make_encoder
    except ImportError:  # an interpreter without json's C accelerator
        return None
    encoder = make_encoder(
        None, _needs_exact, encode_basestring, None, ":", ",", True, False, False
    )
    return lambda value: "".join(encoder(value, 0))


_dumps = (
    _c_encoder()
    or json.JSONEncoder(
        ensure_ascii=False,
        check_circular=False,
        allow_nan=False,
        sort_keys=True,
        separators=(",", ":"),
        default=_needs_exact,
    ).encode
)
"""`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, except
that it raises `_NeedsExact` on a `Number` and ValueError on NaN and the infinities.

It writes the canonical text for every value without a `Number` in it: strings go through
the same `encode_basestring` as the exact path's; members are sorted as (name, value) pairs,
whose names differ, so by name; and `str(int)` and `repr(float)` are what `read_json` has
checked to be canonical. Lone surrogates come out raw, and are caught when the text is
encoded to UTF-8."""


def encode_json(value: JsonValue) -> str:
    """Write compact JSON with sorted keys, the same text `json.dumps` gives for plain data.

    Numbers are written as their canonical tokens; lone surrogates (from `\\ud800` escapes or
    surrogate-escaped headers) are written as escapes so the text always encodes to UTF-8.
    """
    try:
        text = _dumps(value)
    except _NeedsExact:
        return _encode_exact(value)
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _encode_exact(value)


def encode_json_utf8(value: JsonValue) -> bytes:
    """`encode_json(value).encode()`, the bytes canonical forms and digests are made of."""
    try:
        return _dumps(value).encode()
    except (_NeedsExact, UnicodeEncodeError):
        return _encode_exact(value).encode()


def short_digest(value: JsonValue) -> str:
    """Fingerprint a value left out of a key: enough to notice drift, too short to store it."""
    return blake3(encode_json_utf8(value)).hexdigest()[:16]


def _text(data: bytes) -> tuple[str, int]:
    """The document as text, and where it starts in `data` (after a byte order mark)."""
    offset = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        return data[offset:].decode("utf-8"), offset
    except UnicodeDecodeError as error:
        raise NotJson(f"is not valid UTF-8 at byte {offset + error.start}") from None


def _parse(text: str, offset: int, max_depth: int, exact: bool) -> JsonValue:
    """Parse with every number a `Number` (`exact`), or with the fast holders of `read_json`."""
    try:
        value: JsonValue = (_EXACT_DECODER if exact else _FAST_DECODER).decode(text)
    except json.JSONDecodeError as error:
        at = offset + len(text[: error.pos].encode())
        raise NotJson(f"is not valid JSON at byte {at}: {error.msg}") from None
    except RecursionError:
        raise NotJson(f"nests deeper than {max_depth} levels") from None
    except InvalidOperation:
        raise NotJson("holds a number whose exponent is out of range") from None
    if _may_nest_deeper_than(max_depth, text) and _nests_deeper_than(max_depth, value):
        raise NotJson(f"nests deeper than {max_depth} levels")
    return value


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


@lru_cache(maxsize=1024)
def _fast_number(token: str) -> float | int | Number:
    """Hold a non-integer token (one with `.`, `e` or `E`) as a Python number where exact.

    A token already spelled as `repr` spells its float, without exponent or `.0`, is its own
    canonical token (`0.2`, `-12.5`): the common case, decided without Decimal. Otherwise the
    canonical token decides: an integer becomes an `int`, a decimal a `float` if `repr` spells
    it so, and anything else (`1e-07`, `0.1000000000000000001`, `1E+65`) stays a `Number`.
    Cached, as bodies repeat the same few tokens (`0.5`, `1.0`); the results are immutable.
    """
    value = float(token)
    if repr(value) == token and "e" not in token and not token.endswith(".0"):
        return value
    number = _number(token)
    canonical = number.token
    if "E" in canonical:
        return number
    if "." not in canonical:
        return int(canonical) if len(canonical) <= _INT_DIGITS else number
    value = float(canonical)
    return value if repr(value) == canonical else number


def _reject_constant(name: str) -> NoReturn:
    """Refuse the NaN and Infinity literals Python's parser accepts but JSON does not."""
    raise NotJson(f"contains {name}, which JSON does not allow")


_EXACT_DECODER = json.JSONDecoder(
    parse_int=_number, parse_float=_number, parse_constant=_reject_constant
)
_FAST_DECODER = json.JSONDecoder(parse_float=_fast_number, parse_constant=_reject_constant)
"""Built once, as `json.loads` would build one per call. A decoder keeps no state between
calls but a cache of member names, so threads may share one."""


def _may_nest_deeper_than(max_depth: int, text: str) -> bool:
    """False when the text has too few brackets to nest that deep, each level needing one.

    Counting runs at C speed over the bytes, walking the value at Python speed over its items,
    so the count is tried first only where it is cheap whatever the body; a long body is
    mostly long strings, few items, and is walked.
    """
    if len(text) > _COUNT_BRACKETS_UP_TO:
        return True
    return text.count("[") + text.count("{") > max_depth


def _nests_deeper_than(max_depth: int, value: JsonValue) -> bool:
    """Measure nesting without recursion, since the value may be as deep as the parser allowed.

    Level by level, holding only containers, so the scalars that make up most of a body are
    looked at once and never queued. Exact type tests suffice (and are the cheapest), as
    the parser makes no subclasses.
    """
    level: list[_Container] = [value] if type(value) is dict or type(value) is list else []
    for _ in range(max_depth):
        if not level:
            return False
        deeper: list[_Container] = []
        for container in level:
            children = container.values() if type(container) is dict else container
            for child in children:
                if type(child) is dict or type(child) is list:
                    deeper.append(child)
        level = deeper
    return bool(level)


def _encode_exact(value: JsonValue) -> str:
    """The canonical encoder for every value, in Python; `encode_json`'s fallback.

    Hand-written because `json.dumps` cannot emit canonical number tokens, and writes lone
    surrogates raw where the form needs them escaped.
    """
    match value:
        case None:
            return "null"
        case bool():
            return "true" if value else "false"
        case int():
            return str(value)
        case float():
            return _float_token(value)
        case Number(token=token):
            return token
        case str():
            return _encode_string(value)
        case list():
            return "[" + ",".join(_encode_exact(item) for item in value) + "]"
        case dict():
            members = sorted(value.items(), key=lambda member: member[0])
            return (
                "{" + ",".join(f"{_encode_string(k)}:{_encode_exact(v)}" for k, v in members) + "}"
            )


def _float_token(value: float) -> str:
    """A float as `json.dumps` writes one (`repr`), refusing NaN and infinities as it does."""
    if not math.isfinite(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return repr(value)


def _encode_string(text: str) -> str:
    """Quote a string as JSON, escaping lone surrogates that UTF-8 cannot carry."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)
