// Spans from the event stream, built from real CLI output: the recorded fixtures
// (test/fixtures/cli/*.jsonl) and live runs of the real CLI against the scripted model server,
// wrapped into envelopes the way the worker appends them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { hrTimeToMilliseconds } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { ObservedEvent, TraceIds } from "../../src/events/index.ts";
import {
  ATTEMPT_SPAN_NAME,
  contextFromTraceparent,
  createScrubber,
  exportTracesFromLog,
  formatTraceparent,
  injectTraceparent,
  startTelemetry,
  type Scrubber,
} from "../../src/telemetry/index.ts";
import { hermeticEnv, pinnedClaudeBin, startModelServer } from "../../src/testing/index.ts";
import { data, startSpans } from "./attempt-spans.ts";

const FIXTURES = join(import.meta.dirname, "../fixtures/cli");
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const STEP_MS = 10;

type Obj = Record<string, unknown>;

function fixtureLines(name: string): string[] {
  const text = readFileSync(join(FIXTURES, `${name}.jsonl`), "utf8");
  return text
    .split("\n")
    .map((l) => l.replace(/\r$/, ""))
    .filter((l) => l.trim() !== "");
}

/** Runs the real CLI once against a scripted model server; returns its stdout lines. */
async function runCli(
  responses: unknown[],
  opts: { args?: string[]; prompt?: string; settings?: unknown; maxRetries?: number } = {},
): Promise<string[]> {
  const server = await startModelServer({ script: { responses } });
  const hermetic = hermeticEnv({ baseUrl: server.url, sandboxed: true, maxRetries: opts.maxRetries ?? 0 });
  const cwd = mkdtempSync(join(tmpdir(), "ts-spans-cwd-"));
  try {
    const args = ["-p", "--output-format", "stream-json", "--verbose", ...(opts.args ?? [])];
    if (opts.settings !== undefined) {
      const settingsPath = join(hermetic.dirs.root, "settings.json");
      writeFileSync(settingsPath, JSON.stringify(opts.settings));
      args.push("--settings", settingsPath);
    }
    const child = spawn(pinnedClaudeBin(), args, {
      cwd,
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...hermetic.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    child.stdin.end(opts.prompt ?? "Go.");
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.resume();
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.ok(code === 0 || code === 1, `claude exited ${code}`);
    return out.split("\n").filter((l) => l.trim() !== "");
  } finally {
    await server.close();
    hermetic.cleanup();
    rmSync(cwd, { recursive: true, force: true });
  }
}

interface Wrapped {
  envelopes: ObservedEvent[];
  /** `at` (ms) of the cli.line envelope holding line i. */
  lineAt: number[];
}

/** The events a worker would write for one attempt of a turn. */
function wrap(
  lines: string[],
  options: {
    session?: string;
    turn?: string;
    attempt?: number;
    trace?: TraceIds;
    end?: "finished" | "none";
    extra?: Array<{ kind: string; data: unknown }>;
  } = {},
): Wrapped {
  const attempt = options.attempt ?? 1;
  let now = T0;
  const event = (kind: string, payload: unknown, at: number): ObservedEvent => ({
    session: options.session ?? "sess-1",
    turn: options.turn ?? "turn-1",
    attempt,
    epoch: 1,
    kind,
    at: new Date(at).toISOString(),
    data: payload,
  });
  const envelopes: ObservedEvent[] = [event("attempt.started", data.started(attempt, options.trace), now)];
  const lineAt: number[] = [];
  for (const raw of lines) {
    lineAt.push((now += STEP_MS));
    envelopes.push(event("cli.line", { raw }, now));
  }
  for (const extra of options.extra ?? []) envelopes.push(event(extra.kind, extra.data, (now += STEP_MS)));
  if (options.end !== "none") {
    envelopes.push(event("cli.exit", data.exit(0), (now += STEP_MS)));
    envelopes.push(event("turn.finished", data.finished(attempt), (now += STEP_MS)));
  }
  return { envelopes, lineAt };
}

const exporter = new InMemorySpanExporter();
const scrubber: Scrubber = createScrubber({ values: { CANARY_TOKEN: "cnry-7f3a9d2e1b4c" } });
const telemetry = startTelemetry({ scrubber, exporter, processor: "simple", env: {} });
after(() => telemetry.shutdown());

/** Feeds the events to live attempt spans (which end at the last one); returns the spans of that attempt's trace. */
function live(
  wrapped: Wrapped,
  opts: { traceparent?: string; captureContent?: boolean } = {},
): { spans: ReadableSpan[]; ids: TraceIds } {
  const first = wrapped.envelopes[0]!;
  const attemptSpans = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    session: first.session,
    turn: first.turn,
    attempt: first.attempt,
    startedAt: first.at,
    ...opts,
  });
  for (const envelope of wrapped.envelopes) attemptSpans.onEvent(envelope);
  const spans = exporter
    .getFinishedSpans()
    .filter((x) => x.spanContext().traceId === attemptSpans.trace.traceId && x.name !== "enqueue turn");
  return { spans, ids: attemptSpans.trace };
}

