"""Files built to hurt ``freezeframe import``, run as a user runs it: each is refused in one
line, ``freezeframe: error: FILE: where: what``, exit 1, with nothing imported, and a bundle
bomb is refused without its body ever being unpacked past the size it claims."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import blake3
import pytest
import zstandard
from support.exchanges import plausible_exchange, plausible_response
from support.memory import peak_rss

from freezeframe.exchange_formats import export_cassette
from freezeframe.exchange_formats.merkle import merkle_root
from freezeframe.storage import Store, open_store

BODY = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}' + b" " * 32
"""The request body a bundle names: 100 bytes."""
BOMB = 2 * 1024**3
"""What the bomb's zstd member unpacks to: 2 GiB of zeros, in about 70 KB."""
PEAK_LIMIT = 200 * 1024 * 1024


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{data_dir}/freezeframe.db") as opened:
        slot = opened.reserve("c", "k")
        opened.submit(
            plausible_exchange(slot, cassette="c", request_body=BODY, response=plausible_response())
        )
        opened.flush(10)
        yield opened


@pytest.fixture
def bundle(store: Store, tmp_path: Path) -> Path:
    path = tmp_path / "c.ffcase"
    export_cassette(store, "c", path, "bundle")
    return path


def freezeframe(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def refused(data_dir: Path, path: Path, *args: str) -> str:
    """Import ``path``; assert the one-line refusal and that nothing came in; its text."""
    process = freezeframe(data_dir, "import", str(path), "--as", "hostile", *args)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"freezeframe: error: {path}: "), err
    assert "Traceback" not in err
    listed = freezeframe(data_dir, "ls")
    listing, _ = listed.communicate(timeout=60)
    assert "hostile" not in listing, "nothing imported"
    return lines[0].removeprefix(f"freezeframe: error: {path}: ")


def rebuilt(
    source: Path,
    target: Path,
    line: Callable[[dict[str, object]], dict[str, object]] = lambda d: d,
    bodies: dict[str, Callable[[zipfile.ZipFile, str], None]] | None = None,
) -> Path:
    """``source`` with its exchange line changed by ``line`` and the manifest made to
    match it again (digests, seq, Merkle root), and bodies replaced by writers."""
    with zipfile.ZipFile(source) as original:
        manifest = json.loads(original.read("manifest.json"))
        header, *lines = original.read("exchanges.jsonl").splitlines()
        documents = [line(json.loads(text)) for text in lines]
        new_lines = [
            json.dumps(d, sort_keys=True, separators=(",", ":")).encode() for d in documents
        ]
        for entry, document, text in zip(manifest["exchanges"], documents, new_lines, strict=True):
            entry["seq"] = document["seq"]
            entry["blake3"] = blake3.blake3(text).hexdigest()
        manifest["merkle_root"] = merkle_root([e["blake3"] for e in manifest["exchanges"]])
        with zipfile.ZipFile(target, "w", allowZip64=True) as out:
            out.writestr("manifest.json", json.dumps(manifest, sort_keys=True, indent=1))
            out.writestr("exchanges.jsonl", b"\n".join([header, *new_lines]) + b"\n")
            for info in original.infolist():
                if not info.filename.startswith("bodies/"):
                    continue
                digest = info.filename.removeprefix("bodies/")
                if bodies and digest in bodies:
                    bodies[digest](out, info.filename)
                else:
                    out.writestr(info.filename, original.read(info.filename))
    return target


