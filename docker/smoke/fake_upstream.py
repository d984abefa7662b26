"""The smoke test's model upstream: a fake OpenAI chat-completions API over HTTPS, in a
container on the compose network (there is no internet to reach api.openai.com).

    fake_upstream.py cert DIR    writes DIR/upstream-cert.pem and DIR/upstream-key.pem, a
                                 self-signed certificate for the name `upstream` (freezeframe
                                 trusts it through FREEZEFRAME_UPSTREAM_CA)
    fake_upstream.py serve DIR   answers on :8443 with that certificate

Every answer carries this process's nonce and a running number, so an answer replayed from
the store can be told from one made afresh. Every accepted connection is logged
(`upstream: connection N`): docker/smoke.sh counts them. Standard library only, apart from
`cryptography` for the certificate (freezeframe's image has it).
"""

import datetime
import http.server
import json
import secrets
import signal
import ssl
import sys
import threading
import time
from pathlib import Path

NONCE = secrets.token_hex(4)
#: A short pause per answer, so that a replica killed mid-run has requests in flight.
DELAY_S = 0.2


def make_cert(directory: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "upstream")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("upstream")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "upstream-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "upstream-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    # A throwaway test key, read by the upstream container's non-root user.
    for path in directory.glob("upstream-*.pem"):
        path.chmod(0o644)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    connections = 0
    answers = 0
    lock = threading.Lock()

    def get_request(self):  # type: ignore[no-untyped-def]
        request = super().get_request()
        with self.lock:
            self.connections += 1
            print(f"upstream: connection {self.connections}", flush=True)
        return request


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        asked = body.get("messages", [{}])[-1].get("content", "")
        with self.server.lock:
            self.server.answers += 1
            number = self.server.answers
        time.sleep(DELAY_S)
        answer = {
            "id": f"chatcmpl-{NONCE}-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gpt-4o-mini"),
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": f"13 (upstream {NONCE}, answer {number}, to {asked!r})",
                    },
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        print(f"upstream: {format % args}", flush=True)


def serve(directory: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "upstream-cert.pem", directory / "upstream-key.pem")
    server = Server(("0.0.0.0", 8443), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # PID 1 of its container: SIGTERM (compose stop) ends it at once, as the engine expects.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"upstream: listening on :8443 (nonce {NONCE})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    command, directory = sys.argv[1], Path(sys.argv[2])
    make_cert(directory) if command == "cert" else serve(directory)
