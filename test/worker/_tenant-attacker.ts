// What a hostile run does with its own gateway token, started from a turn's Bash tool: the token and
// the gateway's address are in the run's environment. Each mode prints one line (no request text in
// it, so the CLI's next request cannot be mistaken for one of these by the scripted server).
//   burst N     N Messages calls at once, before any of their costs can be counted
//   cut         a streamed answer read to its first delta, then hung up on (before its final usage)
//   unpriced    a call naming a model the price table does not know
//   count       count_tokens and the models list: free endpoints
const base = process.env["ANTHROPIC_BASE_URL"]!;
const headers = {
  "x-api-key": process.env["ANTHROPIC_API_KEY"]!,
  "content-type": "application/json",
  "anthropic-version": "2023-06-01",
};

const messages = (marker: string) => [{ role: "user", content: marker }];

async function call(body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}/v1/messages`, { method: "POST", headers, body: JSON.stringify(body), signal });
}

async function burst(count: number): Promise<string> {
  const body = { model: "claude-sonnet-4-5", max_tokens: 1000, messages: messages("xburstx") };
  const statuses = await Promise.all(
    Array.from({ length: count }, async () => {
      const res = await call(body);
      await res.arrayBuffer();
      return res.status;
    }),
  );
  return `statuses ${statuses.sort().join(" ")}`;
}

async function cut(): Promise<string> {
  const controller = new AbortController();
  const res = await call(
    { model: "claude-sonnet-4-5", max_tokens: 64000, stream: true, messages: messages("xcutx") },
    controller.signal,
  );
  const reader = res.body!.getReader();
  let seen = "";
  while (!seen.includes("content_block_delta")) {
    const { value, done } = await reader.read();
    if (done) return `ended before any delta (${res.status})`;
    seen += Buffer.from(value).toString("utf8");
  }
  controller.abort();
  return `hung up after the first delta (${res.status}, final usage seen: ${seen.includes("message_delta")})`;
}

async function unpriced(): Promise<string> {
  const res = await call({ model: "x-unpriced-1", max_tokens: 1000, messages: messages("xunpricedx") });
  await res.arrayBuffer();
  return `unknown model answered ${res.status}`;
}

async function count(): Promise<string> {
  const counted = await fetch(`${base}/v1/messages/count_tokens`, {
    method: "POST",
    headers,
    body: JSON.stringify({ model: "claude-sonnet-4-5", messages: messages("xcountx") }),
  });
  const models = await fetch(`${base}/v1/models`, { headers });
  return `count_tokens ${counted.status}, models ${models.status}`;
}

const [mode, arg] = process.argv.slice(2);
const modes: Record<string, () => Promise<string>> = {
  burst: () => burst(Number(arg ?? 10)),
  cut,
  unpriced,
  count,
};
const run = modes[mode ?? ""];
if (run === undefined) {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
process.stdout.write(`${await run()}\n`);
