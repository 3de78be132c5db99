import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseLine, parseText } from "../../src/protocol/index.ts";
import * as samples from "./sample-lines.ts";

test("known lines keep every field and their raw text; type joins subtype", () => {
  const withExtra = JSON.stringify({ ...JSON.parse(samples.init), future_field: { x: 1 } });
  const parsed = parseLine(withExtra);
  assert.equal(parsed.category, "known");
  assert.equal(parsed.type, "system/init");
  assert.equal(parsed.raw, withExtra);
  assert.deepEqual(parsed.line, JSON.parse(withExtra));
  assert.equal(parseLine(samples.success).type, "result/success");
  assert.equal(parseLine(samples.bashUse).type, "assistant");
});

test("every system subtype and line type the CLI prints is known", () => {
  const lines = [
    {
      type: "system",
      subtype: "api_retry",
      attempt: 1,
      max_retries: 10,
      retry_delay_ms: 500,
      error_status: 529,
      error: "overloaded",
    },
    { type: "system", subtype: "status", status: "compacting" },
    { type: "system", subtype: "thinking_tokens", tokens: 12 },
    { type: "system", subtype: "permission_denied", tool_name: "Bash" },
    { type: "system", subtype: "hook_started", hook_id: "h", hook_name: "PreToolUse:Bash", hook_event: "PreToolUse" },
    { type: "system", subtype: "hook_response", hook_id: "h", outcome: "success", exit_code: 0 },
    { type: "system", subtype: "task_started", task_id: "t", tool_use_id: "toolu_1", description: "d" },
    { type: "system", subtype: "task_progress", task_id: "t", tool_use_id: null },
    { type: "system", subtype: "task_updated", task_id: "t" },
    { type: "system", subtype: "task_notification", task_id: "t", status: "completed" },
    { type: "system", subtype: "background_tasks_changed", tasks: [] },
    { type: "system", subtype: "compact_boundary", compact_metadata: { trigger: "auto", pre_tokens: 100 } },
    { type: "stream_event", event: { type: "content_block_delta", index: 0 }, parent_tool_use_id: null },
    { type: "rate_limit_event", rate_limit_info: { status: "allowed" } },
    { type: "control_request", request_id: "r1", request: { subtype: "can_use_tool", tool_name: "Bash", input: {} } },
    { type: "control_response", response: { subtype: "success", request_id: "r1" } },
    { type: "result", subtype: "error_max_budget_usd", is_error: true },
    { type: "user", message: { role: "user", content: "plain text prompt" } },
  ];
  for (const line of lines) {
    const parsed = parseLine(JSON.stringify(line));
    assert.equal(parsed.category, "known", `${JSON.stringify(line)}: ${JSON.stringify(parsed)}`);
  }
  for (const line of samples.toolsRun) assert.equal(parseLine(line).category, "known", line);
});

test("unknown types and subtypes are kept with their type; a bad shape of a known type lists issues", () => {
  const unknownSubtype = parseLine('{"type":"system","subtype":"brand_new","x":1}');
  assert.equal(unknownSubtype.category, "unknown");
  assert.equal(unknownSubtype.type, "system/brand_new");
  assert.deepEqual(unknownSubtype.line, { type: "system", subtype: "brand_new", x: 1 });
  const unknownType = parseLine('{"type":"telemetry_blob"}');
  assert.equal(unknownType.category, "unknown");
  assert.equal(unknownType.type, "telemetry_blob");
  const badContent = parseLine('{"type":"assistant","message":{"content":"not an array"}}');
  assert.equal(badContent.category, "unknown");
  assert.ok(
    badContent.category === "unknown" &&
      badContent.issues !== undefined &&
      badContent.issues[0]!.startsWith("message.content"),
  );
  assert.equal(parseLine('{"no":"type"}').type, "untyped");
});

test("non-JSON and non-object JSON become invalid records holding the raw text", () => {
  for (const raw of ["not json", '{"type":"assistant"', "[1,2]", "42", "null", '"str"', "\u0000\uFFFD"]) {
    const parsed = parseLine(raw);
    assert.equal(parsed.category, "invalid", raw);
    assert.equal(parsed.raw, raw);
    assert.equal(parsed.type, "invalid");
  }
});

test("parseText splits a whole transcript", () => {
  const ps = parseText(samples.toolsRun.join("\r\n") + "\n\n");
  assert.equal(ps.length, samples.toolsRun.length);
  assert.deepEqual(
    ps.map((p) => p.raw),
    samples.toolsRun,
  );
});

test("fuzz: parseLine never throws and always keeps raw", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        fc.json(),
        fc.string().map((x) => `{"type":"${x}"`),
      ),
      (raw) => {
        const parsed = parseLine(raw);
        assert.equal(parsed.raw, raw);
        assert.ok(["known", "unknown", "invalid"].includes(parsed.category));
      },
    ),
    { numRuns: 500 },
  );
});

test("truncated JSON of real lines is invalid, never a throw", () => {
  for (const line of samples.toolsRun) {
    for (let length = 0; length < line.length; length += 7)
      assert.equal(parseLine(line.slice(0, length)).category, "invalid");
  }
});
