// The scripted model server: a loopback HTTP server speaking enough of the Anthropic Messages API for
// the real `claude` binary, answering from a script so CLI runs are offline and deterministic.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { toolResultText } from "../protocol/index.ts";
import { toolResultDigest } from "./normalise.ts";
import { parseScript, type ContentResponse, type Script, type ScriptExpect, type ScriptResponse } from "./script.ts";
import {
  blockEventGroups,
  formatSse,
  jsonMessage,
  messageEnd,
  messageStart,
  stopReasonOf,
  usageOf,
  withToolIds,
  type SseEvent,
} from "./sse.ts";

/** Headers worth seeing in a recorded request; credentials are never recorded. */
const RECORDED_HEADERS = ["anthropic-version", "anthropic-beta", "user-agent", "x-app", "content-type"];

export interface RecordedRequest {
  at: string;
  /** `messages` (answered from the script), `side` (recognised side request, answered without touching
   * the script), `count_tokens`, or `other` (an endpoint the server does not know; answered 404). */
  kind: "messages" | "side" | "count_tokens" | "other";
  method: string;
  path: string;
  model: string | undefined;
  stream: boolean;
  system: unknown;
  messages: unknown[];
  tools: string[];
  headers: Record<string, string>;
  /** Text of the last user message (text blocks and tool results), what `match` is tested against. */
  lastUserText: string;
  /** Which script response answered (index into `responses`), or null for the default `done` reply. */
  responseIndex: number | null;
  /**
   * Why the request got a scripted error instead: it asked what the script cannot answer (see `expect`, `exhausted`).
   */
  diverged?: string;
}

export interface ModelServer {
  url: string;
  requests(): RecordedRequest[];
  /** How many script responses are still unconsumed. */
  remaining(): number;
  close(): Promise<void>;
}

export interface ModelServerOptions {
  /** The responses to give, in order (validated: see src/testing/README.md). */
  script: Script | unknown;
  /** Port to listen on (default any free one). */
  port?: number | undefined;
  /** Address to listen on (default 127.0.0.1). */
  host?: string | undefined;
  /**
   * Which Messages requests are side requests (the CLI's own housekeeping, e.g. a title or summary
   * asked of a small model): they get `sideReply` and never consume the script, so a script stays
   * deterministic whatever housekeeping a CLI version adds. Default: `isSideRequest`. `false` sends
   * every request through the script.
   */
  sideRequest?: ((request: RecordedRequest) => boolean) | false | undefined;
  /** Text answered to side requests (default `Scripted session`). */
  sideReply?: string | undefined;
  /**
   * The one credential accepted (as `x-api-key` or `Authorization: Bearer`): any other request gets
   * 401 `authentication_error`, like the real API. Default: any credential, or none.
   */
  credential?: string | undefined;
}

/**
 * The default side-request rule: a request that offers no tools to a small (haiku) model. The main
 * loop and every subagent always offer tools, so this never catches a turn a script is meant to answer.
 */
export function isSideRequest(request: RecordedRequest): boolean {
  return request.tools.length === 0 && /haiku/i.test(request.model ?? "");
}

const DEFAULT_REPLY: ContentResponse = { content: [{ type: "text", text: "done" }] };

function pickHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const header of RECORDED_HEADERS) {
    const value = req.headers[header];
    if (typeof value === "string") headers[header] = value;
  }
  return headers;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((b: { type?: string; text?: unknown; content?: unknown }) =>
      b?.type === "text" && typeof b.text === "string" ? b.text : b?.type === "tool_result" ? textOf(b.content) : "",
    )
    .join("\n");
}

/**
 * The text of the last user message of a Messages request (text blocks and tool results joined): what `match` rules
 * see.
 */
export function lastUserText(messages: unknown[]): string {
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index] as { role?: string; content?: unknown } | undefined;
    if (message?.role === "user") return textOf(message.content);
  }
  return "";
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The script's responses, each given once: the first unconsumed one whose `match` (if any) the request satisfies;
 * others wait their turn.
 */
class ScriptQueue {
  readonly #responses: readonly ScriptResponse[];
  readonly #consumed: boolean[];
  /** When a response with `forMs` first answered (performance.now()). */
  readonly #firstTaken: (number | undefined)[];

  constructor(responses: readonly ScriptResponse[]) {
    this.#responses = responses;
    this.#consumed = new Array<boolean>(responses.length).fill(false);
    this.#firstTaken = new Array<number | undefined>(responses.length).fill(undefined);
  }

