// The official MCP TypeScript SDK on Node 20, for the traffic corpus (tests/support/corpus.py):
// a streamable HTTP session against the corpus's MCP server (tests/support/mcp_server.py):
// the handshake, after which the SDK opens its standalone GET stream for what the server may
// send unasked, then tools/list and a tools/call, then client.close(), which closes that
// stream once its headers came. Node's fetch ignores HTTP_PROXY, so the transport is given
// undici's fetch with its EnvHttpProxyAgent. Prints what it got as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EnvHttpProxyAgent, fetch } from "undici";

const url = new URL(process.argv[2]);
const dispatcher = new EnvHttpProxyAgent();
const transport = new StreamableHTTPClientTransport(url, {
  fetch: (target, init) => fetch(target, { ...init, dispatcher }),
});
const client = new Client({ name: "corpus-node", version: "1.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const looked = await client.callTool({ name: "lookup", arguments: { q: "node" } });
await client.close();
await dispatcher.close();
console.log(
  JSON.stringify({
    tools: listed.tools.map((tool) => tool.name).sort(),
    answer: looked.content[0].text,
  }),
);
