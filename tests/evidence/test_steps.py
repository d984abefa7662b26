"""Agent steps: model calls, the tool calls they asked for, the traffic that ran them and the
requests that carried their results back, linked from the recorded traffic alone."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from support.exchanges import stored_exchange
from support.recorded import RecordingSdk
from support.streams import CALL, RESPONSE, chat_stream
from support.upstream import Upstream

from freezeframe.evidence.loops import Loop
from freezeframe.evidence.steps import Executes, Link, Match, Steps, agent_steps, steps_document
from freezeframe.storage import Exchange

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {}}}}
USER = [{"role": "user", "content": "Paris"}]


def steps_of(exchanges: list[Exchange]) -> Steps:
    """The steps, after checking that their document is plain JSON."""
    steps = agent_steps(exchanges)
    document = steps_document(steps)
    assert json.loads(json.dumps(document)) == document
    return steps


def chat_answer(*calls: tuple[str, str, dict[str, Any]], n: int = 1) -> bytes:
    """A chat answer, by the SDK's type, asking for these (id, name, arguments) calls."""
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, name, args in calls
    ]
    message = {"role": "assistant", "content": None if calls else "done", "tool_calls": tool_calls}
    return (
        ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": message if calls else {**message, "tool_calls": None},
                        "finish_reason": "tool_calls" if calls else "stop",
                    }
                ],
            }
        )
        .model_dump_json()
        .encode()
    )


def results_turn(answer: Any, results: dict[str, str]) -> list[dict[str, Any]]:
    """The messages an agent sends next: the answer's message, then each call's result."""
    return [
        answer.choices[0].message.model_dump(exclude_none=True),
        *({"role": "tool", "tool_call_id": i, "content": text} for i, text in results.items()),
    ]


