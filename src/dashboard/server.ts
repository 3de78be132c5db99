// `startDashboard`: a small node:http server for the web console. Static page files, JSON and one
// SSE stream per open view, fed by the log's tail; everything it sends passes through the scrubber.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { DEFAULT_PREFIX, listen, silentLogger, type Logger, TurnstreamError } from "../kernel/index.ts";
import { SessionHistory, type Archive } from "../archive/index.ts";
import { createEventLog, isValidSessionId, type RedisClient } from "../log/index.ts";
import { closeTurnQueue, createTurnQueue } from "../queue/index.ts";
import { createScrubber, type Scrubber } from "../telemetry/index.ts";
import { operatorName, type OperatorKey, type OperatorKeyring } from "../decisions/index.ts";
import { Fleet } from "./fleet.ts";
import { WatchedSessions } from "./watched.ts";
import { BodyTooLargeError, securityHeaders, sendJson, sendText } from "./http.ts";
import {
  decideRoute,
  fleetStream,
  loginRoute,
  page,
  resultRoute,
  sessionAt,
  sessionStream,
  type Ctx,
} from "./routes.ts";
import { createGuard, isLoopbackHost } from "./security.ts";
import { clearTenantRoute, setTenantRoute } from "./tenant-routes.ts";
import { revokeRuleRoute, rulesRoute } from "./rule-routes.ts";
import { loadStaticFiles } from "./static-files.ts";
import { FleetFacts } from "./fleet-facts.ts";
import { chartsRoute, searchRoute, timelineRoute, workersRoute } from "./view-routes.ts";
import { WorkersReader } from "./workers-view.ts";

/** Jaeger's trace page; `{traceId}` is replaced by the turn's trace id. */
export const DEFAULT_TRACE_URL = "http://localhost:16686/trace/{traceId}";

export interface DashboardOptions {
  /** The Redis holding the event log, read models and queue. */
  redis: RedisClient;
  /** Event log key prefix (default "ts:"). */
  prefix?: string;
  /**
   * Where retention moved ended sessions: a session view finds them there, the sessions list shows the
   * most recent of them (the dashboard does not close it).
   */
  archive?: Archive | undefined;
  /** BullMQ prefix and queue name of the turn queue (defaults as the worker's). */
  queuePrefix?: string;
  /** BullMQ queue name (default "turns"). */
  queueName?: string;
  /** Address to bind (default 127.0.0.1). Any non-loopback address requires `token` or `operatorTokens`. */
  host?: string;
  /** Port (default 0: any free port). */
  port?: number;
  /**
   * Operator token: when set, the console asks for it once (/login) and keeps an HttpOnly cookie; decisions are
   * recorded as `operatorName`.
   */
  token?: string;
  /**
   * Operator name → token, for a console several people log in to: each one's decisions are recorded with their name.
   */
  operatorTokens?: Readonly<Record<string, string>>;
  /**
   * The key decisions, tenants' limits and rule revocations are signed with; without it the console shows but cannot
   * change them.
   */
  operatorKey?: OperatorKey;
  /** The fleet's trusted public keys, as `decide` takes them; tenants' limits and trust rules are checked with them. */
  trustedKeys?: OperatorKeyring;
  /** Who decisions are recorded as without a named login (default TURNSTREAM_USER, then USER, then the login name). */
  operatorName?: string;
  /** Scrubs everything sent to the browser (default: built-in patterns and this process's secret env values). */
  scrubber?: Scrubber;
  /** Trace UI link template with `{traceId}` (default Jaeger's on localhost:16686). */
  traceUrl?: string;
  /** Where the dashboard logs (pino-compatible); requests and tokens are never logged. */
  logger?: Logger;
}

export interface Dashboard {
  /** The console's address, e.g. http://127.0.0.1:7420/. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Stops listening, ends open streams, closes the queue handle. */
  close(): Promise<void>;
}

export class DashboardTokenRequiredError extends TurnstreamError {
  constructor(host: string) {
    super(
      `binding the dashboard to ${host} (not loopback) needs an operator token: set TURNSTREAM_DASHBOARD_TOKEN_FILE (or TURNSTREAM_DASHBOARD_TOKEN)`,
      { code: "dashboard_token_required" },
    );
  }
}

/** The logins: name → token (`token` belongs to the dashboard's operator), or undefined for none. */
function tokensOf(options: DashboardOptions, operatorName: string): Map<string, string> | undefined {
  const tokens = new Map(Object.entries(options.operatorTokens ?? {}).filter(([, t]) => t !== ""));
  if (options.token) tokens.set(operatorName, options.token);
  return tokens.size === 0 ? undefined : tokens;
}

