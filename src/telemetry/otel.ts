// Tracing set-up from the standard OTEL_* environment. Off unless an OTLP endpoint or a traces
// exporter is configured (or an exporter is injected). Every exporter is wrapped in a
// RedactingSpanExporter, so the scrubber sits between our spans and any wire.
//
// We build the provider from sdk-trace-base rather than sdk-node: sdk-node would also pick exporters
// from the environment by itself, and an exporter we did not wrap is a leak.
import { ProxyTracerProvider, trace, type Tracer, type TracerProvider } from "@opentelemetry/api";
import { OTLPTraceExporter as OTLPJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OTLPProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { RedactingSpanExporter } from "./redacting-exporter.ts";
import type { EnvLike, Scrubber } from "./scrub.ts";

export const TRACER_NAME = "turnstream";
export const DEFAULT_SERVICE_NAME = "turnstream";

export interface StartTelemetryOptions {
  scrubber: Scrubber;
  /** Default process.env. */
  env?: EnvLike;
  /** Used instead of the OTLP exporter (tests: an InMemorySpanExporter). Still wrapped for redaction. */
  exporter?: SpanExporter;
  /** "batch" (default) or "simple" (export each span as it ends; handy in tests). */
  processor?: "batch" | "simple";
  /** Used when OTEL_SERVICE_NAME is not set. */
  serviceName?: string;
  /** Also install as the global tracer provider (`trace.getTracer` anywhere). Default false. */
  registerGlobal?: boolean;
}

export interface Telemetry {
  readonly enabled: boolean;
  readonly tracerProvider: TracerProvider;
  readonly tracer: Tracer;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

export class TelemetryConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(message);
    this.name = "TelemetryConfigError";
    this.variable = variable;
  }
}

export type OtlpProtocol = "http/protobuf" | "http/json";

export interface TracesConfig {
  readonly enabled: boolean;
  readonly exporters: ReadonlyArray<"otlp" | "console">;
  readonly protocol: OtlpProtocol;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly timeoutMillis: number | undefined;
  readonly compression: "gzip" | "none" | undefined;
  readonly serviceName: string;
  readonly resourceAttributes: Record<string, string>;
}

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === "" ? undefined : v.trim());

/** `k=v,k2=v2`, values percent-decoded (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS). */
export function parseKeyValueList(text: string | undefined, variable: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const item of text.split(",")) {
    if (item.trim() === "") continue;
    const eq = item.indexOf("=");
    if (eq <= 0) throw new TelemetryConfigError(variable, `${variable} must be a comma-separated list of key=value pairs; fix the entry at position ${Object.keys(out).length + 1}`);
    const key = item.slice(0, eq).trim();
    const raw = item.slice(eq + 1).trim();
    let value = raw;
    try {
      value = decodeURIComponent(raw);
    } catch {
      // leave undecodable values as written
    }
    out[key] = value;
  }
  return out;
}

