// Who may use the dashboard and how state changes are protected.
// - Loopback binds need no login by default; any other bind needs an operator token (from the
//   environment or a file, never argv), exchanged once at /login for an HttpOnly SameSite=Strict
//   cookie, so the token never travels in a URL and the page never holds it.
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
  const h = host.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || (isIP(h) === 4 && h.startsWith("127."));
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
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
  readonly loginRequired: boolean;
  /** False for a Host header a loopback-bound dashboard must not answer (DNS rebinding). */
  hostAllowed(req: IncomingMessage): boolean;
  authorized(req: IncomingMessage): boolean;
  /** A Set-Cookie value for a correct token, else undefined. */
  login(token: string): string | undefined;
  /** Why a state-changing request is refused, or undefined when it may go ahead. */
  refuseChange(req: IncomingMessage): string | undefined;
}

export function createGuard(options: { token: string | undefined; loopback: boolean }): Guard {
  const csrf = randomBytes(24).toString("base64url");
  const sessions = new Set<string>();
  const { token, loopback } = options;
  const guard: Guard = {
    csrf,
    loginRequired: token !== undefined,
    hostAllowed(req) {
      if (!loopback) return true;
      const host = req.headers.host ?? "";
      const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0]!;
      return isLoopbackHost(name);
    },
    authorized(req) {
      if (token === undefined) return true;
      const c = cookieOf(req, COOKIE);
      return c !== undefined && sessions.has(c);
    },
    login(given) {
      if (token === undefined || !sameSecret(given, token)) return undefined;
      const id = randomBytes(24).toString("base64url");
      sessions.add(id);
      return `${COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/`;
    },
    refuseChange(req) {
      if (!guard.authorized(req)) return "not logged in";
      const site = req.headers["sec-fetch-site"];
      if (site !== undefined && site !== "same-origin") return "cross-site request";
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== `http://${req.headers.host}` && origin !== `https://${req.headers.host}`) return "cross-origin request";
      if (!String(req.headers["content-type"] ?? "").startsWith("application/json")) return "expected application/json";
      const sent = req.headers[CSRF_HEADER];
      if (typeof sent !== "string" || !sameSecret(sent, csrf)) return "missing or wrong CSRF token";
      return undefined;
    },
  };
  return guard;
}
