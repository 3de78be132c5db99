// The loopback OTLP/HTTP JSON receiver the worker's CLIs export their own telemetry to. Each CLI
// process gets a token of its own (its env's OTEL_EXPORTER_OTLP_HEADERS); a request without a live
// one is refused before its body is read. Spans are checked against the trace the token was given,
// filtered and scrubbed (spans.ts), and handed to the worker's span processors (Telemetry.emit), so
// they leave through the redacting exporter like the worker's own. Metrics pass their allow-list
// (metrics.ts) into the worker's instruments when the worker keeps metrics; else, like logs, they are
// read and dropped (the CLI is not asked for them: cliTelemetryEnv). Logs repeat the spans with more
// content in them.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { BodyTooLargeError, listen, readBodyBytes, sendJson, silentLogger, type Logger } from "../../kernel/index.ts";
import {
  cliMetricIncrements,
  CumulativeSeries,
  emptyPointCounts,
  type CliMetricsSink,
  type CliOtlpStats,
  type MetricPointCounts,
} from "./metrics.ts";
import { cliSpans, type AttemptBinding, type SpanRoute } from "./spans.ts";

export interface CliOtlpReceiverOptions {
  /** Where the converted spans go: the worker's span processors. */
  emit(spans: readonly ReadableSpan[]): void;
  /** Where the kept metrics go, and who reads the receiver's counts: the worker's meter. None: metrics dropped. */
  metrics?: CliMetricsSink | undefined;
  /** Keep the CLI's content attributes (prompt, tool input and output), scrubbed. Default false. */
  content?: boolean | undefined;
  /** A larger request body gets 413. Default 4 MiB. */
  maxBodyBytes?: number | undefined;
  logger?: Logger | undefined;
}

export interface CliOtlpReceiver {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly stats: Readonly<CliOtlpStats>;
  /**
   * A token for one CLI process started with TRACEPARENT naming `process`; without one (the worker
   * does not trace) the process may post metrics only.
   */
  issue(process: { traceId: string; spanId: string } | undefined): CliTelemetryGrant;
  /** Tokens live now. */
  readonly liveTokens: number;
  /** Revokes every token and stops listening. */
  close(): Promise<void>;
}

/** The token's prefix: says what it is when one turns up somewhere. */
export const CLI_OTLP_TOKEN_PREFIX = "turnstream-otlp-";
// The CLI exports in batches of at most 512 spans, a few hundred KB; a larger body is no CLI's.
export const CLI_OTLP_DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/**
 * Requests one token may have open at once: a CLI sends one batch at a time per signal. With the body
 * limit, this bounds what the receiver buffers to a few MB per live token. Connections are not capped:
 * one without a live token is answered before its body is read, so a tool that opens many starves
 * nobody's posts.
 */
export const CLI_OTLP_MAX_IN_FLIGHT = 3;
/**
 * Spans one attempt of a process may hand on. Far above what a turn makes (a few per model call and
 * tool call), and a bound on what a tool posting with its CLI's token can push into the shared export
 * queue, where other runs' spans wait too.
 */
export const CLI_OTLP_MAX_SPANS_PER_ATTEMPT = 20_000;
/** Attempts a kept process's spans may still be sorted into (spans arrive up to a few seconds late). */
const KEPT_BINDINGS = 4;

const hashOf = (token: string): string => createHash("sha256").update(token).digest("hex");

/** The trace of a process that may post no spans: no span's trace id is empty. */
const NO_TRACE = { traceId: "", spanId: "" };

/** One CLI process's right to post spans into its own trace, and the attempts its spans belong to. */
export class CliTelemetryGrant implements SpanRoute {
  readonly token = CLI_OTLP_TOKEN_PREFIX + randomBytes(32).toString("base64url");
  readonly process: { readonly traceId: string; readonly spanId: string };
  readonly content: boolean;
  /** The process's cumulative metric series (a delta one keeps none). */
  readonly series = new CumulativeSeries();
  readonly #bindings: AttemptBinding[] = [];
  readonly #revoke: () => void;
  #revoked = false;
  /** Requests of this token being read or handled now. */
  inFlight = 0;
  /** Spans the current attempt may still hand on. */
  #spansLeft = CLI_OTLP_MAX_SPANS_PER_ATTEMPT;