def test_a_streamed_tool_call_links_to_its_http_call_and_to_the_result_carried_back(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    with sdk.openai.chat.completions.stream(model="gpt-4o", messages=USER, tools=[WEATHER]) as s:  # type: ignore[arg-type, list-item]
        first = s.get_final_completion()
    (call,) = first.choices[0].message.tool_calls or []
    city = json.loads(call.function.arguments)["city"]  # type: ignore[union-attr]
    weather = sdk.send("GET", f"/tool/counter?city={city}&units=metric").text
    messages = [*USER, *results_turn(first, {call.id: weather})]
    sdk.openai.chat.completions.create(model="gpt-4o", messages=messages, tools=[WEATHER])  # type: ignore[arg-type, list-item]

    model, tool, after = steps_of(sdk.exchanges).steps
    assert [s.kind for s in (model, tool, after)] == ["model", "http", "model"]
    (requested,) = model.calls
    assert requested.call.id == "call_1_0" and requested.call.value == {"city": "Paris"}
    why = "city 'Paris' as query city (1 of 1 argument values), 500 ms after the answer ended"
    assert requested.executed_by == Link(1, Match.INFERRED, why)
    assert requested.result_in == Link(2, Match.EXACT, "tool_call_id call_1_0")
    assert tool.executes == Executes(0, 0, Match.INFERRED, why)
    assert (tool.linked, after.calls, model.title) == (True, (), "gpt-4o asks for get_weather")


def test_an_mcp_tools_call_with_the_same_name_and_arguments_is_an_exact_link(
    upstream: Upstream,
) -> None:
    sdk = RecordingSdk(upstream)
    sse = {"Accept": "text/event-stream, application/json"}
    sdk.send("POST", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    with sdk.anthropic.messages.stream(
        model="claude-sonnet-4-20250514",
        max_tokens=100,
        messages=USER,  # type: ignore[arg-type]
        tools=[LOOKUP],  # type: ignore[list-item]
    ) as stream:
        answer = stream.get_final_message()
    (use,) = answer.content
    assert use.type == "tool_use"
    params = {"name": use.name, "arguments": use.input}
    ran = sdk.send(
        "POST",
        "/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params},
        headers=sse,
    )
    result = {"type": "tool_result", "tool_use_id": use.id, "content": ran.text}
    sdk.anthropic.messages.create(
        model="claude-sonnet-4-20250514",
        max_tokens=100,
        tools=[LOOKUP],  # type: ignore[list-item]
        messages=[
            *USER,  # type: ignore[list-item]
            {"role": "assistant", "content": [use.model_dump()]},  # type: ignore[list-item]
            {"role": "user", "content": [result]},  # type: ignore[list-item]
        ],
    )

    init, model, mcp, after = steps_of(sdk.exchanges).steps
    assert (init.kind, init.linked, init.title) == ("mcp", False, "MCP initialize")
    (requested,) = model.calls
    assert requested.executed_by == Link(
        2, Match.EXACT, "tools/call lookup with the same arguments"
    )
    assert requested.result_in == Link(3, Match.EXACT, f"tool_use_id {use.id}")
    assert mcp.mcp is not None and mcp.mcp.call is not None and mcp.mcp.result is not None
    assert (mcp.mcp.call.name, mcp.mcp.call.value) == ("lookup", {"q": "Paris"})
    assert mcp.mcp.result.text == "call 2: tools/call"  # read from the SSE answer
    assert mcp.executes == Executes(1, 0, Match.EXACT, requested.executed_by.why)
    assert after.kind == "model"


def responses_answer(*items: dict[str, Any]) -> bytes:
    return Response.model_validate({**RESPONSE, "output": list(items)}).model_dump_json().encode()


def test_an_mcp_call_under_a_namespaced_name_or_with_more_arguments_is_inferred() -> None:
    sdk = RecordingSdk()
    ask = [
        {**CALL, "call_id": "c1", "name": "mcp__docs__lookup", "arguments": '{"q": "cats"}'},
        {**CALL, "call_id": "c2", "id": "fc_2", "name": "search", "arguments": '{"q": "dogs"}'},
    ]
    sdk.prepare(responses_answer(*ask))
    sdk.openai.responses.create(model="gpt-4.1", input="find cats and dogs")
    mcp = [
        ("lookup", {"q": "cats"}),  # the model's name for it has a server prefix
        ("search", {"q": "dogs", "limit": 10}),  # the agent added an argument
    ]
    for n, (name, arguments) in enumerate(mcp):
        call = {"name": name, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}
        sdk.exchanges.append(
            stored_exchange(
                seq=n + 1, url="http://127.0.0.1:9000/mcp", request_body=json.dumps(body).encode()
            )
        )

    model, lookup, search = steps_of(sdk.exchanges).steps
    assert [c.executed_by for c in model.calls] == [
        Link(
            1,
            Match.INFERRED,
            "tools/call lookup (the model's mcp__docs__lookup) with the same arguments",
        ),
        Link(2, Match.INFERRED, "tools/call search with the call's arguments among others"),
    ]
    assert [c.result_in for c in model.calls] == [None, None]
    assert (lookup.executes, search.executes) == (
        Executes(0, 0, Match.INFERRED, model.calls[0].executed_by.why),  # type: ignore[union-attr]
        Executes(0, 1, Match.INFERRED, model.calls[1].executed_by.why),  # type: ignore[union-attr]
    )


def test_responses_call_ids_link_a_function_call_to_its_output_and_its_json_request() -> None:
    sdk = RecordingSdk()
    sdk.prepare(responses_answer({**CALL, "arguments": '{"city": "Paris", "days": 3}'}))
    sdk.openai.responses.create(model="gpt-4.1", input="Paris")
    sdk.exchanges.append(
        stored_exchange(
            seq=1,
            url="https://weather.example/v2/forecast",
            request_body=b'{"days": 3, "city": "Paris"}',
        )
    )
    sdk.prepare(responses_answer())
    sdk.openai.responses.create(
        model="gpt-4.1",
        input=[
            {"role": "user", "content": "Paris"},
            {"type": "function_call_output", "call_id": "call_abc", "output": "sunny"},
        ],
    )
    shuffled = [sdk.exchanges[2], sdk.exchanges[0], sdk.exchanges[1]]
    model, tool, after = steps_of(shuffled).steps
    (requested,) = model.calls
    assert requested.result_in == Link(2, Match.EXACT, "call_id call_abc")
    assert requested.executed_by is not None
    assert requested.executed_by.match is Match.INFERRED
    assert requested.executed_by.why.startswith("the request body is the call's arguments, ")


def test_an_id_a_server_mints_again_each_answer_links_to_the_next_request_carrying_it() -> None:
    sdk = RecordingSdk()
    messages: list[dict[str, Any]] = list(USER)
    for city in ("Paris", "Rome", "Oslo"):
        sdk.prepare(chat_answer(("call_0", "get_weather", {"city": city})))
        answer = sdk.openai.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        messages += results_turn(answer, {"call_0": f"sunny in {city}"})
    steps = steps_of(sdk.exchanges).steps
    assert [s.calls[0].result_in.seq if s.calls[0].result_in else None for s in steps] == [
        1,
        2,
        None,
    ]


def test_sdk_exchanges_in_any_order_come_out_in_recorded_order() -> None:
    exchanges = [stored_exchange(seq=n, url=f"https://x.test/{n}") for n in (3, 1, 2)]
    assert [s.seq for s in steps_of(exchanges).steps] == [1, 2, 3]


def test_parallel_calls_each_link_to_the_request_that_carried_their_own_arguments() -> None:
    sdk = RecordingSdk()
    calls = [("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {"city": "Rome"})]
    sdk.prepare(chat_answer(*calls))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    for seq, city in ((1, "Rome"), (2, "Paris")):
        sdk.exchanges.append(stored_exchange(seq=seq, method="GET", url=f"https://w.test/{city}"))

    model, rome, paris = steps_of(sdk.exchanges).steps
    assert [c.executed_by.seq for c in model.calls if c.executed_by] == [2, 1]
    assert rome.executes is not None and rome.executes.call == 1
    assert "city 'Rome' as a path segment" in rome.executes.why
    assert paris.executes is not None and paris.executes.call == 0


def test_values_found_whole_outrank_more_values_found_inside_a_tracing_upload() -> None:
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(("c1", "get_weather", {"city": "Paris", "units": "metric"})))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    run = {"outputs": {"text": 'get_weather({"city": "Paris", "units": "metric"})'}}
    tracing = stored_exchange(
        seq=1, url="https://api.smith.langchain.com/runs", request_body=json.dumps(run).encode()
    )
    tool = stored_exchange(seq=2, method="GET", url="https://w.test/weather?q=Paris")
    model, traced, ran = steps_of([*sdk.exchanges, tracing, tool]).steps
    assert model.calls[0].executed_by is not None
    assert model.calls[0].executed_by.seq == 2
    assert (traced.linked, ran.linked) == (False, True)


def test_unlinked_traffic_stays_in_place_and_a_request_before_the_answer_is_not_its_tool() -> None:
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(("c1", "get_weather", {"city": "Paris"})))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    model = sdk.exchanges[0]
    early = stored_exchange(
        seq=1,
        method="GET",
        url="https://w.test/weather?city=Paris",
        started_at=model.recorded.started_at + 0.05,  # the answer's first byte came at 0.1 s
    )
    telemetry = stored_exchange(seq=2, url="https://telemetry.test/v1/events", request_body=b"{}")
    steps = steps_of([model, early, telemetry]).steps

    assert [(s.seq, s.kind, s.linked) for s in steps] == [
        (0, "model", True),
        (1, "http", False),
        (2, "http", False),
    ]
    assert steps[0].calls[0].executed_by is None and steps[0].calls[0].result_in is None
    assert steps[2].title == "POST https://telemetry.test/v1/events"


def test_a_tool_that_used_no_network_still_links_to_its_result() -> None:
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(("c1", "add", {"a": 2, "b": 2})))
    first = sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    sdk.prepare(chat_answer(n=2))
    sdk.openai.chat.completions.create(
        model="gpt-4o", messages=[*USER, *results_turn(first, {"c1": "4"})]
    )  # type: ignore[arg-type]
    model, after = steps_of(sdk.exchanges).steps
    assert model.calls[0].executed_by is None
    assert model.calls[0].result_in == Link(1, Match.EXACT, "tool_call_id c1")
    assert after.title == "gpt-4o answers: done"


def looping_agent(arguments: list[dict[str, Any]], *, tool: str = "get_weather") -> Steps:
    """An agent whose model asks for ``tool`` with each of ``arguments`` in turn, each call
    run over HTTP and its result carried back in the next request."""
    sdk = RecordingSdk()
    messages: list[dict[str, Any]] = list(USER)
    for n, args in enumerate(arguments):
        sdk.prepare(chat_answer((f"c{n}", tool, args), n=n))
        answer = sdk.openai.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        query = "&".join(f"{k}={v}" for k, v in args.items())
        sdk.exchanges.append(
            stored_exchange(seq=len(sdk.exchanges), method="GET", url=f"https://w.test/t?{query}")
        )
        messages += results_turn(answer, {f"c{n}": "no data"})
    sdk.prepare(chat_answer(n=len(arguments)))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    return steps_of(sdk.exchanges)


def test_the_same_tool_called_again_and_again_is_a_loop() -> None:
    steps = looping_agent([{"city": "Paris"}] * 5)
    arguments = '{"city": "Paris"}'
    assert steps.loops == (Loop("get_weather", 5, (0, 2, 4, 6, 8), arguments, identical=True),)
    model_steps = [s for s in steps.steps if s.kind == "model"]
    assert [(c.executed_by.seq, c.result_in.seq) for s in model_steps for c in s.calls] == [  # type: ignore[union-attr]
        (1, 2),
        (3, 4),
        (5, 6),
        (7, 8),
        (9, 10),
    ]
    assert steps_document(steps)["loops"] == [
        {
            "tool": "get_weather",
            "count": 5,
            "seqs": [0, 2, 4, 6, 8],
            "arguments": arguments,
            "identical": True,
        }
    ]


def test_nearly_the_same_arguments_are_a_loop_too_but_not_identical() -> None:
    spellings = ["Paris", "paris", " Paris.", "PARIS  "]
    steps = looping_agent([{"city": city, "units": None} for city in spellings])
    (loop,) = steps.loops
    assert (loop.count, loop.identical) == (4, False)


@pytest.mark.parametrize(
    "arguments",
    [
        [{"path": f"{name}.py"} for name in "abcde"],  # reading every file is work
        [{"city": "Paris"}] * 2,  # twice is not yet a loop
        [{"city": "Paris"}, {"city": "Paris"}, {"city": "Rome"}, {"city": "Paris"}],
    ],
    ids=["different", "twice", "interrupted"],
)
def test_calls_that_differ_or_are_too_few_are_no_loop(arguments: list[dict[str, Any]]) -> None:
    assert looping_agent(arguments).loops == ()


def test_mcp_calls_no_model_asked_for_count_towards_a_loop() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ping"}}
    exchanges = [
        stored_exchange(
            seq=n, url="http://127.0.0.1:9000/mcp", request_body=json.dumps(body).encode()
        )
        for n in range(3)
    ]
    assert steps_of(exchanges).loops == (Loop("ping", 3, (0, 1, 2), "{}", identical=True),)


def test_a_model_call_without_an_answer_asks_for_nothing() -> None:
    failed = stored_exchange(
        seq=0,
        url="https://api.openai.com/v1/chat/completions",
        request_body=b'{"model": "gpt-4o", "messages": []}',
        status=None,
    )
    (step,) = steps_of([failed]).steps
    assert (step.kind, step.status, step.outcome, step.calls) == ("model", None, "failed", ())
    assert step.title == "gpt-4o: no answer"


def test_the_document_summarises_each_model_step_and_names_every_link() -> None:
    steps = looping_agent([{"city": "Paris"}])
    document = steps_document(steps)
    first = document["steps"][0]
    assert first["model"]["api"] == "openai.chat-completions"
    assert first["model"]["messages"] == 1
    assert first["calls"][0]["call"]["value"] == {"city": "Paris"}
    assert first["calls"][0]["result_in"] == {
        "seq": 2,
        "match": "exact",
        "why": "tool_call_id c0",
    }
    assert document["steps"][1]["executes"]["match"] == "inferred"
    assert document["steps"][1]["model"] is None and document["steps"][1]["linked"] is True


def agent_run(turns: int) -> list[Exchange]:
    """A run of ``turns`` streamed model calls, each asking for a tool whose HTTP call
    follows, each request carrying the system prompt and the last few turns (an agent that
    trims its memory): the bytes grow in proportion to the turns, so the time must too. A
    whole growing conversation would make the bytes, and so the parsing, grow with the
    square of the turns, which would hide the comparison of every exchange with every other
    this checks for."""
    exchanges: list[Exchange] = []
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a travel agent. " * 40},
        {"role": "user", "content": "Plan a trip."},
    ]
    tools = [
        WEATHER,
        *({**WEATHER, "function": {**WEATHER["function"], "name": f"t{n}"}} for n in range(10)),
    ]  # type: ignore[dict-item]
    for turn in range(turns):
        city = f"city-{turn}"
        request = {"model": "gpt-4o", "stream": True, "messages": messages, "tools": tools}
        answer = chat_stream(list(json.dumps({"city": city})))
        exchanges.append(
            stored_exchange(
                seq=len(exchanges),
                url="https://api.openai.com/v1/chat/completions",
                request_body=json.dumps(request).encode(),
                response_headers=((b"content-type", b"text/event-stream"),),
                response_body=answer.replace(b"call_1", f"call_{turn}".encode()),
            )
        )
        exchanges.append(
            stored_exchange(seq=len(exchanges), method="GET", url=f"https://w.test/?city={city}")
        )
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        messages = [
            *messages[:2],
            *messages[2:][-6:],
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": "sunny, 21 C. " * 20},
        ]
    return exchanges


