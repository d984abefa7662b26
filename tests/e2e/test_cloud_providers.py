"""Bedrock, Gemini (and Vertex AI) and Azure OpenAI through the real proxy, with the official
SDKs (boto3, google-genai, openai.AzureOpenAI), recorded then replayed against a local server
that speaks each wire format (issue 23).

One agent run is recorded and replayed once for the module; each test then reads what a user
would: the SDKs' answers on replay, ``ls``/``show`` metadata, the case file's conversation
and agent steps, ``search``, ``edit --set`` replayed through boto3 and google-genai, every
export format, and the store itself, scanned for every credential the agent sent.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import httpx
import openai
import pytest
import trustme
import zstandard
from botocore.config import Config
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from starlette.testclient import TestClient
from support.cloud_upstream import AZURE_MODEL, IMDS_TOKEN, SECRET_ACCESS_KEY, CloudUpstream
from support.proxy import ProxyProcess

from freezeframe.addons.state import Mode, RuntimeState
from freezeframe.evidence.conversation import conversation_document, conversation_of
from freezeframe.evidence.steps import agent_steps, steps_document
from freezeframe.proxy.admin import create_app
from freezeframe.proxy.settings import Address, Settings
from freezeframe.proxy.trust import client_bundle
from freezeframe.storage import Exchange, open_store

pytestmark = pytest.mark.e2e

ACCESS_KEY_ID = "ASIAE2EACCESSKEY0001"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjE2ESESSIONTOKEN0123456789abcdef"
GEMINI_KEY = "AIzaSyE2EGEMINIHEADERKEY0123456789"
QUERY_KEY = "AIzaSyE2EGEMINIQUERYKEY00123456789"
AZURE_KEY = "azure-e2e-key-0123456789abcdef"
BEARER = "ya29.e2eVertexOAuthToken0123456789"
SECRETS = [ACCESS_KEY_ID, SESSION_TOKEN, GEMINI_KEY, QUERY_KEY, AZURE_KEY, BEARER]
SECRETS += [
    SECRET_ACCESS_KEY,
    "IQoJb3JpZ2luX2VjSTSSESSIONTOKEN",
    "IQoJb3JpZ2luX2VjIMDSSESSIONTOKEN",
    IMDS_TOKEN,
]
"""What the agent sends, and the temporary credentials STS and instance metadata hand out
(instance metadata's IMDSv2 session token included: an answer, then a header)."""

ADMIN = "127.0.0.1:8081"
CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
NOVA_PROFILE = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"
LLAMA = "us.meta.llama3-3-70b-instruct-v1:0"
STREAM = "invoke-with-response-stream"
WEATHER = {
    "toolSpec": {
        "name": "get_weather",
        "description": "The weather in a city now",
        "inputSchema": {
            "json": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }
        },
    }
}


def bedrock(base: str, bundle: Path, credentials: dict[str, str]) -> Any:
    session = boto3.Session(region_name="us-east-1", **credentials)
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=20)
    return session.client("bedrock-runtime", endpoint_url=base, verify=str(bundle), config=config)


