// The CLI's OTLP receiver and span filter on their own: tokens (none, revoked: 401), content types
// (415), body size (413), paths (404); spans outside the token's trace refused; attribute names
// through the allow-list, values through the run's scrubber, content kept only when asked; a kept
// process's spans moved under the attempt they started in; the env that turns the CLI's telemetry
// on or off; metrics through their allow-list (closed attribute values, cumulative series counted by
// their rises, bounded series, a forger's attributes dropped).
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  CLI_TELEMETRY_VARS,
  cliTelemetryEnv,
  createScrubber,
  CumulativeSeries,
  redactionMarker,
  startCliOtlpReceiver,
  type CliMetricIncrement,
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

interface PointInput {
  value: number;
  attributes?: Record<string, string | number | boolean>;
  startMs?: number;
}

/** An ExportMetricsServiceRequest with one monotonic sum per metric. */
function metricsRequest(temporality: 1 | 2, metrics: Record<string, PointInput[]>): string {
  return JSON.stringify({
    resourceMetrics: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "claude-code" } }] },
        scopeMetrics: [
          {
            scope: { name: "com.anthropic.claude_code", version: "2.1.332" },
            metrics: Object.entries(metrics).map(([name, points]) => ({
              name,
              sum: {
                aggregationTemporality: temporality,
                isMonotonic: true,
                dataPoints: points.map((point) => ({
                  attributes: Object.entries(point.attributes ?? {}).map(([key, value]) => ({
                    key,
                    value: otlpValue(value),
                  })),
                  startTimeUnixNano: nanos(point.startMs ?? T0),
                  timeUnixNano: nanos(T0 + 1000),
                  asDouble: point.value,
                })),
              },
            })),
          },
        ],
      },
    ],
  });
}

async function withMetricsReceiver(
  body: (receiver: CliOtlpReceiver, recorded: CliMetricIncrement[]) => Promise<void>,
): Promise<void> {
  const recorded: CliMetricIncrement[] = [];
  const receiver = await startCliOtlpReceiver({
    emit: () => undefined,
    metrics: { add: (increments) => recorded.push(...increments), watch: () => undefined },
    maxBodyBytes: 1024 * 1024,
  });
  try {
    await body(receiver, recorded);
  } finally {
    await receiver.close();
  }
}

const total = (recorded: CliMetricIncrement[], instrument: string, where: Record<string, string> = {}): number =>
  recorded
    .filter((i) => i.instrument === instrument && Object.entries(where).every(([k, v]) => i.attributes[k] === v))
    .reduce((sum, i) => sum + i.value, 0);

test("metrics: kept ones become increments with closed attribute values; the rest are counted, not kept", async () => {
  await withMetricsReceiver(async (receiver, recorded) => {
    const grant = receiver.issue(undefined);
    const identity = { "session.id": "s-1", "user.id": "u-1", "user.email": "someone@example.com" };
    const response = await post(
      receiver,
      metricsRequest(1, {
        "claude_code.lines_of_code.count": [
          { value: 3, attributes: { ...identity, type: "added", model: "claude-test-1" } },
          { value: 2, attributes: { ...identity, type: "removed" } },
        ],
        "claude_code.code_edit_tool.decision": [
          { value: 1, attributes: { tool_name: "Edit", decision: "accept", source: "config", language: "TypeScript" } },
        ],
        "claude_code.token.usage": [{ value: 24, attributes: { type: "input" } }],
        "claude_code.made_up.count": [{ value: 7 }],
        // Names an object has without being given them are no metric (nor a crash).
        constructor: [{ value: 1 }],
        ["__proto__"]: [{ value: 1 }],
        toString: [{ value: 1 }],
      }),
      { token: grant.token, path: "/v1/metrics" },
    );
    assert.equal(response.status, 200);
    assert.deepEqual(recorded, [
      { instrument: "cliLinesOfCode", attributes: { "turnstream.cli.lines.type": "added" }, value: 3 },
      { instrument: "cliLinesOfCode", attributes: { "turnstream.cli.lines.type": "removed" }, value: 2 },
      {
        instrument: "cliCodeEditDecisions",
        attributes: {
          "gen_ai.tool.name": "Edit",
          "turnstream.cli.edit.decision": "accept",
          "turnstream.cli.edit.source": "config",
          "turnstream.cli.edit.language": "TypeScript",
        },
        value: 1,
      },
    ]);
    assert.deepEqual(receiver.stats.metricPoints, { recorded: 3, notKept: 1, unknown: 4, refused: 0 });
    assert.equal(receiver.stats.dropped, 0);
  });
});

