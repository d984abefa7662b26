"""Traffic as real agents send it, made by the real clients, for every reader to be run over.

    with CloudUpstream(ca) as upstream, McpServer() as mcp:
        send_corpus(upstream, mcp.url)   # through whatever proxy the env points at

Each piece is what an installed client really puts on the wire, not a hand-written body:

* openai: chat with tools (``user``, ``metadata``, a tool call and the ``tool_call_id`` that
  echoes it), the same streamed with ``stream_options``, and an SDK retry of a retryable 429;
* anthropic: messages with ``metadata`` and tools (``tool_use`` then ``tool_result``),
  streamed and whole;
* mcp (the official SDK, streamable HTTP): the handshake, ``tools/list`` and ``tools/call``
  with JSON-RPC ids, SSE answers, and the SDK closing each answer once it has read it;
* requests and httpx: gzip- and brotli-encoded answers, an SSE stream the client stops
  reading after its first event, and side traffic no agent code asked for (a trace export in
  the Agents SDK's shape, with fresh ids and timestamps each run);
* the agent frameworks, each one turn (a tool call, the tool's result, the answer, streamed
  where the framework streams): the OpenAI Agents SDK (streamed, then its own trace export,
  pointed at the upstream), pydantic-ai (streamed), LangChain's ``ChatOpenAI`` (invoked, its
  tool run, then streamed, with LangSmith tracing on: the run trees' upload to
  ``/runs/multipart`` on the upstream), LiteLLM (its model-cost-map fetch
  from the upstream, then whole and streamed) and smolagents' ``ToolCallingAgent`` (the call
  and its result sent back as text, "Calling tools: [...]" and "Observation: ...", then
  ``final_answer``);
* boto3's Bedrock Converse (a tool use, its result, then ``converse_stream``: SigV4-signed,
  AWS's binary event stream), against an upstream that speaks Bedrock (``CloudUpstream``);
* the ``cohere`` SDK's Chat v2 (``ClientV2``: a tool call, its result, the answer and another
  tool call streamed as Cohere's named SSE events), against the same ``CloudUpstream``;
* the openai npm package on Node 20 (tests/node/corpus.mjs) and the MCP TypeScript SDK
  (tests/node/mcp.mjs: its standalone GET stream, closed by ``client.close()`` after its
  headers), whose fetch ignores proxy variables: they go through the proxy by undici's
  ``EnvHttpProxyAgent``.

The clients are made inside each call, after the test has pointed the environment at a
proxy: the SDKs read ``HTTPS_PROXY`` and ``SSL_CERT_FILE`` when they are constructed. The agent
frameworks are imported there too: together they take some ten seconds to import, which every
pytest worker would otherwise pay when it collects the suite.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import requests
from mcp.client.client import Client as McpClient

from support.upstream import Upstream

__all__ = [
    "PIECES",
    "bedrock_client",
    "send_corpus",
    "send_mcp",
    "send_node_mcp",
    "send_side_traffic",
]

TIMEOUT = 20.0
NODE_PROJECT = Path(__file__).parents[1] / "node"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ANTHROPIC_WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": WEATHER["function"]["parameters"],  # type: ignore[index]
}


def _openai(upstream: Upstream, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=upstream.url("/v1"), api_key="sk-corpus", max_retries=retries, timeout=TIMEOUT
    )


def _anthropic(upstream: Upstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=upstream.base_url, api_key="sk-ant-corpus", max_retries=0, timeout=TIMEOUT
    )


def send_openai(upstream: Upstream) -> None:
    """A tool-using chat, whole then streamed, with the bookkeeping fields SDK users set."""
    with _openai(upstream) as client:
        _openai_turn(client)


def _openai_turn(client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,
        tools=[WEATHER],  # type: ignore[list-item]
        user="user-1234",
        metadata={"agent": "corpus", "run": secrets.token_hex(4)},
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"city": "Paris", "sky": "clear"}'},
    ]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, user="user-1234")
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Say something short."}],
        stream=True,
        stream_options={"include_usage": True},
        user="user-1234",
    )
    for _ in stream:
        pass


def send_openai_retry(upstream: Upstream) -> None:
    """The SDK's own retry of a retryable 429: two attempts on the wire, one error in code."""
    try:
        with _openai(upstream, retries=1) as client:
            client.post(
                upstream.url("/ratelimited/full?retryable=1"),
                cast_to=object,
                body={"model": "gpt-4o-mini", "input": "hello"},
            )
    except openai.RateLimitError:
        return
    raise AssertionError("/ratelimited/full answered without a 429")


