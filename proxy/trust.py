"""Certificates: the CA clients must trust, and the bundles built around it.

``SSL_CERT_FILE`` and ``REQUESTS_CA_BUNDLE`` *replace* a client's trust store, so
pointing them at freezeframe's CA alone breaks every other HTTPS call the agent makes
that bypasses the proxy. The bundle is the system's CAs plus freezeframe's. Upstream
verification works the same way: mitmproxy takes one CA file, so the system's CAs and
``--upstream-ca`` are joined into one.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import warnings
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.utils import CryptographyDeprecationWarning
from mitmproxy import certs
from mitmproxy.options import CONF_BASENAME

CLIENT_BUNDLE = "ca-bundle.pem"
UPSTREAM_BUNDLE = "upstream-trust.pem"
JAVA_TRUSTSTORE = "ca-truststore.p12"
#: PKCS#12 needs one for its integrity check; it protects nothing (the CAs are public).
JAVA_TRUSTSTORE_PASSWORD = "freezeframe"
CA_FILES = tuple(
    f"{CONF_BASENAME}{suffix}"
    for suffix in (
        "-ca.pem",
        "-ca.p12",
        "-ca-cert.pem",
        "-ca-cert.cer",
        "-ca-cert.p12",
        "-dhparam.pem",
    )
)
"""The files mitmproxy's ``CertStore.create_store`` writes (the first two hold the key)."""
_PEM_END = b"-----END CERTIFICATE-----"
_FALLBACK_SYSTEM_FILES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
)


class PlantedLink(ValueError):
    """A file freezeframe writes in its data dir is a symbolic link; the message is one line."""


def refuse_links(data_dir: Path, names: tuple[str, ...] = ()) -> None:
    """Refuse a data dir where one of the files freezeframe writes is a symbolic link.

    mitmproxy writes its CA files with a plain ``open``, which follows a link: in a data dir
    someone else prepared, starting the proxy overwrote four files outside it. The files are
    written by rename (below), which replaces a link instead of following it; this says so
    at once, in one line, instead of quietly replacing what someone planted."""
    for name in (*CA_FILES, CLIENT_BUNDLE, UPSTREAM_BUNDLE, JAVA_TRUSTSTORE, *names):
        if (data_dir / name).is_symlink():
            raise PlantedLink(
                f"{data_dir / name} is a symbolic link; freezeframe keeps its CA and trust "
                "files in the data dir as plain files only: remove it, or choose another "
                "--data-dir"
            )


def ensure_ca(data_dir: Path) -> Path:
    """Create the interception CA on first use (mitmproxy's own format and file names).

    Once its files exist they are left unread: loading the CA checks its RSA key, a few
    tens of milliseconds at every start, and the proxy's TLS addon loads it anyway. A new CA
    is made in a private directory of its own, and each file renamed into the data dir."""
    refuse_links(data_dir)
    cert = data_dir / f"{CONF_BASENAME}-ca-cert.pem"
    if cert.is_file() and (data_dir / f"{CONF_BASENAME}-ca.pem").is_file():
        return cert
    data_dir.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(dir=data_dir, prefix=".ca-"))
    try:
        certs.CertStore.create_store(made, CONF_BASENAME, 2048)
        for name in CA_FILES:
            os.replace(made / name, data_dir / name)
    finally:
        shutil.rmtree(made, ignore_errors=True)
    return cert


def system_ca_file() -> Path:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, *_FALLBACK_SYSTEM_FILES):
        if candidate and os.path.isfile(candidate):
            return Path(candidate)
    import certifi  # mitmproxy's own fallback when a system has no CA file

    return Path(certifi.where())


def write_bundle(dest: Path, extra: list[Path]) -> Path:
    """System CAs plus ``extra``, replaced atomically so a reader never sees half a file,
    through a temporary file of its own, so two writers at once never share one."""
    parts = [system_ca_file().read_bytes()]
    parts += [path.read_bytes() for path in extra]
    with tempfile.NamedTemporaryFile(
        dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp", delete=False
    ) as handle:
        handle.write(b"\n".join(part.rstrip(b"\n") + b"\n" for part in parts))
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, dest)
    return dest


def client_bundle(data_dir: Path) -> Path:
    return write_bundle(data_dir / CLIENT_BUNDLE, [ensure_ca(data_dir)])


def java_truststore(ca: Path, bundle: Path) -> Path:
    """The client ``bundle`` as a Java trust store (PKCS#12 with Java's trusted-certificate
    attribute) beside ``ca``: the JVM reads neither ``SSL_CERT_FILE`` nor PEM files. Building
    it takes a tenth of a second, so it is written again only when the system's CAs or
    freezeframe's CA are newer than it."""
    dest = ca.parent / JAVA_TRUSTSTORE
    refuse_links(ca.parent)
    sources = (system_ca_file(), ca)
    if dest.exists() and dest.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return dest
    certificates: list[pkcs12.PKCS12Certificate] = []
    for block in bundle.read_bytes().split(_PEM_END):
        if b"-----BEGIN CERTIFICATE-----" not in block:
            continue
        try:
            with warnings.catch_warnings():  # old system CAs with a serial RFC 5280 forbids
                warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                certificate = x509.load_pem_x509_certificate(block + _PEM_END)
        except ValueError:
            continue  # a certificate the system ships that cryptography cannot read
        name = f"ca-{len(certificates)}".encode()
        certificates.append(pkcs12.PKCS12Certificate(certificate, name))
    data = pkcs12.serialize_java_truststore(
        certificates, serialization.BestAvailableEncryption(JAVA_TRUSTSTORE_PASSWORD.encode())
    )
    with tempfile.NamedTemporaryFile(
        dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp", delete=False
    ) as handle:  # a name of its own (O_EXCL): never a file someone linked in advance
        handle.write(data)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, dest)
    return dest


def upstream_bundle(data_dir: Path, upstream_ca: Path | None) -> Path:
    return write_bundle(data_dir / UPSTREAM_BUNDLE, [upstream_ca] if upstream_ca else [])


def upstream_verify(data_dir: Path, upstream_ca: str | None) -> ssl.SSLContext | bool:
    """How a command that sends upstream itself (``resend``) checks the server: the
    system's CAs, plus ``--upstream-ca`` when given, in the bundle the proxy writes."""
    if not upstream_ca:
        return True
    from freezeframe.proxy.settings import check_certificates

    ca = Path(upstream_ca).expanduser()
    check_certificates(ca, "upstream CA")
    return ssl.create_default_context(cafile=str(upstream_bundle(data_dir, ca)))
