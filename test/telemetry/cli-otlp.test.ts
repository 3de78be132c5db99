// The CLI's OTLP receiver and span filter on their own: tokens (none, revoked: 401), content types
// (415), body size (413), paths (404); spans outside the token's trace refused; attribute names
// through the allow-list, values through the run's scrubber, content kept only when asked; a kept
// process's spans moved under the attempt they started in; the env that turns the CLI's telemetry
// on or off.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  CLI_TELEMETRY_VARS,
  cliTelemetryEnv,
  createScrubber,
  redactionMarker,
  startCliOtlpReceiver,
  type CliOtlpReceiver,
} from "../../src/telemetry/index.ts";

const PROCESS = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331" };
const T0 = 1_765_000_000_000;
const nanos = (ms: number): string => `${ms}000000`;

interface SpanInput {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  startMs?: number;
  attributes?: Record<string, string | number | boolean>;
}

function otlpValue(value: string | number | boolean): Record<string, unknown> {
  if (typeof value === "string") return { stringValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
}

function request(...spans: SpanInput[]): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: {
          attributes: [
            { key: "service.name", value: { stringValue: "claude-code" } },
            { key: "user.email", value: { stringValue: "someone@example.com" } },
          ],
        },
        scopeSpans: [
          {
            scope: { name: "com.anthropic.claude_code.tracing", version: "1.0.0" },
            spans: spans.map((span, index) => ({
              traceId: span.traceId ?? PROCESS.traceId,
              spanId: span.spanId ?? `00000000000000${String(index + 1).padStart(2, "0")}`,
              parentSpanId: span.parentSpanId ?? PROCESS.spanId,
              name: span.name ?? "claude_code.interaction",
              kind: 1,
              startTimeUnixNano: nanos(span.startMs ?? T0 + 10),
              endTimeUnixNano: nanos((span.startMs ?? T0 + 10) + 5),
              attributes: Object.entries(span.attributes ?? {}).map(([key, value]) => ({
                key,
                value: otlpValue(value),
              })),
              status: { code: 0 },
            })),
          },
        ],
      },
    ],
  });
}

async function withReceiver(
  content: boolean,
  body: (receiver: CliOtlpReceiver, emitted: ReadableSpan[]) => Promise<void>,
): Promise<void> {
  const emitted: ReadableSpan[] = [];
  const receiver = await startCliOtlpReceiver({
    emit: (spans) => emitted.push(...spans),
    content,
    maxBodyBytes: 64 * 1024,
  });
  try {
    await body(receiver, emitted);
  } finally {
    await receiver.close();
  }
}