def send_anthropic(upstream: Upstream) -> None:
    """A tool use and its result, with the ``metadata.user_id`` Anthropic asks callers for."""
    with _anthropic(upstream) as client:
        _anthropic_turn(client)


def _anthropic_turn(client: anthropic.Anthropic) -> None:
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = client.messages.create(
        model="claude-opus-4-7",
        max_tokens=256,
        messages=messages,
        tools=[ANTHROPIC_WEATHER],  # type: ignore[list-item]
        metadata={"user_id": "user-5678"},
    )
    use = next(block for block in first.content if block.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "snow"}],
        },
    ]
    with client.messages.stream(
        model="claude-opus-4-7",
        max_tokens=256,
        messages=messages,
        metadata={"user_id": "user-5678"},
    ) as stream:
        stream.until_done()


def send_mcp(url: str) -> None:
    """The official MCP client over streamable HTTP, in both protocol generations."""

    async def session(mode: str) -> None:
        async with McpClient(url, mode=mode) as client:
            await client.list_tools()
            await client.call_tool("lookup", {"q": "corpus"})
            await client.call_tool("add", {"a": 2, "b": 3})

    async def both() -> None:
        await asyncio.wait_for(session("legacy"), TIMEOUT)
        await asyncio.wait_for(session("auto"), TIMEOUT)

    asyncio.run(both())


def city_weather(city: str) -> str:
    """The weather in a city: the tool every agent framework's turn calls."""
    return json.dumps({"city": city, "sky": "clear"})


def send_openai_agents(upstream: Upstream) -> None:
    """One streamed turn of the OpenAI Agents SDK over chat completions: the model asks for
    a tool, the SDK runs it and sends its result back, then exports the run's trace to the
    upstream's ``/v1/traces/ingest`` (its real exporter, pointed at the local server)."""
    import agents
    from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor

    client = openai.AsyncOpenAI(
        base_url=upstream.url("/v1"), api_key="sk-corpus", max_retries=0, timeout=TIMEOUT
    )
    exporter = BackendSpanExporter(
        api_key="sk-corpus", endpoint=upstream.url("/v1/traces/ingest"), max_retries=0
    )
    processor = BatchTraceProcessor(exporter)
    agents.set_trace_processors([processor])
    agent = agents.Agent(
        name="Forecaster",
        instructions="Answer with the weather.",
        model=agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[agents.function_tool(city_weather, name_override="get_weather")],
    )

    async def turn() -> None:
        run = agents.Runner.run_streamed(agent, "What is the weather in Rome?", max_turns=3)
        async for _ in run.stream_events():
            pass
        await client.close()

    try:
        asyncio.run(asyncio.wait_for(turn(), TIMEOUT))
    finally:
        processor.shutdown(timeout=TIMEOUT)
        exporter.close()


