"""The pieces of a message's content, whichever API carried them.

A message's content is a string or a list of typed blocks, and the three APIs name the same
things differently (an image is ``image_url`` in Chat Completions, ``input_image`` in
Responses, ``image`` in Messages). Each becomes a `Part` of one of a few kinds, so a reader
shows them alike. Images, files and audio are named (a URL, a file id, a file name, or the
media type and size of inline data), never inlined: a case file that carried every
screenshot an agent sent would be mostly base64.

Block shapes, by the SDK types (openai 3.x, anthropic 2.x):
- openai/types/chat/chat_completion_content_part_param.py: ``text``, ``image_url``
  (``image_url.url``, an https or a ``data:`` URL), ``input_audio`` (``data``, ``format``),
  ``file`` (``file.file_data`` | ``file_id`` | ``filename``);
  chat_completion_content_part_refusal_param.py: ``refusal``.
- openai/types/responses/response_input_text_param.py, response_input_image_param.py
  (``image_url`` | ``file_id``), response_input_file_param.py (``file_data`` | ``file_id`` |
  ``file_url``, ``filename``), response_input_audio_param.py; response_output_text.py and
  response_output_refusal.py for an assistant's own earlier output.
- anthropic/types/text_block_param.py, image_block_param.py and document_block_param.py
  (``source``: base64_image_source_param.py ``media_type``/``data``, url_image_source_param.py
  ``url``, a ``file`` source's ``file_id``, a plain-text source's ``data``; documents have a
  ``title``), thinking_block.py (``thinking``), redacted_thinking_block.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from freezeframe.canonicalize.jsonbody import JsonValue
from freezeframe.providers.bodies import as_dict, as_list, as_str, json_text

TEXT = "text"
REFUSAL = "refusal"
THINKING = "thinking"
IMAGE = "image"
FILE = "file"
AUDIO = "audio"

OTHER_TEXT_LIMIT = 500
"""Characters of JSON kept for a block of a kind not listed here."""
URL_LIMIT = 300
"""Characters of a URL kept when naming an attachment (signed URLs run to kilobytes)."""

_TEXT_TYPES = frozenset({"text", "input_text", "output_text", "summary_text", "reasoning_text"})
_IMAGE_TYPES = frozenset({"image_url", "input_image", "image"})
_FILE_TYPES = frozenset({"file", "input_file", "document"})
_AUDIO_TYPES = frozenset({"input_audio", "audio"})


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of content, in the order the model saw (or wrote) it.

    ``kind`` is ``text``, ``refusal`` or ``thinking``, whose ``text`` is their content;
    ``image``, ``file`` or ``audio``, whose ``text`` names the attachment; or the wire's own
    block type for anything else (a server tool's call or result, say), whose ``text`` is
    the block's JSON, cut after OTHER_TEXT_LIMIT characters.
    """

    kind: str
    text: str


def content_parts(content: JsonValue) -> tuple[Part, ...]:
    """The parts of a message's ``content``: a string (one text part) or a list of blocks.

    Tool calls and tool results are not parts; their readers take them out first.
    """
    if isinstance(content, str):
        return (Part(TEXT, content),) if content else ()
    return tuple(part_of(block) for block in as_list(content) if isinstance(block, dict))


def part_of(block: dict[str, JsonValue]) -> Part:
    kind = as_str(block.get("type")) or ""
    if kind in _TEXT_TYPES:
        return Part(TEXT, as_str(block.get("text")) or "")
    if kind == "refusal":
        return Part(REFUSAL, as_str(block.get("refusal")) or "")
    if kind == "thinking":
        return Part(THINKING, as_str(block.get("thinking")) or "")
    if kind == "redacted_thinking":
        return Part(THINKING, "(redacted by the provider)")
    if kind in _IMAGE_TYPES:
        return Part(IMAGE, _attachment(block))
    if kind in _FILE_TYPES:
        return Part(FILE, _attachment(block))
    if kind in _AUDIO_TYPES:
        return Part(AUDIO, _audio(block))
    return Part(kind or "unknown", _cut(json_text(block), OTHER_TEXT_LIMIT))


def joined_text(parts: Iterable[Part], kind: str = TEXT) -> str:
    """The text of the parts of one kind, one part per line."""
    return "\n".join(part.text for part in parts if part.kind == kind)


def _attachment(block: dict[str, JsonValue]) -> str:
    """A line naming an image or file, from whichever field the API put it in."""
    nested = as_dict(block.get("image_url")) or as_dict(block.get("file"))
    source = as_dict(block.get("source"))
    fields = {**block, **nested, **source}
    name = as_str(fields.get("title")) or as_str(fields.get("filename"))
    url = as_str(block.get("image_url")) or as_str(fields.get("url"))
    url = url or as_str(fields.get("file_url"))
    file_id = as_str(fields.get("file_id"))
    inline = as_str(fields.get("file_data")) or as_str(fields.get("data"))
    if inline is not None and inline.startswith("data:"):
        url = inline  # Responses' file_data may be a data URL
    if url is not None:
        where = _data_url(url) if url.startswith("data:") else _cut(url, URL_LIMIT)
    elif file_id is not None:
        where = f"file {file_id}"
    elif inline is not None:
        media = as_str(fields.get("media_type")) or as_str(fields.get("mimeType"))
        where = _inline(media, inline, source.get("type") == "text")
    elif isinstance(fields.get("content"), list):
        where = f"{len(as_list(fields.get('content')))} content blocks"
    else:
        where = "not named"
    return f"{name} ({where})" if name else where


def _audio(block: dict[str, JsonValue]) -> str:
    audio = as_dict(block.get("input_audio")) or block
    data = as_str(audio.get("data")) or ""
    return _inline(as_str(audio.get("format")), data, False)


def _data_url(url: str) -> str:
    """``data:image/png;base64,...`` named by its media type and decoded size."""
    head, _, data = url.partition(",")
    media = head.removeprefix("data:").split(";", 1)[0] or None
    return _inline(media, data, not head.endswith(";base64"))


def _inline(media: str | None, data: str, text: bool) -> str:
    size = len(data) if text else len(data.rstrip("=")) * 3 // 4
    return f"{media or 'data'}, {size:,} {'characters' if text else 'bytes'} inline"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
