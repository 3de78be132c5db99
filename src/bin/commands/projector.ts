// `turnstream projector`: keeps the read models in Redis up to date until SIGTERM/SIGINT.
import { connectForCommand, PROJECTION_VERSION, runProjectorProcess } from "../../projector/index.ts";
import { createLogger, createScrubber, routeConsoleToLogger, warnRemovedEnvVars } from "../../telemetry/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { projectorArchiveWork } from "./_archive.ts";
import { logPrefix } from "./_connect.ts";

export const summary = "run the live projector (read models in Redis) until SIGTERM";

const usage = `usage: turnstream projector [--version N] [--prefix P] [--rescan-ms MS] [--ops-port PORT]
  Follows every session in the log's index and keeps its read models (session view, transcript,
  decisions) in Redis, checkpointed atomically. Several may run at once.
  --version N     projection version to build (default ${PROJECTION_VERSION}); a newer one rebuilds into
                  new keys and switches readers over per session once it has caught up
  --prefix P      key prefix (default: TURNSTREAM_PREFIX or "ts:")
  --rescan-ms MS  how often the session index is rescanned (default 2000)
  --ops-port PORT serve /metrics, /healthz and /readyz on PORT (0: a free one, logged); default
                  TURNSTREAM_OPS_PORT, else none
  Redis from REDIS_URL (default redis://127.0.0.1:6379) or REDIS_CLUSTER_NODES. With
  TURNSTREAM_RETENTION_INTERVAL and TURNSTREAM_ARCHIVE set it also runs retention that often
  (sessions idle over TURNSTREAM_RETENTION, default 7d).
`;

/** The flag's value, its default when absent, or undefined after saying on stderr that it is malformed. */
function positiveInt(name: string, value: string | undefined, dflt: number): number | undefined {
  if (value === undefined) return dflt;
  const parsed = Number(value);
  if (Number.isSafeInteger(parsed) && parsed >= 1) return parsed;
  process.stderr.write(`turnstream projector: --${name} must be a positive integer, got '${value}'\n`);
  return undefined;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("projector", usage, {
    args: argv,
    allowPositionals: true,
    options: {
      version: { type: "string" },
      prefix: { type: "string" },
      "rescan-ms": { type: "string" },
      "ops-port": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  if (positionals.length > 0) {
    process.stderr.write(usage);
    return EXIT.usage;
  }
  const version = positiveInt("version", values.version, PROJECTION_VERSION);
  const rescanMs = positiveInt("rescan-ms", values["rescan-ms"], 2000);
  if (version === undefined || rescanMs === undefined) return EXIT.usage;
  const scrubber = createScrubber({ env: process.env });
  const logger = createLogger({ scrubber, base: { component: "projector" } });
  // What libraries print to the console goes through the logger: stdout holds only JSON lines.
  routeConsoleToLogger(logger);
  warnRemovedEnvVars(process.env, logger);
  const redis = await connectForCommand();
  const prefix = logPrefix(values.prefix);
  try {
    return await runProjectorProcess({
      redis,
      logger,
      version,
      rescanMs,
      prefix,
      scrubber,
      opsPort: values["ops-port"],
      ...(await projectorArchiveWork(redis, prefix, logger)),
    });
  } finally {
    redis.disconnect();
  }
}
