"""Provider profiles: what OpenAI, Anthropic and MCP requests are keyed by, checked against the
bytes the official SDKs actually send and against the SDKs' own lists of request fields."""

import json
import typing
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import anthropic
import pytest
from anthropic.types import message_count_tokens_params, message_create_params
from anthropic.types.beta import message_count_tokens_params as beta_message_count_tokens_params
from anthropic.types.beta import message_create_params as beta_message_create_params
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types import completion_create_params, embedding_create_params
from openai.types.chat import completion_create_params as chat_completion_create_params
from openai.types.responses import response_create_params
from support.sdk_capture import SdkCapture, view_of

from freezeframe.canonicalize import DEFAULT_VOLATILE_FIELDS, Canonical, RequestView, canonicalize
from freezeframe.canonicalize.jsonbody import decode_json, encode_json
from freezeframe.canonicalize.profiles import anthropic as anthropic_profile
from freezeframe.canonicalize.profiles import openai as openai_profile

# The SDKs' own request types: every field must be decided.

SDK_FIELDS: list[tuple[str, list[type], frozenset[str], frozenset[str]]] = [
    (
        "openai.chat-completions",
        [
            chat_completion_create_params.CompletionCreateParamsBase,
            chat_completion_create_params.CompletionCreateParamsStreaming,
            chat_completion_create_params.CompletionCreateParamsNonStreaming,
        ],
        openai_profile.CHAT_COMPLETIONS_KEEP,
        openai_profile.CHAT_COMPLETIONS_DROP,
    ),
    (
        "openai.responses",
        [
            response_create_params.ResponseCreateParamsBase,
            response_create_params.ResponseCreateParamsStreaming,
            response_create_params.ResponseCreateParamsNonStreaming,
        ],
        openai_profile.RESPONSES_KEEP,
        openai_profile.RESPONSES_DROP,
    ),
    (
        "openai.embeddings",
        [embedding_create_params.EmbeddingCreateParams],
        openai_profile.EMBEDDINGS_KEEP,
        openai_profile.EMBEDDINGS_DROP,
    ),
    (
        "openai.completions",
        [
            completion_create_params.CompletionCreateParamsBase,
            completion_create_params.CompletionCreateParamsStreaming,
            completion_create_params.CompletionCreateParamsNonStreaming,
        ],
        openai_profile.COMPLETIONS_KEEP,
        openai_profile.COMPLETIONS_DROP,
    ),
    (
        "anthropic.messages",
        [
            message_create_params.MessageCreateParamsBase,
            message_create_params.MessageCreateParamsStreaming,
            message_create_params.MessageCreateParamsNonStreaming,
            message_count_tokens_params.MessageCountTokensParams,
            beta_message_create_params.MessageCreateParamsBase,
            beta_message_create_params.MessageCreateParamsStreaming,
            beta_message_count_tokens_params.MessageCountTokensParams,
        ],
        anthropic_profile.MESSAGES_KEEP,
        anthropic_profile.MESSAGES_DROP | anthropic_profile.HEADER_PARAMS.keys(),
    ),
]
KEPT_THOUGH_NOT_IN_THE_SDK = {"anthropic.messages": {"temperature", "top_k", "top_p"}}


def sdk_fields(types: list[type]) -> set[str]:
    return {name for params in types for name in typing.get_type_hints(params)}


@pytest.mark.parametrize(
    ("profile", "types", "keep", "drop"), SDK_FIELDS, ids=[name for name, *_ in SDK_FIELDS]
)
def test_every_sdk_request_field_is_kept_or_dropped_on_purpose(
    profile: str, types: list[type], keep: frozenset[str], drop: frozenset[str]
) -> None:
    fields = sdk_fields(types)
    assert fields, profile
    assert not keep & drop, f"{profile}: both kept and dropped"
    assert fields - keep - drop == set(), f"{profile}: SDK fields decided by neither list"
    assert keep - fields == KEPT_THOUGH_NOT_IN_THE_SDK.get(profile, set()), (
        f"{profile}: kept fields the SDK no longer has; document or remove them"
    )
    assert drop - fields == set(), f"{profile}: dropped fields the SDK does not have"


def test_stream_and_stream_options_stay_in_every_openai_key() -> None:
    for keep in (
        openai_profile.CHAT_COMPLETIONS_KEEP,
        openai_profile.RESPONSES_KEEP,
        openai_profile.COMPLETIONS_KEEP,
    ):
        assert {"stream", "stream_options"} <= keep


