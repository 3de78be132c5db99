// Metrics of a real worker: three turns through the real CLI against the scripted model server (one
// finished in warm mode, one failed with invalid_request, one overloaded on its first attempt and retried), then
// /metrics scraped from the ops server (the real Prometheus exporter) and OTLP/JSON pushed to a real
// receiver, both checked against what the log says the turns did.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CLI_METRICS, createScrubber } from "../../src/telemetry/index.ts";
import { METRICS, prometheusName, startMetrics, workerInstruments } from "../../src/metrics/index.ts";
import { redisReadiness, startOpsServer } from "../../src/ops/index.ts";
import { Queue } from "bullmq";
import { rig, cliLines } from "../worker/_more.ts";
import { startOtlpReceiver } from "../telemetry/otlp-receiver.ts";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[label[1]!] = label[2]!;
    out.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return out;
}

const sum = (samples: Sample[], name: string, where: Record<string, string> = {}): number =>
  samples
    .filter((s) => s.name === name && Object.entries(where).every(([key, value]) => s.labels[key] === value))
    .reduce((a, s) => a + s.value, 0);

test("worker metrics: Prometheus and OTLP report what the turns did", async () => {
  const testRig = await rig({
    responses: [
      { content: [{ type: "text", text: "alpha done" }] },
      { error: { status: 400, type: "invalid_request_error", message: "prompt is too long" } },
      { error: { status: 529, type: "overloaded_error", message: "slow down" } },
      { content: [{ type: "text", text: "charlie done" }] },
    ],
  });
  const receiver = await startOtlpReceiver();
  const scrubber = createScrubber({ env: {} });
  const env = {
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${receiver.url}/v1/metrics`,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "http/json",
    OTEL_METRIC_EXPORT_INTERVAL: "600000",
  };
  const metrics = startMetrics({ env, scrubber, opsEndpoint: true, instanceId: "metrics-test-worker" });
  const queue = new Queue("turns", { connection: testRig.redis as never, prefix: testRig.space.queuePrefix });
  const instruments = workerInstruments(metrics.meter, {
    scrubber,
    redis: testRig.redis,
    logPrefix: testRig.space.logPrefix,
    queue: queue as never,
  });
  const ops = await startOpsServer({ port: 0, metrics: metrics.prometheus, checks: [redisReadiness(testRig.redis)] });
  try {
    const worker = testRig.worker({
      concurrency: 2,
      retry: { baseMs: 100, maxMs: 500 },
      observers: [instruments.observer],
      onLogAppend: instruments.onLogAppend,
      cliMetrics: instruments.cliMetrics,
    });
    instruments.bindWorker(worker);
    // One after another, so each takes the scripted responses in order.
    const turns = [];
    const results = [];
    for (const prompt of ["alpha please", "bravo please", "charlie please"]) {
      // The first turn's session is in warm mode: its process is kept after the turn.
      const queued = await testRig.producer.enqueueTurn({
        prompt,
        cwd: testRig.ws,
        options: { model: "claude-test-1", warm: prompt.startsWith("alpha") },
      });
      turns.push(queued);
      results.push(await testRig.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 }));
    }
    assert.deepEqual(
      results.map((x) => [x.status, x.errorKind ?? null]),
      [
        ["finished", null],
        ["failed", "invalid_request"],
        ["finished", null],
      ],
    );

    // What the log says: every attempt's result line (cost, tokens) and how many attempts printed a line.
    let cost = 0;
    let input = 0;
    let output = 0;
    let attempts = 0;
    let attemptsWithLines = 0;
    for (const turn of turns) {
      const events = await testRig.events(turn.session, turn.turn);
      const nums = [...new Set(events.filter((e) => e.kind === "attempt.started").map((e) => e.attempt))];
      attempts += nums.length;
      for (const attempt of nums) {
        const lines = cliLines(events, attempt);
        if (lines.length > 0) attemptsWithLines++;
        for (const result of lines.filter((x) => x["type"] === "result")) {
          cost += Number(result["total_cost_usd"] ?? 0);
          const usage = (result["usage"] ?? {}) as Record<string, number>;
          input += usage["input_tokens"] ?? 0;
          output += usage["output_tokens"] ?? 0;
        }
      }
    }
    assert.equal(attempts, 4);
    assert.ok(cost > 0 && input > 0 && output > 0, "the scripted server reports usage");

    const res = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const samples = parseProm(text);
    // The names prometheusName predicts are the ones the real exporter wrote.
    // The CLI's own counters get a series once a CLI reports what they count (edits, commits):
    // test/worker/cli-metrics.test.ts checks them.
    const fedByTheCli = new Set<string>(Object.values(CLI_METRICS).map((cli) => METRICS[cli.instrument].name));
    for (const def of Object.values(METRICS)) {
      if (def === METRICS.projectorLag || fedByTheCli.has(def.name)) continue;
      assert.match(text, new RegExp(`^# TYPE ${prometheusName(def)} (counter|gauge|histogram)$`, "m"), def.name);
    }
    const ended = prometheusName(METRICS.turnsEnded);
    assert.equal(sum(samples, ended, { turnstream_turn_outcome: "finished" }), 2);
    assert.equal(sum(samples, ended, { turnstream_turn_outcome: "failed", error_type: "invalid_request" }), 1);
    assert.equal(sum(samples, ended), 3);
    const att = prometheusName(METRICS.attempts);
    assert.equal(sum(samples, att, { turnstream_attempt_outcome: "finished" }), 2);
    assert.equal(sum(samples, att, { turnstream_attempt_outcome: "failed" }), 1);
    assert.equal(
      sum(samples, att, { turnstream_attempt_outcome: "abandoned", turnstream_abandon_reason: "overloaded" }),
      1,
    );
    assert.equal(sum(samples, prometheusName(METRICS.retries), { error_type: "overloaded" }), 1);
    assert.equal(sum(samples, `${prometheusName(METRICS.attemptDuration)}_count`), 4);
    assert.equal(sum(samples, `${prometheusName(METRICS.cliFirstLineDuration)}_count`), attemptsWithLines);
    assert.equal(sum(samples, prometheusName(METRICS.cliSlotsLimit)), 2);
    assert.equal(sum(samples, prometheusName(METRICS.cliSlotsUsage)), 0);
    assert.deepEqual(
      samples
        .filter((x) => x.name === prometheusName(METRICS.warmStarts))
        .map((x) => [x.labels["turnstream_warm_start"], x.value]),
      [["none", 1]],
    );
    assert.equal(sum(samples, prometheusName(METRICS.warmKept)), 1, "alpha's process is kept");
    assert.ok(
      Math.abs(sum(samples, prometheusName(METRICS.cost), { gen_ai_request_model: "claude-test-1" }) - cost) < 1e-9,
    );
    const tokens = `${prometheusName(METRICS.tokenUsage)}_sum`;
    assert.equal(sum(samples, tokens, { gen_ai_token_type: "input" }), input);
    assert.equal(sum(samples, tokens, { gen_ai_token_type: "output" }), output);
    assert.ok(sum(samples, `${prometheusName(METRICS.logAppendDuration)}_count`) >= 6, "appends were timed");
    assert.equal(
      samples.filter((x) => x.name === prometheusName(METRICS.queueDepth)).length,
      5,
      "one depth per queue state",
    );
    assert.equal(sum(samples, prometheusName(METRICS.queueDepth), { turnstream_queue_state: "waiting" }), 0);
    assert.equal(sum(samples, prometheusName(METRICS.decisionsPending)), 0);
    // No label carries a session, a turn or a prompt.
    for (const turn of turns) for (const needle of [turn.session, turn.turn]) assert.ok(!text.includes(needle), needle);
    for (const prompt of ["alpha", "bravo", "charlie"]) assert.ok(!text.includes(prompt), prompt);

    // OTLP: the same figures, pushed on flush.
    await metrics.forceFlush();
    const pushed = await receiver.waitFor((q) => q.path === "/v1/metrics" && q.json !== undefined, 20_000);
    const rm = (
      pushed.json as {
        resourceMetrics: Array<{
          resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
          scopeMetrics: Array<{
            metrics: Array<{
              name: string;
              sum?: {
                dataPoints: Array<{
                  asDouble?: number;
                  asInt?: string | number;
                  attributes: Array<{ key: string; value: { stringValue?: string } }>;
                }>;
              };
            }>;
          }>;
        }>;
      }
    ).resourceMetrics[0]!;
    assert.equal(
      rm.resource.attributes.find((a) => a.key === "service.instance.id")?.value.stringValue,
      "metrics-test-worker",
    );
    const turnsEnded = rm.scopeMetrics.flatMap((m) => m.metrics).find((m) => m.name === METRICS.turnsEnded.name)!;
    const points = turnsEnded.sum!.dataPoints.map((point) => [
      point.attributes.find((a) => a.key === "turnstream.turn.outcome")?.value.stringValue,
      Number(point.asInt ?? point.asDouble),
    ]);
    assert.deepEqual(points.sort(), [
      ["failed", 1],
      ["finished", 2],
    ]);
    assert.ok(!pushed.bodyText.includes(turns[0]!.session));

    // Health and readiness.
    const health = await fetch(`http://127.0.0.1:${ops.port}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(typeof ((await health.json()) as { eventLoopLagMs: unknown }).eventLoopLagMs, "number");
    assert.equal((await fetch(`http://127.0.0.1:${ops.port}/readyz`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.1:${ops.port}/nope`)).status, 404);
    assert.equal((await fetch(`http://127.0.0.1:${ops.port}/metrics`, { method: "POST" })).status, 405);
  } finally {
    await ops.close();
    await metrics.shutdown();
    await queue.close();
    await receiver.close();
    await testRig.dispose();
  }
});
