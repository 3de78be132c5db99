// exportSessionTraces (the replay command's helper): a session written to the real event log on
// Redis (a recorded CLI run, the attempt's trace ids in attempt.started, the producer's traceparent
// in turn.queued) is re-exported over OTLP from the OTEL_* environment into the recorded trace.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { exportSessionTraces } from "../../src/bin/commands/_export-traces.ts";
import { connectRedis, createEventLog, type EventInput } from "../../src/log/index.ts";
import { createScrubber, SESSION_SPAN_NAME, sessionSpanContext, startTelemetry } from "../../src/telemetry/index.ts";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { data, startSpans } from "./attempt-spans.ts";
import { startOtlpReceiver } from "./otlp-receiver.ts";

const redis = connectRedis({ url: "redis://127.0.0.1:6379", env: {} });
const prefix = `test:spans-export:${randomBytes(4).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
const session = `spans-export-${randomBytes(4).toString("hex")}`;
const receiver = await startOtlpReceiver();
after(async () => {
  await log.destroy(session);
  redis.disconnect();
  await receiver.close();
});

const lines = readFileSync(join(import.meta.dirname, "../fixtures/cli/bash-call.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "");

interface JsonSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
}

test("a session's spans come back from the log into the producer's trace, with the logged timing", async () => {
  const producerTraceId = randomBytes(16).toString("hex");
  const producerSpanId = randomBytes(8).toString("hex");
  const traceparent = `00-${producerTraceId}-${producerSpanId}-01`;
  // What the worker does: spans for the attempt (here into memory: the collector was "down"),
  // their ids into attempt.started, every event shown to them as it is written.
  const lost = new InMemorySpanExporter();
  const scrubber = createScrubber({});
  const liveTelemetry = startTelemetry({ scrubber, exporter: lost, processor: "simple", env: {} });
  await log.appendUnfenced(session, [
    { turn: "turn-1", attempt: 0, kind: "turn.queued", at: "2026-03-03T09:00:00.000Z", data: data.queued(traceparent) },
  ]);
  const { epoch, attempt } = await log.beginAttempt(session, "turn-1");
  let now = Date.parse("2026-03-03T09:00:01.000Z");
  const at = (): string => new Date((now += 25)).toISOString();
  const startedAt = at();
  const spans = startSpans({
    tracer: liveTelemetry.tracer,
    scrubber,
    session,
    turn: "turn-1",
    attempt,
    traceparent,
    startedAt,
  });
  const events = [
    { turn: "turn-1", attempt, kind: "attempt.started", at: startedAt, data: data.started(attempt, spans.trace) },
    ...lines.map((raw) => ({ turn: "turn-1", attempt, kind: "cli.line", at: at(), data: { raw } })),
    { turn: "turn-1", attempt, kind: "cli.exit", at: at(), data: data.exit(0) },
    { turn: "turn-1", attempt, kind: "turn.finished", at: at(), data: data.finished(attempt) },
  ] satisfies EventInput[];
  const appended = await log.append(session, epoch, events);
  assert.equal(appended.outcome, "appended");
  for (const event of events) spans.onEvent({ ...event, session, epoch });
  const liveSpans = lost.getFinishedSpans();
  assert.ok(
    liveSpans.some((s) => s.name === "invoke_agent claude-code"),
    "turn.finished ended the attempt span",
  );
  await liveTelemetry.shutdown();

  const res = await exportSessionTraces({
    log,
    session,
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
  });
  // The log begins with this turn: the re-export also emits the session's own span (the live side
  // here made the attempt's spans only).
  assert.deepEqual(res, { spans: liveSpans.length + 1, attempts: 1, enabled: true });
  const exported: JsonSpan[] = receiver.requests.flatMap((request) =>
    (
      (request.json as { resourceSpans?: Array<{ scopeSpans: Array<{ spans: JsonSpan[] }> }> } | undefined)
        ?.resourceSpans ?? []
    ).flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)),
  );
  const sessionRoot = sessionSpanContext(prefix, session);
  const sessionSpans = exported.filter((s) => s.name === SESSION_SPAN_NAME);
  assert.deepEqual(
    sessionSpans.map((s) => [s.traceId, s.spanId, s.parentSpanId ?? ""]),
    [[sessionRoot.traceId, sessionRoot.spanId, ""]],
  );
  const got = exported.filter((s) => s.name !== SESSION_SPAN_NAME);
  assert.deepEqual(got.map((s) => s.name).sort(), liveSpans.map((s) => s.name).sort());
  const root = got.find((s) => s.name === "invoke_agent claude-code")!;
  assert.equal(root.traceId, producerTraceId);
  assert.equal(root.parentSpanId, producerSpanId);
  assert.equal(root.startTimeUnixNano, String(BigInt(Date.parse(startedAt)) * 1_000_000n));
  assert.equal(root.endTimeUnixNano, String(BigInt(Date.parse(events.at(-1)!.at!)) * 1_000_000n));
  for (const span of got.filter((x) => x.name !== root.name)) assert.equal(span.parentSpanId, root.spanId);
  const liveTool = liveSpans.find((s) => s.name === "execute_tool Bash")!;
  const tool = got.find((s) => s.name === "execute_tool Bash")!;
  const nanos = (hr: [number, number]): string => String(BigInt(hr[0]) * 1_000_000_000n + BigInt(hr[1]));
  assert.equal(tool.startTimeUnixNano, nanos(liveTool.startTime));
  assert.equal(tool.endTimeUnixNano, nanos(liveTool.endTime));
});

test("without OTEL configuration nothing is exported", async () => {
  const res = await exportSessionTraces({ log, session, env: {} });
  assert.deepEqual(res, { spans: 0, attempts: 0, enabled: false });
});
