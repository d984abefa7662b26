"""``resend`` of a streamed answer compares what the model said, not SSE bytes (#22)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from click.testing import CliRunner
from support.proxy import ProxyProcess
from support.upstream import Upstream

from freezeframe import cli

pytestmark = pytest.mark.e2e

ClientEnv = Callable[[ProxyProcess], dict[str, str]]


def test_a_streamed_answer_resent_is_diffed_reassembled(
    upstream: Upstream,
    start_proxy: Callable[..., ProxyProcess],
    client_env: ClientEnv,
    upstream_ca_file: Path,
) -> None:
    recorder = start_proxy(mode="record")
    client_env(recorder)
    client = openai.OpenAI(base_url=upstream.url("/v1"), api_key="sk-resend", max_retries=0)
    said = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        if chunk.choices
    )
    recorder.stored("default", 1)
    recorder.stop()

    resent = CliRunner().invoke(
        cli.main,
        [
            "resend", "default", "0", "--into", "again",
            "--header", "Authorization: Bearer sk-resend-0123456789abcdefghij",
            "--upstream-ca", str(upstream_ca_file),
            "--data-dir", str(recorder.data_dir), "--json",
        ],
    )  # fmt: skip
    assert resent.exit_code == 0, resent.output
    changed = {what: (old, new) for what, old, new in json.loads(resent.stdout)["differences"]}
    assert "body" not in changed, "the SSE bytes were compared, not the answers"
    old, new = changed["$.choices[0].message.content"]
    assert json.loads(old) == said and json.loads(new) != said