const ms = (t: ReadableSpan["startTime"]): number => hrTimeToMilliseconds(t);
const rootOf = (spans: ReadableSpan[]): ReadableSpan => {
  const roots = spans.filter((s) => s.name === ATTEMPT_SPAN_NAME);
  assert.equal(roots.length, 1, "one attempt span");
  return roots[0]!;
};
const tools = (spans: ReadableSpan[]): ReadableSpan[] => spans.filter((s) => s.name.startsWith("execute_tool "));
const toolById = (spans: ReadableSpan[], id: string): ReadableSpan => {
  const tool = tools(spans).find((s) => s.attributes["gen_ai.tool.call.id"] === id);
  assert.ok(tool, `a tool span for ${id}`);
  return tool;
};
const parentId = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;

/** tool_use blocks of the lines: id, name, parent tool id, line index. */
function toolUses(lines: string[]): Array<{ id: string; name: string; parent: string | undefined; index: number }> {
  const out: Array<{ id: string; name: string; parent: string | undefined; index: number }> = [];
  lines.forEach((line, index) => {
    const parsed = JSON.parse(line) as Obj;
    if (parsed["type"] !== "assistant") return;
    for (const block of ((parsed["message"] as Obj)["content"] as Obj[]) ?? []) {
      if (block["type"] === "tool_use")
        out.push({
          id: block["id"] as string,
          name: block["name"] as string,
          parent: (parsed["parent_tool_use_id"] as string | null) ?? undefined,
          index,
        });
    }
  });
  return out;
}
function toolResults(lines: string[]): Map<string, { index: number; isError: boolean }> {
  const out = new Map<string, { index: number; isError: boolean }>();
  lines.forEach((line, index) => {
    const parsed = JSON.parse(line) as Obj;
    if (parsed["type"] !== "user" || !Array.isArray((parsed["message"] as Obj)["content"])) return;
    for (const block of (parsed["message"] as Obj)["content"] as Obj[]) {
      if (block["type"] === "tool_result")
        out.set(block["tool_use_id"] as string, { index, isError: block["is_error"] === true });
    }
  });
  return out;
}
const withoutResults = (lines: string[]): string[] => lines.filter((l) => (JSON.parse(l) as Obj)["type"] !== "result");
const linesOf = (lines: string[], type: string): Obj[] =>
  lines
    .map((l) => JSON.parse(l) as Obj)
    .filter((o) => (typeof o["subtype"] === "string" ? `${o["type"]}/${o["subtype"]}` : o["type"]) === type);

function assertNoExceptionEvents(spans: ReadableSpan[]): void {
  for (const span of spans) {
    assert.ok(!span.events.some((e) => e.name === "exception"), `${span.name} has no exception event`);
    assert.ok(!span.events.some((e) => e.attributes?.["exception.stacktrace"] !== undefined));
  }
}

