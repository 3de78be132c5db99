// The tenant attribute of turn and cost metrics stays bounded: only tenants an operator configured
// (a limits record in Redis) are named; 50 tenants nobody configured make one `other` series, a turn
// without a tenant `none`. Which tenants are configured is read at most once per refresh interval.
// Last, a real worker's turns through the real CLI, scraped from the Prometheus endpoint.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { createScrubber } from "../../src/telemetry/index.ts";
import {
  ConfiguredTenants,
  labelledTenants,
  MAX_TENANT_LABELS,
  METRICS,
  prometheusName,
  startMetrics,
  workerInstruments,
} from "../../src/metrics/index.ts";
import { metricsObserver } from "../../src/metrics/worker.ts";
import { redisReadiness, startOpsServer } from "../../src/ops/index.ts";
import { parseLine } from "../../src/protocol/index.ts";
import { parseOperatorKeys } from "../../src/decisions/index.ts";
import { signTenantLimits, tenantLimitsKey, writeLimits } from "../../src/tenants/index.ts";
import type { RedisClient } from "../../src/log/index.ts";
import { operatorKey } from "../decisions/_support.ts";
import { rig } from "../worker/_more.ts";
import { cleanupKeys, redisFor, testSpace } from "../worker/_support.ts";

const TENANT_KEY = "turnstream.tenant";

async function configure(redis: RedisClient, logPrefix: string, tenant: string): Promise<void> {
  const limits = { tenant, maxRunning: 10, overBudget: "wait" as const, by: "ops", at: new Date().toISOString() };
  await writeLimits(redis, logPrefix, signTenantLimits(operatorKey, limits));
}

/** The result line of a run that cost `usd`. */
function resultLine(usd: number): string {
  return JSON.stringify({
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 10,
    num_turns: 1,
    result: "done",
    session_id: "5c3c1c1e-0000-4000-8000-000000000001",
    total_cost_usd: usd,
    usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
  });
}

interface Point {
  attributes: Record<string, unknown>;
  value: number;
}