  take(userText: string): number | null {
    for (let index = 0; index < this.#responses.length; index++) {
      if (this.#consumed[index]) continue;
      const response = this.#responses[index]!;
      if (response.match !== undefined && !userText.includes(response.match)) continue;
      if ("forMs" in response && response.forMs !== undefined) {
        // A window, not a count: answers until forMs after its first answer, then is used up.
        const first = (this.#firstTaken[index] ??= performance.now());
        if (performance.now() - first < response.forMs) return index;
        this.#consumed[index] = true;
        continue;
      }
      this.#consumed[index] = true;
      return index;
    }
    return null;
  }

  response(index: number): ScriptResponse {
    return this.#responses[index]!;
  }

  remaining(): number {
    return this.#consumed.filter((c) => !c).length;
  }

  get length(): number {
    return this.#responses.length;
  }
}

/** What the server needs to answer a request. */
interface Answerer {
  queue: ScriptQueue;
  recorded: RecordedRequest[];
  isSide: (request: RecordedRequest) => boolean;
  sideReply: ContentResponse;
  exhausted: "done" | "error";
  cwd: string | undefined;
  credential: string | undefined;
}

/** Whether the request carries the server's credential (when it requires one). */
function authorised(answerer: Answerer, req: IncomingMessage): boolean {
  if (answerer.credential === undefined) return true;
  return (
    req.headers["x-api-key"] === answerer.credential || req.headers.authorization === `Bearer ${answerer.credential}`
  );
}

/** A request as recorded, before it is known which kind it is. */
function recordOf(req: IncomingMessage, url: URL, parsed: Record<string, any> | undefined): RecordedRequest {
  const messages = Array.isArray(parsed?.messages) ? (parsed.messages as unknown[]) : [];
  return {
    at: new Date().toISOString(),
    kind: "other",
    method: req.method ?? "GET",
    path: url.pathname + url.search,
    model: typeof parsed?.model === "string" ? parsed.model : undefined,
    stream: parsed?.stream === true,
    system: parsed?.system,
    messages,
    tools: Array.isArray(parsed?.tools) ? parsed.tools.map((t: { name?: unknown }) => String(t?.name)) : [],
    headers: pickHeaders(req),
    lastUserText: lastUserText(messages),
    responseIndex: null,
  };
}

/** A Messages request's answer: the side reply, the script's next response, or the default `done`. */
function pickResponse(answerer: Answerer, entry: RecordedRequest): ScriptResponse {
  if (answerer.isSide(entry)) {
    entry.kind = "side";
    return answerer.sideReply;
  }
  entry.kind = "messages";
  entry.responseIndex = answerer.queue.take(entry.lastUserText);
  if (entry.responseIndex === null) {
    if (answerer.exhausted === "done") return DEFAULT_REPLY;
    return divergence(
      entry,
      `request ${messagesCount(answerer)}: more requests than the ${answerer.queue.length} response(s) the script holds`,
    );
  }
  const response = answerer.queue.response(entry.responseIndex);
  const differs =
    response.expect === undefined ? undefined : unexpectedToolResult(response.expect, entry.messages, answerer.cwd);
  if (differs === undefined) return response;
  return divergence(entry, `request ${messagesCount(answerer)} (for response ${entry.responseIndex + 1}): ${differs}`);
}

const messagesCount = (a: Answerer): number => a.recorded.filter((r) => r.kind === "messages").length;

/** The scripted error that answers a request the script cannot answer; the CLI does not retry a 400. */
function divergence(entry: RecordedRequest, reason: string): ScriptResponse {
  entry.diverged = reason;
  return {
    error: { status: 400, type: "invalid_request_error", message: `the run parted from the script: ${reason}` },
  };
}

/** What is wrong with the last user message's tool results against `expect`, or undefined when they match. */
function unexpectedToolResult(expect: ScriptExpect, messages: unknown[], cwd: string | undefined): string | undefined {
  const last = [...messages].reverse().find((m) => (m as { role?: unknown })?.role === "user") as
    { content?: unknown } | undefined;
  const blocks = Array.isArray(last?.content) ? (last.content as Array<Record<string, unknown>>) : [];
  const results = new Map(
    blocks.filter((b) => b?.["type"] === "tool_result").map((b) => [String(b["tool_use_id"]), b]),
  );
  for (const want of expect.toolResults) {
    const named = `the result of tool call ${want.toolUseId}${want.name === undefined ? "" : ` (${want.name})`}`;
    const got = results.get(want.toolUseId);
    if (got === undefined) return `${named} is missing`;
    if ((got["is_error"] === true) !== want.isError)
      return `${named} ${want.isError ? "succeeded where the recording's failed" : "failed where the recording's succeeded"}`;
    if (toolResultDigest(toolResultText(got["content"]), cwd) !== want.sha256)
      return `${named} differs from the recording's`;
  }
  return undefined;
}

async function handle(answerer: Answerer, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const body = await readBody(req);
  if (req.method === "GET" && url.pathname === "/_requests") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answerer.recorded));
    return;
  }
  const parsed = parseJson(body);
  const entry = recordOf(req, url, parsed);
  answerer.recorded.push(entry);
  if (!authorised(answerer, req)) {
    sendError(res, 401, "authentication_error", "invalid x-api-key");
    return;
  }
  if (req.method === "POST" && url.pathname === "/v1/messages/count_tokens") {
    entry.kind = "count_tokens";
    const tokens = Math.ceil(JSON.stringify(entry.messages).length / 4);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ input_tokens: tokens }));
    return;
  }
  if (req.method === "HEAD" && (url.pathname === "/" || url.pathname === "/v1/messages")) {
    // Connectivity probes: the host answers, nothing else to say.
    res.writeHead(200).end();
    return;
  }
  if (req.method !== "POST" || url.pathname !== "/v1/messages") {
    sendError(res, 404, "not_found_error", `the model server does not serve ${req.method} ${url.pathname}`);
    return;
  }
  if (parsed === undefined || !Array.isArray(parsed.messages)) {
    entry.kind = "messages";
    sendError(res, 400, "invalid_request_error", "messages: expected an array");
    return;
  }
  await respond(res, pickResponse(answerer, entry), entry.model ?? "claude-scripted", entry.stream);
}