/** Tool spans pair with tool_use/tool_result lines exactly: names, ids, parents, timing, error status. */
function assertToolsMatchLines(lines: string[], wrapped: Wrapped, spans: ReadableSpan[]): void {
  const root = rootOf(spans);
  const uses = toolUses(lines);
  const results = toolResults(lines);
  assert.equal(tools(spans).length, uses.length, "one tool span per tool call");
  for (const use of uses) {
    const span = toolById(spans, use.id);
    assert.equal(span.name, `execute_tool ${use.name}`);
    assert.equal(span.kind, SpanKind.INTERNAL);
    assert.equal(span.attributes["gen_ai.operation.name"], "execute_tool");
    assert.equal(span.attributes["gen_ai.tool.name"], use.name);
    assert.equal(
      parentId(span),
      use.parent === undefined ? root.spanContext().spanId : toolById(spans, use.parent).spanContext().spanId,
    );
    assert.equal(ms(span.startTime), wrapped.lineAt[use.index]);
    const result = results.get(use.id);
    if (
      result !== undefined &&
      span.attributes["turnstream.tool.incomplete"] === undefined &&
      !span.events.some((e) => e.name === "task_started")
    ) {
      assert.equal(ms(span.endTime), wrapped.lineAt[result.index], `${use.name} ends at its result`);
    }
    if (result?.isError === true) {
      assert.equal(span.status.code, SpanStatusCode.ERROR);
      assert.ok(typeof span.attributes["error.type"] === "string");
    } else if (result !== undefined) {
      assert.equal(span.status.code, SpanStatusCode.UNSET);
    }
    assert.equal(span.attributes["gen_ai.tool.call.arguments"], undefined, "arguments are opt-in");
  }
}

test("bash-call: producer → invoke_agent → execute_tool Bash, GenAI attributes, timing from the envelopes", () => {
  const lines = fixtureLines("bash-call");
  const producer = telemetry.tracer.startSpan("enqueue turn", { kind: SpanKind.PRODUCER });
  const traceparent = injectTraceparent(trace.setSpan(ROOT_CONTEXT, producer));
  assert.ok(traceparent !== undefined);
  assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  producer.end();
  const wrapped = wrap(lines);
  const { spans, ids } = live(wrapped, { traceparent });
  const root = rootOf(spans);
  assert.equal(root.kind, SpanKind.CLIENT);
  assert.equal(root.spanContext().traceId, producer.spanContext().traceId, "same trace as the producer");
  assert.equal(parentId(root), producer.spanContext().spanId, "attempt span is the producer span's child");
  assert.deepEqual(ids, {
    traceId: root.spanContext().traceId,
    spanId: root.spanContext().spanId,
    parentSpanId: producer.spanContext().spanId,
  });
  const init = linesOf(lines, "system/init")[0]!;
  const result = linesOf(lines, "result/success").at(-1)!;
  const attributes = root.attributes;
  assert.equal(attributes["gen_ai.operation.name"], "invoke_agent");
  assert.equal(attributes["gen_ai.provider.name"], "anthropic");
  assert.equal(attributes["gen_ai.agent.name"], "claude-code");
  assert.equal(attributes["gen_ai.conversation.id"], init["session_id"]);
  assert.equal(attributes["gen_ai.request.model"], init["model"]);
  assert.equal(attributes["gen_ai.response.model"], Object.keys(result["modelUsage"] as Obj)[0]);
  const mu = Object.values(result["modelUsage"] as Record<string, Obj>);
  const sum = (k: string): number => mu.reduce((n, m) => n + (m[k] as number), 0);
  assert.equal(
    attributes["gen_ai.usage.input_tokens"],
    sum("inputTokens") + sum("cacheReadInputTokens") + sum("cacheCreationInputTokens"),
  );
  assert.equal(attributes["gen_ai.usage.output_tokens"], sum("outputTokens"));
  assert.equal(attributes["gen_ai.usage.cache_read.input_tokens"], sum("cacheReadInputTokens"));
  assert.equal(attributes["gen_ai.usage.cache_creation.input_tokens"], sum("cacheCreationInputTokens"));
  assert.equal(attributes["turnstream.cost.usd"], result["total_cost_usd"]);
  assert.equal(attributes["turnstream.session"], "sess-1");
  assert.equal(attributes["turnstream.turn"], "turn-1");
  assert.equal(attributes["turnstream.attempt"], 1);
  assert.equal(attributes["turnstream.cli.exit_code"], 0);
  assert.equal(root.status.code, SpanStatusCode.UNSET);
  assert.equal(attributes["error.type"], undefined);
  assert.equal(ms(root.startTime), T0);
  assert.equal(ms(root.endTime), Date.parse(wrapped.envelopes.at(-1)!.at), "ends at turn.finished");
  assert.ok(tools(spans).some((s) => s.name === "execute_tool Bash"));
  assertToolsMatchLines(lines, wrapped, spans);
  assertNoExceptionEvents(spans);
});

test("three-tools-one-message: three sibling tool spans, each closed by its own result", () => {
  const lines = fixtureLines("three-tools-one-message");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  assert.ok(tools(spans).length >= 3);
  assertToolsMatchLines(lines, wrapped, spans);
  const root = rootOf(spans);
  assert.equal(parentId(root), undefined, "no producer: the attempt span is a root");
});

