// Metrics: the instrument table, the meter provider from OTEL_*, and the instruments of a worker and a projector.
export * from "./names.ts";
export {
  metricsConfig,
  startMetrics,
  METER_NAME,
  type Metrics,
  type MetricsConfig,
  type StartMetricsOptions,
} from "./provider.ts";
export {
  workerInstruments,
  type ObservedWorker,
  type WorkerInstruments,
  type WorkerInstrumentsOptions,
} from "./worker.ts";
export { fleetGauges, type FleetSources, type QueueCountsSource } from "./fleet.ts";
export { ConfiguredTenants, labelledTenants, TENANTS_REFRESH_MS, type ConfiguredTenantsOptions } from "./tenants.ts";
export { counter, gauge, histogram, observableCounter } from "./instruments.ts";
export { cliTelemetryMetrics } from "./cli-telemetry.ts";
