// runTurn's options, checked with zod before anything is spawned: a bad option becomes a
// `bad_options` error naming the field, never a confusing CLI failure later.
import { isAbsolute } from "node:path";
import { z as zod } from "zod";
import { badOptions } from "./errors.ts";
import type { Logger } from "../kernel/index.ts";

const nonEmpty = zod.string().min(1);
const posInt = zod.number().int().positive();
const absolute = nonEmpty.refine((p) => isAbsolute(p), "must be an absolute path");
const DOMAIN = /^(\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$/;
const skillName = zod
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, "letters, digits, . _ - only")
  .refine((n) => !n.includes(".."), "must not contain ..");

export const SkillSpecSchema = zod.object({ name: skillName, path: absolute });
export type SkillSpec = zod.infer<typeof SkillSpecSchema>;

export const ConfigHomeOptionsSchema = zod.object({
  instanceId: zod
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/)
    .refine((n) => !n.includes("..")),
  instanceRoot: absolute.optional(),
  runId: zod
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/)
    .refine((n) => !n.includes(".."))
    .optional(),
  /** Where the operator's `.credentials.json` lives; default host CLAUDE_CONFIG_DIR or ~/.claude. */
  operatorConfigDir: absolute.optional(),
  /**
   * `copy` (default): the home gets a copy of the operator's credential file. `none`: it gets no
   * credential; the run's env carries its model access (a model gateway's token).
   */
  credential: zod.enum(["copy", "none"]).optional(),
});

/** What one run may use (limits.ts); each unset limit is not applied. */
export const RunLimitsSchema = zod.strictObject({
  /** Tasks (processes and threads) at once. */
  pids: posInt.optional(),
  /** Bytes of memory. */
  memoryBytes: posInt.optional(),
  /** CPUs' worth of time (0.5: half a CPU): throttled past it, never failed. */
  cpus: zod.number().positive().max(4096).optional(),
  /** Bytes the run's scratch may hold, and any one file the run writes. */
  scratchBytes: posInt.optional(),
  /**
   * Wall time of a turn, ms: past it the tree is ended and the run fails `limit_duration` (unlike
   * `timeoutMs`, which fails `timeout`, not retried by a worker).
   */
  durationMs: posInt.optional(),
});