test("failing-tool: the tool span is an error with error.type, the attempt is not", () => {
  const lines = fixtureLines("failing-tool");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  assertToolsMatchLines(lines, wrapped, spans);
  const failed = tools(spans).filter((s) => s.status.code === SpanStatusCode.ERROR);
  assert.ok(failed.length >= 1);
  for (const span of failed) {
    assert.equal(span.attributes["error.type"], "tool_error");
    assert.match(
      span.status.message ?? "",
      /returned an error$/,
      "no tool output in the status without captureContent",
    );
  }
  assert.equal(rootOf(spans).status.code, SpanStatusCode.UNSET);
  assertNoExceptionEvents(spans);
});

test("error-429: attempt status ERROR, error.type rate_limit, an api_retry event per retry line, scrubbed message", () => {
  const lines = fixtureLines("error-429");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  const root = rootOf(spans);
  assert.equal(root.status.code, SpanStatusCode.ERROR);
  assert.equal(root.attributes["error.type"], "rate_limit");
  assert.equal(root.attributes["http.response.status_code"], 429);
  const result = linesOf(lines, "result/success").at(-1)!;
  assert.equal(root.status.message, result["result"], "the CLI's API error text (no secret in it to scrub)");
  const retries = linesOf(lines, "system/api_retry");
  const events = root.events.filter((e) => e.name === "api_retry");
  assert.equal(events.length, retries.length);
  assert.ok(events.length >= 1, "the fixture retried once");
  assert.equal(events[0]!.attributes?.["http.response.status_code"], retries[0]!["error_status"]);
  assert.equal(events[0]!.attributes?.["error.type"], retries[0]!["error"]);
  assert.equal(root.attributes["turnstream.api_retries"], retries.length);
  assert.notEqual(root.attributes["gen_ai.response.model"], "<synthetic>");
  assertNoExceptionEvents(spans);
});

test("hook-deny: hook events, a permission_denial event from the result, the tool refused", () => {
  const lines = fixtureLines("hook-deny");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  const root = rootOf(spans);
  const hookLines = lines.filter((l) => /"subtype":"hook_(started|response)"/.test(l)).length;
  const hookEvents = root.events.filter((e) => e.name === "hook_started" || e.name === "hook_response");
  assert.equal(hookEvents.length, hookLines);
  assert.ok(hookLines >= 2, "the fixture has hook events");
  assert.ok(hookEvents.every((e) => typeof e.attributes?.["turnstream.hook.name"] === "string"));
  assert.ok(
    !hookEvents.some((e) => JSON.stringify(e.attributes).includes("permissionDecision")),
    "hook output is not copied",
  );
  const denials = (linesOf(lines, "result/success").at(-1)!["permission_denials"] as Obj[]) ?? [];
  const denialEvents = root.events.filter((e) => e.name === "permission_denial");
  assert.equal(denialEvents.length, denials.length);
  assert.ok(denials.length >= 1);
  const denied = toolById(spans, denials[0]!["tool_use_id"] as string);
  assert.equal(denialEvents[0]!.attributes?.["gen_ai.tool.name"], denials[0]!["tool_name"]);
  assert.equal(denied.status.code, SpanStatusCode.ERROR);
  assert.equal(denied.attributes["error.type"], "permission_denied");
  assert.equal(denied.attributes["turnstream.tool.permission.source"], "hook");
  assert.equal(root.status.code, SpanStatusCode.UNSET);
});

test("permission-denied: the system/permission_denied line becomes an event on the tool span", () => {
  const lines = fixtureLines("permission-denied");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  const line = linesOf(lines, "system/permission_denied")[0]!;
  const toolSpan = toolById(spans, line["tool_use_id"] as string);
  const ev = toolSpan.events.find((e) => e.name === "permission_denied");
  assert.ok(ev);
  assert.equal(ev.attributes?.["gen_ai.tool.name"], line["tool_name"]);
  assert.equal(ev.attributes?.["turnstream.permission.message"], line["message"]);
  assert.equal(toolSpan.status.code, SpanStatusCode.ERROR);
  assert.equal(toolSpan.attributes["error.type"], "permission_denied");
  assertToolsMatchLines(lines, wrapped, spans);
});

