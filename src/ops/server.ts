// The ops HTTP server of a long-running process (worker, projector): `/metrics` for Prometheus,
// `/healthz` for liveness (is the event loop answering in time?), `/readyz` for readiness (should
// work and traffic come here?). Readiness is a list of named checks the caller supplies, so each
// process says what "ready" means for it; the server adds only "shutting down", which fails from the
// moment the process is told to stop, so a load balancer or orchestrator stops counting on it at once.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { monitorEventLoopDelay, type ELDHistogram } from "node:perf_hooks";
import { listen, sendJson, silentLogger, withTimeout, type Logger } from "../kernel/index.ts";

/** One named readiness check: true when ready, false or a short reason when not. */
export interface ReadinessCheck {
  /** Shown in /readyz's JSON; a fixed word such as `redis` or `shutdown`. */
  readonly name: string;
  check(): boolean | string | Promise<boolean | string>;
}

export interface OpsServerOptions {
  /** 0: an ephemeral port (read it from `port` after `listen`). */
  port: number;
  /** Default 127.0.0.1. */
  host?: string | undefined;
  /** Serves GET /metrics (the Prometheus exporter's request handler); without it /metrics is 404. */
  metrics?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  checks?: readonly ReadinessCheck[];
  /** /healthz fails while the event loop's recent delay is over this (default 2000 ms). */
  maxEventLoopLagMs?: number;
  /** A readiness check that has not answered by then fails (default 2000 ms). */
  checkTimeoutMs?: number;
  logger?: Logger;
}

export interface ReadinessReport {
  readonly status: "ready" | "not_ready";
  /** Each check's result: "ok" or why not. */
  readonly checks: Record<string, string>;
}

export interface OpsServer {
  readonly host: string;
  /** The bound port (the ephemeral one when asked for 0). */
  readonly port: number;
  /** Adds a readiness check; checks added after start count from the next probe on. */
  addCheck(check: ReadinessCheck): void;
  /** From now on /readyz answers 503 (`shutdown` failing). */
  shuttingDown(): void;
  /** Runs every readiness check now, as /readyz does. */
  readiness(): Promise<ReadinessReport>;
  close(): Promise<void>;
}

const DEFAULT_HOST = "127.0.0.1";
// Each window's maximum delay is kept for one more window, so a stall just before a probe still shows.
const LAG_WINDOW_MS = 1000;

/** The event loop's worst delay over the last one to two windows. */
class LagMonitor {
  readonly #histogram: ELDHistogram = monitorEventLoopDelay({ resolution: 20 });
  readonly #timer: NodeJS.Timeout;
  #previousMs = 0;

  constructor() {
    this.#histogram.enable();
    this.#timer = setInterval(() => {
      this.#previousMs = this.#currentMs();
      this.#histogram.reset();
    }, LAG_WINDOW_MS).unref();
  }

  #currentMs(): number {
    // The histogram counts the sampling resolution itself as delay; the excess is the lag.
    return this.#histogram.count === 0 ? 0 : Math.max(0, this.#histogram.max / 1e6 - 20);
  }

  lagMs(): number {
    return Math.round(Math.max(this.#previousMs, this.#currentMs()));
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#histogram.disable();
  }
}

async function runCheck(check: ReadinessCheck, timeoutMs: number): Promise<string> {
  const run = (async (): Promise<string> => {
    const verdict = await check.check();
    return verdict === true ? "ok" : verdict === false ? "failed" : verdict;
  })();
  return withTimeout(run, timeoutMs, `no answer within ${timeoutMs} ms`).catch((err: unknown) =>
    err instanceof Error ? err.message : String(err),
  );
}

class Ops implements OpsServer {
  readonly host: string;
  readonly #server: Server;
  readonly #checks: ReadinessCheck[] = [];
  readonly #lag = new LagMonitor();
  readonly #options: OpsServerOptions;
  #stopping = false;

  constructor(options: OpsServerOptions, server: Server) {
    this.#options = options;
    this.host = options.host ?? DEFAULT_HOST;
    this.#server = server;
    this.#checks.push(
      { name: "shutdown", check: () => (this.#stopping ? "shutting down" : true) },
      ...(options.checks ?? []),
    );
  }

  get port(): number {
    const address = this.#server.address();
    return typeof address === "object" && address !== null ? address.port : this.#options.port;
  }

  addCheck(check: ReadinessCheck): void {
    this.#checks.push(check);
  }

  shuttingDown(): void {
    this.#stopping = true;
  }

  async readiness(): Promise<ReadinessReport> {
    const timeoutMs = this.#options.checkTimeoutMs ?? 2000;
    const results = await Promise.all(this.#checks.map((c) => runCheck(c, timeoutMs)));
    const checks: Record<string, string> = {};
    this.#checks.forEach((c, i) => (checks[c.name] = results[i]!));
    return { status: results.every((r) => r === "ok") ? "ready" : "not_ready", checks };
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0];
    const route =
      path === "/metrics"
        ? this.#options.metrics
        : path === "/healthz"
          ? this.#healthz
          : path === "/readyz"
            ? this.#readyz
            : undefined;
    if (route === undefined)
      return sendJson(res, 404, { error: `no such endpoint; try /metrics, /healthz or /readyz` });
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      return sendJson(res, 405, { error: "only GET and HEAD" });
    }
    route(req, res);
  }

  #healthz = (_req: IncomingMessage, res: ServerResponse): void => {
    const eventLoopLagMs = this.#lag.lagMs();
    const ok = eventLoopLagMs <= (this.#options.maxEventLoopLagMs ?? 2000);
    sendJson(res, ok ? 200 : 503, { status: ok ? "ok" : "event_loop_lagging", eventLoopLagMs });
  };

  #readyz = (_req: IncomingMessage, res: ServerResponse): void => {
    void this.readiness().then(
      (report) => sendJson(res, report.status === "ready" ? 200 : 503, report),
      (err: unknown) => sendJson(res, 503, { status: "not_ready", checks: { readiness: String(err) } }),
    );
  };

  async close(): Promise<void> {
    this.#lag.stop();
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}

/** Starts the ops server and resolves once it listens; fails with the listen error (a port in use). */
export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  const logger = options.logger ?? silentLogger;
  let ops: Ops | undefined;
  const server = createServer((req, res) => ops!.handle(req, res));
  ops = new Ops(options, server);
  // Probes must not hold a stopping process open, nor pile up on a slow one.
  server.keepAliveTimeout = 5000;
  server.requestTimeout = 10_000;
  await listen(server, options.port, ops.host).catch((err: unknown) => {
    ops!.close().catch(() => {});
    throw err;
  });
  server.unref();
  logger.info({ host: ops.host, port: ops.port }, "ops endpoint listening (/metrics, /healthz, /readyz)");
  return ops;
}

/** Ready while Redis answers PING within the check's timeout. */
export function redisReadiness(redis: { ping(): Promise<unknown> }): ReadinessCheck {
  return { name: "redis", check: async () => ((await redis.ping()) === "PONG" ? true : "unexpected PING reply") };
}
