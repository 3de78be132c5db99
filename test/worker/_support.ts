// Shared helpers for the queue/worker tests: isolated prefixes, a workspace root, the env a worker
// needs to run the real CLI against the scripted model server, worker processes, and log checks.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
  connectRedis,
  DEFAULT_REDIS_URL,
  isCluster,
  type Envelope,
  type EventLog,
  type RedisClient,
} from "../../src/log/index.ts";
import { createProducer, type Producer } from "../../src/queue/index.ts";
import { startModelServer, type ModelServer, type ModelServerOptions } from "../../src/testing/index.ts";

export const NODE = join(process.cwd(), "node_modules", ".bin", "node");
export const WORKER_ENTRY = join(process.cwd(), "workers", "turn-worker.ts");

export interface TestSpace {
  id: string;
  logPrefix: string;
  queuePrefix: string;
  root: string;
  /** A workspace dir under `root`. */
  workspace(name?: string): string;
  dir(name: string): string;
  cleanup(): void;
}

export function testSpace(): TestSpace {
  const id = randomBytes(5).toString("hex");
  const root = mkdtempSync(join(tmpdir(), "ts-wk-"));
  return {
    id,
    logPrefix: `tw${id}:`,
    queuePrefix: `{twq${id}}`,
    root,
    workspace(name = "ws") {
      const workspaceDir = join(root, "workspaces", name);
      mkdirSync(workspaceDir, { recursive: true });
      return workspaceDir;
    },
    dir(name) {
      const namedDir = join(root, name);
      mkdirSync(namedDir, { recursive: true });
      return namedDir;
    },
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

let home: string | undefined;

/**
 * Env for the CLI runs of a worker: the model server, a dummy key, no retries, no extra traffic, and
 * an empty HOME. The CLI's Bash tool sources the user's shell start-up files; this machine's (pyenv
 * init) can block for a minute on a lock that a killed shell left behind, and tests kill shells.
 */
export function cliEnv(url: string): Record<string, string> {
  home ??= mkdtempSync(join(tmpdir(), "ts-home-"));
  return {
    HOME: home,
    ANTHROPIC_BASE_URL: url,
    ANTHROPIC_API_KEY: "sk-ant-test-dummy-key-0000",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    CLAUDE_CODE_MAX_RETRIES: "0",
    DISABLE_AUTOUPDATER: "1",
  };
}

/**
 * The environment of a worker process on `space`'s keys that runs turns under `ws` against the model
 * server at `modelUrl`; `name` gives it an instance root of its own. `extra` adds or overrides.
 */
export function workerProcessEnv(
  space: TestSpace,
  ws: string,
  modelUrl: string,
  name: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    REDIS_URL: "redis://127.0.0.1:6379",
    ...cliEnv(modelUrl),
    TURNSTREAM_WORKSPACE_ROOTS: ws,
    TURNSTREAM_PREFIX: space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: space.queuePrefix,
    TURNSTREAM_INSTANCE_ROOT: space.dir(`root-${name}`),
    ...extra,
  };
}

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Log lines (parsed pino JSON) seen so far. */
  readonly lines: Record<string, unknown>[];
  waitFor(
    pred: (line: Record<string, unknown>) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * The compile cache `npm test` sets, for the node processes a test starts with a bare environment: a
 * worker's cold start spends most of its CPU compiling the sources, which is the same for every one.
 */
export function compileCacheEnv(): Record<string, string> {
  const dir = process.env["NODE_COMPILE_CACHE"];
  return dir === undefined ? {} : { NODE_COMPILE_CACHE: dir };
}

/**
 * How long a worker process may take to say it is ready: a cold start of the whole worker, which a
 * loaded machine stretches many times over. The wait ends at the ready line.
 */
export const WORKER_READY_MS = 60_000;

/** `entry`: the process's script (default workers/turn-worker.ts; a test's own passes library options). */
export async function startWorkerProcess(env: Record<string, string>, entry = WORKER_ENTRY): Promise<WorkerProcess> {
  const child = spawn(NODE, [entry], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? "/root",
      LOG_LEVEL: "info",
      ...compileCacheEnv(),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters: {
    pred: (line: Record<string, unknown>) => boolean;
    resolve: (line: Record<string, unknown>) => void;
  }[] = [];
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  createInterface({ input: child.stdout! }).on("line", (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      line = { msg: text };
    }
    lines.push(line);
    for (const waiter of [...waiters])
      if (waiter.pred(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const wp: WorkerProcess = {
    child,
    pid: child.pid!,
    lines,
    waitFor(pred, timeoutMs, what) {
      const hit = lines.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`worker ${child.pid}: timed out waiting for ${what}; stderr: ${stderr.slice(-800)}`)),
          timeoutMs,
        );
        waiters.push({ pred, resolve: (l) => (clearTimeout(timer), resolve(l)) });
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`worker ${child.pid} exited while waiting for ${what}; stderr: ${stderr.slice(-800)}`));
        });
      });
    },
    exited,
    kill: (signal = "SIGTERM") => void child.kill(signal),
  };
  await wp.waitFor((l) => l["msg"] === "worker ready", WORKER_READY_MS, "worker ready");
  return wp;
}

