// Worker CPU per turn, measured without the real CLI's load on the machine. A stand-in CLI replays the
// shape of a real resumed turn (init, assistant, result lines of the real sizes at the real gaps; a
// ~144 KB session file that grows ~2.8 KB per turn; exit 45 ms after the result line) at almost no CPU,
// so the cores stay free and each process's CPU can be read from /proc to a fraction of a millisecond.
// Own = worker process + Redis + producer (this process) per turn; bare = this process spawning the
// same stand-in 2 at a time and reading its stdout. Ratio = own / bare. `npm run bench -- worker-cpu
// [turns] [rounds]`; used to see what a change to the turn path costs, since the turn-overhead bench
// cannot resolve a millisecond on a saturated machine.
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createProducer } from "../src/queue/index.ts";
import { cleanupKeys, redisFor, startWorkerProcess, testSpace } from "../test/worker/_support.ts";
import { bareRound, CONCURRENCY, queuedRound, spawnAndRead } from "./_rounds.ts";

const TURNS = Number(process.argv[2] ?? 80);
const ROUNDS = Number(process.argv[3] ?? 3);
const space = testSpace();
const ws = space.workspace();
const bin = space.dir("bin");
// A turn the real CLI printed (test/fixtures/cli, recorded by `npm run fixtures`), its session id and
// cwd swapped for the stand-in's own.
const recorded = readFileSync(join(import.meta.dirname, "../test/fixtures/cli/plain-reply.jsonl"), "utf8").trim().split("\n");
const init = JSON.parse(recorded[0]!) as { session_id: string; cwd: string };
recorded.forEach((l, i) => writeFileSync(join(bin, `l${i}.json`), l.split(init.session_id).join("@SID@").split(init.cwd).join("@CWD@") + "\n"));
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
const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
const worker = await startWorkerProcess({
  REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
  ANTHROPIC_API_KEY: "sk-ant-stand-in-dummy-000000",
  CLAUDE_BIN: standIn,
  TURNSTREAM_WORKSPACE_ROOTS: ws,
  TURNSTREAM_PREFIX: space.logPrefix,
  TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
  TURNSTREAM_INSTANCE_ROOT: space.dir("inst"),
  TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
  LOG_LEVEL: "info",
});
const redisPid = Number(/process_id:(\d+)/.exec(await redis.info("server"))?.[1]);

/** CPU ms of a process (user + system, clock ticks of 10 ms), from /proc. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}
const ownCpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const queued = (tag: string, turns: number): Promise<void> => queuedRound(producer, turns, (s) => `${tag}-${s}-${space.id}`, ws, 300000);
const bare = (turns: number): Promise<void> =>
  bareRound(
    turns,
    (s) => mkdtempSync(join(space.root, `bare-${s}-`)),
    (configDir, resume) => spawnAndRead(standIn, resume ? ["-p", "--resume", resume] : ["-p"], ws, { ...process.env, CLAUDE_CONFIG_DIR: configDir }),
  );

await queued("warm", 8);
await bare(8);
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const w: number[] = [];
const r: number[] = [];
const p: number[] = [];
const b: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  const [w0, r0, p0] = [cpuMs(worker.pid), cpuMs(redisPid), ownCpuMs()];
  await queued(`r${round}`, TURNS);
  w.push((cpuMs(worker.pid) - w0) / TURNS);
  r.push((cpuMs(redisPid) - r0) / TURNS);
  p.push((ownCpuMs() - p0) / TURNS);
  const b0 = ownCpuMs();
  await bare(TURNS);
  b.push((ownCpuMs() - b0) / TURNS);
  process.stdout.write(`round ${round}: worker ${w.at(-1)!.toFixed(2)} ms/turn, redis ${r.at(-1)!.toFixed(2)}, producer ${p.at(-1)!.toFixed(2)}; bare ${b.at(-1)!.toFixed(2)}\n`);
}
worker.kill("SIGTERM");
await worker.exited;
await producer.close();
await cleanupKeys(redis, space);
redis.disconnect();
space.cleanup();
const own = med(w) + med(r) + med(p);
process.stdout.write(`medians per turn: worker ${med(w).toFixed(2)} ms, redis ${med(r).toFixed(2)} ms, producer ${med(p).toFixed(2)} ms; bare spawn-and-read ${med(b).toFixed(2)} ms\n`);
process.stdout.write(
  JSON.stringify({
    bench: "worker-cpu",
    ratio: Number((own / med(b)).toFixed(2)),
    workerMsPerTurn: Number(med(w).toFixed(2)),
    redisMsPerTurn: Number(med(r).toFixed(2)),
    producerMsPerTurn: Number(med(p).toFixed(2)),
    bareMsPerTurn: Number(med(b).toFixed(2)),
    turns: TURNS,
    rounds: ROUNDS,
    standInCli: true,
  }) + "\n",
);
