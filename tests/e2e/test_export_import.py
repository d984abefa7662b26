"""A case leaves the machine and comes back whole: export, import, replay, verify.

One corpus is recorded through the real proxy for the whole module (model calls plain and
streamed, a tool call carrying a cookie, a binary body, a 429 cut off mid-body, an upstream
that refuses, a WebSocket session). Each portable format is exported with the real CLI,
imported under a new name, compared with the original field by field, replayed through the
proxy to the same bytes, and its chain verified; the bundle is also checked offline and
tampered with.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import pty
import select
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import jsonschema
import openai
import pytest
import trustme
import zstandard
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream
from support.ws_upstream import HANDSHAKE_S, WsUpstream
from websockets.sync.client import connect

from freezeframe import cli
from freezeframe.storage import Outcome, open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
CASSETTE = "incident"
OPENAI_KEY = "sk-export-openai-0123456789abcdefghij"
ANTHROPIC_KEY = "sk-ant-export-0123456789abcdefghijkl"
COOKIE_SECRET = "cookie-export-secret-456"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY, COOKIE_SECRET)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"
AGENT_HEADERS = {"traceparent": f"00-{TRACE_ID}-{AGENT_SPAN}-01", "X-Freezeframe-Run-Id": "run-7"}
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
SCHEMA = json.loads((REPO / "exchange_formats" / "schema" / "jsonl.schema.json").read_text())


@dataclass
class Corpus:
    data_dir: Path
    upstream: Upstream
    ws: WsUpstream
    refused_port: int
    seen: list[Any]
    """What the clients observed while recording."""


def traffic(upstream: Upstream, ws: WsUpstream, refused_port: int) -> list[Any]:
    """Every kind of exchange a case holds; returns what the clients observed, bytes and
    errors included."""
    base = upstream.base_url
    seen: list[Any] = []
    with openai.OpenAI(base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0) as oai:
        asked = [{"role": "user", "content": "What is 2+2?"}]
        seen.append(oai.chat.completions.create(model="gpt-4o-mini", messages=asked).model_dump())
        stream = oai.chat.completions.create(model="gpt-4o-mini", messages=asked, stream=True)
        seen.append([chunk.model_dump() for chunk in stream])
        weather = [{"role": "user", "content": "What is the weather in Paris?"}]
        first = oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=weather,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            extra_headers=AGENT_HEADERS,
        )
        seen.append(first.model_dump())
        asked = first.choices[0].message
        assert asked.tool_calls
        result = {"role": "tool", "tool_call_id": asked.tool_calls[0].id, "content": "sunny"}
        second = oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[*weather, asked.model_dump(exclude_none=True), result],  # type: ignore[list-item]
            tools=[WEATHER],  # type: ignore[list-item]
            extra_headers=AGENT_HEADERS,
        )
        seen.append(second.model_dump())
    with anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0) as claude:
        with claude.messages.stream(
            model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as events:
            seen.append([event.model_dump() for event in events])
    with httpx.Client(timeout=10) as client:
        tool = client.get(
            f"{base}/tool/counter", params={"q": "x"}, headers={"Cookie": f"s={COOKIE_SECRET}"}
        )
        seen.append((tool.status_code, tool.content))
        binary = client.get(f"{base}/bytes/random", params={"size": "3000", "seed": "7"})
        seen.append((binary.status_code, binary.content))
        received = bytearray()
        with client.stream("POST", f"{base}/v1/ratelimited", json={"q": 1}) as cut:
            try:
                for chunk in cut.iter_raw():
                    received += chunk
            except httpx.HTTPError as exc:
                seen.append((cut.status_code, bytes(received), type(exc).__name__))
        refused = client.post(f"https://localhost:{refused_port}/v1/chat/completions", json={})
        seen.append((refused.status_code, refused.content))
    with connect(
        ws.url("/v1/realtime?model=gpt-realtime"),
        additional_headers={"Authorization": f"Bearer {OPENAI_KEY}"},
        open_timeout=HANDSHAKE_S,
        close_timeout=10,
    ) as session:
        seen.append(session.recv(timeout=10))
        session.send(json.dumps({"type": "session.update", "session": {"instructions": "x"}}))
        seen.append(session.recv(timeout=10))
    return seen


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, upstream_ca: trustme.CA, upstream_ca_file: Path
) -> Iterator[Corpus]:
    data_dir = tmp_path_factory.mktemp("export") / "data"
    upstream = Upstream(upstream_ca).start()
    ws = WsUpstream(upstream_ca).start()
    recorder = ProxyProcess(
        data_dir, mode="record", cassette=CASSETTE, upstream_ca=upstream_ca_file
    )
    try:
        recorder.start()
        refused_port = free_port()
        with pytest.MonkeyPatch.context() as patch:
            point_clients_at(patch, recorder)
            seen = traffic(upstream, ws, refused_port)
        assert recorder.stop() == 0
        yield Corpus(data_dir, upstream, ws, refused_port, seen)
    finally:
        recorder.kill()
        ws.stop()
        upstream.stop()


def point_clients_at(patch: pytest.MonkeyPatch, proxy: ProxyProcess) -> None:
    from freezeframe.proxy.trust import client_bundle

    for name in list(os.environ):
        if name.lower() in ("all_proxy", "ssl_cert_dir"):
            patch.delenv(name)
    for name, value in proxy.client_env(client_bundle(proxy.data_dir)).items():
        patch.setenv(name, value)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def freezeframe(data_dir: Path | None, *args: str) -> Ran:
    """The command line (with ``--data-dir`` unless None), run in this process: starting a
    Python for each command would cost seconds on a busy machine, and the proxy runs apart."""
    where = () if data_dir is None else ("--data-dir", str(data_dir))
    result = CliRunner().invoke(cli.main, [*args, *where], catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def store_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'freezeframe.db'}"


def test_the_corpus_holds_every_kind_of_exchange(corpus: Corpus) -> None:
    with open_store(store_url(corpus.data_dir)) as store:
        listed = store.exchanges(CASSETTE)
    outcomes = {summary.outcome for summary in listed}
    assert {Outcome.COMPLETE, Outcome.TRUNCATED, Outcome.FAILED} <= outcomes
    assert any(summary.websocket_messages for summary in listed)


@pytest.mark.parametrize("format_", ["jsonl", "bundle"])
def test_an_import_is_the_recording_field_by_field_and_replays_the_same_bytes(
    corpus: Corpus, format_: str, tmp_path: Path, upstream_ca_file: Path
) -> None:
    exported = tmp_path / f"case.{format_}"
    copy = f"copy-{format_}"
    done = freezeframe(
        corpus.data_dir, "export", CASSETTE, "-o", str(exported), "--format", format_
    )
    assert done.returncode == 0, done.stderr
    done = freezeframe(corpus.data_dir, "import", str(exported), "--as", copy)
    assert done.returncode == 0, done.stderr
    assert f"{copy}: imported" in done.stdout

    with open_store(store_url(corpus.data_dir)) as store:
        originals = store.exchanges(CASSETTE)
        assert [s.seq for s in store.exchanges(copy)] == [s.seq for s in originals]
        for summary in originals:
            original = store.exchange(CASSETTE, summary.seq)
            imported = store.exchange(copy, summary.seq)
            for field in dataclasses.fields(original.recorded):
                if field.name == "cassette":
                    continue
                assert getattr(imported.recorded, field.name) == getattr(
                    original.recorded, field.name
                ), f"exchange {summary.seq}: {field.name}"
            assert imported.drift == original.drift, f"exchange {summary.seq}: drift"
        report = store.verify(copy)
    assert report.ok, report.detail

    verified = freezeframe(corpus.data_dir, "verify", copy)
    assert verified.returncode == 0 and report.head in verified.stdout

    corpus.upstream.reset_counters()
    replayer = ProxyProcess(
        corpus.data_dir, mode="replay", cassette=copy, upstream_ca=upstream_ca_file
    )
    try:
        replayer.start()
        with pytest.MonkeyPatch.context() as patch:
            point_clients_at(patch, replayer)
            replayed = traffic(corpus.upstream, corpus.ws, corpus.refused_port)
    finally:
        replayer.kill()
    assert replayed == corpus.seen
    assert corpus.upstream.connections == 0, "replay of the import reached the upstream"


def test_a_har_export_imports_back_and_replays_what_the_client_saw(
    corpus: Corpus, tmp_path: Path, upstream_ca_file: Path
) -> None:
    exported = tmp_path / "case.har"
    done = freezeframe(corpus.data_dir, "export", CASSETTE, "-o", str(exported), "--format", "har")
    assert done.returncode == 0, done.stderr
    log = json.loads(exported.read_text())["log"]
    assert log["version"] == "1.2"
    entries = log["entries"]
    outcomes = {e["_outcome"] for e in entries}
    # The openai SDK stops reading a stream at [DONE] and closes it: on a busy machine that
    # is before the upstream's end of message has reached the proxy, and the exchange is
    # recorded client_closed (replayed whole, as a complete one is).
    assert {"complete", "truncated", "failed"} <= outcomes
    assert outcomes - {"complete", "truncated", "failed"} <= {"client_closed"}
    (session,) = [e for e in entries if "_webSocketMessages" in e]
    assert [m["type"] for m in session["_webSocketMessages"]][:2] == ["receive", "send"]
    streamed = next(e for e in entries if len(e["_chunks"]) > 2)
    assert streamed["timings"]["wait"] >= 0 and streamed["timings"]["dns"] == -1

    done = freezeframe(corpus.data_dir, "import", str(exported), "--as", "from-har")
    assert done.returncode == 0, done.stderr
    assert "no chunk timing" not in done.stdout and "no run context" in done.stdout
    corpus.upstream.reset_counters()
    replayer = ProxyProcess(
        corpus.data_dir, mode="replay", cassette="from-har", upstream_ca=upstream_ca_file
    )
    try:
        replayer.start()
        with pytest.MonkeyPatch.context() as patch:
            point_clients_at(patch, replayer)
            replayed = traffic(corpus.upstream, corpus.ws, corpus.refused_port)
    finally:
        replayer.kill()
    assert replayed == corpus.seen
    assert corpus.upstream.connections == 0


def test_every_jsonl_line_follows_the_published_schema_and_exports_are_stable(
    corpus: Corpus, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (first, second):
        done = freezeframe(corpus.data_dir, "export", CASSETTE, "-o", str(path))
        assert done.returncode == 0, done.stderr
    assert first.read_bytes() == second.read_bytes()
    lines = first.read_bytes().splitlines()
    assert json.loads(lines[0]) == {
        "cassette": CASSETTE,
        "format": "freezeframe.jsonl",
        "format_version": 1,
    }
    bundle = tmp_path / "case.ffcase"
    export = ("export", CASSETTE, "-o", str(bundle), "--format", "bundle")
    assert freezeframe(corpus.data_dir, *export).returncode == 0
    with zipfile.ZipFile(bundle) as archive:
        for line in archive.read("exchanges.jsonl").splitlines():
            jsonschema.validate(json.loads(line), SCHEMA)
    for line in lines:
        jsonschema.validate(json.loads(line), SCHEMA)
        assert line.decode() == json.dumps(
            json.loads(line), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        ), "keys are sorted, one compact document a line"


EXPORTS = [
    ("jsonl",),
    ("bundle",),
    ("har",),
    ("otel",),
    *[("dataset", "--shape", shape) for shape in ("freezeframe", "langfuse", "phoenix")],
    ("dataset", "--shape", "openai-chat"),
]


def test_no_export_in_any_format_holds_a_secret_the_agent_sent(
    corpus: Corpus, tmp_path: Path
) -> None:
    everything = []
    for n, (format_, *options) in enumerate(EXPORTS):
        path = tmp_path / f"case-{n}.{format_}"
        export = ("export", CASSETTE, "-o", str(path), "--format", format_, *options)
        done = freezeframe(corpus.data_dir, *export)
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
    assert b"Bearer [" in everything[0], "the markers stay markers"


def test_an_export_of_a_cassette_that_is_not_there_makes_no_file(
    corpus: Corpus, tmp_path: Path
) -> None:
    path = tmp_path / "nothing.jsonl"
    done = freezeframe(corpus.data_dir, "export", "no-such", "-o", str(path))
    assert done.returncode == 1
    assert done.stderr.startswith("freezeframe: error: ") and "no-such" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def signed(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A signed bundle of the corpus and the public key that checks it."""
    where = tmp_path_factory.mktemp("signed")
    done = freezeframe(None, "keygen", "-o", str(where / "team"))
    assert done.returncode == 0, done.stderr
    bundle = where / "incident.ffcase"
    rules = where / "rules.toml"
    rules.write_text("# the rules this case was keyed under\n")
    done = freezeframe(
        corpus.data_dir,
        "export",
        CASSETTE,
        "-o",
        str(bundle),
        "--format",
        "bundle",
        "--sign",
        str(where / "team.key"),
        "--rules",
        str(rules),
    )
    assert done.returncode == 0, done.stderr
    return bundle, where / "team.pub"


