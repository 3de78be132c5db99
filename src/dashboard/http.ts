// Small HTTP helpers: the security headers every answer carries, JSON and text answers, bounded
// request bodies, and Server-Sent Events.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z as zod } from "zod";
import { readBody, sendJson } from "../kernel/index.ts";

export { BodyTooLargeError, readBody, sendJson } from "../kernel/index.ts";

/**
 * A JSON request body of at most `limit` bytes checked against `schema`; undefined after answering
 * 400 with `what` and what is wrong with it (zod's issues, or "not JSON").
 */
export async function jsonBody<T>(
  req: IncomingMessage,
  res: ServerResponse,
  schema: zod.ZodType<T>,
  what: string,
  limit: number,
): Promise<T | undefined> {
  try {
    return schema.parse(JSON.parse(await readBody(req, limit)));
  } catch (err) {
    const issues = err instanceof zod.ZodError ? err.issues.map((i) => `${i.path.join(".")}: ${i.message}`) : [];
    sendJson(res, 400, { error: `${what}: ${issues.join("; ").slice(0, 300) || "not JSON"}` });
    return undefined;
  }
}

/** Strict CSP: only this origin's files run; no inline script or style, no framing. */
export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export function securityHeaders(res: ServerResponse): void {
  res.setHeader("Content-Security-Policy", CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
  res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  type = "text/plain; charset=utf-8",
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(text), ...extra });
  res.end(text);
}

export interface EventStream {
  send(event: string, data: unknown): void;
  readonly closed: AbortSignal;
}

/**
 * Starts an SSE answer. `closed` aborts when the client goes away; a comment line every 15 s keeps
 * proxies from timing the stream out.
 */
export function eventStream(req: IncomingMessage, res: ServerResponse): EventStream {
  const ac = new AbortController();
  res.writeHead(200, {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    Connection: "keep-alive",
    "X-Accel-Buffering": "no",
  });
  res.flushHeaders();
  res.socket?.setNoDelay(true);
  const ping = setInterval(() => res.write(": ping\n\n"), 15_000);
  const close = (): void => {
    clearInterval(ping);
    ac.abort();
  };
  req.once("close", close);
  res.once("close", close);
  return {
    closed: ac.signal,
    send(event, data) {
      if (ac.signal.aborted) return;
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
  };
}
