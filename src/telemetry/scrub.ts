// The one scrubber every sink uses (logs, spans, errors): known secret values (env, credential
// files, registered), secret-shaped patterns, then the user's hook. Replacement: `[REDACTED:<name>]`.
//
// Speed: the common text contains no secret, so a scrub is one test of a regex alternation of the
// known values plus one combined pre-check regex for the patterns. Only on a hit do we locate every
// occurrence of every value (overlapping ones too) and redact the union of their spans, so a value
// that overlaps or contains another never leaks a remainder.
import { TurnstreamError } from "../kernel/index.ts";
import { readFileSync } from "node:fs";
import { BUILTIN_PATTERNS, combinedPrecheck, type ScrubPattern } from "./patterns.ts";
import { isSecretEnvName, isSecretFieldName, nameWords } from "./secret-names.ts";

export type { ScrubPattern } from "./patterns.ts";
export { BUILTIN_PATTERNS, secretShapeIn } from "./patterns.ts";
export { isSecretEnvName, isSecretFieldName } from "./secret-names.ts";

export interface ScrubContext {
  /** Which sink is asking: "log", "span", "error", … */
  readonly sink?: string;
  /** The field or attribute the text came from, when known. */
  readonly field?: string;
}

export type ScrubHook = (text: string, context: ScrubContext) => string;

export type EnvLike = Readonly<Record<string, string | undefined>>;

export type SecretValues = Readonly<Record<string, string>> | Iterable<readonly [name: string, value: string]>;

export interface ScrubberOptions {
  /** Environment whose secret-looking variables are redacted by value (the worker passes process.env). */
  env?: EnvLike;
  /** Values to redact, by the name that appears in the marker. */
  values?: SecretValues;
  /** Extra patterns, or `false` to drop the built-in ones (default: built-ins). */
  patterns?: readonly ScrubPattern[] | false;
  /** Runs last, on already-scrubbed text. */
  hook?: ScrubHook;
  /** Environment values shorter than this are ignored (default 8) so ordinary words survive. */
  minEnvValueLength?: number;
}

export interface Scrubber {
  scrub(text: string, context?: ScrubContext): string;
  /** A copy of a structured value with every string (and key) scrubbed; secret-named fields redacted whole. */
  scrubDeep<T>(value: T, context?: ScrubContext): T;
  /** Registers one value; throws ScrubberConfigError for values too short to redact safely. */
  addValue(name: string, value: string): this;
  addValues(values: SecretValues): this;
  /** Registers the secret-looking variables of an environment (and passwords inside URL values). */
  addEnv(env: EnvLike): this;
  /**
   * Reads a Claude `.credentials.json`: every token/secret field at any depth. Returns how many values were added (0 if
   * the file is absent).
   */
  addCredentialFile(path: string): number;
  /** A scrubber that knows everything this one knows (now and later) plus the overlay's secrets. */
  child(overlay: EnvLike, options?: { values?: SecretValues; hook?: ScrubHook }): Scrubber;
  withValues(values: SecretValues): Scrubber;
  /** How many distinct secret values are known (own and inherited). */
  readonly size: number;
}

export class ScrubberConfigError extends TurnstreamError {
  readonly secretName: string;
  readonly length: number;
  constructor(secretName: string, length: number) {
    super(
      `secret '${secretName}' is ${length} characters; register values of at least ${MIN_REGISTERED} characters (shorter ones would redact ordinary text)`,
      { code: "scrubber_config" },
    );
    this.secretName = secretName;
    this.length = length;
  }
}

const MIN_REGISTERED = 4;
// Bumped by every registration anywhere: lets a scrubber skip re-checking its ancestors on each call.
let generation = 0;
const BORING = /^(?:true|false|yes|no|on|off|null|none|nil|undefined|enabled|disabled|default)$/i;

export const redactionMarker = (name: string): string => `[REDACTED:${name}]`;

