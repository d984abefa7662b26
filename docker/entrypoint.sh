#!/bin/sh
# The image's entrypoint: `freezeframe "$@"`, with three conveniences for `run`:
#
# * `docker run IMAGE --mode replay` means `freezeframe run --mode replay`.
# * No FREEZEFRAME_ADMIN_TOKEN while the admin port listens beyond loopback (the image's
#   0.0.0.0:8081): the token is read from <data dir>/admin-token, which the first start
#   writes (64 hex digits, mode 0600, owned by the image's user), so neither recording nor
#   replaying asks for one. Other containers on the network reach that port, and a port
#   published on the host's 127.0.0.1 arrives from the bridge's address, so freezeframe
#   cannot tell the host from a neighbour: the admin API keeps asking for the token.
# * Start order without healthcheck timers: with FREEZEFRAME_STORE a postgresql:// URL, it
#   waits until the database accepts a connection; with FREEZEFRAME_WAIT_FOR (URLs, space
#   separated), until each answers 2xx. At most FREEZEFRAME_WAIT_SECONDS (120) in all.
#
# `run` writes <data dir>/ca-bundle.pem (the system's CAs plus freezeframe's CA, created on
# first start) before /health answers, so an agent sharing the volume can point
# SSL_CERT_FILE and REQUESTS_CA_BUNDLE at /data/ca-bundle.pem, and NODE_EXTRA_CA_CERTS at
# /data/mitmproxy-ca-cert.pem, as soon as /health answers.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; then
    set -- run "$@"
fi

if [ "${1:-}" = run ]; then
    if [ -z "${FREEZEFRAME_ADMIN_TOKEN:-}" ]; then
        case "${FREEZEFRAME_ADMIN:-127.0.0.1}" in
            127.* | localhost* | "[::1]"*) ;;
            *)
                data=${FREEZEFRAME_DATA_DIR:-/data}
                if [ ! -s "$data/admin-token" ]; then
                    # Written aside, then linked into place: replicas sharing the volume
                    # agree on one token (the link fails for all but the first).
                    (umask 077 && mkdir -p "$data" \
                        && python -c 'import secrets; print(secrets.token_hex(32))' \
                            >"$data/admin-token.$$" \
                        && { ln "$data/admin-token.$$" "$data/admin-token" 2>/dev/null || true; } \
                        && rm -f "$data/admin-token.$$")
                fi
                FREEZEFRAME_ADMIN_TOKEN=$(cat "$data/admin-token")
                export FREEZEFRAME_ADMIN_TOKEN
                echo "freezeframe-entrypoint: the admin API's token is in $data/admin-token" \
                    "(no FREEZEFRAME_ADMIN_TOKEN given)" >&2
                ;;
        esac
    fi
    case "${FREEZEFRAME_STORE:-}${FREEZEFRAME_WAIT_FOR:-}" in
        postgres* | *http*) wait=1 ;;
        *) wait= ;;
    esac
    [ -z "$wait" ] || python - <<'WAIT'
import os, sys, time, urllib.request as request
from urllib.parse import urlsplit

deadline = time.monotonic() + float(os.environ.get("FREEZEFRAME_WAIT_SECONDS") or 120)
store = os.environ.get("FREEZEFRAME_STORE", "")
waits = [url for url in os.environ.get("FREEZEFRAME_WAIT_FOR", "").split() if url]
if store.startswith(("postgresql://", "postgres://")):
    waits.insert(0, store)
opener = request.build_opener(request.ProxyHandler({}))
for url in waits:
    parts = urlsplit(url)
    where = f"{parts.hostname}:{parts.port or ''}"  # never the password
    said = False
    while True:
        try:
            if parts.scheme.startswith("postgres"):
                import psycopg

                psycopg.connect(url, connect_timeout=3).close()
            else:
                opener.open(url, timeout=3).close()
            break
        except Exception as error:
            if time.monotonic() > deadline:
                sys.exit(f"freezeframe-entrypoint: {where} did not answer: {type(error).__name__}")
            if not said:
                print(f"freezeframe-entrypoint: waiting for {where}", file=sys.stderr)
                said = True
            time.sleep(1)
WAIT
fi

exec freezeframe "$@"
