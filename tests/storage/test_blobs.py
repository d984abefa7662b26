"""Content addressing, parts of streamed bodies, and the bounded cache of decompressed bodies."""

import blake3
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from freezeframe.storage.blobs import (
    PART_SIZE,
    BlobCache,
    compress,
    compress_part,
    decompress,
    decompress_part,
    digest,
    parts_problem,
    problem,
)


@given(st.binary(max_size=5000))
def test_compression_round_trips(data: bytes) -> None:
    assert decompress(compress(data)) == data


def test_a_body_is_named_by_its_blake3_digest() -> None:
    assert digest(b"body") == blake3.blake3(b"body").hexdigest()


def test_problem_names_what_is_wrong_with_a_stored_body() -> None:
    name = digest(b"body")
    assert problem(name, compress(b"body")) is None
    assert problem(name, None) == f"body {name[:16]} is missing"
    assert problem(name, b"not zstd") == f"body {name[:16]} cannot be decompressed"
    assert problem(name, compress(b"other")) == f"body {name[:16]} does not match its digest"


def test_the_cache_evicts_the_least_recently_used_bodies_beyond_its_size() -> None:
    cache = BlobCache(capacity=10)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"  # now b is the least recently used
    cache.put("c", b"cccc")
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"aaaa", None, b"cccc")


def test_the_cache_skips_bodies_larger_than_itself() -> None:
    cache = BlobCache(capacity=10)
    cache.put("a", b"aaaa")
    cache.put("big", b"x" * 11)
    assert (cache.get("a"), cache.get("big")) == (b"aaaa", None)


def test_putting_a_cached_body_again_does_not_count_it_twice() -> None:
    cache = BlobCache(capacity=8)
    cache.put("a", b"aaaa")
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert (cache.get("a"), cache.get("b")) == (b"aaaa", b"bbbb")


def test_a_part_is_checked_before_it_is_decompressed() -> None:
    assert decompress_part(compress_part(b"part")) == b"part"
    with pytest.raises(zstandard.ZstdError):
        decompress_part(b"not zstd")
    with pytest.raises(zstandard.ZstdError, match="records"):
        decompress_part(compress(b"x" * (PART_SIZE + 1)))  # whole bodies are not parts
    damaged = bytearray(compress_part(b"part" * 100))
    damaged[-2] ^= 0xFF  # the checksum
    with pytest.raises(zstandard.ZstdError):
        decompress_part(bytes(damaged))


def test_parts_problem_names_the_part() -> None:
    body = [b"one ", b"two"]
    name = digest(b"".join(body))
    parts = [compress_part(part) for part in body]
    assert parts_problem(name, parts) is None
    assert parts_problem(name, [parts[0], None]) == f"body {name[:16]} part 1 is missing"
    assert parts_problem(name, [b"junk", parts[1]]) == (
        f"body {name[:16]} part 0 cannot be decompressed"
    )
    assert parts_problem(name, parts[:1]) == f"body {name[:16]} does not match its digest"
