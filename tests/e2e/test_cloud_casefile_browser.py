"""The case file of the cloud providers and of a Realtime session, in a real browser (issue 23).

An agent calls Bedrock (Converse with a tool it then runs, ConverseStream, InvokeModel,
InvokeModelWithResponseStream) with boto3, Gemini and Vertex AI (generateContent with a
tool, streamed) with google-genai, Azure OpenAI (streamed) with ``openai.AzureOpenAI``, and
holds an OpenAI Realtime session over a WebSocket with the openai SDK; one real proxy
records it all against the local servers that speak each wire format, then serves the case
file. Every prompt carries markup, which the local servers echo into their answers.

Each page is read the way a person reads it, at a desktop's width and at a phone's: what
the model saw and what it answered (prompt, answer, model, stop reason, tokens), the agent
steps with their tool calls, search finding a word of each answer, and recorded markup left
as text (no element made from it, nothing run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import openai
import pytest
import trustme
from botocore.config import Config
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from playwright.sync_api import Browser, Page, expect, sync_playwright
from support.browser import artifact_path, chromium_or_skip, failed, overflowing
from support.cloud_upstream import AZURE_MODEL, CloudUpstream
from support.proxy import ProxyProcess
from support.ws_upstream import HANDSHAKE_S, WsUpstream

from freezeframe.proxy.trust import client_bundle

pytestmark = [
    pytest.mark.e2e,
    # openai's sync realtime client calls websockets' connect() outside a context manager,
    # which websockets >= 17.1 deprecates; the warning is theirs, not freezeframe's.
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager"),
]

CLOUD = "cloud"
REALTIME = "realtime"
MARKUP = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
"""In every prompt, so in every answer the local servers echo: it must stay text."""
CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
NOVA_PROFILE = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"
GEMINI = "gemini-2.0-flash"
WIDTHS = (1400, 390)
"""A desktop's width and a phone's: no page may scroll sideways at either."""
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city now",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@dataclass(frozen=True)
class Call:
    """One model call of the run and what its exchange page must show."""

    cassette: str
    seq: int
    prompt: str
    answer: str
    """The answer's text, or the name of the tool it calls."""
    model: str
    finish: str
    tokens: tuple[str, ...]
    """Token counts as the page writes them, e.g. ``inputTokens 12``."""


@dataclass
class World:
    proxy: ProxyProcess
    calls: dict[str, Call]
    tool: int
    """The seq of the exchange that ran the Converse tool call."""
    realtime_tool: int
    """The seq of the exchange that ran the Realtime session's tool call."""

    @property
    def url(self) -> str:
        return self.proxy.admin_url


def bedrock(base: str, bundle: Path) -> Any:
    session = boto3.Session(
        region_name="us-east-1",
        aws_access_key_id="ASIAE2ECASEFILE00001",
        aws_secret_access_key="e2e-casefile-secret",
    )
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=20)
    return session.client("bedrock-runtime", endpoint_url=base, verify=str(bundle), config=config)


ASKED = {
    "converse-tool": "Lisbon",
    "converse": "Lisbon",
    "converse-stream": "Porto",
    "invoke": "Faro",
    "invoke-stream": "Evora",
    "gemini-tool": "Aveiro",
    "gemini": "Braga",
    "gemini-stream": "Coimbra",
    "vertex": "Viseu",
    "azure": "Sintra",
    "realtime": "Where is my order?",
}
"""The words of each call's prompt, before the markup every prompt carries."""


def prompt(words: str) -> str:
    return f"{words} {MARKUP}"


