// runTurn's options, checked with zod before anything is spawned: a bad option becomes a
// `bad_options` error naming the field, never a confusing CLI failure later.
import { isAbsolute } from "node:path";
import { z } from "zod";
import { badOptions } from "./errors.ts";
import type { Logger } from "../kernel/index.ts";

const nonEmpty = z.string().min(1);
const posInt = z.number().int().positive();
const absolute = nonEmpty.refine((p) => isAbsolute(p), "must be an absolute path");
const skillName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, "letters, digits, . _ - only").refine((n) => !n.includes(".."), "must not contain ..");

export const SkillSpecSchema = z.object({ name: skillName, path: absolute });
export type SkillSpec = z.infer<typeof SkillSpecSchema>;

export const ConfigHomeOptionsSchema = z.object({
  instanceId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/).refine((n) => !n.includes("..")),
  instanceRoot: absolute.optional(),
  runId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/).refine((n) => !n.includes("..")).optional(),
  /** Where the operator's `.credentials.json` lives; default host CLAUDE_CONFIG_DIR or ~/.claude. */
  operatorConfigDir: absolute.optional(),
  /**
   * `copy` (default): the home gets a copy of the operator's credential file. `none`: it gets no
   * credential; the run's env carries its model access (a model gateway's token).
   */
  credential: z.enum(["copy", "none"]).optional(),
});

export const RunTurnOptionsSchema = z.strictObject({
  /** Absolute directory the CLI runs in (its workspace). */
  cwd: absolute,
  /** The turn's prompt, written to the CLI's stdin (never argv). */
  prompt: z.string().optional(),
  /** Model name or alias passed as `--model`. */
  model: nonEmpty.optional(),
  /** CLI session id to continue (`--resume`). */
  resume: nonEmpty.regex(/^[A-Za-z0-9_-]+$/, "must be a session id").optional(),
  /** With `resume`: continue in a new session id instead of the resumed one. */
  forkSession: z.boolean().optional(),
  /** The CLI's `--permission-mode`; `bypassPermissions` as root needs `sandboxed`. */
  permissionMode: z.enum(["acceptEdits", "auto", "bypassPermissions", "default", "manual", "dontAsk", "plan"]).optional(),
  /** Pass `--dangerously-skip-permissions`; as root it needs `sandboxed`. */
  skipPermissions: z.boolean().optional(),
  /** The run is inside a sandbox: sets `IS_SANDBOX=1` (removed from the env otherwise). */
  sandboxed: z.boolean().optional(),
  /** A settings JSON file passed as `--settings`. */
  settingsFile: nonEmpty.optional(),
  /**
   * Let the CLI load the workspace's own settings, hooks, MCP servers and plugins (its CLAUDE.md and
   * skills are offered either way). Default false: the workspace is untrusted input.
   */
  trustWorkspace: z.boolean().optional(),
  /** An MCP config file the caller vetted: the only MCP servers an untrusted-workspace run starts. */
  mcpConfigFile: absolute.optional(),
  /** More directories the CLI may read and write (`--add-dir`). */
  addDirs: z.array(absolute).optional(),
  /** Most agentic turns the CLI takes (`--max-turns`). */
  maxTurns: posInt.optional(),
  /** Spending limit of the run in USD (`--max-budget-usd`). */
  maxBudgetUsd: z.number().positive().finite().optional(),
  /** Text appended to the system prompt, passed through a file (never argv). */
  appendSystemPrompt: z.string().optional(),
  /** Tools or tool rules allowed without asking (`--allowed-tools`, e.g. `Bash(git status*)`). */
  allowedTools: z.array(nonEmpty).optional(),
  /** Tools or tool rules refused (`--disallowed-tools`). */
  disallowedTools: z.array(nonEmpty).optional(),
  /** Also stream partial message events (`--include-partial-messages`). */
  includePartialMessages: z.boolean().optional(),
  /** Also print hook start/response lines (`--include-hook-events`). */
  includeHookEvents: z.boolean().optional(),
  /** More CLI arguments, appended as given. */
  extraArgs: z.array(z.string()).optional(),
  /** Variables laid over the host's environment; a key set to `undefined` is removed. */
  env: z.record(z.string(), z.string().optional()).optional(),
  /** Drop inherited `CLAUDE_*`/`ANTHROPIC_*` variables (the `env` overlay still applies). */
  isolate: z.boolean().optional(),
  /** The `claude` binary to run (default: `CLAUDE_BIN`, else the pinned package's, else PATH). */
  claudeBin: nonEmpty.optional(),
  /** Ends the run (whole process tree) after this long. */
  timeoutMs: posInt.optional(),
  /** Ends the run when the CLI prints nothing on stdout for this long. */
  inactivityTimeoutMs: posInt.optional(),
  /** Wait between SIGTERM and SIGKILL of the tree (default 2000). */
  killGraceMs: z.number().int().nonnegative().optional(),
  /** Aborting it ends the run like a timeout. */
  signal: z.instanceof(AbortSignal).optional(),
  /** Where warnings go (pino-compatible; default silent). */
  logger: z.custom<Logger>((v) => typeof v === "object" && v !== null && typeof (v as Logger).warn === "function").optional(),
  /** Called with each stderr line of the CLI. */
  onStderr: z.custom<(line: string) => void>((v) => typeof v === "function").optional(),
  /** Per-run CLAUDE_CONFIG_DIR (see config-home.ts). */
  configHome: ConfigHomeOptionsSchema.optional(),
  /** Skills to offer the model: copied under `<cwd>/.skills` and listed in its CLAUDE.md (claude-md; both undone once the run is over) or linked via --add-dir. */
  skills: z.array(SkillSpecSchema).optional(),
  /** How `skills` reach the model: `claude-md` (default) or `add-dir`. */
  skillsMode: z.enum(["claude-md", "add-dir"]).optional(),
  /** Start a watchdog that kills the CLI tree if this host process dies. Default true. */
  watchdog: z.boolean().optional(),
  /** Thread id, only used to label errors. */
  threadId: z.string().optional(),
});

export type RunTurnOptions = z.input<typeof RunTurnOptionsSchema>;
export type ConfigHomeOptions = z.input<typeof ConfigHomeOptionsSchema>;

/** runTurn's options once checked. */
export type CheckedRunTurnOptions = z.output<typeof RunTurnOptionsSchema>;

export function validateRunTurnOptions(options: unknown): CheckedRunTurnOptions {
  return checkedOrThrow(RunTurnOptionsSchema, options);
}

const TurnDeadlinesSchema = RunTurnOptionsSchema.pick({ timeoutMs: true, inactivityTimeoutMs: true });

/** A warm turn's deadlines, checked as runTurn checks them. */
export function validateTurnDeadlines(deadlines: Pick<RunTurnOptions, "timeoutMs" | "inactivityTimeoutMs">): void {
  checkedOrThrow(TurnDeadlinesSchema, deadlines);
}

/** The options as the schema checks them, or a bad_options error naming the first bad one. */
function checkedOrThrow<S extends z.ZodType>(schema: S, options: unknown): z.output<S> {
  const checked = schema.safeParse(options);
  if (checked.success) return checked.data;
  const issue = checked.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.map(String).join(".") : "(options)";
  const problem = issue.code === "unrecognized_keys" ? `unknown option ${issue.keys.join(", ")}` : issue.message;
  throw badOptions(issue.code === "unrecognized_keys" ? issue.keys[0]! : field, problem);
}
