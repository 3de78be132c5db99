// Wraps any span exporter so nothing unscrubbed reaches it: span and event names, status message,
// attributes of spans, events and links (strings and string arrays), and resource attributes. Stack
// traces and command lines are dropped outright: raw text we never vouch for.
import type { Attributes, AttributeValue, Link } from "@opentelemetry/api";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import type { ReadableSpan, SpanExporter, TimedEvent } from "@opentelemetry/sdk-trace-base";
import { isSecretFieldName, redactionMarker, type Scrubber } from "./scrub.ts";

// The process resource detector records the command line, and argv can hold a prompt
// (`turnstream run -- PROMPT`) that no pattern recognises as secret.
const DROPPED = new Set(["exception.stacktrace", "process.command_args", "process.command_line"]);

/**
 * Scrubs for one batch: a batch repeats the same keys (and many values: tool names, span names),
 * so each distinct key is scrubbed and judged once, and each distinct value once per key (the key
 * is the value's scrub context).
 */
class BatchScrub {
  readonly #s: Scrubber;
  readonly #keys = new Map<string, { key: string; secret: boolean; values: Map<string, string> }>();
  readonly #names = new Map<string, string>();

  constructor(scrubber: Scrubber) {
    this.#s = scrubber;
  }

  /** Span, event and status texts: context `{ sink: "span" }`. */
  name(text: string): string {
    let out = this.#names.get(text);
    if (out === undefined) {
      out = this.#s.scrub(text, { sink: "span" });
      this.#names.set(text, out);
    }
    return out;
  }

  /** The attributes scrubbed; the very same object when scrubbing changes nothing (most spans). */
  attributes(attrs: Attributes | undefined): Attributes {
    if (attrs === undefined) return {};
    let out: Attributes | undefined;
    for (const rawKey in attrs) {
      if (!Object.hasOwn(attrs, rawKey)) continue;
      const value = attrs[rawKey];
      const drop = value === undefined || DROPPED.has(rawKey);
      let keyEntry = this.#keys.get(rawKey);
      if (keyEntry === undefined) {
        const key = this.name(rawKey);
        keyEntry = { key, secret: isSecretFieldName(key), values: new Map() };
        this.#keys.set(rawKey, keyEntry);
      }
      const safe = drop
        ? undefined
        : typeof value === "number" || typeof value === "boolean"
          ? value
          : this.#value(keyEntry, value!);
      if (out === undefined && (drop || keyEntry.key !== rawKey || safe !== value)) out = copyBefore(attrs, rawKey);
      if (out !== undefined && !drop) out[keyEntry.key] = safe;
    }
    return out ?? attrs;
  }

