// The fleet gauge of model cooldowns, scraped from the ops server's /metrics (the real Prometheus
// exporter): 0 with none, 1 while a credential cools down, 0 again once a probe's success clears it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { fleetGauges, METRICS, prometheusName, startMetrics } from "../../src/metrics/index.ts";
import { silentLogger } from "../../src/kernel/index.ts";
import { connectRedis } from "../../src/log/index.ts";
import { startOpsServer } from "../../src/ops/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import { FleetCooldown, type PolicyCall } from "../../src/gateway/index.ts";

test("turnstream.gateway.cooldowns counts the credentials cooling down fleet-wide", async (ctx) => {
  const redis = connectRedis({ env: {} });
  const prefix = `tgauge${randomBytes(4).toString("hex")}:`;
  const metrics = startMetrics({ env: {}, scrubber: createScrubber({ env: {} }), opsEndpoint: true, instanceId: "t" });
  fleetGauges(metrics.meter, { redis, logPrefix: prefix }, silentLogger);
  const ops = await startOpsServer({ port: 0, metrics: metrics.prometheus, checks: [] });
  ctx.after(async () => {
    await ops.close();
    await metrics.shutdown();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  const cooling = async (): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();
    const line = new RegExp(`^${prometheusName(METRICS.gatewayCooldowns)}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
    assert.ok(line, "the gauge is exported");
    return Number(line[1]);
  };
  assert.equal(await cooling(), 0);

  const policy = new FleetCooldown({ redis, prefix, pollMs: 20 });
  const limited: PolicyCall = {
    callId: "call-1",
    worstCaseUsd: 0.01,
    run: { session: "s" },
    model: undefined,
    path: "/v1/messages",
    credentialFingerprint: "0123456789abcdef",
  };
  policy.onUpstreamAnswer(limited, { status: 429, retryAfterMs: 200 });
  await policy.flush();
  assert.equal(await cooling(), 1);

  const probe: PolicyCall = { ...limited, callId: "call-2" };
  assert.deepEqual(await policy.beforeRequest(probe), { action: "allow" });
  assert.equal(await cooling(), 1, "still counted while its probe is out");
  policy.onUpstreamAnswer(probe, { status: 200, retryAfterMs: undefined });
  await policy.flush();
  assert.equal(await cooling(), 0);
});
