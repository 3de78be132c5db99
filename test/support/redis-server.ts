// Starts a private redis-server on a free loopback port in a temp dir, for tests that need to stop,
// pause or restart Redis without disturbing the shared one. Readiness is read from the server's own
// log line, not guessed with a sleep.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface RedisServer {
  readonly port: number;
  readonly host: string;
  readonly url: string;
  readonly dir: string;
  readonly pid: number | undefined;
  /** Ends the process with `signal` (default SIGTERM) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same port and dir (after stop), with `extraArgs` this time only. */
  start(extraArgs?: readonly string[]): Promise<void>;
  pause(): void;
  resume(): void;
  /** Stops the server and removes its dir. */
  dispose(): Promise<void>;
}

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. ["--appendonly", "yes"]. */
  args?: string[];
  port?: number;
  dir?: string;
  readyTimeoutMs?: number;
}

/** A port that is free now (and, when `alsoFree` is given, port + alsoFree too: the cluster bus). */
export async function freePort(alsoFree?: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    if ((await isFree(port)) && (alsoFree === undefined || (await isFree(port + alsoFree)))) return port;
  }
  throw new Error("no free loopback port found");
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "turnstream-redis-"));
  const host = "127.0.0.1";
  const args = [
    "--port",
    String(port),
    "--bind",
    host,
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
    "--logfile",
    "",
    "--daemonize",
    "no",
    "--protected-mode",
    "no",
    ...(options.args ?? []),
  ];
  const timeoutMs = options.readyTimeoutMs ?? 15000;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  async function start(extraArgs: readonly string[] = []): Promise<void> {
    const proc = spawn("redis-server", [...args, ...extraArgs], { stdio: ["ignore", "pipe", "pipe"] });
    child = proc;
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    await new Promise<void>((resolve, reject) => {
      let log = "";
      const timer = setTimeout(() => {
        proc.kill("SIGKILL");
        reject(new Error(`redis-server on port ${port} not ready after ${timeoutMs} ms: ${log.slice(-500)}`));
      }, timeoutMs);
      const onData = (chunk: Buffer): void => {
        log += chunk.toString();
        if (log.includes("Ready to accept connections")) {
          clearTimeout(timer);
          proc.stdout!.off("data", onData);
          proc.stdout!.resume();
          resolve();
        }
      };
      proc.stdout!.on("data", onData);
      proc.stderr!.resume();
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server on port ${port} exited (${code}) before ready: ${log.slice(-500)}`));
      });
    });
  }

  async function stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    const proc = child;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    if (signal !== "SIGCONT") proc.kill("SIGCONT"); // a paused server must be able to act on the signal
    proc.kill(signal);
    await exited;
  }

  await start();
  return {
    port,
    host,
    url: `redis://${host}:${port}`,
    dir,
    get pid() {
      return child?.pid;
    },
    stop,
    start,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT"),
    async dispose() {
      await stop("SIGKILL");
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
