// The protocol layer on live output: the real pinned `claude` runs against the scripted model server,
// its stdout goes through createLineSplitter chunk by chunk as it arrives, each line through
// parseLine, and the run is classified (classifyRun) and rendered (renderText, toAiSdkMessages).
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  bashCommands,
  classifyRun,
  createLineSplitter,
  foldMessages,
  parseLine,
  renderText,
  summarizeRun,
  toAiSdkMessages,
  type ParsedLine,
} from "../../src/protocol/index.ts";
import { hermeticEnv, pinnedClaudeBin, startModelServer, type ModelServer } from "../../src/testing/index.ts";

interface LiveRun {
  lines: ParsedLine[];
  /** stdout exactly as printed. */
  stdout: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

const CLAUDE = pinnedClaudeBin();

/** One CLI run in its own temp cwd and hermetic dirs; everything is removed when the test ends. */
async function runCli(
  testContext: TestContext,
  server: ModelServer,
  prompt: string,
  opts: { args?: string[]; sandboxed?: boolean; maxRetries?: number; cwd?: string } = {},
): Promise<LiveRun> {
  const env = hermeticEnv({
    baseUrl: server.url,
    ...(opts.sandboxed ? { sandboxed: true } : {}),
    ...(opts.maxRetries !== undefined ? { maxRetries: opts.maxRetries } : {}),
  });
  testContext.after(() => env.cleanup());
  const cwd = opts.cwd ?? env.dirs.root;
  const child = spawn(CLAUDE, ["-p", "--output-format", "stream-json", "--verbose", ...(opts.args ?? [])], {
    cwd,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  // A run that hangs fails the test instead of blocking the suite.
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  child.stdin.end(prompt);
  const splitter = createLineSplitter();
  const lines: ParsedLine[] = [];
  const raw: Buffer[] = [];
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    raw.push(chunk);
    for (const item of splitter.push(chunk)) {
      assert.ok("text" in item, "no CLI line is near the splitter's cap");
      lines.push(parseLine(item.text));
    }
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (c: string) => (stderr += c));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (c, s) => resolve([c, s]));
  });
  clearTimeout(timer);
  for (const item of splitter.end()) if ("text" in item) lines.push(parseLine(item.text));
  return { lines, stdout: Buffer.concat(raw).toString("utf8"), code, signal, stderr };
}

/** Checks every run shares: each line parsed by a known schema, raw text kept byte for byte. */
function assertWellFormed(run: LiveRun): void {
  const bad = run.lines.filter((p) => p.category !== "known").map((p) => `${p.type}: ${p.category}`);
  assert.deepEqual(bad, [], "every line the CLI printed has a schema");
  const printed = run.stdout.split("\n").filter((l) => l.trim() !== "");
  assert.deepEqual(
    run.lines.map((p) => p.raw),
    printed,
    "each parsed line holds its stdout line unchanged",
  );
  const summary = summarizeRun(run.lines);
  assert.equal(summary.cliVersion, "2.1.332");
  assert.equal(summary.errorKind, classifyRun(run.lines));
}

test("a scripted reply: parsed, classified ok, rendered as text and as one assistant message", async (testContext) => {
  const reply = `protocol e2e reply ${process.pid}-${Date.now()}`;
  const server = await startModelServer({ script: { responses: [{ content: [{ type: "text", text: reply }] }] } });
  testContext.after(() => server.close());
  const run = await runCli(testContext, server, "Say something.");
  assert.equal(run.code, 0, `stderr bytes: ${run.stderr.length}`);
  assertWellFormed(run);

  assert.equal(run.lines[0]?.type, "system/init");
  assert.equal(run.lines.at(-1)?.type, "result/success");
  const result = run.lines.at(-1)!.line as Record<string, unknown>;
  assert.equal(result["result"], reply);
  assert.equal(result["is_error"], false);
  assert.equal(classifyRun(run.lines), "ok");

  assert.equal(renderText(run.lines), reply);
  assert.deepEqual(toAiSdkMessages(run.lines), [{ role: "assistant", content: [{ type: "text", text: reply }] }]);
  const sum = summarizeRun(run.lines);
  assert.equal(sum.toolCalls, 0);
  assert.equal(sum.results.length, 1);
  assert.match(sum.sessionId ?? "", /^[0-9a-f-]{36}$/);
});

