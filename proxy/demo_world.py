"""The demo's world: a tiny model, a tiny tool, and a small agent that uses both.

``freezeframe demo`` must show record and replay after a plain ``pip install``, with no API
key and no network, so it brings its own world. The model speaks the wire format agents
really meet (OpenAI's streamed chat completions: server-sent events, a tool call whose
arguments arrive in pieces, ``[DONE]``) over HTTPS with a certificate it makes, because
that is what a real client needs from freezeframe: a proxy and a CA to trust. The tool is
a plain HTTP service, as a local tool often is. The agent is plain httpx: it asks, calls the
tool the model picks, sends the result back, and reads the answer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

MODEL = "demo-model-1"
QUESTION = "Where is my order ord_8821?"
ORDERS = {"ord_8821": {"id": "ord_8821", "status": "shipped", "arrives": "Thursday"}}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look an order up by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class World:
    """Where the model and the tool answer, and the CA the model's certificate is from
    (the proxy's ``--upstream-ca``)."""

    model_url: str
    tool_url: str
    model_ca: Path


@contextlib.contextmanager
def world(directory: Path) -> Iterator[World]:
    """Start the model (HTTPS) and the tool (HTTP) on free loopback ports; stop both on exit."""
    ca, chain = _certificates(directory)
    model = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    model.socket = context.wrap_socket(model.socket, server_side=True)
    tool = ThreadingHTTPServer(("127.0.0.1", 0), _Tool)
    threads = [
        threading.Thread(target=server.serve_forever, name=f"demo-{name}", daemon=True)
        for name, server in (("model", model), ("tool", tool))
    ]
    for thread in threads:
        thread.start()
    try:
        yield World(
            f"https://localhost:{model.server_address[1]}/v1",
            f"http://127.0.0.1:{tool.server_address[1]}",
            ca,
        )
    finally:
        for server in (model, tool):
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(TIMEOUT_S)


def _certificates(directory: Path) -> tuple[Path, Path]:
    """A CA of the demo's own and a certificate for localhost signed by it: the CA file, and
    the certificate with its key (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from mitmproxy import certs

    store = certs.CertStore.from_store(directory, "demo-model", 2048)
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    entry = store.get_cert("localhost", sans)
    chain = directory / "demo-model-localhost.pem"
    key = entry.privatekey.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    chain.write_bytes(entry.cert.to_pem() + key)
    chain.chmod(0o600)
    return directory / "demo-model-ca-cert.pem", chain


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """The demo prints what it did; the servers' access logs would only bury it."""

    def _json(self, status: int, document: object) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Model(_Quiet):
    """``POST /v1/chat/completions`` with ``stream: true``: a tool call first, then, once a
    tool result is in the conversation, an answer that uses it."""

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        asked = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        results = [m for m in asked.get("messages", []) if m.get("role") == "tool"]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        chunks = _answer(json.loads(results[-1]["content"])) if results else _tool_call()
        created = int(time.time())
        for n, (delta, finish) in enumerate(chunks):
            chunk = {
                "id": f"chatcmpl-demo-{len(results)}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            if n < len(chunks) - 1:
                time.sleep(0.02)  # tokens arrive over time, as a model's do
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True


def _tool_call() -> list[tuple[dict[str, Any], str | None]]:
    arguments = json.dumps({"order_id": "ord_8821"})
    call = {"index": 0, "id": "call_demo_1", "type": "function"}
    first = {**call, "function": {"name": "get_order", "arguments": ""}}
    pieces = [arguments[:12], arguments[12:]]
    return [
        ({"role": "assistant", "content": None, "tool_calls": [first]}, None),
        *(({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}, None) for p in pieces),
        ({}, "tool_calls"),
    ]


def _answer(order: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    text = f"Your order {order['id']} has {order['status']}; it arrives {order['arrives']}."
    words = text.split(" ")
    pieces = [word if n == 0 else f" {word}" for n, word in enumerate(words)]
    return [
        ({"role": "assistant", "content": ""}, None),
        *(({"content": piece}, None) for piece in pieces),
        ({}, "stop"),
    ]


class _Tool(_Quiet):
    """``GET /orders/ID``: the order, or 404."""

    def do_GET(self) -> None:
        order = ORDERS.get(self.path.removeprefix("/orders/"))
        if order is None:
            self._json(404, {"error": f"no order at {self.path}"})
        else:
            self._json(200, order)


def run_agent(world: World, proxy: str, ca: Path) -> list[str]:
    """The agent's run through ``proxy``, trusting only freezeframe's CA ``ca``, as lines:
    what it asked, the tool call the model chose, the tool's answer, the model's answer."""
    trust = ssl.create_default_context(cafile=str(ca))
    with httpx.Client(proxy=proxy, verify=trust, timeout=TIMEOUT_S, trust_env=False) as client:
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        said = [f"user: {QUESTION}"]
        first = _stream(client, world, messages)
        call = first["tool_calls"][0]
        arguments = json.loads(call["function"]["arguments"])
        said.append(f"model calls {call['function']['name']}({json.dumps(arguments)})")
        found = client.get(f"{world.tool_url}/orders/{arguments['order_id']}")
        found.raise_for_status()
        said.append(f"tool answers {found.text}")
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": found.text},
        ]
        said.append(f"model: {_stream(client, world, messages)['content']}")
    return said


def _stream(client: httpx.Client, world: World, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One streamed chat completion, its deltas put together: the text and the tool calls."""
    asked = {"model": MODEL, "messages": messages, "tools": [TOOL], "stream": True}
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    with client.stream("POST", f"{world.model_url}/chat/completions", json=asked) as answer:
        if answer.status_code != 200:
            answer.read()
            raise RuntimeError(f"the model answered {answer.status_code}: {answer.text[:300]}")
        for line in answer.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[len("data: ") :])["choices"][0]["delta"]
            content += delta.get("content") or ""
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    piece["index"], {"id": "", "type": "function", "function": {"name": ""}}
                )
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function", {})
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] = call["function"].get("arguments", "") + (
                    function.get("arguments") or ""
                )
    return {"content": content, "tool_calls": [calls[n] for n in sorted(calls)]}
