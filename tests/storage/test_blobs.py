"""Content addressing and the bounded cache of decompressed bodies."""

import blake3
from hypothesis import given
from hypothesis import strategies as st

from storage.blobs import BlobCache, compress, decompress, digest, problem


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