// The forms a value takes in our sinks: raw, inside a JSON string, inside JSON inside JSON (a tool
// result that quotes a file), \u-escaped non-ASCII (Python's json), `\/`, and URL-encoded.
export function valueVariants(value: string): string[] {
  const out = new Set<string>([value]);
  const json1 = JSON.stringify(value).slice(1, -1);
  out.add(json1);
  out.add(JSON.stringify(json1).slice(1, -1));
  const ascii = json1.replace(/[\u0080-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  out.add(ascii);
  out.add(JSON.stringify(ascii).slice(1, -1));
  if (json1.includes("/")) out.add(json1.replaceAll("/", "\\/"));
  try {
    out.add(encodeURIComponent(value));
  } catch {
    // a lone surrogate cannot be URL-encoded, and so cannot appear URL-encoded either
  }
  return [...out];
}

const escapeRegex = (s: string): string => s.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&");

interface Compiled {
  /** Variants longest first, each with the name its marker shows. */
  readonly variants: ReadonlyArray<readonly [variant: string, name: string]>;
  /** False only when the text holds no variant. */
  readonly maybe: ((text: string) => boolean) | null;
}

function compile(values: ReadonlyMap<string, string>): Compiled {
  const byVariant = new Map<string, string>();
  for (const [value, name] of values) {
    for (const variant of valueVariants(value)) if (!byVariant.has(variant)) byVariant.set(variant, name);
  }
  const variants = [...byVariant].sort((a, b) => b[0].length - a[0].length);
  if (variants.length === 0) return { variants, maybe: null };
  const anyVariant = new RegExp(variants.map(([v]) => escapeRegex(v)).join("|"));
  return { variants, maybe: (text) => anyVariant.test(text) };
}

// Whether the backslash at `backslashAt` starts a JSON escape: the run of backslashes ending there is odd.
function startsEscape(text: string, backslashAt: number): boolean {
  let runStart = backslashAt;
  while (runStart > 0 && text.charCodeAt(runStart - 1) === 0x5c) runStart--;
  return (backslashAt - runStart) % 2 === 0;
}

/** [start, end) of the JSON escape (`\n`, `\u00e9`) that `position` lies inside of, if any. */
function escapeAround(text: string, position: number): [number, number] | undefined {
  for (let backslashAt = position - 1; backslashAt >= 0 && backslashAt >= position - 5; backslashAt--) {
    if (text.charCodeAt(backslashAt) !== 0x5c) continue;
    if (!startsEscape(text, backslashAt)) return undefined;
    const end = backslashAt + (text[backslashAt + 1] === "u" ? 6 : 2);
    return end > position ? [backslashAt, end] : undefined;
  }
  return undefined;
}

// A value found in a JSON line must be cut out escape by escape: a value starting with `n` may
// match the `n` of a `\n`, and leaving the backslash before the marker would break the line.
function escapeAligned(text: string, start: number, end: number): [number, number] {
  return [escapeAround(text, start)?.[0] ?? start, escapeAround(text, end)?.[1] ?? end];
}

function redactValues(text: string, compiled: Compiled): string {
  if (compiled.maybe === null || !compiled.maybe(text)) return text;
  const spans: Array<[start: number, end: number, name: string]> = [];
  for (const [variant, name] of compiled.variants) {
    for (let matchAt = text.indexOf(variant); matchAt !== -1; matchAt = text.indexOf(variant, matchAt + 1))
      spans.push([...escapeAligned(text, matchAt, matchAt + variant.length), name]);
  }
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = "";
  let at = 0;
  for (let spanIndex = 0; spanIndex < spans.length;) {
    const [start, , name] = spans[spanIndex]!;
    let end = spans[spanIndex]![1];
    for (spanIndex++; spanIndex < spans.length && spans[spanIndex]![0] < end; spanIndex++)
      end = Math.max(end, spans[spanIndex]![1]);
    out += text.slice(at, start) + redactionMarker(name);
    at = end;
  }
  return out + text.slice(at);
}

function redactPatterns(
  text: string,
  patterns: readonly ScrubPattern[],
  any: ((input: string) => boolean) | null,
): string {
  if (any === null || !any(text)) return text;
  for (const pattern of patterns) {
    if (!pattern.precheck.test(text)) continue;
    const marker = redactionMarker(pattern.name);
    text = text.replace(pattern.regex, (...args: unknown[]) => {
      const groups = args.at(-1);
      const named = typeof groups === "object" && groups !== null ? (groups as Record<string, string | undefined>) : {};
      return (named["keep"] ?? "") + marker + (named["tail"] ?? "");
    });
  }
  return text;
}

function isBoring(value: string, minLength: number): boolean {
  return value.length < minLength || BORING.test(value) || /^(.)\1*$/s.test(value);
}

// `k=v,k2=v2` (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES): the values, decoded.
function listValues(text: string): string[] {
  const out: string[] = [];
  for (const pair of text.split(",")) {
    const eq = pair.indexOf("=");
    if (eq < 0) continue;
    const raw = pair.slice(eq + 1).trim();
    out.push(raw);
    try {
      out.push(decodeURIComponent(raw));
    } catch {
      // not percent-encoded
    }
  }
  return out;
}

function urlPasswords(value: string): string[] {
  if (!value.includes("://") || !value.includes("@")) return [];
  const out: string[] = [];
  for (const match of value.matchAll(/[a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:([^\s/]+)@/gi)) {
    out.push(match[1]!);
    try {
      out.push(decodeURIComponent(match[1]!));
    } catch {
      // not percent-encoded
    }
  }
  return out;
}

class ScrubberImpl implements Scrubber {
  readonly #parent: ScrubberImpl | undefined;
  readonly #own = new Map<string, string>(); // value → name
  readonly #patterns: readonly ScrubPattern[];
  readonly #patternCheck: ((input: string) => boolean) | null;
  readonly #hook: ScrubHook | undefined;
  readonly #minEnv: number;
  #version = 0;
  #compiled: Compiled | undefined;
  #compiledAt = "";
  #compiledGen = -1;

  constructor(
    parent: ScrubberImpl | undefined,
    patterns: readonly ScrubPattern[],
    hook: ScrubHook | undefined,
    minEnv: number,
  ) {
    this.#parent = parent;
    this.#patterns = patterns;
    this.#patternCheck = patterns.length === 0 ? null : combinedPrecheck(patterns);
    this.#hook = hook;
    this.#minEnv = minEnv;
  }

  // A stamp of this scrubber's and its ancestors' versions: a child recompiles when a parent learns more.
  #stamp(): string {
    return this.#parent === undefined ? String(this.#version) : `${this.#parent.#stamp()}.${this.#version}`;
  }

  #all(into: Map<string, string>): Map<string, string> {
    if (this.#parent !== undefined) this.#parent.#all(into);
    for (const [value, name] of this.#own) if (!into.has(value)) into.set(value, name);
    return into;
  }

  #matcher(): Compiled {
    // A child that knows nothing of its own (a run whose overlay holds no secret) scrubs exactly as
    // its parent does: compiling the same values again for every run cost more than its scrubbing.
    if (this.#own.size === 0 && this.#parent !== undefined) return this.#parent.#matcher();
    if (this.#compiled !== undefined && this.#compiledGen === generation) return this.#compiled;
    this.#compiledGen = generation;
    const stamp = this.#stamp();
    if (this.#compiled === undefined || this.#compiledAt !== stamp) {
      this.#compiled = compile(this.#all(new Map()));
      this.#compiledAt = stamp;
    }
    return this.#compiled;
  }

  get size(): number {
    return this.#all(new Map()).size;
  }

  scrub(text: string, context: ScrubContext = {}): string {
    if (typeof text !== "string") return text;
    let out = redactValues(text, this.#matcher());
    out = redactPatterns(out, this.#patterns, this.#patternCheck);
    return this.#hook === undefined ? out : this.#hook(out, context);
  }

  scrubDeep<T>(value: T, context: ScrubContext = {}): T {
    return deep(this, value, context, new WeakMap(), 0) as T;
  }

  #add(name: string, value: string): void {
    if (this.#own.has(value)) return;
    this.#own.set(value, name);
    this.#version++;
    generation++;
  }

  addValue(name: string, value: string): this {
    if (value.length < MIN_REGISTERED) throw new ScrubberConfigError(name, value.length);
    this.#add(name, value);
    return this;
  }

  addValues(values: SecretValues): this {
    const entries =
      Symbol.iterator in values ? (values as Iterable<readonly [string, string]>) : Object.entries(values);
    for (const [name, value] of entries) this.addValue(name, value);
    return this;
  }

  addEnv(env: EnvLike): this {
    for (const [name, value] of Object.entries(env)) {
      if (value === undefined || value === "") continue;
      const candidates: string[] = [];
      if (isSecretEnvName(name)) candidates.push(value);
      if (nameWords(name).at(-1) === "HEADERS") candidates.push(...listValues(value));
      candidates.push(...urlPasswords(value));
      for (const candidate of candidates) if (!isBoring(candidate, this.#minEnv)) this.#add(name, candidate);
    }
    return this;
  }

  addCredentialFile(path: string): number {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
      throw err;
    }
    const found: Array<[string, string]> = [];
    try {
      collectSecretFields(JSON.parse(text), found, 0);
    } catch {
      // Unparseable (half-written?) file: still pick the token fields out of the text.
      for (const match of text.matchAll(/"([A-Za-z_]*(?:[Tt]oken|[Ss]ecret))"\s*:\s*"((?:[^"\\]|\\.)*)"/g)) {
        try {
          found.push([match[1]!, JSON.parse(`"${match[2]!}"`) as string]);
        } catch {
          found.push([match[1]!, match[2]!]);
        }
      }
    }
    let added = 0;
    for (const [name, value] of found) {
      if (value.length < MIN_REGISTERED || this.#own.has(value)) continue;
      this.#add(name, value);
      added++;
    }
    return added;
  }

  child(overlay: EnvLike, options: { values?: SecretValues; hook?: ScrubHook } = {}): Scrubber {
    const parentHook = this.#hook;
    const extra = options.hook;
    const hook: ScrubHook | undefined =
      extra === undefined ? parentHook : parentHook === undefined ? extra : (t, c) => extra(parentHook(t, c), c);
    const childScrubber = new ScrubberImpl(this, this.#patterns, hook, this.#minEnv);
    childScrubber.addEnv(overlay);
    if (options.values !== undefined) childScrubber.addValues(options.values);
    return childScrubber;
  }

  withValues(values: SecretValues): Scrubber {
    return this.child({}, { values });
  }
}

function collectSecretFields(node: unknown, out: Array<[string, string]>, depth: number): void {
  if (depth > 32 || node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if (typeof value === "string") {
      if (isSecretFieldName(key)) out.push([key, value]);
    } else {
      collectSecretFields(value, out, depth + 1);
    }
  }
}

function deep(
  scrubber: Scrubber,
  value: unknown,
  context: ScrubContext,
  seen: WeakMap<object, unknown>,
  depth: number,
): unknown {
  if (typeof value === "string") return scrubber.scrub(value, context);
  if (value === null || typeof value !== "object") return value;
  if (seen.has(value)) return seen.get(value);
  if (depth > 32) return "[Truncated]";
  if (value instanceof Error) {
    const scrubbed = scrubError(value, scrubber);
    seen.set(value, scrubbed);
    return scrubbed;
  }
  if (value instanceof Date || ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (const item of value) out.push(deep(scrubber, item, context, seen, depth + 1));
    return out;
  }
  if (value instanceof Map) {
    const out = new Map<unknown, unknown>();
    seen.set(value, out);
    for (const [mapKey, mapValue] of value)
      out.set(deep(scrubber, mapKey, context, seen, depth + 1), field(scrubber, String(mapKey), mapValue, seen, depth));
    return out;
  }
  if (value instanceof Set) {
    const out = new Set<unknown>();
    seen.set(value, out);
    for (const member of value) out.add(deep(scrubber, member, context, seen, depth + 1));
    return out;
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") return deep(scrubber, toJSON.call(value), context, seen, depth + 1);
  const out: Record<string, unknown> = {};
  seen.set(value, out);
  for (const [key, fieldValue] of Object.entries(value))
    out[scrubber.scrub(key, { ...context, field: key })] = field(scrubber, key, fieldValue, seen, depth);
  return out;
}

function field(
  scrubber: Scrubber,
  key: string,
  value: unknown,
  seen: WeakMap<object, unknown>,
  depth: number,
): unknown {
  // The marker names the field, and a key can itself be a secret: scrub it first.
  if (typeof value === "string" && value !== "" && isSecretFieldName(key)) return redactionMarker(scrubber.scrub(key));
  return deep(scrubber, value, { field: key }, seen, depth + 1);
}

/**
 * A copy of an error safe to hand to a library caller: same prototype (so `instanceof` and the
 * class's getters still work), `name` and non-string fields kept, message, stack, string fields
 * (enumerable or not) and cause scrubbed.
 */
export function scrubError<T>(err: T, scrubber: Scrubber): T extends Error ? T : Error {
  type Scrubbed = T extends Error ? T : Error;
  if (!(err instanceof Error)) return new Error(scrubber.scrub(String(err), { sink: "error" })) as Scrubbed;
  const copy = Object.create(Object.getPrototypeOf(err) as object) as Record<string, unknown>;
  const ctx: ScrubContext = { sink: "error" };
  for (const key of Reflect.ownKeys(err)) {
    const desc = Object.getOwnPropertyDescriptor(err, key)!;
    // V8 installs `stack` as an own accessor bound to the original, so copy values, not accessors.
    const raw: unknown = "value" in desc ? desc.value : Reflect.get(err, key);
    const name = typeof key === "string" ? key : "";
    let value: unknown = raw;
    if (key === "cause" || key === "errors") value = scrubber.scrubDeep(raw, ctx);
    else if (typeof raw === "string") {
      value =
        name !== "message" && name !== "stack" && name !== "name" && raw !== "" && isSecretFieldName(name)
          ? redactionMarker(scrubber.scrub(name))
          : scrubber.scrub(raw, { ...ctx, field: name });
    } else if (desc.enumerable === true) value = scrubber.scrubDeep(raw, { ...ctx, field: name });
    Object.defineProperty(copy, key, {
      value,
      enumerable: desc.enumerable ?? false,
      configurable: desc.configurable ?? true,
      writable: "value" in desc ? (desc.writable ?? true) : true,
    });
  }
  return copy as Scrubbed;
}

/**
 * The scrubber every sink shares: redacts the values of secret-looking env variables, registered values and secret
 * shapes (keys, tokens, JWTs, PEM blocks, URL passwords), also JSON- and URL-escaped.
 */
export function createScrubber(options: ScrubberOptions = {}): Scrubber {
  const patterns = options.patterns === false ? [] : [...BUILTIN_PATTERNS, ...(options.patterns ?? [])];
  for (const pattern of patterns) {
    if (!pattern.regex.global || pattern.precheck.global || pattern.precheck.sticky) {
      throw new TypeError(`scrub pattern '${pattern.name}': regex must have the g flag and precheck must not`);
    }
  }
  const scrubber = new ScrubberImpl(undefined, patterns, options.hook, options.minEnvValueLength ?? 8);
  if (options.env !== undefined) scrubber.addEnv(options.env);
  if (options.values !== undefined) scrubber.addValues(options.values);
  return scrubber;
}
