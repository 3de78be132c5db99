// Log lines tied to traces, real CLI: with tracing on, what the worker logs while an attempt runs
// carries the exported attempt span's trace_id and span_id (the ids attempt.started records too), and
// what it logs outside any turn (its start, its shutdown) carries none. In process with an injected
// exporter, and in a worker process whose OTEL_* settings start the SDK and export over OTLP.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { ATTEMPT_SPAN_NAME, createLogger, createScrubber, startTelemetry } from "../../src/telemetry/index.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { dataOf, rig } from "./_more.ts";
import { processFleet } from "./_support.ts";

test("worker log lines: ids of the attempt span inside the attempt, none outside", async () => {
  const scrubber = createScrubber({ env: {} });
  const exporter = new InMemorySpanExporter();
  const telemetry = startTelemetry({ scrubber, exporter, processor: "simple", env: {} });
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    scrubber,
    level: "debug",
    destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) },
  });
  const stage = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "echo log-ids", description: "echo" } }] },
      { content: [{ type: "text", text: "done" }] },
    ],
  });
  try {
    const worker = stage.worker({ telemetry, logger, scrubber, sandboxed: true });
    const queued = await stage.producer.enqueueTurn({
      prompt: "run it",
      cwd: stage.ws,
      options: { skipPermissions: true },
    });
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const events = await stage.events(queued.session, queued.turn);
    await worker.close({ graceMs: 1000 });

    const attempt = exporter.getFinishedSpans().find((s) => s.name === ATTEMPT_SPAN_NAME);
    assert.ok(attempt !== undefined, "the attempt span was exported");
    const { traceId, spanId } = attempt.spanContext();
    const started = events.find((e) => e.kind === "attempt.started");
    assert.equal(
      (dataOf(started!)["trace"] as { spanId: string }).spanId,
      spanId,
      "attempt.started names the same span",
    );

    // The CLI's spawn is logged by the attempt (debug): it must carry the attempt span's ids.
    const spawned = lines.filter((l) => l["msg"] === "spawning claude");
    assert.equal(spawned.length, 1, JSON.stringify(lines.map((l) => l["msg"])));
    assert.equal(spawned[0]!["trace_id"], traceId);
    assert.equal(spawned[0]!["span_id"], spanId);
    assert.equal(spawned[0]!["trace_flags"], "01");
    // Every line with ids names this attempt's span (there was one attempt, and no other trace).
    const withIds = lines.filter((l) => "trace_id" in l);
    assert.ok(
      withIds.every((l) => l["trace_id"] === traceId && l["span_id"] === spanId),
      JSON.stringify(withIds),
    );
    // The worker's shutdown runs outside any turn.
    const shutdown = lines.find((l) => l["msg"] === "worker shutting down");
    assert.ok(shutdown !== undefined, JSON.stringify(lines.map((l) => l["msg"])));
    assert.equal("trace_id" in shutdown, false);
    assert.equal("span_id" in shutdown, false);
  } finally {
    await stage.dispose();
    await telemetry.shutdown();
  }
});

/** trace and span id of every span named `name` in the receiver's OTLP/JSON requests. */
function exportedSpans(receiver: OtlpReceiver, name: string): { traceId: string; spanId: string }[] {
  type Body = { resourceSpans?: { scopeSpans?: { spans?: { name: string; traceId: string; spanId: string }[] }[] }[] };
  return receiver.requests
    .flatMap((q) => (q.json as Body | undefined)?.resourceSpans ?? [])
    .flatMap((r) => r.scopeSpans ?? [])
    .flatMap((s) => s.spans ?? [])
    .filter((s) => s.name === name)
    .map((s) => ({ traceId: s.traceId, spanId: s.spanId }));
}

test("worker process over OTLP: its stdout lines during the attempt carry the exported span's ids", async () => {
  const receiver = await startOtlpReceiver();
  const fleet = await processFleet({ responses: [{ content: [{ type: "text", text: "ok" }] }] });
  const { producer, ws } = fleet;
  try {
    const worker = await fleet.start("a", {
      TURNSTREAM_SANDBOXED: "1",
      TURNSTREAM_SHUTDOWN_GRACE_MS: "5000",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      LOG_LEVEL: "debug",
    });
    const queued = await producer.enqueueTurn({ prompt: "say ok", cwd: ws });
    const res = await producer.waitForTurn(queued.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    worker.kill("SIGTERM");
    assert.equal((await worker.exited).code, 0);

    const spans = exportedSpans(receiver, ATTEMPT_SPAN_NAME);
    assert.equal(spans.length, 1, JSON.stringify(receiver.jsonSpanNames()));
    const spawned = worker.lines.find((l) => l["msg"] === "spawning claude");
    assert.ok(spawned !== undefined, JSON.stringify(worker.lines.map((l) => l["msg"])));
    assert.equal(spawned["trace_id"], spans[0]!.traceId);
    assert.equal(spawned["span_id"], spans[0]!.spanId);
    for (const msg of ["worker ready", "signal received; stopping", "worker stopped"]) {
      const line = worker.lines.find((l) => l["msg"] === msg);
      assert.ok(line !== undefined && !("trace_id" in line) && !("span_id" in line), `${msg}: ${JSON.stringify(line)}`);
    }
  } finally {
    await fleet.dispose();
    await receiver.close();
  }
});
