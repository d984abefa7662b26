"""Body fields and rule names for the parts of a request that are left out of its key.

A field belongs here only when its value changes from run to run of the same agent while the
upstream's answer does not depend on it; stripping anything else would make different requests
share a recording.
"""

PER_CALL_FIELDS: frozenset[str] = frozenset(
    {
        # Per-request correlation ids minted fresh by SDKs and agent frameworks on every call.
        "request_id",
        "requestId",
        # Distributed-tracing context (W3C Trace Context and its spellings in JSON bodies):
        # new for every trace, meaningless to the upstream's answer.
        "trace_id",
        "traceId",
        "span_id",
        "spanId",
        "traceparent",
        "tracestate",
        # Retry-deduplication keys: unique per logical call by design, so a replay never has
        # the recorded one.
        "idempotency_key",
        "idempotencyKey",
        # Client clocks: the wall time of sending differs on every run.
        "timestamp",
        "sent_at",
    }
)
"""Fields whose value is new on every call by design, so a replay differing in them has not
drifted (canonicalize.drift) however often it differs."""

DEFAULT_VOLATILE_FIELDS: frozenset[str] = PER_CALL_FIELDS | {
    # End-user attribution (OpenAI `user`, Anthropic `metadata.user_id`, free-form tags):
    # per-session identifiers the provider records for abuse tracking but does not answer.
    "user",
    "metadata",
}

DEFAULT_RULE = "default-volatile"
"""Names a field stripped because freezeframe strips it unless told otherwise."""

CONFIG_RULE = "config-volatile"
"""Names a part stripped only because this run's configuration asked for it."""


def rule_for(field: str) -> str:
    """Say whose decision stripped `field`, so a surprising key can be traced to its cause."""
    return DEFAULT_RULE if field in DEFAULT_VOLATILE_FIELDS else CONFIG_RULE