# Requests exactly as the SDKs send them, captured by a mock transport.


class Capture(SdkCapture):
    """Clients whose every request is recorded instead of sent."""

    def key(self, send: Callable[["Capture"], object]) -> str:
        send(self)
        return self.canonical().key

    def canonical(self) -> Canonical:
        return canonicalize(view_of(self.requests[-1]))


@pytest.fixture
def capture() -> Capture:
    return Capture()


type Send = Callable[[Capture], object]

CHAT: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "temperature": 0.2,
}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def chat(**changes: Any) -> Send:
    return lambda c: c.openai.chat.completions.with_raw_response.create(**(CHAT | changes))


def azure_chat(**changes: Any) -> Send:
    return lambda c: c.azure.chat.completions.with_raw_response.create(
        **(CHAT | {"model": "my-deployment"} | changes)
    )


def responses(**changes: Any) -> Send:
    base = {"model": "gpt-4.1", "input": "What is 2+2?", "instructions": "Be terse."}
    return lambda c: c.openai.responses.with_raw_response.create(**(base | changes))


def embeddings(**changes: Any) -> Send:
    base = {"model": "text-embedding-3-small", "input": ["one", "two"]}
    return lambda c: c.openai.embeddings.with_raw_response.create(**(base | changes))


def completions(**changes: Any) -> Send:
    base = {"model": "gpt-3.5-turbo-instruct", "prompt": "Say hi", "max_tokens": 5}
    return lambda c: c.openai.completions.with_raw_response.create(**(base | changes))


MESSAGES: dict[str, Any] = {
    "model": "claude-test-model",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
}
TOOL_TURN = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}],
    },
]


def messages(**changes: Any) -> Send:
    return lambda c: c.anthropic.messages.with_raw_response.create(**(MESSAGES | changes))


def count_tokens(**changes: Any) -> Send:
    base = {key: MESSAGES[key] for key in ("model", "system", "messages")}
    return lambda c: c.anthropic.messages.with_raw_response.count_tokens(**(base | changes))


SAME: list[tuple[str, Send, Send]] = [
    ("chat: end user", chat(), chat(user="alice", safety_identifier="h-42")),
    ("chat: bookkeeping", chat(), chat(metadata={"run": "7"}, store=True, service_tier="flex")),
    ("chat: prompt cache", chat(), chat(prompt_cache_key="k-1", prompt_cache_retention="24h")),
    (
        "chat: ids in headers and body",
        chat(extra_headers={"X-Request-Id": "r-1", "traceparent": "00-ab-cd-01"}),
        chat(extra_headers={"X-Request-Id": "r-2"}, extra_body={"request_id": "r-2"}),
    ),
    ("azure chat: end user", azure_chat(), azure_chat(user="bob", metadata={"a": "b"})),
    ("responses: bookkeeping", responses(), responses(user="u", store=False, metadata={"a": "b"})),
    ("responses: cache, tier", responses(), responses(prompt_cache_key="k", service_tier="auto")),
    ("embeddings: end user", embeddings(), embeddings(user="alice")),
    ("completions: end user", completions(), completions(user="alice")),
    ("messages: end user", messages(), messages(metadata={"user_id": "u-2"})),
    ("messages: serving", messages(), messages(service_tier="standard_only", inference_geo="us")),
    ("messages: caching", messages(), messages(cache_control={"type": "ephemeral"})),
    (
        "messages: attribution headers",
        messages(),
        messages(user_profile_id="up-1", workspace_id="w-1", extra_headers={"X-Trace": "1"}),
    ),
    (
        "messages: beta order",
        messages(extra_headers={"anthropic-beta": "b-2,b-1"}),
        messages(extra_headers={"anthropic-beta": "b-1, b-2,b-1"}),
    ),
    ("count_tokens: same question", count_tokens(), count_tokens()),
]

