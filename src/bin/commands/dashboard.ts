// `turnstream dashboard`: the web console — sessions, a session's transcript live or at any event,
// the decisions inbox, the queue, the tenants — served from the log and the read models.
import { readFileSync } from "node:fs";
import { checkPortFree, PortInUseError } from "../../kernel/index.ts";
import {
  loadOperatorKey,
  OperatorKeyError,
  operatorName,
  type OperatorKey,
  type OperatorKeyring,
} from "../../decisions/index.ts";
import { parseTokens, startDashboard, DashboardTokenRequiredError } from "../../dashboard/index.ts";
import { createLogger, createScrubber } from "../../telemetry/index.ts";
import { EXIT } from "../exit-codes.ts";
import { interruptSignal, parseCommandArgs } from "./_args.ts";
import { trustedKeysFromEnv } from "./_operator.ts";
import type { Archive } from "../../archive/index.ts";
import {
  ARCHIVE_FLAG_OPTIONS,
  ARCHIVE_FLAG_USAGE,
  logPrefix,
  openArchiveOf,
  QUEUE_FLAG_OPTIONS,
  QUEUE_FLAGS_USAGE,
  queueConfigOf,
  redisOrExplain,
} from "./_connect.ts";

export const summary = "web console: sessions, transcripts with time travel, decisions inbox, queue";

const usage = `usage: turnstream dashboard [--host 127.0.0.1] [--port N] [--prefix P] [--queue-prefix Q] [--queue NAME]
  Serves the web console until interrupted; open the printed address in a browser.
  --host H          address to bind (default 127.0.0.1); any non-loopback address needs an operator
                    token in TURNSTREAM_DASHBOARD_TOKEN_FILE (or TURNSTREAM_DASHBOARD_TOKEN)
  --port N          port (default 7420; 0 picks a free one)
${QUEUE_FLAGS_USAGE}${ARCHIVE_FLAG_USAGE}  Decisions and tenants' limits are signed with TURNSTREAM_OPERATOR_KEY and recorded as
  TURNSTREAM_USER (else USER); without a key the console is read-only. Tenants' limits are checked
  against TURNSTREAM_OPERATOR_KEYS (unchecked without it).
  Trace links follow TURNSTREAM_TRACE_URL (default Jaeger's).
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES.
`;

const options = {
  host: { type: "string", default: "127.0.0.1" },
  port: { type: "string", default: "7420" },
  ...QUEUE_FLAG_OPTIONS,
  ...ARCHIVE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

/**
 * The operator tokens from a file (preferred: not in the environment of every child), one per line
 * or `name token` per operator, else the one token of TURNSTREAM_DASHBOARD_TOKEN.
 */
function tokensFromEnv(): Record<string, string> | undefined {
  const file = process.env["TURNSTREAM_DASHBOARD_TOKEN_FILE"];
  const name = operatorName();
  if (file) return Object.fromEntries(parseTokens(readFileSync(file, "utf8"), name));
  const token = process.env["TURNSTREAM_DASHBOARD_TOKEN"];
  return token ? { [name]: token } : undefined;
}

function keysFromEnv(): { key: OperatorKey | undefined; trusted: OperatorKeyring | undefined } {
  const path = process.env["TURNSTREAM_OPERATOR_KEY"];
  return { key: path ? loadOperatorKey(path) : undefined, trusted: trustedKeysFromEnv() };
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("dashboard", usage, { args: argv, allowPositionals: false, options });
  if (typeof args === "number") return args;
  const { values } = args;
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write("turnstream dashboard: --port must be a port number (0-65535)\n");
    return EXIT.usage;
  }
  let keys: ReturnType<typeof keysFromEnv>;
  let operatorTokens: Record<string, string> | undefined;
  try {
    keys = keysFromEnv();
    operatorTokens = tokensFromEnv();
  } catch (err) {
    // An unreadable key or token file, or one that does not parse: the set-up to fix, said plainly.
    if (!(err instanceof OperatorKeyError) && !(err instanceof Error)) throw err;
    process.stderr.write(`turnstream dashboard: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
  try {
    // Before anything starts: a dashboard whose port is taken would leave its connections behind.
    await checkPortFree(values.host, port);
  } catch (err) {
    if (!(err instanceof PortInUseError)) throw err;
    process.stderr.write(`turnstream dashboard: ${portTaken(err)}\n`);
    return EXIT.usage;
  }
  const redis = await redisOrExplain("dashboard");
  if (redis === undefined) return EXIT.infrastructure;
  const interrupt = interruptSignal();
  let archive: Archive | undefined;
  try {
    const queueConfig = queueConfigOf(values);
    archive = await openArchiveOf(values.archive);
    const dashboard = await startDashboard({
      redis,
      archive,
      host: values.host,
      port,
      operatorTokens,
      operatorKey: keys.key,
      trustedKeys: keys.trusted,
      prefix: logPrefix(values.prefix),
      queuePrefix: queueConfig.queuePrefix,
      queueName: queueConfig.queueName,
      traceUrl: process.env["TURNSTREAM_TRACE_URL"] || undefined,
      logger: createLogger({ scrubber: createScrubber({ env: process.env }), base: { service: "dashboard" } }),
    });
    process.stdout.write(
      `dashboard at ${dashboard.url}${operatorTokens === undefined ? "" : " (log in with your operator token)"}${keys.key === undefined ? "; read-only: set TURNSTREAM_OPERATOR_KEY to decide" : ""}\n`,
    );
    await new Promise((resolve) => interrupt.signal.addEventListener("abort", resolve, { once: true }));
    await dashboard.close();
    return EXIT.finished;
  } catch (err) {
    if (!(err instanceof DashboardTokenRequiredError) && !(err instanceof PortInUseError)) throw err;
    process.stderr.write(`turnstream dashboard: ${err instanceof PortInUseError ? portTaken(err) : err.message}\n`);
    // Taken in the moment since the check: the half-started console's connections would keep the process.
    if (err instanceof PortInUseError) setTimeout(() => process.exit(EXIT.usage), 1000).unref();
    return EXIT.usage;
  } finally {
    interrupt.release();
    await archive?.close();
    redis.disconnect();
  }
}

/** The console's port is taken: which one, and the flag that moves it. */
function portTaken(err: PortInUseError): string {
  return `cannot serve the console: ${err.message}; pick another with --port N (0 picks a free one), or stop what holds ${err.port}`;
}
