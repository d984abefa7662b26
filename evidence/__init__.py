"""What people read in recordings: documents, what replay changes in recorded bytes, and a
run read the way the agent lived it (its conversations and agent steps).

Every reader of recordings (the CLI, the admin API, the case file) goes through here, so they
agree field for field. It sits above ``canonicalize`` and ``storage`` and knows nothing of
mitmproxy or of the running process.
"""

from __future__ import annotations

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freezeframe.evidence.conversation import (
        Conversation,
        conversation_document,
        conversation_of,
        conversations_of,
    )
    from freezeframe.evidence.document import (
        cassette_document,
        exchange_document,
        miss_document,
        search_document,
        summary_document,
    )
    from freezeframe.evidence.steps import Steps, agent_steps, steps_document

__all__ = [
    "Conversation",
    "Steps",
    "agent_steps",
    "cassette_document",
    "conversation_document",
    "conversation_of",
    "conversations_of",
    "exchange_document",
    "miss_document",
    "search_document",
    "steps_document",
    "summary_document",
]

_HOMES = {
    "Conversation": "conversation",
    "conversation_document": "conversation",
    "conversation_of": "conversation",
    "conversations_of": "conversation",
    "cassette_document": "document",
    "exchange_document": "document",
    "miss_document": "document",
    "search_document": "document",
    "summary_document": "document",
    "Steps": "steps",
    "agent_steps": "steps",
    "steps_document": "steps",
}


def __getattr__(name: str) -> Any:
    """Each name loads its module when first used: a reader that needs one document (``ls``
    needs only the cassette's) does not pay for the conversation and step readers."""
    if name in _HOMES:
        return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