async function route(ctx: Ctx, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://dashboard.invalid");
  const path = url.pathname;
  const method = req.method ?? "GET";
  if (method === "GET" && path.startsWith("/static/")) return page(ctx, res, path.slice("/static/".length));
  if (path === "/login") return method === "POST" ? loginRoute(ctx, req, res) : page(ctx, res, "login.html");
  if (!ctx.guard.authorized(req)) {
    if (path.startsWith("/api/")) return sendJson(res, 401, { error: "log in first" });
    res.writeHead(303, { Location: "/login" });
    return void res.end();
  }
  if (method === "POST" && path === "/api/decide") return decideRoute(ctx, req, res);
  if (method === "POST" && path === "/api/tenants/set") return setTenantRoute(ctx, req, res);
  if (method === "POST" && path === "/api/tenants/clear") return clearTenantRoute(ctx, req, res);
  if (method === "POST" && path === "/api/rules/revoke") return revokeRuleRoute(ctx, req, res);
  if (method !== "GET") return sendJson(res, 405, { error: "method not allowed" });
  if (path === "/" || path === "/index.html") return page(ctx, res, "index.html");
  if (path === "/api/fleet") return fleetStream(ctx, req, res);
  if (path === "/api/charts") return chartsRoute(ctx, res, url.searchParams);
  if (path === "/api/workers") return workersRoute(ctx, res);
  if (path === "/api/rules") return rulesRoute(ctx, res);
  if (path === "/api/search") return searchRoute(ctx, res, url.searchParams);
  const match = /^\/api\/sessions\/([^/]+)(\/stream|\/result|\/timeline)?$/.exec(path);
  if (match !== null) {
    const session = decodeURIComponent(match[1]!);
    if (!isValidSessionId(session)) return sendJson(res, 400, { error: "not a session id" });
    if (match[2] === "/stream") return sessionStream(ctx, req, res, session);
    if (match[2] === "/timeline") return timelineRoute(ctx, res, session);
    const seq = Number(url.searchParams.get(match[2] === "/result" ? "seq" : "until") ?? "");
    if (!Number.isSafeInteger(seq) || seq < 1) return sendJson(res, 400, { error: "expected a positive event number" });
    return match[2] === "/result" ? resultRoute(ctx, res, session, seq) : sessionAt(ctx, res, session, seq);
  }
  sendText(res, 404, "not found");
}

function handler(ctx: Ctx, logger: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    securityHeaders(res);
    if (!ctx.guard.hostAllowed(req)) return sendText(res, 421, "this dashboard answers only to a loopback host name");
    route(ctx, req, res).catch((err: unknown) => {
      if (!(err instanceof BodyTooLargeError))
        logger.warn({ err: ctx.deep((err as Error).message) }, "dashboard: request failed");
      if (!res.headersSent)
        sendJson(res, err instanceof BodyTooLargeError ? 413 : 500, {
          error: err instanceof BodyTooLargeError ? err.message : "internal error",
        });
      else res.end();
    });
  };
}

/** Starts the web console on `host:port` (loopback by default). */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const host = options.host ?? "127.0.0.1";
  const loopback = isLoopbackHost(host);
  const operator = options.operatorName ?? operatorName();
  const tokens = tokensOf(options, operator);
  if (!loopback && tokens === undefined) throw new DashboardTokenRequiredError(host);
  const logger = options.logger ?? silentLogger;
  const scrubber = options.scrubber ?? createScrubber({ env: process.env });
  const log = createEventLog({ redis: options.redis, prefix: options.prefix ?? DEFAULT_PREFIX });
  const queue = createTurnQueue({
    redis: options.redis,
    queuePrefix: options.queuePrefix,
    queueName: options.queueName,
  });
  const fleet = new Fleet({
    log,
    redis: options.redis,
    archive: options.archive,
    queue,
    trustedKeys: options.trustedKeys,
    logger,
  });
  const history = new SessionHistory(log, options.archive);
  const watched = new WatchedSessions(history, logger);
  const ctx: Ctx = {
    log,
    history,
    fleet,
    facts: new FleetFacts({ log, redis: options.redis, archive: options.archive, logger }),
    workers: new WorkersReader(log, queue),
    watched,
    guard: createGuard({ tokens, loopback, operator }),
    files: loadStaticFiles(),
    deep: (v) => scrubber.scrubDeep(v),
    operatorKey: options.operatorKey,
    trustedKeys: options.trustedKeys,
    traceUrl: options.traceUrl ?? DEFAULT_TRACE_URL,
  };
  const server = createServer(handler(ctx, logger));
  const addr = await listen(server, options.port ?? 0, host);
  const shown = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}/`,
    host: addr.address,
    port: addr.port,
    async close() {
      watched.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await fleet.stop();
      await closeTurnQueue(queue);
    },
  };
}
