#!/bin/sh
# The image's entrypoint: `freezeframe "$@"`, with one convenience:
# `docker run IMAGE --mode replay` means `freezeframe run --mode replay`.
#
# `run` writes <data dir>/ca-bundle.pem (the system's CAs plus freezeframe's CA, created on
# first start) before it reports healthy, so an agent sharing the volume can point
# SSL_CERT_FILE and REQUESTS_CA_BUNDLE at /data/ca-bundle.pem, and NODE_EXTRA_CA_CERTS at
# /data/mitmproxy-ca-cert.pem, as soon as the health check passes.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; then
    set -- run "$@"
fi

exec freezeframe "$@"
