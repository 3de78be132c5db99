// The turn job schema (zod): what a producer may ask for and what a job record holds. Job records
// hold no secret values: an env variable whose name looks secret must be a reference
// `{ fromEnv: "NAME" }`, resolved from the worker's own environment when the turn runs.
import { statSync } from "node:fs";
import { z as zod } from "zod";
import { SESSION_ID_PATTERN } from "../log/index.ts";
import { turnLabelsSchema } from "../events/index.ts";
import { tenantNameSchema } from "../tenants/index.ts";
import { secretShapeIn } from "../telemetry/index.ts";
import { InvalidTurnError, MissingVariableError } from "./errors.ts";
import { extraArgProblem } from "./extra-args.ts";

export const JOB_VERSION = 1;
export const TURN_ID_PATTERN = /^t_[A-Za-z0-9_-]{8,64}$/;

// Names whose values are credentials: these may only be referenced, never stored in a job record.
const SECRET_NAME = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION_ID)/i;
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name);
}

export const envRefSchema = zod.strictObject({
  fromEnv: zod.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "must be an environment variable name"),
});
export type EnvRef = zod.infer<typeof envRefSchema>;

const envName = zod.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "env names are letters, digits and _");

/**
 * A literal value shaped like a secret (a token, a URL with a password) is refused whatever its
 * variable is called: `MY_VALUE: "ghp_…"` puts the token in the job record as surely as
 * `GITHUB_TOKEN` would, and names cannot tell a password inside `DATABASE_URL`.
 */
function refuseSecretShapedValues(env: Record<string, string | EnvRef>, ctx: zod.RefinementCtx): void {
  for (const [name, value] of Object.entries(env)) {
    const shape = typeof value === "string" ? secretShapeIn(value) : undefined;
    if (shape === undefined) continue;
    ctx.addIssue({
      code: "custom",
      path: [name],
      message: `holds what looks like a secret (${shape}): job records must not hold secrets whatever the variable is called; pass { fromEnv: "<worker env var>" } instead`,
    });
  }
}

export const envOverlaySchema = zod
  .record(envName, zod.union([zod.string().max(32 * 1024), envRefSchema]))
  .superRefine((env, ctx) => {
    refuseSecretShapedValues(env, ctx);
    for (const [name, value] of Object.entries(env)) {
      if (typeof value === "string" && isSecretName(name)) {
        ctx.addIssue({
          code: "custom",
          path: [name],
          message: `looks like a secret: job records must not hold it; pass { fromEnv: "<worker env var>" } instead`,
        });
      }
    }
  });

const absolutePath = zod
  .string()
  .min(1)
  .max(4096)
  .refine((p) => p.startsWith("/"), "must be an absolute path");

/**
 * Why `cwd` cannot be a turn's working directory on this host: it does not exist or is not a
 * directory. Undefined when it is one, and when that cannot be told (a permission error is the
 * host's to report, not the caller's mistake). A relative path never gets here: the schemas refuse it.
 */
export function cwdProblem(cwd: string): string | undefined {
  try {
    return statSync(cwd).isDirectory() ? undefined : "is not a directory";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return "does not exist";
    if (code === "ENOTDIR") return "is not a directory (a part of the path is a file)";
    return undefined;
  }
}
const skillName = zod
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, "must be letters, digits, . _ - starting with a letter or digit")
  .refine((n) => !n.includes(".."), "must not contain ..");

/** A skill for the turn: its SKILL.md, or a folder holding one, under the worker's workspace roots. */
const jobSkillSchema = zod.strictObject({ name: skillName, path: absolutePath });

const extraArgsSchema = zod
  .array(zod.string().max(64 * 1024))
  .max(32)
  .superRefine((args, ctx) => {
    args.forEach((arg, index) => {
      const problem = extraArgProblem(arg);
      if (problem !== undefined) ctx.addIssue({ code: "custom", path: [index], message: problem });
    });
  });

const toolNames = zod
  .array(zod.string().regex(/^[A-Za-z][A-Za-z0-9_]*$/, "must be a tool name"))
  .min(1)
  .optional();

/** A job's own limits: each at most the worker's (checked by the worker, which knows its maximums). */
const jobLimitsSchema = zod.strictObject({
  /** Tasks (processes and threads) at once. */
  pids: zod.number().int().positive().optional(),
  /** MiB of memory. */
  memoryMb: zod.number().int().positive().optional(),
  /** CPUs' worth of time (0.5: half a CPU); past it the run is throttled. */
  cpus: zod.number().positive().max(4096).optional(),
  /** MiB the run's scratch may hold, and any one file it writes. */
  scratchMb: zod.number().int().positive().optional(),
});