test("background-subagent: the Agent span lasts until the task's notification; two results counted", () => {
  const lines = fixtureLines("background-subagent");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  const root = rootOf(spans);
  const started = linesOf(lines, "system/task_started").find((o) => o["is_backgrounded"] === true);
  assert.ok(started);
  const agent = toolById(spans, started["tool_use_id"] as string);
  const note = lines.findIndex(
    (l) => l.includes('"subtype":"task_notification"') && l.includes(started["tool_use_id"] as string),
  );
  assert.ok(note > 0);
  assert.equal(ms(agent.endTime), wrapped.lineAt[note], "ends when the background task reports");
  assert.ok(agent.events.some((e) => e.name === "task_started"));
  assert.ok(agent.events.some((e) => e.name === "tool_result"));
  assert.equal(
    agent.events.find((e) => e.name === "task_notification")?.attributes?.["turnstream.task.status"],
    "completed",
  );
  assert.equal(agent.status.code, SpanStatusCode.UNSET);
  assert.equal(root.attributes["turnstream.result_count"], linesOf(lines, "result/success").length);
  assert.ok(linesOf(lines, "result/success").length >= 2);
  assertToolsMatchLines(lines, wrapped, spans);
});

let subagentLines: string[] | undefined;
async function subagentRun(): Promise<string[]> {
  subagentLines ??= await runCli(
    [
      {
        content: [
          {
            type: "tool_use",
            name: "Task",
            input: { description: "list", prompt: "SUBAGENT-PROMPT: run a command", subagent_type: "general-purpose" },
          },
        ],
      },
      {
        match: "SUBAGENT-PROMPT",
        content: [{ type: "tool_use", name: "Bash", input: { command: "echo from-subagent", description: "echo" } }],
      },
      { match: "from-subagent", content: [{ type: "text", text: "subagent done" }] },
      { content: [{ type: "text", text: "all done" }] },
    ],
    { args: ["--dangerously-skip-permissions"] },
  );
  return subagentLines;
}

test("real CLI: a subagent's tool call nests under the Task span that spawned it", async () => {
  const lines = await subagentRun();
  const uses = toolUses(lines);
  const nested = uses.find((u) => u.parent !== undefined);
  assert.ok(nested, "the subagent called a tool");
  const wrapped = wrap(lines);
  const { spans } = live(wrapped);
  const task = toolById(spans, nested.parent!);
  const child = toolById(spans, nested.id);
  assert.equal(child.name, "execute_tool Bash");
  assert.equal(parentId(child), task.spanContext().spanId);
  assert.equal(parentId(task), rootOf(spans).spanContext().spanId);
  assert.equal(child.attributes["turnstream.tool.parent_call_id"], nested.parent);
  assertToolsMatchLines(lines, wrapped, spans);
});

test("an attempt cut off mid-tool (no terminal event): end(reason) ends the tool span, marked incomplete, and the attempt with that error", () => {
  const lines = fixtureLines("bash-call");
  const firstResult = Math.min(...[...toolResults(lines).values()].map((r) => r.index));
  const wrapped = wrap(lines.slice(0, firstResult), { end: "none", attempt: 2 });
  const attemptSpans = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    attempt: 2,
    startedAt: wrapped.envelopes[0]!.at,
  });
  for (const envelope of wrapped.envelopes) attemptSpans.onEvent(envelope);
  attemptSpans.end("timeout");
  attemptSpans.end("other");
  const spans = exporter.getFinishedSpans().filter((x) => x.spanContext().traceId === attemptSpans.trace.traceId);
  const root = rootOf(spans);
  assert.equal(root.attributes["error.type"], "timeout", "the first end decides");
  assert.equal(root.status.message, "attempt failed: timeout");
  assert.equal(ms(root.endTime), Date.parse(wrapped.envelopes.at(-1)!.at), "ends at the last event seen");
  const toolSpans = tools(spans);
  assert.equal(toolSpans.length, 1);
  assert.equal(toolSpans[0]!.attributes["turnstream.tool.incomplete"], true);
  assert.equal(toolSpans[0]!.attributes["error.type"], "incomplete");
  assert.equal(ms(toolSpans[0]!.endTime), ms(root.endTime));
  assertNoExceptionEvents(spans);
});

