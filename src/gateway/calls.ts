// What the gateway learns of one model call: from the request (path, model, stream), the answer's
// headers (status, request id, retry-after) and the answer's own usage, read from the SSE events
// `message_start` and `message_delta` as they pass (never holding the stream back) or from a JSON
// answer's `usage`.

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface ModelCall {
  /** The gateway's own id of the call: what a tenant's spend is counted once by. */
  callId: string;
  /** ISO time the request reached the gateway. */
  startedAt: string;
  method: string;
  /** The path without its query. */
  path: string;
  /** The request's model (else the answer's). */
  model?: string | undefined;
  stream: boolean;
  /** The HTTP status the CLI got (the gateway's own for a refusal or an unreachable upstream). */
  status: number;
  /** Request arrival to the answer's first body byte. */
  ttfbMs?: number | undefined;
  /** Request arrival to the answer's end. */
  durationMs: number;
  usage?: Usage | undefined;
  /** Estimated from usage and the price table (see estimateCostUsd). */
  costUsd?: number | undefined;
  /** The answer's `retry-after`, in seconds. */
  retryAfterS?: number | undefined;
  /** The upstream's `request-id`. */
  requestId?: string | undefined;
  /**
   * Set when the gateway answered itself: `policy`, `upstream` (unreachable), `too_large`, `aborted` (the CLI hung up).
   */
  answeredBy?: "policy" | "upstream_unreachable" | "too_large" | "aborted" | undefined;
  /** Why a policy refused the call (its `code`, e.g. `tenant_budget`), when one did. */
  refusedFor?: string | undefined;
  /**
   * The type of an `error` event the upstream sent inside a streamed answer (`overloaded_error`, …):
   * the call failed though its status says 200. `other_error` when the event names no plain type.
   */
  streamError?: string | undefined;
  /** The credential's fingerprint. */
  credential: string;
}

type HeaderValue = string | string[] | undefined;

const firstOf = (value: HeaderValue): string | undefined => (Array.isArray(value) ? value[0] : value);
const DECIMAL = /^\s*\d+(?:\.\d+)?\s*$/;

/**
 * How long an answer asks the client to wait, in ms: its `retry-after-ms`, else its `retry-after` as
 * seconds or as an HTTP date (RFC 9110 §10.2.3; a date in the past is 0). Undefined when it names no
 * wait, or one that is not a number of seconds or a date.
 */
