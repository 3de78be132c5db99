// Metrics set-up from the standard OTEL_* environment, read once per process. Two readers: the
// Prometheus exporter, served by the ops endpoint's /metrics (it never opens a port of its own), when
// that endpoint is on; and an OTLP push reader when an OTLP endpoint or OTEL_METRICS_EXPORTER says
// so. OTEL_METRICS_EXPORTER=none (or OTEL_SDK_DISABLED=true) turns metrics off. The SDK and the
// exporters load only when a reader is configured, so a process without metrics does not pay for them.
import { createRequire } from "node:module";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createNoopMeter, type Meter } from "@opentelemetry/api";
import type { IMetricReader, MeterProvider, MetricReader, PushMetricExporter } from "@opentelemetry/sdk-metrics";
import type { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  DEFAULT_SERVICE_NAME,
  nonEmpty,
  otlpEndpointSet,
  otlpSettings,
  positiveMs,
  sdkDisabled,
  serviceIdentity,
  TelemetryConfigError,
  type EnvLike,
  type OtlpSettings,
  type Scrubber,
} from "../telemetry/index.ts";

const load = createRequire(import.meta.url);

/** The instrumentation scope turnstream's instruments belong to. */
export const METER_NAME = "turnstream";

export interface MetricsConfig extends OtlpSettings {
  readonly enabled: boolean;
  /** Serve /metrics through the ops endpoint. */
  readonly prometheus: boolean;
  readonly otlp: boolean;
  readonly console: boolean;
  readonly intervalMillis: number;
  readonly exportTimeoutMillis: number;
  readonly serviceName: string;
  readonly resourceAttributes: Record<string, string>;
}

/** The exporters OTEL_METRICS_EXPORTER lists (undefined when unset). */
function listedExporters(env: EnvLike): Set<string> | undefined {
  const text = nonEmpty(env["OTEL_METRICS_EXPORTER"]);
  if (text === undefined) return undefined;
  const names = new Set(
    text
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== ""),
  );
  for (const exporterName of names) {
    if (!["otlp", "prometheus", "console", "none"].includes(exporterName)) {
      throw new TelemetryConfigError(
        "OTEL_METRICS_EXPORTER",
        `OTEL_METRICS_EXPORTER lists '${exporterName}'; use prometheus, otlp, console or none`,
      );
    }
  }
  return names.has("none") ? new Set() : names;
}

/**
 * Reads the OTEL_* variables that decide whether and where metrics go. Pure: no I/O. `opsEndpoint`:
 * whether this process serves /metrics. Unset OTEL_METRICS_EXPORTER means prometheus when the ops
 * endpoint is on, plus otlp when an OTLP endpoint is set.
 */
export function metricsConfig(
  env: EnvLike,
  opsEndpoint: boolean,
  fallbackServiceName = DEFAULT_SERVICE_NAME,
): MetricsConfig {
  const listed = listedExporters(env);
  if (listed?.has("prometheus") === true && !opsEndpoint) {
    throw new TelemetryConfigError(
      "OTEL_METRICS_EXPORTER",
      "OTEL_METRICS_EXPORTER lists prometheus, but this process serves no /metrics: set TURNSTREAM_OPS_PORT (or --ops-port)",
    );
  }
  const prometheus = listed === undefined ? opsEndpoint : listed.has("prometheus");
  const otlp = listed === undefined ? otlpEndpointSet(env, "metrics") : listed.has("otlp");
  const console = listed?.has("console") === true;
  const disabled = sdkDisabled(env);
  const { serviceName, resourceAttributes } = serviceIdentity(env, fallbackServiceName);
  return {
    enabled: !disabled && (prometheus || otlp || console),
    prometheus: !disabled && prometheus,
    otlp: !disabled && otlp,
    console: !disabled && console,
    ...otlpSettings(env, "metrics"),
    intervalMillis: positiveMs(env, ["OTEL_METRIC_EXPORT_INTERVAL"], 60_000)!,
    exportTimeoutMillis: positiveMs(env, ["OTEL_METRIC_EXPORT_TIMEOUT"], 30_000)!,
    serviceName,
    resourceAttributes,
  };
}

