#!/usr/bin/env node
// Process entry point of the live projector (compose service `projector`). Configuration from the
// environment: REDIS_URL / REDIS_CLUSTER_NODES, TURNSTREAM_PREFIX, TURNSTREAM_PROJECTION_VERSION,
// TURNSTREAM_PROJECTOR_RESCAN_MS, TURNSTREAM_PROJECTOR_BATCH_EVENTS (most events per commit). Exits 0 after a clean
// SIGTERM stop.
import { connectRedis } from "../src/log/index.ts";
import { PROJECTION_VERSION } from "../src/projector/index.ts";
import { runProjectorProcess } from "../src/projector/process.ts";
import { errorReporter } from "../src/kernel/index.ts";
import { createLogger, createScrubber, routeConsoleToLogger } from "../src/telemetry/index.ts";

const env = process.env;
const scrubber = createScrubber({ env });
const logger = createLogger({ scrubber, base: { component: "projector" } });
// What libraries print to the console goes through the logger: stdout holds only JSON lines.
routeConsoleToLogger(logger);
const version = Number(env["TURNSTREAM_PROJECTION_VERSION"] ?? PROJECTION_VERSION);
const rescanMs = Number(env["TURNSTREAM_PROJECTOR_RESCAN_MS"] ?? 2000);
const batchEvents = Number(env["TURNSTREAM_PROJECTOR_BATCH_EVENTS"] ?? 5000);
if (
  !Number.isSafeInteger(version) ||
  version < 1 ||
  !(rescanMs > 0) ||
  !Number.isSafeInteger(batchEvents) ||
  batchEvents < 1
) {
  logger.error(
    {},
    "TURNSTREAM_PROJECTION_VERSION and TURNSTREAM_PROJECTOR_BATCH_EVENTS must be positive integers, TURNSTREAM_PROJECTOR_RESCAN_MS a positive number",
  );
  process.exit(2);
}
const redis = connectRedis();
const reportError = errorReporter(logger);
redis.on("error", (err: Error) => reportError("redis connection error", err));
const code = await runProjectorProcess({
  redis,
  logger,
  version,
  rescanMs,
  batchEvents,
  prefix: env["TURNSTREAM_PREFIX"] ?? "ts:",
  scrubber,
});
redis.disconnect();
process.exitCode = code;