/** Feeds the events to live attempt spans without ending them; returns that trace's finished spans and the spans. */
function feed(wrapped: Wrapped): { spans: () => ReadableSpan[]; s: ReturnType<typeof startSpans> } {
  const first = wrapped.envelopes[0]!;
  const attemptSpans = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    session: first.session,
    turn: first.turn,
    attempt: first.attempt,
    startedAt: first.at,
  });
  for (const envelope of wrapped.envelopes) attemptSpans.onEvent(envelope);
  return {
    s: attemptSpans,
    spans: () => exporter.getFinishedSpans().filter((x) => x.spanContext().traceId === attemptSpans.trace.traceId),
  };
}

test("turn.failed without a result: error.type and scrubbed status from the event, stderr as scrubbed events", () => {
  const wrapped = wrap([], {
    end: "none",
    turn: "turn-9",
    extra: [
      { kind: "cli.stderr", data: { text: "fatal: credential cnry-7f3a9d2e1b4c rejected" } },
      { kind: "cli.exit", data: data.exit(1) },
      {
        kind: "turn.failed",
        data: data.failed(1, "cli_error", "the CLI exited 1 without a result; token cnry-7f3a9d2e1b4c"),
      },
    ],
  });
  const { spans } = feed(wrapped);
  const root = rootOf(spans());
  assert.equal(root.attributes["error.type"], "cli_error");
  assert.equal(root.status.message, "the CLI exited 1 without a result; token [REDACTED:CANARY_TOKEN]");
  assert.equal(root.attributes["turnstream.cli.exit_code"], 1);
  assert.equal(ms(root.endTime), Date.parse(wrapped.envelopes.at(-1)!.at), "turn.failed ends the spans");
  assert.ok(root.events.some((e) => e.name === "turn.failed"));
  const ev = root.events.find((e) => e.name === "cli.stderr");
  assert.equal(ev?.attributes?.["turnstream.stderr"], "fatal: credential [REDACTED:CANARY_TOKEN] rejected");
});

test("a CLI that exits without a result: error.type no_result", () => {
  const { spans } = feed(wrap(withoutResults(fixtureLines("bash-call"))));
  const root = rootOf(spans());
  assert.equal(root.attributes["error.type"], "no_result");
  assert.equal(root.status.message, "attempt failed: no_result");
});

test("attempt.abandoned ends the spans with its reason, unless it records another (earlier) attempt", () => {
  const lines = withoutResults(fixtureLines("plain-reply"));
  const earlier = {
    kind: "attempt.abandoned",
    data: { reason: "worker_crashed", attempt: 1, retry: true, detectedBy: 2 },
  };
  const own = { kind: "attempt.abandoned", data: { reason: "lease_lost", attempt: 2, retry: true } };
  const wrapped = wrap(lines, { attempt: 2, end: "none", extra: [earlier, own] });
  const { spans } = feed(wrapped);
  const root = rootOf(spans());
  assert.equal(
    ms(root.endTime),
    Date.parse(wrapped.envelopes.at(-1)!.at),
    "ends at its own abandonment, not the earlier attempt's",
  );
  assert.equal(root.attributes["error.type"], "lease_lost");
  assert.deepEqual(
    root.events.filter((e) => e.name === "attempt.abandoned").map((e) => ms(e.time)),
    [Date.parse(wrapped.envelopes.at(-1)!.at)],
  );
});

test("turn.cancelled: error.type cancelled (its reason is prose, not a kind)", () => {
  const wrapped = wrap([], {
    end: "none",
    extra: [{ kind: "turn.cancelled", data: { reason: "cancelled while running", by: "producer", attempt: 1 } }],
  });
  const { spans } = feed(wrapped);
  const root = rootOf(spans());
  assert.equal(root.attributes["error.type"], "cancelled");
  assert.equal(root.status.message, "attempt failed: cancelled");
});

test("the request model: the turn's, else attempt.started's, else system/init's", () => {
  const lines = fixtureLines("plain-reply");
  const init = linesOf(lines, "system/init")[0]!;
  const wrapped = wrap(lines);
  wrapped.envelopes[0] = { ...wrapped.envelopes[0]!, data: { ...data.started(1), model: "from-attempt-started" } };
  assert.equal(rootOf(live(wrap(lines)).spans).attributes["gen_ai.request.model"], init["model"]);
  assert.equal(rootOf(live(wrapped).spans).attributes["gen_ai.request.model"], "from-attempt-started");
  const attemptSpans = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    startedAt: wrapped.envelopes[0]!.at,
    requestModel: "from-the-turn",
  });
  for (const envelope of wrapped.envelopes) attemptSpans.onEvent(envelope);
  const spans = exporter.getFinishedSpans().filter((x) => x.spanContext().traceId === attemptSpans.trace.traceId);
  assert.equal(rootOf(spans).attributes["gen_ai.request.model"], "from-the-turn");
});

