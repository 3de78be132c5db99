// Tracing runs on the standard OpenTelemetry SDK (NodeSDK): the OTEL_* variables for the sampler
// and its argument, propagators, resource attributes and detectors behave as OpenTelemetry
// documents them, measured at a real OTLP/HTTP receiver, and the scrubber still sits before the wire.
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, propagation, trace } from "@opentelemetry/api";
import { startTelemetry, tracesConfig, type Telemetry } from "../../src/telemetry/otel.ts";
import { TelemetryConfigError } from "../../src/telemetry/otlp-env.ts";
import { createScrubber } from "../../src/telemetry/scrub.ts";
import { startOtlpReceiver, type OtlpReceiver } from "./otlp-receiver.ts";

const CANARY = "otel-sdk-canary-5c1e0b7a";

interface JsonTraces {
  resourceSpans: Array<{
    resource: { attributes: Array<{ key: string; value: Record<string, unknown> }> };
    scopeSpans: Array<{ spans: Array<{ name: string }> }>;
  }>;
}

/** Starts tracing to the receiver over http/json with `extra` OTEL_* variables, runs `body`, shuts down. */
async function traced(
  receiver: OtlpReceiver,
  extra: Record<string, string>,
  body: (telemetry: Telemetry) => void,
): Promise<JsonTraces[]> {
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", ...extra };
  const telemetry = startTelemetry({ scrubber: createScrubber({ values: { PLANTED: CANARY } }), env });
  try {
    body(telemetry);
  } finally {
    await telemetry.shutdown();
  }
  return receiver.requests.filter((r) => r.path === "/v1/traces").map((r) => r.json as JsonTraces);
}

const spanNames = (bodies: JsonTraces[]): string[] =>
  bodies
    .flatMap((b) => b.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => s.name))))
    .sort();

const resourceOf = (bodies: JsonTraces[]): Record<string, unknown> =>
  Object.fromEntries(bodies[0]!.resourceSpans[0]!.resource.attributes.map((a) => [a.key, Object.values(a.value)[0]]));

async function withReceiver<T>(fn: (receiver: OtlpReceiver) => Promise<T>): Promise<T> {
  const receiver = await startOtlpReceiver();
  try {
    return await fn(receiver);
  } finally {
    await receiver.close();
  }
}

test("OTEL_TRACES_SAMPLER=always_off: spans do not record and nothing reaches the receiver", async () => {
  await withReceiver(async (receiver) => {
    const bodies = await traced(receiver, { OTEL_TRACES_SAMPLER: "always_off" }, (telemetry) => {
      const span = telemetry.tracer.startSpan("dropped");
      assert.equal(span.isRecording(), false);
      span.end();
    });
    assert.deepEqual(bodies, []);
    assert.equal(receiver.requests.length, 0);
  });
});

test("OTEL_TRACES_SAMPLER=traceidratio takes its ratio from OTEL_TRACES_SAMPLER_ARG", async () => {
  for (const [arg, expected] of [
    ["0", []],
    ["1", ["kept-0", "kept-1", "kept-2"]],
  ] as const) {
    await withReceiver(async (receiver) => {
      const bodies = await traced(
        receiver,
        { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: arg },
        (telemetry) => {
          for (let index = 0; index < 3; index++) telemetry.tracer.startSpan(`kept-${index}`).end();
        },
      );
      assert.deepEqual(spanNames(bodies), expected, `ratio ${arg}`);
    });
  }
});

test("OTEL_PROPAGATORS picks the propagator (W3C trace context by default)", async () => {
  for (const [propagators, header] of [
    [undefined, "traceparent"],
    ["b3", "b3"],
    ["b3multi", "x-b3-traceid"],
  ] as const) {
    await withReceiver(async (receiver) => {
      const carrier: Record<string, string> = {};
      await traced(receiver, propagators === undefined ? {} : { OTEL_PROPAGATORS: propagators }, (telemetry) => {
        const span = telemetry.tracer.startSpan("propagated");
        propagation.inject(trace.setSpan(context.active(), span), carrier);
        span.end();
      });
      assert.ok(header in carrier, `${propagators ?? "default"}: ${JSON.stringify(carrier)}`);
      if (header !== "traceparent") assert.ok(!("traceparent" in carrier));
    });
  }
});

test("resource: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES (scrubbed) and OTEL_NODE_RESOURCE_DETECTORS", async () => {
  await withReceiver(async (receiver) => {
    const bodies = await traced(
      receiver,
      {
        OTEL_SERVICE_NAME: "svc-from-env",
        OTEL_RESOURCE_ATTRIBUTES: `team=infra,note=${CANARY}`,
        OTEL_NODE_RESOURCE_DETECTORS: "env,host",
      },
      (t) => t.tracer.startSpan("with-resource").end(),
    );
    const resource = resourceOf(bodies);
    assert.equal(resource["service.name"], "svc-from-env");
    assert.equal(resource["team"], "infra");
    assert.equal(resource["note"], "[REDACTED:PLANTED]");
    assert.equal(typeof resource["host.name"], "string", "the host detector ran");
    assert.equal(resource["process.pid"], undefined, "the process detector was not asked for");
    assert.ok(!receiver.requests.some((r) => r.bodyText.includes(CANARY)));
  });
  await withReceiver(async (receiver) => {
    // The process detector: its pid and runtime arrive, the command line (argv can hold a prompt) does not.
    const resource = resourceOf(
      await traced(receiver, { OTEL_NODE_RESOURCE_DETECTORS: "process" }, (t) => t.tracer.startSpan("proc").end()),
    );
    assert.equal(typeof resource["process.pid"], "number", "the process detector ran");
    assert.equal(resource["process.command_args"], undefined);
    assert.equal(resource["process.command_line"], undefined);
  });
  await withReceiver(async (receiver) => {
    const resource = resourceOf(
      await traced(receiver, { OTEL_NODE_RESOURCE_DETECTORS: "none" }, (t) => t.tracer.startSpan("bare").end()),
    );
    assert.equal(resource["service.name"], "turnstream", "the fallback service name");
    assert.equal(resource["host.name"], undefined);
  });
});

test("the SDK reads the given env, not the process's, and leaves process.env as it was", async () => {
  process.env["OTEL_TRACES_SAMPLER"] = "always_off";
  try {
    await withReceiver(async (receiver) => {
      const bodies = await traced(receiver, {}, (t) => t.tracer.startSpan("sampled-on").end());
      assert.deepEqual(spanNames(bodies), ["sampled-on"]);
    });
    assert.equal(process.env["OTEL_TRACES_SAMPLER"], "always_off");
    assert.equal(process.env["OTEL_EXPORTER_OTLP_ENDPOINT"], undefined);
  } finally {
    delete process.env["OTEL_TRACES_SAMPLER"];
  }
});

test("a second SDK in the same process is refused until the first shuts down", async () => {
  await withReceiver(async (receiver) => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
    const first = startTelemetry({ scrubber: createScrubber(), env });
    assert.throws(() => startTelemetry({ scrubber: createScrubber(), env }), TelemetryConfigError);
    await first.shutdown();
    const again = startTelemetry({ scrubber: createScrubber(), env });
    await again.shutdown();
  });
});

test("grpc is a protocol: the endpoint is used as it is, with no signal path", () => {
  const config = tracesConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317",
    OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
  });
  assert.equal(config.protocol, "grpc");
  assert.equal(config.url, "http://collector:4317");
});
