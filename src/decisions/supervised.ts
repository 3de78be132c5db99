// Preparing one supervised CLI run: a private folder holding the run file (hub URL + bearer token,
// 0600, the forwarder's only argument) and a settings.json whose PreToolUse command hook sends the
// risky tools to the forwarder, plus the argv filter that removes every permission bypass.
//
// Why the hook command ends in `|| exit 2`: the real CLI (2.1.332) treats a hook that exits non-zero
// (killed, cannot start) as a non-blocking error and falls back to the permission mode, which in the
// default mode still lets read-only commands (`echo`, `ls .`) run. Exit 2 is a blocking error: the
// call is denied whatever the command. A hook the CLI itself cancels at its timeout also falls back,
// so the forwarder's own deadline is well inside the hook timeout.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../log/index.ts";
import { DEFAULT_RISKY_TOOLS } from "./events.ts";
import type { DecisionHub } from "./hub.ts";

export const FORWARDER_PATH = fileURLToPath(new URL("./forwarder.mjs", import.meta.url));

const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,127}$/;

export interface SupervisedRunOptions {
  session: string;
  turn: string;
  attempt: number;
  epoch: number;
  /** Tools that need a decision (default Bash, Write, Edit, MultiEdit, NotebookEdit, WebFetch). */
  riskyTools?: readonly string[];
  /** The run's working directory (relative file globs in rules are resolved against it). */
  cwd?: string;
  /** Node binary that runs the forwarder (default: this process's, i.e. the project's node). */
  nodePath?: string;
  /** Where the private folder goes (default: the OS temp dir; never inside the agent's cwd). */
  tmpDir?: string;
  /** The forwarder's own deadline (default hub timeout + 5 s); the CLI's hook timeout is 30 s more. */
  forwarderTimeoutMs?: number;
  /** The CLI's hook timeout in seconds (default forwarder deadline + 30 s). Keep it above the forwarder's. */
  hookTimeoutSec?: number;
  logger?: Logger;
}

/** The runTurn options a supervised turn must use; spread over the worker's options. */
export interface SupervisedTurnFields {
  settingsFile: string;
  permissionMode: "default";
  skipPermissions: false;
}

export interface SupervisedRun {
  readonly settingsFile: string;
  /** The 0600 file with the hub URL and this run's token. */
  readonly runFile: string;
  readonly hookCommand: string;
  readonly matcher: string;
  readonly hookTimeoutSec: number;
  /** Fields to put on runTurn's options (settingsFile, permissionMode "default", skipPermissions false). */
  readonly turnOptions: SupervisedTurnFields;
  /** extraArgs without any permission bypass (each removal logged as a warning). */
  argsFilter(extraArgs: readonly string[] | undefined): string[];
  /** Revokes the token and removes the folder. */
  close(): void;
}

/** Anchored so `Write` never catches `TodoWrite` (or an MCP tool that ends in Write). */
export function matcherFor(tools: readonly string[]): string {
  for (const t of tools) {
    if (!TOOL_NAME.test(t)) throw new Error(`risky tool name ${JSON.stringify(t)} must be a tool name like Bash or mcp__server__tool`);
  }
  return `^(?:${tools.join("|")})$`;
}

const shq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export function hookCommandFor(nodePath: string, runFile: string): string {
  return (
    `${shq(nodePath)} ${shq(FORWARDER_PATH)} ${shq(runFile)} 2>/dev/null || ` +
    `{ echo 'turnstream supervised mode: the permission hook failed, so this call is denied' >&2; exit 2; }`
  );
}

// Flags that would let a tool run without the hub's allow, or replace the hook.
const BOOL_FLAGS = new Set(["--dangerously-skip-permissions", "--allow-dangerously-skip-permissions"]);
const VALUE_FLAGS = new Set(["--permission-mode", "--settings", "--permission-prompt-tool", "--setting-sources"]);

/** Removes permission bypasses from extraArgs; `--permission-mode default` is the only mode kept. */
export function filterSupervisedArgs(extraArgs: readonly string[] | undefined, logger?: Logger): string[] {
  const out: string[] = [];
  const args = extraArgs ?? [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const eq = a.indexOf("=");
    const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
    if (BOOL_FLAGS.has(name)) {
      logger?.warn({ flag: name }, "supervised turn: removed a permission bypass flag from extraArgs");
      continue;
    }
    if (VALUE_FLAGS.has(name)) {
      const value = eq > 0 && name !== a ? a.slice(eq + 1) : args[i + 1];
      if (name === a) i++;
      if (name === "--permission-mode" && value === "default") {
        out.push("--permission-mode", "default");
        continue;
      }
      logger?.warn(
        { flag: name, ...(name === "--permission-mode" ? { value } : {}) },
        "supervised turn: removed a flag from extraArgs that would bypass or replace the permission hook",
      );
      continue;
    }
    out.push(a);
  }
  return out;
}

export function prepareSupervisedRun(hub: DecisionHub, options: SupervisedRunOptions): SupervisedRun {
  const tools = options.riskyTools ?? DEFAULT_RISKY_TOOLS;
  const matcher = matcherFor(tools.length > 0 ? tools : DEFAULT_RISKY_TOOLS);
  const forwarderTimeoutMs = options.forwarderTimeoutMs ?? hub.timeoutMs + 5000;
  const hookTimeoutSec = options.hookTimeoutSec ?? Math.ceil(forwarderTimeoutMs / 1000) + 30;
  const reg = hub.registerRun({
    session: options.session,
    turn: options.turn,
    attempt: options.attempt,
    epoch: options.epoch,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
  });
  let dir: string;
  try {
    dir = mkdtempSync(join(options.tmpDir ?? tmpdir(), "turnstream-supervised-"));
  } catch (err) {
    reg.unregister();
    throw err;
  }
  const runFile = join(dir, "run.json");
  const settingsFile = join(dir, "settings.json");
  const hookCommand = hookCommandFor(options.nodePath ?? process.execPath, runFile);
  try {
    writeFileSync(runFile, JSON.stringify({ url: hub.url, token: reg.token, timeoutMs: forwarderTimeoutMs }), { mode: 0o600, flag: "wx" });
    const settings = { hooks: { PreToolUse: [{ matcher, hooks: [{ type: "command", command: hookCommand, timeout: hookTimeoutSec }] }] } };
    writeFileSync(settingsFile, JSON.stringify(settings, null, 2), { mode: 0o600, flag: "wx" });
  } catch (err) {
    reg.unregister();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let closed = false;
  return {
    settingsFile,
    runFile,
    hookCommand,
    matcher,
    hookTimeoutSec,
    turnOptions: { settingsFile, permissionMode: "default", skipPermissions: false },
    argsFilter: (extraArgs) => filterSupervisedArgs(extraArgs, options.logger),
    close(): void {
      if (closed) return;
      closed = true;
      reg.unregister();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
