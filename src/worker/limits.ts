// A worker's per-run limits (processes, memory, CPU, scratch, wall time): its maximums, from its
// options or environment with sane defaults, and what a job may do with them: ask for less, never
// more. A job asking for more than a maximum is refused by name (the option and the worker's
// maximum), not clamped: the producer learns what it may ask instead of a turn that runs under other
// bounds than it asked for. How each limit is enforced is src/runner/limits.ts.
import { z as zod } from "zod";
import type { RunLimits } from "../runner/index.ts";
import type { TurnJob } from "../queue/index.ts";

const MiB = 1024 * 1024;

/** A worker's maximums; `undefined`: that limit is off (an operator set it to 0). */
export interface RunLimitSettings {
  /** Tasks (processes and threads) of one run. `TURNSTREAM_MAX_PIDS`. */
  pids: number | undefined;
  /** Memory of one run. `TURNSTREAM_MAX_MEMORY_MB`. */
  memoryBytes: number | undefined;
  /** CPUs' worth of time one run may use (throttled past it). `TURNSTREAM_MAX_CPUS`. */
  cpus: number | undefined;
  /** Disk of one run's scratch, and the most any file it writes may hold. `TURNSTREAM_MAX_SCRATCH_MB`. */
  scratchBytes: number | undefined;
  /** Wall time of one turn, ms. `TURNSTREAM_MAX_TURN_MS`. */
  turnMs: number | undefined;
}

/**
 * Room for an agentic turn that builds and tests (the CLI itself takes about 10 tasks and 120 MiB),
 * and still a bound on a turn that forks, allocates or writes without end. CPU is not capped by
 * default: a run is throttled only where the operator says how much of the host it may have.
 */
export const DEFAULT_RUN_LIMITS: Readonly<RunLimitSettings> = {
  pids: 512,
  memoryBytes: 4096 * MiB,
  cpus: undefined,
  scratchBytes: 1024 * MiB,
  turnMs: 60 * 60_000,
};

/** Each limit: its job option, the worker variable, how a job's value becomes the run's, and its unit. */
const LIMITS = {
  pids: { option: "options.limits.pids", variable: "TURNSTREAM_MAX_PIDS", unit: "tasks" },
  memoryBytes: { option: "options.limits.memoryMb", variable: "TURNSTREAM_MAX_MEMORY_MB", unit: "MiB" },
  cpus: { option: "options.limits.cpus", variable: "TURNSTREAM_MAX_CPUS", unit: "CPUs" },
  scratchBytes: { option: "options.limits.scratchMb", variable: "TURNSTREAM_MAX_SCRATCH_MB", unit: "MiB" },
  turnMs: { option: "options.timeoutMs", variable: "TURNSTREAM_MAX_TURN_MS", unit: "ms" },
} as const satisfies Record<keyof RunLimitSettings, { option: string; variable: string; unit: string }>;

type LimitKey = keyof RunLimitSettings;

/** A limit in its option's unit (MiB for memory and scratch). */
function inUnit(key: LimitKey, value: number): number {
  return key === "memoryBytes" || key === "scratchBytes" ? value / MiB : value;
}

/** A job's asks, in the worker's settings' units. */
function jobAsks(options: TurnJob["options"]): Partial<Record<LimitKey, number>> {
  const asked = options.limits;
  return {
    pids: asked?.pids,
    memoryBytes: asked?.memoryMb === undefined ? undefined : asked.memoryMb * MiB,
    cpus: asked?.cpus,
    scratchBytes: asked?.scratchMb === undefined ? undefined : asked.scratchMb * MiB,
    turnMs: options.timeoutMs,
  };
}

export interface LimitRefusal {
  name: string;
  message: string;
}

/** Why this worker will not run the job's limits (one above its maximum), or undefined. */
export function jobLimitsRefusal(options: TurnJob["options"], max: RunLimitSettings): LimitRefusal | undefined {
  const asks = jobAsks(options);
  for (const key of Object.keys(LIMITS) as LimitKey[]) {
    const ask = asks[key];
    const ceiling = max[key];
    if (ask === undefined || ceiling === undefined || ask <= ceiling) continue;
    const { option, variable, unit } = LIMITS[key];
    return {
      name: "LimitAboveMaximum",
      message:
        `${option}: ${inUnit(key, ask)} ${unit} is above this worker's maximum of ${inUnit(key, ceiling)} ${unit} ` +
        `(${variable}); ask for at most that, or leave it out to get the maximum`,
    };
  }
  return undefined;
}

