"""Fuzz at scale: a million hostile inputs through keying, rules, multipart, SSE and decoding.

    .venv/bin/python tests/benchmarks/bench_fuzz.py                        # 1,000,000 inputs
    .venv/bin/python tests/benchmarks/bench_fuzz.py --inputs 20000         # a quick look
    .venv/bin/python tests/benchmarks/bench_fuzz.py --workers 2            # both cores
    .venv/bin/python tests/benchmarks/bench_fuzz.py --batch 417            # one batch again

A seeded generator (not hypothesis: it is about fifty times faster per input, and a million
inputs is the point) builds inputs in batches of 1,000, each batch from its own seed, so a
crash found in batch N is found again by ``--batch N``. The inputs are what the issue names:
JSON nested up to 100,000 levels, huge numbers and exponents, invalid UTF-8 and lone
surrogates, duplicate keys, JSON that claims another content type and other bodies that claim
JSON, multipart bodies with hostile boundaries and part heads, compressed bodies that expand a
thousandfold, SSE answers, and rules files with pathological regular expressions. Each input
goes to the public function that meets it in the proxy:

* ``canonicalize`` (and ``facts_of``) must return for every request, whatever its body;
* ``parse_rules`` returns a rule set or raises ``RulesError``, and a rule set it returns keys
  a request in bounded time (its patterns run on RE2);
* ``read_multipart`` returns or raises ``NotMultipart``; ``answer_facts`` always returns;
* ``storage.encodings.decode`` never raises and never returns more than its limit;
* ``open_import`` reads hostile bundles (a zstd body past its claimed size, a seq past 2^63,
  lines and manifests nested 100,000 deep, fields of every wrong kind), HAR files and
  mitmproxy flow files (tnetstrings nested 200,000 deep, a length prefix of 10^12), each body
  to its end: it imports or raises ``FormatError``, never anything else.

A crash is any other exception, or a decode past its limit. The slowest input is reported,
and any input over ``--slow`` seconds is listed. Runs niced by default (``nice -n 10``),
since the machine is shared. A script, not a test: it exits 1 on a crash.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import sys
import tempfile
import time
import traceback
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import brotli
import zstandard
from blake3 import blake3

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from freezeframe.canonicalize import (  # noqa: E402
    KeyConfig,
    RequestView,
    ResponseView,
    RulesError,
    RuleSet,
    answer_facts,
    canonicalize,
    facts_of,
    parse_rules,
)
from freezeframe.canonicalize.model import BodyDigest, FormPart  # noqa: E402
from freezeframe.canonicalize.multipart import NotMultipart, read_multipart  # noqa: E402
from freezeframe.exchange_formats import FormatError, Keeper, open_import  # noqa: E402
from freezeframe.exchange_formats.merkle import merkle_root  # noqa: E402
from freezeframe.exchange_formats.portable import bytes_document  # noqa: E402
from freezeframe.storage.encodings import HELD_DECODED, decode  # noqa: E402
from freezeframe.storage.redaction import KEY_BYTES, Redactor  # noqa: E402

BATCH = 1000
PATHS = (
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/embeddings",
    "/v1/completions",
    "/mcp",
    "/api/v2/things",
    "/",
)
JSON_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "application/vnd.api+json",
    "APPLICATION/JSON",
    "application/json, text/plain",
)
OTHER_TYPES = (
    "",
    "text/plain",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "text/event-stream",
    "image/png",
    "application/json-seq",
    ";;;=",
)
KEYS = (
    "model",
    "messages",
    "content",
    "role",
    "user",
    "metadata",
    "stream",
    "tools",
    "id",
    "jsonrpc",
    "method",
    "params",
    "_meta",
    "timestamp",
    "a",
    "",
    "\\ud800",
    "\\u0000",
    "é",
    "$",
    "[*]",
)
NUMBERS = (
    "0",
    "-0",
    "1.0",
    "10E-1",
    "0.1000000000000000001",
    "1e999999999",
    "-1E-999999999",
    "1e+308",
    "2e308",
    "4.9e-325",
    "123456789012345678901234567890e123456789",
    "9" * 4400,
    "1." + "0" * 5000 + "1",
    "-" + "7" * 20000 + "e-20000",
    "1e" + "9" * 400,
    "NaN",
    "Infinity",
    "-Infinity",
    "01",
    "1.",
    ".5",
    "1e",
    "--1",
    "0x10",
)
STRINGS = (
    "",
    "hello",
    "\\ud800",
    "\\udfff\\ud800",
    "\\u0000",
    "\\\\",
    '\\"',
    "a" * 3000 + "!",
    "2026-11-26T17:00:00Z",
    "é漢字😀",
    "\\uD83D\\uDE00",
    "x\\ny\\tz",
    "\\q",
    "\\u12",
    "<script>alert(1)</script>",
    "\x1b[31m",
)
BAD_BYTES = (
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\x00",
    b"\xf4\x90\x80\x80",
    b"\xef\xbb\xbf",
)
BOUNDARIES = (
    "x",
    "",
    '""',
    '"quoted; boundary=inner"',
    "a" * 70,
    "b" * 5000,
    "--",
    "-",
    "\ud800",
    "é",
    "(.*)+",
    "\\",
    " spaced ",
    "x\r\n",
    "==",
)
PATTERNS = (
    "(a+)+$",
    "(a|aa)*c",
    "(x+x+)+y",
    "^(([a-z])+.)+[A-Z]([a-z])+$",
    "(a*)*b",
    "(?=a)a",
    "(?<!a)b",
    "(a)\\1",
    "a{1000}{1000}",
    "(?:a{1000}){1000}",
    "[",
    "(",
    "\\",
    "(?P<n>a+)+",
    "(?P<n>a)(?P<n>b)",
    "\\d{4}-\\d{2}",
    ".*.*.*.*.*.*=",
    "\\p{Greek}+",
    "\\C",
    "",
    "a{,5}",
    "(((((((((((((((((((((a)))))))))))))))))))))*",
)
REPLACEMENTS = ("x", "\\1", "\\g<n>", "\\g<99>", "$1", "\\", "<ts>", "\\g<0>", "\\0")
JSON_PATHS = (
    "$.messages[*].content",
    "$..*",
    "$.a",
    "$['x']",
    "$[",
    "$..",
    "$.metadata.tenant",
    "$.tools[*].function.description",
    "messages",
    "$.a[999999999999999999999]",
    "$.a[-1]",
    "$.*.*.*",
    "$..a..b",
)
GLOBS = ("*", "api.*", "[", "**", "*" * 500, "localhost", "/v1/*", "[!a-", "?")
SSE_FIELDS = (b"data", b"event", b"id", b"retry", b"", b"dat", b"DATA")
SSE_DATA = (
    b'{"id":"x","model":"m","choices":[{"delta":{"content":"hi"},"finish_reason":null}]}',
    b'{"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":1e999,"total_tokens":-1}}',
    b'{"type":"message_start","message":{"id":"m","usage":{"input_tokens":"9"}}}',
    b'{"type":"message_delta","usage":{"output_tokens":{"nested":[1,2]}}}',
    b'{"type":"error","error":{"type":"overloaded_error"}}',
    b"[DONE]",
    b"{",
    b'{"usage":' * 300 + b"1" + b"}" * 300,
    b"\xff\xfe",
    b'{"a":"\\ud800"}',
)
CODINGS = ("gzip", "deflate", "br", "zstd", "x-gzip", "compress", "identity")
BOMB_SIZES = (64 * 1024, 1024 * 1024, 4 * 1024 * 1024, 24 * 1024 * 1024)


@dataclass
class Result:
    """What one batch found: inputs by kind, crashes, and the slowest input."""

    batch: int
    inputs: Counter[str] = field(default_factory=Counter)
    crashes: list[dict[str, str]] = field(default_factory=list)
    slow: list[dict[str, object]] = field(default_factory=list)
    slowest: float = 0.0
    slowest_kind: str = ""


def json_text(rng: random.Random, depth: int) -> str:
    """A JSON-ish document written by hand, so keys repeat and numbers keep their spelling."""
    roll = rng.random()
    if depth <= 0 or roll < 0.35:
        if rng.random() < 0.5:
            return rng.choice(NUMBERS) if rng.random() < 0.3 else str(rng.randint(-99, 99))
        if rng.random() < 0.15:
            return rng.choice(("true", "false", "null", "tru", "nul"))
        return f'"{rng.choice(STRINGS)}"'
    if roll < 0.65:
        items = (json_text(rng, depth - 1) for _ in range(rng.randint(0, 4)))
        return "[" + ",".join(items) + "]"
    pairs = []
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(KEYS)
        pairs.append(f'"{key}":{json_text(rng, depth - 1)}')
        if rng.random() < 0.15:
            pairs.append(f'"{key}":{json_text(rng, depth - 1)}')
    return "{" + ",".join(pairs) + "}"


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A few bytes broken: invalid UTF-8 dropped in, a cut, a flipped byte."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(data))
        step = rng.random()
        if step < 0.4:
            data = data[:at] + rng.choice(BAD_BYTES) + data[at:]
        elif step < 0.6:
            data = data[:at]
        elif data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << rng.randint(0, 7))]) + data[at + 1 :]
    return data


def deep(rng: random.Random) -> bytes:
    """Nesting far past the reader's limit, up to 100,000 levels, balanced or not."""
    levels = rng.choice((255, 256, 257, 1000, 10_000, 100_000))
    shape = rng.random()
    if shape < 0.4:
        text = "[" * levels + "]" * levels
    elif shape < 0.8:
        text = '{"a":' * levels + "1" + "}" * levels
    else:
        text = '[{"messages":' * (levels // 2) + "[" * rng.randint(0, 5)
    return text.encode()


def request(rng: random.Random, body: bytes, content_type: str) -> RequestView:
    headers = [("content-type", content_type)] if content_type else []
    if rng.random() < 0.3:
        headers.append((rng.choice(("x-tenant-id", "Anthropic-Version", "\x00", "é")), "v\r\n"))
    query = tuple((rng.choice(("ts", "nonce", "page", "")), rng.choice(STRINGS)) for _ in range(2))
    return RequestView(
        method=rng.choice(("POST", "post", "GET", "PUT", "")),
        scheme=rng.choice(("https", "http", "HTTPS")),
        host=rng.choice(("api.openai.com", "api.anthropic.com", "LOCALHOST", "", "é.example")),
        port=rng.choice((443, 80, 0, 65535)),
        path=rng.choice(PATHS) + rng.choice(("", "/%ff", "/../..", "?x")),
        query=query,
        headers=tuple(headers),
        body=body,
        content_type=content_type,
    )


def case_json(rng: random.Random, config: KeyConfig) -> None:
    text = json_text(rng, rng.randint(0, 8))
    body = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.3:
        body = mutate(rng, body)
    claimed = rng.choice(JSON_TYPES) if rng.random() < 0.75 else rng.choice(OTHER_TYPES)
    view = request(rng, body, claimed)
    canonicalize(view, config)
    if rng.random() < 0.2:
        facts_of(view, None)


def case_deep(rng: random.Random, config: KeyConfig) -> None:
    canonicalize(request(rng, deep(rng), rng.choice(JSON_TYPES)), config)


def case_claims(rng: random.Random, config: KeyConfig) -> None:
    """A body that is not what its type says: JSON sent as a form, bytes sent as JSON."""
    pick = rng.random()
    if pick < 0.4:
        body = json_text(rng, 4).encode("utf-8", "surrogatepass")
        claimed = rng.choice(OTHER_TYPES)
    elif pick < 0.7:
        body = rng.randbytes(rng.randint(0, 200))
        claimed = rng.choice(JSON_TYPES)
    else:
        pairs = (f"{rng.choice(KEYS)}={rng.choice(STRINGS)}" for _ in range(rng.randint(0, 6)))
        body = mutate(rng, "&".join(pairs).encode("utf-8", "surrogatepass") + b"&%zz&=&&%FF")
        claimed = rng.choice(("application/x-www-form-urlencoded", *JSON_TYPES))
    canonicalize(request(rng, body, claimed), config)


def multipart(rng: random.Random) -> tuple[bytes, str]:
    boundary = rng.choice(BOUNDARIES)
    raw = boundary.encode("utf-8", "surrogatepass")
    parts = []
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(('"f"', '"é"', '"a\\"b"', "unquoted", '""', '"\\ud800"', '"' + "n" * 300))
        disposition = f"form-data; name={name}"
        if rng.random() < 0.4:
            disposition += rng.choice(
                (
                    '; filename="a.txt"',
                    "; filename*=UTF-8''%FF%FE%00",
                    "; filename*=x",
                    '; filename="',
                )
            )
        head = f"Content-Disposition: {disposition}".encode("utf-8", "surrogatepass")
        if rng.random() < 0.3:
            head += b"\r\nContent-Type: " + rng.choice((b"application/json", b"", b"\xff"))
        content = rng.choice((b"value", rng.randbytes(rng.randint(0, 64)), b"--" + raw, b"\r\n--"))
        joint = b"\r\n\r\n" if rng.random() < 0.9 else b"\r\n"
        parts.append(b"--" + raw + b"\r\n" + head + joint + content + b"\r\n")
    body = b"".join(parts) + (b"--" + raw + b"--\r\n" if rng.random() < 0.8 else b"")
    if rng.random() < 0.2:
        body = rng.choice((b"preamble\r\n", b"")) + mutate(rng, body)
    quoted = f'"{boundary}"' if rng.random() < 0.3 else boundary
    content_type = rng.choice(
        (
            f"multipart/form-data; boundary={quoted}",
            f"Multipart/Form-Data;BOUNDARY={quoted};boundary=other",
            "multipart/form-data",
            f"multipart/form-data; boundary*=UTF-8''{quoted}",
        )
    )
    return body, content_type


def case_multipart(rng: random.Random, config: KeyConfig) -> None:
    body, content_type = multipart(rng)
    try:
        read_multipart(body, content_type)
    except NotMultipart:
        pass
    canonicalize(request(rng, body, content_type), config)
    if rng.random() < 0.3:
        parts = [
            FormPart(
                name=rng.choice(("f", "\ud800", "", "é")),
                content=rng.choice((b"v", b"\xff", BodyDigest("0" * 64, rng.randint(0, 2**40)))),
                filename=rng.choice((None, "a.bin", "\ud800")),
                content_type=rng.choice((None, "", "text/plain")),
            )
            for _ in range(rng.randint(0, 3))
        ]
        canonicalize(request(rng, b"", content_type), config, multipart_parts=parts)


def sse(rng: random.Random) -> bytes:
    lines = []
    for _ in range(rng.randint(0, 12)):
        name = rng.choice(SSE_FIELDS)
        value = (
            rng.choice(SSE_DATA) if name.lower() == b"data" else rng.randbytes(rng.randint(0, 8))
        )
        lines.append(name + rng.choice((b": ", b":", b"")) + value)
        lines.append(rng.choice((b"", b"\r", b":comment", b"")))
    body = rng.choice((b"\n", b"\r\n", b"\r")).join(lines)
    return mutate(rng, body) if rng.random() < 0.2 else body


def case_sse(rng: random.Random, config: KeyConfig) -> None:
    body = sse(rng)
    content_type = rng.choice(
        ("text/event-stream", "text/event-stream; charset=x", "", "application/json")
    )
    answer = ResponseView(
        status=rng.choice((200, 204, 304, 100, 429, 500, 999, -1)),
        headers=(("content-type", content_type),),
        body=body if rng.random() < 0.95 else None,
        content_type=content_type,
    )
    if answer.body is not None:
        answer_facts(answer)
    facts_of(
        request(rng, json_text(rng, 3).encode("utf-8", "surrogatepass"), "application/json"), answer
    )


@cache
def bomb(coding: str, size: int) -> bytes:
    """``size`` zero bytes in ``coding``: a thousandth of that in gzip, less in br and zstd."""
    zeros = bytes(size)
    if coding in ("gzip", "x-gzip"):
        return gzip.compress(zeros, 9)
    if coding == "deflate":
        return zlib.compress(zeros, 9)
    if coding == "br":
        return brotli.compress(zeros)
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(zeros)
    return zeros[:64]


def case_compressed(rng: random.Random, config: KeyConfig) -> None:
    """A thousandfold (or more) expansion, cut, damaged or layered: decoding stays capped."""
    size = rng.choice(BOMB_SIZES)
    codings = [rng.choice(CODINGS)]
    data = bomb(codings[0], size)
    if rng.random() < 0.2 and codings[0] in ("gzip", "deflate", "br", "zstd"):
        codings.append("gzip")
        data = gzip.compress(data)
    if rng.random() < 0.3:
        data = mutate(rng, data)
    limit = (
        HELD_DECODED
        if size > HELD_DECODED and rng.random() < 0.1
        else rng.choice((1024, 65536, 262144))
    )
    decoded = decode(data, codings, limit)
    if len(decoded.data) > limit:
        raise AssertionError(f"decoded {len(decoded.data):,} bytes past the {limit:,} limit")
    canonicalize(request(rng, decoded.data if decoded.whole else data, "application/json"), config)


def rules_text(rng: random.Random) -> str:
    tables = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.2:
            mode = rng.choice(("replay", "record", "auto", "bogus"))
            tables.append(f'[[route]]\nhost = "{rng.choice(GLOBS)}"\nmode = "{mode}"')
            continue
        paths = ", ".join(json.dumps(rng.choice(JSON_PATHS)) for _ in range(rng.randint(0, 3)))
        lines = [
            "[[rule]]",
            f"host = {json.dumps(rng.choice(GLOBS))}",
            f"path = {json.dumps(rng.choice(GLOBS))}",
            f"{rng.choice(('ignore', 'keep'))} = [{paths}]",
        ]
        if rng.random() < 0.3:
            lines.append(f'key_headers = ["{rng.choice(("x-tenant-id", "", "é", "a b"))}"]')
        for _ in range(rng.randint(0, 3)):
            lines += [
                "[[rule.substitute]]",
                f"path = {json.dumps(rng.choice(JSON_PATHS))}",
                f"pattern = {json.dumps(rng.choice(PATTERNS))}",
                f"replacement = {json.dumps(rng.choice(REPLACEMENTS))}",
            ]
        tables.append("\n".join(lines))
    text = "\n\n".join(tables) + "\n"
    if rng.random() < 0.15:
        text = mutate(rng, text.encode()).decode("utf-8", "replace")
    return text


def case_rules(rng: random.Random, config: KeyConfig) -> None:
    """A rules file: refused with RulesError, or used on a request in bounded time."""
    try:
        rules = parse_rules(rules_text(rng), "fuzz.toml")
    except RulesError:
        return
    body = json.dumps({"messages": [{"content": "a" * 5000 + "!"}], "a": "aaaa" * 500}).encode()
    canonicalize(request(rng, body, "application/json"), KeyConfig(rules=rules))


def hostile_value(rng: random.Random) -> object:
    """What a hostile file puts where a field should be."""
    return rng.choice(
        (
            None,
            -1,
            2**63,
            2**64 + 1,
            10**400,
            1e308,
            "x",
            "",
            [],
            {},
            True,
            [[[[[]]]]],
            "\ud800",
            {"blake3": "0" * 64, "size": 2**40},
        )
    )


def deep_value(levels: int) -> str:
    return "[" * levels + "]" * levels


def exchange_line(rng: random.Random, request_ref: dict[str, object]) -> bytes:
    """One bundle exchange line, its fields hostile now and then."""
    document: dict[str, object] = {
        "seq": 0,
        "occurrence": 0,
        "key": "k",
        "key_scheme": 1,
        "canonical": bytes_document(b"POST /v1/chat"),
        "request": {
            "method": "POST",
            "scheme": "https",
            "host": "api.openai.com",
            "port": 443,
            "path": "/v1/chat",
            "http_version": "HTTP/1.1",
            "headers": [["content-type", "application/json"]],
            "body": request_ref,
        },
        "started_at": 1.0,
        "duration": 0.5,
        "response": None,
        "outcome": "failed",
        "error": "reset",
        "context": {},
        "stripped": None,
        "metadata": {},
        "messages": None,
        "drift": [],
        "origin": None,
        "chain": "0" * 64,
    }
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(list(document))
        document[name] = hostile_value(rng)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    if rng.random() < 0.2:
        text = text.replace(
            '"metadata":{}', '"metadata":{"x":' + deep_value(rng.choice((300, 5000, 100_000))) + "}"
        )
    data = text.encode("utf-8", "surrogatepass")
    return mutate(rng, data) if rng.random() < 0.1 else data


def hostile_bundle(rng: random.Random) -> bytes:
    """A bundle whose manifest matches its hostile line (so the line is read), with a body
    that unpacks past what it claims, or not at all."""
    real = b'{"messages": []}'
    claimed = rng.choice((len(real), 0, 1, 2**40, -5))
    digest = blake3(real).hexdigest()
    line = exchange_line(rng, {"blake3": digest, "size": claimed})
    entry: dict[str, object] = {"seq": 0, "blake3": blake3(line).hexdigest(), "chain": "0" * 64}
    if rng.random() < 0.2:
        entry["seq"] = hostile_value(rng)
    manifest = {
        "format": "freezeframe.bundle",
        "format_version": 1,
        "cassette": "fuzz",
        "exchanges": [entry],
        "chain_head": "0" * 64,
        "merkle_root": merkle_root([str(entry["blake3"])]),
        "bodies": 1,
        "rules": None,
        "origin": None,
    }
    manifest_text = json.dumps(manifest)
    if rng.random() < 0.05:
        manifest_text = deep_value(rng.choice((300, 100_000)))
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("manifest.json", manifest_text)
        archive.writestr(
            "exchanges.jsonl", b'{"cassette":"fuzz","format":"freezeframe.bundle"}\n' + line + b"\n"
        )
        body = rng.choice((real, bytes(rng.choice((4096, 4 * 1024 * 1024))), rng.randbytes(32)))
        archive.writestr(f"bodies/{digest}", zstandard.ZstdCompressor().compress(body))
    data = packed.getvalue()
    return mutate(rng, data) if rng.random() < 0.05 else data


def hostile_har(rng: random.Random) -> bytes:
    entry: dict[str, object] = {
        "startedDateTime": "2026-11-26T17:00:00.000Z",
        "time": 12,
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat?key=k",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "authorization", "value": "Bearer sk-" + "a" * 30}],
            "postData": {"mimeType": "application/json", "text": '{"a": 1}'},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [],
            "content": {"size": 2, "mimeType": "application/json", "text": "{}"},
        },
        "timings": {"send": 1, "wait": 10, "receive": 1},
    }
    for _ in range(rng.randint(0, 3)):
        parts = [part for part in (entry["request"], entry["response"]) if isinstance(part, dict)]
        target = entry if rng.random() < 0.4 or not parts else rng.choice(parts)
        if target:
            target[rng.choice(list(target))] = hostile_value(rng)
    text = json.dumps({"log": {"version": "1.2", "entries": [entry]}})
    if rng.random() < 0.2:
        levels = rng.choice((300, 5000, 50_000, 200_000))
        text = '{"log": {"entries": [' + deep_value(levels) + "]}}"
    data = text.encode("utf-8", "surrogatepass")
    return mutate(rng, data) if rng.random() < 0.2 else data


