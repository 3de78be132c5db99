import { test } from "node:test";
import assert from "node:assert/strict";
import {
  assertSkillWasRead,
  bashCommands,
  classifyResult,
  classifyRun,
  cliVersionOf,
  foldMessages,
  parseLine,
  renderText,
  retryHints,
  sessionIdOf,
  SkillNotReadError,
  summarizeRun,
  toAiSdkMessages,
  unpairedToolCalls,
} from "../../src/protocol/index.ts";
import * as samples from "./sample-lines.ts";

test("classification: the envelope decides, is_error on success is a failure", () => {
  assert.equal(classifyRun(samples.toolsRun), "ok");
  assert.equal(
    classifyRun([
      samples.init,
      samples.apiRetry(429, "rate_limit"),
      samples.synthetic("rate_limit", "API Error: 429"),
      samples.apiErrorResult(429, "API Error: 429"),
    ]),
    "rate_limit",
  );
  assert.equal(
    classifyRun([samples.synthetic("authentication_failed", "Invalid API key"), samples.apiErrorResult(401, "x")]),
    "auth",
  );
  assert.equal(classifyRun([samples.synthetic("overloaded", "x"), samples.apiErrorResult(529, "x")]), "overloaded");
  assert.equal(classifyRun([samples.synthetic("server_error", "x"), samples.apiErrorResult(500, "x")]), "server_error");
  // status alone, and the result text alone
  assert.equal(classifyResult(parseLine(samples.apiErrorResult(400, "x"))), "invalid_request");
  const noStatus = { ...JSON.parse(samples.apiErrorResult(0, "API Error: 529 overloaded")), api_error_status: null };
  assert.equal(classifyResult(noStatus), "overloaded");
  assert.equal(classifyRun([samples.lostSession]), "lost_session");
  assert.equal(classifyRun([samples.init, samples.maxTurns]), "max_turns");
  assert.equal(classifyResult({ type: "result", subtype: "error_max_budget_usd", is_error: true }), "max_budget");
  assert.equal(
    classifyResult({ type: "result", subtype: "error_during_execution", is_error: true, errors: ["boom"] }),
    "error_result",
  );
  assert.equal(classifyRun([samples.init, samples.text1]), "no_result");
  assert.equal(classifyRun([]), "no_result");
  // several results: the last one counts
  assert.equal(classifyRun([samples.success, samples.maxTurns]), "max_turns");
  assert.equal(classifyRun([samples.maxTurns, samples.success]), "ok");
});

test("retry hints come from api_retry and rate_limit_event lines", () => {
  assert.equal(retryHints(samples.toolsRun), undefined);
  const hints = retryHints([
    samples.apiRetry(429, "rate_limit", 1),
    samples.apiRetry(429, "rate_limit", 2),
    samples.rateLimitEvent,
  ]);
  assert.deepEqual(hints, {
    apiRetries: 2,
    retryDelayMs: 1500,
    maxRetries: 2,
    lastErrorStatus: 429,
    resetsAtMs: 1767225600 * 1000,
    rateLimitStatus: "rejected",
  });
});

test("folding: per-block lines share one message, results pair by id in completion order", () => {
  const fold = foldMessages(samples.toolsRun);
  assert.equal(fold.messages.filter((m) => m.role === "assistant").length, 2);
  const first = fold.messages[0]!;
  assert.equal(first.id, "msg_1");
  assert.deepEqual(
    first.blocks.map((b) => b["type"]),
    ["thinking", "text", "tool_use", "tool_use"],
  );
  assert.deepEqual(
    first.toolCalls.map((c) => c.id),
    ["toolu_bash1", "toolu_read1"],
  );
  const bash = fold.toolCalls.get("toolu_bash1")!;
  const read = fold.toolCalls.get("toolu_read1")!;
  assert.equal(bash.result!.text, "total 0\nfile.txt");
  assert.equal(bash.result!.isError, false);
  assert.ok(read.result!.lineIndex < bash.result!.lineIndex, "read completed first");
  assert.equal(fold.results.length, 1);
  assert.deepEqual(
    unpairedToolCalls(foldMessages([samples.init, samples.bashUse])).map((c) => c.id),
    ["toolu_bash1"],
  );
  const failed = foldMessages([samples.failingBashUse, samples.failingBashResult]).toolCalls.get("toolu_fail")!;
  assert.equal(failed.result!.isError, true);
});