export const RunTurnOptionsSchema = zod.strictObject({
  /** Absolute directory the CLI runs in (its workspace). */
  cwd: absolute,
  /** The turn's prompt, written to the CLI's stdin (never argv). */
  prompt: zod.string().optional(),
  /** Model name or alias passed as `--model`. */
  model: nonEmpty.optional(),
  /** CLI session id to continue (`--resume`). */
  resume: nonEmpty.regex(/^[A-Za-z0-9_-]+$/, "must be a session id").optional(),
  /** With `resume`: continue in a new session id instead of the resumed one. */
  forkSession: zod.boolean().optional(),
  /** The CLI's `--permission-mode`; `bypassPermissions` as root needs `sandboxed`. */
  permissionMode: zod
    .enum(["acceptEdits", "auto", "bypassPermissions", "default", "manual", "dontAsk", "plan"])
    .optional(),
  /** Pass `--dangerously-skip-permissions`; as root it needs `sandboxed`. */
  skipPermissions: zod.boolean().optional(),
  /** The run is inside a sandbox: sets `IS_SANDBOX=1` (removed from the env otherwise). */
  sandboxed: zod.boolean().optional(),
  /** A settings JSON file passed as `--settings` (composed with the sandbox block when `toolSandbox` is set). */
  settingsFile: nonEmpty.optional(),
  /**
   * Run the tools in the CLI's sandbox (bwrap): network only to `allowDomains`, writes only in the
   * cwd, added dirs and the run's temp folders, no reads of `denyRead`. Only for an untrusted workspace.
   */
  toolSandbox: zod
    .strictObject({
      allowDomains: zod
        .array(zod.string().regex(DOMAIN, "must be a host name like example.com or *.example.com"))
        .readonly(),
      denyRead: zod.array(absolute).readonly(),
    })
    .optional(),
  /**
   * Let the CLI load the workspace's own settings, hooks, MCP servers and plugins (its CLAUDE.md and
   * skills are offered either way). Default false: the workspace is untrusted input.
   */
  trustWorkspace: zod.boolean().optional(),
  /** An MCP config file the caller vetted: the only MCP servers an untrusted-workspace run starts. */
  mcpConfigFile: absolute.optional(),
  /** More directories the CLI may read and write (`--add-dir`). */
  addDirs: zod.array(absolute).optional(),
  /** Most agentic turns the CLI takes (`--max-turns`). */
  maxTurns: posInt.optional(),
  /** Spending limit of the run in USD (`--max-budget-usd`). */
  maxBudgetUsd: zod.number().positive().finite().optional(),
  /** Text appended to the system prompt, passed through a file (never argv). */
  appendSystemPrompt: zod.string().optional(),
  /** Tools or tool rules allowed without asking (`--allowed-tools`, e.g. `Bash(git status*)`). */
  allowedTools: zod.array(nonEmpty).optional(),
  /** Tools or tool rules refused (`--disallowed-tools`). */
  disallowedTools: zod.array(nonEmpty).optional(),
  /** Also stream partial message events (`--include-partial-messages`). */
  includePartialMessages: zod.boolean().optional(),
  /** Also print hook start/response lines (`--include-hook-events`). */
  includeHookEvents: zod.boolean().optional(),
  /** More CLI arguments, appended as given. */
  extraArgs: zod.array(zod.string()).optional(),
  /**
   * Variables laid over the run's environment (a minimal base of the host's, plus its model access and
   * CLI settings: see buildEnv); a key set to `undefined` is removed. Never where the binary comes from.
   */
  env: zod.record(zod.string(), zod.string().optional()).optional(),
  /** Only the host's minimal base and `env`: none of its model access or CLI settings. */
  isolate: zod.boolean().optional(),
  /** The `claude` binary to run (default: the host's `CLAUDE_BIN`, else the pinned package's, else the host's PATH). */
  claudeBin: nonEmpty.optional(),
  /** Ends the run (whole process tree) after this long. */
  timeoutMs: posInt.optional(),
  /** Bounds on processes, memory, CPU, scratch and wall time (limits.ts); a run past one fails `limit_*`. */
  limits: RunLimitsSchema.optional(),
  /** Ends the run when the CLI prints nothing on stdout for this long. */
  inactivityTimeoutMs: posInt.optional(),
  /** Wait between SIGTERM and SIGKILL of the tree (default 2000). */
  killGraceMs: zod.number().int().nonnegative().optional(),
  /** Aborting it ends the run like a timeout. */
  signal: zod.instanceof(AbortSignal).optional(),
  /** Where warnings go (pino-compatible; default silent). */
  logger: zod
    .custom<Logger>((v) => typeof v === "object" && v !== null && typeof (v as Logger).warn === "function")
    .optional(),
  /** Called with each stderr line of the CLI. */
  onStderr: zod.custom<(line: string) => void>((v) => typeof v === "function").optional(),
  /** Per-run CLAUDE_CONFIG_DIR (see config-home.ts). */
  configHome: ConfigHomeOptionsSchema.optional(),
  /**
   * Skills to offer the model: copied under `<cwd>/.skills` and listed (claude-md: in CLAUDE.md when the
   * workspace is trusted, else in the appended system prompt; undone once the run is over) or linked via
   * --add-dir (trusted workspaces only).
   */
  skills: zod.array(SkillSpecSchema).optional(),
  /** How `skills` reach the model: `claude-md` (default) or `add-dir`. */
  skillsMode: zod.enum(["claude-md", "add-dir"]).optional(),
  /** Start a watchdog that kills the CLI tree if this host process dies. Default true. */
  watchdog: zod.boolean().optional(),
  /** Thread id, only used to label errors. */
  threadId: zod.string().optional(),
});

export type RunTurnOptions = zod.input<typeof RunTurnOptionsSchema>;
export type ConfigHomeOptions = zod.input<typeof ConfigHomeOptionsSchema>;

/** runTurn's options once checked. */
export type CheckedRunTurnOptions = zod.output<typeof RunTurnOptionsSchema>;

export function validateRunTurnOptions(options: unknown): CheckedRunTurnOptions {
  const checked = checkedOrThrow(RunTurnOptionsSchema, options);
  const nativeSkills = checked.skillsMode === "add-dir" && (checked.skills ?? []).length > 0;
  if (nativeSkills && checked.trustWorkspace !== true) throw badOptions("skillsMode", NATIVE_SKILLS_REFUSED);
  return checked;
}

/**
 * Why `skillsMode: "add-dir"` needs a trusted workspace: the CLI loads such skills natively, and a
 * skill's front matter hooks and `!` lines then run commands no permission hook ever sees.
 */
export const NATIVE_SKILLS_REFUSED =
  '"add-dir" loads skills natively, where their front matter hooks and `!` lines run outside supervision, ' +
  'and only a trusted workspace (trustWorkspace: true) may do that; use skillsMode "claude-md" (the default: ' +
  "the model reads each skill as a file)";

const TurnDeadlinesSchema = RunTurnOptionsSchema.pick({ timeoutMs: true, inactivityTimeoutMs: true });

/** A warm turn's deadlines, checked as runTurn checks them. */
export function validateTurnDeadlines(deadlines: Pick<RunTurnOptions, "timeoutMs" | "inactivityTimeoutMs">): void {
  checkedOrThrow(TurnDeadlinesSchema, deadlines);
}

/** The options as the schema checks them, or a bad_options error naming the first bad one. */
function checkedOrThrow<S extends zod.ZodType>(schema: S, options: unknown): zod.output<S> {
  const checked = schema.safeParse(options);
  if (checked.success) return checked.data;
  const issue = checked.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.map(String).join(".") : "(options)";
  const problem = issue.code === "unrecognized_keys" ? `unknown option ${issue.keys.join(", ")}` : issue.message;
  throw badOptions(issue.code === "unrecognized_keys" ? issue.keys[0]! : field, problem);
}
