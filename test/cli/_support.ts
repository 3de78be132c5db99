// Shared helpers for the CLI runner's real-CLI tests: a hermetic env for one run and /proc checks.
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Env overlay that points the real CLI at a loopback model server, with its own dirs. */
export function hermeticEnv(url: string, dir: string = mkdtempSync(join(tmpdir(), "ts-cli-env-"))): Record<string, string> {
  return {
    ANTHROPIC_BASE_URL: url,
    ANTHROPIC_API_KEY: "test-key",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    CLAUDE_CODE_MAX_RETRIES: "0",
    CLAUDE_CONFIG_DIR: join(dir),
    TMPDIR: dir,
    CLAUDE_CODE_TMPDIR: dir,
    XDG_RUNTIME_DIR: dir,
  };
}

/** Live (non-zombie) pids whose environment carries TURNSTREAM_TREE=<marker>. */
export function treeMembers(marker: string): number[] {
  const want = Buffer.from(`TURNSTREAM_TREE=${marker}`);
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "latin1");
      const state = stat.slice(stat.lastIndexOf(") ") + 2)[0];
      if (state === "Z" || state === "X") continue;
      const env = readFileSync(`/proc/${name}/environ`);
      if (env.indexOf(want) !== -1) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat.slice(stat.lastIndexOf(") ") + 2)[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ").trim();
  } catch {
    return "";
  }
}

/** Waits (bounded) until `cond` holds, re-checking every 100 ms. */
export async function waitUntil(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
