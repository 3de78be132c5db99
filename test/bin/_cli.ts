// Runs the `turnstream` command from the sources, as the bin tests do, and collects what it said.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { NODE } from "../worker/_support.ts";

const exec = promisify(execFile);
export const BIN = join(process.cwd(), "src", "bin", "turnstream.ts");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function turnstream(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<CliRun> {
  try {
    const succeeded = await exec(NODE, [BIN, ...args], {
      env: { ...process.env, NO_COLOR: "1", ...env },
      timeout: timeoutMs,
    });
    return { code: 0, stdout: succeeded.stdout, stderr: succeeded.stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === "number" ? failed.code : -1,
      stdout: failed.stdout ?? "",
      stderr: failed.stderr ?? "",
    };
  }
}

/** The one JSON object a `--json` run printed on stdout (fails when there is not exactly one line). */
export function onlyJson(stdout: string): Record<string, unknown> {
  const lines = stdout
    .trim()
    .split("\n")
    .filter((l) => l.length > 0);
  if (lines.length !== 1) throw new Error(`expected one JSON line on stdout, got ${lines.length}: ${stdout}`);
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

/** A `turnstream` command running as a process: what it printed so far, signals, and its end. */
export interface RunningCli {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout or stderr matches `pattern` (rejects after `timeoutMs` or when it exits first). */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Its exit code (or -1 when a signal ended it) and everything it printed. */
  readonly exited: Promise<CliRun>;
}

/** Starts `turnstream args…` from the sources, so a test can signal it while it runs. */
export function startTurnstream(args: string[], env: Record<string, string> = {}): RunningCli {
  const child = spawn(NODE, [BIN, ...args], {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters = new Set<() => void>();
  const wake = (): void => waiters.forEach((check) => check());
  child.stdout!.on("data", (chunk: Buffer) => ((stdout += chunk.toString()), wake()));
  child.stderr!.on("data", (chunk: Buffer) => ((stderr += chunk.toString()), wake()));
  const exited = new Promise<CliRun>((resolve) =>
    child.once("close", (code) => resolve({ code: code ?? -1, stdout, stderr })),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitForOutput(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        const check = (): void => {
          if (!pattern.test(stdout) && !pattern.test(stderr)) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no ${pattern} within ${timeoutMs} ms; stdout: ${stdout}\nstderr: ${stderr}`));
        }, timeoutMs);
        waiters.add(check);
        void exited.then(() => {
          if (!waiters.has(check)) return;
          done();
          reject(new Error(`exited before ${pattern}; stdout: ${stdout}\nstderr: ${stderr}`));
        });
        check();
      });
    },
  };
}