  constructor(process: { traceId: string; spanId: string } | undefined, content: boolean, revoke: () => void) {
    this.process = { traceId: (process ?? NO_TRACE).traceId, spanId: (process ?? NO_TRACE).spanId };
    this.content = content;
    this.#revoke = revoke;
  }

  get revoked(): boolean {
    return this.#revoked;
  }

  /** From now on the process answers this attempt: its later spans go under the attempt's span. */
  bind(binding: AttemptBinding): void {
    this.#spansLeft = CLI_OTLP_MAX_SPANS_PER_ATTEMPT;
    this.#bindings.push(binding);
    if (this.#bindings.length > KEPT_BINDINGS) this.#bindings.shift();
  }

  bindingFor(startMs: number): AttemptBinding | undefined {
    for (let index = this.#bindings.length - 1; index > 0; index--)
      if (this.#bindings[index]!.startMs <= startMs) return this.#bindings[index];
    return this.#bindings[0];
  }

  /** Takes up to `wanted` of the attempt's span allowance; returns how many it may hand on. */
  takeSpans(wanted: number): number {
    const granted = Math.min(wanted, this.#spansLeft);
    this.#spansLeft -= granted;
    return granted;
  }

  revoke(): void {
    if (this.#revoked) return;
    this.#revoked = true;
    this.#revoke();
  }
}

const SIGNALS = new Set(["/v1/traces", "/v1/metrics", "/v1/logs"]);

export async function startCliOtlpReceiver(options: CliOtlpReceiverOptions): Promise<CliOtlpReceiver> {
  const grants = new Map<string, CliTelemetryGrant>();
  const stats: CliOtlpStats = {
    spans: 0,
    refusedSpans: 0,
    unauthorized: 0,
    dropped: 0,
    metricPoints: emptyPointCounts(),
  };
  options.metrics?.watch(stats);
  const context: RequestContext = {
    grants,
    stats,
    emit: options.emit,
    metrics: options.metrics,
    maxBodyBytes: options.maxBodyBytes ?? CLI_OTLP_DEFAULT_MAX_BODY_BYTES,
    logger: options.logger ?? silentLogger,
  };
  const server: Server = createServer((req, res) => {
    handle(context, req, res).catch((err: unknown) => {
      // A request must never take the worker down: whatever it made go wrong ends with it.
      context.logger.warn({ err: { message: (err as Error)?.message } }, "a CLI telemetry request failed");
      if (!res.headersSent) refuse(res, 400, "malformed request");
      else res.destroy();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  const address = await listen(server, 0, "127.0.0.1");
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${address.port}`,
    stats,
    get liveTokens() {
      return grants.size;
    },
    issue(process) {
      const grant: CliTelemetryGrant = new CliTelemetryGrant(process, options.content === true, () =>
        grants.delete(hashOf(grant.token)),
      );
      grants.set(hashOf(grant.token), grant);
      return grant;
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        for (const grant of [...grants.values()]) grant.revoke();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

interface RequestContext {
  grants: Map<string, CliTelemetryGrant>;
  stats: CliOtlpStats;
  emit(spans: readonly ReadableSpan[]): void;
  metrics: CliMetricsSink | undefined;
  maxBodyBytes: number;
  logger: Logger;
}

/** The grant a request's bearer token names, if it is live. */
function grantOf(context: RequestContext, req: IncomingMessage): CliTelemetryGrant | undefined {
  const match = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
  if (match === null || !match[1]!.startsWith(CLI_OTLP_TOKEN_PREFIX)) return undefined;
  return context.grants.get(hashOf(match[1]!));
}

/** Why a token holder's request is refused before its body is read: [status, message], or undefined. */
function refusal(req: IncomingMessage): [number, string] | undefined {
  if (req.method !== "POST") return [405, "POST only"];
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  const encoding = (req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (type !== "application/json" || encoding !== "identity") return [415, "application/json, uncompressed, only"];
  return undefined;
}

async function handle(context: RequestContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? "").split("?")[0]!;
  if (!SIGNALS.has(path)) return refuse(res, 404, "not found");
  const grant = grantOf(context, req);
  if (grant === undefined) {
    context.stats.unauthorized++;
    return refuse(res, 401, "no live token");
  }
  const refused = refusal(req);
  if (refused !== undefined) return refuse(res, refused[0], refused[1]);
  if (grant.inFlight >= CLI_OTLP_MAX_IN_FLIGHT) return refuse(res, 429, "too many requests open for this token");
  grant.inFlight++;
  try {
    await handleSignal(context, grant, path, req, res);
  } finally {
    grant.inFlight--;
  }
}

async function handleSignal(
  context: RequestContext,
  grant: CliTelemetryGrant,
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  let body: Buffer;
  try {
    body = await readBodyBytes(req, context.maxBodyBytes);
  } catch (err) {
    if (err instanceof BodyTooLargeError) return refuse(res, 413, err.message);
    req.destroy();
    return;
  }
  const metrics = path === "/v1/metrics" ? context.metrics : undefined;
  if (path !== "/v1/traces" && metrics === undefined) {
    context.stats.dropped++;
    return sendJson(res, 200, {});
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return refuse(res, 400, "not JSON");
  }
  if (metrics !== undefined) return recordMetrics(context, metrics, grant, parsed, res);
  forwardSpans(context, grant, parsed, res);
}

function recordMetrics(
  context: RequestContext,
  sink: CliMetricsSink,
  grant: CliTelemetryGrant,
  body: unknown,
  res: ServerResponse,
): void {
  const { increments, counts } = cliMetricIncrements(body, grant.series);
  addCounts(context.stats.metricPoints, counts);
  try {
    if (increments.length > 0) sink.add(increments);
  } catch (err) {
    context.logger.warn({ err: { message: (err as Error).message } }, "could not record the CLI's metrics");
  }
  if (counts.refused === 0) return sendJson(res, 200, {});
  sendJson(res, 200, {
    partialSuccess: { rejectedDataPoints: counts.refused, errorMessage: "malformed or too many series" },
  });
}

function addCounts(total: MetricPointCounts, counts: MetricPointCounts): void {
  total.recorded += counts.recorded;
  total.notKept += counts.notKept;
  total.unknown += counts.unknown;
  total.refused += counts.refused;
}

function forwardSpans(context: RequestContext, grant: CliTelemetryGrant, body: unknown, res: ServerResponse): void {
  const converted = cliSpans(body, grant);
  const spans = converted.spans.slice(0, grant.takeSpans(converted.spans.length));
  const refused = converted.refused + converted.spans.length - spans.length;
  context.stats.spans += spans.length;
  context.stats.refusedSpans += refused;
  try {
    if (spans.length > 0) context.emit(spans);
  } catch (err) {
    context.logger.warn({ err: { message: (err as Error).message } }, "could not hand the CLI's spans on");
  }
  if (refused === 0) return sendJson(res, 200, {});
  // OTLP's partial success: the CLI's exporter logs it and does not send those spans again.
  sendJson(res, 200, {
    partialSuccess: {
      rejectedSpans: refused,
      errorMessage: "spans outside the run's trace, malformed, or past the attempt's allowance",
    },
  });
}

function refuse(res: ServerResponse, status: number, message: string): void {
  // The connection closes after a refusal: an unread body must not be taken for the next request.
  res.setHeader("Connection", "close");
  sendJson(res, status, { error: message });
}
