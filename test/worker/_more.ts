// Helpers for the retry, lost-session and shutdown tests: an in-process worker against a scripted
// model server with its own prefixes, and small readers over one turn's events.
import { startTurnWorker, type TurnWorker, type TurnWorkerOptions } from "../../src/worker/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
  cliEnv,
  compileCacheEnv,
  NODE,
  readAll,
  WORKER_READY_MS,
  testStage,
  type TestStage,
  type WorkerProcess,
} from "./_support.ts";

export interface Rig extends TestStage {
  /** Starts an in-process worker on the rig's prefixes; closed by dispose(). */
  worker(extra?: Partial<TurnWorkerOptions>): TurnWorker;
  events(session: string, turn?: string): Promise<Envelope[]>;
  dispose(): Promise<void>;
}

/**
 * `script` may be a function of the rig's workspace, for scripts that name files in it. `allowEnv`:
 * env names its producer and workers let a job set besides the default allow-list.
 */
export async function rig(script: unknown, options: Parameters<typeof testStage>[1] = {}): Promise<Rig> {
  const { close, ...stage } = await testStage(script as Parameters<typeof testStage>[0], options);
  const { space, server, redis, producer, ws } = stage;
  const workers: TurnWorker[] = [];
  let instanceCount = 0;
  return {
    ...stage,
    worker(extra = {}) {
      const turnWorker = startTurnWorker({
        redis,
        logPrefix: space.logPrefix,
        queuePrefix: space.queuePrefix,
        workspaceRoots: [ws],
        instanceRoot: space.dir(`inst-${instanceCount++}`),
        allowEnv: options.allowEnv,
        ...extra,
        runEnv: { ...cliEnv(server.url), ...extra.runEnv },
      });
      workers.push(turnWorker);
      return turnWorker;
    },
    async events(session, turn) {
      const all = await readAll(producer.log, session);
      return turn === undefined ? all : all.filter((e) => e.turn === turn);
    },
    async dispose() {
      await Promise.all(workers.map((w) => w.close({ graceMs: 1000 })));
      await close();
    },
  };
}

export const dataOf = (e: Envelope): Record<string, unknown> => (e.data ?? {}) as Record<string, unknown>;

/** The turn's lifecycle kinds: what the CLI printed and the model calls it made (model.call) left out. */
export const kindsOf = (events: Envelope[]): string[] =>
  events.filter((e) => e.kind !== "cli.line" && e.kind !== "cli.stderr" && e.kind !== "model.call").map((e) => e.kind);

/** Parsed stdout lines of one attempt. */
export function cliLines(events: Envelope[], attempt: number): Record<string, unknown>[] {
  return events
    .filter((e) => e.kind === "cli.line" && e.attempt === attempt)
    .map((e) => JSON.parse(String(dataOf(e)["raw"])) as Record<string, unknown>);
}

export const atMs = (e: Envelope): number => Date.parse(e.at);

/** `turnstream worker <args>` as a process, logging JSON lines like startWorkerProcess's workers. */
export async function startWorkerCommand(env: Record<string, string>, args: string[]): Promise<WorkerProcess> {
  const child = spawn(NODE, [join(process.cwd(), "src", "bin", "turnstream.ts"), "worker", ...args], {
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
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout! }).on("line", (text) => {
    try {
      lines.push(JSON.parse(text) as Record<string, unknown>);
    } catch {
      lines.push({ msg: text });
    }
    for (const wake of [...waiters]) wake();
  });
  const wp: WorkerProcess = {
    child,
    pid: child.pid!,
    lines,
    waitFor(pred, timeoutMs, what) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const hit = lines.find(pred);
          if (hit === undefined) return;
          done();
          resolve(hit);
        };
        const timer = setTimeout(
          () => (
            done(),
            reject(new Error(`worker ${child.pid}: timed out waiting for ${what}; stderr: ${stderr.slice(-800)}`))
          ),
          timeoutMs,
        );
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        void exited.then(
          () => (
            done(),
            reject(new Error(`worker ${child.pid} exited while waiting for ${what}; stderr: ${stderr.slice(-800)}`))
          ),
        );
        check();
      });
    },
    exited,
    kill: (signal = "SIGTERM") => void child.kill(signal),
  };
  await wp.waitFor((l) => l["msg"] === "worker ready", WORKER_READY_MS, "worker ready");
  return wp;
}

/** The process whose command line contains `needle` and whose environment names `root`: pid and tree marker. */
export function findTreeProcess(
  needle: string,
  root: string,
): { pid: number; marker: string; env: string } | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "latin1").replaceAll("\0", " ");
      if (!cmd.includes(needle)) continue;
      const env = readFileSync(`/proc/${name}/environ`, "latin1");
      const treeMatch = /TURNSTREAM_TREE=([0-9a-f-]+)/.exec(env);
      if (treeMatch && env.includes(root)) return { pid: Number(name), marker: treeMatch[1]!, env };
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}
