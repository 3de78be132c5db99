// `turnstream export --format atif|otlp-json` on a real session: two turns of the real CLI, run by a
// worker against the scripted model server, the first with two Bash calls (one failing) whose output
// holds a secret the worker did not know (so the log has it) but the exporting process does. The ATIF
// file keeps to the RFC (every required field, ./../projector/_atif-rfc.ts) and says what the log says;
// the OTLP/JSON file has the spans `replay --export-traces` derives, in the wire's JSON shape, with the
// log's timing; neither holds the secret.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Envelope } from "../../src/log/index.ts";
import type { AtifTrajectory } from "../../src/projector/index.ts";
import { checkAtif } from "../projector/_atif-rfc.ts";
import { rig } from "../worker/_more.ts";
import { turnstream } from "./_cli.ts";

type Obj = Record<string, unknown>;

const secret = `canary-${randomBytes(8).toString("hex")}`;
const MARKER = "[REDACTED:DEPLOY_TOKEN]";
const USAGE = [
  { input_tokens: 120, output_tokens: 30, cache_read_input_tokens: 50, cache_creation_input_tokens: 9 },
  { input_tokens: 140, output_tokens: 20, cache_read_input_tokens: 60, cache_creation_input_tokens: 0 },
  { input_tokens: 160, output_tokens: 10, cache_read_input_tokens: 70, cache_creation_input_tokens: 0 },
];
const PROMPTS = ["What do the notes say?", "Anything else?"];

const lineOf = (e: Envelope): Obj => JSON.parse((e.data as { raw: string }).raw) as Obj;
const blocksOf = (line: Obj): Obj[] => {
  const content = (line["message"] as Obj | undefined)?.["content"];
  return Array.isArray(content) ? (content as Obj[]) : [];
};
/** The first cli.line whose line has a content block matching `pred`. */
const lineWith = (events: Envelope[], pred: (block: Obj) => boolean): Envelope =>
  events.find((e) => e.kind === "cli.line" && blocksOf(lineOf(e)).some(pred))!;
const nanos = (at: string): string => String(BigInt(Date.parse(at)) * 1_000_000n);

interface OtlpValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
  arrayValue?: { values: OtlpValue[] };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: OtlpValue }>;
  events?: Array<{ name: string; timeUnixNano: string }>;
  status?: { code?: number; message?: string };
}
interface OtlpRequest {
  resourceSpans: Array<{
    resource: { attributes: Array<{ key: string; value: OtlpValue }> };
    scopeSpans: Array<{ scope: { name: string }; spans: OtlpSpan[] }>;
  }>;
}

const attr = (span: OtlpSpan, key: string): OtlpValue | undefined => span.attributes.find((a) => a.key === key)?.value;