def send_pydantic_ai(upstream: Upstream) -> None:
    """One streamed pydantic-ai run over chat completions: a tool call, its result, the
    final answer streamed as text."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = openai.AsyncOpenAI(
        base_url=upstream.url("/v1"), api_key="sk-corpus", max_retries=0, timeout=TIMEOUT
    )
    agent = PydanticAgent(
        OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)),
        instructions="Answer with the weather.",
        tools=[city_weather],
    )

    async def turn() -> None:
        async with client, agent.run_stream("What is the weather in Madrid?") as run:
            async for _ in run.stream_text():
                pass

    asyncio.run(asyncio.wait_for(turn(), TIMEOUT))


LANGSMITH_INFO = {
    "version": "0.10.0",
    "batch_ingest_config": {
        "use_multipart_endpoint": True,
        "scale_up_qsize_trigger": 1000,
        "scale_up_nthreads_limit": 16,
        "scale_down_nempty_trigger": 4,
        "size_limit": 100,
        "size_limit_bytes": 20971520,
    },
    "instance_flags": {"zstd_compression_enabled": True},
}
"""What LangSmith's cloud answers to ``GET /info``, as far as its client's uploads read it."""


def send_langchain(upstream: Upstream) -> None:
    """LangChain's ``ChatOpenAI`` with a bound tool, LangSmith tracing on: the call, the tool
    run locally, then its result with the answer streamed, and the run trees uploaded to
    ``/runs/multipart`` on the upstream (its ``LANGSMITH_ENDPOINT``), values and all,
    zstd-compressed as LangSmith's cloud asks.

    Left to itself the client asks ``GET /info`` from a thread of its own and uploads in
    batches its thread cuts by time, so the order and the number of requests would depend on
    the clock, and replay would ask for more than was recorded. So it is given the cloud's
    answer to ``/info`` and holds its runs until ``flush`` (``process_buffered_run_ops``, its
    own hook): one upload once the tool has run, with the call and the tool's arguments and
    result, before the result goes back to the model (where a run that takes longer than the
    client's batching wait uploads it too), and one at the end."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_core.tracers import LangChainTracer
    from langchain_openai import ChatOpenAI
    from langsmith import Client as LangSmith

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return city_weather(city)

    smith = LangSmith(
        api_url=upstream.base_url,
        api_key="lsv2_pt_corpus",
        info=LANGSMITH_INFO,
        process_buffered_run_ops=lambda runs: runs,
        run_ops_buffer_size=1000,
        run_ops_buffer_timeout_ms=60_000,
    )
    traced = {"callbacks": [LangChainTracer(project_name="corpus", client=smith)]}
    chat = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=upstream.url("/v1"),
        api_key="sk-corpus",  # type: ignore[arg-type]
        max_retries=0,
        timeout=TIMEOUT,
        stream_usage=True,
    ).bind_tools([get_weather])
    messages: list[Any] = [HumanMessage("What is the weather in Vienna?")]
    first = chat.invoke(messages, config=traced)  # type: ignore[arg-type]
    call = first.tool_calls[0]  # type: ignore[attr-defined]
    result = get_weather.invoke(call["args"], config=traced)  # type: ignore[arg-type]
    smith.flush(timeout=TIMEOUT)  # the call and the tool's run, before the result goes back
    messages += [first, ToolMessage(result, tool_call_id=call["id"])]
    for _ in chat.stream(messages, config=traced):  # type: ignore[arg-type]
        pass
    smith.flush(timeout=TIMEOUT)
    smith.cleanup()


@contextmanager
def _local_cost_map() -> Iterator[None]:
    """LiteLLM's own switch for its bundled model-cost map, on for the block."""
    before = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    try:
        yield
    finally:
        if before is None:
            del os.environ["LITELLM_LOCAL_MODEL_COST_MAP"]
        else:
            os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = before


def send_litellm(upstream: Upstream) -> None:
    """LiteLLM's side fetch of its model-cost map (from the local upstream), then a tool call
    through ``litellm.completion`` and its result with the answer streamed.

    The upstream's map lists one model, so LiteLLM logs that it is too short and keeps its
    bundled copy, as it does with any short answer; the fetch on the wire is the real one."""
    with warnings.catch_warnings():
        # LiteLLM's own use of pydantic warns (ReadOnly TypedDict items, instance attributes
        # deprecated since 2.11): LiteLLM's to fix, not what the corpus is about.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        with _local_cost_map():
            # Imported, LiteLLM fetches its map from GitHub (once per process): not from a
            # test. The same fetch follows, from the local upstream, in every run.
            import litellm
        litellm.get_model_cost_map(url=upstream.url("/model_prices_and_context_window.json"))
        _litellm_turn(upstream)


