"""Ed25519 keys and signatures for bundles, through the ``cryptography`` library.

A bundle's manifest is signed as the exact bytes stored in the bundle, so anyone holding the
public key checks it offline; nothing here implements a primitive. Keys are PEM files
(PKCS#8 for the private key, SubjectPublicKeyInfo for the public one), which openssl and
other tools read as they are.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from freezeframe.exchange_formats.errors import FormatError


def keygen(name: Path) -> tuple[Path, Path]:
    """Write a new key pair ``NAME.key`` (mode 0600) and ``NAME.pub``; refuses to overwrite."""
    private_path, public_path = Path(f"{name}.key"), Path(f"{name}.pub")
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists; choose another name or remove it first")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(private)
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path


def load_private(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except ValueError:
        raise FormatError(path, "key", "not a PEM private key without a password") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise FormatError(path, "key", "not an Ed25519 key (make one with freezeframe keygen)")
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except ValueError:
        raise FormatError(path, "key", "not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise FormatError(path, "key", "not an Ed25519 public key")
    return key


def raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey) -> str:
    """A short name for a public key, to print and compare by eye."""
    return "ed25519:" + hashlib.sha256(raw(key)).hexdigest()[:16]


def signature_document(key: Ed25519PrivateKey, message: bytes) -> dict[str, str]:
    """The signature of ``message`` with the public key that checks it."""
    return {
        "algorithm": "ed25519",
        "public_key": base64.b64encode(raw(key.public_key())).decode("ascii"),
        "signature": base64.b64encode(key.sign(message)).decode("ascii"),
    }


def signer(document: object) -> Ed25519PublicKey:
    """The public key a signature document names; ValueError when it names none."""
    if not isinstance(document, dict) or document.get("algorithm") != "ed25519":
        raise ValueError("not an ed25519 signature")
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(document["public_key"]))
    except (KeyError, TypeError, ValueError):
        raise ValueError("its public key is not an Ed25519 key") from None


def check(document: dict[str, str], key: Ed25519PublicKey, message: bytes) -> bool:
    """Whether ``document`` is ``key``'s signature of ``message``."""
    try:
        key.verify(base64.b64decode(document.get("signature", "")), message)
    except (InvalidSignature, ValueError):
        return False
    return True
