// Runs the `turnstream` command from the sources, as the bin tests do, and collects what it said.
import { execFile } from "node:child_process";
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
