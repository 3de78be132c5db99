// One request through the gateway: check the path and the run's token, read the body (bounded), ask
// the policy, then forward to the upstream with the worker's credential in place of the token and
// stream the answer back chunk by chunk as it arrives (no buffering; the upstream is paused while the
// CLI's socket is full). Headers pass both ways except hop-by-hop ones and credentials.
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import { request as httpsRequest } from "node:https";
import { BodyTooLargeError, readBodyBytes, waitUnlessAborted } from "../kernel/index.ts";
import { OAUTH_BETA } from "./credential.ts";
import { estimateCostUsd, requestBound, retryAfterMs, UsageTap, worstCaseCostUsd, type ModelCall } from "./calls.ts";
import type { GrantTable, RunGrant } from "./grants.ts";
import type { GatewayPolicy, PolicyCall } from "./policy.ts";

export interface ProxyLimits {
  maxRequestBytes: number;
  maxResponseBytes: number;
}

export interface ProxyContext {
  grants: GrantTable;
  policy: GatewayPolicy;
  limits: ProxyLimits;
  /** Reports what must not break a request (a policy's afterResponse, a sink that threw). */
  warn(message: string, err: unknown): void;
}

// The API paths a run may reach: what the CLI calls for its model work, nothing else of the API the
// worker's credential could open (files, batches, admin).
const FORWARDED_PATHS = /^\/v1\/(?:messages|messages\/count_tokens|models|models\/[A-Za-z0-9._:@-]{1,200})$/;

// Hop-by-hop (RFC 9110 §7.6.1) and what the gateway sets itself: never copied between the legs.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-authorization",
  "proxy-authenticate",
]);
const REQUEST_OWN = new Set(["host", "content-length", "x-api-key", "authorization", "accept-encoding", "expect"]);

/** An Anthropic-shaped error answer. */
export function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ type: "error", error: { type, message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** The run's token from `x-api-key` (ANTHROPIC_API_KEY) or `Authorization: Bearer` (ANTHROPIC_AUTH_TOKEN). */
export function presentedToken(headers: IncomingHttpHeaders): string | undefined {
  const key = headers["x-api-key"];
  if (typeof key === "string" && key !== "") return key;
  const auth = headers.authorization;
  if (typeof auth === "string" && auth.startsWith("Bearer ")) return auth.slice(7);
  return undefined;
}

/** The request's model, whether it asks to stream and the most it can cost, read from its body. */
function requestShape(
  path: string,
  body: Buffer,
): { model: string | undefined; stream: boolean; worstCaseUsd: number } {
  let parsed: { model?: unknown; stream?: unknown } | undefined;
  try {
    parsed = JSON.parse(body.toString("utf8")) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  const model = typeof parsed?.model === "string" ? parsed.model : undefined;
  // Only a Messages call is billed; counting tokens and listing models are free.
  const worstCaseUsd = path === "/v1/messages" ? worstCaseCostUsd(model, requestBound(body.length, parsed)) : 0;
  return { model, stream: parsed?.stream === true, worstCaseUsd };
}

/** Handles one request to the gateway. Never throws: a run's processes are attacker input. */
export async function handleRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    await handle(ctx, req, res);
  } catch (err) {
    ctx.warn("gateway request failed", err);
    if (!res.headersSent) sendError(res, 500, "api_error", "turnstream gateway: the request could not be handled");
    else res.destroy();
  }
}

async function handle(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url ?? "/", "http://gateway.invalid");
  } catch {
    req.resume();
    return sendError(res, 400, "invalid_request_error", "turnstream gateway: the request target is not a URL path");
  }
  if (url.pathname === "/api/hello" && (req.method === "HEAD" || req.method === "GET")) {
    // The CLI's connectivity check (with non-essential traffic on): answered here, nothing leaves.
    req.resume();
    return void res.writeHead(200, { "content-length": 0 }).end();
  }
  const grant = ctx.grants.find(presentedToken(req.headers));
  if (grant === undefined || grant.sink === undefined) {
    req.resume();
    return sendError(res, 401, "authentication_error", "turnstream gateway: missing, unknown or expired run token");
  }
  // Origin-form targets only (`/v1/…`): an absolute or `//host` target names no other upstream here.
  if (!/^\/(?!\/)/.test(req.url ?? "") || !FORWARDED_PATHS.test(url.pathname)) {
    req.resume();
    return sendError(
      res,
      404,
      "not_found_error",
      `turnstream gateway: ${url.pathname} is not forwarded (only the Messages, count-tokens and models endpoints are)`,
    );
  }
  const call = new CallRecord(req.method ?? "GET", url.pathname, grant);
  call.watchHangUp(res);
  let body: Buffer;
  try {
    body = await readBodyBytes(req, ctx.limits.maxRequestBytes);
  } catch (err) {
    req.resume();
    if (!(err instanceof BodyTooLargeError)) return void res.destroy();
    sendError(
      res,
      413,
      "request_too_large",
      `turnstream gateway: request body over ${ctx.limits.maxRequestBytes} bytes`,
    );
    return call.end(ctx, 413, "too_large");
  }
  Object.assign(call, requestShape(url.pathname, body));
  if (!(await admit(ctx, call, res))) return;
  // A client that left while a policy held its request gets nothing sent upstream (nothing to pay for).
  if (req.socket.destroyed) return call.end(ctx, 499, "aborted");
  await forward(ctx, call, req, res, body);
}