  #value(
    keyEntry: { key: string; secret: boolean; values: Map<string, string> },
    value: AttributeValue,
  ): AttributeValue {
    if (typeof value === "string") {
      if (value !== "" && keyEntry.secret) return redactionMarker(keyEntry.key);
      let out = keyEntry.values.get(value);
      if (out === undefined) {
        out = this.#s.scrub(value, { sink: "span", field: keyEntry.key });
        keyEntry.values.set(value, out);
      }
      return out;
    }
    if (Array.isArray(value)) {
      const ctx = { sink: "span", field: keyEntry.key };
      const items = value as Array<string | number | boolean | null | undefined>;
      const safe = items.map((v) => (typeof v === "string" ? this.#s.scrub(v, ctx) : v));
      return safe.every((v, i) => v === items[i]) ? value : (safe as AttributeValue);
    }
    return value;
  }
}

/** `items` itself when `redact` changes none of them, else the redacted copies. */
function sameOrCopies<T>(items: readonly T[], redact: (item: T) => T, same: (item: T, safe: T) => boolean): T[] {
  let out: T[] | undefined;
  for (let index = 0; index < items.length; index++) {
    const item = items[index]!;
    const safe = redact(item);
    if (out === undefined && !same(item, safe)) out = items.slice(0, index);
    out?.push(safe);
  }
  return out ?? (items as T[]);
}

/** A copy of the entries of `attrs` that come before `stop` (the first one scrubbing changes). */
function copyBefore(attrs: Attributes, stop: string): Attributes {
  const out: Attributes = {};
  for (const key in attrs) {
    if (key === stop) break;
    if (Object.hasOwn(attrs, key) && attrs[key] !== undefined) out[key] = attrs[key];
  }
  return out;
}

export function scrubAttributes(attrs: Attributes | undefined, scrubber: Scrubber): Attributes {
  return new BatchScrub(scrubber).attributes(attrs);
}

export class RedactingSpanExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #scrubber: Scrubber;
  // Spans of one provider share one resource: scrub it once. Keyed weakly so providers can go away.
  // Re-scrubbed when the scrubber has learnt new secrets since.
  readonly #resources = new WeakMap<Resource, { known: number; safe: Resource }>();
  #known = 0;

  constructor(inner: SpanExporter, scrubber: Scrubber) {
    this.#inner = inner;
    this.#scrubber = scrubber;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    let safe: ReadableSpan[];
    try {
      this.#known = this.#scrubber.size;
      const batch = new BatchScrub(this.#scrubber);
      safe = spans.map((s) => this.#redact(s, batch));
    } catch {
      // Never fall back to the raw spans: fail the batch.
      resultCallback({
        code: ExportResultCode.FAILED,
        error: new Error("span redaction failed; the batch was dropped"),
      });
      return;
    }
    this.#inner.export(safe, resultCallback);
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }

  redact(span: ReadableSpan): ReadableSpan {
    this.#known = this.#scrubber.size;
    return this.#redact(span, new BatchScrub(this.#scrubber));
  }

  // A span that scrubbing leaves unchanged (nearly all of them) goes through as it is: copying
  // every span of a long run was most of the exporter's cost.
  #redact(span: ReadableSpan, batch: BatchScrub): ReadableSpan {
    const name = batch.name(span.name);
    const attributes = batch.attributes(span.attributes);
    const events = sameOrCopies(
      span.events,
      (event): TimedEvent => ({
        time: event.time,
        name: batch.name(event.name),
        attributes: batch.attributes(event.attributes),
        droppedAttributesCount: event.droppedAttributesCount ?? 0,
      }),
      (e, safe) => safe.name === e.name && safe.attributes === e.attributes,
    );
    const links = sameOrCopies(
      span.links,
      (link): Link => ({
        context: link.context,
        attributes: batch.attributes(link.attributes),
        droppedAttributesCount: link.droppedAttributesCount ?? 0,
      }),
      (l, safe) => safe.attributes === l.attributes,
    );
    let changed =
      name !== span.name || attributes !== span.attributes || events !== span.events || links !== span.links;
    const message = span.status.message === undefined ? undefined : batch.name(span.status.message);
    const resource = this.#resource(span.resource);
    if (message !== span.status.message || resource !== span.resource) changed = true;
    if (!changed) return span;
    const status = message === undefined ? { ...span.status } : { ...span.status, message };
    const spanContext = span.spanContext();
    return {
      name,
      kind: span.kind,
      spanContext: () => spanContext,
      parentSpanContext: span.parentSpanContext,
      startTime: span.startTime,
      endTime: span.endTime,
      status,
      attributes,
      links,
      events,
      duration: span.duration,
      ended: span.ended,
      resource,
      instrumentationScope: span.instrumentationScope,
      droppedAttributesCount: span.droppedAttributesCount,
      droppedEventsCount: span.droppedEventsCount,
      droppedLinksCount: span.droppedLinksCount,
    };
  }

  #resource(resource: Resource): Resource {
    const cached = this.#resources.get(resource);
    if (cached !== undefined && cached.known === this.#known) return cached.safe;
    const raw = resource.attributes;
    const attributes = scrubAttributes(raw, this.#scrubber);
    const options = resource.schemaUrl === undefined ? undefined : { schemaUrl: resource.schemaUrl };
    const safe = attributes === raw ? resource : resourceFromAttributes(attributes, options);
    this.#resources.set(resource, { known: this.#known, safe });
    return safe;
  }
}
