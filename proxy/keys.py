"""The key rules in force, built in one place for the proxy and for ``explain``.

``explain`` must say exactly what the running proxy would compute, so both ask here.
Credentials in query strings (``?key=``, ``?api_key=``) are left out of the key just as
the ``Authorization`` header is: they are stored only as keyed fingerprints, which differ
between installs, and a different key must not turn a recording into a miss.
"""

from __future__ import annotations

from canonicalize import KeyConfig
from storage.redaction import SECRET_QUERY


def key_config() -> KeyConfig:
    return KeyConfig(volatile_query=SECRET_QUERY)
