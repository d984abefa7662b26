"""AWS Bedrock Runtime: Converse and InvokeModel, streamed or not.

Chosen by the path, ``/model/{modelId}/converse``, ``/converse-stream``, ``/invoke`` and
``/invoke-with-response-stream`` (botocore's ``bedrock-runtime`` service model), on any host:
the model id (URL-encoded as the SDKs send it: an ARN's ``:`` and ``/`` become ``%3A`` and
``%2F``) is in the path, and so in the key as every path is. SigV4's ``Authorization``,
``X-Amz-Date``, ``X-Amz-Security-Token``, ``X-Amz-Content-Sha256``, ``amz-sdk-invocation-id``
and ``amz-sdk-request`` change on every call and are not in the key, since no header is
unless named; InvokeModel's ``Accept``, guardrail and trace headers are named, as they
change the answer.

Converse drops what tags or routes a request without changing its answer: ``requestMetadata``
(tags for invocation logs), ``performanceConfig`` and ``serviceTier`` (which capacity
serves it), ``projectIdentifier`` (whose project is billed). InvokeModel's body is the
model's own request (Anthropic's Messages with an ``anthropic_version``, Nova's, Llama's
``prompt``...): nothing of it is dropped but the configured volatile fields.
"""

import re
from urllib.parse import unquote

from .profile import Profile, top_level

# botocore/data/bedrock-runtime/*/service-2.json, ConverseRequest (ConverseStreamRequest has
# the same members); modelId is the path's.
CONVERSE_KEEP = frozenset(
    {
        "messages",
        "system",
        "inferenceConfig",
        "toolConfig",
        "guardrailConfig",
        "additionalModelRequestFields",
        "promptVariables",
        "additionalModelResponseFieldPaths",
        "outputConfig",
    }
)
CONVERSE_DROP = frozenset(
    {"requestMetadata", "performanceConfig", "serviceTier", "projectIdentifier"}
)

# InvokeModel's header members (same file): the answer's media type, the guardrail applied,
# its trace; not the latency setting, service tier, log tags or billing project.
_INVOKE_HEADERS = frozenset(
    {
        "accept",
        "x-amzn-bedrock-guardrailidentifier",
        "x-amzn-bedrock-guardrailversion",
        "x-amzn-bedrock-trace",
    }
)

CONVERSE = Profile("bedrock.converse", top_level(CONVERSE_DROP))
INVOKE = Profile("bedrock.invoke", key_headers=_INVOKE_HEADERS)

_PATH = re.compile(r"/model/([^/]+)/(converse-stream|converse|invoke-with-response-stream|invoke)$")
_BY_OPERATION = {
    "converse": CONVERSE,
    "converse-stream": CONVERSE,
    "invoke": INVOKE,
    "invoke-with-response-stream": INVOKE,
}


def bedrock_profile(path: str) -> Profile | None:
    """The Converse or InvokeModel profile when the path is one of theirs, else None."""
    match = _PATH.search(path)
    return None if match is None else _BY_OPERATION[match.group(2)]


def bedrock_call(path: str) -> tuple[str, bool] | None:
    """(model id, decoded; streamed) of a Bedrock Runtime model call, else None."""
    match = _PATH.search(path)
    if match is None:
        return None
    return unquote(match.group(1)), match.group(2).endswith("-stream")
