// The ops endpoint alone: /readyz names the failing checks (Redis unreachable, shutting down, a
// caller's own check), /healthz reports the event loop's lag, and only GET/HEAD on three paths answer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { opsConfigFromEnv, redisReadiness, startOpsServer } from "../../src/ops/index.ts";
import { redisFor } from "../worker/_support.ts";

test("readyz: 200 while every check passes; 503 naming Redis when it does not answer, and from shutdown on", async () => {
  const redis = redisFor();
  // Nothing listens on port 1: PING never answers.
  const gone = new Redis({
    host: "127.0.0.1",
    port: 1,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 200,
  });
  gone.on("error", () => {});
  let custom: boolean | string = true;
  const up = await startOpsServer({
    port: 0,
    checks: [redisReadiness(redis), { name: "instance_taken", check: () => custom }],
    checkTimeoutMs: 1000,
  });
  const down = await startOpsServer({ port: 0, checks: [redisReadiness(gone)], checkTimeoutMs: 1000 });
  const get = async (port: number, path: string, method = "GET") => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
    return { status: res.status, body: method === "HEAD" ? "" : await res.text() };
  };
  try {
    const ok = await get(up.port, "/readyz");
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), {
      status: "ready",
      checks: { shutdown: "ok", redis: "ok", instance_taken: "ok" },
    });
    assert.equal((await get(up.port, "/readyz", "HEAD")).status, 200);

    const t0 = Date.now();
    const bad = await get(down.port, "/readyz");
    assert.equal(bad.status, 503);
    const report = JSON.parse(bad.body) as { status: string; checks: Record<string, string> };
    assert.equal(report.status, "not_ready");
    assert.notEqual(report.checks["redis"], "ok");
    assert.equal(report.checks["shutdown"], "ok");
    assert.ok(Date.now() - t0 < 5000, "bounded by the check timeout");

    custom = "another live process heartbeats under this instance id";
    const taken = JSON.parse((await get(up.port, "/readyz")).body) as { checks: Record<string, string> };
    assert.equal(taken.checks["instance_taken"], custom);
    custom = true;

    up.shuttingDown();
    const stopping = await get(up.port, "/readyz");
    assert.equal(stopping.status, 503);
    assert.equal((JSON.parse(stopping.body) as { checks: Record<string, string> }).checks["shutdown"], "shutting down");
    // Liveness is not readiness: a stopping process is still alive.
    const health = await get(up.port, "/healthz");
    assert.equal(health.status, 200);
    assert.equal((JSON.parse(health.body) as { status: string }).status, "ok");

    assert.equal((await get(up.port, "/")).status, 404);
    assert.equal((await get(up.port, "/metrics")).status, 404, "no metrics handler: metrics are off");
    assert.equal((await get(up.port, "/healthz", "POST")).status, 405);
  } finally {
    await up.close();
    await down.close();
    gone.disconnect();
    redis.disconnect();
  }
});

test("healthz: 503 while the event loop has been blocked past the bound", async () => {
  const ops = await startOpsServer({ port: 0, maxEventLoopLagMs: 200 });
  try {
    // The monitor needs a sample or two before a stall shows (a process's loop has been running long).
    await new Promise((r) => setTimeout(r, 200));
    const ok = await fetch(`http://127.0.0.1:${ops.port}/healthz`);
    assert.equal(ok.status, 200);
    const until = Date.now() + 600;
    while (Date.now() < until) {
      // blocks the loop on purpose
    }
    const res = await fetch(`http://127.0.0.1:${ops.port}/healthz`);
    assert.equal(res.status, 503);
    const body = (await res.json()) as { status: string; eventLoopLagMs: number };
    assert.equal(body.status, "event_loop_lagging");
    assert.ok(body.eventLoopLagMs >= 200, String(body.eventLoopLagMs));
  } finally {
    await ops.close();
  }
});

test("ops config: unset means no server; a bad port names the variable or the flag", () => {
  assert.equal(opsConfigFromEnv({}), undefined);
  assert.deepEqual(opsConfigFromEnv({ TURNSTREAM_OPS_PORT: "9464" }), { port: 9464, host: "127.0.0.1" });
  assert.deepEqual(opsConfigFromEnv({ TURNSTREAM_OPS_PORT: "9464", TURNSTREAM_OPS_HOST: "0.0.0.0" }, "0"), {
    port: 0,
    host: "0.0.0.0",
  });
  assert.throws(() => opsConfigFromEnv({ TURNSTREAM_OPS_PORT: "http" }), /TURNSTREAM_OPS_PORT must be a port number/);
  assert.throws(() => opsConfigFromEnv({}, "70000"), /--ops-port must be a port number/);
});