export function retryAfterMs(headers: Readonly<Record<string, HeaderValue>>, now = Date.now()): number | undefined {
  const ms = firstOf(headers["retry-after-ms"]);
  if (ms !== undefined && DECIMAL.test(ms)) return Number(ms);
  const value = firstOf(headers["retry-after"]);
  if (value === undefined) return undefined;
  if (DECIMAL.test(value)) return Number(value) * 1000;
  // Only a date with a zone (an IMF-fixdate ends "GMT"): a bare date would be read in local time.
  if (!/\b(?:GMT|UTC|[+-]\d{4})\s*$/.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

const USAGE_KEYS = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"] as const;

/** Lays the numeric usage fields of `from` over `into` (a message_delta's usage is cumulative). */
function mergeUsage(into: Partial<Usage>, from: unknown): void {
  if (typeof from !== "object" || from === null) return;
  for (const key of USAGE_KEYS) {
    const value = (from as Record<string, unknown>)[key];
    if (typeof value === "number" && Number.isFinite(value)) into[key] = value;
  }
}

const complete = (usage: Partial<Usage>): Usage => ({
  input_tokens: usage.input_tokens ?? 0,
  output_tokens: usage.output_tokens ?? 0,
  cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
  cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
});

// A JSON answer is parsed for its usage only up to this size; a larger one passes unread.
const MAX_JSON_READ = 8 * 1024 * 1024;
// An SSE line this long is no message_start or message_delta: it is skipped, not held.
const MAX_SSE_LINE = 1024 * 1024;
// An error event's type as the API spells them; anything else the upstream sends is `other_error`.
const ERROR_TYPE = /^[a-z][a-z_]{0,63}$/;

/** Reads usage and the model from an answer's body as its chunks pass, without holding any back. */
export class UsageTap {
  readonly #sse: boolean;
  #usage: Partial<Usage> | undefined;
  #model: string | undefined;
  #streamError: string | undefined;
  #partial = "";
  #skipping = false;
  #json: Buffer[] = [];
  #jsonBytes = 0;

  constructor(contentType: string | undefined) {
    this.#sse = (contentType ?? "").includes("text/event-stream");
  }

  feed(chunk: Buffer): void {
    if (this.#sse) return this.#feedSse(chunk.toString("utf8"));
    this.#jsonBytes += chunk.length;
    if (this.#jsonBytes <= MAX_JSON_READ) this.#json.push(chunk);
  }

  #feedSse(text: string): void {
    let start = 0;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
      const line = this.#partial + text.slice(start, nl);
      this.#partial = "";
      if (!this.#skipping) this.#sseLine(line);
      this.#skipping = false;
      start = nl + 1;
    }
    if (this.#skipping) return;
    this.#partial += text.slice(start);
    if (this.#partial.length > MAX_SSE_LINE) {
      this.#partial = "";
      this.#skipping = true;
    }
  }

  #sseLine(line: string): void {
    // Only the two small events that carry usage, and an error event, are parsed; content deltas are
    // never touched.
    if (!line.startsWith('data: {"type":"message_') && !line.startsWith('data: {"type":"error"')) return;
    let event: {
      type?: unknown;
      message?: { model?: unknown; usage?: unknown };
      usage?: unknown;
      error?: { type?: unknown };
    };
    try {
      event = JSON.parse(line.slice(6)) as typeof event;
    } catch {
      return;
    }
    if (event.type === "error") {
      const type = event.error?.type;
      this.#streamError = typeof type === "string" && ERROR_TYPE.test(type) ? type : "other_error";
    } else if (event.type === "message_start") {
      this.#usage = {};
      mergeUsage(this.#usage, event.message?.usage);
      if (typeof event.message?.model === "string") this.#model = event.message.model;
    } else if (event.type === "message_delta") {
      mergeUsage((this.#usage ??= {}), event.usage);
    }
  }

  /** The answer's usage and model once its body has ended. */
  result(): { usage: Usage | undefined; model: string | undefined } {
    if (!this.#sse && this.#jsonBytes > 0 && this.#jsonBytes <= MAX_JSON_READ) this.#readJson();
    return { usage: this.#usage === undefined ? undefined : complete(this.#usage), model: this.#model };
  }

  /** The type of the error event a streamed answer carried, if it carried one. */
  get streamError(): string | undefined {
    return this.#streamError;
  }

  #readJson(): void {
    try {
      const body = JSON.parse(Buffer.concat(this.#json).toString("utf8")) as {
        type?: unknown;
        model?: unknown;
        usage?: unknown;
      };
      this.#json = [];
      if (body.type !== "message" || typeof body.usage !== "object") return;
      this.#usage = {};
      mergeUsage(this.#usage, body.usage);
      if (typeof body.model === "string") this.#model = body.model;
    } catch {
      // Not JSON: no usage to read.
    }
  }
}

/** USD per million tokens: input, output. Cache writes cost 1.25× input (5-minute TTL), cache reads 0.1×. */
interface Price {
  input: number;
  output: number;
}

// By model family, newest names first; an estimate: the API's invoice is the truth.
const PRICES: ReadonlyArray<[RegExp, Price]> = [
  // The pinned CLI's own list price for claude-opus-5-5 (its result lines' costUSD).
  [/opus-[5-9]/, { input: 4, output: 20 }],
  [/opus-4-[5-9]/, { input: 5, output: 25 }],
  [/opus/, { input: 15, output: 75 }],
  [/sonnet/, { input: 3, output: 15 }],
  [/haiku-4|haiku-[5-9]/, { input: 1, output: 5 }],
  [/3-5-haiku|haiku-3-5/, { input: 0.8, output: 4 }],
  [/haiku/, { input: 0.25, output: 1.25 }],
];

const priceOf = (model: string | undefined): Price | undefined =>
  model === undefined ? undefined : PRICES.find(([pattern]) => pattern.test(model))?.[1];

/** The dearest rates in the table: a model it does not know is priced at them where a cost must not be understated. */
const DEAREST: Price = {
  input: Math.max(...PRICES.map(([, price]) => price.input)),
  output: Math.max(...PRICES.map(([, price]) => price.output)),
};

const perToken = (usd: number): number => usd / 1_000_000;

function costAt(price: Price, usage: Usage): number {
  return (
    usage.input_tokens * perToken(price.input) +
    usage.cache_creation_input_tokens * perToken(price.input * 1.25) +
    usage.cache_read_input_tokens * perToken(price.input * 0.1) +
    usage.output_tokens * perToken(price.output)
  );
}

/** The call's cost in USD by the price table, or undefined for a model it does not know. */
export function estimateCostUsd(model: string | undefined, usage: Usage | undefined): number | undefined {
  const price = priceOf(model);
  if (price === undefined || usage === undefined) return undefined;
  return costAt(price, usage);
}

/** The call's cost at its model's price, or at the table's dearest rates for a model it does not know. */
export function costAtMostUsd(model: string | undefined, usage: Usage): number {
  return costAt(priceOf(model) ?? DEAREST, usage);
}

/** What a Messages request can take in and give out at most, read from its body (see requestBound). */
export interface RequestBound {
  inputTokens: number;
  outputTokens: number;
}

// A token is at least one byte of the text it stands for, so a body's bytes bound the tokens of its
// text, tool definitions included. What its bytes do not bound is counted at the most it can be: an
// image (the API scales one to about 1,600 tokens; newer models take larger ones), a document (a PDF's
// pages are rendered as text and images), a server tool (web search or fetch pulls pages in), and the
// API's own system text for tools. A body that is not readable JSON (a compressed one) may hold a
// whole context window.
const IMAGE_TOKENS = 5_000;
const DOCUMENT_TOKENS = 500_000;
const SERVER_TOOL_TOKENS = 200_000;
const SYSTEM_TOKENS = 4_096;
const CONTEXT_TOKENS = 1_000_000;
/** Output of a request naming no usable max_tokens (the API refuses it): the most any model gives. */
const MAX_OUTPUT_TOKENS = 128_000;

/** The most a Messages request's body can cost in tokens (`parsed`: the body as JSON, undefined when it is not). */
export function requestBound(bytes: number, parsed: unknown): RequestBound {
  if (typeof parsed !== "object" || parsed === null)
    return { inputTokens: CONTEXT_TOKENS + SYSTEM_TOKENS, outputTokens: MAX_OUTPUT_TOKENS };
  const body = parsed as { max_tokens?: unknown; tools?: unknown };
  const maxTokens = body.max_tokens;
  const outputTokens =
    typeof maxTokens === "number" && Number.isFinite(maxTokens) && maxTokens >= 0 ? maxTokens : MAX_OUTPUT_TOKENS;
  const serverTools = Array.isArray(body.tools)
    ? body.tools.filter((tool: { type?: unknown }) => typeof tool?.type === "string" && tool.type !== "custom").length
    : 0;
  const { images, documents } = mediaBlocks(parsed);
  const inputTokens =
    bytes + images * IMAGE_TOKENS + documents * DOCUMENT_TOKENS + serverTools * SERVER_TOOL_TOKENS + SYSTEM_TOKENS;
  return { inputTokens, outputTokens };
}

/** Image and document blocks anywhere in a parsed body (walked without recursion: nesting is the client's). */
function mediaBlocks(parsed: object): { images: number; documents: number } {
  let images = 0;
  let documents = 0;
  const pending: unknown[] = [parsed];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object") pending.push(item);
      continue;
    }
    const type = (value as { type?: unknown }).type;
    if (type === "image") images++;
    else if (type === "document") documents++;
    for (const item of Object.values(value)) if (typeof item === "object") pending.push(item);
  }
  return { images, documents };
}

/**
 * The most a Messages call can cost in USD: every input token at the dearest input rate (a one-hour
 * cache write, twice the base) and its max_tokens of output, at the model's price or the table's dearest.
 */
export function worstCaseCostUsd(model: string | undefined, bound: RequestBound): number {
  const price = priceOf(model) ?? DEAREST;
  return bound.inputTokens * perToken(price.input * 2) + bound.outputTokens * perToken(price.output);
}