DIFFERENT: list[tuple[str, Send, Send]] = [
    ("chat: model", chat(), chat(model="gpt-4o-mini")),
    ("chat: prompt", chat(), chat(messages=[{"role": "user", "content": "What is 3+3?"}])),
    ("chat: temperature", chat(), chat(temperature=0.3)),
    ("chat: tools", chat(), chat(tools=TOOLS)),
    ("chat: tool choice", chat(tools=TOOLS), chat(tools=TOOLS, tool_choice="required")),
    ("chat: seed", chat(), chat(seed=1)),
    ("chat: response format", chat(), chat(response_format={"type": "json_object"})),
    ("chat: stream", chat(), chat(stream=True)),
    (
        "chat: usage chunk",
        chat(stream=True),
        chat(stream=True, stream_options={"include_usage": True}),
    ),
    ("chat: reasoning", chat(), chat(reasoning_effort="high")),
    ("chat: an unknown new field", chat(), chat(extra_body={"new_knob": 1})),
    ("azure: deployment", azure_chat(), azure_chat(model="other-deployment")),
    ("azure vs openai", chat(), azure_chat(model="gpt-4o")),
    ("responses: input", responses(), responses(input="What is 3+3?")),
    ("responses: instructions", responses(), responses(instructions="Be thorough.")),
    ("responses: chain", responses(), responses(previous_response_id="resp_1")),
    ("responses: reasoning", responses(), responses(reasoning={"effort": "low"})),
    ("responses: include", responses(), responses(include=["reasoning.encrypted_content"])),
    ("responses: background", responses(), responses(background=True)),
    ("embeddings: input", embeddings(), embeddings(input=["one"])),
    ("embeddings: dimensions", embeddings(), embeddings(dimensions=256)),
    ("embeddings: encoding", embeddings(), embeddings(encoding_format="float")),
    ("completions: suffix", completions(), completions(suffix="!")),
    ("completions: echo", completions(), completions(echo=True)),
    ("messages: model", messages(), messages(model="claude-other-model")),
    ("messages: system", messages(), messages(system="Be thorough.")),
    ("messages: tool result", messages(messages=TOOL_TURN), messages(messages=TOOL_TURN[:1])),
    ("messages: thinking", messages(), messages(thinking={"type": "adaptive"})),
    ("messages: tools", messages(), messages(tools=[])),
    ("messages: stream", messages(), messages(stream=True)),
    ("messages: version", messages(), messages(extra_headers={"anthropic-version": "2023-06-01"})),
    ("messages: beta", messages(), messages(extra_headers={"anthropic-beta": "b-1"})),
    ("messages vs count_tokens", messages(), count_tokens()),
]


@pytest.mark.parametrize(("case", "first", "second"), SAME, ids=[case for case, _, _ in SAME])
def test_sdk_requests_that_ask_the_same_share_a_key(
    capture: Capture, case: str, first: Send, second: Send
) -> None:
    assert capture.key(first) == capture.key(second), case


@pytest.mark.parametrize(
    ("case", "first", "second"), DIFFERENT, ids=[case for case, _, _ in DIFFERENT]
)
def test_sdk_requests_that_ask_differently_get_different_keys(
    capture: Capture, case: str, first: Send, second: Send
) -> None:
    assert capture.key(first) != capture.key(second), case


@pytest.mark.parametrize(
    ("send", "profile"),
    [
        (chat(), "openai.chat-completions"),
        (azure_chat(), "openai.chat-completions"),
        (responses(), "openai.responses"),
        (embeddings(), "openai.embeddings"),
        (completions(), "openai.completions"),
        (messages(), "anthropic.messages"),
        (count_tokens(), "anthropic.messages"),
    ],
)
def test_each_endpoint_gets_its_profile(capture: Capture, send: Send, profile: str) -> None:
    send(capture)
    assert capture.canonical().profile == profile


def test_what_a_profile_drops_is_recorded_against_it(capture: Capture) -> None:
    chat(user="alice", metadata={"run": "7"}, extra_body={"request_id": "r-1"})(capture)
    stripped = {(entry.part, entry.rule) for entry in capture.canonical().stripped}
    assert stripped == {
        ("body:$.metadata", "openai.chat-completions"),
        ("body:$.user", "openai.chat-completions"),
        ("body:$.request_id", "default-volatile"),
    }


def test_azure_keeps_the_api_version_and_the_deployment(capture: Capture) -> None:
    azure_chat()(capture)
    form = json.loads(capture.canonical().form)
    assert form["path"] == "/openai/deployments/my-deployment/chat/completions"
    assert form["query"] == [["api-version", "2024-10-21"]]
    newer = replace(view_of(capture.requests[-1]), query=(("api-version", "2025-01-01"),))
    assert canonicalize(newer).key != capture.canonical().key