test("export --format atif and otlp-json: a real session, to the RFC and the wire's JSON, without the secret", async () => {
  const stage = await rig({
    responses: [
      {
        content: [
          { type: "text", text: "I will read the notes." },
          { type: "tool_use", name: "Bash", input: { command: "cat notes.txt", description: "Read the notes" } },
        ],
        usage: USAGE[0],
      },
      {
        content: [
          { type: "tool_use", name: "Bash", input: { command: "cat notes.txt; exit 3", description: "Read, failing" } },
        ],
        usage: USAGE[1],
      },
      { content: [{ type: "text", text: "The notes hold a deploy token." }], usage: USAGE[2] },
      { content: [{ type: "text", text: "Nothing else." }] },
    ],
  });
  try {
    writeFileSync(join(stage.ws, "notes.txt"), `deploy token: ${secret}\n`);
    stage.worker();
    const first = await stage.producer.enqueueTurn({
      prompt: PROMPTS[0]!,
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    const done = await stage.producer.waitForTurn(first.turn, { timeoutMs: 120_000 });
    assert.equal(done.status, "finished", JSON.stringify(done.event.data));
    const session = first.session;
    const second = await stage.producer.enqueueTurn({ session, prompt: PROMPTS[1]!, cwd: stage.ws });
    assert.equal((await stage.producer.waitForTurn(second.turn, { timeoutMs: 120_000 })).status, "finished");
    const events = await stage.events(session);
    assert.ok(
      events.some((e) => e.kind === "cli.line" && (e.data as { raw: string }).raw.includes(secret)),
      "the log holds the secret (the worker did not know it): only the export can take it out",
    );

    const env = { TURNSTREAM_PREFIX: stage.space.logPrefix, DEPLOY_TOKEN: secret };
    const atifFile = join(stage.space.root, "trajectory.json");
    const otlpFile = join(stage.space.root, "spans.json");
    const atifRun = await turnstream(["export", session, atifFile, "--format", "atif"], env, 120_000);
    assert.equal(atifRun.code, 0, atifRun.stderr);
    assert.match(atifRun.stderr, /exported \d+ steps of .* as an ATIF trajectory/);
    const otlpRun = await turnstream(
      ["export", session, otlpFile, "--format", "otlp-json", "--capture-content"],
      env,
      120_000,
    );
    assert.equal(otlpRun.code, 0, otlpRun.stderr);
    assert.match(otlpRun.stderr, /exported \d+ spans of 2 attempt\(s\) of .* as OTLP\/JSON/);

    checkTrajectory(readFileSync(atifFile, "utf8"), session, events);
    checkSpans(readFileSync(otlpFile, "utf8"), events);

    const badFormat = await turnstream(["export", session, "--format", "csv"], env);
    assert.equal(badFormat.code, 2);
    assert.match(badFormat.stderr, /--format must be jsonl, atif, otlp-json/);
  } finally {
    await stage.dispose();
  }
});

function checkTrajectory(text: string, session: string, events: Envelope[]): void {
  assert.ok(!text.includes(secret), "the trajectory does not hold the secret");
  assert.ok(text.includes(MARKER), "where the secret was, the marker is");
  const doc = JSON.parse(text) as AtifTrajectory;
  assert.equal(checkAtif(doc), doc.steps.length);
  assert.equal(doc.session_id, session);
  const init = events.map(cliLineOf).find((l) => l?.["subtype"] === "init")!;
  assert.equal(doc.agent.version, init["claude_code_version"]);
  assert.equal(doc.agent.model_name, init["model"]);

  assert.deepEqual(
    doc.steps.map((s) => s.source),
    ["user", "agent", "agent", "agent", "user", "agent"],
  );
  const [ask, read, fail, answer, again, last] = doc.steps;
  assert.equal(ask!.message, PROMPTS[0]);
  assert.equal(again!.message, PROMPTS[1]);
  const queued = events.filter((e) => e.kind === "turn.queued");
  assert.deepEqual([ask!.timestamp, again!.timestamp], [queued[0]!.at, queued[1]!.at]);

  // One response, one step: its text, its call, the call's result, its prompt-side usage.
  assert.equal(read!.message, "I will read the notes.");
  assert.deepEqual(
    read!.tool_calls!.map((c) => [c.function_name, c.arguments]),
    [["Bash", { command: "cat notes.txt", description: "Read the notes" }]],
  );
  const readUse = lineWith(
    events,
    (b) => b["type"] === "tool_use" && (b["input"] as Obj)["command"] === "cat notes.txt",
  );
  assert.equal(
    read!.tool_calls![0]!.tool_call_id,
    blocksOf(lineOf(readUse)).find((b) => b["type"] === "tool_use")!["id"],
  );
  assert.equal(read!.timestamp, lineWith(events, (b) => b["text"] === "I will read the notes.").at);
  const [readResult] = read!.observation!.results;
  assert.equal(readResult!.source_call_id, read!.tool_calls![0]!.tool_call_id);
  assert.equal(readResult!.content, `deploy token: ${MARKER}`);
  assert.deepEqual(readResult!.extra, { is_error: false });
  assert.deepEqual(read!.metrics, {
    prompt_tokens: 120 + 50 + 9,
    cached_tokens: 50,
    extra: { cache_creation_input_tokens: 9 },
  });
  assert.equal(read!.llm_call_count, 1);
  assert.equal(read!.model_name, init["model"]);

  assert.equal(fail!.message, "");
  assert.equal((fail!.tool_calls![0]!.arguments as Obj)["command"], "cat notes.txt; exit 3");
  const [failResult] = fail!.observation!.results;
  assert.equal(failResult!.extra!["is_error"], true);
  assert.ok(failResult!.content!.includes(MARKER), failResult!.content);
  assert.equal(fail!.metrics!.prompt_tokens, 140 + 60);

  assert.equal(answer!.message, "The notes hold a deploy token.");
  assert.equal(answer!.observation, undefined);
  assert.equal(last!.message, "Nothing else.");
  assert.deepEqual(
    doc.steps.map((s) => (s.extra as { turn?: string } | undefined)?.turn),
    [queued[0]!.turn, queued[0]!.turn, queued[0]!.turn, queued[0]!.turn, queued[1]!.turn, queued[1]!.turn],
  );

  // The totals are the CLI's own: what its result lines reported, and its session's running cost.
  const results = events.map(cliLineOf).filter((l) => l?.["type"] === "result") as Obj[];
  const sum = (key: string): number => results.reduce((n, r) => n + ((r["usage"] as Obj)[key] as number), 0);
  const final = doc.final_metrics!;
  assert.equal(final.total_completion_tokens, sum("output_tokens"));
  assert.equal(
    final.total_prompt_tokens,
    sum("input_tokens") + sum("cache_read_input_tokens") + sum("cache_creation_input_tokens"),
  );
  assert.equal(final.total_cached_tokens, sum("cache_read_input_tokens"));
  assert.ok(Math.abs(final.total_cost_usd! - (results.at(-1)!["total_cost_usd"] as number)) < 1e-12);
  assert.ok(final.total_cost_usd! > 0);
  assert.equal(final.total_steps, doc.steps.length);
}

/** The CLI line an event carries, if it is a cli.line. */
function cliLineOf(event: Envelope): Obj | undefined {
  return event.kind === "cli.line" ? lineOf(event) : undefined;
}

function checkSpans(text: string, events: Envelope[]): void {
  assert.ok(!text.includes(secret), "the spans do not hold the secret");
  assert.ok(text.includes(MARKER), "the failing call's error text, captured, has the marker where the secret was");
  const request = JSON.parse(text) as OtlpRequest;
  assert.ok(request.resourceSpans.length >= 1);
  const spans: OtlpSpan[] = [];
  for (const rs of request.resourceSpans) {
    assert.equal(
      rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue,
      "turnstream",
      "the resource names the service",
    );
    for (const ss of rs.scopeSpans) {
      assert.equal(ss.scope.name, "turnstream");
      spans.push(...ss.spans);
    }
  }
  for (const span of spans) {
    assert.match(span.traceId, /^[0-9a-f]{32}$/, `${span.name}: hex trace id`);
    assert.match(span.spanId, /^[0-9a-f]{16}$/, `${span.name}: hex span id`);
    if (span.parentSpanId !== undefined && span.parentSpanId !== "") assert.match(span.parentSpanId, /^[0-9a-f]{16}$/);
    assert.match(span.startTimeUnixNano, /^\d+$/, "int64 nanoseconds as a string");
    assert.match(span.endTimeUnixNano, /^\d+$/);
    assert.ok(BigInt(span.startTimeUnixNano) <= BigInt(span.endTimeUnixNano), `${span.name} ends after it starts`);
    assert.ok(Number.isInteger(span.kind));
    for (const { key, value } of span.attributes) {
      assert.equal(typeof key, "string");
      assert.equal(Object.keys(value).length, 1, `${key}: one typed value`);
      if ("intValue" in value) assert.match(value.intValue!, /^-?\d+$/, `${key}: int64 as a string`);
    }
  }
  assert.equal(new Set(spans.map((s) => s.spanId)).size, spans.length, "span ids are unique");

  // One attempt span per turn, opened at attempt.started; the tool spans under the first.
  const roots = spans.filter((s) => s.name === "invoke_agent claude-code");
  const started = events.filter((e) => e.kind === "attempt.started");
  assert.deepEqual(roots.map((r) => r.startTimeUnixNano).sort(), started.map((e) => nanos(e.at)).sort());
  const root = roots.find((r) => r.startTimeUnixNano === nanos(started[0]!.at))!;
  const tools = spans.filter((s) => s.name === "execute_tool Bash");
  assert.equal(tools.length, 2);
  for (const tool of tools) {
    assert.equal(tool.traceId, root.traceId);
    assert.equal(tool.parentSpanId, root.spanId, "a tool span's parent is its attempt's span");
    assert.ok(BigInt(tool.startTimeUnixNano) >= BigInt(root.startTimeUnixNano));
    assert.ok(BigInt(tool.endTimeUnixNano) <= BigInt(root.endTimeUnixNano));
    // Timed by the log: from the line with the call to the line with its result.
    const id = attr(tool, "gen_ai.tool.call.id")!.stringValue!;
    const use = lineWith(events, (b) => b["type"] === "tool_use" && b["id"] === id);
    const result = lineWith(events, (b) => b["type"] === "tool_result" && b["tool_use_id"] === id);
    assert.equal(tool.startTimeUnixNano, nanos(use.at));
    assert.equal(tool.endTimeUnixNano, nanos(result.at));
    assert.equal(attr(tool, "gen_ai.tool.name")?.stringValue, "Bash");
  }
  const failing = tools.find((t) => attr(t, "gen_ai.tool.call.arguments")?.stringValue?.includes("exit 3"))!;
  assert.equal(failing.status?.code, 2, "the failing call's span is an error");
  assert.ok(failing.status!.message!.includes(MARKER), failing.status!.message);
  const ok = tools.find((t) => t !== failing)!;
  assert.notEqual(ok.status?.code, 2);
  // The CLI's figures on the attempt span: typed, integers as strings.
  assert.match(attr(root, "gen_ai.usage.output_tokens")?.intValue ?? "", /^\d+$/);
}