test("folding: subagent lines are grouped under their parent tool call", () => {
  const task = JSON.stringify({
    type: "assistant",
    message: {
      id: "msg_p",
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_task", name: "Task", input: { prompt: "p" } }],
    },
    parent_tool_use_id: null,
  });
  const sub = JSON.stringify({
    type: "assistant",
    message: {
      id: "msg_s",
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_sub", name: "Bash", input: { command: "pwd" } }],
    },
    parent_tool_use_id: "toolu_task",
  });
  const subRes = JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_sub", content: "/w" }] },
    parent_tool_use_id: "toolu_task",
  });
  const fold = foldMessages([task, sub, subRes, samples.success, samples.success]);
  assert.equal(fold.messages.length, 1);
  assert.equal(fold.subagents.get("toolu_task")!.length, 2);
  assert.equal(fold.toolCalls.get("toolu_task")!.subagent!.length, 2);
  assert.equal(fold.toolCalls.get("toolu_sub")!.result!.text, "/w");
  assert.equal(fold.results.length, 2);
  assert.deepEqual(bashCommands([task, sub, subRes]), ["pwd"]);
  assert.match(
    renderText([task, sub, subRes]),
    /Tool Called: Task\(.*\)\n {2}Tool Called: Bash\(\{"command":"pwd"\}\)\n {2}Tool Result: \/w/,
  );
});

test("renderText: tool calls and results, thinking hidden, unknown blocks named", () => {
  const text = renderText(samples.toolsRun);
  assert.ok(!text.includes("secret plan"));
  assert.ok(text.includes('Tool Called: Bash({"command":"ls -la","description":"List files"})'));
  assert.ok(text.includes("Tool Result: total 0\nfile.txt"));
  assert.ok(text.endsWith("Done."));
  const img = JSON.stringify({
    type: "assistant",
    message: { id: "m9", content: [{ type: "server_tool_use_x", id: "q" }] },
  });
  assert.equal(renderText([img]), "[server_tool_use_x block]");
  assert.match(renderText([samples.failingBashUse, samples.failingBashResult]), /Tool Result \(error\): Exit code 1/);
});

test("renderings cap long tool inputs and results, keeping the start and saying how much was dropped", () => {
  const big = "a".repeat(20000);
  const use = JSON.stringify({
    type: "assistant",
    message: { id: "m", content: [{ type: "tool_use", id: "t1", name: "Write", input: { content: big } }] },
  });
  const res = JSON.stringify({
    type: "user",
    message: { content: [{ type: "tool_result", tool_use_id: "t1", content: big }] },
  });
  const text = renderText([use, res], { maxToolInputChars: 100 });
  const inputLen = JSON.stringify({ content: big }).length;
  assert.ok(text.includes(`… [${inputLen - 100} more characters dropped]`));
  assert.ok(text.includes(`Tool Result: ${"a".repeat(8000)}… [12000 more characters dropped]`));
  const msgs = toAiSdkMessages([use, res], { maxToolResultChars: 10 });
  const tool = msgs[1]!;
  assert.equal(tool.role, "tool");
  assert.deepEqual(tool.role === "tool" && tool.content[0]!.output, {
    type: "text",
    value: "aaaaaaaaaa… [19990 more characters dropped]",
  });
});

test("toAiSdkMessages: text part plus one tool-call part per call, then tool results, errors as error text", () => {
  const msgs = toAiSdkMessages([
    ...samples.toolsRun.slice(0, -2),
    samples.failingBashUse,
    samples.failingBashResult,
    samples.text2,
  ]);
  assert.deepEqual(msgs[0], {
    role: "assistant",
    content: [
      { type: "text", text: "I'll run `rm -rf /` no wait, ls." },
      {
        type: "tool-call",
        toolCallId: "toolu_bash1",
        toolName: "Bash",
        input: { command: "ls -la", description: "List files" },
      },
      {
        type: "tool-call",
        toolCallId: "toolu_read1",
        toolName: "Read",
        input: { file_path: "/work/x/.skills/deploy/SKILL.md" },
      },
    ],
  });
  assert.equal(msgs[1]!.role, "tool");
  assert.deepEqual(msgs[1]!.role === "tool" && msgs[1]!.content.map((p) => p.toolCallId), [
    "toolu_read1",
    "toolu_bash1",
  ]);
  assert.deepEqual(msgs[3], {
    role: "tool",
    content: [
      {
        type: "tool-result",
        toolCallId: "toolu_fail",
        toolName: "Bash",
        output: { type: "error-text", value: "Exit code 1" },
      },
    ],
  });
  assert.deepEqual(msgs.at(-1), { role: "assistant", content: [{ type: "text", text: "Done." }] });
});

