"""A case leaves the machine and comes back whole: export, import, replay, verify.

One corpus is recorded through the real proxy for the whole module (model calls plain and
streamed, a tool call carrying a cookie, a binary body, a 429 cut off mid-body, an upstream
that refuses, a WebSocket session). Each portable format is exported with the real CLI,
imported under a new name, compared with the original field by field, replayed through the
proxy to the same bytes, and its chain verified; the bundle is also checked offline and
tampered with.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
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
from support.proxy import ProxyProcess, free_port
from support.upstream import Upstream
from support.ws_upstream import WsUpstream
from websockets.sync.client import connect

import cli
from storage import Outcome, open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
CASSETTE = "incident"
OPENAI_KEY = "sk-export-openai-0123456789abcdefghij"
ANTHROPIC_KEY = "sk-ant-export-0123456789abcdefghijkl"
COOKIE_SECRET = "cookie-export-secret-456"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY, COOKIE_SECRET)
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
        open_timeout=10,
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
    from proxy.trust import client_bundle

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
            for field in dataclasses.fields(original):
                if field.name in ("cassette", "chain"):
                    continue
                assert getattr(imported, field.name) == getattr(original, field.name), (
                    f"exchange {summary.seq}: {field.name}"
                )
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
    for line in lines:
        jsonschema.validate(json.loads(line), SCHEMA)
        assert line.decode() == json.dumps(
            json.loads(line), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        ), "keys are sorted, one compact document a line"


def test_no_export_holds_a_secret_the_agent_sent(corpus: Corpus, tmp_path: Path) -> None:
    everything = []
    for format_ in ("jsonl", "bundle"):
        path = tmp_path / f"case.{format_}"
        done = freezeframe(
            corpus.data_dir, "export", CASSETTE, "-o", str(path), "--format", format_
        )
        assert done.returncode == 0, done.stderr
        everything.append(path.read_bytes())
    with zipfile.ZipFile(tmp_path / "case.bundle") as bundle:
        for name in bundle.namelist():
            data = bundle.read(name)
            if name.startswith("bodies/"):
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
            everything.append(data)
    for secret in SECRETS:
        assert not any(secret.encode() in data for data in everything), secret
    assert b"Authorization" in everything[0] or b"authorization" in everything[0]


@pytest.fixture(scope="module")
def signed(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A signed bundle of the corpus and the public key that checks it."""
    where = tmp_path_factory.mktemp("signed")
    done = freezeframe(None, "keygen", "-o", str(where / "team"))
    assert done.returncode == 0, done.stderr
    bundle = where / "incident.ffcase"
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
    )
    assert done.returncode == 0, done.stderr
    return bundle, where / "team.pub"


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
