// The real pinned `claude` against the scripted model server: a text reply, a Bash tool call that
// really runs (its result goes back in the next request), and a 429 with retries exhausted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startModelServer } from "../../src/testing/index.ts";
import { resultsOf, runClaude } from "./_claude.ts";

test("a scripted text reply arrives as the CLI's result", async (context) => {
  const server = await startModelServer({
    script: { responses: [{ content: [{ type: "text", text: "scripted hello 7f3a" }] }] },
  });
  context.after(() => server.close());
  const run = await runClaude({ baseUrl: server.url, prompt: "greet me PROMPT-TEXT-1" });
  context.after(() => run.hermetic.cleanup());
  context.diagnostic(`plain reply run: ${run.durationMs} ms`);
  assert.equal(run.code, 0, run.stderr);
  const [result] = resultsOf(run);
  assert.equal(result?.["result"], "scripted hello 7f3a");
  assert.equal(result?.["is_error"], false);
  const main = server.requests().filter((r) => r.kind === "messages");
  assert.equal(main.length, 1);
  assert.ok(main[0]!.lastUserText.includes("PROMPT-TEXT-1"), "the prompt went to the model");
  assert.ok(main[0]!.path.startsWith("/v1/messages"));
  assert.equal(main[0]!.stream, true);
  assert.ok(main[0]!.tools.includes("Bash"));
  assert.equal(server.remaining(), 0);
  // Nothing secret is recorded: the dummy key never appears.
  assert.ok(!JSON.stringify(server.requests()).includes(run.hermetic.env["ANTHROPIC_API_KEY"]!));
  assert.ok(
    server.requests().every((r) => r.kind !== "other"),
    JSON.stringify(server.requests().map((r) => r.path)),
  );
});

test("a scripted Bash tool call really runs and its output is the next request's tool_result", async (context) => {
  const marker = `bash-ran-${process.pid}-${Date.now()}`;
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            { type: "text", text: "running it" },
            { type: "tool_use", name: "Bash", input: { command: `echo ${marker}`, description: "echo a marker" } },
          ],
        },
        { match: marker, content: [{ type: "text", text: "the command printed the marker" }] },
      ],
    },
  });
  context.after(() => server.close());
  const run = await runClaude({
    baseUrl: server.url,
    prompt: "run the command",
    sandboxed: true,
    args: ["--dangerously-skip-permissions"],
  });
  context.after(() => run.hermetic.cleanup());
  context.diagnostic(`bash tool run: ${run.durationMs} ms`);
  assert.equal(run.code, 0, run.stderr);
  const reqs = server.requests().filter((r) => r.kind === "messages");
  assert.equal(reqs.length, 2);
  const toolUse = run.lines
    .filter((l) => l["type"] === "assistant")
    .flatMap((l) => l["message"]["content"])
    .find((b: any) => b.type === "tool_use");
  assert.match(toolUse.id, /^toolu_/);
  const second = reqs[1]!.messages.at(-1) as { role: string; content: Array<Record<string, any>> };
  assert.equal(second.role, "user");
  const toolResult = second.content.find((b) => b["type"] === "tool_result");
  assert.equal(toolResult?.["tool_use_id"], toolUse.id);
  assert.ok(JSON.stringify(toolResult?.["content"]).includes(marker));
  assert.equal(reqs[1]!.responseIndex, 1, "the match-gated response answered the follow-up");
  assert.equal(resultsOf(run)[0]?.["result"], "the command printed the marker");
});

test("a 429 with retries exhausted ends in an error result carrying api_error_status 429", async (context) => {
  const server = await startModelServer({
    script: {
      responses: [
        {
          error: {
            status: 429,
            type: "rate_limit_error",
            message: "slow down (scripted)",
            headers: { "retry-after": "0" },
          },
        },
        {
          error: {
            status: 429,
            type: "rate_limit_error",
            message: "slow down (scripted)",
            headers: { "retry-after": "0" },
          },
        },
      ],
    },
  });
  context.after(() => server.close());
  const run = await runClaude({ baseUrl: server.url, prompt: "hello", maxRetries: 1 });
  context.after(() => run.hermetic.cleanup());
  context.diagnostic(`429 with one retry: ${run.durationMs} ms`);
  const results = resultsOf(run);
  assert.equal(results.length, 1);
  assert.equal(results[0]!["is_error"], true);
  assert.equal(results[0]!["api_error_status"], 429);
  assert.equal(server.requests().filter((r) => r.kind === "messages").length, 2, "one try and one retry");
  assert.ok(run.lines.some((l) => l["type"] === "system" && l["subtype"] === "api_retry"));
  assert.equal(server.remaining(), 0);
});

test("an SSE error before any block: the CLI re-sends the request non-streaming", async (context) => {
  const server = await startModelServer({
    script: {
      responses: [
        { streamError: { type: "overloaded_error", message: "Overloaded" } },
        { content: [{ type: "text", text: "answered without streaming" }] },
      ],
    },
  });
  context.after(() => server.close());
  const run = await runClaude({ baseUrl: server.url, prompt: "hello" });
  context.after(() => run.hermetic.cleanup());
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(
    server
      .requests()
      .filter((r) => r.kind === "messages")
      .map((r) => r.stream),
    [true, false],
  );
  assert.equal(resultsOf(run)[0]?.["result"], "answered without streaming");
});

test("an SSE error after a block: the CLI keeps the partial block and asks to continue, streaming", async (context) => {
  const server = await startModelServer({
    script: {
      responses: [
        {
          streamError: { type: "overloaded_error", message: "Overloaded" },
          afterBlocks: 1,
          content: [{ type: "text", text: "partial" }],
        },
        { match: "cut off", content: [{ type: "text", text: "the rest" }] },
      ],
    },
  });
  context.after(() => server.close());
  const run = await runClaude({ baseUrl: server.url, prompt: "hello" });
  context.after(() => run.hermetic.cleanup());
  assert.equal(run.code, 0, run.stderr);
  const reqs = server.requests().filter((r) => r.kind === "messages");
  assert.deepEqual(
    reqs.map((r) => r.stream),
    [true, true],
  );
  assert.equal(reqs[1]!.responseIndex, 1, "the continuation prompt says the reply was cut off");
  const texts = run.lines.filter((l) => l["type"] === "assistant").map((l) => l["message"]["content"][0]["text"]);
  assert.deepEqual(texts, ["partial", "the rest"]);
  assert.equal(resultsOf(run)[0]?.["result"], "the rest");
});
