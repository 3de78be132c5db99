// Preparing one supervised CLI run: a private folder holding the run file (hub URL + bearer token,
// 0600, the forwarder's only argument) and a settings.json whose PreToolUse command hook sends the
// risky tools to the forwarder, plus the argv filter that removes every permission bypass.
//
// Why the hook command ends in `|| exit 2`: the real CLI treats a hook that exits non-zero
// (killed, cannot start) as a non-blocking error and falls back to the permission mode, which in the
// default mode still lets read-only commands (`echo`, `ls .`) run. Exit 2 is a blocking error: the
// call is denied whatever the command. A hook the CLI itself cancels at its timeout also falls back,
// so the forwarder's own deadline is well inside the hook timeout.
//
// Why `/usr/bin/env -i PATH=/usr/bin:/bin`: the CLI runs the hook with its own environment, which a job
// or workspace may have shaped; NODE_OPTIONS (`--import=data:…`), LD_PRELOAD and the like would run
// code in the forwarder before it asks anyone. The forwarder needs nothing from the environment (the
// run file is its argument), so it gets none. The shell is the CLI's `/bin/sh -c` and env is named by
// its full path, so PATH cannot substitute either.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../log/index.ts";
import { DEFAULT_RISKY_TOOLS, SHELL_TOOLS } from "./tool-calls.ts";
import type { DecisionHub, RunContext } from "./hub.ts";
import type { DeferredCall, ParkedCall } from "./parked.ts";
import { ownerTag, SUPERVISED_DIR_PREFIX } from "./sweep.ts";

export const FORWARDER_PATH = fileURLToPath(new URL("./forwarder.mjs", import.meta.url));

const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,127}$/;

export interface SupervisedRunOptions {
  session: string;
  turn: string;
  attempt: number;
  epoch: number;
  /** More tools that need a decision, added to DEFAULT_RISKY_TOOLS (every `mcp__*` tool always needs one). */
  riskyTools?: readonly string[] | undefined;
  /**
   * Tools of DEFAULT_RISKY_TOOLS to leave unsupervised for this run: they run under the CLI's default
   * permission mode without a decision. Each is logged as a warning (shell tools louder).
   */
  unsupervisedTools?: readonly string[] | undefined;
  /** The run's working directory (relative file globs in rules are resolved against it). */
  cwd?: string | undefined;
  /** The turn may park a call nobody answers within the hub's answer window (see RunContext.park). */
  park?: RunContext["park"];
  /** The run resumes a parked turn: its first call is answered from the parked request's record. */
  resume?: ParkedCall | undefined;
  /** Node binary that runs the forwarder (default: this process's, i.e. the project's node). */
  nodePath?: string | undefined;
  /** Where the private folder goes (default: the OS temp dir; never inside the agent's cwd). */
  tmpDir?: string | undefined;
  /** The forwarder's own deadline (default hub timeout + 5 s); the CLI's hook timeout is 30 s more. */
  forwarderTimeoutMs?: number | undefined;
  /** The CLI's hook timeout in seconds (default forwarder deadline + 30 s). Keep it above the forwarder's. */
  hookTimeoutSec?: number | undefined;
  logger?: Logger | undefined;
}

/** The runTurn options a supervised turn must use; spread over the worker's options. */
export interface SupervisedTurnFields {
  settingsFile: string;
  permissionMode: "default";
  skipPermissions: false;
}

export interface SupervisedRun {
  /** The tools that need a decision (besides every `mcp__*` tool). */
  readonly tools: readonly string[];
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
  /** allowedTools without the supervised ones (each removal logged as a warning). */
  allowedToolsFilter(allowedTools: readonly string[] | undefined): string[];
  /** The call the run's hook deferred, once it did: the CLI has ended its run and the turn parks on it. */
  deferred(): DeferredCall | undefined;
  /** Revokes the token and removes the folder. */
  close(): void;
}

/** MCP tools run whatever their server does: every one needs a decision. */
const MCP_TOOLS = "mcp__.*";

/** Anchored so `Write` never catches `TodoWrite` (or an MCP tool that ends in Write); every `mcp__*` tool is caught. */
export function matcherFor(tools: readonly string[]): string {
  for (const tool of tools) {
    if (!TOOL_NAME.test(tool))
      throw new Error(`risky tool name ${JSON.stringify(tool)} must be a tool name like Bash or mcp__server__tool`);
  }
  return `^(?:${[...tools, MCP_TOOLS].join("|")})$`;
}

/**
 * DEFAULT_RISKY_TOOLS plus `riskyTools`, minus `unsupervisedTools` (logged: a tool that leaves
 * supervision should never go unnoticed, a shell tool least of all).
 */
export function supervisedTools(
  options: Pick<SupervisedRunOptions, "riskyTools" | "unsupervisedTools" | "logger">,
): string[] {
  const off = new Set(options.unsupervisedTools ?? []);
  for (const tool of off) {
    if (!DEFAULT_RISKY_TOOLS.includes(tool)) {
      options.logger?.warn(
        { tool: tool },
        "supervised turn: unsupervisedTools names a tool that is not supervised by default; ignored",
      );
    } else if (SHELL_TOOLS.has(tool)) {
      options.logger?.warn(
        { tool: tool },
        "supervised turn: a shell tool is NOT supervised (unsupervisedTools): its commands run without an operator's decision",
      );
    } else {
      options.logger?.warn(
        { tool: tool },
        "supervised turn: a risky tool is not supervised (unsupervisedTools): its calls run without an operator's decision",
      );
    }
  }
  const tools = [...DEFAULT_RISKY_TOOLS.filter((t) => !off.has(t)), ...(options.riskyTools ?? [])];
  return [...new Set(tools)];
}