test("metrics: a cumulative series counts its rises only, a reset counts from 0, two series add up", async () => {
  await withMetricsReceiver(async (receiver, recorded) => {
    const grant = receiver.issue(PROCESS);
    const lines = (value: number, startMs = T0): string =>
      metricsRequest(2, { "claude_code.lines_of_code.count": [{ value, attributes: { type: "added" }, startMs }] });
    for (const body of [lines(3), lines(5), lines(5), lines(2, T0 + 60_000), lines(4, T0 + 60_000)])
      assert.equal((await post(receiver, body, { token: grant.token, path: "/v1/metrics" })).status, 200);
    // 3, +2, +0 from the first series; 2, +2 from the second (a new start time: the process restarted it).
    assert.equal(total(recorded, "cliLinesOfCode"), 9);
    // Each token keeps its own series: another process's cumulative 5 is 5 more.
    const other = receiver.issue(PROCESS);
    await post(receiver, lines(5), { token: other.token, path: "/v1/metrics" });
    assert.equal(total(recorded, "cliLinesOfCode"), 14);
  });
});

test("metrics (attacker): forged attributes, values and series stay out; the series stay bounded", async () => {
  await withMetricsReceiver(async (receiver, recorded) => {
    const grant = receiver.issue(PROCESS);
    const secret = `ghp_${"A".repeat(36)}`;
    const points: PointInput[] = [];
    for (let index = 0; index < 600; index++)
      points.push({
        value: 1,
        startMs: T0 + index,
        attributes: {
          tool_name: `Tool${index}`,
          decision: index % 2 === 0 ? "accept" : secret,
          language: `/home/someone/project/file${index}.ts`,
          source: "config",
          [`attr.${index}`]: secret,
          "session.id": `session-${index}`,
        },
      });
    const bad: PointInput[] = [{ value: -5 }, { value: Number.NaN }];
    const body = metricsRequest(2, { "claude_code.code_edit_tool.decision": points });
    const response = await post(receiver, body, { token: grant.token, path: "/v1/metrics" });
    assert.equal(response.status, 200);
    const negative = metricsRequest(1, { "claude_code.commit.count": bad });
    assert.equal((await post(receiver, negative, { token: grant.token, path: "/v1/metrics" })).status, 200);
    const series = new Set(recorded.map((i) => JSON.stringify(i.attributes)));
    assert.deepEqual([...series].sort(), [
      JSON.stringify({
        "gen_ai.tool.name": "other",
        "turnstream.cli.edit.decision": "accept",
        "turnstream.cli.edit.source": "config",
        "turnstream.cli.edit.language": "other",
      }),
      JSON.stringify({
        "gen_ai.tool.name": "other",
        "turnstream.cli.edit.decision": "other",
        "turnstream.cli.edit.source": "config",
        "turnstream.cli.edit.language": "other",
      }),
    ]);
    assert.ok(!JSON.stringify(recorded).includes(secret));
    // Cumulative series a process may keep are bounded: the ones past the bound are refused, and counted.
    assert.equal(total(recorded, "cliCodeEditDecisions"), CumulativeSeries.MAX);
    assert.equal(total(recorded, "cliCommits"), 0);
    assert.deepEqual(receiver.stats.metricPoints, {
      recorded: CumulativeSeries.MAX,
      notKept: 0,
      unknown: 0,
      refused: 600 - CumulativeSeries.MAX + bad.length,
    });
    // A process given no trace posts no spans.
    const spanResponse = await post(receiver, request({}), { token: receiver.issue(undefined).token });
    assert.match(await spanResponse.text(), /rejectedSpans":1/);
  });
});
