"""The Model Context Protocol over streamable HTTP: JSON-RPC 2.0 messages POSTed to a server.

Recognised by the body's shape on any path, since MCP servers choose their own endpoint.
`method` and `params` say what is asked; the request `id` only pairs an answer with its
question and is minted afresh by every client run, and `params._meta` carries tracing and
progress tokens (an injected `traceparent`, a `progressToken`) that SDKs add only when tracing
is on. Both are dropped, and an empty `params` means the same as none (JSON-RPC reads them
alike), so a request traced and one not traced key the same. The `Mcp-Session-Id` header, new
for every session, is never in the key (headers are left out unless named);
`MCP-Protocol-Version` is, as the negotiated protocol version decides the shape of the answer.

Only requests and notifications are recognised: a client's POSTed *response* to a server's
request keeps its `id`, which comes from the recorded server and so replays unchanged.

Two revisions of the transport are in use, and both key the same way:
- 2025-11-25 (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports): an
  `initialize` handshake, a server-minted `Mcp-Session-Id` on every later request, and SSE
  streams resumed with a `Last-Event-ID` header (a GET). Neither header is in the key: the
  session id is new in every session, and a resumed stream is the next occurrence of its GET.
- 2026-07-28, stateless
  (https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http):
  no handshake and no session; every request carries `params._meta` with
  `io.modelcontextprotocol/protocolVersion`, `…/clientInfo` and `…/clientCapabilities`, and
  mirrors `method` into `Mcp-Method`, `params.name` (or `params.uri`) into `Mcp-Name`, and
  the tool arguments its schema marks with `x-mcp-header` into `Mcp-Param-{Name}`. The
  mirrored headers join the key: they equal the body or the server refuses the request
  (`HeaderMismatch`), so they add nothing volatile, and a call sent without them (refused)
  and its retry with them (answered) are different requests. Of `_meta`, the client's
  capabilities stay in the key, since a server answers a client that cannot be asked for
  input differently; its name and version, the protocol version (keyed by its header) and
  trace context do not.
"""

from collections.abc import Iterable

from ..jsonbody import JsonValue
from ..jsonpath import parse_path
from .profile import Profile

_KEY_HEADERS = frozenset({"mcp-protocol-version", "mcp-method", "mcp-name"})
_MIRRORED_PARAMS = ("mcp-param-",)
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

MCP = Profile(
    "mcp",
    tuple(parse_path(path) for path in ("$.id", "$.params._meta")),
    drop_if_empty=(parse_path("$.params"),),
    key_headers=_KEY_HEADERS,
    keep=(parse_path(f'$.params._meta["{CAPABILITIES}"]'),),
    key_header_prefixes=_MIRRORED_PARAMS,
)
#: A batch (an array of messages). Kept apart from MCP because on a single message `$[*]`
#: would mean every member, and `$[*].id` would drop a `params.id` that does matter.
MCP_BATCH = Profile(
    "mcp",
    tuple(parse_path(path) for path in ("$[*].id", "$[*].params._meta")),
    drop_if_empty=(parse_path("$[*].params"),),
    key_headers=_KEY_HEADERS,
    keep=(parse_path(f'$[*].params._meta["{CAPABILITIES}"]'),),
    key_header_prefixes=_MIRRORED_PARAMS,
)


STREAM_HEADERS = frozenset({"mcp-session-id", "mcp-protocol-version"})
"""Headers only an MCP client sends: a body-less ``GET`` carrying one (a 2025-11-25 stream
resumed with ``Last-Event-ID``, or the session's standalone stream) is MCP's, though its
request says nothing else. Such a GET keeps the generic profile for its key (it has no body
to key), and is named MCP wherever it is read: its facts, its edits, the case file."""


def is_stream_request(method: str, headers: Iterable[tuple[str, str]]) -> bool:
    """A ``GET`` that opens or resumes an MCP session's SSE stream, by its headers."""
    return method == "GET" and any(name.lower() in STREAM_HEADERS for name, _ in headers)


def is_json_rpc_request(body: JsonValue) -> bool:
    """True for a JSON-RPC 2.0 request or notification, or a non-empty batch of them."""
    if isinstance(body, list):
        return bool(body) and all(_is_request(message) for message in body)
    return _is_request(body)


def _is_request(message: JsonValue) -> bool:
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and isinstance(message.get("method"), str)
    )
