// Which environment variables a turn's env overlay may set. A job payload is attacker input on a CI
// fleet: its overlay must not reach the gates that hold a turn in (the permission hook and its
// forwarder, the sandbox claim, where settings and credentials come from) nor redirect the API traffic
// that carries the worker's credentials. The producer checks at enqueue and the worker again at run
// time, since a job can be written to Redis without going through a producer.

/** Never settable from a job: each changes how the CLI, its hooks or the forwarder start or are checked. */
const REFUSED: ReadonlyArray<{ test: (name: string) => boolean; why: string }> = [
  { test: (n) => n === "NODE_OPTIONS" || n === "NODE_PATH", why: "it loads code into the CLI and the permission forwarder" },
  { test: (n) => n.startsWith("NODE_TLS_") || n === "NODE_EXTRA_CA_CERTS", why: "it weakens the TLS checks that protect the API credentials" },
  { test: (n) => n.startsWith("LD_") || n.startsWith("DYLD_"), why: "it loads code into every process of the turn" },
  { test: (n) => n === "IS_SANDBOX", why: "only the worker may claim it runs in a sandbox (TURNSTREAM_SANDBOXED)" },
  { test: (n) => n === "CLAUDE_CONFIG_DIR" || n === "HOME" || n === "XDG_CONFIG_HOME", why: "it moves where the CLI reads its settings and credentials" },
  { test: (n) => n === "BASH_ENV" || n === "ENV" || n === "SHELL" || n === "SHELLOPTS" || n === "BASHOPTS", why: "it runs code in every shell the turn starts" },
  { test: (n) => n.startsWith("TURNSTREAM_"), why: "turnstream's own variables belong to the worker" },
  {
    test: (n) => n.startsWith("CLAUDE_CODE_") && !TUNING_CLAUDE_CODE.has(n),
    why: "CLAUDE_CODE_* variables change how the CLI runs tools, where it sends requests or which permissions apply",
  },
];

// CLAUDE_CODE_* variables that only tune a run's output, retries or what it keeps on disk.
const TUNING_CLAUDE_CODE: ReadonlySet<string> = new Set([
  "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
  "CLAUDE_CODE_SKIP_PROMPT_HISTORY",
  "CLAUDE_CODE_MAX_RETRIES",
  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
  "CLAUDE_CODE_EFFORT_LEVEL",
]);

/**
 * Refused unless the operator allows them by name (producer option `allowEnv`, worker
 * `TURNSTREAM_ALLOW_ENV`): they decide which programs run and where the API requests, with the worker's
 * credentials, are sent.
 */
export const ALLOWABLE_ENV_NAMES: readonly string[] = [
  "PATH",
  "ANTHROPIC_BASE_URL",
  "ANTHROPIC_BEDROCK_BASE_URL",
  "ANTHROPIC_VERTEX_BASE_URL",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
];

export interface RefusedEnvName {
  name: string;
  /** Why, and what to change: reads on after the variable's name. */
  why: string;
}

/** Why `name` may not be set by a job's overlay, or undefined when it may. */
export function refusedEnvName(name: string, allowed: ReadonlySet<string>): RefusedEnvName | undefined {
  const hard = REFUSED.find((r) => r.test(name));
  if (hard !== undefined) return { name, why: `may not be set by a turn: ${hard.why}` };
  if (ALLOWABLE_ENV_NAMES.includes(name) && !allowed.has(name)) {
    return {
      name,
      why: `may be set by a turn only where the operator allows it (producer option allowEnv and worker TURNSTREAM_ALLOW_ENV=${name})`,
    };
  }
  return undefined;
}

/** The first refused name of an overlay, in the overlay's order. */
export function firstRefusedEnvName(names: Iterable<string>, allowed: ReadonlySet<string>): RefusedEnvName | undefined {
  for (const name of names) {
    const refused = refusedEnvName(name, allowed);
    if (refused !== undefined) return refused;
  }
  return undefined;
}

/** Checks an operator's allow list: only the names in ALLOWABLE_ENV_NAMES can be allowed. */
export function checkAllowEnv(names: readonly string[]): Set<string> {
  for (const name of names) {
    if (!ALLOWABLE_ENV_NAMES.includes(name)) {
      throw new Error(`allowEnv: ${name} cannot be allowed; only ${ALLOWABLE_ENV_NAMES.join(", ")} can`);
    }
  }
  return new Set(names);
}
