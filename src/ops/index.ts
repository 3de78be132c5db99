// The ops endpoint: /metrics, /healthz and /readyz of a long-running turnstream process.
export {
  startOpsServer,
  redisReadiness,
  type OpsServer,
  type OpsServerOptions,
  type ReadinessCheck,
  type ReadinessReport,
} from "./server.ts";
export { opsConfigFromEnv, OpsConfigError, type OpsConfig } from "./config.ts";
export { startProcessOps, type ProcessMetrics, type ProcessOps, type ProcessOpsOptions } from "./process.ts";
