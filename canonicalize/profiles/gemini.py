"""Google's Gemini API and Vertex AI: ``generateContent`` and ``streamGenerateContent``.

Chosen by the path's end, ``…/models/{model}:generateContent`` or ``:streamGenerateContent``,
under the Gemini API's ``/v1beta`` and ``/v1`` and Vertex AI's
``/v1/projects/{p}/locations/{l}/publishers/google/models/{m}`` (or ``/v1beta1/…``) alike
(google-genai's ``models.py`` builds both), on any host. The model is in the path and so in
the key; so is ``alt=sse``, which changes the answer's framing (server-sent events, one whole
``GenerateContentResponse`` each) from one JSON array. The API key (``x-goog-api-key``, or
``key=`` in the query) and OAuth bearer tokens never are.

Vertex's ``labels`` tag a request for billing and are dropped; every other field
(``contents``, ``systemInstruction``, ``tools``, ``generationConfig``, ``safetySettings``,
``cachedContent``...) stays, as for every provider, so an unknown one keeps its say.
"""

import re

from .profile import Profile, top_level

GENERATE_DROP = frozenset({"labels"})

GENERATE_CONTENT = Profile("gemini.generate-content", top_level(GENERATE_DROP))

_PATH = re.compile(r"/(?:tunedModels|models)/([^/:]+):(generateContent|streamGenerateContent)$")


def gemini_profile(path: str) -> Profile | None:
    """The generateContent profile when the path ends like one, else None."""
    return GENERATE_CONTENT if _PATH.search(path) else None


def gemini_call(path: str) -> tuple[str, bool, bool] | None:
    """(model, streamed, on Vertex AI) of a generateContent call, else None. Vertex's paths
    name a publisher (``/publishers/google/models/…``), the Gemini API's do not."""
    match = _PATH.search(path)
    if match is None:
        return None
    return match.group(1), match.group(2) == "streamGenerateContent", "/publishers/" in path