@cache
def nested_tnetstring(depth: int) -> bytes:
    """A tnetstring list holding a list, ``depth`` deep; built from its lengths, since
    wrapping it level by level copies it each time."""
    lengths = [3]  # b"0:]", the innermost
    for _ in range(depth):
        inner = lengths[-1]
        lengths.append(len(str(inner)) + 1 + inner + 1)
    heads = b"".join(str(length).encode() + b":" for length in reversed(lengths[:-1]))
    return heads + b"0:]" + b"]" * depth


@cache
def flow_file() -> bytes:
    from mitmproxy.io import tnetstring as tnet
    from mitmproxy.test import tflow

    return tnet.dumps(tflow.tflow(resp=True).get_state())


def hostile_flows(rng: random.Random) -> bytes:
    pick = rng.random()
    if pick < 0.3:
        return nested_tnetstring(rng.choice((300, 5000, 50_000, 200_000)))
    if pick < 0.5:
        return rng.choice((b"999999999999:", b"99999999999:", b"1000000000000:")) + b"x" * 32
    data = flow_file()
    return mutate(rng, data) if pick < 0.9 else data + mutate(rng, data)


def import_file(rng: random.Random, data: bytes, suffix: str) -> None:
    """Read a hostile file as ``freezeframe import`` does, each body to its end: it imports
    or raises FormatError; anything else is a crash."""
    path = scratch() / f"input{suffix}"
    path.write_bytes(data)
    try:
        opened = open_import(path, "fuzz", keeper)
        for item in opened.exchanges:
            for _, read in item.streams:
                for _ in read():
                    pass
    except FormatError:
        return


