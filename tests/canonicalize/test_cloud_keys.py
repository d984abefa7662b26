"""Keys and facts of Bedrock, Gemini, Vertex AI and Azure OpenAI requests, read from a fixed
corpus of what boto3, google-genai, openai.AzureOpenAI and httpx really sent
(tests/support/cloud_corpus.py wrote it): the same calls made twice, with new SigV4
signatures, dates, invocation ids, API keys and tokens, key the same; another question
keys differently (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import botocore.session
import pytest

from freezeframe.canonicalize import RequestView, canonicalize, facts_of
from freezeframe.canonicalize.profiles import bedrock
from freezeframe.proxy.keys import key_config

CORPUS = json.loads((Path(__file__).parent / "data" / "cloud_requests.json").read_text())
VOLATILE_HEADERS = {"authorization", "x-amz-date", "amz-sdk-invocation-id", "x-goog-api-key"}


HOSTS = {
    "/model/": "bedrock-runtime.us-east-1.amazonaws.com",
    "/v1beta/": "generativelanguage.googleapis.com",
    "/v1/projects/": "us-central1-aiplatform.googleapis.com",
    "/openai/": "agents.openai.azure.com",
}
"""Each request as sent to its service's own host (the corpus was sent to a local one)."""


def view(request: dict[str, object]) -> RequestView:
    headers = tuple((str(k), str(v)) for k, v in request["headers"])  # type: ignore[attr-defined]
    target = str(request["target"])
    host = next(host for prefix, host in HOSTS.items() if target.startswith(prefix))
    body = str(request["body"]).encode()
    return RequestView.of(str(request["method"]), "https", host, 443, target, headers, body)


PAIRS = list(zip(CORPUS["a"], CORPUS["b"], CORPUS["c"], strict=True))
IDS = [str(a["target"]).split("?")[0].rsplit("/", 2)[-2:][-1] for a, _, _ in PAIRS]


@pytest.mark.parametrize(("a", "b", "c"), PAIRS, ids=IDS)
def test_the_same_call_keys_the_same_and_another_question_does_not(
    a: dict[str, object], b: dict[str, object], c: dict[str, object]
) -> None:
    config = key_config()
    first, again, other = (canonicalize(view(r), config) for r in (a, b, c))
    changed = {
        str(k).lower()
        for (k, v), (_, w) in zip(a["headers"], b["headers"], strict=False)
        if v != w  # type: ignore[call-overload]
    }
    assert changed or a["target"] != b["target"], "the corpus's two runs must differ on the wire"
    assert first.key == again.key
    assert first.key != other.key
    assert first.profile != "generic.json"
    for header in VOLATILE_HEADERS:
        assert header.encode() not in first.form.lower()


def test_the_corpus_holds_what_each_provider_sends() -> None:
    names = {str(k).lower() for r in CORPUS["a"] for k, _ in r["headers"]}
    assert {
        "x-amz-date",
        "x-amz-security-token",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
    } <= names
    assert {"x-goog-api-key", "api-key"} <= names
    queries = [dict(parse_qsl(str(r["target"]).partition("?")[2])) for r in CORPUS["a"]]
    assert any("key" in q for q in queries) and any(q.get("alt") == "sse" for q in queries)


EXPECTED = {
    "converse": ("aws.bedrock", "bedrock.converse", False),
    "converse-stream": ("aws.bedrock", "bedrock.converse", True),
    "invoke": ("aws.bedrock", "bedrock.invoke", False),
    "invoke-with-response-stream": ("aws.bedrock", "bedrock.invoke", True),
    "gemini-2.0-flash:generateContent": ("gcp.gemini", "gemini.generate-content", False),
    "gemini-2.0-flash:streamGenerateContent": ("gcp.gemini", "gemini.generate-content", True),
    "completions": ("azure.ai.openai", "openai.chat-completions", None),
}


def test_facts_name_the_provider_the_model_and_whether_it_streams() -> None:
    for request in CORPUS["a"]:
        target = str(request["target"])
        facts = facts_of(view(request), None)
        end = target.split("?")[0].rsplit("/", 1)[-1]
        provider, api, stream = EXPECTED[end]
        if "/publishers/" in target:
            provider = "gcp.vertex_ai"
        assert (facts["provider"], facts["api"]) == (provider, api), target
        if stream is not None:
            assert facts["stream"] is stream, target
        if api.startswith("bedrock"):
            assert facts["model"] == "anthropic.claude-3-5-sonnet-20240620-v1:0"
        elif api.startswith("gemini"):
            assert facts["model"] == "gemini-2.0-flash"
        else:
            assert facts["model"] == "agent-gpt4o"


def test_converse_fields_are_each_kept_or_dropped_by_decision() -> None:
    """Every member of botocore's ConverseRequest is in the key or dropped on purpose, so a
    new one fails here until someone decides."""
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    for operation in ("Converse", "ConverseStream"):
        members = set(model.operation_model(operation).input_shape.members) - {"modelId"}
        assert members == bedrock.CONVERSE_KEEP | bedrock.CONVERSE_DROP, operation
    assert not bedrock.CONVERSE_KEEP & bedrock.CONVERSE_DROP


def test_an_arn_model_id_is_read_decoded_and_keyed_as_sent() -> None:
    arn = "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0"
    request = RequestView.of("POST", "https", "h", 443, f"/model/{arn}/converse", (), b"{}")
    assert (
        facts_of(request, None)["model"]
        == "arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-pro-v1:0"
    )
    dropped = RequestView.of(
        "POST",
        "https",
        "h",
        443,
        f"/model/{arn}/converse",
        (),
        b'{"requestMetadata": {"run": "7"}}',
    )
    assert canonicalize(dropped).key == canonicalize(request).key
    assert [s.part for s in canonicalize(dropped).stripped] == ["body:$.requestMetadata"]