def best_of_five(exchanges: list[Exchange]) -> float:
    timings = []
    for _ in range(5):  # CPU time, the fastest of five: other processes' load falls out
        started = time.process_time()
        agent_steps(exchanges)
        timings.append(time.process_time() - started)
    return min(timings)


def test_steps_of_a_run_take_time_in_proportion_to_its_length() -> None:
    """Linking each tool result to the call that asked for it must not compare every
    exchange with every other: a run four times as long takes about four times as long,
    not sixteen (a ratio in one run, so the machine's load cancels out)."""
    exchanges = agent_run(100)
    assert len(exchanges) == 200
    steps = agent_steps(exchanges)
    calls = [c for s in steps.steps for c in s.calls]
    assert len(calls) == 100 and all(c.executed_by for c in calls)
    assert all(c.result_in for c in calls[:-1])  # no request carries the last one's result
    short = best_of_five(agent_run(25))
    long = best_of_five(exchanges)
    assert long / short < 8, f"4x the run took {long / short:.1f}x the time"


def test_an_exchange_runs_one_call_and_a_call_is_run_by_one_exchange() -> None:
    sdk = RecordingSdk()
    calls = [("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {"city": "Paris"})]
    sdk.prepare(chat_answer(*calls))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    one = stored_exchange(seq=1, method="GET", url="https://w.test/?city=Paris")
    model, tool = steps_of([*sdk.exchanges, one]).steps
    assert [c.executed_by.seq if c.executed_by else None for c in model.calls] == [1, None]
    assert tool.executes is not None and tool.executes.call == 0


GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"


def gemini_call(seq: int, contents: list[dict[str, Any]], parts: list[dict[str, Any]]) -> Exchange:
    """A Gemini generateContent exchange at ``seq``: ``contents`` asked, ``parts`` answered."""
    answer = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
    request = {"contents": contents, "tools": [{"functionDeclarations": [{"name": "get_weather"}]}]}
    return stored_exchange(
        seq=seq,
        url=GEMINI,
        request_body=json.dumps(request).encode(),
        response_body=json.dumps(answer).encode(),
    )


def function_call(name: str, **args: str) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}  # no id, as the Gemini API sends


def function_response(name: str, said: str) -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"output": said}}}