/** Asks the policy; false when it refused (the answer is sent) or the client left while it waited. */
async function admit(ctx: ProxyContext, call: CallRecord, res: ServerResponse): Promise<boolean> {
  let decision;
  try {
    decision = await ctx.policy.beforeRequest(call.policyCall());
  } catch (err) {
    ctx.warn("gateway policy beforeRequest threw; the request is refused", err);
    decision = {
      action: "refuse" as const,
      status: 500,
      type: "api_error",
      message: "turnstream gateway: the policy failed",
    };
  }
  // The client left while the policy held the request: nothing is sent, and nothing is answered.
  if (call.hungUp) {
    call.end(ctx, 499, "aborted");
    return false;
  }
  if (decision.action === "refuse") {
    const headers: Record<string, string> =
      decision.retryAfterS === undefined ? {} : { "retry-after": String(decision.retryAfterS) };
    sendError(res, decision.status, decision.type, decision.message, headers);
    call.retryAfterS = decision.retryAfterS;
    call.refusedFor = decision.code;
    call.end(ctx, decision.status, "policy");
    return false;
  }
  if (decision.action === "delay" && decision.ms > 0 && !(await waitUnlessAborted(decision.ms, call.signal))) {
    call.end(ctx, 499, "aborted");
    return false;
  }
  return true;
}

function upstreamUrl(base: URL, incoming: string): URL {
  const target = new URL(incoming, "http://gateway.invalid");
  const url = new URL(base.href);
  url.pathname = base.pathname.replace(/\/$/, "") + target.pathname;
  url.search = target.search;
  return url;
}

function upstreamHeaders(req: IncomingMessage, grant: RunGrant, bodyBytes: number): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || REQUEST_OWN.has(name)) continue;
    headers[name] = value;
  }
  const credential = grant.upstream.credential;
  Object.assign(headers, credential.headers());
  if (credential.kind === "oauth") {
    const betas = String(headers["anthropic-beta"] ?? "")
      .split(",")
      .map((b) => b.trim())
      .filter((b) => b !== "");
    if (!betas.includes(OAUTH_BETA)) headers["anthropic-beta"] = [...betas, OAUTH_BETA].join(",");
  }
  // Usage is read from the answer as it passes: it must come unencoded.
  headers["accept-encoding"] = "identity";
  headers["content-length"] = String(bodyBytes);
  return headers;
}

function responseHeaders(up: IncomingMessage): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(up.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === "x-api-key" || name === "set-cookie") continue;
    headers[name] = value;
  }
  return headers;
}

function forward(
  ctx: ProxyContext,
  call: CallRecord,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
): Promise<void> {
  const grant = call.grant;
  const target = upstreamUrl(grant.upstream.baseUrl, req.url ?? "/");
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const attempt = (retried: boolean): void => {
      const upstream = send(target, { method: req.method, headers: upstreamHeaders(req, grant, body.length) }, (up) => {
        pipeAnswer(ctx, call, up, res).then(resolve, resolve);
      });
      upstream.on("error", (err: NodeJS.ErrnoException) => {
        if (res.writableEnded || res.destroyed) return resolve();
        // A kept-alive connection the upstream closed as this request went out: Node's advice is one
        // retry on a new connection (nothing of the answer has reached the CLI).
        if (!retried && upstream.reusedSocket && err.code === "ECONNRESET" && !res.headersSent) return attempt(true);
        sendError(
          res,
          502,
          "api_error",
          `turnstream gateway: the upstream ${target.origin} could not be reached (${err.code ?? "error"})`,
        );
        call.end(ctx, 502, "upstream_unreachable");
        resolve();
      });
      // The CLI hung up (interrupted, killed): the upstream request goes too.
      res.once("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      upstream.end(body);
    };
    attempt(false);
  });
}

