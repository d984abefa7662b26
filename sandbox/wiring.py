"""The environment a client needs to go through freezeframe, in the forms shells read.

Every HTTP stack reads its own variables: Python's ``SSL_CERT_FILE`` (httpx, the SDKs) and
``REQUESTS_CA_BUNDLE`` (requests), curl's ``CURL_CA_BUNDLE``, Node's ``NODE_EXTRA_CA_CERTS``
(which adds to its store, so the CA alone), the AWS SDKs' ``AWS_CA_BUNDLE``, gRPC's roots
file. Setting all of them is what makes "point the agent at the proxy" one step, whatever
the agent is written in. The bundle ones get the system's CAs plus freezeframe's, because
they replace a client's trust store rather than add to it.

Some runtimes ignore the proxy variables unless told: Node.js reads them only with
``NODE_USE_ENV_PROXY=1`` (``fetch`` from v24.0.0 and v22.21.0, ``http``/``https`` from
v24.5.0 and v22.21.0; earlier versions ignore it), and the JVM reads system properties,
given here through ``JAVA_TOOL_OPTIONS``, with a PKCS#12 trust store since it reads no PEM.
Deno adds ``DENO_CERT`` to its store. docs/clients.md's runtime table says which client needs
what; a client none of this reaches is recorded with ``exec --capture transparent``.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import urlsplit

from freezeframe.proxy.trust import JAVA_TRUSTSTORE_PASSWORD

SHELLS = ("sh", "fish", "dotenv")
BUNDLE_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "AWS_CA_BUNDLE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
)
#: Inherited values of these would override or bypass the ones above.
CLEARED = ("SSL_CERT_DIR", "ALL_PROXY", "all_proxy")


def client_environment(proxy_url: str, ca: Path, bundle: Path, truststore: Path) -> dict[str, str]:
    env = {}
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        env[name] = env[name.lower()] = proxy_url
    env["NO_PROXY"] = env["no_proxy"] = ""  # nothing bypasses the recorder
    for name in BUNDLE_VARIABLES:
        env[name] = str(bundle.absolute())
    env["NODE_EXTRA_CA_CERTS"] = str(ca.absolute())
    env["NODE_USE_ENV_PROXY"] = "1"
    env["DENO_CERT"] = str(ca.absolute())
    env["JAVA_TOOL_OPTIONS"] = java_options(proxy_url, truststore)
    return env


def java_options(proxy_url: str, truststore: Path) -> str:
    """The JVM's proxy and trust-store properties; ``nonProxyHosts`` is emptied because its
    default sends ``localhost`` around the proxy, as ``NO_PROXY`` would."""
    parts = urlsplit(proxy_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    store = str(truststore.absolute())
    if any(c.isspace() for c in store):
        store = f'"{store}"'  # the JVM splits JAVA_TOOL_OPTIONS on blanks outside quotes
    return " ".join(
        [
            f"-Dhttp.proxyHost={host}",
            f"-Dhttp.proxyPort={port}",
            f"-Dhttps.proxyHost={host}",
            f"-Dhttps.proxyPort={port}",
            "-Dhttp.nonProxyHosts=",
            f"-Djavax.net.ssl.trustStore={store}",
            "-Djavax.net.ssl.trustStoreType=PKCS12",
            f"-Djavax.net.ssl.trustStorePassword={JAVA_TRUSTSTORE_PASSWORD}",
        ]
    )


def render(env: dict[str, str], shell: str) -> str:
    """The lines ``shell`` reads, each value quoted by that shell's own rules: a data dir's
    path is the user's to choose, and a quote that is plain text in one shell ends a string
    in another (``shlex.quote``'s ``'\\''`` is an escaped quote to fish, so the rest ran)."""
    if shell == "sh":
        lines = [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
        lines += [f"unset {name}" for name in CLEARED]
    elif shell == "fish":
        lines = [f"set -gx {name} {fish_quote(value)}" for name, value in env.items()]
        lines += [f"set -e {name}" for name in CLEARED]
    elif shell == "dotenv":
        lines = [f"{name}={dotenv_quote(name, value)}" for name, value in env.items()]
    else:
        raise ValueError(f"unknown shell {shell!r}: choose one of {', '.join(SHELLS)}")
    return "\n".join(lines) + "\n"


def fish_quote(value: str) -> str:
    """fish's single quotes: everything is literal except ``\\\\`` and ``\\'`` (fish's manual,
    "Quotes"), so those two are escaped and nothing else is."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def dotenv_quote(name: str, value: str) -> str:
    """docker compose's single quotes: literal, no ``$`` interpolation, ``\\'`` for a quote
    (docs.docker.com/compose/env-file). A backslash before a quote, or a line break, has no
    spelling there that every dotenv reader agrees on, so such a value is refused."""
    if "\n" in value or "\r" in value or ("\\" in value and "'" in value):
        raise ValueError(
            f"{name} ({value!r}) cannot be written as a dotenv value; "
            "choose a data dir whose path has no line break, or no backslash and quote"
        )
    return "'" + value.replace("'", "\\'") + "'"


def running_environment(
    admin: str, token: str | None, wait: float, data_dir: Path | None, shell: str
) -> str:
    """``freezeframe env``: the lines ``shell`` reads to reach the proxy answering at
    ``admin`` (waiting up to ``wait`` seconds for one still starting), whose address and CA
    come from the proxy itself; an explicit ``data_dir``'s CA wins."""
    from freezeframe.proxy.discovery import proxy_url, trust_in, trust_of_running, wait_running
    from freezeframe.proxy.settings import Address
    from freezeframe.proxy.trust import java_truststore

    address = Address.parse(admin, "admin address")
    document = wait_running(address, token, wait)
    trust = trust_in(data_dir) if data_dir is not None else trust_of_running(document, address)
    truststore = java_truststore(trust.ca, trust.bundle)
    return render(
        client_environment(proxy_url(document), trust.ca, trust.bundle, truststore), shell
    )