test("trace context helpers: round trip, malformed input, a traceparent from ids", () => {
  const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const ctx = contextFromTraceparent(tp);
  assert.ok(ctx);
  assert.equal(injectTraceparent(ctx), tp);
  assert.equal(contextFromTraceparent("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"), undefined);
  assert.equal(contextFromTraceparent("garbage"), undefined);
  assert.equal(contextFromTraceparent(undefined), undefined);
  assert.equal(injectTraceparent(ROOT_CONTEXT), undefined);
  assert.equal(formatTraceparent({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331" }), tp);
});

function shape(spans: ReadableSpan[]): string[] {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const path = (span: ReadableSpan): string => {
    const parent = span.parentSpanContext === undefined ? undefined : byId.get(span.parentSpanContext.spanId);
    return (
      (parent === undefined ? "" : path(parent) + " > ") +
      span.name +
      (span.attributes["gen_ai.tool.call.id"] === undefined ? "" : `#${String(span.attributes["gen_ai.tool.call.id"])}`)
    );
  };
  return spans
    .map((span) => {
      const timing = `@${ms(span.startTime)}-${ms(span.endTime)}`;
      const status = `${span.status.code}:${span.status.message ?? ""}`;
      const events = span.events.map((e) => e.name).join(",");
      return `${path(span)} ${timing} ${status} ${String(span.attributes["error.type"] ?? "")} ev=${events}`;
    })
    .sort();
}

test("exportTracesFromLog re-emits the same structure and timing into the recorded trace", async () => {
  const lines = [...fixtureLines("bash-call")];
  const producer = telemetry.tracer.startSpan("enqueue turn");
  producer.end();
  const traceparent = injectTraceparent(producer)!;
  // Attempt 1: the live run, its ids written into attempt.started as the worker does.
  const probe = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    session: "s-re",
    turn: "t-re",
    attempt: 1,
    traceparent,
    startedAt: new Date(T0).toISOString(),
  });
  const wrapped = wrap(lines, { session: "s-re", turn: "t-re", attempt: 1, trace: probe.trace });
  for (const envelope of wrapped.envelopes) probe.onEvent(envelope);
  // A second turn of the same session in the log: the subagent run, no producer.
  const sub = await subagentRun();
  const w2 = wrap(sub, { session: "s-re", turn: "t-re-2", attempt: 1 });
  const liveSpans = exporter
    .getFinishedSpans()
    .filter((x) => x.spanContext().traceId === probe.trace.traceId && x.name !== "enqueue turn");
  const liveSub = live(w2).spans;

  const replayExporter = new InMemorySpanExporter();
  const replay = startTelemetry({ scrubber, exporter: replayExporter, processor: "simple", env: {} });
  async function* log(): AsyncGenerator<ObservedEvent> {
    yield {
      kind: "turn.queued",
      at: new Date(T0 - 5).toISOString(),
      session: "s-re",
      turn: "t-re",
      attempt: 0,
      epoch: 0,
      data: data.queued(traceparent),
    };
    for (const envelope of [...wrapped.envelopes, ...w2.envelopes]) yield envelope;
  }
  const exported = await exportTracesFromLog(log(), { tracer: replay.tracer, scrubber });
  await replay.forceFlush();
  const out = replayExporter.getFinishedSpans();
  after(() => replay.shutdown());
  assert.equal(exported.spans, out.length);
  assert.equal(exported.attempts, 2);
  const first = out.filter((s) => s.spanContext().traceId === probe.trace.traceId);
  assert.deepEqual(shape(first), shape(liveSpans), "same spans, parents, timing, status, events");
  assert.equal(parentId(rootOf(first)), producer.spanContext().spanId, "still the producer's child");
  const second = out.filter((s) => s.spanContext().traceId !== probe.trace.traceId);
  assert.deepEqual(shape(second), shape(liveSub));
  assert.deepEqual(rootOf(first).attributes, rootOf(liveSpans).attributes);
});
