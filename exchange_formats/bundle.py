"""The case bundle (``.ffcase``): one file that carries a whole cassette and proves itself.

A bundle is a zip archive, read from its central directory so that any part can be checked
without unpacking the rest::

    manifest.json     format version, cassette, creation time, freezeframe version, every
                      exchange's seq, line digest and chain value in order, the chain head,
                      the Merkle root over the line digests, and the rules file's digest
    manifest.sig      with --sign: the Ed25519 signature of manifest.json's exact bytes
    exchanges.jsonl   the jsonl export's lines, bodies named by digest instead of inline
    bodies/DIGEST     each distinct request or response body once, zstd-compressed
    rules.toml        the key rules the cassette was recorded under, when there were any

Bodies are written and read as streams, part by part, so a body larger than memory passes
through. ``verify_bundle`` checks everything offline: each body against its digest, each
line against the manifest, the Merkle root, and the signature against a trusted key; the
first thing that does not match is named, by exchange where there is one.
"""

from __future__ import annotations

import json
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any

import blake3
import zstandard
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from freezeframe.exchange_formats import signing
from freezeframe.exchange_formats.errors import FormatError
from freezeframe.exchange_formats.jsonl import (
    Progress,
    dumps,
    header,
    notes_document,
    read_line,
    read_notes,
)
from freezeframe.exchange_formats.merkle import merkle_root
from freezeframe.exchange_formats.portable import (
    FORMAT_VERSION,
    MAX_INTEGER,
    DocumentError,
    bytes_document,
    exchange_document,
    origin_document,
    read_origin,
)
from freezeframe.storage import (
    BlobRef,
    ForkOrigin,
    Imported,
    Note,
    ReadStore,
    StoreError,
    boundedjson,
)

FORMAT = "freezeframe.bundle"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
EXCHANGES = "exchanges.jsonl"
RULES = "rules.toml"
_PIECE = 1024 * 1024
MAX_MANIFEST = 64 * 1024 * 1024
"""The largest manifest read (some 400,000 exchanges); its member's size is checked before."""
MAX_SMALL_PART = 16 * 1024 * 1024
"""The largest signature or rules file read."""
MAX_LINE = 128 * 1024 * 1024
"""The longest exchange line read: a bundle's lines name their bodies, so only a canonical
form (portable.MAX_INLINE, escaped) and the headers make one long."""
MAX_WINDOW = 1 << 25
"""The largest zstd window a body may ask its decompressor for (32 MiB): the exporter packs
at level 6, whose window is 2 MiB at most, and a frame asking for more is refused, not
allocated."""


@dataclass(frozen=True)
class BundleReport:
    """What a bundle holds and what was checked of it."""

    cassette: str
    exchanges: int
    bodies: int
    chain_head: str | None
    merkle_root: str
    signed_by: str | None
    """The fingerprint of the key that signed the manifest; None when unsigned."""
    trusted: bool
    """Whether the signature was checked against a key the caller trusts."""