def test_anthropic_keys_its_version_and_betas_but_no_sdk_telemetry(capture: Capture) -> None:
    messages(extra_headers={"anthropic-beta": "b-2,b-1"}, workspace_id="w-1")(capture)
    assert json.loads(capture.canonical().form)["headers"] == [
        ["anthropic-beta", "b-1,b-2"],
        [
            "anthropic-version",
            anthropic.Anthropic(api_key="x").default_headers["anthropic-version"],
        ],
    ]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/openai/v1/chat/completions",
        "/api/v1/chat/completions",
        "/v1beta/openai/chat/completions",
        "/openai/deployments/gpt-4o-prod/chat/completions",
    ],
)
def test_openai_compatible_servers_share_the_profile(path: str) -> None:
    view = replace(OPENAI_VIEW, host="llm.internal", path=path)
    canonical = canonicalize(replace(view, body=b'{"model":"m","messages":[],"store":true}'))
    assert canonical.profile == "openai.chat-completions"
    assert [entry.part for entry in canonical.stripped] == ["body:$.store"]


def test_a_path_like_no_provider_is_generic() -> None:
    view = replace(OPENAI_VIEW, path="/v1/chat/completions/extra")
    canonical = canonicalize(replace(view, body=b'{"store":true}'))
    assert (canonical.profile, canonical.stripped) == ("generic.json", ())


# MCP over streamable HTTP.

OPENAI_VIEW = RequestView(
    method="POST",
    scheme="https",
    host="api.openai.com",
    port=443,
    path="/v1/chat/completions",
    query=(),
    headers=(),
    body=b"",
    content_type="application/json",
)
MCP_VIEW = replace(
    OPENAI_VIEW,
    host="127.0.0.1",
    port=8000,
    path="/mcp",
    headers=(("Accept", "application/json, text/event-stream"),),
)


def mcp_key(message: object, session: str = "s-1", version: str = "2025-06-18") -> str:
    headers = (*MCP_VIEW.headers, ("Mcp-Session-Id", session), ("MCP-Protocol-Version", version))
    view = replace(MCP_VIEW, headers=headers, body=json.dumps(message).encode())
    return canonicalize(view).key


def call(id: object, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "get_weather", "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def test_mcp_ids_sessions_and_meta_do_not_identify_a_request() -> None:
    first = mcp_key(call(1, {"city": "Paris"}, progressToken=1), session="s-1")
    second = mcp_key(
        call("b2c7", {"city": "Paris"}, traceparent="00-4bf92f-00f067-01"), session="s-2"
    )
    third = mcp_key(call(99, {"city": "Paris"}))
    assert first == second == third


def test_mcp_method_params_and_protocol_version_do() -> None:
    paris = mcp_key(call(1, {"city": "Paris"}))
    assert paris != mcp_key(call(1, {"city": "Rome"}))
    assert paris != mcp_key({**call(1, {"city": "Paris"}), "method": "resources/read"})
    assert paris != mcp_key(call(1, {"city": "Paris"}), version="2025-03-26")


def test_params_left_empty_by_stripping_meta_equal_no_params() -> None:
    bare = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    traced = {**bare, "id": 2, "params": {"_meta": {"traceparent": "00-ab-cd-01"}}}
    assert mcp_key(bare) == mcp_key(traced) == mcp_key({**bare, "params": {}})
    assert mcp_key(bare) != mcp_key({**bare, "params": {"cursor": "c-1"}})


def test_mcp_stripped_parts_are_recorded_against_the_mcp_profile() -> None:
    body = json.dumps(call(7, {"city": "Paris"}, progressToken=1)).encode()
    canonical = canonicalize(replace(MCP_VIEW, body=body))
    assert canonical.profile == "mcp"
    assert [(entry.part, entry.rule) for entry in canonical.stripped] == [
        ("body:$.id", "mcp"),
        ("body:$.params._meta", "mcp"),
    ]


def test_mcp_batches_and_notifications() -> None:
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    batch = [call(1, {"city": "Paris"}, progressToken=1), initialized]
    canonical = canonicalize(replace(MCP_VIEW, body=json.dumps(batch).encode()))
    assert canonical.profile == "mcp"
    assert [entry.part for entry in canonical.stripped] == [
        "body:$[0].id",
        "body:$[0].params._meta",
    ]
    assert mcp_key(batch) == mcp_key([call(5, {"city": "Paris"}), initialized])
    assert mcp_key(initialized) != mcp_key([initialized])


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"id": 1, "method": "tools/list"},
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"other": True}],
    ],
)
def test_only_json_rpc_requests_are_mcp(body: object) -> None:
    canonical = canonicalize(replace(MCP_VIEW, body=json.dumps(body).encode()))
    assert canonical.profile == "generic.json"
    assert canonical.stripped == ()


