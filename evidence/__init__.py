"""What people read in recordings: documents, what replay changes in recorded bytes, and a
run read the way the agent lived it (its conversations and agent steps).

Every reader of recordings (the CLI, the admin API, the case file) goes through here, so they
agree field for field. It sits above ``canonicalize`` and ``storage`` and knows nothing of
mitmproxy or of the running process.
"""

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
