// An agent as a new user writes one: the official SDK, fetch and https.get, no proxy code.
// It prints what it got as one JSON line, so a test can compare a recording with its replay.
import https from "node:https";
import OpenAI from "openai";

const base = process.argv[2];

function httpsGet(url) {
  return new Promise((resolve, reject) => {
    https
      .get(url, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve(JSON.parse(body)));
      })
      .on("error", reject);
  });
}

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-node-agent", maxRetries: 0 });
const completion = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "hello from node" }],
});
const streamed = [];
const stream = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "stream to node" }],
  stream: true,
});
for await (const chunk of stream) streamed.push(chunk.choices[0]?.delta?.content ?? "");
const fetched = await (await fetch(`${base}/tool/counter`)).json();
const got = await httpsGet(`${base}/tool/counter?via=https.get`);

console.log(
  JSON.stringify({
    completion: completion.choices[0].message.content,
    id: completion.id,
    streamed: streamed.join(""),
    fetched,
    got,
  }),
);