def cloud_agent(base: str, bundle: Path) -> dict[str, Any]:
    """An agent that takes credentials from STS and instance metadata, calls each provider
    once or twice with each SDK, and runs a tool between two Converse calls."""
    seen: dict[str, Any] = {}
    sts = boto3.client(
        "sts",
        endpoint_url=base,
        verify=str(bundle),
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key="e2e-long-term-secret",
        aws_session_token=SESSION_TOKEN,
    )
    assumed = sts.assume_role(
        RoleArn="arn:aws:iam::123456789012:role/agent", RoleSessionName="agent"
    )
    seen["sts"] = assumed["Credentials"]["AccessKeyId"]
    with httpx.Client(timeout=10) as http:
        token = http.put(
            f"{base}/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"}
        ).text
        imds_session = {"X-aws-ec2-metadata-token": token}
        role = http.get(
            f"{base}/latest/meta-data/iam/security-credentials/", headers=imds_session
        ).text
        imds = http.get(
            f"{base}/latest/meta-data/iam/security-credentials/{role}", headers=imds_session
        ).json()
        seen["imds"] = imds["AccessKeyId"]
    client = bedrock(
        base,
        bundle,
        {
            "aws_access_key_id": ACCESS_KEY_ID,
            "aws_secret_access_key": "e2e-long-term-secret",
            "aws_session_token": SESSION_TOKEN,
        },
    )
    question = [{"role": "user", "content": [{"text": "Lisbon"}]}]
    first = client.converse(
        modelId=NOVA_PROFILE,
        messages=question,
        toolConfig={"tools": [WEATHER]},
        inferenceConfig={"maxTokens": 200, "temperature": 0.2},
    )
    use = first["output"]["message"]["content"][0]["toolUse"]
    with httpx.Client(timeout=10) as http:
        weather = http.get(f"{base}/tool/counter", params={"city": use["input"]["city"]}).json()
    second = client.converse(
        modelId=NOVA_PROFILE,
        messages=[
            *question,
            first["output"]["message"],
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"json": weather}]}}
                ],
            },
        ],
        toolConfig={"tools": [WEATHER]},
        inferenceConfig={"maxTokens": 200, "temperature": 0.2},
    )
    seen["converse"] = (
        use,
        second["output"]["message"]["content"][0]["text"],
        second["stopReason"],
    )
    streamed = client.converse_stream(
        modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "Stream to Porto"}]}]
    )
    events = list(streamed["stream"])
    seen["converse_stream"] = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    seen["converse_stop"] = [e["messageStop"]["stopReason"] for e in events if "messageStop" in e]
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Invoke Faro"}],
    }
    invoked = client.invoke_model(modelId=CLAUDE, body=json.dumps(body))
    seen["invoke"] = json.loads(invoked["body"].read())["content"][0]["text"]
    body["messages"] = [{"role": "user", "content": "Invoke stream Evora"}]
    chunks = client.invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    pieces = [json.loads(e["chunk"]["bytes"]) for e in chunks["body"] if "chunk" in e]
    seen["invoke_stream"] = "".join(
        p["delta"]["text"] for p in pieces if p["type"] == "content_block_delta"
    )
    nova = {"messages": [{"role": "user", "content": [{"text": "Nova Tavira"}]}]}
    chunks = client.invoke_model_with_response_stream(modelId=NOVA_PROFILE, body=json.dumps(nova))
    pieces = [json.loads(e["chunk"]["bytes"]) for e in chunks["body"] if "chunk" in e]
    seen["nova_stream"] = (
        "".join(
            p["contentBlockDelta"]["delta"]["text"] for p in pieces if "contentBlockDelta" in p
        ),
        [p["messageStop"]["stopReason"] for p in pieces if "messageStop" in p],
    )
    llama = {"prompt": "Llama Sagres", "max_gen_len": 64}
    chunks = client.invoke_model_with_response_stream(modelId=LLAMA, body=json.dumps(llama))
    pieces = [json.loads(e["chunk"]["bytes"]) for e in chunks["body"] if "chunk" in e]
    seen["llama_stream"] = (
        "".join(p["generation"] for p in pieces),
        [p["stop_reason"] for p in pieces if p["stop_reason"]],
    )
    options = types.HttpOptions(base_url=base, api_version="v1beta")
    gemini = genai.Client(api_key=GEMINI_KEY, http_options=options)
    answer = gemini.models.generate_content(
        model="gemini-2.0-flash",
        contents="Gemini Braga",
        config=types.GenerateContentConfig(temperature=0.3, max_output_tokens=64),
    )
    seen["gemini"] = answer.text
    stream = gemini.models.generate_content_stream(
        model="gemini-2.0-flash", contents="Gemini Coimbra"
    )
    seen["gemini_stream"] = "".join(chunk.text or "" for chunk in stream)
    with httpx.Client(timeout=10) as http:
        arrayed = http.post(
            f"{base}/v1beta/models/gemini-2.0-flash:streamGenerateContent",
            params={"key": QUERY_KEY},
            json={"contents": [{"role": "user", "parts": [{"text": "Array Aveiro"}]}]},
        )
        seen["gemini_array"] = [
            c["candidates"][0]["content"]["parts"][0]["text"] for c in arrayed.json()
        ]
    vertex = genai.Client(
        vertexai=True,
        project="p-1",
        location="us-central1",
        credentials=Credentials(token=BEARER),  # an OAuth access token, sent as Bearer
        http_options=types.HttpOptions(base_url=base),
    )
    said = vertex.models.generate_content(model="gemini-2.0-flash", contents="Vertex Viseu")
    seen["vertex"] = said.text
    seen["gemini_tools"] = gemini_tool_round_trip(gemini, base)
    azure = openai.AzureOpenAI(
        azure_endpoint=base, api_key=AZURE_KEY, api_version="2024-10-21", max_retries=0
    )
    with azure.chat.completions.create(
        model="agent-gpt4o", messages=[{"role": "user", "content": "Azure Sintra"}], stream=True
    ) as chunks_:
        seen["azure"] = "".join(c.choices[0].delta.content or "" for c in chunks_ if c.choices)
    return seen