def zstd_bomb(size: int) -> Callable[[zipfile.ZipFile, str], None]:
    def write(archive: zipfile.ZipFile, name: str) -> None:
        zeros = b"\0" * (16 * 1024 * 1024)
        with archive.open(name, "w", force_zip64=True) as target:
            with zstandard.ZstdCompressor(level=3).stream_writer(target, closefd=False) as packed:
                for _ in range(size // len(zeros)):
                    packed.write(zeros)

    return write


def test_a_bundle_bomb_is_refused_at_its_claimed_size_in_little_memory(
    bundle: Path, data_dir: Path, tmp_path: Path
) -> None:
    digest = blake3.blake3(BODY).hexdigest()
    bomb = rebuilt(bundle, tmp_path / "bomb.ffcase", bodies={digest: zstd_bomb(BOMB)})
    assert bomb.stat().st_size < 1024 * 1024
    process = freezeframe(data_dir, "import", str(bomb), "--as", "hostile")
    with peak_rss(process.pid) as rss:
        _, err = process.communicate(timeout=300)
    assert process.returncode == 1
    assert err.strip() == (
        f"freezeframe: error: {bomb}: bodies/{digest}: damaged: unpacks to more than the "
        "100 bytes its exchange claims"
    )
    assert rss[1] < PEAK_LIMIT, f"peak RSS {rss[1] / 2**20:.0f} MiB"
    print(
        f"import of a {BOMB / 2**30:.0f} GiB bomb refused at a peak RSS of {rss[1] / 2**20:.0f} MiB"
    )
    listing, _ = freezeframe(data_dir, "ls").communicate(timeout=60)
    assert "hostile" not in listing

    verify = freezeframe(data_dir, "verify", "--bundle", str(bomb))
    with peak_rss(verify.pid) as rss:
        _, err = verify.communicate(timeout=300)
    assert verify.returncode == 1 and "unpacks to more than" in err, err
    assert rss[1] < PEAK_LIMIT, f"verify's peak RSS {rss[1] / 2**20:.0f} MiB"


def test_a_body_claiming_more_than_the_hard_cap_is_refused_before_reading(
    bundle: Path, data_dir: Path, tmp_path: Path
) -> None:
    def claim(document: dict[str, object]) -> dict[str, object]:
        request = document["request"]
        assert isinstance(request, dict)
        request["body"]["size"] = 2**40
        return document

    what = refused(data_dir, rebuilt(bundle, tmp_path / "huge.ffcase", claim))
    assert what == (
        "line 2: $.request.body.size: 1099511627776 bytes is out of range (0 to 68,719,476,736)"
    )


def test_a_seq_past_2_63_is_refused_in_one_line(
    bundle: Path, data_dir: Path, tmp_path: Path
) -> None:
    def seq(document: dict[str, object]) -> dict[str, object]:
        return document | {"seq": 2**63}

    what = refused(data_dir, rebuilt(bundle, tmp_path / "seq.ffcase", seq))
    assert what == f"manifest.json: $.exchanges[0].seq: {2**63} is out of range (0 to 2^63-1)"


def test_an_exchange_line_nested_deep_is_refused_in_one_line(
    store: Store, data_dir: Path, tmp_path: Path
) -> None:
    nested = tmp_path / "deep.jsonl"
    lines = (tmp_path / "plain.jsonl", nested)
    export_cassette(store, "c", lines[0], "jsonl")
    header, line = lines[0].read_bytes().splitlines()[:2]
    line = line.replace(b'"metadata":{', b'"metadata":{"x":' + b"[" * 50_000 + b"]" * 50_000 + b",")
    nested.write_bytes(header + b"\n" + line + b"\n")
    assert refused(data_dir, nested) == "line 2: not JSON: nests deeper than 256 levels"


def test_a_flow_file_whose_length_prefix_is_10_12_is_refused_in_one_line(
    data_dir: Path, tmp_path: Path
) -> None:
    flows = tmp_path / "huge.flows"
    flows.write_bytes(b"999999999999:" + b"x" * 64)
    process = freezeframe(data_dir, "import", str(flows))
    with peak_rss(process.pid) as rss:
        _, err = process.communicate(timeout=120)
    assert process.returncode == 1 and "Traceback" not in err
    assert err.strip() == f"freezeframe: error: {flows}: flow 1: Invalid data format"
    assert rss[1] < PEAK_LIMIT


def tnetstring_list(depth: int) -> bytes:
    """A tnetstring list holding a list, ``depth`` deep, built from its lengths."""
    lengths = [3]  # b"0:]", the innermost
    for _ in range(depth):
        lengths.append(len(str(lengths[-1])) + 1 + lengths[-1] + 1)
    heads = b"".join(str(length).encode() + b":" for length in reversed(lengths[:-1]))
    return heads + b"0:]" + b"]" * depth


def test_a_damaged_flow_file_is_refused_in_one_line(data_dir: Path, tmp_path: Path) -> None:
    from mitmproxy.io import tnetstring
    from mitmproxy.test import tflow

    state = tflow.tflow(resp=True).get_state()
    del state["server_conn"]["sni"]  # what a damaged or hand-made flow lacks
    flows = tmp_path / "damaged.flows"
    flows.write_bytes(tnetstring.dumps(state))
    assert refused(data_dir, flows).startswith("flow 1: not a flow mitmproxy reads (KeyError")


@pytest.mark.parametrize("depth", [50_000, 200_000])
def test_tnetstrings_nested_deep_are_refused_in_one_line(
    data_dir: Path, tmp_path: Path, depth: int
) -> None:
    flows = tmp_path / "deep.flows"
    flows.write_bytes(tnetstring_list(depth))
    assert refused(data_dir, flows) == "flow 1: nested too deep to read"


@pytest.mark.parametrize("depth", [50_000, 200_000])
def test_har_nested_deep_is_refused_in_one_line(data_dir: Path, tmp_path: Path, depth: int) -> None:
    har = tmp_path / "deep.har"
    har.write_text('{"log": {"entries": ' + "[" * depth + "]" * depth + "}}")
    assert refused(data_dir, har) == "$: not JSON: nests deeper than 256 levels"


def test_a_rules_file_nested_50k_deep_is_refused_in_one_line(
    data_dir: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[[rule]]\nmatch = " + "[" * 50_000 + "]" * 50_000 + "\n")
    process = freezeframe(data_dir, "run", "--rules", str(rules))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1 and "Traceback" not in err, err
    assert err.strip() == (
        f"freezeframe: error: {rules}:2: invalid TOML: arrays or inline tables nested too "
        "deep to read"
    )


@pytest.mark.parametrize(
    ("field", "what"),
    [
        ('"time": 1' + "0" * 400, "OverflowError"),
        (
            '"request": {"method": "GET", "url": "https://a.example/", "headers": '
            '[{"name": "x-id", "value": "\\ud800"}]}',
            "UnicodeEncodeError",
        ),
    ],
)
def test_a_har_entry_with_a_field_out_of_range_is_refused_in_one_line(
    data_dir: Path, tmp_path: Path, field: str, what: str
) -> None:
    entry = (
        '{"startedDateTime": "2026-11-26T17:00:00.000Z", "time": 1, '
        '"request": {"method": "GET", "url": "https://a.example/", "headers": []}, '
        '"response": {"status": 200, "headers": [], "content": {"size": 0}}, '
        '"timings": {"send": 1, "wait": 1, "receive": 1}, ' + field + "}"
    )
    har = tmp_path / "odd.har"
    har.write_text('{"log": {"version": "1.2", "entries": [' + entry + "]}}")
    assert refused(data_dir, har).startswith(
        f"$.log.entries[0]: not an entry freezeframe reads ({what}:"
    )