def cloud_agent(base: str, bundle: Path) -> dict[str, str]:
    """Each SDK once (Converse twice, around the tool it asks for); what each call said."""
    said: dict[str, str] = {}
    client = bedrock(base, bundle)
    tools = {
        "tools": [
            {
                "toolSpec": {
                    "name": WEATHER["name"],
                    "description": WEATHER["description"],
                    "inputSchema": {"json": WEATHER["schema"]},
                }
            }
        ]
    }
    question = [{"role": "user", "content": [{"text": prompt("Lisbon")}]}]
    first = client.converse(modelId=NOVA_PROFILE, messages=question, toolConfig=tools)
    use = first["output"]["message"]["content"][0]["toolUse"]
    said["converse-tool"] = use["name"]
    with httpx.Client(timeout=10) as http:
        weather = http.get(f"{base}/tool/counter", params=use["input"]).json()
    result = {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"json": weather}]}}
    second = client.converse(
        modelId=NOVA_PROFILE,
        messages=[*question, first["output"]["message"], {"role": "user", "content": [result]}],
        toolConfig=tools,
    )
    said["converse"] = second["output"]["message"]["content"][0]["text"]
    streamed = client.converse_stream(
        modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": prompt("Porto")}]}]
    )
    said["converse-stream"] = "".join(
        e["contentBlockDelta"]["delta"]["text"]
        for e in streamed["stream"]
        if "contentBlockDelta" in e
    )
    body: dict[str, Any] = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": prompt("Faro")}],
    }
    invoked = client.invoke_model(modelId=CLAUDE, body=json.dumps(body))
    said["invoke"] = json.loads(invoked["body"].read())["content"][0]["text"]
    body["messages"] = [{"role": "user", "content": prompt("Evora")}]
    chunks = client.invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    pieces = [json.loads(e["chunk"]["bytes"]) for e in chunks["body"] if "chunk" in e]
    said["invoke-stream"] = "".join(
        p["delta"]["text"] for p in pieces if p["type"] == "content_block_delta"
    )
    gemini = genai.Client(
        api_key="AIzaSyE2ECASEFILEKEY0123456789abcdef",
        http_options=types.HttpOptions(base_url=base, api_version="v1beta"),
    )
    declared = types.FunctionDeclaration(
        name=WEATHER["name"],
        description=WEATHER["description"],
        parameters_json_schema=WEATHER["schema"],
    )
    asked = gemini.models.generate_content(
        model=GEMINI,
        contents=prompt("Aveiro"),
        config=types.GenerateContentConfig(tools=[types.Tool(function_declarations=[declared])]),
    )
    said["gemini-tool"] = (asked.function_calls or [])[0].name or ""
    said["gemini"] = (
        gemini.models.generate_content(model=GEMINI, contents=prompt("Braga")).text or ""
    )
    said["gemini-stream"] = "".join(
        c.text or ""
        for c in gemini.models.generate_content_stream(model=GEMINI, contents=prompt("Coimbra"))
    )
    vertex = genai.Client(
        vertexai=True,
        project="p-1",
        location="us-central1",
        credentials=Credentials(token="ya29.e2eCasefileToken0123456789"),
        http_options=types.HttpOptions(base_url=base),
    )
    said["vertex"] = (
        vertex.models.generate_content(model=GEMINI, contents=prompt("Viseu")).text or ""
    )
    azure = openai.AzureOpenAI(
        azure_endpoint=base, api_key="azure-casefile-key-0123456789", api_version="2024-10-21",
        max_retries=0,
    )  # fmt: skip
    with azure.chat.completions.create(
        model="agent-gpt4o",
        messages=[{"role": "user", "content": prompt("Sintra")}],
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        said["azure"] = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    return said


INSTRUCTIONS = f"You answer questions about orders. {MARKUP}"


ORDERS = {
    "type": "function",
    "name": "lookup_orders",
    "description": "Find a user's orders.",
    "parameters": {"type": "object", "properties": {"user": {"type": "string"}}},
}


def realtime_agent(up: WsUpstream, base: str) -> dict[str, str]:
    """One Realtime session: instructions and a tool, the user's words, the tool the model
    calls (run over HTTP, its output sent back), then the model's answer."""
    client = openai.OpenAI(base_url=f"{up.base_url}/v1", api_key="sk-e2e-casefile-realtime")
    said = {"realtime": ""}
    with (
        client.realtime.connect(
            model="gpt-realtime", websocket_connection_options={"open_timeout": HANDSHAKE_S}
        ) as connection,
        httpx.Client() as http,
    ):
        connection.recv()
        session = {"type": "realtime", "instructions": INSTRUCTIONS, "tools": [ORDERS]}
        connection.session.update(session=session)  # type: ignore[arg-type]
        connection.recv()
        words = [{"type": "input_text", "text": prompt(ASKED["realtime"])}]
        connection.conversation.item.create(
            item={"type": "message", "role": "user", "content": words}
        )
        connection.recv()
        connection.response.create()
        for event in connection:
            if event.type == "response.function_call_arguments.done":
                said["realtime-tool"] = event.name
                found = http.get(f"{base}/tool/counter", params=json.loads(event.arguments))
                output = {"type": "function_call_output", "call_id": event.call_id}
                connection.conversation.item.create(item={**output, "output": found.text})
            elif event.type == "response.output_text.delta":
                said["realtime"] += event.delta
            elif event.type == "response.done" and said["realtime"]:
                break
            elif event.type == "response.done":
                connection.response.create()
    return said


def seqs_by_call(proxy: ProxyProcess) -> dict[str, int]:
    """Which recorded exchange is which call, by its path."""
    found: dict[str, int] = {}
    for row in proxy.admin("GET", f"/cassettes/{CLOUD}.json").json():
        path = httpx.URL(row["url"]).path
        if path.endswith("/converse"):
            found["converse" if "converse-tool" in found else "converse-tool"] = row["seq"]
        elif path.endswith("/converse-stream"):
            found["converse-stream"] = row["seq"]
        elif path.endswith("/invoke"):
            found["invoke"] = row["seq"]
        elif path.endswith("/invoke-with-response-stream"):
            found["invoke-stream"] = row["seq"]
        elif path.endswith(":streamGenerateContent"):
            found["gemini-stream"] = row["seq"]
        elif "/projects/" in path:
            found["vertex"] = row["seq"]
        elif path.endswith(":generateContent"):
            found["gemini" if "gemini-tool" in found else "gemini-tool"] = row["seq"]
        elif path.startswith("/openai/"):
            found["azure"] = row["seq"]
        elif path == "/tool/counter":
            found["tool"] = row["seq"]
    return found


@pytest.fixture(scope="module")
def world(
    upstream_ca: trustme.CA, upstream_ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("cloud-casefile") / "data"
    cloud = CloudUpstream(upstream_ca).start()
    ws = WsUpstream(upstream_ca, calls_tools=True).start()
    proxy = ProxyProcess(data_dir, mode="record", cassette=CLOUD, upstream_ca=upstream_ca_file)
    try:
        proxy.start()
        bundle = client_bundle(data_dir)
        with pytest.MonkeyPatch.context() as env:
            for name in list(os.environ):
                if name.lower() in ("all_proxy", "ssl_cert_dir") or name.startswith("AWS_"):
                    env.delenv(name)
            for name, value in proxy.client_env(bundle).items():
                env.setenv(name, value)
            env.setenv("AWS_EC2_METADATA_DISABLED", "true")
            said = cloud_agent(cloud.base_url, bundle)
            switched = proxy.admin("PUT", "/api/mode", json={"cassette": REALTIME})
            assert switched.status_code == 200, switched.text
            said |= realtime_agent(ws, cloud.base_url)
        switched = proxy.admin("PUT", "/api/mode", json={"mode": "replay", "cassette": CLOUD})
        assert switched.status_code == 200, switched.text
        proxy.stored(REALTIME, 2)
        seqs = seqs_by_call(proxy)
        assert len(seqs) == 11, sorted(seqs)

        def call(name: str, model: str, finish: str, *tokens: str) -> Call:
            cassette, seq = (REALTIME, 0) if name == "realtime" else (CLOUD, seqs[name])
            return Call(cassette, seq, prompt(ASKED[name]), said[name], model, finish, tokens)

        calls = {
            "converse-tool": call("converse-tool", NOVA_PROFILE, "tool_use", "inputTokens 12"),
            "converse": call("converse", NOVA_PROFILE, "end_turn", "inputTokens 12"),
            "converse-stream": call("converse-stream", CLAUDE, "end_turn", "inputTokens 12"),
            "invoke": call("invoke", CLAUDE, "end_turn", "input_tokens 11"),
            "invoke-stream": call("invoke-stream", CLAUDE, "end_turn", "input_tokens 11"),
            "gemini-tool": call("gemini-tool", GEMINI, "STOP", "promptTokenCount 9"),
            "gemini": call("gemini", GEMINI, "STOP", "promptTokenCount 9"),
            "gemini-stream": call("gemini-stream", GEMINI, "STOP", "promptTokenCount 9"),
            "vertex": call("vertex", GEMINI, "STOP", "promptTokenCount 9"),
            "azure": call("azure", "agent-gpt4o", "stop", "prompt_tokens 10"),
            "realtime": call("realtime", "gpt-realtime", "completed", "input_tokens 20"),
        }
        rows = proxy.admin("GET", f"/cassettes/{REALTIME}.json").json()
        (ran,) = [row["seq"] for row in rows if "/tool/counter" in row["url"]]
        assert said["realtime-tool"] == ORDERS["name"]
        yield World(proxy, calls, seqs["tool"], ran)
    finally:
        proxy.kill()
        cloud.stop()
        ws.stop()


@pytest.fixture(scope="module")
def browser(world: World) -> Iterator[Browser]:
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-proxy-server"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page that keeps every dialog opened, screenshotted into test-artifacts/ when
    its test fails."""
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    if failed(request.node):
        page.screenshot(path=str(artifact_path(request.node)), full_page=True)
    context.close()
    assert dialogs == [], "recorded text ran as script"


def inert(page: Page) -> None:
    """The recorded markup made no element and ran nothing."""
    expect(page.locator("main img")).to_have_count(0)
    expect(page.locator("main script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None


def fits(page: Page) -> None:
    """Nothing on the page sticks out sideways at a desktop's width or a phone's."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        sticking_out = overflowing(page)
        assert sticking_out == [], f"{page.url} at {width} px: " + "; ".join(sticking_out)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


@pytest.mark.parametrize("name", list(ASKED))
def test_each_exchange_page_shows_what_the_model_saw_and_what_it_answered(
    world: World, page: Page, name: str
) -> None:
    call = world.calls[name]
    page.goto(f"{world.url}/cassettes/{call.cassette}/{call.seq}")
    said = page.locator("#conversation .msg.role-user pre").filter(has_text=ASKED[name]).first
    expect(said).to_contain_text(call.prompt)
    answer = page.locator("#answer")
    if name.endswith("-tool"):
        expect(answer.locator(".callname")).to_have_text(call.answer)
    else:
        expect(answer.locator(".answer-text")).to_have_text(call.answer)
    expect(page.locator("#conversation p.hint").first).to_contain_text(call.model)
    if name == "azure":  # the deployment was asked; the model behind it answered
        expect(page.locator("#conversation p.hint").first).to_contain_text(AZURE_MODEL)
    facts = answer.locator("table.kv")
    if call.finish is not None:
        expect(facts).to_contain_text(f"finish reason{call.finish}")
    for tokens in call.tokens:
        expect(facts).to_contain_text(tokens)
    if name.endswith("-tool"):  # the tool offered, with the schema of its arguments
        expect(page.locator("#conversation .tool pre")).to_contain_text('"city"')
    if name in ("converse-stream", "invoke-stream"):  # an AWS event stream: its events
        body = page.locator("#response pre.body")
        expect(body).to_contain_text('"end_turn"')
        assert '"p":' not in body.inner_text(), "Bedrock's padding is noise"
    inert(page)
    fits(page)


def test_the_steps_pages_show_each_call_its_answer_and_its_tool_calls(
    world: World, page: Page
) -> None:
    calls = world.calls
    page.goto(f"{world.url}/cassettes/{CLOUD}/steps")
    asked = page.locator(f"#step-{calls['converse-tool'].seq}")
    expect(asked.locator(".call .callname")).to_have_text(WEATHER["name"])
    arguments = json.dumps({"city": prompt(ASKED["converse-tool"])}, separators=(",", ":"))
    expect(asked.locator(".call code").nth(1)).to_have_text(arguments)
    expect(asked.locator(".call .executed a.link")).to_have_text(f"#{world.tool}")
    result = asked.locator(".call .result")
    expect(result.locator("a.link")).to_have_text(f"#{calls['converse'].seq}")
    expect(result.locator(".badge")).to_have_text("exact")
    expect(result.locator(".why")).to_contain_text("toolUseId tooluse_1")
    expect(page.locator(f"#step-{world.tool} .executes")).to_contain_text(
        f"#{calls['converse-tool'].seq}"
    )
    gemini = page.locator(f"#step-{calls['gemini-tool'].seq}")
    expect(gemini.locator(".call .callname")).to_have_text(WEATHER["name"])
    expect(gemini.locator(".call code").nth(1)).to_contain_text(ASKED["gemini-tool"])
    for name, call in calls.items():
        if call.cassette != CLOUD or name.endswith("-tool"):
            continue
        step = page.locator(f"#step-{call.seq}")
        expect(step.locator(".model")).to_contain_text(call.model)
        expect(step.locator(".model")).to_contain_text(f"finish {call.finish}")
        expect(step.locator(".answer-text")).to_have_text(call.answer)
    inert(page)
    fits(page)

    realtime = calls["realtime"]  # the session called a tool, sent its output, answered
    page.goto(f"{world.url}/cassettes/{REALTIME}/steps")
    step = page.locator(f"#step-{realtime.seq}")
    expect(step.locator(".model")).to_contain_text("openai.realtime")
    expect(step.locator(".answer-text")).to_have_text(realtime.answer.strip())
    expect(step.locator(".call .callname")).to_have_text(ORDERS["name"])
    expect(step.locator(".call code").nth(1)).to_contain_text(ASKED["realtime"])
    expect(step.locator(".call .executed a.link")).to_have_text(f"#{world.realtime_tool}")
    expect(step.locator(".call .result a.link")).to_have_text(f"#{realtime.seq}")
    expect(step.locator(".call .result .badge")).to_have_text("exact")
    expect(page.locator(f"#step-{world.realtime_tool} .executes")).to_contain_text(
        f"#{realtime.seq}"
    )
    inert(page)
    fits(page)

    page.goto(f"{world.url}/cassettes/{CLOUD}")  # the run's waterfall
    expect(page.locator("tr.exchange")).to_have_count(len(calls))
    inert(page)
    fits(page)


def test_search_finds_a_word_of_each_answer_and_shows_the_markup_as_text(
    world: World, page: Page
) -> None:
    for name, call in world.calls.items():
        if name.endswith("-tool"):
            continue
        words = call.answer.split(" <img")[0].split()[:4]
        page.goto(f"{world.url}/search")
        page.locator("input[name=q]").fill(" ".join(words))
        page.get_by_role("button", name="Search").click()
        link = page.locator(f'a[href="/cassettes/{call.cassette}/{call.seq}"]')
        hit = page.locator("tr.hit", has=link)
        expect(hit, name).to_have_count(1)
        expect(hit.locator("td").nth(3), name).to_contain_text("response")
    page.goto(f"{world.url}/search?q=onerror")
    expect(page.locator("tr.hit")).not_to_have_count(0)
    expect(page.locator("tr.hit code").first).to_contain_text("onerror")
    inert(page)
    fits(page)


def test_the_realtime_page_shows_the_instructions_and_the_transcript_as_text(
    world: World, page: Page
) -> None:
    realtime = world.calls["realtime"]
    page.goto(f"{world.url}/cassettes/{REALTIME}/{realtime.seq}")
    expect(page.locator("#ws-closed")).to_contain_text("closed by client: 1000")
    expect(page.locator("p.problem")).to_have_count(0)  # a session ended as sessions end
    expect(page.locator("#conversation .role-system pre")).to_have_text(INSTRUCTIONS)
    asked = page.locator("#conversation .role-assistant .toolcall")
    expect(asked).to_contain_text(ORDERS["name"])
    expect(page.locator("#conversation .role-tool .toolresult")).to_contain_text('"count"')
    transcript = page.locator("#websocket tr.wsmsg")
    told = transcript.filter(has_text='"session.update"')
    expect(told.locator("td").nth(1)).to_have_text("client")
    expect(told).to_contain_text(json.dumps(INSTRUCTIONS))
    expect(transcript.filter(has_text="response.done").last).to_contain_text("completed")
    inert(page)
    fits(page)
