// Runs the real pinned `claude` once, hermetically, against a model server URL: prompt on stdin,
// stream-json on stdout. Shared by the real-CLI tests and the fixture generator.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { hermeticEnv, type HermeticEnv } from "../../src/testing/index.ts";

export const CLAUDE = join(import.meta.dirname, "../../node_modules/.bin/claude");

export interface ClaudeRun {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  durationMs: number;
  /** Time from spawn to the first stdout line (usually system/init), or null if none. */
  firstLineMs: number | null;
  /** Parsed stdout lines (every line the CLI printed is one JSON object). */
  lines: Array<Record<string, any>>;
  argv: string[];
}

export interface RunClaudeOptions {
  baseUrl: string;
  prompt: string;
  args?: string[];
  cwd?: string;
  /** Reuse an existing hermetic environment (e.g. a second turn in the same config dir). */
  hermetic?: HermeticEnv;
  sandboxed?: boolean;
  maxRetries?: number;
  extraEnv?: Record<string, string>;
  /** Called with each stdout line as it arrives; may signal the child (e.g. SIGTERM mid-stream). */
  onLine?: (line: Record<string, any>, child: { kill(signal: NodeJS.Signals): boolean }) => void;
  timeoutMs?: number;
}

export function baseArgs(): string[] {
  return ["-p", "--output-format", "stream-json", "--verbose"];
}

export async function runClaude(options: RunClaudeOptions): Promise<ClaudeRun & { hermetic: HermeticEnv }> {
  const hermetic =
    options.hermetic ??
    hermeticEnv({ baseUrl: options.baseUrl, sandboxed: options.sandboxed, maxRetries: options.maxRetries });
  const argv = [...baseArgs(), ...(options.args ?? [])];
  const started = performance.now();
  const child = spawn(CLAUDE, argv, {
    cwd: options.cwd ?? hermetic.dirs.root,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...hermetic.env, ...options.extraEnv },
    stdio: ["pipe", "pipe", "pipe"],
  });
  child.stdin.end(options.prompt);
  let stdout = "";
  let stderr = "";
  let pending = "";
  const lines: Array<Record<string, any>> = [];
  let firstLineMs: number | null = null;
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    stdout += chunk;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const text = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (text === "") continue;
      const line = JSON.parse(text) as Record<string, any>;
      firstLineMs ??= Math.round(performance.now() - started);
      lines.push(line);
      options.onLine?.(line, child);
    }
  });
  child.stderr.on("data", (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (c, s) => resolve([c, s]));
  });
  clearTimeout(timer);
  if (pending.trim() !== "") lines.push(JSON.parse(pending) as Record<string, any>);
  return {
    stdout,
    stderr,
    code,
    signal,
    durationMs: Math.round(performance.now() - started),
    firstLineMs,
    lines,
    argv,
    hermetic,
  };
}

export const resultsOf = (run: ClaudeRun) => run.lines.filter((l) => l["type"] === "result");