const shq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** The fixed environment of the forwarder: nothing of the CLI's reaches it. */
export const FORWARDER_ENV = "PATH=/usr/bin:/bin";

export function hookCommandFor(nodePath: string, runFile: string): string {
  return (
    `/usr/bin/env -i ${FORWARDER_ENV} ${shq(nodePath)} ${shq(FORWARDER_PATH)} ${shq(runFile)} 2>/dev/null || ` +
    `{ echo 'turnstream supervised mode: the permission hook failed, so this call is denied' >&2; exit 2; }`
  );
}

/** Splits allowedTools entries as the CLI does: on commas and blanks outside parentheses. */
export function toolSpecs(entries: readonly string[]): string[] {
  const out: string[] = [];
  for (const entry of entries) {
    let depth = 0;
    let cur = "";
    for (const char of entry) {
      if (char === "(") depth++;
      else if (char === ")") depth = Math.max(0, depth - 1);
      if (depth === 0 && (char === "," || /\s/.test(char))) {
        if (cur.length > 0) out.push(cur);
        cur = "";
      } else cur += char;
    }
    if (cur.length > 0) out.push(cur);
  }
  return out;
}

/**
 * Pre-approved supervised tools would let a call through whenever the hook fails (the CLI then falls
 * back to its permission rules), so only the allowances that need no decision are kept. Matched
 * without regard to case, and a wildcard tool name counts as supervised.
 */
export function filterAllowedTools(allowed: readonly string[] | undefined, matcher: string, logger?: Logger): string[] {
  const risky = new RegExp(matcher, "i");
  const specs = toolSpecs(allowed ?? []);
  const kept = specs.filter((spec) => {
    const tool = spec.replace(/\(.*$/s, "");
    return !risky.test(tool) && !tool.includes("*");
  });
  if (kept.length !== specs.length) {
    logger?.warn(
      { dropped: specs.filter((t) => !kept.includes(t)) },
      "supervised turn: pre-approved risky tools removed; each call needs a decision",
    );
  }
  return kept;
}

// Flags that would let a tool run without the hub's allow, or replace the hook.
const BOOL_FLAGS = new Set(["--dangerously-skip-permissions", "--allow-dangerously-skip-permissions"]);
const VALUE_FLAGS = new Set(["--permission-mode", "--settings", "--permission-prompt-tool", "--setting-sources"]);

/** Removes permission bypasses from extraArgs; `--permission-mode default` is the only mode kept. */
export function filterSupervisedArgs(extraArgs: readonly string[] | undefined, logger?: Logger): string[] {
  const out: string[] = [];
  const args = extraArgs ?? [];
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    if (BOOL_FLAGS.has(name)) {
      logger?.warn({ flag: name }, "supervised turn: removed a permission bypass flag from extraArgs");
      continue;
    }
    if (VALUE_FLAGS.has(name)) {
      const value = eq > 0 && name !== arg ? arg.slice(eq + 1) : args[index + 1];
      if (name === arg) index++;
      if (name === "--permission-mode" && value === "default") {
        out.push("--permission-mode", "default");
        continue;
      }
      logger?.warn(
        name === "--permission-mode" ? { flag: name, value } : { flag: name },
        "supervised turn: removed a flag from extraArgs that would bypass or replace the permission hook",
      );
      continue;
    }
    out.push(arg);
  }
  return out;
}

export function prepareSupervisedRun(hub: DecisionHub, options: SupervisedRunOptions): SupervisedRun {
  const tools = supervisedTools(options);
  const matcher = matcherFor(tools);
  const forwarderTimeoutMs = options.forwarderTimeoutMs ?? hub.timeoutMs + 5000;
  const hookTimeoutSec = options.hookTimeoutSec ?? Math.ceil(forwarderTimeoutMs / 1000) + 30;
  const reg = hub.registerRun({
    session: options.session,
    turn: options.turn,
    attempt: options.attempt,
    epoch: options.epoch,
    cwd: options.cwd,
    park: options.park,
    resume: options.resume,
  });
  let dir: string;
  try {
    dir = mkdtempSync(join(options.tmpDir ?? tmpdir(), `${SUPERVISED_DIR_PREFIX}${ownerTag()}-`));
  } catch (err) {
    reg.unregister();
    throw err;
  }
  const runFile = join(dir, "run.json");
  const settingsFile = join(dir, "settings.json");
  const hookCommand = hookCommandFor(options.nodePath ?? process.execPath, runFile);
  try {
    writeFileSync(runFile, JSON.stringify({ url: hub.url, token: reg.token, timeoutMs: forwarderTimeoutMs }), {
      mode: 0o600,
      flag: "wx",
    });
    const settings = {
      hooks: { PreToolUse: [{ matcher, hooks: [{ type: "command", command: hookCommand, timeout: hookTimeoutSec }] }] },
    };
    writeFileSync(settingsFile, JSON.stringify(settings, null, 2), { mode: 0o600, flag: "wx" });
  } catch (err) {
    reg.unregister();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let closed = false;
  return {
    tools,
    settingsFile,
    runFile,
    hookCommand,
    matcher,
    hookTimeoutSec,
    turnOptions: { settingsFile, permissionMode: "default", skipPermissions: false },
    argsFilter: (extraArgs) => filterSupervisedArgs(extraArgs, options.logger),
    allowedToolsFilter: (allowed) => filterAllowedTools(allowed, matcher, options.logger),
    deferred: () => reg.deferred(),
    close(): void {
      if (closed) return;
      closed = true;
      reg.unregister();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
