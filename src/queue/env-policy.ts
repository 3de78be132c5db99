// Which environment variables a job's env overlay may set. A job payload is attacker input on a CI
// fleet and the CLI reads hundreds of variables (its binary, Bun and Node preloads, an env file it
// sources before each Bash command, proxies, CA files, base URLs), so the overlay is an allow-list: a
// job sets only the names the worker's operator lists (TURNSTREAM_JOB_ENV_ALLOW), and some names can
// never be listed. The producer checks at enqueue and the worker again at run time, since a job can be
// written to Redis without going through a producer.

/** What a job may set when the operator lists nothing: CI metadata a tool may print, and the locale. */
export const DEFAULT_JOB_ENV_ALLOW: readonly string[] = [
  "CI",
  // GitHub's run metadata by name, not GITHUB_*: GITHUB_TOKEN is a credential an operator lists on
  // purpose, and the runner's paths and API URLs, which the CLI and tools read, can never be set.
  "GITHUB_REPOSITORY",
  "GITHUB_REPOSITORY_OWNER",
  "GITHUB_SHA",
  "GITHUB_REF",
  "GITHUB_REF_NAME",
  "GITHUB_HEAD_REF",
  "GITHUB_BASE_REF",
  "GITHUB_RUN_ID",
  "GITHUB_RUN_NUMBER",
  "GITHUB_EVENT_NAME",
  "GITHUB_ACTOR",
  "LANG",
  "LC_*",
  "TZ",
];

interface NeverRule {
  names?: readonly string[];
  prefixes?: readonly string[];
  /** For what names and prefixes cannot say (a suffix, an infix). */
  test?: (upper: string) => boolean;
  why: string;
}

/**
 * Never settable by a job, whatever the operator lists: each decides which program runs, loads code
 * into it, or changes where the requests carrying the worker's credentials go. Matched ignoring case
 * (`https_proxy` is read as well as `HTTPS_PROXY`).
 */