def export_bundle(
    store: ReadStore,
    cassette: str,
    out: IO[bytes],
    key: Ed25519PrivateKey | None,
    rules: Path | None,
    progress: Progress,
) -> BundleReport:
    """Write the cassette as a bundle to ``out`` (seekable), signed with ``key`` if given.

    Refuses a cassette whose chain does not verify: a bundle vouches for what it carries."""
    checked = store.verify(cassette)
    if not checked.ok:
        raise StoreError(
            f"cassette {cassette!r} does not verify ({checked.detail}); "
            "a bundle would vouch for a broken chain"
        )
    entries: list[dict[str, Any]] = []
    stored: set[str] = set()
    with (
        tempfile.TemporaryFile() as lines,
        zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as archive,
    ):

        def body(data: bytes, ref: BlobRef | None) -> dict[str, Any]:
            if ref is None and not data:
                return bytes_document(data)
            if ref is None:
                ref = BlobRef(blake3.blake3(data).hexdigest(), len(data))
                pieces: Any = (data,)
            else:
                pieces = store.read_blob(ref)
            if ref.digest not in stored:
                _write_body(archive, ref.digest, pieces)
                stored.add(ref.digest)
            return {"blake3": ref.digest, "size": ref.size}

        origin = store.fork_origin(cassette)
        notes = store.notes(cassette)
        lines.write(dumps(header(cassette, origin, notes)).encode("utf-8") + b"\n")
        for summary in store.exchanges(cassette):
            exchange = store.exchange(cassette, summary.seq)
            line = dumps(exchange_document(exchange, body)).encode("utf-8")
            lines.write(line + b"\n")
            entries.append(
                {
                    "seq": exchange.seq,
                    "blake3": blake3.blake3(line).hexdigest(),
                    "chain": exchange.chain,
                }
            )
            progress(1)
        lines.seek(0)
        with archive.open(EXCHANGES, "w", force_zip64=True) as target:
            while piece := lines.read(_PIECE):
                target.write(piece)
        rules_digest = None
        if rules is not None:
            text = rules.read_bytes()
            archive.writestr(RULES, text)
            rules_digest = blake3.blake3(text).hexdigest()
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "cassette": cassette,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "freezeframe_version": version("freezeframe"),
            "exchanges": entries,
            "chain_head": checked.head,
            "merkle_root": merkle_root([entry["blake3"] for entry in entries]),
            "bodies": len(stored),
            "rules": None if rules_digest is None else {"name": RULES, "blake3": rules_digest},
            "origin": None if origin is None else origin_document(origin),
            # Case notes: in the signed manifest, so that a signature covers them too.
            "notes": notes_document(notes),
        }
        signed_text = json.dumps(manifest, sort_keys=True, indent=1).encode("utf-8") + b"\n"
        archive.writestr(MANIFEST, signed_text)
        signed_by = None
        if key is not None:
            archive.writestr(SIGNATURE, dumps(signing.signature_document(key, signed_text)))
            signed_by = signing.fingerprint(key.public_key())
    root = merkle_root([entry["blake3"] for entry in entries])
    return BundleReport(cassette, len(entries), len(stored), checked.head, root, signed_by, False)


def _write_body(archive: zipfile.ZipFile, digest: str, pieces: Any) -> None:
    with archive.open(f"bodies/{digest}", "w", force_zip64=True) as target:
        with zstandard.ZstdCompressor(level=6).stream_writer(target, closefd=False) as packed:
            for piece in pieces:
                packed.write(piece)


def _entry(found: object) -> bool:
    return (
        isinstance(found, dict)
        and isinstance(found.get("blake3"), str)
        and isinstance(found.get("seq"), int)
    )