def gemini_tool_round_trip(gemini: genai.Client, base: str) -> dict[str, Any]:
    """Two get_weather calls without ids, each run against the tool route, both answered
    by name in the next request, as google-genai's manual function calling does it."""
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                description="The weather in a city now",
                parameters_json_schema=WEATHER["toolSpec"]["inputSchema"]["json"],
            )
        ]
    )
    config = types.GenerateContentConfig(tools=[tool])
    asked = [types.Content(role="user", parts=[types.Part(text="Tavira, Lagos")])]
    first = gemini.models.generate_content(model="gemini-2.0-flash", contents=asked, config=config)
    calls = first.function_calls or []
    responses = []
    with httpx.Client(timeout=10) as http:
        for call in calls:
            city = (call.args or {})["city"]
            weather = http.get(f"{base}/tool/counter", params={"city": city}).json()
            responses.append(
                types.Part.from_function_response(name="get_weather", response=weather)
            )
    assert first.candidates and first.candidates[0].content
    answered = [*asked, first.candidates[0].content, types.Content(role="user", parts=responses)]
    second = gemini.models.generate_content(
        model="gemini-2.0-flash", contents=answered, config=config
    )
    return {"calls": [(c.id, c.name, c.args) for c in calls], "answer": second.text}


@dataclass
class Recorded:
    data_dir: Path
    bundle: Path
    upstream: CloudUpstream
    live: dict[str, Any]
    replayed: dict[str, Any]
    replay_connections: int


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )


def run_through(proxy: ProxyProcess, action: Any) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in proxy.client_env(client_bundle(proxy.data_dir)).items():
            patch.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            patch.delenv(name, raising=False)
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        return action()


@pytest.fixture(scope="module")
def recorded(
    upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recorded]:
    data_dir = tmp_path_factory.mktemp("cloud") / "data"
    upstream = CloudUpstream(upstream_ca).start()
    proxies: list[ProxyProcess] = []
    try:
        recorder = ProxyProcess(
            data_dir, mode="record", cassette="cloud", upstream_ca=upstream_ca_file
        )
        proxies.append(recorder.start())
        bundle = client_bundle(data_dir)
        live = run_through(recorder, lambda: cloud_agent(upstream.base_url, bundle))
        recorder.stop()
        upstream.reset_counters()
        replayer = ProxyProcess(
            data_dir, mode="replay", cassette="cloud", upstream_ca=upstream_ca_file
        )
        proxies.append(replayer.start())
        replayed = run_through(replayer, lambda: cloud_agent(upstream.base_url, bundle))
        replayer.stop()
        yield Recorded(data_dir, bundle, upstream, live, replayed, upstream.connections)
    finally:
        for proxy in proxies:
            proxy.kill()
        upstream.stop()


