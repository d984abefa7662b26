"""The hash chain's pure functions: what changes a digest and what does not."""

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.chain import GENESIS, Scalar, exchange_digest, link

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