class Bundle:
    """An open bundle: its manifest read and checked for shape, its parts readable."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise FormatError(
                path, "archive", "not a bundle, or cut off (no zip central directory)"
            ) from None
        try:
            self.manifest_bytes = self._read(MANIFEST, MAX_MANIFEST)
        except KeyError:
            raise FormatError(path, MANIFEST, "missing") from None
        except (zipfile.BadZipFile, OSError) as exc:
            raise FormatError(path, MANIFEST, f"unreadable: {exc}") from None
        self.manifest = self._manifest()

    def close(self) -> None:
        self._archive.close()

    def _read(self, name: str, cap: int) -> bytes:
        """A small member whole, refused before reading when the archive says it is larger
        than ``cap``; zipfile stops reading a member at the size the archive gives it."""
        size = self._archive.getinfo(name).file_size
        if size > cap:
            raise FormatError(self.path, name, f"{size:,} bytes, more than the {cap:,} read")
        return self._archive.read(name)

    def _manifest(self) -> dict[str, Any]:
        try:
            found = boundedjson.loads(self.manifest_bytes)
        except ValueError:
            raise FormatError(self.path, MANIFEST, "not JSON") from None
        if not isinstance(found, dict) or found.get("format") != FORMAT:
            raise FormatError(self.path, MANIFEST, f"not a {FORMAT} manifest")
        format_version = found.get("format_version")
        if not isinstance(format_version, int) or format_version > FORMAT_VERSION:
            raise FormatError(
                self.path,
                MANIFEST,
                f"format version {format_version} is newer than this freezeframe reads "
                f"({FORMAT_VERSION}): upgrade freezeframe",
            )
        entries = found.get("exchanges")
        if not isinstance(entries, list) or not all(
            isinstance(e, dict)
            and isinstance(e.get("blake3"), str)
            and isinstance(e.get("seq"), int)
            for e in entries
        ):
            raise FormatError(self.path, f"{MANIFEST}: $.exchanges", "expected [{seq, blake3}]")
        for index, entry in enumerate(entries):
            if not 0 <= entry["seq"] <= MAX_INTEGER:
                raise FormatError(
                    self.path,
                    f"{MANIFEST}: $.exchanges[{index}].seq",
                    f"{entry['seq']} is out of range (0 to 2^63-1)",
                )
        for name in ("cassette", "merkle_root"):
            if not isinstance(found.get(name), str):
                raise FormatError(self.path, f"{MANIFEST}: $.{name}", "expected a string")
        return found

    @property
    def entries(self) -> list[dict[str, Any]]:
        return list(self.manifest["exchanges"])

    def check_root(self) -> None:
        if merkle_root([entry["blake3"] for entry in self.entries]) != self.manifest["merkle_root"]:
            raise FormatError(
                self.path, MANIFEST, "its Merkle root does not match its exchange digests"
            )

    def check_rules(self) -> None:
        """The rules file, when the manifest names one, is the one it names."""
        named = self.manifest.get("rules")
        if named is None:
            return
        if not isinstance(named, dict) or not isinstance(named.get("blake3"), str):
            raise FormatError(self.path, f"{MANIFEST}: $.rules", "expected {name, blake3}")
        try:
            text = self._read(RULES, MAX_SMALL_PART)
        except KeyError:
            raise FormatError(self.path, RULES, "named in the manifest, missing") from None
        if blake3.blake3(text).hexdigest() != named["blake3"]:
            raise FormatError(self.path, RULES, "does not match the manifest")

    def signature(self) -> dict[str, str] | None:
        try:
            found = boundedjson.loads(self._read(SIGNATURE, MAX_SMALL_PART))
        except KeyError:
            return None
        except (ValueError, zipfile.BadZipFile):
            raise FormatError(self.path, SIGNATURE, "not a signature document") from None
        if not isinstance(found, dict):
            raise FormatError(self.path, SIGNATURE, "not a signature document")
        return found

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """The exchange lines, numbered as in the file (the header is line 1), each checked
        against the manifest; FormatError at the first that does not match."""
        entries = self.entries
        try:
            with self._archive.open(EXCHANGES) as source:
                self._line(source, 1)
                count = 0
                number = 1
                while line := self._line(source, number := number + 1):
                    if count >= len(entries):
                        raise FormatError(
                            self.path, f"{EXCHANGES}: line {number}", "not in the manifest"
                        )
                    entry = entries[count]
                    if blake3.blake3(line.rstrip(b"\n")).hexdigest() != entry["blake3"]:
                        raise FormatError(
                            self.path,
                            f"exchange {entry['seq']}",
                            "does not match the manifest (it was changed after export)",
                        )
                    count += 1
                    yield number, line
        except KeyError:
            raise FormatError(self.path, EXCHANGES, "missing") from None
        except (zipfile.BadZipFile, OSError) as exc:
            raise FormatError(self.path, EXCHANGES, f"unreadable: {exc}") from None
        if count != len(entries):
            missing = entries[count]["seq"]
            raise FormatError(self.path, f"exchange {missing}", "listed in the manifest, missing")

    def _line(self, source: IO[bytes], number: int) -> bytes:
        line = source.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise FormatError(
                self.path, f"{EXCHANGES}: line {number}", f"longer than {MAX_LINE:,} bytes"
            )
        return line

    def body(self, ref: BlobRef) -> Iterator[bytes]:
        """A body's bytes, decompressed piece by piece and never past the size its exchange
        claims; FormatError if it is missing, damaged or unpacks to more (its digest is
        checked by whoever reads it)."""
        name = f"bodies/{ref.digest}"
        try:
            with self._archive.open(name) as packed:
                unpacker = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
                reader = unpacker.stream_reader(packed)
                left = ref.size
                while piece := reader.read(min(_PIECE, left + 1)):
                    if len(piece) > left:
                        raise FormatError(
                            self.path,
                            name,
                            f"damaged: unpacks to more than the {ref.size:,} bytes "
                            "its exchange claims",
                        )
                    left -= len(piece)
                    yield piece
        except KeyError:
            raise FormatError(self.path, name, "missing") from None
        except (zipfile.BadZipFile, zstandard.ZstdError, OSError) as exc:
            raise FormatError(self.path, name, f"damaged: {exc}") from None


def verify_bundle(path: Path, trust: Path | None) -> BundleReport:
    """Check a bundle offline; FormatError names the first thing that does not match."""
    bundle = Bundle(path)
    try:
        signed_by, trusted = _check_signature(bundle, trust)
        bundle.check_root()
        bundle.check_rules()
        checked: set[str] = set()
        count = 0
        for number, line in bundle.lines():
            seq = bundle.entries[count]["seq"]
            count += 1
            for ref, which in _body_refs(path, number, line):
                if ref.digest in checked:
                    continue
                hasher, size = blake3.blake3(), 0
                try:
                    for piece in bundle.body(ref):
                        hasher.update(piece)
                        size += len(piece)
                except FormatError as exc:
                    raise FormatError(
                        path, f"exchange {seq}", f"its {which} body ({exc.where}) is {exc.what}"
                    ) from None
                if (hasher.hexdigest(), size) != (ref.digest, ref.size):
                    raise FormatError(
                        path, f"exchange {seq}", f"its {which} body does not match its digest"
                    )
                checked.add(ref.digest)
        manifest = bundle.manifest
        return BundleReport(
            manifest["cassette"],
            count,
            len(checked),
            manifest.get("chain_head"),
            manifest["merkle_root"],
            signed_by,
            trusted,
        )
    finally:
        bundle.close()


def _check_signature(bundle: Bundle, trust: Path | None) -> tuple[str | None, bool]:
    document = bundle.signature()
    if document is None:
        if trust is not None:
            raise FormatError(bundle.path, SIGNATURE, "missing: the bundle is not signed")
        return None, False
    try:
        key = signing.signer(document)
    except ValueError as exc:
        raise FormatError(bundle.path, SIGNATURE, str(exc)) from None
    if trust is not None:
        trusted = signing.load_public(trust)
        if signing.raw(trusted) != signing.raw(key):
            raise FormatError(
                bundle.path,
                SIGNATURE,
                f"signed by {signing.fingerprint(key)}, not by the trusted key "
                f"{signing.fingerprint(trusted)} ({trust})",
            )
    if not signing.check(document, key, bundle.manifest_bytes):
        raise FormatError(
            bundle.path, SIGNATURE, "does not verify: the manifest was changed after signing"
        )
    return signing.fingerprint(key), trust is not None


def _body_refs(path: Path, number: int, line: bytes) -> Iterator[tuple[BlobRef, str]]:
    try:
        document: Any = boundedjson.loads(line)
        for which in ("request", "response"):
            part = document.get(which)
            if part is None:
                continue
            body = part["body"]
            if "text" not in body and "base64" not in body:
                yield BlobRef(str(body["blake3"]), int(body["size"])), which
    except (ValueError, KeyError, TypeError, AttributeError):
        raise FormatError(path, f"{EXCHANGES}: line {number}", "not an exchange document") from None


def read_bundle(
    path: Path, cassette: str | None
) -> tuple[str, Iterator[Imported], int, str | None, ForkOrigin | None]:
    """The cassette to import into (``cassette`` or the bundle's), its exchanges, read
    lazily and checked against the manifest as they are read, how many there are, the
    fingerprint of the key that signed it (None: unsigned), and what it was forked from. A
    signed manifest must verify against the key it names; checking that key against one the
    user trusts is verify --bundle's job."""
    bundle = Bundle(path)
    try:
        signed_by, _ = _check_signature(bundle, None)
        bundle.check_root()
        bundle.check_rules()
        origin = read_origin(bundle.manifest.get("origin"))
    except DocumentError as exc:
        bundle.close()
        raise FormatError(path, f"{MANIFEST}: {exc.where}", exc.what) from None
    except BaseException:
        bundle.close()
        raise
    name = cassette or str(bundle.manifest["cassette"])
    return name, _imported(bundle, name), len(bundle.entries), signed_by, origin


def bundle_notes(path: Path, cassette: str) -> list[Note]:
    """The case notes in a bundle's manifest, for the cassette it is imported as."""
    bundle = Bundle(path)
    try:
        return read_notes(bundle.manifest.get("notes"), cassette)
    except DocumentError as exc:
        raise FormatError(path, f"{MANIFEST}: {exc.where}", exc.what) from None
    finally:
        bundle.close()


def _imported(bundle: Bundle, cassette: str) -> Iterator[Imported]:
    try:
        for number, line in bundle.lines():
            yield read_line(bundle.path, number, line, cassette, bundle.body)
    finally:
        bundle.close()