test("50 tenants nobody configured are one `other` series; a configured tenant is named; no tenant is `none`", async () => {
  const space = testSpace();
  const redis = redisFor();
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 600_000 });
  const scrubber = createScrubber({ env: {} });
  const metrics = startMetrics({
    env: {},
    scrubber,
    opsEndpoint: false,
    instanceId: "tenants",
    reader: reader as never,
  });
  try {
    await configure(redis, space.logPrefix, "acme/api");
    // Fields of the hash that are not tenant names (anyone can write Redis), or would read as the
    // attribute's own values: none of them is a label.
    await redis.hset(tenantLimitsKey(space.logPrefix), "\u001b[2J<b>", "{}", "other", "{}", "none", "{}");
    const tenants = new ConfiguredTenants({ redis, logPrefix: space.logPrefix });
    await tenants.refresh();
    const observer = metricsObserver(metrics.meter, scrubber, (tenant) => tenants.label(tenant));

    const strangers = Array.from({ length: 50 }, () => `cust-${randomBytes(6).toString("hex")}`);
    const runs: Array<string | undefined> = [...strangers, "acme/api", "acme/api", undefined, "other", "none"];
    runs.forEach((tenant, index) => {
      const context = {
        session: `s${index}`,
        turn: `t${index}`,
        attempt: 1,
        epoch: 1,
        traceparent: undefined,
        requestModel: "claude-test-1",
        tenant,
        startedAt: new Date().toISOString(),
        scrub: (text: string) => text,
      };
      const attempt = observer.attempt(context)!;
      const base = { session: context.session, turn: context.turn, attempt: 1, epoch: 1, at: context.startedAt };
      attempt.onEvent({ ...base, kind: "attempt.started", data: {} });
      const raw = resultLine(0.01);
      attempt.onEvent({ ...base, kind: "cli.line", data: { raw } }, parseLine(raw));
      attempt.onEvent({ ...base, kind: "turn.finished", data: {} });
    });

    await metrics.forceFlush();
    const pointsOf = (name: string): Point[] =>
      exporter
        .getMetrics()
        .at(-1)!
        .scopeMetrics.flatMap((scope) => scope.metrics)
        .filter((metric) => metric.descriptor.name === name)
        .flatMap((metric) => metric.dataPoints as Point[]);
    const byTenant = (points: Point[]): Record<string, number> =>
      Object.fromEntries(points.map((point) => [String(point.attributes[TENANT_KEY]), point.value]));

    const ended = pointsOf(METRICS.turnsEnded.name);
    assert.equal(ended.length, 3, "one series per configured tenant, other and none");
    // A configured tenant named `other` or `none` counts as other: it cannot pass for either value.
    assert.deepEqual(byTenant(ended), { "acme/api": 2, other: 52, none: 1 });
    const cost = byTenant(pointsOf(METRICS.cost.name));
    assert.deepEqual(Object.keys(cost).sort(), ["acme/api", "none", "other"]);
    assert.ok(
      Math.abs(cost["other"]! - 0.52) < 1e-9 && Math.abs(cost["acme/api"]! - 0.02) < 1e-9,
      JSON.stringify(cost),
    );
    const exported = JSON.stringify(exporter.getMetrics());
    for (const stranger of strangers) assert.ok(!exported.includes(stranger), stranger);
    assert.ok(!exported.includes("\\u001b"));
  } finally {
    await metrics.shutdown();
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("the configured tenants are read once per refresh interval, however many turns end", async () => {
  const space = testSpace();
  const redis = redisFor();
  let reads = 0;
  // Counts the reads of the limits hash; everything else goes to the real client.
  const counting = new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "hgetall")
        return (...args: Parameters<RedisClient["hgetall"]>) => {
          reads++;
          return target.hgetall(...args);
        };
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
  try {
    const refreshMs = 400;
    const tenants = new ConfiguredTenants({ redis: counting, logPrefix: space.logPrefix, refreshMs });
    await tenants.refresh();
    assert.equal(reads, 1);
    assert.equal(tenants.label("late"), "other");
    await configure(redis, space.logPrefix, "late");
    for (let index = 0; index < 1000; index++) assert.equal(tenants.label("late"), "other", "not read again yet");
    assert.equal(reads, 1);
    await new Promise((resolve) => setTimeout(resolve, refreshMs + 50));
    tenants.label("late"); // stale: starts one read, answers from what it had
    tenants.label("late");
    await tenants.refresh();
    assert.equal(reads, 2);
    assert.equal(tenants.label("late"), "late");
    assert.equal(tenants.label(undefined), "none");
    await redis.hdel(tenantLimitsKey(space.logPrefix), "late");
    await new Promise((resolve) => setTimeout(resolve, refreshMs + 50));
    tenants.label("late");
    await tenants.refresh();
    assert.equal(tenants.label("late"), "other", "no longer configured");
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});

test("at most MAX_TENANT_LABELS configured tenants are named, the first by name, whatever the hash's order", () => {
  const names = Array.from({ length: MAX_TENANT_LABELS + 50 }, (_, index) => `t${String(index).padStart(4, "0")}`);
  const { names: kept, dropped } = labelledTenants([...names].reverse());
  assert.equal(kept.size, MAX_TENANT_LABELS);
  assert.equal(dropped, 50);
  assert.deepEqual([...kept], names.slice(0, MAX_TENANT_LABELS));
});

test("a real worker: a configured tenant's turn is counted under its name, an unconfigured one's as other", async () => {
  const done = (text: string) => ({ content: [{ type: "text", text }] });
  const testRig = await rig({ responses: [done("one"), done("two"), done("three")] });
  // Configured before the worker starts, as an operator would; one configured later is named within
  // the refresh interval (the test above).
  await configure(testRig.redis, testRig.space.logPrefix, "acme/api");
  const scrubber = createScrubber({ env: {} });
  const metrics = startMetrics({ env: {}, scrubber, opsEndpoint: true, instanceId: "tenants-worker" });
  const instruments = workerInstruments(metrics.meter, {
    scrubber,
    redis: testRig.redis,
    logPrefix: testRig.space.logPrefix,
  });
  const ops = await startOpsServer({ port: 0, metrics: metrics.prometheus, checks: [redisReadiness(testRig.redis)] });
  const operatorKeys = [operatorKey.publicKey];
  parseOperatorKeys(operatorKeys);
  try {
    testRig.worker({ operatorKeys, observers: [instruments.observer] });
    const stranger = `cust-${randomBytes(6).toString("hex")}`;
    for (const tenant of ["acme/api", stranger, undefined]) {
      const queued = await testRig.producer.enqueueTurn({ prompt: "go", cwd: testRig.ws, tenant });
      const result = await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
      assert.equal(result.status, "finished", JSON.stringify(result));
    }
    const text = await (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();
    const ended = prometheusName(METRICS.turnsEnded);
    const tenantsOf = (name: string): string[] =>
      [...text.matchAll(new RegExp(`^${name}\\{[^}]*turnstream_tenant="([^"]*)"[^}]*\\} (\\S+)$`, "gm"))]
        .map((match) => `${match[1]} ${match[2]}`)
        .sort();
    assert.deepEqual(tenantsOf(ended), ["acme/api 1", "none 1", "other 1"]);
    assert.deepEqual(
      tenantsOf(prometheusName(METRICS.cost)).map((entry) => entry.split(" ")[0]),
      ["acme/api", "none", "other"],
    );
    assert.ok(!text.includes(stranger), "an unconfigured tenant's name is in no label");
  } finally {
    await ops.close();
    await metrics.shutdown();
    await testRig.dispose();
  }
});
