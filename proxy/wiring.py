"""The environment a client needs to go through freezeframe, in the forms shells read.

Every HTTP stack reads its own variables: Python's ``SSL_CERT_FILE`` (httpx, the SDKs) and
``REQUESTS_CA_BUNDLE`` (requests), curl's ``CURL_CA_BUNDLE``, Node's ``NODE_EXTRA_CA_CERTS``
(which adds to its store, so the CA alone), the AWS SDKs' ``AWS_CA_BUNDLE``, gRPC's roots
file. Setting all of them is what makes "point the agent at the proxy" one step, whatever
the agent is written in. The bundle ones get the system's CAs plus freezeframe's, because
they replace a client's trust store rather than add to it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

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


def client_environment(proxy_url: str, ca: Path, bundle: Path) -> dict[str, str]:
    env = {}
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        env[name] = env[name.lower()] = proxy_url
    env["NO_PROXY"] = env["no_proxy"] = ""  # nothing bypasses the recorder
    for name in BUNDLE_VARIABLES:
        env[name] = str(bundle.absolute())
    env["NODE_EXTRA_CA_CERTS"] = str(ca.absolute())
    return env


def render(env: dict[str, str], shell: str) -> str:
    if shell == "sh":
        lines = [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
        lines += [f"unset {name}" for name in CLEARED]
    elif shell == "fish":
        lines = [f"set -gx {name} {shlex.quote(value)}" for name, value in env.items()]
        lines += [f"set -e {name}" for name in CLEARED]
    elif shell == "dotenv":
        lines = [f"{name}={json.dumps(value)}" for name, value in env.items()]
    else:
        raise ValueError(f"unknown shell {shell!r}: choose one of {', '.join(SHELLS)}")
    return "\n".join(lines) + "\n"
