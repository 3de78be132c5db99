// The parked-turn gauges of a real parked turn, scraped from the ops server's /metrics (the real
// Prometheus exporter): how many turns are parked and how long the oldest has waited, beside the
// pending-decision gauges. A parked request counts as a pending decision until it is decided; its turn
// counts as parked until a worker resumes it, and is never a job waiting to run.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "bullmq";
import { fleetGauges, METRICS, prometheusName, startMetrics } from "../../src/metrics/index.ts";
import { silentLogger } from "../../src/kernel/index.ts";
import { startOpsServer } from "../../src/ops/index.ts";
import { createScrubber } from "../../src/telemetry/index.ts";
import { rig } from "../worker/_more.ts";
import { appendCall, decideParked, PARKING_WORKER, parkedRequest } from "../worker/_parked.ts";

/** The value of a gauge without attributes in a Prometheus exposition. */
function gaugeValue(text: string, def: Parameters<typeof prometheusName>[0]): number {
  const name = prometheusName(def);
  const line = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  assert.ok(line, `${name} is exported`);
  return Number(line[1]);
}

test("fleet gauges: a parked turn is counted with its age; decided, it still counts as parked but no longer as a pending decision", async (ctx) => {
  const stage = await rig((ws: string) => ({ responses: [appendCall("PARK-ME", join(ws, "ran.txt"))] }));
  ctx.after(() => stage.dispose());
  const worker = stage.worker(PARKING_WORKER);
  const metrics = startMetrics({ env: {}, scrubber: createScrubber({ env: {} }), opsEndpoint: true, instanceId: "t" });
  const queue = new Queue("turns", { connection: stage.redis as never, prefix: stage.space.queuePrefix });
  fleetGauges(
    metrics.meter,
    { redis: stage.redis, logPrefix: stage.space.logPrefix, queue: queue as never },
    silentLogger,
  );
  const ops = await startOpsServer({ port: 0, metrics: metrics.prometheus, checks: [] });
  ctx.after(async () => {
    await ops.close();
    await metrics.shutdown();
    await queue.close();
  });
  const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();

  const before = await scrape();
  assert.equal(gaugeValue(before, METRICS.turnsParked), 0);
  assert.equal(gaugeValue(before, METRICS.turnsOldestParkedAge), 0);

  const started = Date.now();
  const { session } = await stage.producer.enqueueTurn({
    prompt: "PARK-ME: append",
    cwd: stage.ws,
    options: { supervised: true },
  });
  const request = await parkedRequest(stage.redis, stage.space.logPrefix, session);
  const parked = await scrape();
  assert.equal(gaugeValue(parked, METRICS.turnsParked), 1);
  const age = gaugeValue(parked, METRICS.turnsOldestParkedAge);
  assert.ok(age > 0 && age <= (Date.now() - started) / 1000, `age ${age} s`);
  assert.equal(gaugeValue(parked, METRICS.decisionsPending), 1, "its request waits for an operator");
  assert.equal(gaugeValue(parked, METRICS.queueOldestWaitAge), 0, "a parked turn's job is not waiting to run");

  // Decided with no worker to resume it: parked still, but nobody's decision is awaited any more.
  await worker.close({ graceMs: 1000 });
  await decideParked(stage, request, "allow");
  const decided = await scrape();
  assert.equal(gaugeValue(decided, METRICS.turnsParked), 1);
  assert.ok(gaugeValue(decided, METRICS.turnsOldestParkedAge) >= age);
  assert.equal(gaugeValue(decided, METRICS.decisionsPending), 0);
});