def test_a_json_rpc_body_is_mcp_even_on_a_provider_path() -> None:
    body = json.dumps(call(1, {})).encode()
    assert canonicalize(replace(OPENAI_VIEW, body=body)).profile == "mcp"


# Properties, per profile.

type Body = None | bool | int | str | Decimal | list[Body] | dict[str, Body]

values: st.SearchStrategy[Body] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)
meta_free_params = st.dictionaries(
    st.text(max_size=6).filter(lambda name: name != "_meta"), values, max_size=3
)


def respell(data: st.DataObject, value: Body) -> str:
    """Write JSON with drawn member order, whitespace and integer spellings."""
    pad = data.draw(st.sampled_from(["", " ", "\n  "]))
    match value:
        case bool() | None | str():
            return pad + json.dumps(value, ensure_ascii=data.draw(st.booleans()))
        case int() | Decimal():
            spelled = data.draw(st.sampled_from([str(value), f"{value}.0", f"{value}e0"]))
            return pad + spelled
        case list():
            return f"{pad}[{','.join(respell(data, item) for item in value)}{pad}]"
        case dict():
            members = data.draw(st.permutations(list(value.items())))
            written = ",".join(f"{json.dumps(k)}:{respell(data, v)}" for k, v in members)
            return f"{pad}{{{written}{pad}}}"


PROFILES: dict[str, tuple[RequestView, frozenset[str], frozenset[str]]] = {
    "openai.chat-completions": (
        OPENAI_VIEW,
        openai_profile.CHAT_COMPLETIONS_KEEP,
        openai_profile.CHAT_COMPLETIONS_DROP,
    ),
    "openai.responses": (
        replace(OPENAI_VIEW, path="/v1/responses"),
        openai_profile.RESPONSES_KEEP,
        openai_profile.RESPONSES_DROP,
    ),
    "openai.embeddings": (
        replace(OPENAI_VIEW, path="/openai/deployments/e/embeddings"),
        openai_profile.EMBEDDINGS_KEEP,
        openai_profile.EMBEDDINGS_DROP,
    ),
    "openai.completions": (
        replace(OPENAI_VIEW, path="/api/v1/completions"),
        openai_profile.COMPLETIONS_KEEP,
        openai_profile.COMPLETIONS_DROP,
    ),
    "anthropic.messages": (
        replace(OPENAI_VIEW, host="api.anthropic.com", path="/v1/messages"),
        anthropic_profile.MESSAGES_KEEP,
        anthropic_profile.MESSAGES_DROP,
    ),
    "generic.json": (
        replace(OPENAI_VIEW, path="/v1/something/else"),
        frozenset({"prompt", "user_name", "tenant", "messages", "store", "service_tier"}),
        frozenset(),
    ),
}


PER_PROFILE_EXAMPLES = 40
"""Fewer than Hypothesis's 100 per test, as each property runs once for every profile."""


def keyed(view: RequestView, body: str) -> str:
    canonical = canonicalize(replace(view, body=body.encode()))
    return canonical.key


def members(names: frozenset[str]) -> st.SearchStrategy[dict[str, Body]]:
    return st.dictionaries(st.sampled_from(sorted(names)), values, max_size=4)


@pytest.mark.parametrize("profile", sorted(PROFILES))
@settings(max_examples=PER_PROFILE_EXAMPLES)
@given(data=st.data())
def test_keys_ignore_spelling_and_every_dropped_field(profile: str, data: st.DataObject) -> None:
    view, keep, drop = PROFILES[profile]
    kept = data.draw(members(keep))
    droppable = drop | DEFAULT_VOLATILE_FIELDS
    first, second = data.draw(members(droppable)), data.draw(members(droppable))
    assert keyed(view, respell(data, kept | first)) == keyed(view, respell(data, kept | second))
    canonical = canonicalize(replace(view, body=respell(data, kept | first).encode()))
    assert canonical.profile == profile
    assert [entry.part for entry in canonical.stripped] == [
        f"body:$.{name}" for name in sorted(first)
    ]


