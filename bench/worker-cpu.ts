// Worker CPU per turn, measured without the real CLI's load on the machine. A stand-in CLI replays the
// shape of a real resumed turn (init, assistant, result lines of the real sizes at the real gaps; a
// ~144 KB session file that grows ~2.8 KB per turn; exit 45 ms after the result line) at almost no CPU,
// so the cores stay free and each process's CPU can be read from /proc to a fraction of a millisecond.
// Own = worker process + Redis + producer (this process) per turn; bare = this process spawning the
// same stand-in 2 at a time and reading its stdout. Ratio = own / bare, with metrics off. Each round
// starts a pair of workers, one with metrics on (its /metrics scraped once a round), and runs the
// same turns through each: metricsRatio = the median own CPU per turn with metrics / without (goal ≤ 1.05). `npm run
// bench -- worker-cpu
// [turns] [rounds]`; used to see what a change to the turn path costs, since the turn-overhead bench
// cannot resolve a millisecond on a saturated machine.
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer } from "../src/queue/index.ts";
import { cleanupKeys, redisFor, startWorkerProcess, testSpace } from "../test/worker/_support.ts";
import { bareRound, CONCURRENCY, queuedRound, spawnAndRead } from "./_rounds.ts";
import { median } from "./_stats.ts";

const TURNS = Number(process.argv[2] ?? 80);
const ROUNDS = Number(process.argv[3] ?? 7);
const space = testSpace();
const ws = space.workspace();
const bin = space.dir("bin");
// A turn the real CLI printed (test/fixtures/cli, recorded by `npm run fixtures`), its session id and
// cwd swapped for the stand-in's own.
const recorded = readFileSync(join(import.meta.dirname, "../test/fixtures/cli/plain-reply.jsonl"), "utf8")
  .trim()
  .split("\n");
const init = JSON.parse(recorded[0]!) as { session_id: string; cwd: string };
recorded.forEach((l, i) =>
  writeFileSync(join(bin, `l${i}.json`), l.split(init.session_id).join("@SID@").split(init.cwd).join("@CWD@") + "\n"),
);
if (recorded.length !== 3) throw new Error("plain-reply.jsonl should hold init, assistant and result lines");
const row = JSON.stringify({ type: "filler", text: "x".repeat(900) }) + "\n";
writeFileSync(join(bin, "base.jsonl"), row.repeat(155));
writeFileSync(join(bin, "delta.jsonl"), row.repeat(3));
const standIn = join(bin, "claude");
writeFileSync(
  standIn,
  `#!/bin/bash
sid=""
while [ $# -gt 0 ]; do [ "$1" = "--resume" ] && sid="$2"; shift; done
cat > /dev/null
dir="$CLAUDE_CONFIG_DIR/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')"
mkdir -p "$dir"
if [ -z "$sid" ]; then sid=$(cat /proc/sys/kernel/random/uuid); cat ${bin}/base.jsonl > "$dir/$sid.jsonl"
elif [ -f "$dir/$sid.jsonl" ]; then cat ${bin}/delta.jsonl >> "$dir/$sid.jsonl"
else echo "No conversation found with session ID: $sid" >&2; exit 1; fi
out() { sed -e "s|@SID@|$sid|g" -e "s|@CWD@|$PWD|g" ${bin}/l$1.json; }
out 0; sleep 0.1; out 1; sleep 0.012; out 2; sleep 0.045
`,
);
chmodSync(standIn, 0o755);

const redis = redisFor();
/** One worker process and its producer, on prefixes of its own so the two never share a job. */
async function benchWorker(extraEnv: Record<string, string>) {
  const lane = testSpace();
  const producer = createProducer({ redis, logPrefix: lane.logPrefix, queuePrefix: lane.queuePrefix });
  const proc = await startWorkerProcess({
    REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
    ANTHROPIC_API_KEY: "sk-ant-stand-in-dummy-000000",
    CLAUDE_BIN: standIn,
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_PREFIX: lane.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: lane.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: space.dir("inst"),
    TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
    LOG_LEVEL: "info",
    ...extraEnv,
  });
  return { lane, producer, proc };
}
type BenchWorker = Awaited<ReturnType<typeof benchWorker>> & { scrape?: () => Promise<void> };

/**
 * Metrics off is the baseline; metrics on serves /metrics on an ephemeral port, scraped once a round
 * (a Prometheus scrape reads the queue and decision gauges from Redis, so its cost is counted).
 */
async function metricsWorker(): Promise<BenchWorker> {
  const started = await benchWorker({ TURNSTREAM_OPS_PORT: "0" });
  const listening = await started.proc.waitFor(
    (l) => l["msg"] === "ops endpoint listening (/metrics, /healthz, /readyz)",
    30000,
    "the ops endpoint",
  );
  const url = `http://127.0.0.1:${String(listening["port"])}/metrics`;
  const scrape = async (): Promise<void> => {
    if (!(await (await fetch(url)).text()).includes("turnstream_turns_ended_total"))
      throw new Error("the worker's /metrics shows no turns");
  };
  return { ...started, scrape };
}

