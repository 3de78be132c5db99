// Log lines tied to traces, real CLI: with tracing on, what the worker logs while an attempt runs
// carries the exported attempt span's trace_id and span_id (the ids attempt.started records too), and
// what it logs outside any turn (its shutdown) carries none.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { ATTEMPT_SPAN_NAME, createLogger, createScrubber, startTelemetry } from "../../src/telemetry/index.ts";
import { dataOf, rig } from "./_more.ts";

test("worker log lines: ids of the attempt span inside the attempt, none outside", async () => {
  const scrubber = createScrubber({ env: {} });
  const exporter = new InMemorySpanExporter();
  const telemetry = startTelemetry({ scrubber, exporter, processor: "simple", env: {} });
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ scrubber, level: "debug", destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) } });
  const r = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "echo log-ids", description: "echo" } }] },
      { content: [{ type: "text", text: "done" }] },
    ],
  });
  try {
    const worker = r.worker({ telemetry, logger, scrubber, sandboxed: true });
    const t = await r.producer.enqueueTurn({ prompt: "run it", cwd: r.ws, options: { skipPermissions: true } });
    const res = await r.producer.waitForTurn(t.turn, { timeoutMs: 90_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    const events = await r.events(t.session, t.turn);
    await worker.close({ graceMs: 1000 });

    const attempt = exporter.getFinishedSpans().find((s) => s.name === ATTEMPT_SPAN_NAME);
    assert.ok(attempt !== undefined, "the attempt span was exported");
    const { traceId, spanId } = attempt.spanContext();
    const started = events.find((e) => e.kind === "attempt.started");
    assert.equal((dataOf(started!)["trace"] as { spanId: string }).spanId, spanId, "attempt.started names the same span");

    // The CLI's spawn is logged by the attempt (debug): it must carry the attempt span's ids.
    const spawned = lines.filter((l) => l["msg"] === "spawning claude");
    assert.equal(spawned.length, 1, JSON.stringify(lines.map((l) => l["msg"])));
    assert.equal(spawned[0]!["trace_id"], traceId);
    assert.equal(spawned[0]!["span_id"], spanId);
    assert.equal(spawned[0]!["trace_flags"], "01");
    // Every line with ids names this attempt's span (there was one attempt, and no other trace).
    const withIds = lines.filter((l) => "trace_id" in l);
    assert.ok(withIds.every((l) => l["trace_id"] === traceId && l["span_id"] === spanId), JSON.stringify(withIds));
    // The worker's shutdown runs outside any turn.
    const shutdown = lines.find((l) => l["msg"] === "worker shutting down");
    assert.ok(shutdown !== undefined, JSON.stringify(lines.map((l) => l["msg"])));
    assert.equal("trace_id" in shutdown, false);
    assert.equal("span_id" in shutdown, false);
  } finally {
    await r.dispose();
    await telemetry.shutdown();
  }
});