function post(
  receiver: CliOtlpReceiver,
  text: string,
  options: { token?: string; path?: string; type?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { "content-type": options.type ?? "application/json" };
  if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`;
  return fetch(`${receiver.url}${options.path ?? "/v1/traces"}`, { method: "POST", headers, body: text });
}

const scrubber = createScrubber({ env: {} }).withValues({ RUN_SECRET: "run-secret-value-123" });
const bind = (traceId: string, spanId: string, startMs: number) => ({ traceId, spanId, startMs, scrubber });

test("refusals: unknown path 404, no or revoked token 401, other content types 415, a large body 413", async () => {
  await withReceiver(false, async (receiver) => {
    const grant = receiver.issue(PROCESS);
    grant.bind(bind(PROCESS.traceId, PROCESS.spanId, T0));
    assert.equal((await post(receiver, request({}), { token: grant.token, path: "/v1/other" })).status, 404);
    assert.equal((await post(receiver, request({}))).status, 401);
    assert.equal((await post(receiver, request({}), { token: "turnstream-otlp-guess" })).status, 401);
    assert.equal(
      (await post(receiver, request({}), { token: grant.token, type: "application/x-protobuf" })).status,
      415,
    );
    assert.equal((await post(receiver, "x".repeat(70 * 1024), { token: grant.token })).status, 413);
    assert.equal((await post(receiver, "{not json", { token: grant.token })).status, 400);
    assert.equal((await post(receiver, request({}), { token: grant.token })).status, 200);
    for (const path of ["/v1/metrics", "/v1/logs"])
      assert.equal((await post(receiver, "{}", { token: grant.token, path })).status, 200);
    assert.equal(receiver.stats.dropped, 2, "metrics and logs are read and dropped");
    grant.revoke();
    assert.equal((await post(receiver, request({}), { token: grant.token })).status, 401);
    assert.equal(receiver.liveTokens, 0);
    assert.equal(receiver.stats.unauthorized, 3);
  });
});

test("spans: another trace is refused, names pass the allow-list, values the run's scrubber", async () => {
  await withReceiver(false, async (receiver, emitted) => {
    const grant = receiver.issue(PROCESS);
    grant.bind(bind(PROCESS.traceId, PROCESS.spanId, T0));
    const response = await post(
      receiver,
      request(
        {
          attributes: {
            model: "claude run-secret-value-123 ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            input_tokens: 12,
            success: true,
            user_prompt: "the user's words",
            "user.id": "abc",
            "sk-not-a-listed-name": true,
          },
        },
        { traceId: "ffffffffffffffffffffffffffffffff" },
        { name: "claude_code.token.ghp_abcdefghijklmnopqrstuvwxyz0123456789" },
      ),
      { token: grant.token },
    );
    const answer = (await response.json()) as { partialSuccess?: { rejectedSpans: number } };
    assert.equal(answer.partialSuccess?.rejectedSpans, 2, "the foreign trace and the odd name");
    assert.equal(emitted.length, 1);
    const [span] = emitted;
    assert.deepEqual(Object.keys(span!.attributes).sort(), ["input_tokens", "model", "success"]);
    assert.equal(
      span!.attributes["model"],
      `claude ${redactionMarker("RUN_SECRET")} ${redactionMarker("github_token")}`,
    );
    assert.equal(span!.attributes["input_tokens"], 12);
    assert.equal(span!.parentSpanContext?.spanId, PROCESS.spanId);
    assert.equal(span!.resource.attributes["service.name"], "claude-code");
    assert.equal(span!.resource.attributes["user.email"], undefined);
    assert.equal(receiver.stats.refusedSpans, 2);
  });
});

test("content attributes are kept, scrubbed and capped, only when asked; identity never", async () => {
  await withReceiver(true, async (receiver, emitted) => {
    const grant = receiver.issue(PROCESS);
    grant.bind(bind(PROCESS.traceId, PROCESS.spanId, T0));
    const prompt = `deploy with run-secret-value-123 ${"x".repeat(3000)}`;
    await post(receiver, request({ attributes: { user_prompt: prompt, "user.email": "a@b.c" } }), {
      token: grant.token,
    });
    const kept = String(emitted[0]!.attributes["user_prompt"]);
    assert.ok(kept.startsWith(`deploy with ${redactionMarker("RUN_SECRET")}`), kept.slice(0, 60));
    assert.ok(kept.length < 1200, "capped");
    assert.equal(emitted[0]!.attributes["user.email"], undefined);
  });
});

test("a kept process's spans move under the attempt they started in", async () => {
  await withReceiver(false, async (receiver, emitted) => {
    // The process was started by attempt 1 (TRACEPARENT names its span); attempt 2 runs on it later,
    // in another trace (a producer's): its spans go there, under its span.
    const grant = receiver.issue(PROCESS);
    grant.bind(bind(PROCESS.traceId, PROCESS.spanId, T0));
    const second = { traceId: "1234567890abcdef1234567890abcdef", spanId: "1111222233334444" };
    grant.bind(bind(second.traceId, second.spanId, T0 + 1000));
    await post(
      receiver,
      request(
        { startMs: T0 + 10, spanId: "000000000000000a" },
        { startMs: T0 + 1010, spanId: "000000000000000b" },
        { startMs: T0 + 1020, spanId: "000000000000000c", parentSpanId: "000000000000000b", name: "claude_code.tool" },
      ),
      { token: grant.token },
    );
    const byId = new Map(emitted.map((span) => [span.spanContext().spanId, span]));
    assert.equal(byId.get("000000000000000a")!.spanContext().traceId, PROCESS.traceId);
    assert.equal(byId.get("000000000000000a")!.parentSpanContext?.spanId, PROCESS.spanId);
    assert.equal(byId.get("000000000000000b")!.spanContext().traceId, second.traceId);
    assert.equal(byId.get("000000000000000b")!.parentSpanContext?.spanId, second.spanId);
    assert.equal(byId.get("000000000000000c")!.spanContext().traceId, second.traceId);
    assert.equal(byId.get("000000000000000c")!.parentSpanContext?.spanId, "000000000000000b");
  });
});

test("the CLI's env: every telemetry variable set when on, removed when off", () => {
  const off = cliTelemetryEnv(undefined);
  assert.deepEqual(Object.keys(off).sort(), [...CLI_TELEMETRY_VARS].sort());
  assert.ok(Object.values(off).every((value) => value === undefined));
  const on = cliTelemetryEnv({
    url: "http://127.0.0.1:4318",
    token: "turnstream-otlp-t",
    traceparent: `00-${PROCESS.traceId}-${PROCESS.spanId}-01`,
    metrics: false,
    content: false,
  });
  assert.equal(on["OTEL_EXPORTER_OTLP_HEADERS"], "Authorization=Bearer turnstream-otlp-t");
  assert.equal(on["TRACEPARENT"], `00-${PROCESS.traceId}-${PROCESS.spanId}-01`);
  assert.equal(on["OTEL_EXPORTER_OTLP_PROTOCOL"], "http/json");
  assert.equal(on["CLAUDE_CODE_ENABLE_TELEMETRY"], "1");
  assert.equal(on["OTEL_TRACES_EXPORTER"], "otlp");
  assert.equal(on["OTEL_METRICS_EXPORTER"], "none", "no metrics asked for while the worker keeps none");
  assert.equal(on["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"], undefined);
  assert.equal(on["OTEL_LOGS_EXPORTER"], "none");
  assert.equal(on["OTEL_LOG_USER_PROMPTS"], undefined, "the CLI keeps prompts to itself unless content is on");
  const metricsOnly = cliTelemetryEnv({
    url: "http://127.0.0.1:4318",
    token: "turnstream-otlp-t",
    traceparent: undefined,
    metrics: true,
    content: false,
  });
  assert.equal(metricsOnly["OTEL_METRICS_EXPORTER"], "otlp");
  assert.equal(metricsOnly["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"], "delta");
  assert.equal(metricsOnly["OTEL_TRACES_EXPORTER"], "none", "no spans asked for while the worker does not trace");
  assert.equal(metricsOnly["TRACEPARENT"], undefined);
});
