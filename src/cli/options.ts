// runTurn's options, checked with zod before anything is spawned: a bad option becomes a
// `bad_options` error naming the field, never a confusing CLI failure later.
import { isAbsolute } from "node:path";
import { z } from "zod";
import { badOptions } from "./errors.ts";
import type { Logger } from "./logger.ts";

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
});

export const RunTurnOptionsSchema = z.strictObject({
  cwd: absolute,
  prompt: z.string().optional(),
  model: nonEmpty.optional(),
  resume: nonEmpty.regex(/^[A-Za-z0-9_-]+$/, "must be a session id").optional(),
  forkSession: z.boolean().optional(),
  permissionMode: z.enum(["acceptEdits", "auto", "bypassPermissions", "default", "manual", "dontAsk", "plan"]).optional(),
  skipPermissions: z.boolean().optional(),
  sandboxed: z.boolean().optional(),
  settingsFile: nonEmpty.optional(),
  /**
   * Let the CLI load the workspace's own settings, hooks, MCP servers and plugins (its CLAUDE.md and
   * skills are offered either way). Default false: the workspace is untrusted input.
   */
  trustWorkspace: z.boolean().optional(),
  /** An MCP config file the caller vetted: the only MCP servers an untrusted-workspace run starts. */
  mcpConfigFile: absolute.optional(),
  addDirs: z.array(absolute).optional(),
  maxTurns: posInt.optional(),
  maxBudgetUsd: z.number().positive().finite().optional(),
  appendSystemPrompt: z.string().optional(),
  allowedTools: z.array(nonEmpty).optional(),
  disallowedTools: z.array(nonEmpty).optional(),
  includePartialMessages: z.boolean().optional(),
  includeHookEvents: z.boolean().optional(),
  extraArgs: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string().optional()).optional(),
  isolate: z.boolean().optional(),
  claudeBin: nonEmpty.optional(),
  timeoutMs: posInt.optional(),
  inactivityTimeoutMs: posInt.optional(),
  killGraceMs: z.number().int().nonnegative().optional(),
  signal: z.instanceof(AbortSignal).optional(),
  logger: z.custom<Logger>((v) => typeof v === "object" && v !== null && typeof (v as Logger).warn === "function").optional(),
  onStderr: z.custom<(line: string) => void>((v) => typeof v === "function").optional(),
  /** Per-run CLAUDE_CONFIG_DIR (see config-home.ts). */
  configHome: ConfigHomeOptionsSchema.optional(),
  /** Skills to offer the model: copied under `<cwd>/.skills` (claude-md) or linked via --add-dir. */
  skills: z.array(SkillSpecSchema).optional(),
  skillsMode: z.enum(["claude-md", "add-dir"]).optional(),
  /** Start a watchdog that kills the CLI tree if this host process dies. Default true. */
  watchdog: z.boolean().optional(),
  /** Thread id, only used to label errors. */
  threadId: z.string().optional(),
});

export type RunTurnOptions = z.input<typeof RunTurnOptionsSchema>;
export type ConfigHomeOptions = z.input<typeof ConfigHomeOptionsSchema>;

export function validateRunTurnOptions(options: unknown): z.output<typeof RunTurnOptionsSchema> {
  const checked = RunTurnOptionsSchema.safeParse(options);
  if (checked.success) return checked.data;
  const issue = checked.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.map(String).join(".") : "(options)";
  const problem = issue.code === "unrecognized_keys" ? `unknown option ${issue.keys.join(", ")}` : issue.message;
  throw badOptions(issue.code === "unrecognized_keys" ? issue.keys[0]! : field, problem);
}
