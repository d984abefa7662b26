"""The hash chain's pure functions: what changes a digest and what does not."""

import json

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.storage.chain import GENESIS, Scalar, exchange_digest, link

scalars = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary())


def test_link_is_blake3_of_the_previous_link_and_the_digest() -> None:
    digest = exchange_digest({"seq": 0})
    assert link(GENESIS, digest) == blake3.blake3(f"{'0' * 64}\n{digest}".encode()).hexdigest()
    assert link(GENESIS, digest) != link(link(GENESIS, digest), digest)


@given(st.dictionaries(st.text(), scalars))
def test_field_order_does_not_matter(fields: dict[str, Scalar]) -> None:
    assert exchange_digest(fields) == exchange_digest(dict(reversed(fields.items())))


@pytest.mark.parametrize(
    "values",
    [
        [1, 1.0, "1", b"1", None, ""],
        [0.1 + 0.2, 0.3],
        ["a", "a\x00", "a\udc80"],
        [b"", None],
    ],
)
def test_values_that_look_alike_digest_differently(values: list[Scalar]) -> None:
    digests = {exchange_digest({"field": value}) for value in values}
    assert len(digests) == len(values)


def test_the_field_name_is_covered() -> None:
    assert exchange_digest({"status": 200}) != exchange_digest({"port": 200})
    assert exchange_digest({"status": 200}) != exchange_digest({"status": 200, "error": None})


def test_other_types_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot be a list"):
        exchange_digest({"field": []})  # type: ignore[dict-item]


def reference_digest(fields: dict[str, Scalar]) -> str:
    """The chain's digest as first written, with json.dumps: what every stored chain holds."""

    def tagged(value: Scalar) -> list[str | None]:
        match value:
            case None:
                return [None]
            case int():
                return ["i", str(value)]
            case float():
                return ["f", value.hex()]
            case str():
                return ["s", value]
            case bytes():
                return ["b", value.hex()]
        raise TypeError(type(value).__name__)

    items = [[name, tagged(value)] for name, value in sorted(fields.items())]
    text = json.dumps(["freezeframe.exchange.v1", items], ensure_ascii=True, separators=(",", ":"))
    return blake3.blake3(text.encode("ascii")).hexdigest()


any_scalars = st.one_of(
    st.none(),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.text(st.characters(), max_size=30),
    st.sampled_from(["\x00", "\uffff", "\udc80", "\\", '"', "\u2028"]),
    st.binary(max_size=64),
)


@given(st.dictionaries(st.text(max_size=10), any_scalars, max_size=12))
def test_the_digest_is_the_one_every_stored_chain_holds(fields: dict[str, Scalar]) -> None:
    assert exchange_digest(fields) == reference_digest(fields)


def test_the_digest_of_a_whole_exchange_is_unchanged() -> None:
    fields: dict[str, Scalar] = {
        "canonical": bytes(range(256)) * 100,
        "cassette": "kassette-ü",
        "duration": None,
        "port": 443,
        "started_at": 1_700_000_000.25,
        "path": "/caf\udcc3\udca9/\x00?q=\uffff",
    }
    assert exchange_digest(fields) == reference_digest(fields)
    assert exchange_digest({}) == reference_digest({})
