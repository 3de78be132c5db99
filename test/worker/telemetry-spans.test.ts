// Span structure through the worker, real CLI: the producer's span (active while it enqueues) is the
// parent of the attempt span, the Bash call is a child of the attempt span, and attempt.started
// carries the attempt span's ids.
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import {
  ATTEMPT_SPAN_NAME,
  createScrubber,
  GENAI,
  RedactingSpanExporter,
  toolSpanName,
} from "../../src/telemetry/index.ts";
import { dataOf, rig } from "./_more.ts";

test("worker spans: producer span → attempt span → execute_tool Bash, ids in attempt.started", async () => {
  const cm = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(cm);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(new RedactingSpanExporter(exporter, createScrubber()))],
  });
  const tracer = provider.getTracer("test");
  const stage = await rig({
    responses: [
      { content: [{ type: "tool_use", name: "Bash", input: { command: "echo span-check", description: "echo" } }] },
      { content: [{ type: "text", text: "done" }] },
    ],
  });
  try {
    stage.worker({ tracer, sandboxed: true });
    const producerSpan = tracer.startSpan("enqueue turn");
    const queued = await context.with(trace.setSpan(context.active(), producerSpan), () =>
      stage.producer.enqueueTurn({ prompt: "run it", cwd: stage.ws, options: { skipPermissions: true } }),
    );
    producerSpan.end();
    const res = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));

    const spans = exporter.getFinishedSpans();
    const byName = (n: string): ReadableSpan[] => spans.filter((s) => s.name === n);
    const [attempt] = byName(ATTEMPT_SPAN_NAME);
    const [bash] = byName(toolSpanName("Bash"));
    assert.ok(attempt !== undefined && bash !== undefined, spans.map((s) => s.name).join(", "));
    const producerContext = producerSpan.spanContext();
    assert.equal(attempt.spanContext().traceId, producerContext.traceId);
    assert.equal(attempt.parentSpanContext?.spanId, producerContext.spanId);
    assert.equal(bash.spanContext().traceId, producerContext.traceId);
    assert.equal(bash.parentSpanContext?.spanId, attempt.spanContext().spanId);
    assert.equal(bash.attributes[GENAI.toolName], "Bash");
    assert.equal(attempt.attributes["turnstream.session"], queued.session);
    assert.equal(attempt.attributes["turnstream.attempt"], 1);
    assert.equal(attempt.attributes[GENAI.errorType], undefined);
    assert.ok(Number(attempt.attributes[GENAI.outputTokens]) >= 0);

    const events = await stage.events(queued.session, queued.turn);
    const started = events.find((e) => e.kind === "attempt.started")!;
    assert.deepEqual(dataOf(started)["trace"], {
      traceId: producerContext.traceId,
      spanId: attempt.spanContext().spanId,
      parentSpanId: producerContext.spanId,
    });
    // The attempt span starts at attempt.started's `at` and ends at turn.finished's.
    const finished = events.find((e) => e.kind === "turn.finished")!;
    const ms = (hr: [number, number]): number => hr[0] * 1000 + Math.floor(hr[1] / 1e6);
    assert.equal(ms(attempt.startTime), Date.parse(started.at));
    assert.equal(ms(attempt.endTime), Date.parse(finished.at));
  } finally {
    await stage.dispose();
    await provider.shutdown();
    context.disable();
  }
});