/** Streams the upstream's answer to the CLI as it comes, reading usage on the way; bounded. */
function pipeAnswer(ctx: ProxyContext, call: CallRecord, up: IncomingMessage, res: ServerResponse): Promise<void> {
  const status = up.statusCode ?? 502;
  call.readHeaders(up);
  try {
    ctx.policy.onUpstreamAnswer?.(call.policyCall(), { status, retryAfterMs: call.retryAfterMs });
  } catch (err) {
    ctx.warn("gateway policy onUpstreamAnswer threw", err);
  }
  res.writeHead(status, responseHeaders(up));
  res.flushHeaders();
  const tap = new UsageTap(up.headers["content-type"]);
  let bytes = 0;
  return new Promise((resolve) => {
    const finish = (answeredBy?: ModelCall["answeredBy"]): void => {
      call.usageFrom(tap);
      call.end(ctx, status, answeredBy);
      resolve();
    };
    up.on("data", (chunk: Buffer) => {
      call.firstByte();
      bytes += chunk.length;
      if (bytes > ctx.limits.maxResponseBytes) {
        up.destroy();
        res.destroy();
        return;
      }
      if (!res.write(chunk)) {
        up.pause();
        res.once("drain", () => up.resume());
      }
      tap.feed(chunk);
    });
    up.once("end", () => {
      res.end();
      finish();
    });
    up.once("close", () => {
      if (!up.complete) {
        res.destroy();
        finish(bytes > ctx.limits.maxResponseBytes ? "too_large" : "aborted");
      }
    });
  });
}

/** One call as it goes: timing from the request's arrival. */
class CallRecord {
  readonly grant: RunGrant;
  readonly method: string;
  readonly path: string;
  readonly #started = performance.now();
  readonly #startedAt = new Date().toISOString();
  readonly #run;
  model: string | undefined;
  stream = false;
  worstCaseUsd = 0;
  retryAfterS: number | undefined;
  refusedFor: string | undefined;
  readonly #id = randomUUID();
  /** The upstream answer's retry-after, in ms. */
  retryAfterMs: number | undefined;
  #ttfbMs: number | undefined;
  #requestId: string | undefined;
  #usage: ModelCall["usage"];
  #responseModel: string | undefined;
  #streamError: string | undefined;
  #ended = false;
  #policyCall: PolicyCall | undefined;
  readonly #hangUp = new AbortController();

  constructor(method: string, path: string, grant: RunGrant) {
    this.method = method;
    this.path = path;
    this.grant = grant;
    // The binding as it was when the request came: a warm process's next turn must not take this call.
    this.#run = grant.sink;
  }

  /** The client hanging up before its answer is done aborts the policy call's signal. */
  watchHangUp(res: ServerResponse): void {
    res.once("close", () => {
      if (!res.writableFinished) this.#hangUp.abort();
    });
  }

  get hungUp(): boolean {
    return this.#hangUp.signal.aborted;
  }

  get signal(): AbortSignal {
    return this.#hangUp.signal;
  }

  /** One object for every hook of this request (policies key what they reserved on it). */
  policyCall(): PolicyCall {
    return (this.#policyCall ??= {
      callId: this.#id,
      run: { ...this.#run!.binding },
      model: this.model,
      path: this.path,
      worstCaseUsd: this.worstCaseUsd,
      credentialFingerprint: this.grant.upstream.credential.fingerprint(),
      signal: this.#hangUp.signal,
    });
  }

  readHeaders(up: IncomingMessage): void {
    this.retryAfterMs = retryAfterMs(up.headers);
    if (this.retryAfterMs !== undefined) this.retryAfterS = this.retryAfterMs / 1000;
    const id = up.headers["request-id"];
    if (typeof id === "string") this.#requestId = id.slice(0, 200);
  }

  firstByte(): void {
    this.#ttfbMs ??= performance.now() - this.#started;
  }

  usageFrom(tap: UsageTap): void {
    const { usage, model } = tap.result();
    this.#usage = usage;
    this.#responseModel = model;
    this.#streamError = tap.streamError;
  }

  end(ctx: ProxyContext, status: number, answeredBy?: ModelCall["answeredBy"]): void {
    if (this.#ended) return;
    this.#ended = true;
    const model = this.model ?? this.#responseModel;
    const call: ModelCall = {
      callId: this.#id,
      startedAt: this.#startedAt,
      method: this.method,
      path: this.path,
      model,
      stream: this.stream,
      status,
      ttfbMs: this.#ttfbMs === undefined ? undefined : round(this.#ttfbMs),
      durationMs: round(performance.now() - this.#started),
      usage: this.#usage,
      costUsd: estimateCostUsd(this.#responseModel ?? model, this.#usage),
      retryAfterS: this.retryAfterS,
      requestId: this.#requestId,
      answeredBy,
      refusedFor: this.refusedFor,
      streamError: this.#streamError,
      credential: this.grant.upstream.credential.fingerprint(),
    };
    try {
      ctx.policy.afterResponse?.(this.policyCall(), call);
    } catch (err) {
      ctx.warn("gateway policy afterResponse threw", err);
    }
    try {
      this.#run?.onCall(call);
    } catch (err) {
      ctx.warn("gateway call sink threw", err);
    }
  }
}

const round = (ms: number): number => Math.round(ms * 100) / 100;