/** The run's limits: the job's where it asked for less, else the worker's maximums. */
export function runLimitsFor(options: TurnJob["options"], max: RunLimitSettings): RunLimits {
  const asks = jobAsks(options);
  return {
    pids: asks.pids ?? max.pids,
    memoryBytes: asks.memoryBytes ?? max.memoryBytes,
    cpus: asks.cpus ?? max.cpus,
    scratchBytes: asks.scratchBytes ?? max.scratchBytes,
    // The job's own timeoutMs stays its deadline (kind timeout, retried); this is the ceiling.
    durationMs: max.turnMs,
  };
}

function checkLimit(name: string, value: number | undefined, integer: boolean): number | undefined {
  if (value === undefined || value === 0) return undefined;
  if (!Number.isFinite(value) || value < 0 || (integer && !Number.isSafeInteger(value))) {
    const what = integer ? "a whole number" : "a number";
    const got = String(value);
    throw new RangeError(`limits.${name} must be ${what} above 0 (0: no limit; unset: the default), got ${got}`);
  }
  return value;
}

/** A worker's limit options checked, the defaults filled in; a 0 turns that limit off. */
export function compileRunLimits(options: Partial<RunLimitSettings> | undefined): RunLimitSettings {
  const pick = (key: LimitKey): number | undefined => options?.[key] ?? DEFAULT_RUN_LIMITS[key];
  return {
    pids: checkLimit("pids", pick("pids"), true),
    memoryBytes: checkLimit("memoryBytes", pick("memoryBytes"), true),
    cpus: checkLimit("cpus", pick("cpus"), false),
    scratchBytes: checkLimit("scratchBytes", pick("scratchBytes"), true),
    turnMs: checkLimit("turnMs", pick("turnMs"), true),
  };
}

const whole = (name: string) =>
  zod.string().regex(/^\d+$/, `${name} must be a whole number (0: no limit)`).transform(Number).optional();

const limitEnvSchema = zod.object({
  TURNSTREAM_MAX_PIDS: whole("TURNSTREAM_MAX_PIDS"),
  TURNSTREAM_MAX_MEMORY_MB: whole("TURNSTREAM_MAX_MEMORY_MB"),
  TURNSTREAM_MAX_CPUS: zod
    .string()
    .regex(/^\d+(\.\d+)?$/, "TURNSTREAM_MAX_CPUS must be a number of CPUs such as 2 or 0.5 (0: no limit)")
    .transform(Number)
    .optional(),
  TURNSTREAM_MAX_SCRATCH_MB: whole("TURNSTREAM_MAX_SCRATCH_MB"),
  TURNSTREAM_MAX_TURN_MS: whole("TURNSTREAM_MAX_TURN_MS"),
});

/**
 * The limits the environment sets (unset variables stay unset: the defaults are compileRunLimits').
 * Throws with the variable's name first (`VARIABLE: problem`) when one is malformed.
 */
export function runLimitsFromEnv(env: Readonly<Record<string, string | undefined>>): Partial<RunLimitSettings> {
  const parsed = limitEnvSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw Object.assign(new Error(issue.message), { variable: String(issue.path[0]) });
  }
  const values = parsed.data;
  const out: Partial<RunLimitSettings> = {};
  if (values.TURNSTREAM_MAX_PIDS !== undefined) out.pids = values.TURNSTREAM_MAX_PIDS;
  if (values.TURNSTREAM_MAX_MEMORY_MB !== undefined) out.memoryBytes = values.TURNSTREAM_MAX_MEMORY_MB * MiB;
  if (values.TURNSTREAM_MAX_CPUS !== undefined) out.cpus = values.TURNSTREAM_MAX_CPUS;
  if (values.TURNSTREAM_MAX_SCRATCH_MB !== undefined) out.scratchBytes = values.TURNSTREAM_MAX_SCRATCH_MB * MiB;
  if (values.TURNSTREAM_MAX_TURN_MS !== undefined) out.turnMs = values.TURNSTREAM_MAX_TURN_MS;
  return out;
}

/** One line per limit as a worker with these settings applies it, for `doctor`. */
export function describeRunLimitSettings(settings: RunLimitSettings): Record<LimitKey, string> {
  const text = (key: LimitKey): string => {
    const value = settings[key];
    const { variable, unit } = LIMITS[key];
    return value === undefined ? `no limit (${variable} unset or 0)` : `${inUnit(key, value)} ${unit} (${variable})`;
  };
  return {
    pids: text("pids"),
    memoryBytes: text("memoryBytes"),
    cpus: text("cpus"),
    scratchBytes: text("scratchBytes"),
    turnMs: text("turnMs"),
  };
}