test("bashCommands: only tool_use blocks, never commands quoted in text", () => {
  assert.deepEqual(bashCommands(samples.toolsRun), ["ls -la"]);
  assert.deepEqual(bashCommands([samples.text1]), []);
});

test("assertSkillWasRead: successful Read of SKILL.md or Skill call; otherwise a SkillNotReadError naming it", () => {
  assertSkillWasRead(samples.toolsRun, "deploy");
  assert.throws(
    () => assertSkillWasRead(samples.toolsRun, "other"),
    (e: unknown) => e instanceof SkillNotReadError && e.skill === "other" && e.message.includes("other"),
  );
  // called but not completed, or failed → not read
  assert.throws(() => assertSkillWasRead([samples.readUse], "deploy"), SkillNotReadError);
  const failedRead = JSON.stringify({
    type: "user",
    message: {
      content: [{ type: "tool_result", tool_use_id: "toolu_read1", content: "File does not exist.", is_error: true }],
    },
  });
  assert.throws(() => assertSkillWasRead([samples.readUse, failedRead], "deploy"), SkillNotReadError);
  const skillUse = JSON.stringify({
    type: "assistant",
    message: { id: "m", content: [{ type: "tool_use", id: "sk", name: "Skill", input: { skill: "lint" } }] },
  });
  const skillRes = JSON.stringify({
    type: "user",
    message: { content: [{ type: "tool_result", tool_use_id: "sk", content: "Launching skill: lint" }] },
  });
  assertSkillWasRead([skillUse, skillRes], "lint");
  const claudeDir = samples.readUse.replace("/work/x/.skills/deploy/", "/work/x/.claude/skills/deploy/");
  assertSkillWasRead([claudeDir, samples.readResult], "deploy");
  // a text mention is not evidence
  const mention = JSON.stringify({
    type: "assistant",
    message: { id: "m", content: [{ type: "text", text: "I read .skills/deploy/SKILL.md" }] },
  });
  assert.throws(() => assertSkillWasRead([mention], "deploy"), SkillNotReadError);
});

test("summarizeRun, sessionIdOf, cliVersionOf", () => {
  const sum = summarizeRun([
    ...samples.toolsRun,
    "garbage",
    '{"type":"weird"}',
    samples.bashUse.replace("toolu_bash1", "toolu_open"),
  ]);
  assert.equal(sum.lines, 12);
  assert.equal(sum.parsed, 10);
  assert.equal(sum.invalid, 1);
  assert.equal(sum.unknown, 1);
  assert.equal(sum.byType["assistant"], 6);
  assert.equal(sum.byType["system/init"], 1);
  assert.equal(sum.sessionId, samples.sid);
  assert.equal(sum.cliVersion, "2.1.332");
  assert.deepEqual(sum.results, [
    { subtype: "success", isError: false, terminalReason: "completed", errorKind: "ok", errors: [] },
  ]);
  assert.equal(sum.errorKind, "ok");
  assert.equal(sum.toolCalls, 3);
  assert.equal(sum.toolResults, 2);
  assert.deepEqual(sum.unpairedToolCalls, [{ id: "toolu_open", name: "Bash" }]);
  assert.deepEqual(sum.bashCommands, ["ls -la", "ls -la"]);
  assert.equal(sessionIdOf(samples.toolsRun), samples.sid);
  assert.equal(cliVersionOf(samples.toolsRun), "2.1.332");
  assert.equal(cliVersionOf([samples.lostSession]), undefined);
});
