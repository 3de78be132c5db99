// Helpers for the project's small HTTP servers (the ops endpoint, the dashboard, the decision hub):
// a JSON answer never cached and its length known, so a probe or a page reads it whole; a request
// body read up to a bound; and listening that fails with the listen error, a port already taken said
// as such (PortInUseError), so each command can name the flag or variable that moves it.
import { TurnstreamError } from "./errors.ts";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** Writes `body` as the whole JSON response with `status`. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Cache-Control": "no-store",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}

/** A request body went over the reader's limit. */
export class BodyTooLargeError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "body_too_large" });
  }
}

/**
 * The request body; fails with BodyTooLargeError past `limit` bytes, at once when its Content-Length
 * says so (the request is then destroyed by the caller).
 */
export async function readBodyBytes(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (Number(req.headers["content-length"] ?? "0") > limit)
    throw new BodyTooLargeError(`request body over ${limit} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLargeError(`request body over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The request body as UTF-8 text (readBodyBytes). */
export async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return (await readBodyBytes(req, limit)).toString("utf8");
}

/** Another process listens on the port a server was to listen on (EADDRINUSE). */
export class PortInUseError extends TurnstreamError {
  readonly host: string;
  readonly port: number;
  constructor(host: string, port: number, cause: unknown) {
    super(`port ${port} on ${host} is already in use`, { code: "EADDRINUSE", cause });
    this.host = host;
    this.port = port;
  }
}

/**
 * Starts `server` on `host:port` and resolves with its address once it listens; fails with the listen
 * error, a port in use as a PortInUseError.
 */
export function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const fail = (err: NodeJS.ErrnoException): void =>
      reject(err.code === "EADDRINUSE" ? new PortInUseError(host, port, err) : err);
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Fails as listening on `host:port` would (PortInUseError when taken) without keeping it: for a
 * process that must not start anything else when its port cannot be had. Port 0 is always free.
 */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listen(probe, port, host);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
