// Node's own fetch POSTs a JSON body to a server that answers 421 Misdirected Request, which
// fetch retries once on a new connection with the same body. With "proxied" it goes through
// HTTPS_PROXY by undici's EnvHttpProxyAgent as its global dispatcher, as docs/clients.md
// shows; without, directly (or through `exec --capture`). Prints what it got as one JSON line:
// the status and body, or the error and its cause.
import { EnvHttpProxyAgent, setGlobalDispatcher } from "undici";

const [url, how] = process.argv.slice(2);
if (how === "proxied") setGlobalDispatcher(new EnvHttpProxyAgent());
try {
  const answer = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ task: "book a table", for: 2 }),
  });
  console.log(JSON.stringify({ status: answer.status, body: await answer.json() }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error), cause: String(error.cause) }));
}