/**
 * Starts the scripted Messages API double on loopback: answers each turn's requests from the script in order, records
 * every request.
 */
export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  const script = parseScript(options.script);
  const answerer: Answerer = {
    queue: new ScriptQueue(script.responses),
    recorded: [],
    isSide: options.sideRequest === false ? () => false : (options.sideRequest ?? isSideRequest),
    sideReply: { content: [{ type: "text", text: options.sideReply ?? "Scripted session" }] },
    exhausted: script.exhausted ?? "done",
    cwd: script.cwd,
    credential: options.credential,
  };
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    handle(answerer, req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, "api_error", err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });
  // The CLI reuses its connection after a tool has run for seconds. Node closes idle keep-alive
  // connections after 5 s by default, and a close racing the CLI's next request is a connection reset
  // the CLI then reports as an API error; a real API keeps them open far longer.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    requests: () => answerer.recorded.slice(),
    remaining: () => answerer.queue.remaining(),
    close: async () => {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function respond(res: ServerResponse, response: ScriptResponse, model: string, stream: boolean): Promise<void> {
  if ("hang" in response) {
    // Headers go out, then nothing: the client sees a stalled stream until it gives up.
    res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
    res.flushHeaders();
    await new Promise<void>((resolve) => res.once("close", resolve));
    return;
  }
  if ("error" in response) {
    if (response.delayMs) await sleep(response.delayMs);
    sendError(res, response.error.status, response.error.type, response.error.message, response.error.headers);
    return;
  }
  if ("streamError" in response) {
    const blocks = withToolIds(response.content ?? []);
    const groups = blockEventGroups(blocks).slice(0, response.afterBlocks ?? 0);
    const events: SseEvent[] = [messageStart(model, usageOf(undefined)), ...groups.flat()];
    events.push({
      event: "error",
      data: { type: "error", error: { type: response.streamError.type, message: response.streamError.message } },
    });
    await writeSse(res, events, 0);
    return;
  }
  if (response.delayMs) await sleep(response.delayMs);
  const blocks = withToolIds(response.content);
  const usage = usageOf(response.usage);
  const stopReason = stopReasonOf(response, blocks);
  if (!stream) {
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(jsonMessage(model, blocks, stopReason, usage)));
    return;
  }
  const events = [messageStart(model, usage), ...blockEventGroups(blocks).flat(), ...messageEnd(stopReason, usage)];
  await writeSse(res, events, response.chunkDelayMs ?? 0);
}

async function writeSse(res: ServerResponse, events: SseEvent[], chunkDelayMs: number): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  if (chunkDelayMs === 0) {
    res.end(events.map(formatSse).join(""));
    return;
  }
  for (const event of events) {
    if (res.destroyed) return;
    res.write(formatSse(event));
    await sleep(chunkDelayMs);
  }
  res.end();
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  res
    .writeHead(status, { "content-type": "application/json", ...headers })
    .end(JSON.stringify({ type: "error", error: { type, message } }));
}

// The CLI can gzip request bodies (CLAUDE_CODE_GZIP_REQUEST_BODIES), so honour content-encoding.
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const raw = Buffer.concat(chunks);
        const encoding = String(req.headers["content-encoding"] ?? "").toLowerCase();
        const decoded =
          encoding === "gzip"
            ? gunzipSync(raw)
            : encoding === "deflate"
              ? inflateSync(raw)
              : encoding === "br"
                ? brotliDecompressSync(raw)
                : raw;
        resolve(decoded.toString("utf8"));
      } catch (err) {
        reject(err);
      }
    });
    req.on("error", reject);
  });
}

function parseJson(text: string): Record<string, any> | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, any>)
      : undefined;
  } catch {
    return undefined;
  }
}
