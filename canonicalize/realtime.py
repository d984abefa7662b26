"""A WebSocket session's identity: the client's messages, without what each run mints anew.

OpenAI's Realtime API runs a conversation over one WebSocket: the client sends JSON events
(``session.update``, ``conversation.item.create``, ``response.create``...) and the server
answers with its own. The upgrade request says little (a model in the query), so what a
session asks is the sequence of the client's events. Two runs of the same agent differ in
ids only: the ``event_id`` a client may mint per event, and the ids the *server* minted
that the client names back (``item_id`` in ``conversation.item.retrieve``/``truncate``/
``delete``, ``previous_item_id`` in ``conversation.item.create``, ``response_id`` in
``response.cancel``, and an item's own ``id``). ``client_event_form`` leaves those out,
along with the configured volatile fields, and writes the rest canonically (member order and
whitespace aside); replay compares each live client message with the recorded one by it,
and ``session_key`` hashes the whole sequence, so the same session run twice has one key
and a changed prompt another. Binary messages (audio) count by their bytes.

Events: openai/types/realtime/ (realtime_client_event.py and the events it lists), openai 3.x.
"""

from collections.abc import Iterable

from blake3 import blake3

from .jsonbody import JsonValue, NotJson, decode_json, encode_json_utf8
from .volatile import DEFAULT_VOLATILE_FIELDS

MINTED_IDS = frozenset({"event_id", "item_id", "previous_item_id", "response_id"})
"""Top-level members of a client event that hold an id minted for this run."""
_DOMAIN = b"freezeframe/websocket-session/v1\n"


def client_event_form(
    data: bytes, volatile: frozenset[str] = DEFAULT_VOLATILE_FIELDS
) -> bytes | None:
    """The canonical form of a JSON text message without its minted ids; None when the
    message is not JSON (it is then compared by its bytes)."""
    try:
        value: JsonValue = decode_json(data)  # nesting bounded: a deep message is bytes
    except (NotJson, ValueError):
        return None
    if isinstance(value, dict):
        left_out = MINTED_IDS | volatile
        value = {name: item for name, item in value.items() if name not in left_out}
        item = value.get("item")
        if isinstance(item, dict) and "id" in item:
            value["item"] = {name: inner for name, inner in item.items() if name != "id"}
    return encode_json_utf8(value)


def session_key(
    client_messages: Iterable[tuple[bool, bytes]],
    volatile: frozenset[str] = DEFAULT_VOLATILE_FIELDS,
) -> str:
    """blake3 of the client's messages in order, each (is text, payload) as compared."""
    hasher = blake3(_DOMAIN)
    for text, data in client_messages:
        form = client_event_form(data, volatile) if text else None
        part = b"t" + form if form is not None else (b"x" if text else b"b") + data
        hasher.update(len(part).to_bytes(8, "big") + part)
    return hasher.hexdigest()
