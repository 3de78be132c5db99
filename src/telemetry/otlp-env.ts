// The OTLP exporter settings of one signal from the standard OTEL_* variables, for traces and metrics
// alike: the per-signal variable wins over the general one, as OpenTelemetry's specification says.
import { TurnstreamError } from "../kernel/index.ts";
import type { EnvLike } from "./scrub.ts";

export type OtlpProtocol = "http/protobuf" | "http/json" | "grpc";
export type OtlpSignal = "traces" | "metrics";

export interface OtlpSettings {
  readonly protocol: OtlpProtocol;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly timeoutMillis: number | undefined;
  readonly compression: "gzip" | "none" | undefined;
}

export class TelemetryConfigError extends TurnstreamError {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(message, { code: "telemetry_config" });
    this.variable = variable;
  }
}

/** The variable's trimmed text, or undefined when unset or blank. */
export const nonEmpty = (v: string | undefined): string | undefined =>
  v === undefined || v.trim() === "" ? undefined : v.trim();

/** `k=v,k2=v2`, values percent-decoded (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS). */
export function parseKeyValueList(text: string | undefined, variable: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const item of text.split(",")) {
    if (item.trim() === "") continue;
    const eq = item.indexOf("=");
    if (eq <= 0)
      throw new TelemetryConfigError(
        variable,
        `${variable} must be a comma-separated list of key=value pairs; fix the entry at position ${Object.keys(out).length + 1}`,
      );
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

/** The first of `names` that is set, as a positive number of milliseconds; `dflt` when none is. */
export function positiveMs(env: EnvLike, names: readonly string[], dflt: number | undefined): number | undefined {
  for (const name of names) {
    const text = nonEmpty(env[name]);
    if (text === undefined) continue;
    const millis = Number(text);
    if (!(Number.isFinite(millis) && millis > 0))
      throw new TelemetryConfigError(name, `${name} must be a positive number of milliseconds, got '${text}'`);
    return millis;
  }
  return dflt;
}

type Setting = "endpoint" | "protocol" | "headers" | "timeout" | "compression";

// Spelled out rather than built, so a search for a variable's name finds where it is read.
const GENERAL_VARS: Record<Setting, string> = {
  endpoint: "OTEL_EXPORTER_OTLP_ENDPOINT",
  protocol: "OTEL_EXPORTER_OTLP_PROTOCOL",
  headers: "OTEL_EXPORTER_OTLP_HEADERS",
  timeout: "OTEL_EXPORTER_OTLP_TIMEOUT",
  compression: "OTEL_EXPORTER_OTLP_COMPRESSION",
};
const SIGNAL_VARS: Record<OtlpSignal, Record<Setting, string>> = {
  traces: {
    endpoint: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    protocol: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    headers: "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    timeout: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    compression: "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
  },
  metrics: {
    endpoint: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    protocol: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    headers: "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    timeout: "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
    compression: "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
  },
};

/** OTEL_SDK_DISABLED=true: every signal is off, whatever else is set. */
export function sdkDisabled(env: EnvLike): boolean {
  return nonEmpty(env["OTEL_SDK_DISABLED"])?.toLowerCase() === "true";
}

/**
 * OTEL_RESOURCE_ATTRIBUTES, and service.name: OTEL_SERVICE_NAME, else the attributes' service.name, else `fallback`.
 */
export function serviceIdentity(
  env: EnvLike,
  fallback: string,
): { serviceName: string; resourceAttributes: Record<string, string> } {
  const resourceAttributes = parseKeyValueList(nonEmpty(env["OTEL_RESOURCE_ATTRIBUTES"]), "OTEL_RESOURCE_ATTRIBUTES");
  return {
    serviceName: nonEmpty(env["OTEL_SERVICE_NAME"]) ?? resourceAttributes["service.name"] ?? fallback,
    resourceAttributes,
  };
}

/** Whether an OTLP endpoint is set for `signal`: its own variable or the general one. */
export function otlpEndpointSet(env: EnvLike, signal: OtlpSignal): boolean {
  return (
    nonEmpty(env[GENERAL_VARS.endpoint]) !== undefined || nonEmpty(env[SIGNAL_VARS[signal].endpoint]) !== undefined
  );
}

/** The per-signal variable when set, else the general one. */
function signalVar(env: EnvLike, signal: OtlpSignal, setting: Setting): string {
  const specific = SIGNAL_VARS[signal][setting];
  return nonEmpty(env[specific]) !== undefined ? specific : GENERAL_VARS[setting];
}

/** Where OTLP data of `signal` goes, as the exporters work it out: the signal path is appended over HTTP only. */
function otlpUrl(env: EnvLike, signal: OtlpSignal, protocol: OtlpProtocol): string {
  const urlVar = signalVar(env, signal, "endpoint");
  const given = nonEmpty(env[urlVar]);
  const url =
    urlVar !== GENERAL_VARS.endpoint
      ? given!
      : protocol === "grpc"
        ? (given ?? "http://localhost:4317")
        : `${(given ?? "http://localhost:4318").replace(/\/+$/, "")}/v1/${signal}`;
  try {
    new URL(url);
  } catch {
    throw new TelemetryConfigError(urlVar, `${urlVar} is not a URL; set it like http://collector:4318`);
  }
  return url;
}

/** Reads one signal's OTLP settings. Pure: no I/O; a bad value throws naming its variable. */
export function otlpSettings(env: EnvLike, signal: OtlpSignal): OtlpSettings {
  const protocolVar = signalVar(env, signal, "protocol");
  const protocol = nonEmpty(env[protocolVar]) ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json" && protocol !== "grpc") {
    throw new TelemetryConfigError(
      protocolVar,
      `${protocolVar} is '${protocol}'; use http/protobuf, http/json or grpc`,
    );
  }
  const vars = SIGNAL_VARS[signal];
  const headers = {
    ...parseKeyValueList(nonEmpty(env[GENERAL_VARS.headers]), GENERAL_VARS.headers),
    ...parseKeyValueList(nonEmpty(env[vars.headers]), vars.headers),
  };
  const timeoutMillis = positiveMs(env, [vars.timeout, GENERAL_VARS.timeout], undefined);
  const compressionVar = signalVar(env, signal, "compression");
  const compression = nonEmpty(env[compressionVar])?.toLowerCase();
  if (compression !== undefined && compression !== "gzip" && compression !== "none") {
    throw new TelemetryConfigError(compressionVar, `${compressionVar} must be gzip or none`);
  }
  return { protocol, url: otlpUrl(env, signal, protocol), headers, timeoutMillis, compression };
}