test("a scripted Bash call really runs: file created, tool call and result paired in fold and renderings", async (testContext) => {
  const cwd = mkdtempSync(join(tmpdir(), "turnstream-protocol-e2e-"));
  testContext.after(() => rmSync(cwd, { recursive: true, force: true }));
  const marker = `bash-made-${process.pid}-${Date.now()}`;
  const command = `printf '%s' ${marker} > made-by-bash.txt && echo ${marker}`;
  const server = await startModelServer({
    script: {
      responses: [
        {
          content: [
            { type: "text", text: "Creating the file." },
            { type: "tool_use", name: "Bash", input: { command, description: "create a file" } },
          ],
        },
        { match: marker, content: [{ type: "text", text: "The file is there." }] },
      ],
    },
  });
  testContext.after(() => server.close());
  const run = await runCli(testContext, server, "Create the file.", {
    cwd,
    sandboxed: true,
    args: ["--dangerously-skip-permissions"],
  });
  assert.equal(run.code, 0, `stderr bytes: ${run.stderr.length}`);
  assertWellFormed(run);

  // The command really ran in the CLI's cwd.
  const made = join(cwd, "made-by-bash.txt");
  assert.ok(existsSync(made), "Bash created the file");
  assert.equal(readFileSync(made, "utf8"), marker);

  assert.equal(classifyRun(run.lines), "ok");
  assert.deepEqual(bashCommands(run.lines), [command]);

  const fold = foldMessages(run.lines);
  const calls = [...fold.toolCalls.values()];
  assert.equal(calls.length, 1);
  const call = calls[0]!;
  assert.equal(call.name, "Bash");
  assert.match(call.id, /^toolu_/);
  assert.equal(call.parentToolUseId, null);
  assert.ok(call.result, "the call has its result");
  assert.equal(call.result.isError, false);
  assert.ok(call.result.text.includes(marker));
  // The first assistant message was printed as one line per block and folds back into one message.
  const first = fold.messages.find((m) => m.toolCalls.length === 1)!;
  assert.deepEqual(
    first.blocks.map((b) => b["type"]),
    ["text", "tool_use"],
  );
  assert.equal(first.lineIndexes.length, 2);

  // The model got the same result back, under the same id.
  const second = server.requests().filter((r) => r.kind === "messages")[1]!;
  const last = second.messages.at(-1) as { role: string; content: Array<Record<string, unknown>> };
  const sent = last.content.find((b) => b["type"] === "tool_result");
  assert.equal(sent?.["tool_use_id"], call.id);
  assert.ok(JSON.stringify(sent?.["content"]).includes(marker));

  const text = renderText(run.lines);
  assert.equal(
    text,
    [
      "Creating the file.",
      `Tool Called: Bash(${JSON.stringify({ command, description: "create a file" })})`,
      `Tool Result: ${call.result.text}`,
      "The file is there.",
    ].join("\n"),
  );

  const ai = toAiSdkMessages(run.lines);
  assert.deepEqual(ai, [
    {
      role: "assistant",
      content: [
        { type: "text", text: "Creating the file." },
        { type: "tool-call", toolCallId: call.id, toolName: "Bash", input: { command, description: "create a file" } },
      ],
    },
    {
      role: "tool",
      content: [
        {
          type: "tool-result",
          toolCallId: call.id,
          toolName: "Bash",
          output: { type: "text", value: call.result.text },
        },
      ],
    },
    { role: "assistant", content: [{ type: "text", text: "The file is there." }] },
  ]);
});

test("a 429 with retries exhausted: an error result classified rate_limit, the API error rendered", async (testContext) => {
  const server = await startModelServer({
    script: {
      responses: [
        {
          error: {
            status: 429,
            type: "rate_limit_error",
            message: "scripted rate limit",
            headers: { "retry-after": "0" },
          },
        },
      ],
    },
  });
  testContext.after(() => server.close());
  const run = await runCli(testContext, server, "Hello?", { maxRetries: 0 });
  assertWellFormed(run);
  assert.equal(run.code, 1);
  assert.equal(
    server.requests().filter((r) => r.kind === "messages").length,
    1,
    "no retry with CLAUDE_CODE_MAX_RETRIES=0",
  );

  const results = run.lines.filter(
    (p) => p.line !== undefined && (p.line as Record<string, unknown>)["type"] === "result",
  );
  assert.equal(results.length, 1);
  const resultLine = results[0]!.line as Record<string, unknown>;
  assert.equal(resultLine["subtype"], "success", "an API failure still says success");
  assert.equal(resultLine["is_error"], true);
  assert.equal(resultLine["api_error_status"], 429);
  assert.equal(resultLine["terminal_reason"], "api_error");
  assert.equal(classifyRun(run.lines), "rate_limit");

  // The synthetic assistant line carries the error and its text is what both renderings show.
  const fold = foldMessages(run.lines);
  const synthetic = fold.messages.find((m) => m.model === "<synthetic>");
  assert.ok(synthetic, "a synthetic assistant message");
  assert.equal(synthetic.error, "rate_limit");
  const errorText = synthetic.blocks.map((b) => b["text"]).join("\n");
  assert.match(errorText, /429/);
  assert.equal(renderText(fold), errorText);
  assert.deepEqual(toAiSdkMessages(fold), [{ role: "assistant", content: [{ type: "text", text: errorText }] }]);
});