/** Reads the OTEL_* variables that decide whether and where traces go. Pure: no I/O. */
export function tracesConfig(env: EnvLike, fallbackServiceName = DEFAULT_SERVICE_NAME): TracesConfig {
  const disabled = nonEmpty(env["OTEL_SDK_DISABLED"])?.toLowerCase() === "true";
  const exporterVar = nonEmpty(env["OTEL_TRACES_EXPORTER"]);
  const endpoint = nonEmpty(env["OTEL_EXPORTER_OTLP_ENDPOINT"]);
  const tracesEndpoint = nonEmpty(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]);
  const names = (exporterVar ?? "otlp").split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  const exporters: Array<"otlp" | "console"> = [];
  for (const n of names) {
    if (n === "none") continue;
    if (n !== "otlp" && n !== "console") {
      throw new TelemetryConfigError("OTEL_TRACES_EXPORTER", `OTEL_TRACES_EXPORTER lists '${n}'; use otlp, console or none`);
    }
    if (!exporters.includes(n)) exporters.push(n);
  }
  if (names.includes("none")) exporters.length = 0;
  const protocolVar = nonEmpty(env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]) !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = nonEmpty(env[protocolVar]) ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    throw new TelemetryConfigError(protocolVar, `${protocolVar} is '${protocol}'; turnstream exports over http/protobuf or http/json (grpc is not bundled)`);
  }
  const url = tracesEndpoint ?? (endpoint !== undefined ? `${endpoint.replace(/\/+$/, "")}/v1/traces` : "http://localhost:4318/v1/traces");
  try {
    new URL(url);
  } catch {
    const v = tracesEndpoint !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
    throw new TelemetryConfigError(v, `${v} is not a URL; set it like http://collector:4318`);
  }
  const headers = {
    ...parseKeyValueList(nonEmpty(env["OTEL_EXPORTER_OTLP_HEADERS"]), "OTEL_EXPORTER_OTLP_HEADERS"),
    ...parseKeyValueList(nonEmpty(env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]), "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
  };
  const timeoutText = nonEmpty(env["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"]) ?? nonEmpty(env["OTEL_EXPORTER_OTLP_TIMEOUT"]);
  const timeoutMillis = timeoutText === undefined ? undefined : Number(timeoutText);
  if (timeoutMillis !== undefined && !(Number.isFinite(timeoutMillis) && timeoutMillis > 0)) {
    throw new TelemetryConfigError("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT must be a positive number of milliseconds");
  }
  const compressionText = (nonEmpty(env["OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"]) ?? nonEmpty(env["OTEL_EXPORTER_OTLP_COMPRESSION"]))?.toLowerCase();
  if (compressionText !== undefined && compressionText !== "gzip" && compressionText !== "none") {
    throw new TelemetryConfigError("OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION must be gzip or none");
  }
  const resourceAttributes = parseKeyValueList(nonEmpty(env["OTEL_RESOURCE_ATTRIBUTES"]), "OTEL_RESOURCE_ATTRIBUTES");
  const serviceName = nonEmpty(env["OTEL_SERVICE_NAME"]) ?? resourceAttributes["service.name"] ?? fallbackServiceName;
  const configured = endpoint !== undefined || tracesEndpoint !== undefined || exporterVar !== undefined;
  return {
    enabled: !disabled && configured && exporters.length > 0,
    exporters,
    protocol,
    url,
    headers,
    timeoutMillis,
    compression: compressionText,
    serviceName,
    resourceAttributes,
  };
}

function otlpExporter(config: TracesConfig): SpanExporter {
  type Options = NonNullable<ConstructorParameters<typeof OTLPJsonTraceExporter>[0]>;
  const options: Options = { url: config.url, headers: config.headers };
  if (config.timeoutMillis !== undefined) options.timeoutMillis = config.timeoutMillis;
  if (config.compression !== undefined) options.compression = config.compression as Options["compression"];
  return config.protocol === "http/json" ? new OTLPJsonTraceExporter(options) : new OTLPProtoTraceExporter(options);
}

const noop = (): Telemetry => {
  const tracerProvider = new ProxyTracerProvider();
  return {
    enabled: false,
    tracerProvider,
    tracer: tracerProvider.getTracer(TRACER_NAME),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
};

export function startTelemetry(options: StartTelemetryOptions): Telemetry {
  const env = options.env ?? process.env;
  const config = tracesConfig(env, options.serviceName);
  if (options.exporter === undefined && !config.enabled) return noop();
  const inner: SpanExporter[] =
    options.exporter !== undefined
      ? [options.exporter]
      : config.exporters.map((e) => (e === "otlp" ? otlpExporter(config) : new ConsoleSpanExporter()));
  const spanProcessors: SpanProcessor[] = inner.map((e) => {
    const safe = new RedactingSpanExporter(e, options.scrubber);
    return options.processor === "simple" ? new SimpleSpanProcessor(safe) : new BatchSpanProcessor(safe);
  });
  const resource = defaultResource()
    .merge(resourceFromAttributes(config.resourceAttributes))
    .merge(resourceFromAttributes({ "service.name": config.serviceName }));
  const provider = new BasicTracerProvider({ resource, spanProcessors });
  if (options.registerGlobal === true) trace.setGlobalTracerProvider(provider);
  let down: Promise<void> | undefined;
  return {
    enabled: true,
    tracerProvider: provider,
    tracer: provider.getTracer(TRACER_NAME),
    forceFlush: () => provider.forceFlush(),
    shutdown: () => (down ??= provider.shutdown()),
  };
}