/** The CLI options a turn may carry (a subset of the runner's, all plain data). */
/** A host name a tool may reach, or `*.` and a domain for its subdomains. */
const domainName = zod
  .string()
  .max(253)
  .regex(
    /^(\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$/,
    "must be a host name like example.com or *.example.com",
  );

export const turnOptionsSchema = zod
  .strictObject({
    model: zod.string().min(1).max(200).optional(),
    permissionMode: zod
      .enum(["acceptEdits", "auto", "bypassPermissions", "default", "manual", "dontAsk", "plan"])
      .optional(),
    skipPermissions: zod.boolean().optional(),
    maxTurns: zod.number().int().positive().optional(),
    maxBudgetUsd: zod.number().positive().finite().optional(),
    appendSystemPrompt: zod
      .string()
      .max(256 * 1024)
      .optional(),
    allowedTools: zod.array(zod.string().min(1)).optional(),
    disallowedTools: zod.array(zod.string().min(1)).optional(),
    timeoutMs: zod.number().int().positive().optional(),
    inactivityTimeoutMs: zod.number().int().positive().optional(),
    /**
     * Lower bounds than the worker's for this turn (processes, memory, CPU, scratch; its wall time is
     * timeoutMs). A value above the worker's maximum fails the turn `bad_options`, naming it.
     */
    limits: jobLimitsSchema.optional(),
    env: envOverlaySchema.optional(),
    /**
     * Load the workspace's own settings, hooks, MCP servers and plugins. Off by default: a workspace is
     * attacker input on a CI fleet. Honoured only on workers whose TURNSTREAM_WORKSPACE_TRUST is `job`.
     */
    trustWorkspace: zod.boolean().optional(),
    /** A person or a trust rule allows or denies each risky tool call (supervised mode). */
    supervised: zod.boolean().optional(),
    /**
     * More tools that need a decision in supervised mode, ADDED to the defaults (Bash, Monitor, Write,
     * Edit, MultiEdit, NotebookEdit, WebFetch; every mcp__* tool always needs one).
     */
    riskyTools: toolNames,
    /**
     * Default risky tools to leave unsupervised in this turn (they run under the CLI's default
     * permission mode without a decision). The only way to narrow supervision; the worker logs each.
     */
    unsupervisedTools: toolNames,
    /**
     * Supervised mode: how long a request whose turn parked waits for a decision before it is denied
     * (default the worker's, 8 h; capped at the worker's maximum, 7 d).
     */
    decisionDeadlineMs: zod.number().int().positive().optional(),
    /**
     * Skills offered to the model. Each path must lie under the worker's workspace roots (checked by
     * the worker, links resolved); the turn fails otherwise.
     */
    skills: zod.array(jobSkillSchema).max(50).optional(),
    /**
     * How `skills` reach the model: `claude-md` (default; files the model reads, undone after the run) or
     * `add-dir` (loaded natively by the CLI, hooks and `!` lines included: only with trustWorkspace).
     */
    skillsMode: zod.enum(["claude-md", "add-dir"]).optional(),
    /** More directories the CLI may use (`--add-dir`); each under the worker's workspace roots. */
    addDirs: zod.array(absolutePath).max(50).optional(),
    /**
     * A settings file (`--settings`). It can add hooks, which run commands: honoured only on workers
     * whose TURNSTREAM_WORKSPACE_TRUST is `job`, and only from under the worker's workspace roots.
     */
    settingsFile: absolutePath.optional(),
    /**
     * Narrows the worker's tool sandbox for this turn (untrusted workspaces only): the hosts a tool may
     * reach, each one the worker's TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS covers; the worker refuses any other.
     */
    sandbox: zod.strictObject({ allowDomains: zod.array(domainName).max(100) }).optional(),
    /** More CLI flags, from a short allow-list of flags that grant nothing (see extra-args.ts). */
    extraArgs: extraArgsSchema.optional(),
    /**
     * Warm sessions (see README): the CLI process stays up after a turn for the session's next one.
     * Stored for the session at enqueue: its later turns run warm too until one says `false`.
     */
    warm: zod.boolean().optional(),
  })
  .refine((o) => !(o.riskyTools ?? []).some((t) => (o.unsupervisedTools ?? []).includes(t)), {
    path: ["unsupervisedTools"],
    message: "a tool cannot be both in riskyTools and in unsupervisedTools; drop it from one",
  })
  .refine((o) => !(o.supervised === true && o.skipPermissions === true), {
    path: ["skipPermissions"],
    message: "a supervised turn never skips permissions; drop skipPermissions or supervised",
  })
  .refine((o) => !(o.supervised === true && o.settingsFile !== undefined), {
    path: ["settingsFile"],
    message: "a supervised turn runs with the decision hook's settings; drop settingsFile or supervised",
  })
  .refine((o) => !(o.skillsMode === "add-dir" && o.trustWorkspace !== true), {
    path: ["skillsMode"],
    message:
      '"add-dir" loads skills natively, where their hooks and `!` lines run outside supervision: only with ' +
      'trustWorkspace: true; use skillsMode "claude-md" (the default: the model reads each skill as a file)',
  })
  .refine((o) => !(o.sandbox !== undefined && o.trustWorkspace === true), {
    path: ["sandbox"],
    message:
      "a turn that trusts its workspace runs without the tool sandbox, so it cannot narrow it; drop sandbox or trustWorkspace",
  })
  .refine((o) => !(o.supervised === true && o.trustWorkspace === true), {
    path: ["trustWorkspace"],
    message: "a supervised turn never runs the workspace's hooks or MCP servers; drop trustWorkspace or supervised",
  });
export type TurnOptions = zod.infer<typeof turnOptionsSchema>;

/**
 * What a worker does when the CLI lost the session: `fail` the turn, or `restore` the log's transcript
 * into a fresh CLI session. `replay`, the older name of `restore`, is still accepted and read as it.
 */
export const lostSessionPolicySchema = zod
  .enum(["fail", "restore", "replay"])
  .transform((policy) => (policy === "replay" ? "restore" : policy));
export type LostSessionPolicy = zod.output<typeof lostSessionPolicySchema>;

/** The policy a stored value names (a session's settings may hold the older `replay`); undefined when none. */
export function lostSessionPolicyOf(value: string | undefined): LostSessionPolicy | undefined {
  const parsed = lostSessionPolicySchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

const sessionId = zod
  .string()
  .regex(SESSION_ID_PATTERN, "must be 1-128 characters from A-Z a-z 0-9 _ . - starting with a letter or digit");

export const enqueueInputSchema = zod.strictObject({
  session: sessionId.optional(),
  prompt: zod
    .string()
    .min(1, "must not be empty")
    .max(4 * 1024 * 1024),
  cwd: absolutePath,
  options: turnOptionsSchema.optional(),
  idempotencyKey: zod.string().min(1).max(256).optional(),
  variables: zod.record(zod.string(), zod.unknown()).optional(),
  /** Fixed when the session is created (its first turn); later values are ignored. */
  onLostSession: lostSessionPolicySchema.optional(),
  /** What fleet questions group by (`repo`, `pr`…): recorded in turn.queued, summed in the archive. */
  labels: turnLabelsSchema.optional(),
  /** Whose turn it is (a repository, team or customer): fixed by the session's first turn. */
  tenant: tenantNameSchema.optional(),
});
export type EnqueueInput = zod.input<typeof enqueueInputSchema>;
/** An enqueue request as the schema let it through. */
export type EnqueueRequest = zod.output<typeof enqueueInputSchema>;

/** What one BullMQ job holds. */
export const turnJobSchema = zod.strictObject({
  v: zod.literal(JOB_VERSION),
  session: sessionId,
  turn: zod.string().regex(TURN_ID_PATTERN, "must be a turn id"),
  prompt: zod.string().min(1),
  cwd: absolutePath,
  options: turnOptionsSchema,
  onLostSession: lostSessionPolicySchema.optional(),
  tenant: tenantNameSchema.optional(),
  traceparent: zod.string().max(128).optional(),
  queuedSeq: zod.number().int().nonnegative(),
  enqueuedAt: zod.string(),
});
export type TurnJob = zod.infer<typeof turnJobSchema>;

function fieldOf(path: readonly PropertyKey[]): string {
  return path.length === 0 ? "(root)" : path.map(String).join(".");
}

/** Parses with `schema`; a failure becomes InvalidTurnError naming the first bad field path. */
export function parseOrThrow<T>(schema: zod.ZodType<T>, value: unknown, root = ""): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const under: PropertyKey[] = root === "" ? [] : [root];
  const issues = parsed.error.issues.map((i) => `${fieldOf([...under, ...i.path])}: ${i.message}`);
  const first = parsed.error.issues[0]!;
  const path = [...under, ...first.path];
  const problem = first.code === "unrecognized_keys" ? `has unknown field(s) ${first.keys.join(", ")}` : first.message;
  throw new InvalidTurnError(fieldOf(path), problem, issues);
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}/g;

function lookup(vars: Record<string, unknown>, path: string): unknown {
  let cur: unknown = vars;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

/** Fills `{{dotted.path}}` placeholders from `variables`; a placeholder without a value is refused. */
export function renderPrompt(template: string, variables: Record<string, unknown> = {}): string {
  return template.replace(PLACEHOLDER, (_m, path: string) => {
    const value = lookup(variables, path);
    if (value === undefined || value === null) throw new MissingVariableError(path);
    return typeof value === "string"
      ? value
      : typeof value === "number" || typeof value === "boolean"
        ? String(value)
        : JSON.stringify(value);
  });
}