@pytest.mark.parametrize("profile", sorted(PROFILES))
@settings(max_examples=PER_PROFILE_EXAMPLES)
@given(data=st.data())
def test_keys_change_when_a_kept_field_changes(profile: str, data: st.DataObject) -> None:
    view, keep, _ = PROFILES[profile]
    kept = data.draw(members(keep))
    name = data.draw(st.sampled_from(sorted(keep)))
    first, second = data.draw(st.tuples(values, values).filter(lambda pair: pair[0] != pair[1]))
    assert keyed(view, encode(kept | {name: first})) != keyed(view, encode(kept | {name: second}))


@pytest.mark.parametrize("profile", sorted(PROFILES))
@settings(max_examples=PER_PROFILE_EXAMPLES)
@given(data=st.data())
def test_canonicalizing_a_canonical_body_changes_nothing(profile: str, data: st.DataObject) -> None:
    view, keep, drop = PROFILES[profile]
    body = data.draw(members(keep)) | data.draw(members(drop | DEFAULT_VOLATILE_FIELDS))
    first = canonicalize(replace(view, body=respell(data, body).encode()))
    again = canonicalize(replace(view, body=canonical_body(first.form)))
    assert (again.key, again.form, again.stripped) == (first.key, first.form, ())


def encode(value: Body) -> str:
    return json.dumps(value, default=str)


def canonical_body(form: bytes) -> bytes:
    document = decode_json(form)
    assert isinstance(document, dict)
    return encode_json(document["body"]).encode()


ids = st.one_of(st.integers(), st.text(max_size=8))
metas = st.dictionaries(
    st.sampled_from(["traceparent", "tracestate", "progressToken"]), ids, min_size=1
)


@st.composite
def mcp_requests(draw: st.DrawFn) -> tuple[dict[str, Body], dict[str, Body]]:
    """The same question twice, with drawn ids, tracing metadata and (empty) params."""
    method = draw(st.sampled_from(["tools/call", "tools/list", "resources/read", "ping"]))
    params = draw(st.none() | meta_free_params)
    pair = []
    for _ in range(2):
        message: dict[str, Body] = {"jsonrpc": "2.0", "method": method}
        if draw(st.booleans()):
            message["id"] = draw(ids)
        meta = draw(st.none() | metas)
        if params is not None or meta is not None:
            message["params"] = (params or {}) | ({"_meta": meta} if meta else {})
        pair.append(message)
    return pair[0], pair[1]


@given(st.data(), mcp_requests())
def test_mcp_keys_ignore_ids_and_meta(
    data: st.DataObject, pair: tuple[dict[str, Body], dict[str, Body]]
) -> None:
    first, second = pair
    assert keyed(MCP_VIEW, respell(data, first)) == keyed(MCP_VIEW, respell(data, second))


@given(meta_free_params, meta_free_params, ids, ids)
def test_mcp_keys_change_with_params(
    first: dict[str, Body], second: dict[str, Body], first_id: Body, second_id: Body
) -> None:
    if first == second:
        return
    request = {"jsonrpc": "2.0", "method": "tools/call"}
    assert keyed(MCP_VIEW, encode(request | {"id": first_id, "params": first})) != keyed(
        MCP_VIEW, encode(request | {"id": second_id, "params": second})
    )


@given(st.data(), mcp_requests())
def test_mcp_canonical_bodies_are_fixed_points(
    data: st.DataObject, pair: tuple[dict[str, Body], dict[str, Body]]
) -> None:
    first = canonicalize(replace(MCP_VIEW, body=respell(data, pair[0]).encode()))
    again = canonicalize(replace(MCP_VIEW, body=canonical_body(first.form)))
    assert (again.key, again.form, again.stripped) == (first.key, first.form, ())


def test_a_single_mcp_message_keeps_an_id_inside_its_params() -> None:
    """`$[*].id` is for batches only; on one message it would drop `params.id`."""

    def key(task: str, request_id: int) -> str:
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tasks/get", "params": {"id": task}}
        view = RequestView(
            method="POST",
            scheme="https",
            host="mcp.example",
            port=443,
            path="/mcp",
            query=(),
            headers=(),
            body=json.dumps(body).encode(),
            content_type="application/json",
        )
        return canonicalize(view).key

    assert key("task-1", 1) == key("task-1", 2)
    assert key("task-1", 1) != key("task-2", 1)