const NEVER: readonly NeverRule[] = [
  { names: ["CLAUDE_BIN"], why: "it names the program the worker runs" },
  {
    prefixes: ["NODE_", "BUN_", "NPM_CONFIG_", "LD_", "DYLD_"],
    why: "it loads code into the CLI or every process of the turn",
  },
  {
    names: ["PYTHONPATH", "PYTHONSTARTUP", "PERL5LIB", "PERL5OPT", "RUBYOPT", "RUBYLIB"],
    why: "it loads code into the tools a turn starts",
  },
  {
    names: ["JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "GCONV_PATH", "LOCPATH", "LESSOPEN", "LESSCLOSE"],
    why: "it loads or runs code in the tools a turn starts",
  },
  {
    names: ["BASH_ENV", "ENV", "SHELL", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH"],
    why: "it runs code in every shell the turn starts",
  },
  { names: ["PATH", "HOME", "TMPDIR", "TMP", "TEMP"], why: "it decides which programs run and where their files are" },
  { prefixes: ["GIT_", "SSH_"], why: "git and ssh run programs and read config named by these" },
  {
    names: ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"],
    test: (u) => u.endsWith("_PROXY"),
    why: "it sends the turn's requests, with the worker's credentials, through another server",
  },
  {
    names: ["SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE"],
    test: (u) => u.includes("CA_CERT"),
    why: "it makes the CLI and tools trust another certificate authority",
  },
  {
    prefixes: ["ANTHROPIC_", "AWS_", "GOOGLE_", "CLOUD_ML_", "VERTEX_", "AZURE_"],
    why: "the model access and its credentials come only from the worker",
  },
  {
    prefixes: ["CLAUDE_", "DISABLE_", "OTEL_", "XDG_"],
    why: "it changes how the CLI runs, where it keeps its settings or where it reports",
  },
  {
    names: ["GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"],
    why: "the CLI reads it as the GitHub Actions runner's files and paths",
  },
  {
    names: ["GITHUB_ACTION_PATH", "GITHUB_EVENT_PATH", "GITHUB_WORKSPACE", "GITHUB_ACTIONS"],
    why: "the CLI reads it as the GitHub Actions runner's files and paths",
  },
  {
    names: ["GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_GRAPHQL_URL"],
    why: "it sends the requests that carry a GitHub token to another server",
  },
  {
    names: ["TRACEPARENT", "TRACESTATE", "BAGGAGE"],
    why: "it decides which trace the CLI's own spans join; the worker sets it to the attempt's span",
  },
  { names: ["IS_SANDBOX"], why: "only the worker may claim it runs in a sandbox (TURNSTREAM_SANDBOXED)" },
  { prefixes: ["TURNSTREAM_"], why: "turnstream's own variables belong to the worker" },
];

const neverMatches = (rule: NeverRule, upper: string): boolean =>
  (rule.names?.includes(upper) ?? false) ||
  (rule.prefixes?.some((p) => upper.startsWith(p)) ?? false) ||
  (rule.test?.(upper) ?? false);

/**
 * Names in NEVER an operator may still list, by exact name only. The CLI tuning ones change output
 * size, retries and what the CLI keeps, nothing it runs. ANTHROPIC_BASE_URL is for workers whose model
 * is a local scripted server holding no real credential (`turnstream rerun`, tests), where each job
 * names its server; a worker holding a real credential must not list it.
 */
export const EXACT_OPT_IN_ENV_NAMES: readonly string[] = [
  "ANTHROPIC_BASE_URL",
  "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
  "CLAUDE_CODE_SKIP_PROMPT_HISTORY",
  "CLAUDE_CODE_MAX_RETRIES",
  "CLAUDE_CODE_EFFORT_LEVEL",
];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ENV_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*\*?$/;

/** Why a job may never set `name` (whatever an allow-list says), or undefined. */
function neverWhy(name: string): string | undefined {
  const upper = name.toUpperCase();
  return NEVER.find((rule) => neverMatches(rule, upper))?.why;
}

/** A compiled allow-list: exact names and `PREFIX*` patterns, as the operator wrote them. */
export interface JobEnvPolicy {
  /** The entries, for messages and status. */
  readonly entries: readonly string[];
  allows(name: string): boolean;
}

export interface RefusedEnvName {
  name: string;
  /** Why, and what to change: reads on after the variable's name. */
  why: string;
}

/** Why `name` may not be set by a job under `policy`, or undefined when it may. */
export function refusedEnvName(name: string, policy: JobEnvPolicy): RefusedEnvName | undefined {
  const never = neverWhy(name);
  const optedIn = EXACT_OPT_IN_ENV_NAMES.includes(name) && policy.entries.includes(name);
  if (never !== undefined && !optedIn) {
    const fix = EXACT_OPT_IN_ENV_NAMES.includes(name)
      ? `only a worker operator who lists ${name} by its exact name in TURNSTREAM_JOB_ENV_ALLOW lets a job set it`
      : "the worker sets it from its own configuration";
    return { name, why: `may not be set by a job: ${never}; ${fix}` };
  }
  if (policy.allows(name)) return undefined;
  const listed = policy.entries.join(",") || "empty";
  return {
    name,
    why:
      `may not be set by a job: it is not in the allow-list (${listed}); ` +
      "ask the worker operator to add it to TURNSTREAM_JOB_ENV_ALLOW",
  };
}

/** The first refused name of an overlay, in the overlay's order. */
export function firstRefusedEnvName(names: Iterable<string>, policy: JobEnvPolicy): RefusedEnvName | undefined {
  for (const name of names) {
    const refused = refusedEnvName(name, policy);
    if (refused !== undefined) return refused;
  }
  return undefined;
}

/** Why an operator may not list `entry`, or undefined when it may. */
function entryProblem(entry: string): string | undefined {
  if (!ENV_PATTERN.test(entry)) return "is neither a variable name nor a PREFIX* pattern";
  if (!entry.endsWith("*")) {
    const never = neverWhy(entry);
    return never === undefined || EXACT_OPT_IN_ENV_NAMES.includes(entry) ? undefined : `cannot be allowed: ${never}`;
  }
  const prefix = entry.slice(0, -1);
  if (prefix.length < 2) return "is too broad: name the variables or a prefix of at least two characters";
  const covered = neverWhy(prefix + "X") ?? neverWhy(prefix);
  if (covered !== undefined) return `cannot be allowed: it admits names that can never be set (${covered})`;
  return undefined;
}

/**
 * Compiles an operator's allow-list (names and `PREFIX*` patterns). Throws naming the first entry that
 * is malformed, too broad or reaches a name that can never be set.
 */
export function compileJobEnvPolicy(entries: readonly string[]): JobEnvPolicy {
  for (const entry of entries) {
    const problem = entryProblem(entry);
    if (problem !== undefined) throw new Error(`${entry} ${problem}`);
  }
  const exact = new Set(entries.filter((e) => !e.endsWith("*")));
  const prefixes = entries.filter((e) => e.endsWith("*")).map((e) => e.slice(0, -1));
  return {
    entries: [...entries],
    allows: (name) => ENV_NAME.test(name) && (exact.has(name) || prefixes.some((p) => name.startsWith(p))),
  };
}

/**
 * The allow-list from an operator's settings: `jobEnvAllow` (TURNSTREAM_JOB_ENV_ALLOW) replaces the
 * default; `allowEnv` (the older TURNSTREAM_ALLOW_ENV) adds names to whichever list applies.
 */
export function jobEnvPolicyFrom(settings: {
  jobEnvAllow?: readonly string[] | undefined;
  allowEnv?: readonly string[] | undefined;
}): JobEnvPolicy {
  return compileJobEnvPolicy([...(settings.jobEnvAllow ?? DEFAULT_JOB_ENV_ALLOW), ...(settings.allowEnv ?? [])]);
}