def exchanges(data_dir: Path, cassette: str = "cloud") -> list[Exchange]:
    store = open_store(f"sqlite:///{data_dir}/freezeframe.db")
    try:
        return [store.exchange(cassette, summary.seq) for summary in store.exchanges(cassette)]
    finally:
        store.close()


def test_every_sdk_gets_its_recorded_answers_with_no_upstream_request(recorded: Recorded) -> None:
    live = recorded.live
    assert live["converse"][0]["name"] == "get_weather" and live["converse"][0]["input"] == {
        "city": "Lisbon"
    }
    assert live["converse"][1].startswith("answer 2 to: ")
    assert live["converse_stream"] == "answer 3 to: Stream to Porto"
    assert live["converse_stop"] == ["end_turn"]
    assert live["invoke"] == "answer 1 to: Invoke Faro"
    assert live["nova_stream"] == ("answer 3 to: Nova Tavira", ["end_turn"])
    assert live["llama_stream"] == ("answer 4 to: Llama Sagres", ["stop"])
    assert live["gemini_stream"] == "answer 2 to: Gemini Coimbra"
    assert live["gemini_array"] == ["answer ", "3 ", "to: ", "Array ", "Aveiro"]
    assert live["gemini_tools"] == {
        "calls": [
            (None, "get_weather", {"city": "Tavira"}),
            (None, "get_weather", {"city": "Lagos"}),
        ],
        "answer": "answer 6 to: ",
    }
    assert recorded.replayed == live
    assert recorded.replay_connections == 0