async function stopWorker(stopped: BenchWorker): Promise<void> {
  stopped.proc.kill("SIGTERM");
  await stopped.proc.exited;
  await stopped.producer.close();
  await cleanupKeys(redis, stopped.lane);
  stopped.lane.cleanup();
}
const redisPid = Number(/process_id:(\d+)/.exec(await redis.info("server"))?.[1]);

/** CPU ms of a process (user + system, clock ticks of 10 ms), from /proc. */
function cpuMs(pid: number): number {
  const statFields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(statFields[11]) + Number(statFields[12])) * 10;
}
const ownCpuMs = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

const queued = (w: BenchWorker, tag: string, turns: number): Promise<void> =>
  queuedRound(w.producer, turns, (s) => `${tag}-${s}-${w.lane.id}`, ws, 300000);
const bare = (turns: number): Promise<void> =>
  bareRound(
    turns,
    (s) => mkdtempSync(join(space.root, `bare-${s}-`)),
    (configDir, resume) =>
      spawnAndRead(standIn, resume ? ["-p", "--resume", resume] : ["-p"], ws, {
        ...process.env,
        CLAUDE_CONFIG_DIR: configDir,
      }),
  );

/** CPU ms per turn of one round through `w`: its worker, Redis, and this process (the producer). */
async function measuredRound(
  benchedWorker: BenchWorker,
  tag: string,
): Promise<{ worker: number; redis: number; producer: number }> {
  const [w0, r0, p0] = [cpuMs(benchedWorker.proc.pid), cpuMs(redisPid), ownCpuMs()];
  await queued(benchedWorker, tag, TURNS);
  await benchedWorker.scrape?.();
  return {
    worker: (cpuMs(benchedWorker.proc.pid) - w0) / TURNS,
    redis: (cpuMs(redisPid) - r0) / TURNS,
    producer: (ownCpuMs() - p0) / TURNS,
  };
}

await bare(8);
const rounds = {
  off: [] as Awaited<ReturnType<typeof measuredRound>>[],
  on: [] as Awaited<ReturnType<typeof measuredRound>>[],
};
const bareCpuPerTurn: number[] = [];
const fmt = (x: { worker: number; redis: number; producer: number }): string =>
  `worker ${x.worker.toFixed(2)} ms/turn, redis ${x.redis.toFixed(2)}, producer ${x.producer.toFixed(2)}`;
for (let round = 0; round < ROUNDS; round++) {
  // A fresh pair of workers each round: one process's own luck (its JIT, its heap) would otherwise
  // count in every round it runs.
  const pair = { off: await benchWorker({}), on: await metricsWorker() };
  for (const priming of [pair.off, pair.on]) await queued(priming, `priming${round}`, 8);
  // Alternating which goes first keeps a drift in the machine's load from favouring one side.
  const order = round % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const);
  for (const side of order) rounds[side].push(await measuredRound(pair[side], `r${round}${side}`));
  await Promise.all([stopWorker(pair.off), stopWorker(pair.on)]);
  const b0 = ownCpuMs();
  await bare(TURNS);
  bareCpuPerTurn.push((ownCpuMs() - b0) / TURNS);
  process.stdout.write(
    `round ${round}: metrics off ${fmt(rounds.off.at(-1)!)}; metrics on ${fmt(rounds.on.at(-1)!)}; bare ${bareCpuPerTurn.at(-1)!.toFixed(2)}\n`,
  );
}
redis.disconnect();
space.cleanup();
const medians = (xs: typeof rounds.off) => ({
  worker: median(xs.map((x) => x.worker)),
  redis: median(xs.map((x) => x.redis)),
  producer: median(xs.map((x) => x.producer)),
});
const [mOff, mOn] = [medians(rounds.off), medians(rounds.on)];
const total = (m: typeof mOff): number => m.worker + m.redis + m.producer;
process.stdout.write(
  `medians per turn: metrics off ${fmt(mOff)}; metrics on ${fmt(mOn)}; bare spawn-and-read ${median(bareCpuPerTurn).toFixed(2)} ms\n`,
);
process.stdout.write(
  JSON.stringify({
    bench: "worker-cpu",
    ratio: Number((total(mOff) / median(bareCpuPerTurn)).toFixed(2)),
    metricsRatio: Number((total(mOn) / total(mOff)).toFixed(3)),
    metricsGoal: 1.05,
    workerMsPerTurn: Number(mOff.worker.toFixed(2)),
    workerMsPerTurnMetrics: Number(mOn.worker.toFixed(2)),
    redisMsPerTurn: Number(mOff.redis.toFixed(2)),
    redisMsPerTurnMetrics: Number(mOn.redis.toFixed(2)),
    producerMsPerTurn: Number(mOff.producer.toFixed(2)),
    bareMsPerTurn: Number(median(bareCpuPerTurn).toFixed(2)),
    turns: TURNS,
    rounds: ROUNDS,
    standInCli: true,
  }) + "\n",
);
