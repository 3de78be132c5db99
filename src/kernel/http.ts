// A JSON answer for the project's small HTTP servers (the ops endpoint, the dashboard): never cached,
// its length known, so a probe or a page reads it whole.
import type { ServerResponse } from "node:http";

/** Writes `body` as the whole JSON response with `status`. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