def test_an_import_of_a_signed_bundle_names_its_signer(
    corpus: Corpus, signed: tuple[Path, Path]
) -> None:
    bundle, public = signed
    done = freezeframe(corpus.data_dir, "import", str(bundle), "--as", "signed-copy")
    assert done.returncode == 0, done.stderr
    fingerprint = freezeframe(None, "verify", "--bundle", str(bundle), "--trust", str(public))
    signer = fingerprint.stdout.split("signed by trusted key ")[1].split()[0]
    assert f"  signed by {signer}: check that it is a key you trust" in done.stdout


def test_keygen_writes_a_private_key_only_its_owner_reads(signed: tuple[Path, Path]) -> None:
    _, public = signed
    assert (public.with_suffix(".key").stat().st_mode & 0o777) == 0o600
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")


def test_a_signed_bundle_verifies_offline_against_the_trusted_key(
    corpus: Corpus, signed: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, public = signed
    nowhere = tmp_path / "no-store"
    done = freezeframe(nowhere, "verify", "--bundle", str(bundle), "--trust", str(public))
    assert done.returncode == 0, done.stderr
    assert "signed by trusted key" in done.stdout
    with open_store(store_url(corpus.data_dir)) as store:
        head = store.verify(CASSETTE).head
    assert f"chain head {head}" in done.stdout
    assert not nowhere.exists(), "verifying a bundle needs no store"


def test_another_key_is_refused(signed: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, _ = signed
    assert freezeframe(None, "keygen", "-o", str(tmp_path / "other")).returncode == 0
    done = freezeframe(
        tmp_path, "verify", "--bundle", str(bundle), "--trust", f"{tmp_path}/other.pub"
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"freezeframe: error: {bundle}: manifest.sig: signed by")
    assert len(done.stderr.splitlines()) == 1


def rewrite(bundle: Path, target: Path, change: dict[str, Any]) -> None:
    """A copy of ``bundle`` with members replaced (name -> bytes, or a function of them)."""
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(target, "w") as copy:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename in change:
                replace = change[info.filename]
                data = replace(data) if callable(replace) else replace
            copy.writestr(info.filename, data)


def body_of_exchange(bundle: Path, seq: int, which: str) -> str:
    with zipfile.ZipFile(bundle) as source:
        for line in source.read("exchanges.jsonl").splitlines()[1:]:
            document = json.loads(line)
            if document["seq"] == seq:
                return f"bodies/{document[which]['body']['blake3']}"
    raise AssertionError(f"no exchange {seq}")


def test_an_edited_body_or_line_or_manifest_is_named(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, public = signed
    body = body_of_exchange(bundle, 3, "response")
    damaged = tmp_path / "body.ffcase"
    rewrite(bundle, damaged, {body: zstandard.ZstdCompressor().compress(b"[] edited answer")})
    done = freezeframe(tmp_path, "verify", "--bundle", str(damaged), "--trust", str(public))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"freezeframe: error: {damaged}: exchange 3: its response body does not match its digest"
    )

    def edit_line(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        lines[2] = lines[2].replace(b'"GET"', b'"PUT"').replace(b'"POST"', b'"PUT"')
        return b"".join(lines)

    edited = tmp_path / "line.ffcase"
    rewrite(bundle, edited, {"exchanges.jsonl": edit_line})
    done = freezeframe(tmp_path, "verify", "--bundle", str(edited), "--trust", str(public))
    assert done.returncode == 1
    assert "exchange 1: does not match the manifest" in done.stderr

    forged = tmp_path / "manifest.ffcase"
    rewrite(bundle, forged, {"manifest.json": lambda data: data.replace(CASSETTE.encode(), b"x")})
    done = freezeframe(tmp_path, "verify", "--bundle", str(forged), "--trust", str(public))
    assert done.returncode == 1
    assert "manifest.sig: does not verify" in done.stderr

    garbled = tmp_path / "garbled.ffcase"
    rewrite(bundle, garbled, {body: b"not zstd at all"})
    done = freezeframe(tmp_path, "verify", "--bundle", str(garbled), "--trust", str(public))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"freezeframe: error: {garbled}: exchange 3: its response body ({body}) is damaged"
    )

    ruled = tmp_path / "rules.ffcase"
    rewrite(bundle, ruled, {"rules.toml": b"[[rule]]\n"})
    done = freezeframe(tmp_path, "verify", "--bundle", str(ruled), "--trust", str(public))
    assert done.returncode == 1
    assert done.stderr.strip().endswith("rules.toml: does not match the manifest")


def test_a_truncated_bundle_imports_nothing(
    corpus: Corpus, signed: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, _ = signed
    cut = tmp_path / "cut.ffcase"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    done = freezeframe(corpus.data_dir, "import", str(cut), "--as", "cut")
    assert done.returncode == 1
    assert done.stderr.startswith(f"freezeframe: error: {cut}: archive: ")
    assert len(done.stderr.splitlines()) == 1
    with open_store(store_url(corpus.data_dir)) as store:
        assert "cut" not in store.cassette_names()


def test_a_bundle_whose_signature_does_not_verify_is_not_imported(
    corpus: Corpus, signed: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, _ = signed
    forged = tmp_path / "forged.ffcase"
    rewrite(bundle, forged, {"manifest.json": lambda data: data.replace(b'"bodies"', b'"bodies" ')})
    done = freezeframe(corpus.data_dir, "import", str(forged), "--as", "forged")
    assert done.returncode == 1
    assert done.stderr == (
        f"freezeframe: error: {forged}: manifest.sig: does not verify: "
        "the manifest was changed after signing\n"
    )
    with open_store(store_url(corpus.data_dir)) as store:
        assert "forged" not in store.cassette_names()


def test_a_bad_line_late_in_a_file_rolls_the_whole_import_back(
    corpus: Corpus, tmp_path: Path
) -> None:
    exported = tmp_path / "case.jsonl"
    assert freezeframe(corpus.data_dir, "export", CASSETTE, "-o", str(exported)).returncode == 0
    lines = exported.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["response"]["status"] = "200"
    lines[-1] = json.dumps(last).encode() + b"\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines))
    done = freezeframe(corpus.data_dir, "import", str(broken), "--as", "half")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"freezeframe: error: {broken}: line {len(lines)}: $.response.status: "
        "expected an integer, found a string"
    )
    with open_store(store_url(corpus.data_dir)) as store:
        assert "half" not in store.cassette_names()


def otlp_request(line: bytes) -> ExportTraceServiceRequest:
    """A line parsed by the protobuf JSON mapping, after OTLP/JSON's one exception to it:
    trace and span ids are hex there, base64 in the mapping."""
    document = json.loads(line)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64encode(bytes.fromhex(span[name])).decode()
    return json_format.Parse(json.dumps(document), ExportTraceServiceRequest())


def spans_of(lines: list[bytes]) -> list[Any]:
    return [
        span
        for line in lines
        for resource in otlp_request(line).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def attributes(span: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for attribute in span.attributes:
        value = attribute.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            found[attribute.key] = [v.string_value for v in value.array_value.values]
        else:
            found[attribute.key] = getattr(value, kind)
    return found


def test_otel_spans_follow_the_gen_ai_conventions_under_the_agents_trace(
    corpus: Corpus, tmp_path: Path
) -> None:
    exported = tmp_path / "case.otlp.jsonl"
    done = freezeframe(corpus.data_dir, "export", CASSETTE, "-o", str(exported), "--format", "otel")
    assert done.returncode == 0, done.stderr
    spans = spans_of(exported.read_bytes().splitlines())
    chats = [s for s in spans if attributes(s).get("gen_ai.operation.name") == "chat"]
    assert {attributes(s)["gen_ai.provider.name"] for s in chats} == {"openai", "anthropic"}
    first, second = [s for s in chats if s.trace_id.hex() == TRACE_ID]
    assert first.parent_span_id.hex() == AGENT_SPAN
    seen = attributes(first)
    assert seen["gen_ai.request.model"] == "gpt-4o-mini"
    assert seen["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert seen["gen_ai.usage.input_tokens"] > 0
    assert json.loads(seen["gen_ai.input.messages"])[0]["role"] == "user"
    (output,) = json.loads(seen["gen_ai.output.messages"])
    assert output["finish_reason"] == "tool_call"
    assert [part["name"] for part in output["parts"]] == ["get_weather"]
    (tool,) = [s for s in spans if attributes(s).get("gen_ai.operation.name") == "execute_tool"]
    assert tool.name == "execute_tool get_weather"
    assert (tool.trace_id, tool.parent_span_id) == (first.trace_id, first.span_id)
    assert first.end_time_unix_nano <= tool.start_time_unix_nano <= tool.end_time_unix_nano
    assert tool.end_time_unix_nano <= second.start_time_unix_nano
    # A failed, cut or unfinished exchange is an error; one whose client hung up is not (on a
    # busy machine a client that read a stream's last event may leave before its end is
    # relayed, and that exchange is client_closed).
    outcomes = [(attributes(s).get("freezeframe.outcome", "complete"), s) for s in spans]
    failed = [s for outcome, s in outcomes if outcome in ("failed", "truncated", "incomplete")]
    assert failed and all(s.status.code == 2 for s in failed)
    assert all(s.status.code != 2 for outcome, s in outcomes if outcome == "client_closed")
    for secret in SECRETS:
        assert secret.encode() not in exported.read_bytes()


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP collector that keeps what it is sent."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
                body = self.rfile.read(int(self.headers["content-length"]))
                collector.received.append((self.path, self.headers["content-type"], body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)


def test_otel_spans_reach_a_collector_over_otlp_http(corpus: Corpus, tmp_path: Path) -> None:
    collector = Collector()
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
        done = freezeframe(
            corpus.data_dir, "export", CASSETTE, "--format", "otel", "--otlp-endpoint", endpoint
        )
    finally:
        collector.shutdown()
        collector.server_close()
    assert done.returncode == 0, done.stderr
    exported = tmp_path / "case.otlp.jsonl"
    assert (
        freezeframe(
            corpus.data_dir, "export", CASSETTE, "-o", str(exported), "--format", "otel"
        ).returncode
        == 0
    )
    assert [(path, kind) for path, kind, _ in collector.received] == [
        ("/v1/traces", "application/json")
    ] * len(collector.received)
    assert [body for _, _, body in collector.received] == exported.read_bytes().splitlines()


def test_a_dataset_row_per_model_call_in_each_tools_shape(corpus: Corpus, tmp_path: Path) -> None:
    rows = {}
    for shape in ("freezeframe", "langfuse", "phoenix", "openai-chat"):
        path = tmp_path / f"{shape}.jsonl"
        done = freezeframe(
            corpus.data_dir,
            "export",
            CASSETTE,
            "-o",
            str(path),
            "--format",
            "dataset",
            "--shape",
            shape,
        )
        assert done.returncode == 0, done.stderr
        rows[shape] = [json.loads(line) for line in path.read_bytes().splitlines()]
    with open_store(store_url(corpus.data_dir)) as store:
        calls = [
            s
            for s in store.exchanges(CASSETTE)
            if str(s.facts.get("api")).startswith(("openai.", "anthropic."))
            and s.status
            # the corpus's Realtime session never asks for a response: no answer, no row
            and s.websocket_messages is None
        ]
        chains = {s.seq: store.exchange(CASSETTE, s.seq).chain for s in calls}
    plain = rows["freezeframe"]
    assert len(plain) == len(calls) == 5
    turn = next(row for row in plain if row["input"]["messages"][-1]["role"] == "tool")
    assert turn["input"]["messages"][-1]["content"] == "sunny"
    assert turn["input"]["tools"][0]["function"]["name"] == "get_weather"
    asked = next(row for row in plain if row["expected"].get("tool_calls"))
    assert asked["expected"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert asked["metadata"]["context"]["run-id"] == "run-7"
    assert asked["metadata"]["chain"] == chains[asked["metadata"]["seq"]]
    assert asked["metadata"]["model_snapshot"]
    assert [set(row) for row in rows["langfuse"]] == [{"input", "expectedOutput", "metadata"}] * 5
    assert [set(row) for row in rows["phoenix"]] == [{"input", "output", "metadata"}] * 5
    chat = rows["openai-chat"]
    assert [set(row) for row in chat] == [{"messages", "tools"}] * 5
    assert all(row["messages"][-1]["role"] == "assistant" for row in chat)


def test_a_progress_bar_shows_on_a_terminal_and_never_in_a_pipe(
    corpus: Corpus, tmp_path: Path
) -> None:
    piped = freezeframe(corpus.data_dir, "export", CASSETTE, "-o", str(tmp_path / "a.jsonl"))
    assert piped.returncode == 0 and piped.stderr == ""

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "freezeframe",
                "export",
                CASSETTE,
                "-o",
                str(tmp_path / "b.jsonl"),
            ]
            + ["--data-dir", str(corpus.data_dir)],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
            cwd=REPO,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while select.select([leader], [], [], 0.5)[0]:
            try:
                piece = os.read(leader, 65536)
            except OSError:
                break
            if not piece:
                break
            shown += piece
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert done.returncode == 0
    assert b"exporting incident" in shown
