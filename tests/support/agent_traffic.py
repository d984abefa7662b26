"""Request bodies shaped like an agent's: every one different, conversations that grow.

An agent's chat-completion request carries its system prompt, its tool schemas and the
whole conversation so far, so turn n repeats turns 1..n-1 and adds a user (or tool)
message and the assistant's answer before it. The text is drawn from a fixed vocabulary
with a seeded generator: as compressible as prose, and never the same twice, so that
neither the content-addressed store nor zstd can pass off repetition as savings.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

_WORDS = (
    "the agent read file test failed because parser offset retry patch branch commit "
    "request response token stream model tool call result error timeout database record "
    "user asked summary step plan next check value config header body cache query index "
    "order customer invoice refund shipment address warehouse ticket status priority "
    "deploy rollback service latency metric alert on-call runbook incident review owner"
).split()


def prose(rng: random.Random, words: int) -> str:
    """Sentences of ``words`` words, with numbers in them so no two are alike."""
    out = []
    for index in range(words):
        word = rng.choice(_WORDS)
        if index % 9 == 8:
            word = f"{word} #{rng.randrange(10**6)}."
        out.append(word)
    return " ".join(out)


def tools(rng: random.Random, count: int = 6) -> list[dict[str, object]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{index}",
                "description": prose(rng, 30),
                "parameters": {
                    "type": "object",
                    "properties": {
                        f"arg_{arg}": {"type": "string", "description": prose(rng, 8)}
                        for arg in range(4)
                    },
                },
            },
        }
        for index in range(count)
    ]


@dataclass
class Conversation:
    """One agent's chat, as the requests it sends turn by turn."""

    seed: int
    model: str = "gpt-4o-mini"
    user_words: int = 60
    answer_words: int = 120
    _rng: random.Random = field(init=False)
    _messages: list[dict[str, object]] = field(init=False)
    _tools: list[dict[str, object]] = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._messages = [{"role": "system", "content": prose(self._rng, 250)}]
        self._tools = tools(self._rng)

    def request(self) -> bytes:
        """The next turn's request body: the conversation so far and a new user message."""
        self._messages.append({"role": "user", "content": prose(self._rng, self.user_words)})
        body = {
            "model": self.model,
            "messages": self._messages,
            "tools": self._tools,
            "temperature": 0.2,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    def answer(self) -> str:
        """The assistant's answer to the last request, which the next request carries."""
        text = prose(self._rng, self.answer_words)
        self._messages.append({"role": "assistant", "content": text})
        return text

    def turns(self, count: int) -> list[bytes]:
        """``count`` requests, each answered before the next."""
        bodies = []
        for _ in range(count):
            bodies.append(self.request())
            self.answer()
        return bodies