def _litellm_turn(upstream: Upstream) -> None:
    import litellm

    route: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "api_base": upstream.url("/v1"),
        "api_key": "sk-corpus",
        "timeout": TIMEOUT,
        "num_retries": 0,
    }
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Lisbon?"}]
    first = litellm.completion(**route, messages=messages, tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]  # type: ignore[union-attr]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),  # type: ignore[union-attr]
        {"role": "tool", "tool_call_id": call.id, "content": city_weather("Lisbon")},
    ]
    stream = litellm.completion(
        **route, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    for _ in stream:
        pass


def send_smolagents(upstream: Upstream) -> None:
    """One smolagents ``ToolCallingAgent`` run: the model calls the tool natively, and the
    agent sends the call back as the assistant's text (``Calling tools: [...]``) and its
    result as the user's (``Observation: ...``), then the model calls ``final_answer``."""
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city.
        """
        return city_weather(city)

    model = OpenAIServerModel(
        model_id="gpt-4o-mini",
        api_base=upstream.url("/v1"),
        api_key="sk-corpus",
        client_kwargs={"max_retries": 0, "timeout": TIMEOUT},
    )
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, verbosity_level=-1)
    answer = agent.run("What is the weather in Bern?")
    if "clear" not in str(answer):
        raise AssertionError(f"smolagents did not finish its run: {answer!r}")


BEDROCK_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
BEDROCK_WEATHER = {
    "toolSpec": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "inputSchema": {"json": WEATHER["function"]["parameters"]},  # type: ignore[index]
    }
}


def bedrock_client(endpoint: str) -> Any:
    """boto3's ``bedrock-runtime`` client as an agent makes one, through the proxy the
    environment names (botocore reads ``HTTPS_PROXY``; its CA bundle is passed, as botocore
    reads no ``SSL_CERT_FILE``), with made-up credentials; one attempt."""
    import boto3
    from botocore.config import Config

    session = boto3.Session(
        region_name="us-east-1",
        aws_access_key_id="ASIACORPUSACCESSKEY1",
        aws_secret_access_key="corpus-secret-access-key",
    )
    config = Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=TIMEOUT)
    return session.client(
        "bedrock-runtime",
        endpoint_url=endpoint,
        verify=os.environ["SSL_CERT_FILE"],
        config=config,
    )


def send_bedrock(upstream: Upstream) -> None:
    """boto3's Bedrock Converse: a tool use, its result sent back, then the answer streamed
    (``converse_stream``, AWS's binary event stream). The upstream must speak Bedrock
    (tests/support/cloud_upstream.py's ``CloudUpstream``)."""
    client = bedrock_client(upstream.base_url)
    tools = {"tools": [BEDROCK_WEATHER]}
    messages: list[Any] = [{"role": "user", "content": [{"text": "Weather in Zurich?"}]}]
    first = client.converse(modelId=BEDROCK_MODEL, messages=messages, toolConfig=tools)
    use = first["output"]["message"]["content"][0]["toolUse"]
    weather = json.loads(city_weather(use["input"]["city"]))
    result = {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"json": weather}]}}
    messages += [first["output"]["message"], {"role": "user", "content": [result]}]
    streamed = client.converse_stream(modelId=BEDROCK_MODEL, messages=messages, toolConfig=tools)
    text = "".join(
        event["contentBlockDelta"]["delta"].get("text", "")
        for event in streamed["stream"]
        if "contentBlockDelta" in event
    )
    if not text:
        raise AssertionError("Bedrock's ConverseStream answered no text")


COHERE_MODEL = "command-a-03-2025"


def send_cohere(upstream: Upstream) -> None:
    """The ``cohere`` SDK's Chat v2 (``ClientV2``): a tool call, its result sent back as a
    document as Cohere's docs show, the answer streamed (``chat_stream``, named SSE events),
    then a streamed tool call (``tool-plan-delta``, ``tool-call-start``/``-delta``/``-end``).
    Its httpx client goes through the proxy by ``HTTPS_PROXY`` and trusts ``SSL_CERT_FILE``.
    The upstream must speak Cohere (tests/support/cloud_upstream.py's ``CloudUpstream``)."""
    import cohere

    with cohere.ClientV2(
        api_key="co-corpus-key", base_url=upstream.base_url, timeout=TIMEOUT, max_retries=0
    ) as client:
        _cohere_turn(client)


def _cohere_turn(client: Any) -> None:
    messages: list[Any] = [{"role": "user", "content": "Hamburg"}]
    first = client.chat(model=COHERE_MODEL, messages=messages, tools=[WEATHER])
    call = first.message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    result = {"type": "document", "document": {"data": city_weather(arguments["city"])}}
    messages += [
        {"role": "assistant", "tool_plan": first.message.tool_plan, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call.id, "content": [result]},
    ]
    text = "".join(
        event.delta.message.content.text or ""
        for event in client.chat_stream(model=COHERE_MODEL, messages=messages, tools=[WEATHER])
        if event.type == "content-delta"
    )
    if not text:
        raise AssertionError("Cohere's chat_stream answered no text")
    asked = [{"role": "user", "content": "Bremen"}]
    kinds = [
        event.type
        for event in client.chat_stream(model=COHERE_MODEL, messages=asked, tools=[WEATHER])
    ]
    if "tool-call-end" not in kinds:
        raise AssertionError(f"Cohere's chat_stream called no tool: {kinds}")


