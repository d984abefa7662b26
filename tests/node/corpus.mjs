// One tool-using turn of the official openai SDK on Node 20, for the traffic corpus
// (tests/support/corpus.py). Node's fetch ignores HTTPS_PROXY, so the SDK is given undici's
// fetch with its EnvHttpProxyAgent, which reads HTTPS_PROXY and NO_PROXY as other runtimes do;
// the proxy's CA comes from NODE_EXTRA_CA_CERTS. Prints what it got as one JSON line.
import OpenAI from "openai";
import { EnvHttpProxyAgent, fetch } from "undici";

const base = process.argv[2];
const dispatcher = new EnvHttpProxyAgent();
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: "sk-corpus",
  maxRetries: 0,
  timeout: 20000,
  fetch: (url, init) => fetch(url, { ...init, dispatcher }),
});
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
};
const messages = [{ role: "user", content: "What is the weather in Berlin?" }];
const first = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages,
  tools: [weather],
  user: "node-user",
});
const call = first.choices[0].message.tool_calls[0];
messages.push(first.choices[0].message, {
  role: "tool",
  tool_call_id: call.id,
  content: JSON.stringify({ city: "Berlin", sky: "clear" }),
});
const stream = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages,
  stream: true,
  stream_options: { include_usage: true },
});
const streamed = [];
for await (const chunk of stream) streamed.push(chunk.choices[0]?.delta?.content ?? "");
await dispatcher.close();
console.log(JSON.stringify({ tool: call.function.name, answer: streamed.join("") }));