def test_gemini_calls_without_ids_link_to_their_responses_by_name_in_order() -> None:
    """Two get_weather calls and a get_time, none with an id: each links to the request that
    carried the responses, the two of the same name told apart by their order."""
    asked = [{"role": "user", "parts": [{"text": "Paris and Rome"}]}]
    calls = [
        function_call("get_weather", city="Paris"),
        function_call("get_time", zone="Europe/Paris"),
        function_call("get_weather", city="Rome"),
    ]
    results = [
        function_response("get_weather", "sunny in Paris"),
        function_response("get_time", "noon"),
        function_response("get_weather", "rain in Rome"),
    ]
    turn = [*asked, {"role": "model", "parts": calls}, {"role": "user", "parts": results}]
    exchanges = [
        gemini_call(0, asked, calls),
        stored_exchange(seq=1, method="GET", url="https://w.test/weather?city=Paris"),
        stored_exchange(seq=2, method="GET", url="https://w.test/weather?city=Rome"),
        gemini_call(3, turn, [{"text": "Sunny in Paris, rain in Rome."}]),
    ]
    model, paris, rome, after = steps_of(exchanges).steps
    assert [c.result_in for c in model.calls] == [
        Link(
            3, Match.EXACT, "functionResponse get_weather (1 of 2 by that name, in order; no ids)"
        ),
        Link(3, Match.EXACT, "functionResponse get_time (by name; the call has no id)"),
        Link(
            3, Match.EXACT, "functionResponse get_weather (2 of 2 by that name, in order; no ids)"
        ),
    ]
    assert [c.executed_by.seq if c.executed_by else None for c in model.calls] == [1, None, 2]
    assert paris.executes is not None and rome.executes is not None
    assert (paris.executes.call, rome.executes.call) == (0, 2)
    assert steps_document(steps_of(exchanges))["steps"][0]["calls"][2]["result_in"]["seq"] == 3


