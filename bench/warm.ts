// Warm sessions against cold ones, through the queue and a worker process, with the real CLI and the
// scripted model server: 20 follow-up turns of one session, then 4 sessions × 10 turns at
// concurrency 2. Latency is enqueue to turn.finished of each follow-up turn (a session's first turn
// starts a process either way); CPU per turn is the worker's and its CLIs' (this process's reaped
// children's CPU, read from /proc after the worker has exited and ended its kept processes).
// `npm run bench -- warm`; the JSON line's ratios are warm over cold (goals: median latency per
// follow-up ≤ 0.15, CPU ≤ 0.5; meanRatio is the latency ratio of the means).
import { readFileSync } from "node:fs";
import { createProducer, type Producer } from "../src/queue/index.ts";
import { startModelServer } from "../src/testing/index.ts";
import { cleanupKeys, cliEnv, redisFor, startWorkerProcess, testSpace } from "../test/worker/_support.ts";
import { median } from "./_stats.ts";

const FOLLOW_UPS = 20;
const SESSIONS = 4;
const TURNS_EACH = 10;
const CONCURRENCY = 2;

const space = testSpace();
const ws = space.workspace();
const server = await startModelServer({ script: { responses: [] } });
const redis = redisFor();
const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU (ms) of this process's children that have been waited for, with theirs. */
function reapedChildrenCpuMs(): number {
  const statFields = readFileSync("/proc/self/stat", "latin1").split(") ")[1]!.split(" ");
  return (Number(statFields[13]) + Number(statFields[14])) * TICK_MS;
}

/** One session's turns in order; the latency of each turn after the first. */
async function session(producer: Producer, turns: number): Promise<number[]> {
  let id: string | undefined;
  const latencies: number[] = [];
  for (let turnIndex = 0; turnIndex < turns; turnIndex++) {
    const t0 = performance.now();
    const enqueued = await producer.enqueueTurn({ session: id, prompt: `turn ${turnIndex}: say done`, cwd: ws });
    const outcome = await producer.waitForTurn(enqueued.turn, { timeoutMs: 60_000 });
    if (outcome.status !== "finished")
      throw new Error(`turn ${turnIndex} ended ${outcome.status}: ${JSON.stringify(outcome.event.data)}`);
    if (turnIndex > 0) latencies.push(performance.now() - t0);
    id = enqueued.session;
  }
  return latencies;
}

async function side(warm: boolean): Promise<{ latencies: number[]; cpuMsPerTurn: number }> {
  const lane = testSpace();
  const producer = createProducer({ redis, logPrefix: lane.logPrefix, queuePrefix: lane.queuePrefix });
  const cpu0 = reapedChildrenCpuMs();
  const worker = await startWorkerProcess({
    REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
    ...cliEnv(server.url),
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_PREFIX: lane.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: lane.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: space.dir(`inst-${warm ? "warm" : "cold"}`),
    TURNSTREAM_SANDBOXED: "1",
    TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
    TURNSTREAM_WARM: warm ? "1" : "0",
  });
  const latencies = await session(producer, FOLLOW_UPS + 1);
  const many = await Promise.all(Array.from({ length: SESSIONS }, () => session(producer, TURNS_EACH)));
  latencies.push(...many.flat());
  worker.kill("SIGTERM");
  await worker.exited;
  const cpuMsPerTurn = (reapedChildrenCpuMs() - cpu0) / (FOLLOW_UPS + 1 + SESSIONS * TURNS_EACH);
  await producer.close();
  await cleanupKeys(redis, lane);
  return { latencies, cpuMsPerTurn };
}

const cold = await side(false);
const warm = await side(true);
await server.close();
redis.disconnect();
space.cleanup();
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
process.stdout.write(
  `cold: follow-up median ${median(cold.latencies).toFixed(0)} ms, mean ${mean(cold.latencies).toFixed(0)} ms, CPU ${cold.cpuMsPerTurn.toFixed(0)} ms/turn\n`,
);
process.stdout.write(
  `warm: follow-up median ${median(warm.latencies).toFixed(0)} ms, mean ${mean(warm.latencies).toFixed(0)} ms, CPU ${warm.cpuMsPerTurn.toFixed(0)} ms/turn\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "warm",
    // Medians, as the other turn benches: a shared machine's stalls land in the mean of either side.
    ratio: Number((median(warm.latencies) / median(cold.latencies)).toFixed(3)),
    latencyGoal: 0.15,
    meanRatio: Number((mean(warm.latencies) / mean(cold.latencies)).toFixed(3)),
    cpuRatio: Number((warm.cpuMsPerTurn / cold.cpuMsPerTurn).toFixed(3)),
    cpuGoal: 0.5,
    coldFollowUpMs: Number(median(cold.latencies).toFixed(1)),
    warmFollowUpMs: Number(median(warm.latencies).toFixed(1)),
    coldCpuMsPerTurn: Number(cold.cpuMsPerTurn.toFixed(1)),
    warmCpuMsPerTurn: Number(warm.cpuMsPerTurn.toFixed(1)),
    followUps: cold.latencies.length,
  }) + "\n",
);
