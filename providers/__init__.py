"""What each provider's API says, read from its bytes: requests, answers and streams of
OpenAI, Anthropic, Bedrock, Gemini, Realtime and MCP, with the shared vocabulary (bodies,
messages, parts, streams) they are read into. Knows nothing of mitmproxy, the process or the
read model above it (``evidence``)."""

if not __name__.startswith("freezeframe."):
    raise ImportError(f"import freezeframe.{__name__}, not {__name__}: one name, one module")