def test_a_gemini_call_left_unanswered_or_asked_again_links_only_where_it_was_answered() -> None:
    """The same call asked in two turns links each to the request that answered that turn;
    a call whose name no response carried links to none."""
    asked = [{"role": "user", "parts": [{"text": "Oslo"}]}]
    calls = [function_call("get_weather", city="Oslo"), function_call("get_weather", city="Oslo")]
    once = [function_response("get_weather", "snow")]  # one answer for two calls of the name
    first_turn = [*asked, {"role": "model", "parts": calls}, {"role": "user", "parts": once}]
    second_turn = [*first_turn, {"role": "model", "parts": calls}, {"role": "user", "parts": once}]
    exchanges = [
        gemini_call(0, asked, calls),
        gemini_call(1, first_turn, calls),
        gemini_call(2, second_turn, [{"text": "Snow."}]),
    ]
    first, second, _ = steps_of(exchanges).steps
    assert [c.result_in.seq if c.result_in else None for c in first.calls] == [1, None]
    assert [c.result_in.seq if c.result_in else None for c in second.calls] == [2, None]


def test_a_get_resuming_an_mcp_stream_is_an_mcp_step_naming_its_session_and_event() -> None:
    headers = (
        (b"accept", b"text/event-stream"),
        (b"mcp-session-id", b"0073ea66"),
        (b"mcp-protocol-version", b"2025-11-25"),
    )
    resumed = stored_exchange(
        seq=0,
        method="GET",
        url="https://mcp.test/mcp",
        request_headers=(*headers, (b"last-event-id", b"17")),
    )
    standalone = stored_exchange(
        seq=1, method="GET", url="https://mcp.test/mcp", request_headers=headers
    )
    plain = stored_exchange(
        seq=2, method="GET", url="https://feed.test/events", request_headers=headers[:1]
    )
    steps = steps_of([resumed, standalone, plain])
    assert [(s.kind, s.title) for s in steps.steps] == [
        ("mcp", "MCP stream resumed after event 17"),
        ("mcp", "MCP stream"),
        ("http", "GET https://feed.test/events"),
    ]
    (document, *_) = steps_document(steps)["steps"]
    assert (document["mcp"]["session"], document["mcp"]["resumed_after"]) == ("0073ea66", "17")


