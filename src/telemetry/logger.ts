// The pino logger every process uses. Three layers, because a log line is the easiest place for a
// secret to slip out: pino's `redact` paths blank known secret fields; a log-method hook and the
// formatters pass every message, argument, field and binding through the scrubber; the destination
// scrubs the final JSON line once more (catching anything a serializer produced afterwards).
// A line written while a span is active (a worker's attempt runs inside its span) carries the span's
// ids under the OpenTelemetry log-correlation names, so a line can be found from its trace and back.
import { context, isSpanContextValid, trace } from "@opentelemetry/api";
import { pino, type DestinationStream, type Level, type Logger as PinoLogger } from "pino";
import { redactionMarker, scrubError, type Scrubber } from "./scrub.ts";

export type { Logger } from "../kernel/index.ts";

export interface CreateLoggerOptions {
  /** Scrubs every line (messages, fields, errors) before it is written. */
  scrubber: Scrubber;
  /** Default: `LOG_LEVEL` from `env`, else "info". */
  level?: Level | "silent";
  /** Where lines go (default stdout). Anything with `write(line)`. */
  destination?: DestinationStream;
  /** Bound to every line, e.g. `{ service: "worker" }`. */
  base?: Record<string, unknown>;
  /** Where `LOG_LEVEL` is read (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Paths pino blanks before anything else sees them. `*` matches one level. */
export const REDACT_PATHS: readonly string[] = [
  "headers.authorization",
  "headers.cookie",
  'headers["x-api-key"]',
  'headers["set-cookie"]',
  "*.headers.authorization",
  "*.headers.cookie",
  '*.headers["x-api-key"]',
  "env.*",
  "*.env.*",
  "apiKey",
  "*.apiKey",
  "api_key",
  "*.api_key",
  "token",
  "*.token",
  "accessToken",
  "*.accessToken",
  "refreshToken",
  "*.refreshToken",
  "password",
  "*.password",
  "secret",
  "*.secret",
  "authorization",
  "*.authorization",
  "credentials",
  "*.credentials",
];

const LEVELS = new Set(["fatal", "error", "warn", "info", "debug", "trace", "silent"]);

const NO_TRACE = Object.freeze({});

/**
 * `trace_id`, `span_id` and `trace_flags` of the active span, or nothing. Without tracing no context
 * manager is registered, the active context is always the empty root, and this is one map lookup.
 */
export function traceFields(): Readonly<Record<string, string>> {
  const span = trace.getSpan(context.active());
  if (span === undefined) return NO_TRACE;
  const sc = span.spanContext();
  if (!isSpanContextValid(sc)) return NO_TRACE;
  return {
    trace_id: sc.traceId,
    span_id: sc.spanId,
    trace_flags: (sc.traceFlags & 0xff).toString(16).padStart(2, "0"),
  };
}

/**
 * A pino logger whose every line passes the scrubber, with the usual secret paths (auth headers, tokens) blanked first.
 */
export function createLogger(options: CreateLoggerOptions): PinoLogger {
  const { scrubber } = options;
  const ctx = { sink: "log" } as const;
  const envLevel = (options.env ?? process.env)["LOG_LEVEL"];
  const level = options.level ?? (envLevel !== undefined && LEVELS.has(envLevel) ? (envLevel as Level) : "info");
  const inner = options.destination ?? pino.destination(1);
  const destination: DestinationStream = {
    write(line: string): void {
      inner.write(scrubber.scrub(line, ctx));
    },
  };
  return pino(
    {
      level,
      mixin: traceFields,
      // pino's default merge assigns into the mixin's object; the shared empty one is left alone.
      mixinMergeStrategy: (fields: object, ids: object) => (ids === NO_TRACE ? fields : Object.assign(ids, fields)),
      base: options.base === undefined ? null : scrubber.scrubDeep(options.base, ctx),
      redact: {
        paths: [...REDACT_PATHS],
        censor: (_value: unknown, path: string[]) => redactionMarker(path.at(-1) ?? "field"),
      },
      hooks: {
        logMethod(args: unknown[], method: (...args: unknown[]) => void) {
          const safe = args.map((a) =>
            typeof a === "string" ? scrubber.scrub(a, ctx) : a instanceof Error ? scrubError(a, scrubber) : a,
          );
          method.apply(this, safe);
        },
      },
      formatters: {
        log: (obj: Record<string, unknown>) => scrubber.scrubDeep(obj, ctx),
        bindings: (bindings: Record<string, unknown>) => scrubber.scrubDeep(bindings, ctx),
      },
    },
    destination,
  );
}
