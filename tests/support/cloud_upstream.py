"""A local HTTPS server that speaks Bedrock Runtime, Gemini (and Vertex AI), Azure OpenAI and
Cohere.

It extends `Upstream` (which keeps every OpenAI, Anthropic and tool route) with the wire
formats the cloud SDKs expect, so boto3, google-genai and ``openai.AzureOpenAI`` parse its
answers as they parse the real services':

* Bedrock Runtime (botocore's ``bedrock-runtime`` model): ``POST /model/{id}/converse``
  (JSON), ``/converse-stream`` (``application/vnd.amazon.eventstream``, each event framed
  with its CRCs and Bedrock's random ``p`` padding), ``/invoke`` (Anthropic's Messages body,
  as Claude on Bedrock answers) and ``/invoke-with-response-stream`` (Anthropic's stream
  events, base64 in ``chunk`` events, the last with ``amazon-bedrock-invocationMetrics``;
  an Amazon Nova model's are Converse's events, a Meta Llama model's ``generation`` chunks).
  A tool offered while the user has just spoken is called, as the base server does.
* Gemini: ``POST …/models/{m}:generateContent`` and ``:streamGenerateContent`` (``alt=sse``:
  server-sent events of whole answers, no ``[DONE]``; else one JSON array), under any prefix
  (``/v1beta``, Vertex's ``/v1/projects/…/publishers/google/models/…``). Offered functions
  and the user's own words, it calls the first function once per comma-separated word, with
  no ``id`` (as the Gemini API sends its calls); the request carrying their
  ``functionResponse`` parts is answered in text.
* Azure OpenAI: ``/openai/deployments/{d}/chat/completions`` and
  ``/openai/v1/chat/completions``, answered as the base server's chat, by the model behind
  the deployment (``AZURE_MODEL``).
* Cohere's Chat v2: ``POST /v2/chat`` in the shapes of the ``cohere`` SDK's own types
  (cohere/v2/types/v2chat_response.py, v2chat_stream_response.py): a whole JSON answer (``id``,
  ``finish_reason``, ``message`` with ``tool_plan`` and ``tool_calls`` or ``content``, ``usage``
  with ``billed_units`` and ``tokens``; no ``model``), or, asked with ``stream``, server-sent
  events named by their ``type``: ``message-start``, ``tool-plan-delta``,
  ``tool-call-start``/``-delta``/``-end`` or ``content-start``/``-delta``/``-end``, then
  ``message-end`` with the finish reason and usage. Offered tools while the user has just
  spoken, it calls the first with the user's words; else it answers in text.
* AWS credential endpoints: IMDSv2 (``PUT /latest/api/token``, ``GET
  /latest/meta-data/iam/security-credentials/[role]``) and STS ``AssumeRole`` (``POST /``).

Every answer embeds the endpoint's counter ``n``, so a replayed answer is told from a live one.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import secrets
import string
import time
from typing import Any
from urllib.parse import unquote

import h11

from freezeframe.canonicalize import eventstream
from support.upstream import SeenRequest, Upstream, _Wire, _words, tool_arguments

AZURE_MODEL = "gpt-4o-2024-08-06"
"""The model behind every Azure deployment here: the answer's ``model``."""
IMDS_ROLE = "agent-role"
IMDS_TOKEN = "AQAEAE2EImdsV2SessionTokenGivenOutByPutApiToken"
"""How each IMDSv2 session token starts (AWS's are base64 that opens ``AQAEA``): the plain-text
answer to ``PUT /latest/api/token``, sent back in ``X-aws-ec2-metadata-token``."""
SECRET_ACCESS_KEY = "wJalrXUtnFEMIK7MDENGbPxRfiCYSECRETKEY0000"

_BEDROCK = re.compile(
    r"/model/([^/]+)/(converse-stream|converse|invoke-with-response-stream|invoke)"
)
_GEMINI = re.compile(r".*/models/([^/:]+):(generateContent|streamGenerateContent)")
_SCHEMAS = ("parametersJsonSchema", "parameters_json_schema", "parameters")
"""Where a function declaration's schema is (google-genai sends ``parameters_json_schema``)."""
_AZURE = re.compile(r"/openai/(?:deployments/[^/]+|v1)/chat/completions")