def test_a_chat_function_call_without_an_id_links_to_the_function_message_by_name() -> None:
    """Chat's deprecated ``function_call`` has no id either: its ``function`` message, by
    name, carries the result back."""
    asked = [{"role": "user", "content": "Paris"}]
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "function_call": call}}]}
    answered = [
        *asked,
        {"role": "assistant", "content": None, "function_call": call},
        {"role": "function", "name": "get_weather", "content": "sunny"},
    ]
    exchanges = [
        stored_exchange(
            seq=n,
            url="https://api.openai.com/v1/chat/completions",
            request_body=json.dumps({"model": "gpt-4o", "messages": messages}).encode(),
            response_body=json.dumps(answer if n == 0 else {"choices": []}).encode(),
        )
        for n, messages in enumerate((asked, answered))
    ]
    model, _ = steps_of(exchanges).steps
    assert model.calls[0].result_in == Link(
        1, Match.EXACT, "function message get_weather (by name; the call has no id)"
    )


def test_a_trace_upload_never_runs_a_tool_whatever_values_it_carries() -> None:
    """Issue 32: with LangSmith tracing on, a local Python tool was said to be run by the
    trace upload (``POST /runs/multipart``), the one request carrying the call's values."""
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(("c1", "get_weather", {"city": "Paris", "units": "metric"})))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    run = {"inputs": {"city": "Paris", "units": "metric"}, "name": "get_weather"}
    upload = stored_exchange(
        seq=1,
        url="https://api.smith.langchain.com/runs/multipart",
        request_body=json.dumps(run).encode(),
    )
    model, traced = steps_of([*sdk.exchanges, upload]).steps
    assert model.calls[0].executed_by is None
    assert traced.linked is False and traced.executes is None