export async function readAll(log: EventLog, session: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const ev of log.read(session)) out.push(ev);
  return out;
}

/** Removes every key a test's prefixes created (log, ordering, BullMQ). */
export async function cleanupKeys(redis: RedisClient, space: TestSpace): Promise<void> {
  const patterns = [`${space.logPrefix}*`, `${space.queuePrefix}*`];
  const nodes = isCluster(redis) ? redis.nodes("master") : [redis];
  for (const node of nodes) {
    for (const pattern of patterns) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 500);
        cursor = next;
        for (const key of keys) await node.del(key);
      } while (cursor !== "0");
    }
  }
}

export function redisFor(url?: string, clusterNodes?: string): RedisClient {
  return clusterNodes ? connectRedis({ clusterNodes }) : connectRedis({ url: url ?? "redis://127.0.0.1:6379" });
}

/** A private test space: a workspace, a scripted model server, and Redis and a producer on the space's prefixes. */
export interface TestStage {
  space: TestSpace;
  server: ModelServer;
  redis: RedisClient;
  producer: Producer;
  /** The workspace root the workers run turns under. */
  ws: string;
}

type StageScript = ModelServerOptions["script"] | ((ws: string) => ModelServerOptions["script"]);

/**
 * Sets a stage up; `script` may be a function of the workspace, for scripts that name files in it. The
 * returned close() takes it down.
 *
 * `allowEnv`: env names the stage's producer lets a job set besides the default allow-list;
 * `credential`: the only key the stage's model server accepts.
 */
export async function testStage(
  script: StageScript,
  options: { redisUrl?: string; clusterNodes?: string; allowEnv?: readonly string[]; credential?: string } = {},
): Promise<TestStage & { close(): Promise<void> }> {
  const space = testSpace();
  const ws = space.workspace();
  const server = await startModelServer({
    script: typeof script === "function" ? script(ws) : script,
    credential: options.credential,
  });
  const redis = redisFor(options.redisUrl, options.clusterNodes);
  const { logPrefix, queuePrefix } = space;
  const producer = createProducer({ redis, logPrefix, queuePrefix, allowEnv: options.allowEnv });
  return {
    space,
    server,
    redis,
    producer,
    ws,
    async close() {
      await producer.close();
      await cleanupKeys(redis, space);
      redis.disconnect();
      await server.close();
      space.cleanup();
    },
  };
}

/** Worker processes on a test stage; dispose() ends them and takes the stage down. */
export interface ProcessFleet extends TestStage {
  /**
   * Starts a worker process with workerProcessEnv(..., name) plus `extra` (which overrides), on the fleet's Redis;
   * `entry` as startWorkerProcess's.
   */
  start(name: string, extra?: Record<string, string>, entry?: string): Promise<WorkerProcess>;
  /**
   * SIGTERMs every started worker still running and awaits their exits, then closes the producer, removes the keys,
   * disconnects, closes the server and removes the space.
   */
  dispose(): Promise<void>;
}

/**
 * Redis is the local one unless `redisUrl` or `clusterNodes` (which the workers then get as
 * REDIS_CLUSTER_NODES) say otherwise.
 */
export async function processFleet(
  script: StageScript,
  options: { redisUrl?: string; clusterNodes?: string; allowEnv?: readonly string[] } = {},
): Promise<ProcessFleet> {
  const { close, ...stage } = await testStage(script, options);
  const { space, server, ws } = stage;
  const redisEnv: Record<string, string> = options.clusterNodes
    ? { REDIS_CLUSTER_NODES: options.clusterNodes }
    : { REDIS_URL: options.redisUrl ?? DEFAULT_REDIS_URL };
  const workers: WorkerProcess[] = [];
  return {
    ...stage,
    async start(name, extra = {}, entry) {
      // The fleet's Redis (URL or cluster nodes) in place of workerProcessEnv's local default.
      const { REDIS_URL: _local, ...env } = workerProcessEnv(space, ws, server.url, name);
      const worker = await startWorkerProcess({ ...redisEnv, ...env, ...extra }, entry);
      workers.push(worker);
      return worker;
    },
    async dispose() {
      for (const worker of workers)
        if (worker.child.exitCode === null && worker.child.signalCode === null) worker.kill("SIGTERM");
      await Promise.all(workers.map((w) => w.exited));
      await close();
    },
  };
}

