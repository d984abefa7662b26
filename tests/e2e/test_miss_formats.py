"""A replay miss reaches each official SDK as that provider's own error, so the exception the
agent raises carries freezeframe's explanation (issue 32, point 19).

boto3 used to raise ``ClientError: An error occurred (404) when calling the Converse
operation:`` with nothing after the colon: botocore reads the code from ``x-amzn-ErrorType``
and the message from a top-level ``message``. Each client here is the provider's SDK, through
a replay proxy of a cassette with no recordings, aimed at a port nothing listens on:
replay never connects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from google.oauth2.credentials import Credentials
from support.proxy import ProxyProcess

from freezeframe.proxy.trust import client_bundle

pytestmark = pytest.mark.e2e

NOWHERE = "https://127.0.0.1:9"
"""The discard port: nothing answers there, and a replay never asks."""
EXPLANATION = "freezeframe: replay miss"


@pytest.fixture
def replaying(
    start_proxy: Callable[..., ProxyProcess], monkeypatch: pytest.MonkeyPatch
) -> Iterator[ProxyProcess]:
    proxy = start_proxy(mode="replay", cassette="formats")
    for name, value in proxy.client_env(client_bundle(proxy.data_dir)).items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield proxy


def raised(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def test_openai_and_azure_openai_show_the_explanation(replaying: ProxyProcess) -> None:
    with openai.OpenAI(base_url=f"{NOWHERE}/v1", api_key="sk-x", max_retries=0) as client:
        error = raised(
            lambda: client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        )
    assert isinstance(error, openai.NotFoundError)
    assert EXPLANATION in str(error)
    assert error.code == "freezeframe_unknown_cassette"
    azure = openai.AzureOpenAI(
        azure_endpoint=NOWHERE, api_key="azure-x", api_version="2024-10-21", max_retries=0
    )
    with azure:
        error = raised(
            lambda: azure.chat.completions.create(
                model="agent-gpt4o", messages=[{"role": "user", "content": "hi"}]
            )
        )
    assert isinstance(error, openai.NotFoundError)
    assert EXPLANATION in str(error) and error.code == "freezeframe_unknown_cassette"


def test_anthropic_shows_the_explanation(replaying: ProxyProcess) -> None:
    with anthropic.Anthropic(base_url=NOWHERE, api_key="sk-ant-x", max_retries=0) as client:
        error = raised(
            lambda: client.messages.create(
                model="claude-freezeframe-test",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            )
        )
    assert isinstance(error, anthropic.NotFoundError)
    assert EXPLANATION in str(error)


def test_boto3_bedrock_shows_the_code_and_the_explanation(
    replaying: ProxyProcess, data_dir: Path
) -> None:
    client = boto3.Session(
        region_name="us-east-1", aws_access_key_id="AKIAX", aws_secret_access_key="x"
    ).client(
        "bedrock-runtime",
        endpoint_url=NOWHERE,
        verify=str(client_bundle(data_dir)),
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    messages = [{"role": "user", "content": [{"text": "hi"}]}]
    for call in (
        lambda: client.converse(modelId="amazon.nova-pro-v1:0", messages=messages),
        lambda: client.converse_stream(modelId="amazon.nova-pro-v1:0", messages=messages),
        lambda: client.invoke_model(
            modelId="anthropic.claude-3-5-sonnet-20240620-v1:0",
            body=json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9}),
        ),
    ):
        error = raised(call)
        assert isinstance(error, ClientError)
        assert error.response["Error"]["Code"] == "freezeframe_unknown_cassette"
        assert EXPLANATION in error.response["Error"]["Message"]
        assert EXPLANATION in str(error)


def test_google_genai_gemini_and_vertex_show_the_status_and_the_explanation(
    replaying: ProxyProcess,
) -> None:
    gemini = genai.Client(
        api_key="AIzaX", http_options=types.HttpOptions(base_url=NOWHERE, api_version="v1beta")
    )
    vertex = genai.Client(
        vertexai=True,
        project="p-1",
        location="us-central1",
        credentials=Credentials(token="ya29.x"),
        http_options=types.HttpOptions(base_url=NOWHERE),
    )
    for client in (gemini, vertex):
        error = raised(
            lambda client=client: client.models.generate_content(
                model="gemini-2.0-flash", contents="hi"
            )
        )
        assert isinstance(error, genai_errors.ClientError)
        assert error.code == 404 and error.status == "NOT_FOUND"
        assert error.message is not None and EXPLANATION in error.message
        assert EXPLANATION in str(error)
