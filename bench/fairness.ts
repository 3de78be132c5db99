// Fair share: 2 worker processes (concurrency 4 each); tenant A queues 200 turns, then tenant B
// queues 10. B's mean wait (enqueue to attempt.started) against the mean duration of one turn (goal
// ≤ 2×), and the throughput of the whole run against the same run with no tenants (goal ≥ 0.95).
// A stand-in CLI that takes a fixed time (a shell script printing init/assistant/result after a
// sleep) makes each turn last the same, so waits measure the queue's order and not the CLI.
// `npm run bench -- fairness [turnsA] [turnsB] [turnMs]`.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer, type Producer } from "../src/queue/index.ts";
import type { Envelope } from "../src/log/index.ts";
import {
  cleanupKeys,
  readAll,
  redisFor,
  startWorkerProcess,
  testSpace,
  type TestSpace,
  type WorkerProcess,
} from "../test/worker/_support.ts";
import { mean } from "./_stats.ts";

const TURNS_A = Number(process.argv[2] ?? 200);
const TURNS_B = Number(process.argv[3] ?? 10);
const TURN_MS = Number(process.argv[4] ?? 400);
const WORKERS = 2;
const CONCURRENCY = 4;

function standInCli(space: TestSpace): string {
  const path = join(space.dir("bin"), "fixed-claude");
  writeFileSync(
    path,
    `#!/bin/bash
[ "$1" = "--version" ] && { echo "0.0.0 (stand-in)"; exit 0; }
sid=""
while [ $# -gt 0 ]; do [ "$1" = "--resume" ] && sid="$2"; shift; done
[ -z "$sid" ] && sid=$(cat /proc/sys/kernel/random/uuid)
cat > /dev/null
dir="$CLAUDE_CONFIG_DIR/projects/$(printf %s "$PWD" | sed 's/[^A-Za-z0-9]/-/g')"
mkdir -p "$dir"
echo '{"type":"user"}' >> "$dir/$sid.jsonl"
echo '{"type":"system","subtype":"init","session_id":"'$sid'","cwd":"'$PWD'","tools":[],"model":"stand-in"}'
sleep ${TURN_MS / 1000}
echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"ok"}]},"session_id":"'$sid'"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":1,"session_id":"'$sid'","total_cost_usd":0}'
`,
  );
  chmodSync(path, 0o755);
  return path;
}

interface TurnTimes {
  tenant: string;
  queuedAt: number;
  startedAt: number;
  endedAt: number;
}

async function timesOf(producer: Producer, session: string, tenant: string): Promise<TurnTimes> {
  const events: Envelope[] = await readAll(producer.log, session);
  const at = (kind: string): number => Date.parse(events.find((e) => e.kind === kind)!.at);
  return { tenant, queuedAt: at("turn.queued"), startedAt: at("attempt.started"), endedAt: at("turn.finished") };
}

/** One run: A's turns, then B's; `tenants` false queues the same turns with no tenant. */
async function run(tenants: boolean): Promise<{ times: TurnTimes[]; totalMs: number }> {
  const space = testSpace();
  const ws = space.workspace();
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const cli = standInCli(space);
  const workers: WorkerProcess[] = await Promise.all(
    Array.from({ length: WORKERS }, (_, index) =>
      startWorkerProcess({
        REDIS_URL: "redis://127.0.0.1:6379",
        ANTHROPIC_API_KEY: "sk-ant-fairness-dummy-000000",
        CLAUDE_BIN: cli,
        TURNSTREAM_WORKSPACE_ROOTS: ws,
        TURNSTREAM_PREFIX: space.logPrefix,
        TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
        TURNSTREAM_INSTANCE_ROOT: space.dir(`root-${index}`),
        TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
      }),
    ),
  );
  const started = performance.now();
  const queued: { session: string; turn: string; tenant: string }[] = [];
  for (const [tenant, count] of [
    ["team-a", TURNS_A],
    ["team-b", TURNS_B],
  ] as const) {
    for (let index = 0; index < count; index++) {
      const input = { prompt: `${tenant} ${index}`, cwd: ws, ...(tenants ? { tenant } : {}) };
      const { session, turn } = await producer.enqueueTurn(input);
      queued.push({ session, turn, tenant });
    }
  }
  await Promise.all(queued.map(({ turn }) => producer.waitForTurn(turn, { timeoutMs: 900_000 })));
  const totalMs = performance.now() - started;
  const times = await Promise.all(queued.map(({ session, tenant }) => timesOf(producer, session, tenant)));
  for (const worker of workers) worker.kill("SIGTERM");
  await Promise.all(workers.map((worker) => worker.exited));
  await producer.close();
  await cleanupKeys(redis, space);
  redis.disconnect();
  space.cleanup();
  return { times, totalMs };
}

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

const fair = await run(true);
const plain = await run(false);
const waitsB = fair.times.filter((t) => t.tenant === "team-b").map((t) => t.startedAt - t.queuedAt);
const durations = fair.times.map((t) => t.endedAt - t.startedAt);
const plainWaitsB = plain.times.filter((t) => t.tenant === "team-b").map((t) => t.startedAt - t.queuedAt);
const waitRatio = mean(waitsB) / mean(durations);
const throughputRatio = fair.times.length / fair.totalMs / (plain.times.length / plain.totalMs);
process.stdout.write(
  `B's mean wait ${mean(waitsB).toFixed(0)} ms with tenants, ${mean(plainWaitsB).toFixed(0)} ms without; ` +
    `a turn takes ${mean(durations).toFixed(0)} ms; all ${fair.times.length} turns in ${fair.totalMs.toFixed(0)} ms ` +
    `with tenants, ${plain.totalMs.toFixed(0)} ms without\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "fairness",
    waitRatio: round(waitRatio),
    throughputRatio: round(throughputRatio),
    goalWaitRatio: 2,
    goalThroughputRatio: 0.95,
    turnsA: TURNS_A,
    turnsB: TURNS_B,
    workers: WORKERS,
    concurrency: CONCURRENCY,
    turnMs: TURN_MS,
    meanWaitBMs: Math.round(mean(waitsB)),
    meanWaitBWithoutTenantsMs: Math.round(mean(plainWaitsB)),
    meanTurnMs: Math.round(mean(durations)),
    totalMs: Math.round(fair.totalMs),
    totalWithoutTenantsMs: Math.round(plain.totalMs),
    standInCli: true,
  }) + "\n",
);
