// Tracing set-up from the standard OTEL_* environment. Off unless an OTLP endpoint or a traces
// exporter is configured (or an exporter is injected). When on, the process's OpenTelemetry SDK
// starts through NodeSDK, so the sampler, propagators, resource detectors and batch settings follow
// the OTEL_* variables as OpenTelemetry documents them. NodeSDK has no hook to wrap the exporters it
// would build from OTEL_TRACES_EXPORTER, and an exporter we did not wrap is a leak: so we build them
// by the same rules (each exporter still reads its own endpoint, headers, timeout and compression
// from the environment), wrap each in a RedactingSpanExporter and hand NodeSDK the span processors.
// Metrics and logs stay off: turnstream emits neither, and nothing unscrubbed may leave.
import { createRequire } from "node:module";
import { context, propagation, ProxyTracerProvider, trace, type Tracer, type TracerProvider } from "@opentelemetry/api";
import type { NodeSDK } from "@opentelemetry/sdk-node";
import { defaultResource, resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import {
  nonEmpty,
  otlpEndpointSet,
  otlpSettings,
  sdkDisabled,
  serviceIdentity,
  TelemetryConfigError,
  type OtlpProtocol,
  type OtlpSettings,
} from "./otlp-env.ts";
import { RedactingSpanExporter } from "./redacting-exporter.ts";
import type { EnvLike, Scrubber } from "./scrub.ts";

// The SDK and the exporters take most of a second to load: only a process that traces pays for it.
const load = createRequire(import.meta.url);

export const TRACER_NAME = "turnstream";
export const DEFAULT_SERVICE_NAME = "turnstream";

export interface StartTelemetryOptions {
  /** Scrubs every span before any exporter sees it. */
  scrubber: Scrubber;
  /** Where the OTEL_* variables are read (default process.env). */
  env?: EnvLike;
  /**
   * Used instead of the exporters OTEL_* names (tests: an InMemorySpanExporter). Still wrapped for
   * redaction. Registers the AsyncLocalStorage context manager, as NodeSDK does, unless one is.
   */
  exporter?: SpanExporter;
  /** "batch" (default) or "simple" (export each span as it ends; handy in tests). */
  processor?: "batch" | "simple";
  /** Used when OTEL_SERVICE_NAME is not set. */
  serviceName?: string;
  /**
   * With `exporter`: also install as the global tracer provider (`trace.getTracer` anywhere). Default
   * false. Without one, the SDK always registers globally, as NodeSDK does.
   */
  registerGlobal?: boolean;
}

export interface Telemetry {
  readonly enabled: boolean;
  readonly tracerProvider: TracerProvider;
  readonly tracer: Tracer;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
  /**
   * Hands finished spans another process made (the CLI's own, received by src/telemetry/cli-otlp) to
   * this telemetry's span processors: batched, scrubbed by the redacting exporter and sent wherever
   * the process's own spans go. Nothing happens while tracing is off.
   */
  emit(spans: readonly ReadableSpan[]): void;
}

export interface TracesConfig extends OtlpSettings {
  readonly enabled: boolean;
  readonly exporters: ReadonlyArray<"otlp" | "console">;
  readonly serviceName: string;
  readonly resourceAttributes: Record<string, string>;
}

/** Reads the OTEL_* variables that decide whether and where traces go. Pure: no I/O. */
export function tracesConfig(env: EnvLike, fallbackServiceName = DEFAULT_SERVICE_NAME): TracesConfig {
  const disabled = sdkDisabled(env);
  const exporterVar = nonEmpty(env["OTEL_TRACES_EXPORTER"]);
  const names = (exporterVar ?? "otlp")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== "");
  const exporters: Array<"otlp" | "console"> = [];
  for (const exporterName of names) {
    if (exporterName === "none") continue;
    if (exporterName !== "otlp" && exporterName !== "console") {
      throw new TelemetryConfigError(
        "OTEL_TRACES_EXPORTER",
        `OTEL_TRACES_EXPORTER lists '${exporterName}'; use otlp, console or none`,
      );
    }
    if (!exporters.includes(exporterName)) exporters.push(exporterName);
  }
  if (names.includes("none")) exporters.length = 0;
  const { serviceName, resourceAttributes } = serviceIdentity(env, fallbackServiceName);
  const configured = otlpEndpointSet(env, "traces") || exporterVar !== undefined;
  return {
    enabled: !disabled && configured && exporters.length > 0,
    exporters,
    ...otlpSettings(env, "traces"),
    serviceName,
    resourceAttributes,
  };
}