export interface StartMetricsOptions {
  /** Where the OTEL_* variables are read (default process.env). */
  env?: EnvLike;
  /** Resource attribute values are scrubbed; OTLP header values are registered with it as secrets. */
  scrubber: Scrubber;
  /** Whether this process serves /metrics (its ops endpoint is on). */
  opsEndpoint: boolean;
  /** service.instance.id: the worker's id, or the projector's. */
  instanceId: string;
  /** Used when OTEL_SERVICE_NAME is not set. */
  serviceName?: string;
  /** An extra reader (tests: an in-memory one); turns metrics on by itself. */
  reader?: MetricReader;
}

export interface Metrics {
  readonly enabled: boolean;
  /** turnstream's meter (a no-op one when metrics are off). */
  readonly meter: Meter;
  /** The Prometheus text handler for /metrics, when that reader is on. */
  readonly prometheus: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

type Sdk = typeof import("@opentelemetry/sdk-metrics");

function otlpExporter(config: MetricsConfig): PushMetricExporter {
  type Exporter = new (options: Record<string, unknown>) => PushMetricExporter;
  const pkg = {
    grpc: "@opentelemetry/exporter-metrics-otlp-grpc",
    "http/json": "@opentelemetry/exporter-metrics-otlp-http",
    "http/protobuf": "@opentelemetry/exporter-metrics-otlp-proto",
  }[config.protocol];
  const { OTLPMetricExporter } = load(pkg) as { OTLPMetricExporter: Exporter };
  // gRPC takes its headers as metadata, which it reads from the environment itself.
  const headers = config.protocol === "grpc" ? {} : { headers: config.headers };
  return new OTLPMetricExporter({
    url: config.url,
    ...headers,
    timeoutMillis: config.timeoutMillis,
    compression: config.compression,
  });
}

function readers(
  config: MetricsConfig,
  sdk: Sdk,
  extra: MetricReader | undefined,
): { readers: IMetricReader[]; prometheus: PrometheusExporter | undefined } {
  const out: IMetricReader[] = extra === undefined ? [] : [extra];
  let prometheus: PrometheusExporter | undefined;
  if (config.prometheus) {
    const { PrometheusExporter: Exporter } = load("@opentelemetry/exporter-prometheus") as {
      PrometheusExporter: typeof PrometheusExporter;
    };
    prometheus = new Exporter({ preventServerStart: true });
    // The exporter ships its own copy of sdk-metrics: its reader meets the provider's IMetricReader
    // contract, though not the MetricReader class of this copy.
    out.push(prometheus);
  }
  const push = (exporter: PushMetricExporter): MetricReader =>
    new sdk.PeriodicExportingMetricReader({
      exporter,
      exportIntervalMillis: config.intervalMillis,
      exportTimeoutMillis: Math.min(config.exportTimeoutMillis, config.intervalMillis),
    });
  if (config.otlp) out.push(push(otlpExporter(config)));
  if (config.console) out.push(push(new sdk.ConsoleMetricExporter()));
  return { readers: out, prometheus };
}

const noop = (): Metrics => ({
  enabled: false,
  meter: createNoopMeter(),
  prometheus: undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

/** Starts the meter provider as the OTEL_* variables say; a no-op meter when metrics are off. Never global. */
export function startMetrics(options: StartMetricsOptions): Metrics {
  const config = metricsConfig(options.env ?? process.env, options.opsEndpoint, options.serviceName);
  if (!config.enabled && options.reader === undefined) return noop();
  options.scrubber.addValues(Object.entries(config.headers).map(([k, v]) => [`otlp header ${k}`, v] as const));
  const sdk = load("@opentelemetry/sdk-metrics") as Sdk;
  const scrubbed = Object.fromEntries(
    Object.entries(config.resourceAttributes).map(([key, value]) => [
      key,
      options.scrubber.scrub(value, { sink: "metric", field: key }),
    ]),
  );
  const resource = defaultResource()
    .merge(resourceFromAttributes(scrubbed))
    .merge(resourceFromAttributes({ "service.name": config.serviceName, "service.instance.id": options.instanceId }));
  const { readers: all, prometheus } = readers(config, sdk, options.reader);
  const provider: MeterProvider = new sdk.MeterProvider({ resource, readers: all });
  let down: Promise<void> | undefined;
  return {
    enabled: true,
    meter: provider.getMeter(METER_NAME),
    prometheus: prometheus === undefined ? undefined : (req, res) => prometheus.getMetricsRequestHandler(req, res),
    forceFlush: () => provider.forceFlush(),
    shutdown: () => (down ??= provider.shutdown()),
  };
}