def _padding() -> str:
    """Bedrock's ``p``: random letters that hide an event's length."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(secrets.randbelow(20) + 1))


def _text_blocks(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


_METRICS = {"inputTokenCount": 11, "outputTokenCount": 7, "invocationLatency": 210}


def _cohere_text(content: Any) -> str:
    """A Cohere v2 message's text: a string, or its ``text`` content items joined."""
    if isinstance(content, str):
        return content
    return "".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict))


def _nova_chunks(answer: str) -> list[dict[str, Any]]:
    """Amazon Nova's InvokeModel stream: Converse's events, one a chunk, the metrics last."""
    chunks: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    chunks += [
        {"contentBlockDelta": {"delta": {"text": piece}, "contentBlockIndex": 0}}
        for piece in _words(answer)
    ]
    usage = {"inputTokens": 11, "outputTokens": 7, "totalTokens": 18}
    return [
        *chunks,
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {
            "metadata": {"usage": usage, "metrics": {}, "trace": {}},
            "amazon-bedrock-invocationMetrics": _METRICS,
        },
    ]


def _llama_chunks(answer: str) -> list[dict[str, Any]]:
    """Meta Llama's InvokeModel stream: a piece of the generation a chunk, with the counts so
    far; the last chunk has none, the stop reason and the metrics."""
    pieces = _words(answer)
    chunks: list[dict[str, Any]] = [
        {
            "generation": piece,
            "prompt_token_count": 11 if at == 0 else None,
            "generation_token_count": at + 1,
            "stop_reason": None,
        }
        for at, piece in enumerate(pieces)
    ]
    last = {"generation": "", "prompt_token_count": None, "generation_token_count": len(pieces)}
    return [
        *chunks,
        {**last, "stop_reason": "stop", "amazon-bedrock-invocationMetrics": _METRICS},
    ]


