// Who may use the dashboard and how state changes are protected.
// - Loopback binds need no login by default; any other bind needs operator tokens (from the
//   environment or a file, never argv), exchanged once at /login for an HttpOnly SameSite=Strict
//   cookie, so a token never travels in a URL and the page never holds it. Each token names its
//   operator: decisions made in that login are recorded with that name.
// - Every state-changing request needs, besides the login when there is one, a per-process CSRF
//   token the page receives in its HTML (a meta tag, not script), sent back in a header; and its
//   Origin / Sec-Fetch-Site must be this dashboard. A cross-site form or fetch has neither.
// - On loopback the Host header must name loopback too, so a DNS-rebinding page cannot read it.
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";

export const CSRF_HEADER = "x-turnstream-csrf";
const COOKIE = "ts_dash";

export function isLoopbackHost(host: string): boolean {
  const bareHost = host.replace(/^\[|\]$/g, "");
  return bareHost === "localhost" || bareHost === "::1" || (isIP(bareHost) === 4 && bareHost.startsWith("127."));
}

function sameSecret(left: string, right: string): boolean {
  const leftBytes = Buffer.from(left);
  const rightBytes = Buffer.from(right);
  return leftBytes.length === rightBytes.length && timingSafeEqual(leftBytes, rightBytes);
}

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

export interface Guard {
  /** The per-process CSRF token, placed in the page's HTML. */
  readonly csrf: string;
  /** False for a Host header a loopback-bound dashboard must not answer (DNS rebinding). */
  hostAllowed(req: IncomingMessage): boolean;
  authorized(req: IncomingMessage): boolean;
  /** Who is asking: the operator their login's token names, or the dashboard's own operator without logins. */
  operatorOf(req: IncomingMessage): string;
  /** A Set-Cookie value for a correct token, else undefined. */
  login(token: string): string | undefined;
  /** Why a state-changing request is refused, or undefined when it may go ahead. */
  refuseChange(req: IncomingMessage): string | undefined;
}

export interface GuardOptions {
  /** Operator name → token; none: no login (loopback only). */
  tokens: ReadonlyMap<string, string> | undefined;
  loopback: boolean;
  /** Who decides when there are no logins. */
  operator: string;
}

function hostAllowed(loopback: boolean, req: IncomingMessage): boolean {
  if (!loopback) return true;
  const host = req.headers.host ?? "";
  const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0]!;
  return isLoopbackHost(name);
}

function refuseChange(guard: Guard, req: IncomingMessage): string | undefined {
  if (!guard.authorized(req)) return "not logged in";
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin") return "cross-site request";
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${req.headers.host}` && origin !== `https://${req.headers.host}`)
    return "cross-origin request";
  if (!String(req.headers["content-type"] ?? "").startsWith("application/json")) return "expected application/json";
  const sent = req.headers[CSRF_HEADER];
  if (typeof sent !== "string" || !sameSecret(sent, guard.csrf)) return "missing or wrong CSRF token";
  return undefined;
}

export function createGuard(options: GuardOptions): Guard {
  const csrf = randomBytes(24).toString("base64url");
  /** Login cookie value → the operator it belongs to. */
  const logins = new Map<string, string>();
  const { tokens, loopback, operator } = options;
  const loginOf = (req: IncomingMessage): string | undefined => {
    const cookie = cookieOf(req, COOKIE);
    return cookie === undefined ? undefined : logins.get(cookie);
  };
  const guard: Guard = {
    csrf,
    hostAllowed: (req) => hostAllowed(loopback, req),
    authorized: (req) => tokens === undefined || loginOf(req) !== undefined,
    operatorOf: (req) => (tokens === undefined ? operator : (loginOf(req) ?? "unknown")),
    login(given) {
      // Every token is compared, so the time taken says nothing about which one nearly matched.
      let name: string | undefined;
      for (const [who, token] of tokens ?? []) if (sameSecret(given, token)) name ??= who;
      if (name === undefined) return undefined;
      const id = randomBytes(24).toString("base64url");
      logins.set(id, name);
      return `${COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/`;
    },
    refuseChange: (req) => refuseChange(guard, req),
  };
  return guard;
}

/**
 * Operator tokens from a token file's text: one token per line, or `name token` to give the operator
 * a name of their own (a bare token belongs to `fallbackName`); `#` starts a comment.
 */
export function parseTokens(text: string, fallbackName: string): Map<string, string> {
  const tokens = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") continue;
    const parts = line.split(/\s+/);
    if (parts.length > 2) throw new Error("a dashboard token line is `token` or `name token`");
    const [name, token] = parts.length === 2 ? [parts[0]!, parts[1]!] : [fallbackName, parts[0]!];
    if (token.length < 16) throw new Error(`the dashboard token of ${name} is shorter than 16 characters`);
    tokens.set(name, token);
  }
  return tokens;
}