/**
 * The exporters OTEL_TRACES_EXPORTER names, as NodeSDK would make them; each reads its own settings from the
 * environment.
 */
function envExporters(config: TracesConfig): SpanExporter[] {
  return config.exporters.map((name) =>
    name === "console" ? new ConsoleSpanExporter() : otlpExporter(config.protocol),
  );
}

function otlpExporter(protocol: OtlpProtocol): SpanExporter {
  type Exporter = new () => SpanExporter;
  const pkg = {
    grpc: "@opentelemetry/exporter-trace-otlp-grpc",
    "http/json": "@opentelemetry/exporter-trace-otlp-http",
    "http/protobuf": "@opentelemetry/exporter-trace-otlp-proto",
  }[protocol];
  const { OTLPTraceExporter } = load(pkg) as { OTLPTraceExporter: Exporter };
  return new OTLPTraceExporter();
}

/**
 * A span processor over the exporter wrapped for redaction: batched, except the console (as NodeSDK does) or when
 * asked.
 */
function redactingProcessor(
  exporter: SpanExporter,
  scrubber: Scrubber,
  processor: "batch" | "simple" | undefined,
): SpanProcessor {
  const safe = new RedactingSpanExporter(exporter, scrubber);
  return processor === "simple" || exporter instanceof ConsoleSpanExporter
    ? new SimpleSpanProcessor(safe)
    : new BatchSpanProcessor(safe);
}

const noop = (): Telemetry => {
  const tracerProvider = new ProxyTracerProvider();
  return {
    enabled: false,
    tracerProvider,
    tracer: tracerProvider.getTracer(TRACER_NAME),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
    emit: () => undefined,
  };
};

/** Each span to each processor, as a tracer's own span reaches them when it ends. */
function emitTo(processors: readonly SpanProcessor[]): Telemetry["emit"] {
  return (spans) => {
    for (const span of spans) for (const processor of processors) processor.onEnd(span);
  };
}

/**
 * Runs `fn` with the OTEL_* variables of `env` in process.env (and no others), since the SDK and
 * the exporters read process.env while they are built. Everything they read, they read synchronously.
 */
function withOtelEnv<T>(env: EnvLike, fn: () => T): T {
  if (env === process.env) return fn();
  const saved = Object.entries(process.env).filter(([k]) => k.startsWith("OTEL_"));
  for (const [key] of saved) delete process.env[key];
  for (const [key, value] of Object.entries(env))
    if (key.startsWith("OTEL_") && value !== undefined) process.env[key] = value;
  try {
    return fn();
  } finally {
    for (const key of Object.keys(process.env)) if (key.startsWith("OTEL_")) delete process.env[key];
    for (const [key, value] of saved) process.env[key] = value;
  }
}

/** The provider behind the global tracer API (the no-op one until an SDK registers). */
function globalTracerProvider(): TracerProvider {
  const global = trace.getTracerProvider();
  return global instanceof ProxyTracerProvider ? global.getDelegate() : global;
}

/**
 * Registers the AsyncLocalStorage context manager NodeSDK registers, unless one is registered: without
 * one `context.with` does nothing, so no span is ever active and log lines cannot carry its ids.
 * True when this call registered it. It is NodeSDK's own dependency, so it is loaded from there.
 */
