import { test } from "node:test";
import assert from "node:assert/strict";
import { SpanStatusCode, context, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { startTelemetry, tracesConfig } from "../../src/telemetry/otel.ts";
import { TelemetryConfigError } from "../../src/telemetry/otlp-env.ts";
import { createScrubber } from "../../src/telemetry/scrub.ts";
import { startOtlpReceiver } from "./otlp-receiver.ts";

const CANARY = 'otel-canary-"value"-7f3a9';
const SHAPED = "ghp_CANARYcanaryCANARYcanary0123456789";

/** The SDK's spans carry their attributes; checked here rather than claiming the SDK's span type. */
function sdkAttributes(span: object): Record<string, unknown> {
  const attributes: unknown = Reflect.get(span, "attributes");
  assert.ok(typeof attributes === "object" && attributes !== null, "an SDK span carries attributes");
  return { ...attributes };
}

function dump(span: ReadableSpan): string {
  return JSON.stringify({
    name: span.name,
    status: span.status,
    attributes: span.attributes,
    events: span.events,
    links: span.links.map((l) => l.attributes),
    resource: span.resource.attributes,
  });
}

test("tracing is off unless an endpoint or a traces exporter is configured", () => {
  assert.equal(tracesConfig({}).enabled, false);
  assert.equal(tracesConfig({ OTEL_SERVICE_NAME: "x" }).enabled, false);
  const base = tracesConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" });
  assert.equal(base.enabled, true);
  assert.equal(base.url, "http://collector:4318/v1/traces");
  assert.equal(base.protocol, "http/protobuf");
  assert.equal(
    tracesConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/custom" }).url,
    "http://c:4318/custom",
  );
  assert.equal(tracesConfig({ OTEL_TRACES_EXPORTER: "otlp" }).url, "http://localhost:4318/v1/traces");
  assert.equal(
    tracesConfig({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).enabled,
    false,
  );
  assert.equal(
    tracesConfig({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).enabled,
    false,
  );
  const full = tracesConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_EXPORTER_OTLP_HEADERS: "x-team=abc%20def,authorization=Bearer zzz",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=from-attrs",
    OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
  });
  assert.equal(full.protocol, "http/json");
  assert.deepEqual(full.headers, { "x-team": "abc def", authorization: "Bearer zzz" });
  assert.equal(full.serviceName, "from-attrs");
  assert.equal(full.timeoutMillis, 2500);
  assert.equal(
    tracesConfig({ OTEL_SERVICE_NAME: "svc", OTEL_RESOURCE_ATTRIBUTES: "service.name=other" }).serviceName,
    "svc",
  );
});

test("bad OTEL_* values fail with the variable named and what to set", () => {
  const bad: Array<[Record<string, string>, string]> = [
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "thrift" },
      "OTEL_EXPORTER_OTLP_PROTOCOL",
    ],
    [{ OTEL_TRACES_EXPORTER: "zipkin" }, "OTEL_TRACES_EXPORTER"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_RESOURCE_ATTRIBUTES: "novalue" }, "OTEL_RESOURCE_ATTRIBUTES"],
  ];
  for (const [env, variable] of bad) {
    assert.throws(
      () => tracesConfig(env),
      (err: unknown) =>
        err instanceof TelemetryConfigError && err.variable === variable && err.message.includes(variable),
    );
  }
});

test("when off, the tracer is a no-op and shutdown resolves", async () => {
  const telemetry = startTelemetry({ scrubber: createScrubber(), env: {} });
  assert.equal(telemetry.enabled, false);
  const span = telemetry.tracer.startSpan("nothing");
  assert.equal(span.isRecording(), false);
  span.end();
  await telemetry.shutdown();
});

test("redacting exporter: no secret in name, attributes, status, events, links or resource reaches the exporter", async () => {
  const env = { RUN_API_KEY: CANARY, OTEL_RESOURCE_ATTRIBUTES: `deployment.note=${encodeURIComponent(CANARY)}` };
  const scrubber = createScrubber({ env });
  const memory = new InMemorySpanExporter();
  const telemetry = startTelemetry({ scrubber, env, exporter: memory, processor: "simple" });
  assert.equal(telemetry.enabled, true);
  const linked = telemetry.tracer.startSpan("linked");
  linked.end();
  const span = telemetry.tracer.startSpan(`turn ${CANARY}`, {
    attributes: {
      "cli.prompt": `prompt with ${CANARY}`,
      "cli.args": ["--model", `x-${SHAPED}`],
      "http.request.header.authorization": "short",
      "turnstream.session": "sess-visible-123",
      "gen_ai.usage.input_tokens": 42,
    },
    links: [{ context: linked.spanContext(), attributes: { why: `because ${CANARY}` } }],
  });
  span.addEvent(`event ${SHAPED}`, { line: `{"text":${JSON.stringify(CANARY)}}` });
  span.recordException(new Error(`failed: ${CANARY}`));
  span.setStatus({ code: SpanStatusCode.ERROR, message: `status ${CANARY}` });
  span.end();
  await telemetry.forceFlush();
  const spans = memory.getFinishedSpans();
  const turn = spans.find((s) => s.name.startsWith("turn "));
  assert.ok(turn !== undefined, "the span reached the inner exporter");
  const text = spans.map(dump).join("\n");
  for (const bad of [CANARY, JSON.stringify(CANARY).slice(1, -1), encodeURIComponent(CANARY), SHAPED, "short"]) {
    assert.ok(!text.includes(bad), `${bad} reached the exporter: ${text}`);
  }
  assert.equal(turn.name, "turn [REDACTED:RUN_API_KEY]");
  assert.equal(turn.attributes["turnstream.session"], "sess-visible-123");
  assert.equal(turn.attributes["gen_ai.usage.input_tokens"], 42);
  assert.deepEqual(turn.attributes["cli.args"], ["--model", "x-[REDACTED:github_token]"]);
  assert.equal(turn.attributes["http.request.header.authorization"], "[REDACTED:http.request.header.authorization]");
  assert.equal(turn.status.message, "status [REDACTED:RUN_API_KEY]");
  const exc = turn.events.find((e) => e.name === "exception");
  assert.ok(exc !== undefined);
  assert.equal(exc.attributes?.["exception.stacktrace"], undefined, "stack traces are dropped");
  assert.equal(exc.attributes?.["exception.message"], "failed: [REDACTED:RUN_API_KEY]");
  assert.equal(turn.resource.attributes["deployment.note"], "[REDACTED:RUN_API_KEY]");
  assert.equal(turn.resource.attributes["service.name"], "turnstream");
  assert.equal(turn.links[0]?.context.spanId, linked.spanContext().spanId);
  assert.equal(turn.spanContext().traceId, span.spanContext().traceId);
  await telemetry.shutdown();
});