@cache
def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="freezeframe-fuzz-"))


def keeper(cassette: str) -> Keeper:
    return Keeper(cassette, Redactor(b"k" * KEY_BYTES), KeyConfig())


def case_bundle(rng: random.Random, config: KeyConfig) -> None:
    import_file(rng, hostile_bundle(rng), ".ffcase")


def case_har(rng: random.Random, config: KeyConfig) -> None:
    import_file(rng, hostile_har(rng), ".har")


def case_flows(rng: random.Random, config: KeyConfig) -> None:
    import_file(rng, hostile_flows(rng), ".flows")


CASES: dict[str, tuple[float, Callable[[random.Random, KeyConfig], None]]] = {
    "json": (0.33, case_json),
    "claims": (0.15, case_claims),
    "multipart": (0.18, case_multipart),
    "sse": (0.15, case_sse),
    "rules": (0.12, case_rules),
    "deep": (0.04, case_deep),
    "compressed": (0.02, case_compressed),
    "bundle": (0.004, case_bundle),
    "har": (0.003, case_har),
    "flows": (0.003, case_flows),
}


@cache
def configs() -> tuple[KeyConfig, ...]:
    """Key options the cases are keyed under: none, and rules that strip and rewrite."""
    rules = parse_rules(
        '[[rule]]\nignore = ["$.messages[*].name", "$..timestamp"]\nkeep = ["$.user"]\n'
        'ignore_query = ["ts"]\nkey_headers = ["x-tenant-id"]\n'
        '[[rule.substitute]]\npattern = "\\\\d{4}-\\\\d{2}-\\\\d{2}T[0-9:.]+Z?"\n'
        'replacement = "<ts>"\n'
    )
    return (
        KeyConfig(),
        KeyConfig(rules=rules),
        KeyConfig(rules=RuleSet.empty(), key_headers=frozenset({"é"})),
    )