class CloudUpstream(Upstream):
    _name = "cloud-upstream"

    async def _dispatch(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        path, method = req.path, req.method
        if method == "POST":
            bedrock = _BEDROCK.fullmatch(path)
            if bedrock is not None:
                model, operation = unquote(bedrock.group(1)), bedrock.group(2)
                if operation.startswith("converse"):
                    return await self._converse(wire, conn, req, model, operation)
                return await self._invoke(wire, conn, req, model, operation)
            gemini = _GEMINI.fullmatch(path)
            if gemini is not None:
                return await self._gemini(wire, conn, req, gemini.group(1), gemini.group(2))
            if _AZURE.fullmatch(path):
                body = {**self._json_body(req), "model": AZURE_MODEL}
                asked = dataclasses.replace(
                    req, target="/v1/chat/completions", body=json.dumps(body).encode()
                )
                return await self._chat(wire, conn, asked)
            if path == "/v2/chat":
                return await self._cohere(wire, conn, req)
            if path == "/" and "AssumeRole" in req.body.decode("latin-1"):
                return await self._sts(wire, conn)
        if path == "/latest/api/token" and method == "PUT":
            return await self._send_full(
                wire,
                conn,
                200,
                "text/plain",
                f"{IMDS_TOKEN}{self._next('imds'):05d}==".encode(),
            )
        if path.startswith("/latest/meta-data/iam/security-credentials/") and method == "GET":
            return await self._imds(wire, conn, path)
        return await super()._dispatch(wire, conn, req)

    # -- Bedrock --
    def _bedrock_headers(self, n: int) -> list[tuple[str, str]]:
        return [("x-amzn-RequestId", f"bedrock-req-{n}")]

    def _converse_blocks(self, body: dict[str, Any], n: int) -> tuple[list[dict[str, Any]], str]:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        text = ""
        for message in reversed(messages):
            if message.get("role") == "user":
                text = _text_blocks(message.get("content"))
                if text:
                    break
        tools = [
            t["toolSpec"]
            for t in (body.get("toolConfig") or {}).get("tools") or []
            if "toolSpec" in t
        ]
        results = any("toolResult" in block for block in last.get("content") or [])
        if tools and not results:
            spec = tools[0]
            schema = (spec.get("inputSchema") or {}).get("json")
            use = {
                "toolUseId": f"tooluse_{n}",
                "name": spec["name"],
                "input": tool_arguments(schema, text),
            }
            return [{"toolUse": use}], "tool_use"
        return [{"text": f"answer {n} to: {text}"}], "end_turn"

    async def _converse(
        self, wire: _Wire, conn: h11.Connection, req: SeenRequest, model: str, operation: str
    ) -> bool:
        body = self._json_body(req)
        n = self._next("converse")
        blocks, stop = self._converse_blocks(body, n)
        usage = {"inputTokens": 12, "outputTokens": 6 + n, "totalTokens": 18 + n}
        if operation == "converse":
            answer = {
                "output": {"message": {"role": "assistant", "content": blocks}},
                "stopReason": stop,
                "usage": usage,
                "metrics": {"latencyMs": 100 + n},
            }
            return await self._send_json(wire, conn, 200, answer, self._bedrock_headers(n))

        def event(kind: str, payload: dict[str, Any]) -> bytes:
            data = json.dumps({**payload, "p": _padding()}).encode()
            return eventstream.event(kind, data)

        frames = [event("messageStart", {"role": "assistant"})]
        for index, block in enumerate(blocks):
            if "toolUse" in block:
                use = block["toolUse"]
                start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
                frames.append(
                    event("contentBlockStart", {"contentBlockIndex": index, "start": start})
                )
                arguments = json.dumps(use["input"])
                for at in range(0, len(arguments), 7):
                    delta = {"toolUse": {"input": arguments[at : at + 7]}}
                    frames.append(
                        event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
                    )
            else:
                for piece in _words(block["text"]):
                    frames.append(
                        event(
                            "contentBlockDelta",
                            {"contentBlockIndex": index, "delta": {"text": piece}},
                        )
                    )
            frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
        frames.append(event("messageStop", {"stopReason": stop}))
        frames.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 100 + n}}))
        return await self._send_stream(
            wire,
            conn,
            frames,
            self._bedrock_headers(n),
            gap=self._gap,
            content_type=eventstream.MEDIA_TYPE,
        )

    async def _invoke(
        self, wire: _Wire, conn: h11.Connection, req: SeenRequest, model: str, operation: str
    ) -> bool:
        body = self._json_body(req)
        n = self._next("invoke")
        messages = body.get("messages") or []
        text = _text_blocks(messages[-1].get("content")) if messages else ""
        if operation != "invoke" and ".nova-" in model:
            return await self._invoke_stream(wire, conn, n, _nova_chunks(f"answer {n} to: {text}"))
        if operation != "invoke" and "meta.llama" in model:
            said = f"answer {n} to: {body.get('prompt', '')}"
            return await self._invoke_stream(wire, conn, n, _llama_chunks(said))
        answer = f"answer {n} to: {text}"
        usage = {"input_tokens": 11, "output_tokens": 5 + n}
        message = {
            "id": f"msg_bdrk_{n}",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-sonnet-20240620",
            "content": [{"type": "text", "text": answer}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        if operation == "invoke":
            return await self._send_json(wire, conn, 200, message, self._bedrock_headers(n))
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ]
        events += [
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            for piece in _words(answer)
        ]
        events += [
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5 + n},
            },
            {
                "type": "message_stop",
                "amazon-bedrock-invocationMetrics": {
                    "inputTokenCount": 11,
                    "outputTokenCount": 5 + n,
                    "invocationLatency": 200 + n,
                    "firstByteLatency": 50,
                },
            },
        ]
        return await self._invoke_stream(wire, conn, n, events)

    async def _invoke_stream(
        self, wire: _Wire, conn: h11.Connection, n: int, events: list[dict[str, Any]]
    ) -> bool:
        """The model's own chunks, each base64 in a ``chunk`` event with Bedrock's padding."""
        frames = [
            eventstream.event(
                "chunk",
                json.dumps(
                    {"bytes": base64.b64encode(json.dumps(e).encode()).decode(), "p": _padding()}
                ).encode(),
            )
            for e in events
        ]
        return await self._send_stream(
            wire,
            conn,
            frames,
            self._bedrock_headers(n),
            gap=self._gap,
            content_type=eventstream.MEDIA_TYPE,
        )

    # -- Gemini --
    async def _gemini(
        self, wire: _Wire, conn: h11.Connection, req: SeenRequest, model: str, method: str
    ) -> bool:
        body = self._json_body(req)
        n = self._next("gemini")
        contents = body.get("contents") or []
        last = contents[-1] if contents else {}
        text = "".join(
            str(p.get("text", "")) for p in last.get("parts") or [] if isinstance(p, dict)
        )
        declarations = [
            d for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []
        ]
        answered = any("functionResponse" in p for p in last.get("parts") or [])
        finish = "STOP"
        if declarations and not answered:
            tool = declarations[0]
            schema = next((tool[n] for n in _SCHEMAS if n in tool), None)
            pieces: list[dict[str, Any]] = [
                {"functionCall": {"name": tool["name"], "args": tool_arguments(schema, said)}}
                for said in text.split(", ")
            ]
        else:
            pieces = [{"text": piece} for piece in _words(f"answer {n} to: {text}")]
        usage = {"promptTokenCount": 9, "candidatesTokenCount": 4 + n, "totalTokenCount": 13 + n}
        base = {"modelVersion": f"{model}-001", "responseId": secrets.token_urlsafe(12)}
        extra = [("x-gemini-service-tier", "standard")]
        if method == "generateContent":
            candidate = {
                "content": {"role": "model", "parts": self._joined(pieces)},
                "finishReason": finish,
                "index": 0,
            }
            answer = {"candidates": [candidate], "usageMetadata": usage, **base}
            return await self._send_json(wire, conn, 200, answer, extra)
        answers = []
        for at, piece in enumerate(pieces):
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [piece]}, "index": 0}
            if at == len(pieces) - 1:
                candidate["finishReason"] = finish
            answers.append({"candidates": [candidate], "usageMetadata": usage, **base})
        if req.query.get("alt") == "sse":
            frames = [b"data: " + json.dumps(a).encode() + b"\r\n\r\n" for a in answers]
            return await self._send_stream(wire, conn, frames, extra, gap=self._gap)
        text_body = ("[" + ",\r\n".join(json.dumps(a) for a in answers) + "]").encode()
        frames = [text_body[at : at + 64] for at in range(0, len(text_body), 64)]
        return await self._send_stream(
            wire,
            conn,
            frames,
            extra,
            gap=lambda _: 0.0,
            content_type="application/json; charset=UTF-8",
        )

    @staticmethod
    def _joined(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if all("text" in piece for piece in pieces):
            return [{"text": "".join(piece["text"] for piece in pieces)}]
        return pieces

    # -- Cohere --
    async def _cohere(self, wire: _Wire, conn: h11.Connection, req: SeenRequest) -> bool:
        body = self._json_body(req)
        n = self._next("cohere")
        messages = body.get("messages") or []
        text = next(
            (_cohere_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
            "",
        )
        tools = [t["function"] for t in body.get("tools") or [] if "function" in t]
        called = bool(tools) and bool(messages) and messages[-1].get("role") == "user"
        # Salted as the other models' ids are: a rerun's are fresh, as Cohere's are (a UUID,
        # ``<tool>_<random>``), and the diff reads them by their role.
        salt = self.id_salt.encode().hex()[:4].rjust(4, "0")
        answer_id = f"c14c80c3-{n:04d}-4519-{salt}-6c92edd8cfb4"
        usage = {
            "billed_units": {"input_tokens": 9, "output_tokens": 3 + n},
            "tokens": {"input_tokens": 710 + n, "output_tokens": 3 + n},
            "cached_tokens": 0,
        }
        plan = f"I will look up the weather for {text}."
        call: dict[str, Any] = {}
        if called:
            arguments = json.dumps(tool_arguments(tools[0].get("parameters"), text))
            call = {
                "id": f"{tools[0]['name']}_{self.id_salt}{n}k7yhtb",
                "type": "function",
                "function": {"name": tools[0]["name"], "arguments": arguments},
            }
        answer_text = f"answer {n} to: {text}"
        finish = "TOOL_CALL" if called else "COMPLETE"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant"}
            if called:
                message.update(tool_plan=plan, tool_calls=[call])
            else:
                message["content"] = [{"type": "text", "text": answer_text}]
            answer = {"id": answer_id, "finish_reason": finish, "message": message, "usage": usage}
            return await self._send_json(wire, conn, 200, answer)

        def event(payload: dict[str, Any]) -> bytes:
            return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()

        start = {"message": {"role": "assistant", "content": [], "tool_calls": []}}
        frames = [event({"id": answer_id, "type": "message-start", "delta": start})]
        if called:
            for piece in _words(plan):
                delta = {"message": {"tool_plan": piece}}
                frames.append(event({"type": "tool-plan-delta", "delta": delta}))
            opening = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
            frames.append(
                event(
                    {
                        "type": "tool-call-start",
                        "index": 0,
                        "delta": {"message": {"tool_calls": opening}},
                    }
                )
            )
            arguments = call["function"]["arguments"]
            for at in range(0, len(arguments), 7):
                delta = {
                    "message": {"tool_calls": {"function": {"arguments": arguments[at : at + 7]}}}
                }
                frames.append(event({"type": "tool-call-delta", "index": 0, "delta": delta}))
            frames.append(event({"type": "tool-call-end", "index": 0}))
        else:
            opening = {"message": {"content": {"type": "text", "text": ""}}}
            frames.append(event({"type": "content-start", "index": 0, "delta": opening}))
            for piece in _words(answer_text):
                delta = {"message": {"content": {"text": piece}}}
                frames.append(event({"type": "content-delta", "index": 0, "delta": delta}))
            frames.append(event({"type": "content-end", "index": 0}))
        end = {"finish_reason": finish, "usage": usage}
        frames.append(event({"type": "message-end", "delta": end}))
        return await self._send_stream(wire, conn, frames, gap=self._gap)

    # -- AWS credentials --
    async def _imds(self, wire: _Wire, conn: h11.Connection, path: str) -> bool:
        role = path.removeprefix("/latest/meta-data/iam/security-credentials/")
        if not role:
            return await self._send_full(wire, conn, 200, "text/plain", IMDS_ROLE.encode())
        n = self._next("imds-credentials")
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 6 * 3600))
        answer = {
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": f"ASIAIMDSEXAMPLE{n:05d}",
            "SecretAccessKey": SECRET_ACCESS_KEY,
            "Token": f"IQoJb3JpZ2luX2VjIMDSSESSIONTOKEN{n:05d}",
            "Expiration": expires,
        }
        return await self._send_json(wire, conn, 200, answer)

    async def _sts(self, wire: _Wire, conn: h11.Connection) -> bool:
        n = self._next("sts")
        body = (
            '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleResult><Credentials>"
            f"<AccessKeyId>ASIASTSEXAMPLE{n:06d}</AccessKeyId>"
            f"<SecretAccessKey>{SECRET_ACCESS_KEY}</SecretAccessKey>"
            f"<SessionToken>IQoJb3JpZ2luX2VjSTSSESSIONTOKEN{n:05d}</SessionToken>"
            "<Expiration>2099-01-01T00:00:00Z</Expiration>"
            "</Credentials><AssumedRoleUser><AssumedRoleId>AROA:agent</AssumedRoleId>"
            "<Arn>arn:aws:sts::123456789012:assumed-role/agent/agent</Arn></AssumedRoleUser>"
            "</AssumeRoleResult><ResponseMetadata><RequestId>sts-" + str(n) + "</RequestId>"
            "</ResponseMetadata></AssumeRoleResponse>"
        ).encode()
        return await self._send_full(wire, conn, 200, "text/xml", body)
