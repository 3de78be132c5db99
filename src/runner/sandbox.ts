// The CLI's own tool sandbox (bubblewrap on Linux) for a run whose workspace is not trusted, and the
// one settings file a run gets. The CLI takes one `--settings` file (its "flag" settings source), so
// the caller's settings (a job's file, the supervised hook's) and the sandbox block are composed here
// into one object, once per run; the caller's file may not touch `sandbox` nor carry the permission
// rules the CLI merges into the sandbox's write and network lists.
//
// What the sandbox does (measured with CLI 2.1.332; the README's Security section says it for
// operators): a Bash tool and everything it starts runs in bwrap with no network but the allowed
// domains (through the CLI's proxy), writes only in the workspace, the added directories and the
// run's temp folders, cannot read the paths in `denyRead` nor see the CLI's credentials. The CLI
// process itself, its hooks (the supervised forwarder) and its model traffic are not sandboxed; the
// built-in file tools get deny rules instead.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findOnPath } from "./containment.ts";
import { badOptions } from "./errors.ts";

type CheckStatus = "pass" | "warn" | "fail";

/** What a sandboxed run's tools may reach. */
export interface ToolSandbox {
  /** Hosts a tool may reach through the CLI's proxy (`sandbox.network.allowedDomains`); empty: none. */
  allowDomains: readonly string[];
  /** Paths no tool may read (the worker's own files); the workspace, added dirs and scratch stay readable. */
  denyRead: readonly string[];
}

/**
 * The CLI's bridge sockets (`claude-http-<16 hex>.sock`) are made in its TMPDIR, and a unix socket
 * path holds at most 107 bytes: a longer TMPDIR makes every sandboxed command fail to start.
 */
export const SOCKET_DIR_MAX = 107 - "/claude-socks-0123456789abcdef.sock".length;

/** The programs the CLI's Linux sandbox needs, found on the PATH the CLI gets. */
export const SANDBOX_PROGRAMS = ["bwrap", "socat"] as const;

export const SANDBOX_INSTALL_HINT = "install bubblewrap and socat (Debian/Ubuntu: apt-get install bubblewrap socat)";

export type SandboxProbe = { ok: true; detail: string } | { ok: false; detail: string };

/**
 * Whether the CLI's sandbox can work here: bwrap and socat on `path`, and a bwrap run with the
 * namespaces the CLI asks for (no network, own pids, a fresh /proc) actually starts.
 */
export function probeToolSandbox(path: string | undefined = process.env["PATH"]): SandboxProbe {
  const missing = SANDBOX_PROGRAMS.filter((p) => findOnPath(p, path ?? "") === undefined);
  if (missing.length > 0) {
    return { ok: false, detail: `${missing.join(" and ")} not found on PATH; ${SANDBOX_INSTALL_HINT}` };
  }
  const bwrap = findOnPath("bwrap", path ?? "")!;
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid"];
  const command = ["--die-with-parent", "--", "/bin/sh", "-c", "echo sandbox-ok"];
  const result = spawnSync(bwrap, [...args, ...command], { encoding: "utf8", timeout: 10_000 });
  if (result.status === 0 && result.stdout.trim() === "sandbox-ok")
    return { ok: true, detail: `bwrap works (${bwrap})` };
  const why = (result.stderr ?? "").trim().split("\n")[0] || result.error?.message || `exit ${result.status}`;
  return { ok: false, detail: `${bwrap} cannot start a sandbox here (${why}); user namespaces must be allowed` };
}

