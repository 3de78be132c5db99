// The environment variables turnstream's processes read: the one list, for operators and for the
// tests. test/deploy/compose.test.ts: every variable docker-compose.yml sets is listed here, and every
// one listed is read somewhere in src/ or workers/ (this file does not count), so an unused variable
// fails CI. `npm run docs` writes docs/reference/configuration.md from this list
// (test/package/reference.test.ts keeps it current), and test/package/readme.test.ts checks that
// every TURNSTREAM_* variable src/ or workers/ names is here.

import type { Logger } from "../kernel/index.ts";

export interface EnvVarDoc {
  readonly name: string;
  /** Where it is read. */
  readonly readIn: string;
  readonly meaning: string;
  /** Unset: a setting an operator chooses. `internal`: not a setting at all (listed apart). */
  readonly tier?: "internal";
}

export const ENV_VARS: readonly EnvVarDoc[] = [
  {
    name: "REDIS_URL",
    readIn: "src/log/redis.ts",
    meaning:
      "Redis holding queue and event log (default redis://127.0.0.1:6379; redis-sentinel://host:port,…/name for Sentinel)",
  },
  {
    name: "REDIS_CLUSTER_NODES",
    readIn: "src/log/redis.ts",
    meaning: "host:port list; when set, connect to a Redis Cluster instead",
  },
  {
    name: "LOG_LEVEL",
    readIn: "src/telemetry/logger.ts",
    meaning: "pino level: fatal, error, warn, info (default), debug, trace, silent",
  },
  {
    name: "OTEL_SDK_DISABLED",
    readIn: "src/telemetry/otel.ts",
    meaning: "true turns tracing off whatever else is set",
  },
  {
    name: "OTEL_TRACES_EXPORTER",
    readIn: "src/telemetry/otel.ts",
    meaning: "otlp (default when an endpoint is set), console, none; setting it turns tracing on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    readIn: "src/telemetry/otel.ts",
    meaning: "collector base URL (…/v1/traces is appended); setting it turns tracing on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    readIn: "src/telemetry/otel.ts",
    meaning: "full traces URL, used as is; setting it turns tracing on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    readIn: "src/telemetry/otel.ts",
    meaning: "http/protobuf (default), http/json or grpc",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    readIn: "src/telemetry/otel.ts",
    meaning: "per-signal override of the protocol",
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    readIn: "src/telemetry/otel.ts",
    meaning: "k=v,… headers for the collector (values are registered as secrets)",
  },
  { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", readIn: "src/telemetry/otel.ts", meaning: "per-signal headers" },
  { name: "OTEL_EXPORTER_OTLP_TIMEOUT", readIn: "src/telemetry/otel.ts", meaning: "export timeout, ms" },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    readIn: "src/telemetry/otel.ts",
    meaning: "per-signal export timeout, ms",
  },
  { name: "OTEL_EXPORTER_OTLP_COMPRESSION", readIn: "src/telemetry/otel.ts", meaning: "gzip or none" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", readIn: "src/telemetry/otel.ts", meaning: "per-signal compression" },
  {
    name: "OTEL_SERVICE_NAME",
    readIn: "src/telemetry/otel.ts",
    meaning: "service.name of the spans (default turnstream)",
  },
  {
    name: "OTEL_RESOURCE_ATTRIBUTES",
    readIn: "src/telemetry/otel.ts",
    meaning: "k=v,… resource attributes (scrubbed before export)",
  },
  {
    name: "OTEL_METRICS_EXPORTER",
    readIn: "src/metrics/provider.ts",
    meaning:
      "prometheus (default when the ops endpoint is on), otlp (default when an OTLP endpoint is set), console, none (metrics off)",
  },
  {
    name: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    readIn: "src/metrics/provider.ts",
    meaning: "full metrics URL, used as is; setting it turns OTLP metrics on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    readIn: "src/metrics/provider.ts",
    meaning: "per-signal override of the protocol for metrics",
  },
  {
    name: "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    readIn: "src/metrics/provider.ts",
    meaning: "per-signal headers for metrics (values are registered as secrets)",
  },
  {
    name: "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
    readIn: "src/metrics/provider.ts",
    meaning: "per-signal export timeout for metrics, ms",
  },
  {
    name: "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
    readIn: "src/metrics/provider.ts",
    meaning: "per-signal compression for metrics",
  },
  {
    name: "OTEL_METRIC_EXPORT_INTERVAL",
    readIn: "src/metrics/provider.ts",
    meaning: "how often OTLP metrics are pushed, ms (default 60000)",
  },
  {
    name: "OTEL_METRIC_EXPORT_TIMEOUT",
    readIn: "src/metrics/provider.ts",
    meaning: "how long one OTLP metrics push may take, ms (default 30000)",
  },
  {
    name: "TURNSTREAM_OPS_PORT",
    readIn: "src/ops/config.ts",
    meaning:
      "port of the ops endpoint (/metrics, /healthz, /readyz) of a worker or projector; unset: none; 0: a free port, logged; --ops-port wins",
  },
  {
    name: "TURNSTREAM_OPS_HOST",
    readIn: "src/ops/config.ts",
    meaning: "address the ops endpoint listens on (default 127.0.0.1; 0.0.0.0 in a container)",
  },
  {
    name: "TURNSTREAM_WORKSPACE_ROOTS",
    readIn: "src/worker/config.ts",
    meaning: "colon-separated absolute directories a turn's cwd must lie under; a worker does not start without it",
  },
  {
    name: "ANTHROPIC_API_KEY",
    readIn: "src/runner/env.ts",
    meaning:
      "passed to the claude CLI with the rest of the host's model access (modelAccessEnv); registered as a secret by the scrubber",
  },
  {
    name: "TURNSTREAM_KEEP_RAW_LINES",
    readIn: "src/worker/config.ts",
    meaning:
      "1 keeps cli.line text, turn.finished.resultText and session snapshots exactly as the CLI wrote them; default: known secret values (env, job env references, credential tokens) and secret shapes (tokens, keys, passwords in URLs) are replaced before append",
  },
  {
    name: "TURNSTREAM_MAX_PIDS",
    readIn: "src/worker/limits.ts",
    meaning:
      "tasks (processes and threads) one run may have at once; a fork past it fails and the turn fails limit_pids (default 512; 0: none)",
  },
  {
    name: "TURNSTREAM_MAX_MEMORY_MB",
    readIn: "src/worker/limits.ts",
    meaning:
      "MiB of memory one run may use; past it the OOM killer ends a process and the turn fails limit_memory (default 4096; 0: none)",
  },
  {
    name: "TURNSTREAM_MAX_CPUS",
    readIn: "src/worker/limits.ts",
    meaning: "CPUs' worth of time one run may use, e.g. 2 or 0.5; past it the run is throttled (default: no cap)",
  },
  {
    name: "TURNSTREAM_MAX_SCRATCH_MB",
    readIn: "src/worker/limits.ts",
    meaning:
      "MiB one run's scratch (its config home and TMPDIR) may hold, and the most any one file it writes may hold; past it the turn fails limit_disk (default 1024; 0: none)",
  },
  {
    name: "TURNSTREAM_MAX_TURN_MS",
    readIn: "src/worker/limits.ts",
    meaning:
      "longest a turn may run; past it its tree is ended and the turn fails limit_duration (default 3600000; 0: none)",
  },
  {
    name: "TURNSTREAM_WARM",
    readIn: "src/worker/config.ts",
    meaning:
      "1 runs every turn warm (the CLI process stays up for the session's next turn on this worker); default 0: only turns enqueued with options.warm: true",
  },
  {
    name: "TURNSTREAM_GATEWAY",
    readIn: "src/worker/config.ts",
    meaning:
      "broker (default): runs reach the model through the worker's loopback gateway with a token of their own and never hold its credential; passthrough: each run holds the credential (Bedrock, Vertex, Foundry)",
  },
  {
    name: "TURNSTREAM_GATEWAY_COOLDOWN",
    readIn: "src/worker/config.ts",
    meaning:
      "on (default): when the model API answers a credential's request 429, 529 or 503, every worker's gateway holds that credential's requests until the cooldown ends (retry-after, else backoff up to 60 s), then lets one probe through; kept in Redis under the credential's fingerprint; off: each worker meets the limit on its own",
  },
  {
    name: "TURNSTREAM_GATEWAY_COOLDOWN_HOLD",
    readIn: "src/worker/config.ts",
    meaning:
      "longest the gateway holds a request during a cooldown before it answers 429 itself with the fleet's remaining wait as retry-after (default 60s; 0 answers at once); keep it under the CLI's API_TIMEOUT_MS (10 min)",
  },
  {
    name: "TURNSTREAM_CLI_TELEMETRY",
    readIn: "src/worker/config.ts",
    meaning:
      "on (default while the worker traces or keeps metrics): each CLI exports its own telemetry to a loopback receiver in the worker, with a token of its own. While the worker traces: its spans (claude_code.interaction, llm_request, tool), under TRACEPARENT naming the attempt span; they are filtered (an allow-list of attribute names), scrubbed and exported under the attempt span. While the worker keeps metrics: its metrics (delta), of which lines of code, commits, pull requests, edit decisions and active time become the worker's turnstream.cli.* counters with attribute values from fixed sets. Its logs are not asked for. off: the CLI's telemetry stays off. Either way no OTEL_* variable of the worker's reaches the CLI",
  },
  {
    name: "TURNSTREAM_CLI_TELEMETRY_CONTENT",
    readIn: "src/worker/config.ts",
    meaning:
      "1: keep the prompt, tool input and output and error texts the CLI's spans carry, scrubbed and capped at 1024 characters (the CLI is asked for them: OTEL_LOG_USER_PROMPTS, OTEL_LOG_TOOL_DETAILS); 0 (default): they are dropped. The user's id, email, account and organisation are dropped either way",
  },
  {
    name: "TURNSTREAM_JOB_ENV_ALLOW",
    readIn: "src/worker/config.ts",
    meaning:
      "comma-separated names and PREFIX* patterns a job's env overlay may set (default CI, GitHub run metadata by name, LANG, LC_*, TZ; empty: none); names that pick the binary, load code or move the model traffic are refused whatever it says",
  },
  {
    name: "TURNSTREAM_ALLOW_ENV",
    readIn: "src/worker/config.ts",
    meaning: "comma-separated names added to TURNSTREAM_JOB_ENV_ALLOW (or to its default)",
  },
  {
    name: "TURNSTREAM_RUN_ENV",
    readIn: "src/worker/config.ts",
    meaning:
      "comma-separated names of the worker's own variables every run gets (a run otherwise gets only PATH, HOME, TMPDIR, the locale, the model access and CLAUDE_CODE_*/DISABLE_* settings)",
  },
  {
    name: "TURNSTREAM_TOOL_SANDBOX",
    readIn: "src/worker/config.ts",
    meaning:
      "on (default): a turn whose workspace is not trusted runs its tools in the CLI's sandbox, or is refused where it cannot; off: the operator's decision to run them unconfined",
  },
  {
    name: "TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS",
    readIn: "src/worker/config.ts",
    meaning:
      "hosts a sandboxed tool may reach (comma-separated; *.example.com covers subdomains); none by default; a job may only narrow it",
  },
  {
    name: "TURNSTREAM_TOOL_SANDBOX_DENY_READ",
    readIn: "src/worker/config.ts",
    meaning:
      "more paths a sandboxed tool may not read (colon-separated), beside the worker's instance root, the operator's CLI config and HOME",
  },
  {
    name: "TURNSTREAM_WORKSPACE_TRUST",
    readIn: "src/worker/config.ts",
    meaning:
      "never (default): a turn loads no settings, hooks, MCP servers or plugins from its workspace; job: a job's trustWorkspace: true is honoured",
  },
  {
    name: "TURNSTREAM_MCP_CONFIG",
    readIn: "src/worker/config.ts",
    meaning: "absolute path of a vetted MCP config file: the only MCP servers a turn starts",
  },
  {
    name: "TURNSTREAM_OPERATOR_KEYS",
    readIn: "src/worker/config.ts",
    meaning:
      "the operators' public keys a worker trusts for supervised decisions and trust rules: an absolute path to a file with one `ed25519:…` key per line, or the keys themselves comma-separated; without it supervised turns fail",
  },
  {
    name: "TURNSTREAM_ANSWER_WINDOW",
    readIn: "src/worker/config.ts",
    meaning:
      "how long a supervised call waits for an operator in the running CLI before its turn parks, holding nothing until decided (default 5s; 0 parks at once; `off`: calls wait in the CLI, up to 300 s, as before parking)",
  },
  {
    name: "TURNSTREAM_DECISION_DEADLINE",
    readIn: "src/worker/config.ts",
    meaning:
      "how long a parked turn's request waits for a decision before it is denied, when its job sets no decisionDeadlineMs (default 8h)",
  },
  {
    name: "TURNSTREAM_DECISION_DEADLINE_MAX",
    readIn: "src/worker/config.ts",
    meaning: "the longest deadline a job's decisionDeadlineMs may ask for; longer ones are cut to it (default 7d)",
  },
  {
    name: "TURNSTREAM_TENANT_BUDGET_USD",
    readIn: "src/worker/config.ts",
    meaning:
      "the 24-hour budget in USD of a tenant that has no limits of its own (`turnstream tenants set`); default none",
  },
  {
    name: "TURNSTREAM_TENANT_MAX_RUNNING",
    readIn: "src/worker/config.ts",
    meaning: "how many turns of a tenant with no limits of its own may run at once across the fleet; default no limit",
  },
  {
    name: "TURNSTREAM_TENANT_OVER_BUDGET",
    readIn: "src/worker/config.ts",
    meaning:
      "what a turn does when its tenant (one with no limits of its own) is over budget as it starts: `wait` (default) until spend ages out, or `fail` (tenant_budget, exit code 6)",
  },
  {
    name: "TURNSTREAM_TENANTS_SIGNED_ONLY",
    readIn: "src/worker/config.ts",
    meaning:
      "1 runs only turns of tenants whose limits an operator signed (a turn with no tenant, or of a tenant without a record, fails tenant_limits); default 0",
  },
  {
    name: "TURNSTREAM_USER",
    readIn: "src/decisions/operator.ts",
    meaning:
      "the name `turnstream decide`, `turnstream cancel` and the dashboard record as who decided or cancelled (default USER, then the login name); decide --by overrides it",
  },
  {
    name: "TURNSTREAM_OPERATOR_KEY",
    readIn: "src/bin/commands/decide.ts, src/bin/commands/dashboard.ts",
    meaning:
      "path of the operator's private key file (0600) that `turnstream decide` and the dashboard sign with; made by `turnstream operator-key new`",
  },
  {
    name: "TURNSTREAM_DASHBOARD_TOKEN_FILE",
    readIn: "src/bin/commands/dashboard.ts",
    meaning:
      "the dashboard's operator tokens, asked for at /login: one token per line, or `name token` so each operator's decisions carry their name; required to bind a non-loopback address",
  },
  {
    name: "TURNSTREAM_DASHBOARD_TOKEN",
    readIn: "src/bin/commands/dashboard.ts",
    meaning: "the dashboard's operator token itself, when no token file is given",
  },
  {
    name: "TURNSTREAM_TRACE_URL",
    readIn: "src/bin/commands/dashboard.ts",
    meaning:
      "the dashboard's trace link template, `{traceId}` replaced (default http://localhost:16686/trace/{traceId}, Jaeger)",
  },
  {
    name: "CLAUDE_BIN",
    readIn: "src/runner/resolve-bin.ts",
    meaning: "the claude binary to run (default: the pinned package's)",
  },
  {
    name: "TURNSTREAM_DURABILITY",
    readIn: "src/queue/env-config.ts (workers, commands, createProducer, startTurnWorker)",
    meaning: "when an append counts as done: memory (default), replicas:N (WAIT N) or fsync (the AOF on disk)",
  },
  {
    name: "TURNSTREAM_PREFIX",
    readIn: "src/queue/env-config.ts (workers, commands, createProducer, startTurnWorker), src/projector/process.ts",
    meaning: "key prefix of the event log and read models (default ts:); commands also take --prefix",
  },
  {
    name: "TURNSTREAM_ARCHIVE",
    readIn: "src/bin/commands/_connect.ts",
    meaning:
      "where retention moves ended sessions (file://DIR or postgres://…); replay, export, record-script, rerun, sessions, tail and dashboard read archived sessions there, and run and batch restore one before a new turn; commands also take --archive",
  },
  {
    name: "TURNSTREAM_RETENTION",
    readIn: "src/bin/commands/_archive.ts",
    meaning:
      "how long an ended session stays in Redis after its last event before retention moves it to the archive (default 7d; 12h, 30d…); turnstream retention also takes --older-than",
  },
  {
    name: "TURNSTREAM_RETENTION_INTERVAL",
    readIn: "src/bin/commands/_archive.ts",
    meaning:
      "how often a projector runs retention (1h, 1d…); unset (the default): never, and only with TURNSTREAM_ARCHIVE set",
  },
  {
    name: "TURNSTREAM_QUEUE_PREFIX",
    readIn: "src/queue/env-config.ts (workers, commands, createProducer, createTurnQueue, startTurnWorker)",
    meaning: "BullMQ key prefix, one cluster hash tag (default {turnstream})",
  },
  {
    name: "TURNSTREAM_QUEUE_NAME",
    readIn: "src/queue/env-config.ts (workers, commands, createProducer, createTurnQueue, startTurnWorker)",
    meaning: "BullMQ queue name (default turns)",
  },
  {
    name: "TURNSTREAM_CONCURRENCY",
    readIn: "src/worker/config.ts",
    meaning: "CLIs one worker runs at once (default 1); `turnstream worker --concurrency` wins",
  },
  {
    name: "TURNSTREAM_INSTANCE_ROOT",
    readIn: "src/worker/config.ts, src/bin/commands/sweep.ts",
    meaning: "absolute directory holding the per-run config homes (default $XDG_DATA_HOME/turnstream)",
  },
  {
    name: "TURNSTREAM_INSTANCE_ID",
    readIn: "src/worker/config.ts, src/bin/commands/sweep.ts",
    meaning:
      "the worker's instance id: its folder under the instance root, held while it runs (default: the lowest worker-<host>-<n> no live process on this host holds)",
  },
  {
    name: "TURNSTREAM_SANDBOXED",
    readIn: "src/worker/config.ts",
    meaning: "1: turns may skip permissions as root (IS_SANDBOX=1 is set for them); only inside a sandbox (default 0)",
  },
  {
    name: "TURNSTREAM_SHUTDOWN_GRACE_MS",
    readIn: "src/worker/main.ts",
    meaning:
      "how long running turns may finish after SIGTERM/SIGINT before they are ended (default 30000); `turnstream worker --grace-ms` wins",
  },
  {
    name: "TURNSTREAM_TREE",
    readIn: "src/runner/process-tree.ts",
    meaning:
      "not a setting: turnstream sets it on every process of a run and finds the run's processes by it; a job's env may not set it",
    tier: "internal",
  },
  {
    name: "CLAUDE_CONFIG_DIR",
    readIn: "src/runner/config-home.ts",
    meaning:
      "the operator's CLI config directory, whose .credentials.json each run's config home gets a copy of (default ~/.claude)",
  },
  {
    name: "XDG_DATA_HOME",
    readIn: "src/runner/config-home.ts",
    meaning: "default instance root is $XDG_DATA_HOME/turnstream (else ~/.local/share/turnstream)",
  },
  {
    name: "XDG_CONFIG_HOME",
    readIn: "src/bin/commands/operator-key.ts",
    meaning:
      "`turnstream operator-key new` writes to $XDG_CONFIG_HOME/turnstream/operator.key by default (else ~/.config/…)",
  },
  {
    name: "HOME",
    readIn: "src/runner/config-home.ts",
    meaning: "where ~/.claude and ~/.local/share are, when CLAUDE_CONFIG_DIR and XDG_DATA_HOME are not set",
  },
  {
    name: "USER",
    readIn: "src/decisions/operator.ts",
    meaning: "who a decision or cancellation is recorded as when TURNSTREAM_USER is not set",
  },
  {
    name: "TMPDIR",
    readIn: "src/runner/run-turn.ts",
    meaning:
      "where a run's scratch files (such as the appended system prompt) are made; read from the run's environment (default the OS temp dir)",
  },
  {
    name: "PATH",
    readIn: "src/runner/resolve-bin.ts",
    meaning:
      "where `claude` is looked up when neither claudeBin, CLAUDE_BIN nor the pinned package gives one; passed to every run; a job can never set it",
  },
  {
    name: "NO_COLOR",
    readIn: "src/projector/output.ts",
    meaning: "set and non-empty: `tail` and `replay` print no colour (they colour only a terminal anyway)",
  },
];

export const ENV_VAR_NAMES: ReadonlySet<string> = new Set(ENV_VARS.map((v) => v.name));

/** A variable turnstream no longer reads, and what to do instead. */
export interface RemovedEnvVar {
  readonly name: string;
  readonly instead: string;
}

// Pure tuning whose defaults suit every fleet: options of the library only (issue 31). A process that
// finds one set says so once at start, so a setting that no longer applies is not silently ignored.
export const REMOVED_ENV_VARS: readonly RemovedEnvVar[] = [
  { name: "TURNSTREAM_LEASE_MS", instead: "unset it; a library caller passes startTurnWorker option leaseMs" },
  { name: "TURNSTREAM_LOCK_MS", instead: "unset it; a library caller passes startTurnWorker option lockDuration" },
  {
    name: "TURNSTREAM_STALLED_INTERVAL_MS",
    instead: "unset it; a library caller passes startTurnWorker option stalledInterval",
  },
  {
    name: "TURNSTREAM_SNAPSHOT_CACHE_MB",
    instead: "unset it; a library caller passes startTurnWorker option snapshotCacheBytes",
  },
  {
    name: "TURNSTREAM_SWEEP_INTERVAL_MS",
    instead: "unset it; a worker sweeps when it starts and every 5 minutes, which suits every fleet",
  },
  {
    name: "TURNSTREAM_MAX_OUTPUT_LINES",
    instead: "unset it; a library caller passes startTurnWorker option maxOutputLines",
  },
  {
    name: "TURNSTREAM_MAX_OUTPUT_MB",
    instead: "unset it; a library caller passes startTurnWorker option maxOutputBytes",
  },
  {
    name: "TURNSTREAM_WARM_IDLE_MS",
    instead: "unset it (TURNSTREAM_WARM stays); a library caller passes startTurnWorker option warm.idleTtlMs",
  },
  {
    name: "TURNSTREAM_WARM_MAX",
    instead: "unset it (TURNSTREAM_WARM stays); a library caller passes startTurnWorker option warm.maxProcesses",
  },
  {
    name: "TURNSTREAM_WARM_MAX_RSS_MB",
    instead: "unset it (TURNSTREAM_WARM stays); a library caller passes startTurnWorker option warm.maxRssBytes",
  },
  { name: "TURNSTREAM_PROJECTION_VERSION", instead: "run `turnstream projector --version N`" },
  { name: "TURNSTREAM_PROJECTOR_RESCAN_MS", instead: "run `turnstream projector --rescan-ms MS`" },
  {
    name: "TURNSTREAM_PROJECTOR_BATCH_EVENTS",
    instead: "unset it; a library caller passes startProjector option batchEvents",
  },
];

/** The removed variables `env` sets (to an empty value too), in the order of REMOVED_ENV_VARS. */
export function removedEnvVarsSet(env: Readonly<Record<string, string | undefined>>): RemovedEnvVar[] {
  return REMOVED_ENV_VARS.filter((variable) => env[variable.name] !== undefined);
}

/** One warning naming each removed variable `env` sets and what to do instead; nothing when none is set. */
export function warnRemovedEnvVars(env: Readonly<Record<string, string | undefined>>, logger: Logger): void {
  const removed = removedEnvVarsSet(env);
  if (removed.length === 0) return;
  logger.warn(
    { removedVariables: removed.map((variable) => variable.name) },
    `no longer read, so ignored: ${removed.map((variable) => `${variable.name} (${variable.instead})`).join("; ")}`,
  );
}
