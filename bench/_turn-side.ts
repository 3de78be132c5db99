// One side of the turn-overhead bench, in a process of its own so the bench can give each side an
// equal CPU share: `bare` runs `claude -p` itself, `queued` enqueues through a producer to a worker
// process. Each side serves the scripted model (every request: "done") from its own process.
// Protocol, one line each way: it prints {"ready":true,"pids":[…]} once primed; each "go N" on stdin
// runs N rounds back to back, printing {"round","start","end","cpuMs"} per round, then {"done":true}.
// A round is 40 turns over 4 sessions, 2 at a time, later turns of a session resumed.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { resolveClaudeBin } from "../src/runner/index.ts";
import { createProducer } from "../src/queue/index.ts";
import { hermeticEnv, startModelServer } from "../src/testing/index.ts";
import { cleanupKeys, cliEnv, redisFor, startWorkerProcess, testSpace } from "../test/worker/_support.ts";
import { bareRound, CONCURRENCY, queuedRound, SESSIONS, spawnAndRead } from "./_rounds.ts";

const side = process.argv[2];
const TURNS = Number(process.argv[3] ?? 40);
if (side !== "bare" && side !== "queued") throw new Error("usage: _turn-side.ts bare|queued [turns]");

const server = await startModelServer({ script: { responses: [] } });
const space = testSpace();
const ws = space.workspace();
const out = (o: object): boolean => process.stdout.write(JSON.stringify(o) + "\n");
// The CPU of this side's cgroup when the bench made one (all its processes, Redis included for
// `queued`), else the whole machine's busy time (user, nice, system, irq, softirq).
const cpuacct = process.env["TS_BENCH_CPUACCT"];
function cpuMs(): number {
  if (cpuacct !== undefined) return Number(readFileSync(cpuacct, "utf8")) / 1e6;
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (fields[0]! + fields[1]! + fields[2]! + fields[5]! + fields[6]!) * 10;
}

interface Side {
  pids: number[];
  round(tag: string, turns: number): Promise<void>;
  close(): Promise<void>;
}

async function bareSide(): Promise<Side> {
  const bin = resolveClaudeBin();
  const args = ["-p", "--output-format", "stream-json", "--verbose"];
  // One hermetic home per session and round, kept across the session's turns (as a user's would be).
  const run = (root: string, resume: string | undefined): Promise<string | undefined> =>
    spawnAndRead(bin, resume ? [...args, "--resume", resume] : args, ws, {
      ...process.env,
      ...hermeticEnv({ baseUrl: server.url, root }).env,
    });
  return {
    pids: [],
    round: (tag, turns) => bareRound(turns, (s) => mkdtempSync(join(space.root, `${tag}-${s}-`)), run),
    close: async () => undefined,
  };
}

async function queuedSide(): Promise<Side> {
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const worker = await startWorkerProcess({
    ...cliEnv(server.url),
    REDIS_URL: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_PREFIX: space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: space.dir("inst"),
    TURNSTREAM_CONCURRENCY: String(CONCURRENCY),
  });
  // Redis's pid, when that is the Redis this process talks to (a local server, not a remote one's pid).
  const redisPid = Number(/process_id:(\d+)/.exec(await redis.info("server"))?.[1]);
  const local =
    redisPid > 0 &&
    existsSync(`/proc/${redisPid}/comm`) &&
    readFileSync(`/proc/${redisPid}/comm`, "utf8").startsWith("redis-server");
  return {
    pids: [worker.pid, ...(local ? [redisPid] : [])],
    round: (tag, turns) => queuedRound(producer, turns, (s) => `${tag}-${s}-${space.id}`, ws, 600000),
    async close() {
      worker.kill("SIGTERM");
      await worker.exited;
      await producer.close();
      await cleanupKeys(redis, space);
      redis.disconnect();
    },
  };
}

const turnSide = side === "bare" ? await bareSide() : await queuedSide();
await turnSide.round("priming", SESSIONS); // one turn per session: caches, JIT, the CLI binary's pages
out({ ready: true, pids: turnSide.pids });
let served = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const request = /^go (\d+)$/.exec(line.trim());
  if (request === null) break;
  for (let turn = 0; turn < Number(request[1]); turn++) {
    const [start, cpu0] = [performance.timeOrigin + performance.now(), cpuMs()];
    await turnSide.round(`r${served}`, TURNS);
    const [end, cpu1] = [performance.timeOrigin + performance.now(), cpuMs()];
    out({ round: served++, start, end, cpuMs: cpu1 - cpu0 });
  }
  out({ done: true });
}
await turnSide.close();
await server.close();
space.cleanup();