def node_project() -> Path:
    """tests/node with its packages (the openai SDK, the MCP SDK, undici) installed from its
    lock file, again when one is missing (a checkout made before it was added)."""
    if shutil.which("node") is None:
        raise AssertionError("Node.js is not installed; the README says how to get it")
    dependencies = json.loads((NODE_PROJECT / "package.json").read_text())["dependencies"]
    if not all((NODE_PROJECT / "node_modules" / name).is_dir() for name in dependencies):
        npm = ["npm", "ci", "--no-audit", "--no-fund"]
        subprocess.run(npm, cwd=NODE_PROJECT, check=True, timeout=300)
    return NODE_PROJECT


def send_node(upstream: Upstream) -> None:
    """The official openai npm package on Node: a tool call, then its result with the answer
    streamed (tests/node/corpus.mjs), through the proxy by undici's EnvHttpProxyAgent."""
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": os.environ["SSL_CERT_FILE"]}
    script = node_project() / "corpus.mjs"
    done = subprocess.run(
        ["node", str(script), upstream.base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=2 * TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{script.name} failed: {done.stderr.strip()}")
    said = json.loads(done.stdout)
    if said["tool"] != "get_weather" or not said["answer"]:
        raise AssertionError(f"{script.name} did not finish its turn: {said}")


def send_node_mcp(url: str) -> None:
    """The official MCP TypeScript SDK on Node (tests/node/mcp.mjs): the handshake, its
    standalone GET stream, ``tools/list`` and ``tools/call``, then ``client.close()``, which
    closes that stream right after its headers."""
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": os.environ["SSL_CERT_FILE"]}
    script = node_project() / "mcp.mjs"
    done = subprocess.run(
        ["node", str(script), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=2 * TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{script.name} failed: {done.stderr.strip()}")
    said = json.loads(done.stdout)
    if said["tools"] != ["add", "lookup"] or not said["answer"].startswith("node:"):
        raise AssertionError(f"{script.name} did not finish its session: {said}")


def send_encoded(upstream: Upstream) -> None:
    """Compressed answers, read by requests (gzip) and httpx (brotli)."""
    requests.get(upstream.url("/gzip"), timeout=TIMEOUT).raise_for_status()
    with httpx.Client(timeout=TIMEOUT) as client:
        client.get(upstream.url("/encoded/br")).raise_for_status()


def send_early_close(upstream: Upstream) -> None:
    """A client that has what it wanted from an SSE stream and closes it before the end."""
    with (
        httpx.Client(timeout=TIMEOUT) as client,
        client.stream("GET", upstream.url("/sse/slow?events=6&gap_ms=150")) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data:"):
                break


def send_side_traffic(upstream: Upstream) -> None:
    """What the OpenAI Agents SDK exports after a run on its own: trace and span ids it mints
    and the times the spans started and ended, different in every run."""
    now = datetime.now(UTC).isoformat()
    trace = f"trace_{secrets.token_hex(16)}"
    body = {
        "data": [
            {"object": "trace", "id": trace, "workflow_name": "Agent workflow", "group_id": None},
            {
                "object": "trace.span",
                "id": f"span_{secrets.token_hex(12)}",
                "trace_id": trace,
                "parent_id": None,
                "started_at": now,
                "ended_at": now,
                "span_data": {"type": "agent", "name": "Assistant", "tools": ["get_weather"]},
                "error": None,
            },
        ]
    }
    with httpx.Client(timeout=TIMEOUT) as client:
        client.post(
            upstream.url("/v1/traces/ingest"),
            content=json.dumps(body),
            headers={
                "authorization": "Bearer sk-corpus",
                "content-type": "application/json",
                "openai-beta": "traces=v1",
            },
        ).raise_for_status()


PIECES: dict[str, Callable[[Upstream], None]] = {
    "openai": send_openai,
    "openai-retry": send_openai_retry,
    "anthropic": send_anthropic,
    "openai-agents": send_openai_agents,
    "pydantic-ai": send_pydantic_ai,
    "langchain": send_langchain,
    "litellm": send_litellm,
    "smolagents": send_smolagents,
    "bedrock": send_bedrock,
    "cohere": send_cohere,
    "node": send_node,
    "encoded": send_encoded,
    "early-close": send_early_close,
    "side-traffic": send_side_traffic,
}


def send_corpus(upstream: Upstream, mcp_url: str) -> None:
    """Every piece, in order: the model providers first, then the rest, then MCP from Python
    and from Node."""
    for piece in PIECES.values():
        piece(upstream)
    send_mcp(mcp_url)
    send_node_mcp(mcp_url)
