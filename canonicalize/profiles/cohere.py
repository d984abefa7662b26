"""Cohere's Chat API, version 2: ``POST /v2/chat`` (api.cohere.com, and servers that copy it).

Chosen for paths ending in ``/v2/chat``, on any host, so that a call to it is named a model
call of provider ``cohere`` (it was ``generic.json``) and its facts are read: the model
asked for, the answer's ``finish_reason`` and its ``usage`` (``tokens`` and
``billed_units``), whole or streamed (``message-start`` ... ``message-end``).

Every field of the request stays in the key (``messages``, ``tools``, ``documents``,
``response_format``, ``stream``...), as for every provider, so an unknown one keeps its
say; nothing Cohere's v2 request documents is bookkeeping. So the key is the one the generic
profile gave: recordings made before this profile replay as they did.
"""

from .profile import Profile

CHAT = Profile("cohere.chat")


def cohere_profile(path: str) -> Profile | None:
    """The Chat v2 profile when the path ends like one, else None."""
    return CHAT if path.endswith("/v2/chat") else None
