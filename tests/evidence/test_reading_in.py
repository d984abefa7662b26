"""The store's writer reads a recording's facts and signals (evidence.reading_in), as the
proxy hands its recordings over unread, in a thread of this process or a process of its own."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from support.exchanges import plausible_response

from freezeframe.canonicalize import KeyConfig, canonicalize
from freezeframe.evidence.reading_in import READER
from freezeframe.evidence.recording import new_exchange
from freezeframe.evidence.requests import WireRequest
from freezeframe.storage import NewExchange, Outcome, Store, open_store

HEADERS = ((b"host", b"api.openai.com"), (b"content-type", b"application/json"))


def failing_reader() -> object:
    """A reader whose every reading fails (for the test below, by its dotted path)."""

    def read(exchange: NewExchange) -> NewExchange:
        raise RuntimeError("this reader cannot read")

    return read


def model_call(store: Store, seq_answer: str, status: int = 200) -> NewExchange:
    """A chat completion recorded as the proxy records it: its facts left to the writer."""
    body = json.dumps(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is order 7?"}]}
    ).encode()
    request = WireRequest("POST", "https", "api.openai.com", 443, "/v1/chat/completions",
                          HEADERS, body)  # fmt: skip
    canonical = canonicalize(request.view(), KeyConfig())
    answer = json.dumps(
        {"model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": seq_answer}}],
         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        if status == 200
        else {"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded"}}
    ).encode()  # fmt: skip
    exchange = new_exchange(
        "c",
        request,
        canonical,
        request.view(),
        slot=store.reserve("c", canonical.key),
        started_at=1_700_000_000.0,
        duration=0.2,
        response=plausible_response(status=status, body=answer),
        outcome=Outcome.COMPLETE,
        error=None,
        context={"run-id": "run-1"},
        read_later=True,
    )
    assert exchange.to_read is not None and exchange.facts == {}
    store.submit(exchange)
    return exchange


@pytest.mark.parametrize("process", [False, True], ids=["thread", "process"])
def test_the_writer_reads_the_facts_and_signals_the_proxy_left_to_it(
    tmp_path: Path, process: bool
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url, writer_process=process, reader=READER) as store:
        model_call(store, "It ships today.")
        model_call(store, "", status=429)
        store.flush(30)
        first = store.exchange("c", 0)
        assert first.recorded.facts["model"] == "gpt-4o"
        assert first.recorded.facts["answered_model"] == "gpt-4o-2024-08-06"
        assert first.recorded.facts["finish_reason"] == "stop" and first.recorded.facts["usage"]
        rows = {row.seq: row for row in store.triage_rows()}
        assert 0 not in rows  # a model call that answered: nothing triage reads of it
        assert rows[1].kind == "provider_error" and rows[1].signature


def test_a_reader_that_fails_costs_the_facts_never_the_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    reader = f"{__name__}:failing_reader"
    with caplog.at_level(logging.ERROR), open_store(url, reader=reader) as store:
        model_call(store, "It ships today.")
        store.flush(30)
        stored = store.exchange("c", 0)
    assert (
        stored.recorded.response is not None and b"It ships today." in stored.recorded.response.body
    )
    assert stored.recorded.facts == {}
    assert "could not read the facts and signals of exchange 0" in caplog.text
    assert "this reader cannot read" in caplog.text
