// Spans built from the protocol's parse of each line (what the worker passes) match the spans
// built from the raw text alone (what a re-export from the log does: the spans parse it), on every
// recorded fixture.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { hrTimeToMilliseconds } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { parseLine, type ParsedLine } from "../../src/protocol/index.ts";
import { createScrubber, startTelemetry } from "../../src/telemetry/index.ts";
import { data, startSpans } from "./attempt-spans.ts";

const FIXTURES = join(import.meta.dirname, "../fixtures/cli");
const names = readdirSync(FIXTURES)
  .filter((f) => f.endsWith(".jsonl"))
  .map((f) => f.slice(0, -6))
  .sort();

const exporter = new InMemorySpanExporter();
const scrubber = createScrubber({ values: { CANARY_TOKEN: "cnry-7f3a9d2e1b4c" } });
const telemetry = startTelemetry({ scrubber, exporter, processor: "simple", env: {} });
after(() => telemetry.shutdown());

function build(lines: string[], parsed: ParsedLine[] | undefined, captureContent: boolean): unknown[] {
  const T0 = Date.parse("2026-03-01T12:00:00.000Z");
  const attemptSpans = startSpans({
    tracer: telemetry.tracer,
    scrubber,
    startedAt: new Date(T0).toISOString(),
    captureContent,
  });
  const { traceId } = attemptSpans.trace;
  const event = (ordinal: number, kind: string, payload: unknown) => ({
    session: "sess-1",
    turn: "turn-1",
    attempt: 1,
    epoch: 1,
    kind,
    at: new Date(T0 + 10 * ordinal).toISOString(),
    data: payload,
  });
  lines.forEach((raw, i) => attemptSpans.onEvent(event(i + 1, "cli.line", { raw }), parsed?.[i]));
  attemptSpans.onEvent(event(lines.length + 1, "turn.finished", data.finished(1)));
  const spans = exporter.getFinishedSpans().filter((x) => x.spanContext().traceId === traceId);
  const byId = new Map(spans.map((x) => [x.spanContext().spanId, x.name]));
  const view = (span: ReadableSpan) => ({
    name: span.name,
    parent: span.parentSpanContext === undefined ? undefined : byId.get(span.parentSpanContext.spanId),
    start: hrTimeToMilliseconds(span.startTime),
    end: hrTimeToMilliseconds(span.endTime),
    status: span.status,
    attributes: span.attributes,
    events: span.events.map((e) => ({ name: e.name, at: hrTimeToMilliseconds(e.time), attributes: e.attributes })),
  });
  return spans.map(view).sort((a, b) => a.start - b.start || a.name.localeCompare(b.name));
}

test("spans from parsed lines equal spans from raw lines, for every fixture", () => {
  assert.ok(names.length >= 10);
  for (const name of names) {
    const lines = readFileSync(join(FIXTURES, `${name}.jsonl`), "utf8")
      .split("\n")
      .map((l) => l.replace(/\r$/, ""))
      .filter((l) => l.trim() !== "");
    const parsed = lines.map(parseLine);
    for (const capture of [false, true]) {
      const fromRaw = build(lines, undefined, capture);
      assert.ok(fromRaw.length >= 1, name);
      assert.deepEqual(build(lines, parsed, capture), fromRaw, `${name} (captureContent ${capture})`);
    }
  }
});

test("a parse of some other text is not trusted: the raw text decides", () => {
  const lines = readFileSync(join(FIXTURES, "bash-call.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "");
  const wrong = lines.map(() => parseLine('{"type":"system","subtype":"init","model":"not-this-one"}'));
  assert.deepEqual(build(lines, wrong, false), build(lines, undefined, false));
});

test("a tool call repeated after its result still makes one span (ended calls leave the open map)", () => {
  const use = JSON.stringify({
    type: "assistant",
    message: {
      id: "m1",
      role: "assistant",
      model: "claude-x",
      content: [{ type: "tool_use", id: "toolu_rep", name: "Bash", input: { command: "ls" } }],
    },
    parent_tool_use_id: null,
  });
  const result = JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_rep", content: "ok" }] },
  });
  const lines = [use, result, use, result];
  for (const parsed of [undefined, lines.map(parseLine)]) {
    const names = (build(lines, parsed, false) as Array<{ name: string }>).map((s) => s.name);
    assert.deepEqual(names.sort(), ["execute_tool Bash", "invoke_agent claude-code"]);
  }
});
