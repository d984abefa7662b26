"""HAR from browsers' devtools imports: Chrome's HTTP/2 pseudo-headers and extra fields,
Firefox's bodiless entries, binary content in base64; secrets become markers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from freezeframe.canonicalize import KeyConfig
from freezeframe.exchange_formats import FormatError, Keeper, open_import
from freezeframe.storage import Outcome, open_store
from freezeframe.storage.redaction import KEY_BYTES, Redactor

TOKEN = "sk-devtools-secret-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def chrome_entry() -> dict[str, Any]:
    """An entry as Chrome's "Save all as HAR with content" writes one (HTTP/2)."""
    return {
        "_initiator": {"type": "script"},
        "_priority": "High",
        "_resourceType": "fetch",
        "cache": {},
        "connection": "443",
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "httpVersion": "http/2.0",
            "headers": [
                {"name": ":authority", "value": "api.openai.com"},
                {"name": ":method", "value": "POST"},
                {"name": ":path", "value": "/v1/chat/completions"},
                {"name": ":scheme", "value": "https"},
                {"name": "authorization", "value": f"Bearer {TOKEN}"},
                {"name": "content-type", "value": "application/json"},
            ],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": 57,
            "postData": {
                "mimeType": "application/json",
                "text": '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
            },
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "http/2.0",
            "headers": [
                {"name": "content-encoding", "value": "br"},
                {"name": "content-type", "value": "application/json"},
            ],
            "cookies": [],
            "content": {
                "size": 40,
                "mimeType": "application/json",
                "compression": 10,
                "text": '{"choices":[],"model":"gpt-4o-mini-2024"}',
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
            "_transferSize": 300,
            "_error": None,
        },
        "serverIPAddress": "104.18.6.192",
        "startedDateTime": "2026-05-01T10:00:00.123Z",
        "time": 412.5,
        "timings": {
            "blocked": 1.2,
            "dns": -1,
            "ssl": -1,
            "connect": -1,
            "send": 0.3,
            "wait": 400.1,
            "receive": 10.9,
            "_blocked_queueing": 0.8,
        },
    }


def firefox_entries() -> list[dict[str, Any]]:
    """Firefox writes no text for many bodies and base64 for binary ones."""
    image = {
        "pageref": "page_1",
        "startedDateTime": "2026-05-01T10:00:01.000+02:00",
        "request": {
            "bodySize": 0,
            "method": "GET",
            "url": "https://example.com/logo.png?v=2",
            "httpVersion": "HTTP/2",
            "headers": [{"name": "Host", "value": "example.com"}],
            "cookies": [],
            "queryString": [{"name": "v", "value": "2"}],
            "headersSize": 120,
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/2",
            "headers": [{"name": "content-type", "value": "image/png"}],
            "cookies": [],
            "content": {
                "mimeType": "image/png",
                "size": len(PNG),
                "encoding": "base64",
                "text": base64.b64encode(PNG).decode(),
            },
            "redirectURL": "",
            "headersSize": 200,
            "bodySize": len(PNG),
        },
        "cache": {},
        "timings": {
            "blocked": 0,
            "dns": 0,
            "connect": 0,
            "ssl": 0,
            "send": 0,
            "wait": 20,
            "receive": 1,
        },
        "time": 21,
    }
    script = json.loads(json.dumps(image))
    script["request"]["url"] = "https://example.com/app.js"
    script["response"]["content"] = {"mimeType": "text/javascript", "size": 0}
    return [image, script]


def har(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "devtools.har"
    creator = {"name": "WebInspector", "version": "537.36"}
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": creator, "entries": entries}}))
    return path


def keeper(cassette: str) -> Keeper:
    return Keeper(cassette, Redactor(b"k" * KEY_BYTES), KeyConfig())


def test_browser_har_imports_with_pseudo_headers_dropped_and_secrets_marked(
    tmp_path: Path,
) -> None:
    path = har(tmp_path, [chrome_entry(), *firefox_entries()])
    with open_store(f"sqlite:///{tmp_path}/data/ff.db") as store:
        opened = open_import(path, None, keeper)
        assert (opened.format, opened.cassette) == ("har", "devtools")
        imported = store.import_cassette(opened.cassette, opened.exchanges)
        assert imported.exchanges == 3
        chat, image, script = (store.exchange("devtools", seq) for seq in range(3))
        exported = json.dumps([str(e) for e in (chat, image, script)])
    assert opened.notes == [
        "3 of 3 entries have no chunk timing: they replay at once",
        "3 of 3 entries have no run context",
    ]
    assert chat.recorded.http_version == "HTTP/2" and chat.recorded.started_at == pytest.approx(
        1777629600.123
    )
    assert [name for name, _ in chat.recorded.request_headers] == [
        b"authorization",
        b"content-type",
    ]
    assert TOKEN not in exported and b"Bearer [" in chat.recorded.request_headers[0][1]
    assert chat.recorded.response is not None
    assert chat.recorded.response.body == b'{"choices":[],"model":"gpt-4o-mini-2024"}'
    assert chat.recorded.response.headers == ((b"content-type", b"application/json"),)
    assert (
        chat.recorded.facts["model"] == "gpt-4o-mini" and chat.recorded.outcome is Outcome.COMPLETE
    )
    assert image.recorded.path == "/logo.png?v=2" and image.recorded.response is not None
    assert image.recorded.response.body == PNG
    assert script.recorded.response is not None and script.recorded.response.body == b""


def test_a_har_without_a_log_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    path = tmp_path / "other.har"
    path.write_text(json.dumps({"entries": []}))
    with pytest.raises(FormatError) as refused:
        open_import(path, "x", keeper)
    assert str(refused.value) == f"{path}: $.log: missing: not a HAR file"
