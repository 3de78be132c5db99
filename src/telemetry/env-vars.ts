// The environment variables turnstream's processes read, for operators and for the deployment test
// (test/deploy/compose.test.ts): every variable docker-compose.yml sets must be listed here AND be
// read somewhere in src/ or workers/ (this file does not count), so an unused variable fails CI.

export interface EnvVarDoc {
  readonly name: string;
  /** Where it is read. */
  readonly readIn: string;
  readonly meaning: string;
}

export const ENV_VARS: readonly EnvVarDoc[] = [
  { name: "REDIS_URL", readIn: "src/log/redis.ts", meaning: "Redis holding queue and event log (default redis://127.0.0.1:6379)" },
  { name: "REDIS_CLUSTER_NODES", readIn: "src/log/redis.ts", meaning: "host:port list; when set, connect to a Redis Cluster instead" },
  { name: "LOG_LEVEL", readIn: "src/telemetry/logger.ts", meaning: "pino level: fatal, error, warn, info (default), debug, trace, silent" },
  { name: "OTEL_SDK_DISABLED", readIn: "src/telemetry/otel.ts", meaning: "true turns tracing off whatever else is set" },
  { name: "OTEL_TRACES_EXPORTER", readIn: "src/telemetry/otel.ts", meaning: "otlp (default when an endpoint is set), console, none; setting it turns tracing on" },
  { name: "OTEL_EXPORTER_OTLP_ENDPOINT", readIn: "src/telemetry/otel.ts", meaning: "collector base URL (…/v1/traces is appended); setting it turns tracing on" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", readIn: "src/telemetry/otel.ts", meaning: "full traces URL, used as is; setting it turns tracing on" },
  { name: "OTEL_EXPORTER_OTLP_PROTOCOL", readIn: "src/telemetry/otel.ts", meaning: "http/protobuf (default) or http/json" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", readIn: "src/telemetry/otel.ts", meaning: "per-signal override of the protocol" },
  { name: "OTEL_EXPORTER_OTLP_HEADERS", readIn: "src/telemetry/otel.ts", meaning: "k=v,… headers for the collector (values are registered as secrets)" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", readIn: "src/telemetry/otel.ts", meaning: "per-signal headers" },
  { name: "OTEL_EXPORTER_OTLP_TIMEOUT", readIn: "src/telemetry/otel.ts", meaning: "export timeout, ms" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", readIn: "src/telemetry/otel.ts", meaning: "per-signal export timeout, ms" },
  { name: "OTEL_EXPORTER_OTLP_COMPRESSION", readIn: "src/telemetry/otel.ts", meaning: "gzip or none" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", readIn: "src/telemetry/otel.ts", meaning: "per-signal compression" },
  { name: "OTEL_SERVICE_NAME", readIn: "src/telemetry/otel.ts", meaning: "service.name of the spans (default turnstream)" },
  { name: "OTEL_RESOURCE_ATTRIBUTES", readIn: "src/telemetry/otel.ts", meaning: "k=v,… resource attributes (scrubbed before export)" },
  { name: "TURNSTREAM_WORKSPACE_ROOTS", readIn: "src/worker/config.ts", meaning: "colon-separated absolute directories a turn's cwd must lie under; a worker does not start without it" },
  { name: "ANTHROPIC_API_KEY", readIn: "src/cli/env.ts", meaning: "passed through to the claude CLI; registered as a secret by the scrubber" },
  { name: "TURNSTREAM_KEEP_RAW_LINES", readIn: "src/worker/config.ts", meaning: "1 keeps cli.line text, turn.finished.resultText and session snapshots exactly as the CLI wrote them; default: known secret values (env, job env references, credential tokens) and secret shapes (tokens, keys, passwords in URLs) are replaced before append" },
  { name: "TURNSTREAM_MAX_OUTPUT_LINES", readIn: "src/worker/config.ts", meaning: "lines of output (stdout and stderr) one CLI run may print; past it the run's tree is killed and the turn fails with errorKind output_limit (default 100000)" },
  { name: "TURNSTREAM_MAX_OUTPUT_MB", readIn: "src/worker/config.ts", meaning: "MiB of output (stdout and stderr) one CLI run may print; past it the run's tree is killed and the turn fails with errorKind output_limit (default 256)" },
  { name: "TURNSTREAM_SNAPSHOT_CACHE_MB", readIn: "src/worker/config.ts", meaning: "MiB of recent session files a worker keeps in memory so a session's next turn there skips rebuilding its file from the log (default 64; 0 turns it off)" },
  { name: "TURNSTREAM_ALLOW_ENV", readIn: "src/worker/config.ts", meaning: "comma-separated env names a job's overlay may set although refused by default: PATH, ANTHROPIC_BASE_URL, ANTHROPIC_BEDROCK_BASE_URL, ANTHROPIC_VERTEX_BASE_URL and the proxy variables" },
  { name: "TURNSTREAM_WORKSPACE_TRUST", readIn: "src/worker/config.ts", meaning: "never (default): a turn loads no settings, hooks, MCP servers or plugins from its workspace; job: a job's trustWorkspace: true is honoured" },
  { name: "TURNSTREAM_MCP_CONFIG", readIn: "src/worker/config.ts", meaning: "absolute path of a vetted MCP config file: the only MCP servers a turn starts" },
  { name: "TURNSTREAM_OPERATOR_KEYS", readIn: "src/worker/config.ts", meaning: "the operators' public keys a worker trusts for supervised decisions and trust rules: an absolute path to a file with one `ed25519:…` key per line, or the keys themselves comma-separated; without it supervised turns fail" },
  { name: "TURNSTREAM_USER", readIn: "src/bin/commands/decide.ts", meaning: "the name `turnstream decide` records as who decided (default USER, then the login name); --by overrides it" },
  { name: "TURNSTREAM_OPERATOR_KEY", readIn: "src/bin/commands/decide.ts", meaning: "path of the operator's private key file (0600) that `turnstream decide` signs with; made by `turnstream operator-key new`" },
  { name: "CLAUDE_BIN", readIn: "src/cli/resolve-bin.ts", meaning: "the claude binary to run (default: the pinned package's)" },
];

export const ENV_VAR_NAMES: ReadonlySet<string> = new Set(ENV_VARS.map((v) => v.name));