def smolagents_step(thought: str | None, calls: list[tuple[str, str, Any]], said: str) -> list[Any]:
    """What smolagents sends after a step, as its memory writes it (``ActionStep.to_messages``
    through ``get_clean_message_list``): the model's words and ``Calling tools:`` with the
    calls as Python prints them, merged into one assistant text; then the user's
    ``Observation:``, or ``Call id: …`` and ``Error:`` when the tool failed."""
    written = [
        {"id": i, "type": "function", "function": {"name": name, "arguments": arguments}}
        for i, name, arguments in calls
    ]
    text = "Calling tools:\n" + str(written)
    if thought is not None:
        text = f"{thought}\n{text}"
    return [
        {"role": "assistant", "content": [{"type": "text", "text": text}]},
        {"role": "user", "content": [{"type": "text", "text": said}]},
    ]


def test_smolagents_calls_written_as_text_link_to_the_observation_after_them() -> None:
    """smolagents echoes the model's calls as text, "Calling tools: [...]", and their results
    as "Observation: ..."; each result was "carried in not found" (issue 32)."""
    task = [
        {"role": "system", "content": [{"type": "text", "text": "You are an expert assistant."}]},
        {"role": "user", "content": [{"type": "text", "text": "New task:\nParis and Oslo?"}]},
    ]
    paris = ("call_a", "get_weather", {"city": "Paris"})
    oslo = ("call_b", "get_weather", {"city": "Oslo"})
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(paris, oslo))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=task, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    turn = smolagents_step(None, [paris, oslo], "Observation:\nclear\nsnow")
    sdk.prepare(chat_answer(("call_c", "get_weather", {"city": "Bern"}), n=2))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=[*task, *turn], tools=[WEATHER])  # type: ignore[arg-type, list-item]
    failed = smolagents_step(
        "Thought: Bern next.",
        [("call_c", "get_weather", {"city": "Bern"})],
        "Call id: call_c\nError:\nNo weather for Bern.\nNow let's retry",
    )
    sdk.prepare(chat_answer(("call_d", "final_answer", {"answer": "clear, snow"}), n=3))
    sdk.openai.chat.completions.create(
        model="gpt-4o",
        messages=[*task, *turn, *failed],  # type: ignore[list-item]
        tools=[WEATHER],  # type: ignore[list-item]
    )

    first, second, third = steps_of(sdk.exchanges).steps
    assert [c.result_in for c in first.calls] == [
        Link(1, Match.EXACT, "Calling tools: call_a, then Observation:"),
        Link(1, Match.EXACT, "Calling tools: call_b, then Observation:"),
    ]
    assert second.calls[0].result_in == Link(2, Match.EXACT, "Calling tools: call_c, then Call id:")
    assert third.calls[0].result_in is None, "final_answer ends the run: nothing carries it"


def test_calls_written_as_text_with_nothing_after_them_carried_nothing() -> None:
    call = ("call_a", "get_weather", {"city": "Paris"})
    sdk = RecordingSdk()
    sdk.prepare(chat_answer(call))
    sdk.openai.chat.completions.create(model="gpt-4o", messages=USER, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    assistant, _ = smolagents_step(None, [call], "")
    cut = {"role": "assistant", "content": "Calling tools:\n[{'id': 'call_a', 'type': 'fun"}
    for written in (assistant, cut):
        sdk.prepare(chat_answer(n=2))
        sdk.openai.chat.completions.create(model="gpt-4o", messages=[*USER, written, *USER])  # type: ignore[list-item]
    first, *_ = steps_of(sdk.exchanges).steps
    assert first.calls[0].result_in is None
