"""The official SDKs' clients on a mock transport: every request they send is kept, and
answered without a network.

    capture = SdkCapture()
    capture.openai.chat.completions.create(...)    # or capture.azure / capture.anthropic
    view_of(capture.requests[-1])                  # what was sent, as canonicalize sees it

A subclass decides the answer by overriding :meth:`SdkCapture.respond`.
"""

from urllib.parse import parse_qsl

import anthropic
import httpx2
import openai

from freezeframe.canonicalize import RequestView

__all__ = ["SdkCapture", "view_of"]


def view_of(request: httpx2.Request) -> RequestView:
    """A request an SDK sent, as the proxy hands it to canonicalize."""
    path, _, query = request.url.raw_path.decode("ascii").partition("?")
    return RequestView(
        method=request.method,
        scheme=request.url.scheme,
        host=request.url.host,
        port=request.url.port or {"http": 80, "https": 443}[request.url.scheme],
        path=path,
        query=tuple(parse_qsl(query, keep_blank_values=True)),
        headers=tuple(request.headers.items()),
        body=request.content,
        content_type=request.headers.get("content-type", ""),
    )


class SdkCapture:
    """OpenAI, Azure OpenAI and Anthropic clients whose every request is recorded in
    ``requests`` and answered by :meth:`respond` instead of being sent."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []
        transport = httpx2.MockTransport(self._record)
        self.openai = openai.OpenAI(
            api_key="sk-test",
            base_url="http://127.0.0.1:9/v1",
            http_client=openai.DefaultHttpxClient(transport=transport),
            max_retries=0,
        )
        self.azure = openai.AzureOpenAI(
            api_key="azure-test",
            azure_endpoint="https://example.openai.azure.com",
            api_version="2024-10-21",
            http_client=openai.DefaultHttpxClient(transport=transport),
            max_retries=0,
        )
        self.anthropic = anthropic.Anthropic(
            api_key="sk-ant-test",
            base_url="http://127.0.0.1:9",
            http_client=anthropic.DefaultHttpxClient(transport=transport),
            max_retries=0,
        )

    def _record(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.respond(request)

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        """The answer to ``request``: by default an empty JSON object."""
        return httpx2.Response(200, json={})