function ensureContextManager(): boolean {
  type Manager = { enable(): Manager; disable(): Manager };
  const fromSdk = createRequire(load.resolve("@opentelemetry/sdk-node"));
  const { AsyncLocalStorageContextManager } = fromSdk("@opentelemetry/context-async-hooks") as {
    AsyncLocalStorageContextManager: new () => Manager;
  };
  const manager = new AsyncLocalStorageContextManager().enable();
  if (context.setGlobalContextManager(manager as never)) return true;
  manager.disable();
  return false;
}

/** A tracer provider of our own for an injected exporter: tests and embedders, global only when asked. */
function privateTelemetry(options: StartTelemetryOptions, config: TracesConfig, exporter: SpanExporter): Telemetry {
  const resource = defaultResource()
    .merge(resourceFromAttributes(config.resourceAttributes))
    .merge(resourceFromAttributes({ "service.name": config.serviceName }));
  const processors = [redactingProcessor(exporter, options.scrubber, options.processor)];
  const provider = new BasicTracerProvider({ resource, spanProcessors: processors });
  if (options.registerGlobal === true) trace.setGlobalTracerProvider(provider);
  const ownContext = ensureContextManager();
  let down: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    await provider.shutdown();
    if (ownContext) context.disable();
  };
  return {
    enabled: true,
    tracerProvider: provider,
    tracer: provider.getTracer(TRACER_NAME),
    forceFlush: () => provider.forceFlush(),
    shutdown: () => (down ??= shutdown()),
    emit: emitTo(processors),
  };
}

/** Starts NodeSDK with our redacting span processors; the SDK registers itself globally, as it always does. */
function sdkTelemetry(options: StartTelemetryOptions, config: TracesConfig, env: EnvLike): Telemetry {
  const before = globalTracerProvider();
  const processors = withOtelEnv(env, () =>
    envExporters(config).map((e) => redactingProcessor(e, options.scrubber, options.processor)),
  );
  const sdk = withOtelEnv(env, () => {
    const { NodeSDK: Sdk } = load("@opentelemetry/sdk-node") as { NodeSDK: typeof NodeSDK };
    // The fallback service name sits under what the resource detectors find (OTEL_SERVICE_NAME and
    // OTEL_RESOURCE_ATTRIBUTES win).
    const resource: Resource = defaultResource().merge(resourceFromAttributes({ "service.name": config.serviceName }));
    const started = new Sdk({
      resource,
      spanProcessors: processors,
      metricReaders: [],
      logRecordProcessors: [],
    });
    started.start();
    return started;
  });
  const provider = globalTracerProvider();
  if (provider === before) {
    void sdk.shutdown();
    throw new TelemetryConfigError(
      "OTEL_TRACES_EXPORTER",
      "an OpenTelemetry SDK is already registered in this process; start turnstream's tracing once, or pass your own exporter",
    );
  }
  let down: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    await sdk.shutdown();
    // Leave the process as it was, so tracing can start again (tests start it more than once).
    if (globalTracerProvider() === provider) {
      trace.disable();
      propagation.disable();
      context.disable();
    }
  };
  return {
    enabled: true,
    tracerProvider: provider,
    tracer: provider.getTracer(TRACER_NAME),
    forceFlush: async () => {
      await (provider as { forceFlush?: () => Promise<void> }).forceFlush?.();
    },
    shutdown: () => (down ??= shutdown()),
    emit: emitTo(processors),
  };
}

/**
 * Starts tracing as the OTEL_* variables say (`env`, default process.env): off unless an endpoint or
 * a traces exporter is set, else the OpenTelemetry SDK with every exporter behind the scrubber.
 * With `exporter`, spans go to it (scrubbed) through a provider of our own instead.
 */
export function startTelemetry(options: StartTelemetryOptions): Telemetry {
  const env = options.env ?? process.env;
  const config = tracesConfig(env, options.serviceName);
  if (options.exporter !== undefined) return privateTelemetry(options, config, options.exporter);
  if (!config.enabled) return noop();
  return sdkTelemetry(options, config, env);
}