def run_batch(batch: int, seed: int, slow_after: float, kinds: tuple[str, ...] = ()) -> Result:
    """Batch ``batch`` of the run seeded ``seed``: the same inputs whenever it runs
    (``kinds``: only these cases, as ``--kinds`` asks)."""
    rng = random.Random(f"{seed}:{batch}")
    names = list(kinds or CASES)
    weights = [CASES[name][0] for name in names]
    result = Result(batch)
    for coding in CODINGS:  # built once per process, outside the inputs' timing
        for size in BOMB_SIZES:
            bomb(coding, size)
    for index in range(BATCH):
        kind = rng.choices(names, weights)[0]
        started = time.perf_counter()
        try:
            CASES[kind][1](rng, rng.choice(configs()))
        except Exception as error:  # noqa: BLE001 - any exception here is the finding
            result.crashes.append(
                {
                    "batch": str(batch),
                    "index": str(index),
                    "kind": kind,
                    "error": f"{type(error).__name__}: {str(error)[:300]}",
                    "where": "".join(traceback.format_tb(error.__traceback__)[-3:])[-1500:],
                }
            )
        took = time.perf_counter() - started
        result.inputs[kind] += 1
        if took > result.slowest:
            result.slowest, result.slowest_kind = took, kind
        if took > slow_after:
            result.slow.append({"batch": batch, "index": index, "kind": kind, "seconds": took})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch", type=int, help="run only this batch (to reproduce a crash)")
    parser.add_argument("--slow", type=float, default=1.0, help="list inputs slower than this")
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--kinds", default="", help=f"only these cases, comma-separated: {', '.join(CASES)}"
    )
    args = parser.parse_args(argv)
    kinds = tuple(kind for kind in args.kinds.split(",") if kind)
    if unknown := set(kinds) - set(CASES):
        parser.error(f"--kinds: no case named {', '.join(sorted(unknown))}")
    os.nice(args.nice)
    batches = [args.batch] if args.batch is not None else list(range(-(-args.inputs // BATCH)))
    total: Counter[str] = Counter()
    crashes: list[dict[str, str]] = []
    slow: list[dict[str, object]] = []
    slowest, slowest_kind = 0.0, ""
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = pool.map(
            run_batch,
            batches,
            [args.seed] * len(batches),
            [args.slow] * len(batches),
            [kinds] * len(batches),
        )
        for done, result in enumerate(results, 1):
            total.update(result.inputs)
            crashes += result.crashes
            slow += result.slow
            if result.slowest > slowest:
                slowest, slowest_kind = result.slowest, result.slowest_kind
            if done % 50 == 0:
                rate = sum(total.values()) / (time.perf_counter() - started)
                print(
                    f"[fuzz] {sum(total.values()):,} inputs, {len(crashes)} crashes, {rate:,.0f}/s",
                    file=sys.stderr,
                    flush=True,
                )
    seconds = time.perf_counter() - started
    summary = {
        "inputs": sum(total.values()),
        "by_kind": dict(total),
        "crashes": len(crashes),
        "seconds": round(seconds, 1),
        "inputs_per_second": round(sum(total.values()) / seconds),
        "workers": args.workers,
        "seed": args.seed,
        "slowest_input_ms": round(slowest * 1000, 1),
        "slowest_kind": slowest_kind,
        "slow_inputs": len(slow),
        "first_crashes": crashes[:5],
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary | {"all_crashes": crashes, "slow": slow}, indent=2))
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