test("redacting exporter: a span with nothing to scrub goes through as it is; one secret copies only that span", async () => {
  const scrubber = createScrubber({ values: { PLANTED: CANARY } });
  const memory = new InMemorySpanExporter();
  const seen: ReadableSpan[] = [];
  const telemetry = startTelemetry({
    scrubber,
    env: {},
    processor: "simple",
    exporter: {
      export: (spans, done) => (seen.push(...spans), memory.export(spans, done)),
      shutdown: () => memory.shutdown(),
    },
  });
  const clean = telemetry.tracer.startSpan("execute_tool Bash", {
    attributes: { "gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": "toolu_1" },
  });
  clean.addEvent("tool_result", { ok: true });
  clean.end();
  // The secret sits in the middle: keys before and after it must survive the copy, in order.
  const dirty = telemetry.tracer.startSpan("execute_tool Bash", {
    attributes: { first: "a", second: `x ${CANARY}`, third: 3, fourth: "d" },
  });
  dirty.end();
  const stacked = telemetry.tracer.startSpan("thrown");
  stacked.recordException(new Error("plain words"));
  stacked.end();
  await telemetry.forceFlush();
  assert.equal(seen.length, 3);
  assert.equal(seen[0], clean, "the clean span is the SDK's own object");
  assert.notEqual(seen[1], dirty);
  assert.deepEqual(Object.entries(seen[1]!.attributes), [
    ["first", "a"],
    ["second", "x [REDACTED:PLANTED]"],
    ["third", 3],
    ["fourth", "d"],
  ]);
  assert.equal(sdkAttributes(dirty)["second"], `x ${CANARY}`, "the SDK's span is not modified");
  const exc = seen[2]!.events.find((e) => e.name === "exception");
  assert.equal(exc?.attributes?.["exception.message"], "plain words");
  assert.equal(
    exc?.attributes?.["exception.stacktrace"],
    undefined,
    "a stack is dropped even when nothing else changes",
  );
  await telemetry.shutdown();
});

for (const protocol of ["http/json", "http/protobuf"] as const) {
  test(`OTLP over ${protocol} to a loopback receiver: span names arrive, canaries never do`, async () => {
    const receiver = await startOtlpReceiver();
    try {
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_SERVICE_NAME: "turnstream-test",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test",
        ANTHROPIC_API_KEY: CANARY,
      };
      const scrubber = createScrubber({ env });
      const telemetry = startTelemetry({ scrubber, env });
      assert.equal(telemetry.enabled, true);
      const parent = telemetry.tracer.startSpan("turnstream.turn", { attributes: { "cli.env.key": CANARY } });
      const child = telemetry.tracer.startSpan(
        "turnstream.cli.line",
        { attributes: { "cli.line": JSON.stringify({ type: "assistant", text: `key ${CANARY} and ${SHAPED}` }) } },
        trace.setSpan(context.active(), parent),
      );
      child.recordException(new Error(`boom ${CANARY}`));
      child.end();
      parent.setStatus({ code: SpanStatusCode.ERROR, message: `failed with ${SHAPED}` });
      parent.end();
      await telemetry.shutdown();
      const req = await receiver.waitFor((r) => r.path === "/v1/traces");
      assert.match(req.contentType, protocol === "http/json" ? /application\/json/ : /application\/x-protobuf/);
      const all = Buffer.concat(receiver.requests.map((r) => r.body)).toString("utf8");
      assert.ok(all.includes("turnstream.turn") && all.includes("turnstream.cli.line"), "span names arrive");
      assert.ok(all.includes("turnstream-test") && all.includes("deployment.environment"), "resource arrives");
      assert.ok(all.includes("[REDACTED:ANTHROPIC_API_KEY]"), "the markers arrive in place of the secret");
      for (const bad of [CANARY, JSON.stringify(CANARY).slice(1, -1), SHAPED, "otel-canary"]) {
        assert.ok(!all.includes(bad), `${bad} reached the wire`);
      }
      if (protocol === "http/json")
        assert.deepEqual(receiver.jsonSpanNames().sort(), ["turnstream.cli.line", "turnstream.turn"]);
    } finally {
      await receiver.close();
    }
  });
}