// Permission rules the CLI merges into the sandbox: Edit/Write allow rules widen where tools may
// write, WebFetch domain rules widen where they may connect.
const WIDENING_RULE = /^\s*(Edit|Write|MultiEdit|NotebookEdit|WebFetch)\s*\(/i;

/** The caller's settings as an object, refused when it touches the sandbox or could widen it. */
function callerSettings(file: string | undefined): Record<string, unknown> {
  if (file === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw badOptions("settingsFile", `${file} is not readable JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw badOptions("settingsFile", `${file} must hold a JSON object`);
  }
  const settings = parsed as Record<string, unknown>;
  if ("sandbox" in settings) {
    const why = `${file} sets "sandbox", which only the worker sets (for a turn whose workspace is not trusted)`;
    throw badOptions("settingsFile", `${why}; remove the key`);
  }
  const allow = (settings["permissions"] as { allow?: unknown } | undefined)?.allow;
  const rules: unknown[] = Array.isArray(allow) ? allow : [];
  const widening = rules.find((rule) => typeof rule === "string" && WIDENING_RULE.test(rule));
  if (widening !== undefined) {
    const why = `permissions.allow rule ${JSON.stringify(widening)} would widen the tool sandbox`;
    throw badOptions("settingsFile", `${file}: ${why} (the CLI merges Edit/Write/WebFetch rules into it); remove it`);
  }
  return settings;
}

/** The CLI's own credentials in its environment, which sandboxed commands do not see. */
export const CLI_CREDENTIAL_VARS = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"] as const;

/** The `sandbox` block of a run's settings. */
export function sandboxBlock(
  sandbox: ToolSandbox,
  readable: readonly string[],
  writable: readonly string[],
): Record<string, unknown> {
  return {
    enabled: true,
    // The CLI exits rather than run a command unconfined when bwrap cannot start.
    failIfUnavailable: true,
    // `dangerouslyDisableSandbox` on a Bash call is ignored: a model cannot ask its way out.
    allowUnsandboxedCommands: false,
    excludedCommands: [],
    network: { allowedDomains: [...sandbox.allowDomains] },
    filesystem: { allowWrite: [...writable], denyRead: [...sandbox.denyRead], allowRead: [...readable] },
    // The CLI needs its credentials; the commands it runs do not, and could print them.
    credentials: { envVars: CLI_CREDENTIAL_VARS.map((name) => ({ name, mode: "deny" })) },
  };
}

/**
 * The run's TMPDIR if it has one short enough for the CLI's sockets, else a private one under the
 * system temp dir: the sandbox may write its TMPDIR, and the system's own is shared with everything
 * else on the machine.
 */
function socketSafeTmp(env: Record<string, string>, onCleanup: (undo: () => void) => void): string {
  const current = env["TMPDIR"];
  if (current !== undefined && current.length <= SOCKET_DIR_MAX) return current;
  const base = tmpdir().length <= SOCKET_DIR_MAX - 12 ? tmpdir() : "/tmp";
  const dir = mkdtempSync(join(base, "ts-sbx-"));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const isWithin = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);

/**
 * What the CLI reads from its config home as configuration or credentials: the built-in file tools
 * run in the CLI process, outside the sandbox, and with permissions skipped a Write there would
 * change the settings the CLI reloads (its env, hence where its model calls go) or what later
 * sessions load. The home's temp folders stay usable.
 */
export const CONFIG_HOME_ENTRIES = [
  "settings.json",
  "settings.local.json",
  ".claude.json",
  ".credentials.json",
  "CLAUDE.md",
  "agents",
  "commands",
  "skills",
  "hooks",
  "plugins",
  "output-styles",
  "rules",
  "projects",
] as const;

/** Where the run's own configuration lives, which no tool may change. */
interface RunConfigPaths {
  /** The folder of the composed `--settings` file. */
  settingsDir: string;
  /** The run's CLAUDE_CONFIG_DIR, when it has one of its own. */
  configHome: string | undefined;
}

/** Deny rules that keep the file tools off the run's own configuration (and Read off its credential). */
function configDenies(paths: RunConfigPaths): string[] {
  const settings = [`Edit(/${paths.settingsDir}/**)`];
  if (paths.configHome === undefined) return settings;
  const home = paths.configHome;
  const entries = CONFIG_HOME_ENTRIES.flatMap((entry) => [`Edit(/${home}/${entry})`, `Edit(/${home}/${entry}/**)`]);
  return [...settings, ...entries, `Read(/${home}/.credentials.json)`];
}

/**
 * The built-in file tools (Read, Edit, Write) are not in the sandbox: they follow permission rules,
 * and a run that skips permissions would read anything. Deny rules hold them off the denied paths
 * that hold none of the run's own folders (a deny rule would beat the workspace's allowance there),
 * and off the run's own configuration.
 */
function withFileToolDenies(
  permissions: unknown,
  denyRead: readonly string[],
  readable: readonly string[],
  config: RunConfigPaths,
): object {
  const base = typeof permissions === "object" && permissions !== null ? { ...(permissions as object) } : {};
  const given = (base as { deny?: unknown }).deny;
  const deny = Array.isArray(given) ? (given as unknown[]) : [];
  const paths = denyRead.filter((dir) => !readable.some((own) => isWithin(own, dir)));
  const rules = paths.flatMap((dir) => [`Read(/${dir}/**)`, `Edit(/${dir}/**)`]);
  return { ...base, deny: [...deny, ...rules, ...configDenies(config)] };
}

export interface RunSettingsInput {
  cwd: string;
  settingsFile?: string | undefined;
  toolSandbox?: ToolSandbox | undefined;
  addDirs: readonly string[];
  trustWorkspace?: boolean | undefined;
  /** The run's own CLAUDE_CONFIG_DIR, if it has one. */
  configHomeDir?: string | undefined;
}

export interface RunFilesAccess {
  /** The run's private scratch folder (made on first use, removed with the run). */
  scratchDir(): string;
  onCleanup(undo: () => void): void;
}

/**
 * A private folder for the composed settings, outside every folder the sandbox may write: the CLI
 * reads the file again while it runs, so a tool that could replace it could switch the sandbox off
 * or point the CLI's model calls elsewhere.
 */
function settingsFolder(temps: readonly string[], onCleanup: (undo: () => void) => void): string {
  const dir = mkdtempSync(join(tmpdir(), "ts-settings-"));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const writable = temps.find((temp) => isWithin(dir, temp));
  if (writable !== undefined) {
    const why = `the run's temp folder ${writable} holds the system temp directory, where its settings would be writable`;
    throw badOptions("toolSandbox", `${why}; give the run a TMPDIR of its own`);
  }
  return dir;
}

export interface RunSettings {
  /** The `--settings` file the CLI is given, if any. */
  file: string | undefined;
  /** A sandboxed run's private folder that holds it, where no tool may write. */
  privateDir?: string;
}

/**
 * The `--settings` file of a run: the caller's file unchanged when the run is not sandboxed;
 * otherwise one composed file (the caller's settings, then the sandbox block, which nothing in them
 * can change) in a private folder no tool may write, with the run's TMPDIR moved where the CLI's
 * sockets fit.
 */
export function runSettings(input: RunSettingsInput, env: Record<string, string>, files: RunFilesAccess): RunSettings {
  if (input.toolSandbox === undefined) return { file: input.settingsFile };
  if (input.trustWorkspace === true) {
    const why = "a trusted workspace's own settings could widen or switch off the sandbox";
    throw badOptions("toolSandbox", `${why}; drop trustWorkspace or toolSandbox`);
  }
  const settings = callerSettings(input.settingsFile);
  const scratch = files.scratchDir();
  const tmp = socketSafeTmp(env, (undo) => files.onCleanup(undo));
  env["TMPDIR"] = tmp;
  const temps = [...new Set([tmp, env["CLAUDE_CODE_TMPDIR"] ?? tmp, scratch])];
  const settingsDir = settingsFolder(temps, (undo) => files.onCleanup(undo));
  const readable = [input.cwd, ...input.addDirs, ...temps];
  const config = { settingsDir, configHome: input.configHomeDir };
  const composed = {
    ...settings,
    permissions: withFileToolDenies(settings["permissions"], input.toolSandbox.denyRead, readable, config),
    sandbox: sandboxBlock(input.toolSandbox, readable, temps),
  };
  const file = join(settingsDir, "settings.json");
  writeFileSync(file, JSON.stringify(composed, null, 2), { mode: 0o600, flag: "wx" });
  return { file, privateDir: settingsDir };
}

/**
 * doctor's line: can this host sandbox the tools of untrusted turns? A failure unless the operator
 * switched the sandbox off (TURNSTREAM_TOOL_SANDBOX=off), then a warning.
 */
export function sandboxCheck(env: Record<string, string | undefined>): { status: CheckStatus; detail: string } {
  const probe = probeToolSandbox(env["PATH"]);
  const unconfined = "TURNSTREAM_TOOL_SANDBOX=off: untrusted turns run their tools unconfined";
  const off = env["TURNSTREAM_TOOL_SANDBOX"] === "off";
  if (probe.ok && off) return { status: "warn", detail: `${probe.detail}; but ${unconfined}` };
  if (probe.ok) return { status: "pass", detail: `${probe.detail}; untrusted turns run their tools in it` };
  if (off) return { status: "warn", detail: `${probe.detail}; ${unconfined}` };
  const refused = "a worker refuses untrusted turns until then (or set TURNSTREAM_TOOL_SANDBOX=off)";
  return { status: "fail", detail: `${probe.detail}; ${refused}` };
}
