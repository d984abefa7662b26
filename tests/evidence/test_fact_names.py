"""One list of fact names: what canonicalize reads is what storage keeps a column for.

canonicalize and storage may not import each other (import-linter: they are independent), so
storage keeps FACT_KINDS beside canonicalize's FACT_NAMES; these tests are what holds the two
together: a fact added to one and not the other, or read as another kind than its column,
fails here instead of at a user's first ``submit``.
"""

from __future__ import annotations

import json

from freezeframe import canonicalize, storage
from freezeframe.canonicalize import RequestView, ResponseView, facts_of
from freezeframe.storage.records import FACT_KINDS, check_facts

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_canonicalize_and_storage_name_the_same_facts_in_the_same_order() -> None:
    assert canonicalize.FACT_NAMES == storage.FACT_NAMES == tuple(FACT_KINDS)


def test_every_fact_canonicalize_reads_fits_the_column_storage_keeps() -> None:
    asked = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.5,
        "top_p": 1,
        "seed": 7,
        "max_tokens": 64,
        "stream": False,
    }
    request = RequestView.of(
        "POST",
        "https",
        "api.openai.com",
        443,
        "/v1/chat/completions",
        (("content-type", "application/json"), ("traceparent", TRACEPARENT)),
        json.dumps(asked).encode(),
    )
    answered = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    answer = ResponseView(
        200,
        (("x-request-id", "req_1"), ("x-ratelimit-remaining-requests", "99")),
        json.dumps(answered).encode(),
        "application/json",
    )

    facts = facts_of(request, answer)

    assert set(facts) == set(storage.FACT_NAMES)  # every name, so every kind is checked
    check_facts(facts)  # what Store.submit checks: each value is its column's kind
