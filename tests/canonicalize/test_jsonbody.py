"""The JSON reader and writer behind canonical forms: numbers by value, text always valid."""

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.canonicalize.jsonbody import (
    MAX_DEPTH,
    JsonValue,
    NotJson,
    Number,
    decode_json,
    encode_json,
    short_digest,
)


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [
        ("1", "1"),
        ("1.0", "1"),
        ("1e0", "1"),
        ("10E-1", "1"),
        ("1e2", "100"),
        ("1E+2", "100"),
        ("0.10", "0.1"),
        ("1.50e1", "15"),
        ("2.5E-3", "0.0025"),
        ("-2.50", "-2.5"),
        ("0", "0"),
        ("-0", "0"),
        ("-0.0e5", "0"),
        ("0.1000000000000000001", "0.1000000000000000001"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        ("12e63", "12" + "0" * 63),
        ("1e64", "1" + "0" * 64),
        ("1e65", "1E+65"),
        ("1e100", "1E+100"),
        ("12.5e100", "1.25E+101"),
        ("1e-64", "0." + "0" * 63 + "1"),
        ("1e-65", "1E-65"),
        ("-1.5e-70", "-1.5E-70"),
        ("1e999999999", "1E+999999999"),
    ],
)
def test_numbers_are_written_in_their_one_canonical_spelling(spelled: str, canonical: str) -> None:
    assert decode_json(spelled.encode()) == Number(canonical)


def test_a_difference_in_the_nineteenth_decimal_place_is_kept() -> None:
    assert decode_json(b"0.1000000000000000001") != decode_json(b"0.1")


def test_true_is_not_the_number_one() -> None:
    assert decode_json(b"[true, false]") != decode_json(b"[1, 0]")


_decimals = st.builds(
    lambda coefficient, exponent: Decimal(f"{coefficient}e{exponent}"),
    st.integers(-(10**30), 10**30),
    st.integers(-80, 80),
)


def _spellings(value: Decimal, extra_zeros: int) -> list[str]:
    """Spell one value several ways JSON allows, padding the coefficient with zeros."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    padded = Decimal((sign, (*digits, *([0] * extra_zeros)), exponent - extra_zeros))
    return [str(value), format(value, "f"), format(value, "E"), str(padded), format(padded, "e")]


@given(_decimals, st.integers(0, 5))
def test_every_spelling_of_a_value_reads_as_one_token(value: Decimal, extra_zeros: int) -> None:
    tokens = {decode_json(spelled.encode()) for spelled in _spellings(value, extra_zeros)}
    assert len(tokens) == 1


@given(_decimals)
def test_the_canonical_token_keeps_the_exact_value(value: Decimal) -> None:
    token = decode_json(str(value).encode())
    assert isinstance(token, Number)
    assert Decimal(token.token) == value
    assert decode_json(token.token.encode()) == token


@given(_decimals, _decimals)
def test_different_values_get_different_tokens(first: Decimal, second: Decimal) -> None:
    same_token = decode_json(str(first).encode()) == decode_json(str(second).encode())
    assert same_token == (first == second)


_plain_json: st.SearchStrategy[object] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_plain_json)
def test_plain_data_is_written_exactly_as_json_dumps_writes_it(value: JsonValue) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encode_json(value) == expected


@given(_plain_json)
def test_reading_back_written_json_gives_the_same_value(value: JsonValue) -> None:
    written = encode_json(decode_json(json.dumps(value).encode()))
    assert encode_json(decode_json(written.encode())) == written


def test_lone_surrogates_are_written_as_escapes_so_the_text_encodes_to_utf8() -> None:
    value = decode_json(b'{"k\\udc80": "\\ud800x"}')
    written = encode_json(value)
    assert written == '{"k\\udc80":"\\ud800x"}'
    assert decode_json(written.encode()) == value


def test_a_utf8_byte_order_mark_is_ignored() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a": 1}') == decode_json(b'{"a": 1}')


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a": 1,}', "is not valid JSON at byte 8: Expecting property name"),
        ('{"é": [1 2]}'.encode(), "is not valid JSON at byte 10: Expecting ',' delimiter"),
        (b'\xef\xbb\xbf{"a" 1}', "is not valid JSON at byte 8: Expecting ':' delimiter"),
        (b'{"a": "\xff"}', "is not valid UTF-8 at byte 7"),
        (b"\xef\xbb\xbf\xc3", "is not valid UTF-8 at byte 3"),
        (b'{"a": NaN}', "contains NaN, which JSON does not allow"),
        (b"[-Infinity]", "contains -Infinity, which JSON does not allow"),
        (b"1e99999999999999999999", "holds a number whose exponent is out of range"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), f"nests deeper than {MAX_DEPTH} levels"),
        (b"[" * 100_000 + b"]" * 100_000, f"nests deeper than {MAX_DEPTH} levels"),
    ],
)
def test_what_is_not_json_is_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(NotJson) as refused:
        decode_json(data)
    assert str(refused.value).startswith(reason)


def test_nesting_up_to_the_limit_is_json() -> None:
    assert decode_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


@given(st.binary())
def test_any_bytes_either_read_as_json_or_are_refused_as_not_json(data: bytes) -> None:
    try:
        value = decode_json(data)
    except NotJson:
        return
    encode_json(value).encode()


def test_short_digests_fingerprint_values_not_spellings() -> None:
    digest = short_digest(decode_json(b'{"a": 1.0, "b": "x"}'))
    assert digest == short_digest(decode_json(b'{"b":"x","a":1}'))
    assert digest != short_digest(decode_json(b'{"a": 2, "b": "x"}'))
    assert len(digest) == 16
    int(digest, 16)
