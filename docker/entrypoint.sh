#!/bin/sh
# The image's entrypoint: `freezeframe "$@"`, with two conveniences.
#
# * `docker run IMAGE --mode replay` means `freezeframe run --mode replay`.
# * Before `run`, (re)write <data dir>/ca-bundle.pem: the system's CAs plus freezeframe's CA
#   (created on first start), so an agent sharing the volume can point SSL_CERT_FILE and
#   REQUESTS_CA_BUNDLE at /data/ca-bundle.pem, and NODE_EXTRA_CA_CERTS at
#   /data/mitmproxy-ca-cert.pem, as soon as the proxy reports healthy.
#   This uses FREEZEFRAME_DATA_DIR (/data in the image), not a --data-dir given to `run`.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; then
    set -- run "$@"
fi

if [ "${1:-}" = "run" ]; then
    freezeframe ca --bundle >/dev/null
fi

exec freezeframe "$@"