export { treeMembers } from "../runner/_support.ts";

/** Markers (TURNSTREAM_TREE values) of live processes whose environment names `needle` (e.g. a config root). */
export function markersOfProcessesWith(needle: string): Map<number, string> {
  const out = new Map<number, string>();
  const needleBytes = Buffer.from(needle);
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`);
      if (env.indexOf(needleBytes) === -1) continue;
      const treeMatch = /TURNSTREAM_TREE=([0-9a-f-]+)/.exec(env.toString("latin1"));
      if (treeMatch) out.set(Number(name), treeMatch[1]!);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** How many tool results a session's log holds on `log` (a primary's or a replica's view in the failover tests). */
export async function toolResultCount(log: EventLog, session: string): Promise<number> {
  return toolIds(await readAll(log, session)).results.length;
}

/** Waits (bounded) until a session's log on `log` holds at least `count` tool results. */
export async function waitForToolResults(log: EventLog, session: string, count: number, where: string): Promise<void> {
  const what = `${count} tool results on the ${where}`;
  await waitUntil(async () => (await toolResultCount(log, session)) >= count, 60_000, what);
}

/** Waits (bounded) until `cond` holds, re-checking every 100 ms. */
export async function waitUntil(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export type { Producer };

/**
 * A scripted tool chain: each step's Bash prints the marker the next step's response waits for, and the
 * last answers `<label> done`; a prompt holding `<label>-START` begins it. `gatedStep` waits for a file
 * `gate` in the cwd, so a test knows the turn is still running until it writes one.
 */
export function toolChain(
  label: string,
  steps: number,
  options: { pauseS?: number; gatedStep?: number } = {},
): object[] {
  const out: object[] = [];
  for (let step = 0; step < steps; step++) {
    const wait =
      step + 1 === options.gatedStep ? "while [ ! -e gate ]; do sleep 0.1; done; " : `sleep ${options.pauseS ?? 0.2}; `;
    const command = `${wait}echo ${label}-step-${step + 1}-ok`;
    const tool = { type: "tool_use", name: "Bash", input: { command, description: `step ${step + 1}` } };
    out.push({ match: step === 0 ? `${label}-START` : `${label}-step-${step}-ok`, content: [tool] });
  }
  out.push({ match: `${label}-step-${steps}-ok`, content: [{ type: "text", text: `${label} done` }] });
  return out;
}

/** The tool_use ids the CLI printed and the tool_use ids its results answered, of one attempt or all. */
export function toolIds(events: readonly Envelope[], attempt?: number): { uses: string[]; results: string[] } {
  const ids: { uses: string[]; results: string[] } = { uses: [], results: [] };
  for (const event of events) {
    if (event.kind !== "cli.line" || (attempt !== undefined && event.attempt !== attempt)) continue;
    const line = JSON.parse(String((event.data as { raw: string }).raw)) as {
      type?: string;
      message?: { content?: unknown };
    };
    const content = Array.isArray(line.message?.content)
      ? (line.message.content as { type?: string; id?: string; tool_use_id?: string }[])
      : [];
    for (const block of content) {
      if (line.type === "assistant" && block.type === "tool_use") ids.uses.push(String(block.id));
      if (line.type === "user" && block.type === "tool_result") ids.results.push(String(block.tool_use_id));
    }
  }
  return ids;
}

/**
 * The log a turn ended in has every seq once, the turn ended once and, if it finished, the accepted
 * attempt ran all `steps` tool calls, each with its one result.
 */
export function assertNoHole(events: readonly Envelope[], turn: string, steps: number): Envelope {
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    "every seq once, no gap",
  );
  const ends = events.filter((e) => e.turn === turn && (e.kind === "turn.finished" || e.kind === "turn.failed"));
  assert.equal(ends.length, 1, `the turn ended exactly once: ${JSON.stringify(ends.map((e) => e.kind))}`);
  const end = ends[0]!;
  if (end.kind === "turn.finished") {
    const accepted = (end.data as { attempt: number }).attempt;
    const ids = toolIds(events, accepted);
    assert.equal(ids.uses.length, steps, `the accepted attempt ${accepted} ran the whole chain`);
    assert.deepEqual(
      [...ids.results].sort(),
      [...ids.uses].sort(),
      "every tool call of the accepted attempt has its result, once",
    );
    assert.equal(new Set(ids.uses).size, ids.uses.length, "no tool call twice");
  }
  return end;
}
