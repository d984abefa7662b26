"""freezeframe's own errors (a replay miss above all) in the error format of the provider the
request was meant for, so that its official SDK shows the explanation.

The explanation is built once, in one shape (``{"type": "error", "error": {"type", "message",
...}}``, which the OpenAI and Anthropic SDKs read); this module only adds what another
provider's SDK reads it from, and takes nothing away:

* AWS (Bedrock Runtime): botocore takes the error code from ``x-amzn-ErrorType`` and the
  message from a top-level ``message``; without them boto3 raised ``ClientError: An error
  occurred (404) when calling the Converse operation:`` with nothing after the colon.
* Google (Gemini API, Vertex AI): ``{"error": {"code", "message", "status"}}`` as google-genai
  and google-api-core read it (``status`` is the canonical code's name, ``NOT_FOUND``).
* OpenAI, Azure OpenAI and the services serving OpenAI's API as their own (Mistral, Groq,
  ...): ``error.code`` beside ``error.type`` and ``error.message``.
"""

from __future__ import annotations

import copy
from typing import Any

from freezeframe.canonicalize.providers import OPENAI_COMPATIBLE_HOSTS

#: google.rpc.Code names of the statuses freezeframe answers with, as Google's APIs name them.
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
AWS_ERROR_TYPE = "x-amzn-ErrorType"


def in_provider_format(
    provider: str | None, status: int, document: dict[str, Any]
) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """``document`` (freezeframe's explanation) as ``provider`` words an error, and the
    headers to add. ``provider`` is ``canonicalize.providers.provider_of``'s name, or None
    for a request to no known provider, which keeps the document as it is."""
    error = document.get("error")
    if not isinstance(error, dict):
        return document, ()
    kind, message = str(error.get("type", "")), str(error.get("message", ""))
    shaped = copy.deepcopy(document)
    inner = shaped["error"]
    if provider is None:
        return shaped, ()
    if provider.startswith("aws."):
        return {"message": message, **shaped}, ((AWS_ERROR_TYPE, kind),)
    if provider.startswith("gcp."):
        inner["code"] = status
        inner["status"] = GOOGLE_STATUS.get(status, "UNKNOWN")
        return shaped, ()
    if provider in ("openai", "azure.ai.openai", *OPENAI_COMPATIBLE_HOSTS.values()):
        inner.setdefault("code", kind)
    return shaped, ()
