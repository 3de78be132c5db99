// `doctor`'s limit lines: for each per-run limit, the value a worker started with this environment
// would apply and how this host enforces it (the kernel, turnstream watching the run, or nothing).
import { describeLimits, type CheckResult, type LimitName } from "../../runner/index.ts";
import {
  compileRunLimits,
  describeRunLimitSettings,
  runLimitsFromEnv,
  type RunLimitSettings,
} from "../../worker/index.ts";

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
  return describeLimits().map((enforcement) => {
    const key = SETTING_OF[enforcement.limit];
    const off = settings[key] === undefined;
    // Sampling is the design for the scratch and the wall time; for processes and memory it is the weaker fallback.
    const weaker =
      enforcement.enforced === "none" ||
      (enforcement.enforced === "watched" && (enforcement.limit === "pids" || enforcement.limit === "memory"));
    const status = weaker && !off ? "warn" : "pass";
    return { name: "limit", status, detail: `${enforcement.limit}: ${values[key]}; ${enforcement.detail}` };
  });
}
