// Shared helpers for the CLI runner's tests: a hermetic env for one run, a process tree to contain,
// and /proc checks.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hermeticEnv as hermetic } from "../../src/testing/index.ts";
import { startScriptedServer } from "./_model.ts";

/**
 * Env overlay that points the real CLI at a loopback model server, with its own config, home, temp
 * and runtime dirs (turnstream/testing's, under `root`: config is `<root>/config`). Its own HOME
 * matters here: the Bash tool sources the user's shell start-up files, and a tree killed mid-rehash
 * leaves this machine's pyenv lock behind, on which every later shell would wait a minute.
 */
export function hermeticEnv(url: string, root?: string): Record<string, string> {
  return hermetic({ baseUrl: url, root }).env;
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

/**
 * The bound for waiting on what follows by itself (a process starting, or dying once it was told to):
 * waitUntil returns as soon as it holds, and a loaded machine can take seconds for either.
 */
export const SETTLE_MS = 15_000;

/** Waits (bounded) until `cond` holds, re-checking every 100 ms. */
export async function waitUntil(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Tries a run with a deadline (timeoutMs, inactivityTimeoutMs) of `firstMs`, then of three and nine
 * times that, until `attempt` reports that the run reached the state under test before its deadline
 * fired. On a loaded machine the CLI's start-up alone can outlast a short deadline; a long one from
 * the start would make every run of the test wait for it.
 */
export async function withGrowingDeadline(firstMs: number, attempt: (ms: number) => Promise<boolean>): Promise<void> {
  const tried: number[] = [];
  for (const ms of [firstMs, firstMs * 3, firstMs * 9]) {
    if (await attempt(ms)) return;
    tried.push(ms);
  }
  throw new Error(`the deadline fired before the run reached the state under test, at each of ${tried.join(", ")} ms`);
}

/** The tree's default script: a child and a grandchild in its own session, then it waits. */
export const TREE_SCRIPT = "sleep 60 & setsid sleep 60 & echo started; wait";

/**
 * A shell (the tree's root) running `script` (by default a child and a grandchild in its own
 * session), all carrying `marker`; resolves once the script printed its first line. `launch` puts
 * a launcher in front of the shell (containment.ts's launchCommand).
 */
export async function startTree(
  marker: string,
  opts: { script?: string; launch?: (file: string, args: string[]) => { file: string; args: string[] } } = {},
): Promise<ChildProcess> {
  const cmd = (opts.launch ?? ((file, args) => ({ file, args })))("/bin/sh", ["-c", opts.script ?? TREE_SCRIPT]);
  const root = spawn(cmd.file, cmd.args, {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", TURNSTREAM_TREE: marker },
  });
  await new Promise<void>((resolve) => root.stdout!.once("data", () => resolve()));
  return root;
}

/** A number that tells this test's escaped sleepers from anyone else's. */
export function escapeNonce(): string {
  return String(100000 + Math.floor(Math.random() * 900000));
}

/**
 * Shell commands that leave the run as far as a process can without privileges: a new session and
 * no TURNSTREAM_TREE (`sleep 301.<nonce>`), and a new session with an empty environment (`sleep 302.<nonce>`).
 */
export function escapeCommands(nonce: string): string {
  return `setsid -f env -u TURNSTREAM_TREE sleep 301.${nonce} >/dev/null 2>&1; env -i setsid -f sleep 302.${nonce} >/dev/null 2>&1`;
}

/**
 * A shell command that returns once both escaped sleepers of `nonce` run `sleep` (`setsid -f` returns
 * before its child has dropped the marker and exec'd), so a check after it sees them as they stay.
 */
export function awaitEscapes(nonce: string): string {
  return `until pgrep -xf 'sleep 301.${nonce}' >/dev/null && pgrep -xf 'sleep 302.${nonce}' >/dev/null; do :; done`;
}

/** Live pids running the escaped sleepers of `nonce` (found by /proc/<pid>/cmdline). */
export function escapees(nonce: string): number[] {
  const want = new Set([`sleep 301.${nonce}`, `sleep 302.${nonce}`]);
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((pid) => want.has(cmdline(pid)) && alive(pid));
}

/** Kills whatever escaped sleepers a test leaves behind (for the checks that expect some to survive). */
export function killEscapees(nonce: string): void {
  for (const pid of escapees(nonce)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * A stand-in CLI: runs `script` (shell), prints an init, an assistant and a successful result line,
 * and exits. Enough for runTurn to settle a turn without the real CLI.
 */
export function fakeCli(script: string, dir: string = mkdtempSync(join(tmpdir(), "ts-fake-cli-"))): string {
  const path = join(dir, "fake-claude");
  writeFileSync(
    path,
    `#!/bin/sh
cat >/dev/null
${script}
echo '{"type":"system","subtype":"init","session_id":"fake-session","tools":[],"model":"fake"}'
echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"ok"}]},"session_id":"fake-session"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":1,"session_id":"fake-session","total_cost_usd":0}'
`,
  );
  chmodSync(path, 0o755);
  return path;
}

export interface HostInfo {
  cli: number;
  marker: string;
  watchdog?: number;
  cgroup?: string;
  limitCgroups?: string[];
  containment?: string;
}

/**
 * Starts test/runner/_host.ts (one turn of the real CLI whose Bash tool runs `command`, which must echo
 * `started`, then a model that never answers) and resolves once the tool's result is in.
 */
export async function startHost(
  mode: string,
  command: string,
  env: Record<string, string> = {},
): Promise<{ host: ChildProcess; info: HostInfo; exited: Promise<number | null> }> {
  const server = await startScriptedServer([
    { tool: { name: "Bash", input: { command, description: "sleepers" } } },
    { hang: true },
  ]);
  const host = spawn(process.execPath, [join(import.meta.dirname, "_host.ts")], {
    env: {
      ...process.env,
      ...env,
      MODEL_URL: server.url,
      HOST_MODE: mode,
      RUN_CWD: mkdtempSync(join(tmpdir(), "ts-host-cwd-")),
    },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const exited = new Promise<number | null>((r) => host.once("exit", (code) => r(code)));
  exited.then(
    () => server.close(),
    () => server.close(),
  );
  let out = "";
  const info = await new Promise<HostInfo>((resolve, reject) => {
    host.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const nl = out.indexOf("\n");
      if (nl !== -1) resolve(JSON.parse(out.slice(0, nl)) as HostInfo);
    });
    host.once("exit", () => reject(new Error("host exited before the CLI ran the Bash call")));
  });
  return { host, info, exited };
}
