// `doctor`'s limit lines: for each per-run limit, the value a worker started with this environment
// would apply and how this host enforces it (the kernel, turnstream watching the run, or nothing).
import type { CheckResult } from "../../cli/probe.ts";
import { describeLimits, type LimitName } from "../../cli/limits.ts";
import {
  compileRunLimits,
  describeRunLimitSettings,
  runLimitsFromEnv,
  type RunLimitSettings,
} from "../../worker/limits.ts";

const SETTING_OF: Record<LimitName, keyof RunLimitSettings> = {
  pids: "pids",
  memory: "memoryBytes",
  cpu: "cpus",
  disk: "scratchBytes",
  duration: "turnMs",
};

/** One `limit` check per limit; a malformed limit variable is one failing line naming it. */
export function limitChecks(env: Readonly<Record<string, string | undefined>>): CheckResult[] {
  let settings: RunLimitSettings;
  try {
    settings = compileRunLimits(runLimitsFromEnv(env));
  } catch (err) {
    // The message names the variable.
    return [{ name: "limit", status: "fail", detail: (err as Error).message }];
  }
  const values = describeRunLimitSettings(settings);
  return describeLimits().map((l) => {
    const key = SETTING_OF[l.limit];
    const off = settings[key] === undefined;
    // Sampling is the design for the scratch and the wall time; for processes and memory it is the weaker fallback.
    const weaker = l.enforced === "none" || (l.enforced === "watched" && (l.limit === "pids" || l.limit === "memory"));
    const status = weaker && !off ? "warn" : "pass";
    return { name: "limit", status, detail: `${l.limit}: ${values[key]}; ${l.detail}` };
  });
}