def test_each_call_is_recognised_with_provider_model_stop_reason_and_tokens(
    recorded: Recorded,
) -> None:
    done = freezeframe(recorded.data_dir, "show", "cloud", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    facts = [
        (r["facts"].get("provider"), r["facts"].get("api"), r["facts"].get("model")) for r in rows
    ]
    assert ("aws.bedrock", "bedrock.converse", NOVA_PROFILE) in facts
    assert ("aws.bedrock", "bedrock.converse", CLAUDE) in facts
    assert ("aws.bedrock", "bedrock.invoke", CLAUDE) in facts
    assert ("gcp.gemini", "gemini.generate-content", "gemini-2.0-flash") in facts
    assert ("gcp.vertex_ai", "gemini.generate-content", "gemini-2.0-flash") in facts
    assert ("azure.ai.openai", "openai.chat-completions", "agent-gpt4o") in facts
    by_path = {r["url"].split("?")[0].split("/", 3)[-1]: r["facts"] for r in reversed(rows)}
    stream = by_path[f"model/{quote(CLAUDE, safe='')}/converse-stream"]
    assert stream["finish_reason"] == "end_turn" and stream["stream"] is True
    assert stream["usage"]["inputTokens"] == 12 and stream["request_id"].startswith("bedrock-req-")
    invoked = by_path[f"model/{quote(CLAUDE, safe='')}/invoke-with-response-stream"]
    assert invoked["finish_reason"] == "end_turn" and invoked["usage"]["output_tokens"] == 7
    nova = by_path[f"model/{quote(NOVA_PROFILE, safe='')}/{STREAM}"]
    assert nova["finish_reason"] == "end_turn" and nova["usage"]["inputTokens"] == 11
    llama = by_path[f"model/{quote(LLAMA, safe='')}/{STREAM}"]
    assert llama["finish_reason"] == "stop" and llama["usage"]["prompt_token_count"] == 11
    gemini = by_path["v1beta/models/gemini-2.0-flash:generateContent"]
    assert gemini["answered_model"] == "gemini-2.0-flash-001" and gemini["finish_reason"] == "STOP"
    assert gemini["usage"]["promptTokenCount"] == 9 and gemini["temperature"] == 0.3
    azure = by_path["openai/deployments/agent-gpt4o/chat/completions"]
    assert azure["answered_model"] == AZURE_MODEL


def test_the_case_file_reads_what_each_model_saw_and_answered(recorded: Recorded) -> None:
    documents = {}
    for exchange in exchanges(recorded.data_dir):
        conversation = conversation_of(exchange)
        if conversation is not None:
            documents.setdefault(conversation.api, []).append(conversation_document(conversation))
    first, second, streamed = documents["bedrock.converse"]
    assert first["tools"][0]["name"] == "get_weather"
    assert first["answer"]["tool_calls"][0]["value"] == {"city": "Lisbon"}
    assert (
        second["messages"][-1]["tool_results"][0]["call_id"]
        == first["answer"]["tool_calls"][0]["id"]
    )
    assert streamed["answer"]["text"] == "answer 3 to: Stream to Porto" and streamed["stream"]
    assert streamed["answer"]["complete"] and not streamed["notes"]
    invoke, invoke_stream, nova, llama = documents["bedrock.invoke"]
    assert nova["answer"]["text"] == "answer 3 to: Nova Tavira" and nova["answer"]["complete"]
    assert llama["answer"]["text"] == "answer 4 to: Llama Sagres" and llama["answer"]["complete"]
    assert invoke_stream["answer"]["text"] == "answer 2 to: Invoke stream Evora"
    assert invoke["messages"][0]["text"] == "Invoke Faro"
    gemini = documents["gemini.generate-content"]
    assert [g["answer"]["text"] for g in gemini] == [
        "answer 1 to: Gemini Braga",
        "answer 2 to: Gemini Coimbra",
        "answer 3 to: Array Aveiro",
        "answer 4 to: Vertex Viseu",
        "",
        "answer 6 to: ",
    ]
    assert [g["provider"] for g in gemini] == ["gcp.gemini"] * 3 + ["gcp.vertex_ai"] + [
        "gcp.gemini"
    ] * 2
    assert gemini[0]["messages"][0]["role"] == "user" and gemini[1]["answer"]["streamed"]
    (azure,) = documents["openai.chat-completions"]
    assert azure["provider"] == "azure.ai.openai" and azure["model"] == "agent-gpt4o"
    assert azure["answer"]["model"] == AZURE_MODEL


def test_agent_steps_link_the_converse_tool_call_to_its_tool_and_its_result(
    recorded: Recorded,
) -> None:
    steps = steps_document(agent_steps(exchanges(recorded.data_dir)))
    text = json.dumps(steps)
    (step,) = [
        s
        for s in steps["steps"]
        if s["kind"] == "model" and s["calls"] and s["model"]["api"] == "bedrock.converse"
    ]
    (call,) = step["calls"]
    assert call["call"]["name"] == "get_weather" and call["call"]["value"] == {"city": "Lisbon"}
    tool = next(s for s in steps["steps"] if s["url"].endswith("/tool/counter?city=Lisbon"))
    assert call["executed_by"]["seq"] == tool["seq"], text
    assert call["result_in"] == {
        "seq": tool["seq"] + 1,
        "match": "exact",
        "why": "toolUseId tooluse_1",
    }


def test_agent_steps_link_gemini_calls_without_ids_to_their_responses_by_name_in_order(
    recorded: Recorded,
) -> None:
    """google-genai's calls carry no id: each links to the tool request that ran it and to
    the request whose functionResponse parts answered it, the two of one name by order."""
    steps = steps_document(agent_steps(exchanges(recorded.data_dir)))
    text = json.dumps(steps)
    (step,) = [
        s
        for s in steps["steps"]
        if s["kind"] == "model" and s["calls"] and s["model"]["api"] == "gemini.generate-content"
    ]
    ran = {
        s["url"].rsplit("=", 1)[-1]: s["seq"]
        for s in steps["steps"]
        if "/tool/counter?" in s["url"]
    }
    answered = next(
        s["seq"] for s in steps["steps"] if s["seq"] > step["seq"] and s["kind"] == "model"
    )
    assert [(c["call"]["id"], c["call"]["value"]) for c in step["calls"]] == [
        (None, {"city": "Tavira"}),
        (None, {"city": "Lagos"}),
    ]
    assert [c["executed_by"]["seq"] for c in step["calls"]] == [ran["Tavira"], ran["Lagos"]], text
    assert [c["result_in"] for c in step["calls"]] == [
        {
            "seq": answered,
            "match": "exact",
            "why": f"functionResponse get_weather ({n} of 2 by that name, in order; no ids)",
        }
        for n in (1, 2)
    ]


def test_search_finds_streamed_answers_and_not_the_padding(recorded: Recorded) -> None:
    for phrase in (
        "Stream to Porto",
        "Invoke stream Evora",
        "answer 2 to: Gemini Coimbra",
        "Array Aveiro",
    ):
        done = freezeframe(recorded.data_dir, "search", phrase, "--json")
        assert done.returncode == 0, done.stderr
        hits = json.loads(done.stdout)
        assert any("response" in hit["parts"] for hit in hits), phrase


def test_edit_set_on_bedrock_and_gemini_answers_replays_through_the_sdks(
    recorded: Recorded, upstream_ca_file: Path
) -> None:
    stored = exchanges(recorded.data_dir)
    rows = {e.recorded.path.split("?")[0].rsplit("/", 1)[-1]: e.seq for e in stored}
    rows = {e.recorded.path.split("?")[0][1:]: e.seq for e in stored[::-1]} | rows  # first Braga
    streams = {
        model: next(
            e.seq for e in stored if e.recorded.path == f"/model/{quote(model, safe='')}/{STREAM}"
        )
        for model in (CLAUDE, NOVA_PROFILE, LLAMA)
    }
    edits = [
        (rows["converse-stream"], "$.output.message.content[0].text", "edited Porto"),
        (streams[CLAUDE], "$.content[0].text", "edited Evora"),
        (streams[NOVA_PROFILE], "$.output.message.content[0].text", "edited Tavira"),
        (streams[LLAMA], "$.generation", "edited Sagres"),
        (
            rows["v1beta/models/gemini-2.0-flash:generateContent"],
            "$.candidates[0].content.parts[0].text",
            "edited Braga",
        ),
        (
            rows["gemini-2.0-flash:streamGenerateContent"],
            "$.candidates[0].content.parts[0].text",
            "edited",
        ),
    ]
    source = "cloud"
    for n, (seq, path, value) in enumerate(edits):
        into = f"cloud-edit-{n}"
        done = freezeframe(
            recorded.data_dir,
            "edit",
            source,
            str(seq),
            "--into",
            into,
            "--set",
            f"{path}={json.dumps(value)}",
        )
        assert done.returncode == 0, done.stderr
        source = into
    replayer = ProxyProcess(
        recorded.data_dir, mode="replay", cassette=source, upstream_ca=upstream_ca_file
    )
    try:
        replayer.start()
        recorded.upstream.reset_counters()
        seen = run_through(
            replayer, lambda: cloud_agent(recorded.upstream.base_url, recorded.bundle)
        )
    finally:
        replayer.kill()
    assert seen["converse_stream"] == "edited Porto" and seen["converse_stop"] == ["end_turn"]
    assert seen["invoke_stream"] == "edited Evora"
    assert seen["nova_stream"] == ("edited Tavira", ["end_turn"])
    assert seen["llama_stream"] == ("edited Sagres", ["stop"])
    assert seen["gemini"] == "edited Braga"
    assert seen["gemini_array"] == ["edited"]
    assert seen["gemini_stream"] == recorded.live["gemini_stream"]
    assert recorded.upstream.connections == 0


EXPORTS = [
    ("jsonl",),
    ("bundle",),
    ("har",),
    ("otel",),
    *[
        ("dataset", "--shape", shape)
        for shape in ("freezeframe", "langfuse", "phoenix", "openai-chat")
    ],
]


def test_no_credential_reaches_the_store_or_any_export(recorded: Recorded, tmp_path: Path) -> None:
    everything = [path.read_bytes() for path in recorded.data_dir.glob("freezeframe.db*")]
    for exchange in exchanges(recorded.data_dir):
        everything.append(repr(exchange).encode())
        everything.append(json.dumps(exchange.recorded.facts).encode())
    for n, (format_, *options) in enumerate(EXPORTS):
        path = tmp_path / f"cloud-{n}.{format_}"
        done = freezeframe(
            recorded.data_dir, "export", "cloud", "-o", str(path), "--format", format_, *options
        )
        assert done.returncode == 0, done.stderr
        everything.append(path.read_bytes())
        if format_ == "bundle":
            with zipfile.ZipFile(path) as bundle:
                for name in bundle.namelist():
                    data = bundle.read(name)
                    if name.startswith("bodies/"):
                        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
                    everything.append(data)
    for secret in SECRETS:
        assert not any(secret.encode() in data for data in everything), secret
    assert b"AWS4-HMAC-SHA256 [redacted:" in b"".join(everything)


def test_the_imds_session_token_is_one_fingerprint_in_its_answer_and_its_header(
    recorded: Recorded,
) -> None:
    """IMDSv2's token is stored as the marker of the token, in the answer that hands it out
    and in each request that sends it back, so a reader can still follow it."""
    stored = exchanges(recorded.data_dir)
    (put,) = [
        e for e in stored if e.recorded.method == "PUT" and e.recorded.path == "/latest/api/token"
    ]
    assert put.recorded.response is not None
    handed_out = put.recorded.response.body.rstrip(b"*")
    assert handed_out.startswith(b"[redacted:") and handed_out.endswith(b"]")
    sent_back = [
        value
        for e in stored
        if e.recorded.path.startswith("/latest/meta-data/")
        for name, value in e.recorded.request_headers
        if name.lower() == b"x-aws-ec2-metadata-token"
    ]
    assert sent_back == [handed_out, handed_out]


def test_otel_spans_and_dataset_rows_name_each_provider(recorded: Recorded, tmp_path: Path) -> None:
    spans_file = tmp_path / "cloud.otel"
    done = freezeframe(
        recorded.data_dir, "export", "cloud", "-o", str(spans_file), "--format", "otel"
    )
    assert done.returncode == 0, done.stderr
    providers: dict[str, str] = {}
    spans = [
        span
        for line in spans_file.read_text().splitlines()
        for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ]
    gemini_chats = set()
    for span in spans:
        attributes = {a["key"]: a["value"] for a in span["attributes"]}
        if "gen_ai.provider.name" in attributes:
            name = attributes["gen_ai.provider.name"]["stringValue"]
            providers[name] = attributes["gen_ai.system"]["stringValue"]
            if name != "azure.ai.openai":  # its stream was not asked for usage
                assert "gen_ai.usage.input_tokens" in attributes, span["name"]
            if name == "gcp.gemini":
                gemini_chats.add(span["spanId"])
    # Gemini's calls carry no id: each tool span lasts until the request that sent its
    # functionResponse back, paired by name in order, not zero time.
    gemini_tools = [s for s in spans if s.get("parentSpanId") in gemini_chats]
    assert [s["name"] for s in gemini_tools] == ["execute_tool get_weather"] * 2
    assert all(int(s["endTimeUnixNano"]) > int(s["startTimeUnixNano"]) for s in gemini_tools)
    assert providers == {
        "aws.bedrock": "aws.bedrock",
        "gcp.gemini": "gcp.gemini",
        "gcp.vertex_ai": "gcp.vertex_ai",
        "azure.ai.openai": "az.ai.openai",
    }
    rows_file = tmp_path / "cloud.dataset"
    done = freezeframe(
        recorded.data_dir, "export", "cloud", "-o", str(rows_file), "--format", "dataset"
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    expected = {(r["metadata"]["provider"], r["expected"]["content"]) for r in rows}
    assert ("gcp.vertex_ai", "answer 4 to: Vertex Viseu") in expected
    assert ("aws.bedrock", "answer 3 to: Stream to Porto") in expected
    tool_row = next(r for r in rows if r["expected"].get("tool_calls"))
    assert tool_row["expected"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_show_reads_a_bedrock_event_stream_as_its_events_without_padding(
    recorded: Recorded,
) -> None:
    seq = next(
        e.seq for e in exchanges(recorded.data_dir) if e.recorded.path.endswith("/converse-stream")
    )
    done = freezeframe(recorded.data_dir, "show", "cloud", str(seq))
    assert done.returncode == 0, done.stderr
    assert "10 events, application/vnd.amazon.eventstream" in done.stdout
    assert '{"messageStop": {"stopReason": "end_turn"}}' in done.stdout
    assert '"p":' not in done.stdout


def test_resend_names_what_changed_in_an_answer_and_not_its_fresh_ids(
    recorded: Recorded, upstream_ca_file: Path
) -> None:
    """A Gemini answer resent differs in its text, not in the responseId every call gets; a
    ConverseStream's differences name the event that changed, not "body"."""
    found = {e.recorded.path: e.seq for e in exchanges(recorded.data_dir)[::-1]}
    gemini = found["/v1beta/models/gemini-2.0-flash:generateContent"]
    converse = next(seq for path, seq in found.items() if path.endswith("/converse-stream"))
    signed = (
        "--header", "Authorization: AWS4-HMAC-SHA256 Credential=ASIAX/x, Signature=0",
        "--header", f"X-Amz-Security-Token: {SESSION_TOKEN}",
    )  # fmt: skip
    resends = [
        (gemini, "gemini-resent", ("--header", f"x-goog-api-key: {GEMINI_KEY}")),
        (converse, "converse-resent", signed),
    ]
    changed = []
    for seq, into, headers in resends:
        done = freezeframe(
            recorded.data_dir, "resend", "cloud", str(seq), "--into", into, *headers,
            "--upstream-ca", str(upstream_ca_file), "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        changed.append(
            {what: (old, new) for what, old, new in json.loads(done.stdout)["differences"]}
        )
    text = changed[0]["$.candidates[0].content.parts[0].text"]
    assert text[0] == '"answer 1 to: Gemini Braga"' and text[1].startswith('"answer ')
    assert not any(path.endswith("responseId") for path in changed[0])
    assert "body" not in changed[1]
    assert any(path.endswith("contentBlockDelta.delta.text") for path in changed[1]), changed[1]
    assert not any(path.endswith(".p") for path in changed[1])


def test_the_case_file_pages_show_each_call_and_its_steps(recorded: Recorded) -> None:
    """Every exchange page renders (the Gemini ``key=`` one lists the query it stripped), the
    model calls with what the model answered, and the steps page links the tool call."""
    store = open_store(f"sqlite:///{recorded.data_dir / 'freezeframe.db'}")
    settings = Settings(data_dir=recorded.data_dir, admin=Address.parse(ADMIN, "admin"))
    app = create_app(store, RuntimeState(Mode.REPLAY, "cloud"), settings)
    try:
        with TestClient(app, base_url=f"http://{ADMIN}", follow_redirects=False) as client:
            pages = {
                e.recorded.path: client.get(f"/cassettes/cloud/{e.seq}")
                for e in exchanges(recorded.data_dir)
            }
            steps = client.get("/cassettes/cloud/steps")
    finally:
        store.close()
    assert {page.status_code for page in pages.values()} == {200}
    by_end = {path.split("?")[0].rsplit("/", 1)[-1]: page.text for path, page in pages.items()}
    assert "answer 3 to: Stream to Porto" in by_end["converse-stream"]
    invoked = pages[f"/model/{quote(CLAUDE, safe='')}/invoke-with-response-stream"].text
    assert "answer 2 to: Invoke stream Evora" in invoked
    keyed = next(page.text for path, page in pages.items() if "?key=" in path)
    assert "query:key" in keyed and QUERY_KEY not in keyed
    assert steps.status_code == 200 and "toolUseId tooluse_1" in steps.text
    assert "functionResponse get_weather (2 of 2 by that name, in order; no ids)" in steps.text
    answered = pages["/v1beta/models/gemini-2.0-flash:generateContent"].text  # the last
    assert "result for <code>get_weather</code> (by name)" in answered and ">None<" not in answered
