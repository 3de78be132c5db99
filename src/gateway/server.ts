// The model gateway: a loopback HTTP server in the worker process that stands between each run's CLI
// and the model API. A run is started with ANTHROPIC_BASE_URL pointing here and a token of its own in
// place of a key (runEnv); the gateway swaps the token for the worker's credential and streams the
// answer back, recording each call for the run's log.
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { listen, silentLogger, type Logger } from "../kernel/index.ts";
import { GrantTable, type CallSink, type RunGrant, type Upstream } from "./grants.ts";
import { allowAll, type GatewayPolicy } from "./policy.ts";
import { handleRequest, type ProxyLimits } from "./proxy.ts";

export interface GatewayOptions {
  policy?: GatewayPolicy | undefined;
  /** Default 32 MiB: a larger request gets 413. */
  maxRequestBytes?: number | undefined;
  /** Default 256 MiB: an answer past it is cut off. */
  maxResponseBytes?: number | undefined;
  logger?: Logger | undefined;
}

export const GATEWAY_DEFAULTS = { maxRequestBytes: 32 * 1024 * 1024, maxResponseBytes: 256 * 1024 * 1024 } as const;

/** The variables that give a CLI its model access through the gateway. */
export interface GatewayRunEnv {
  ANTHROPIC_BASE_URL: string;
  ANTHROPIC_API_KEY: string;
}

export interface ModelGateway {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Tokens live now. */
  readonly liveTokens: number;
  /** A token for one run, bound to `sink` (its turn's log); revoke it when the run ends. */
  issue(upstream: Upstream, sink?: CallSink): RunGrant;
  /** The variables a CLI holding `grant` runs with. */
  runEnv(grant: RunGrant): GatewayRunEnv;
  /** Revokes every token and stops listening; open connections are ended. */
  close(): Promise<void>;
}

export async function startGateway(options: GatewayOptions = {}): Promise<ModelGateway> {
  const logger = options.logger ?? silentLogger;
  const grants = new GrantTable();
  const limits: ProxyLimits = {
    maxRequestBytes: options.maxRequestBytes ?? GATEWAY_DEFAULTS.maxRequestBytes,
    maxResponseBytes: options.maxResponseBytes ?? GATEWAY_DEFAULTS.maxResponseBytes,
  };
  const ctx = {
    grants,
    policy: options.policy ?? allowAll,
    limits,
    warn: (message: string, err: unknown) => logger.warn({ err: { message: (err as Error)?.message } }, message),
  };
  const server: Server = createServer((req, res) => void handleRequest(ctx, req, res));
  // Model answers stream for minutes: no idle cut-off of the gateway's own.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  // The CLI reuses its connection after a tool ran for a while; an idle close racing its next request
  // is a reset it reports as an API error (Node's default closes after 5 s).
  server.keepAliveTimeout = 120_000;
  const sockets = new Set<Socket>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  const address = await listen(server, 0, "127.0.0.1");
  const url = `http://127.0.0.1:${address.port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    get liveTokens() {
      return grants.size;
    },
    issue: (upstream, sink) => grants.issue(upstream, sink),
    runEnv: (grant) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: grant.token }),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        grants.revokeAll();
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      })),
  };
}
