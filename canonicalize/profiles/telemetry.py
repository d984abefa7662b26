"""Side traffic SDKs send on their own: trace, span, metric and log export.

An agent's SDK exports what it did while it runs or after it: the OpenAI Agents SDK posts
its traces to ``/v1/traces/ingest``, OpenTelemetry exporters post OTLP to ``…/v1/traces``,
``…/v1/metrics`` and ``…/v1/logs`` (Langfuse, Logfire, Phoenix and the collector itself),
LangSmith batches its runs to ``/runs/batch`` and ``/runs/multipart``, and Sentry posts
envelopes to ``/api/<project>/envelope/``. Every such body holds ids and clocks minted for
that run (trace and span ids, start and end times), so no two runs send the same one, and
none of them changes what the agent is answered: the collector says "accepted".

Such a request is therefore keyed without its body (method, host, path and query stay), so
that replay answers it from the recording instead of missing. Its body is still recorded and
still shown; `explain` credits the whole body to the profile ``telemetry``, and a rule in
rules.toml can match ``profile = "telemetry"`` to key it differently. Chosen by the end of
the path alone, on any host.
"""

import re

from .profile import Profile

TELEMETRY = Profile("telemetry", drop_body=True)

_PATHS = re.compile(
    r"(?:/v1/(?:traces|metrics|logs)|/v1/traces/ingest|/runs/(?:batch|multipart)"
    r"|/api/\d+/(?:envelope|store))/?$"
)


def telemetry_profile(path: str) -> Profile | None:
    """The telemetry profile for an export endpoint's path; None for any other."""
    return TELEMETRY if _PATHS.search(path) else None
